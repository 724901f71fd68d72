"""The VS Code extension in the real VS Code: code-server (VS Code 1.100.3's own server and web
workbench, from the npm registry) with the packaged `.vsix` installed, driven by Debian's headless
Chromium (`editor-clients/vscode/e2e/e2e.mjs`). In a window of two projects it opens a rule engine,
waits for the server's code lens, types an unknown operator and expects the server's diagnostic in
the editor and the Problems panel, its hover, the operators in completion, and the diagnostic gone
once fixed; then that the second project has its own server (its files checked against its own
memories, its code lens run there), that a changed server command restarts both without an error
(also when a second change comes while the first restart starts), that a server never answering
`initialize` is reported after the start timeout and its processes (a wrapper's children too)
ended, that both servers come back, and that removing a folder stops its project's server.

Everything it needs is required, not optional (CI installs it): a missing piece fails the test. The
first run installs code-server into the user's cache folder (~1 min); screenshots and logs of each
run are in the test's temporary folder, named in the failure message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .npm_package import NpmPackage

EXTENSION = Path(__file__).resolve().parent.parent / "editor-clients" / "vscode"
E2E = EXTENSION / "e2e"
SETUP_TIMEOUT_S = 900
RUN_TIMEOUT_S = 300


def _stale(vsix: Path) -> bool:
    """Missing, or older than a source of the extension (a left-over package would test old code)."""
    if not vsix.is_file():
        return True
    sources = [EXTENSION / "package.json", *(EXTENSION / "src").glob("*.ts")]
    return max(source.stat().st_mtime for source in sources) > vsix.stat().st_mtime


def _vsix() -> Path:
    """The packaged extension (test_vscode_extension.py makes it too; made here when missing or stale)."""
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    vsix = EXTENSION / f"{manifest['name']}-{manifest['version']}.vsix"
    if _stale(vsix):
        package = NpmPackage(EXTENSION, "the VS Code extension", SETUP_TIMEOUT_S, CI="1")
        package.install()
        package.run("run", "build")
        package.run("run", "package")
    assert vsix.is_file(), f"{vsix.name} was not written"
    return vsix


def _code_server() -> str:
    done = subprocess.run(["bash", str(E2E / "setup-code-server.sh")], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=SETUP_TIMEOUT_S)
    assert done.returncode == 0, f"installing code-server failed ({done.returncode}):\n{done.stderr[-10000:]}"
    return done.stdout.strip().splitlines()[-1]


def test_the_extension_in_vs_code_serves_each_project_and_survives_restarts_and_hung_servers(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium is not None, "Debian's chromium is needed (.ci/run installs it)"
    server = Path(sys.executable).with_name("context-assembly")
    assert server.is_file(), f"{server} is not installed (pip install -e .)"
    NpmPackage(E2E, "the VS Code end-to-end driver", SETUP_TIMEOUT_S).install()
    env = {**os.environ, "CODE_SERVER": _code_server(), "VSIX": str(_vsix()), "CA_SERVER": str(server),
           "CHROMIUM": chromium, "OUT": str(tmp_path / "run"), "TIMEOUT_S": str(RUN_TIMEOUT_S - 30)}
    done = subprocess.run(["node", str(E2E / "e2e.mjs")], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"e2e.mjs exited {done.returncode} (screenshots and logs in {tmp_path / 'run'}):\n" \
                                 f"{output[-8000:]}"
    for check in ("diagnostic", "Problems", "hover", "completion", "second project", "one server per project",
                  "code lens of the second project", "restarts both servers", "change during a start",
                  "start timeout", "processes are ended", "brings both servers", "removing a folder"):
        assert any(line for line in output.splitlines() if "PASS" in line and check.lower() in line.lower()), \
            f"no passing check about {check}:\n{output[-4000:]}"
