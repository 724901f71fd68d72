"""The VS Code extension (`editor-clients/vscode`): `npm ci` (when needed), `npm test` (copy the schemas,
type-check, bundle with esbuild, then the unit tests under Node's test runner) and `npm run package`
(`vsce package`), then a look inside the `.vsix`.

Node and npm are required, not optional: CI machines have them, so a missing tool fails this test.
`npm ci` needs the npm registry (or a configured mirror); nothing else is downloaded, and no VS Code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "editor-clients" / "vscode"
TIMEOUT_S = 900


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found is not None, f"`{name}` is not on PATH: the VS Code extension's tests need Node.js 20+ and npm"
    return found


def _run(command: list[str], env: dict[str, str], timeout: float) -> str:
    try:
        done = subprocess.run(command, cwd=PACKAGE, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        raise AssertionError(f"{' '.join(command)} did not finish within {timeout:.0f} s\n{output[-20000:]}") from None
    assert done.returncode == 0, f"{' '.join(command)} exited with {done.returncode}\n{done.stdout[-20000:]}"
    return done.stdout


def _needs_install() -> bool:
    installed = PACKAGE / "node_modules" / ".package-lock.json"  # what npm last installed
    lock = PACKAGE / "package-lock.json"
    return not installed.is_file() or installed.stat().st_mtime < lock.stat().st_mtime


def test_vscode_extension_builds_tests_and_packages() -> None:
    node, npm = _tool("node"), _tool("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    major = int(version.lstrip("v").split(".")[0])
    assert major >= 20, f"the VS Code extension's tests need Node.js 20+, not {version}"
    env = {**os.environ, "NO_COLOR": "1", "CI": "1", "npm_config_update_notifier": "false",
           "npm_config_fund": "false", "npm_config_audit": "false"}
    env.pop("NODE_OPTIONS", None)
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    vsix = PACKAGE / f"{manifest['name']}-{manifest['version']}.vsix"
    vsix.unlink(missing_ok=True)

    if _needs_install():
        _run([npm, "ci"], env, TIMEOUT_S)
    _run([npm, "test"], env, TIMEOUT_S)
    _run([npm, "run", "package"], env, TIMEOUT_S)

    assert vsix.is_file(), f"{vsix.name} was not written"
    assert zipfile.is_zipfile(vsix), f"{vsix.name} is not a zip archive"
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        assert {"extension/package.json", "extension/dist/extension.js", "extension.vsixmanifest"} <= names, names
        assert "extension/schemas/settings.schema.json" in names, names
        assert not any(name.startswith(("extension/node_modules/", "extension/src/", "extension/test/"))
                       for name in names), names
        packaged = json.loads(archive.read("extension/package.json"))
    assert packaged["main"] == "./dist/extension.js"
    assert "extensionDependencies" not in packaged
    for entry in packaged["contributes"]["jsonValidation"]:
        assert "extension/" + entry["url"].removeprefix("./") in names, entry
