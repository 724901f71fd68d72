"""The Node client (`editor-clients/typescript`) against the real server: `npm ci` (when needed) and
`npm test` (build + `node --test`), with the sidecar started as `<this python> -m context_assembly serve`.

Node and npm are required, not optional: CI machines have them, so a missing tool fails this test.
`npm ci` needs the npm registry (or a configured mirror); nothing else is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "editor-clients" / "typescript"
TIMEOUT_S = 600


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found is not None, f"`{name}` is not on PATH: the TypeScript client's tests need Node.js 20+ and npm"
    return found


def _run(command: list[str], env: dict[str, str], timeout: float) -> None:
    try:
        done = subprocess.run(command, cwd=PACKAGE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        raise AssertionError(f"{' '.join(command)} did not finish within {timeout:.0f} s\n{output[-20000:]}") from None
    assert done.returncode == 0, f"{' '.join(command)} exited with {done.returncode}\n{done.stdout[-20000:]}"


def _needs_install() -> bool:
    installed = PACKAGE / "node_modules" / ".package-lock.json"  # what npm last installed
    lock = PACKAGE / "package-lock.json"
    return not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime


def test_typescript_client_against_the_server() -> None:
    node, npm = _tool("node"), _tool("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major = int(version.lstrip("v").split(".")[0])
    assert major >= 20, f"the TypeScript client's tests need Node.js 20+, not {version}"
    env = {**os.environ, "CONTEXT_ASSEMBLY_SERVER": f"{sys.executable} -m context_assembly serve",
           "NO_COLOR": "1", "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false"}
    env.pop("NODE_OPTIONS", None)
    if _needs_install():
        _run([npm, "ci"], env, TIMEOUT_S)
    _run([npm, "test"], env, TIMEOUT_S)
