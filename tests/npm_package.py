"""Running an npm package's own scripts from pytest (the TypeScript client, the VS Code extension).

Node 20+ and npm are required, not optional: CI machines have them, so a missing tool fails the
test that needs it instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class NpmPackage:
    def __init__(self, folder: Path, what: str, timeout_s: float, **env: str) -> None:
        self.folder = folder
        self.what = what  # for messages: "the TypeScript client"
        self.timeout_s = timeout_s
        self.node, self.npm = self._tool("node"), self._tool("npm")
        version = subprocess.run([self.node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
        assert int(version.lstrip("v").split(".")[0]) >= 20, f"{what}'s tests need Node.js 20+, not {version}"
        self.env = {**os.environ, "NO_COLOR": "1", "npm_config_update_notifier": "false",
                    "npm_config_fund": "false", "npm_config_audit": "false", **env}
        self.env.pop("NODE_OPTIONS", None)

    def _tool(self, name: str) -> str:
        found = shutil.which(name)
        assert found is not None, f"`{name}` is not on PATH: {self.what}'s tests need Node.js 20+ and npm"
        return found

    def run(self, *args: str) -> str:
        """`npm ARGS` in the package folder; fails the test with the output's tail on any error."""
        command = [self.npm, *args]
        try:
            done = subprocess.run(command, cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=self.timeout_s)
        except subprocess.TimeoutExpired as exc:
            output = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
            raise AssertionError(f"npm {' '.join(args)} did not finish within {self.timeout_s:.0f} s\n"
                                 f"{output[-20000:]}") from None
        assert done.returncode == 0, f"npm {' '.join(args)} exited with {done.returncode}\n{done.stdout[-20000:]}"
        return done.stdout

    def install(self) -> None:
        """`npm ci` unless node_modules is already what the lockfile says."""
        installed = self.folder / "node_modules" / ".package-lock.json"  # what npm last installed
        lock = self.folder / "package-lock.json"
        if not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime:
            self.run("ci")
