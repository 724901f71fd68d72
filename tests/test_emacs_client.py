"""The Emacs client (`editor-clients/emacs`, an Eglot configuration) against the real server.

Runs the real editor in batch mode, `emacs --batch -Q -l editor-clients/emacs/test/driver.el`, with
the sidecar started as `<this python> -m context_assembly serve`, on a copy of examples/quickstart plus
a rule engine with an unknown operator. The driver opens that file (the package's hook starts Eglot),
waits for Flymake diagnostics, asks for completion and hover, calls `context-assembly-evaluate-rules`
and writes what it saw as JSON, which this test checks.

Emacs and Eglot are required, not optional: CI machines install them (`apt-get install emacs-nox
elpa-eglot` on Debian 12; Emacs 29+ has Eglot built in), so a missing editor fails this test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent.parent / "editor-clients" / "emacs"
DRIVER = PACKAGE / "test" / "driver.el"
REQUEST = Path(__file__).resolve().parent.parent / "examples" / "quickstart" / "request.json"
INSTALL_HINT = "install Emacs and Eglot: `apt-get install emacs-nox elpa-eglot` (Debian 12), or Emacs 29+"
WAIT_S = 30  # for the server to start and for diagnostics, inside Emacs
TIMEOUT_S = 180  # for the whole Emacs run

RULES = """{
  "id": "emacs-test",
  "name": "Emacs client test rules",
  "enabled": true,
  "rules": [
    {
      "id": "bad-operator",
      "when": [
        { "field": "scope.agent.agent_name", "operator": "equal", "value": "code-agent" },
        { "field": "addVar.phase", "operator": "eq", "value": "planning" }
      ],
      "then": { "add_memories": ["architecture-docs"] }
    },
    {
      "id": "false-and-null",
      "when": [
        { "field": "addVar.dry_run", "operator": "eq", "value": false },
        { "field": "addVar.reviewer", "operator": "not_exists" }
      ],
      "then": { "add_memories": ["user-preferences"] }
    }
  ]
}
"""


def _emacs() -> str:
    found = shutil.which("emacs")
    assert found is not None, f"`emacs` is not on PATH: the Emacs client's test needs it; {INSTALL_HINT}"
    return found


def _run_driver(workspace: Path, tmp_path: Path) -> dict[str, Any]:
    rule_file = workspace / ".codebolt" / "context-rule-engines" / "emacs-test.json"
    rule_file.write_text(RULES, encoding="utf-8")
    request = json.loads(REQUEST.read_text(encoding="utf-8"))
    request["additional_variables"].update({"dry_run": False, "reviewer": None, "extra": {}})
    request2 = tmp_path / "request-false-null.json"
    request2.write_text(json.dumps(request, indent=2), encoding="utf-8")
    output = tmp_path / "emacs-results.json"
    home = tmp_path / "home"  # no user init, no ~/.emacs.d state from the machine
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "CA_TEST_SERVER": json.dumps([sys.executable, "-m", "context_assembly", "serve"]),
        "CA_TEST_FILE": str(rule_file),
        "CA_TEST_YAML": str(workspace / ".codebolt" / "ContextRuleEngine" / "02_security.yaml"),
        "CA_TEST_REQUEST": str(REQUEST),
        "CA_TEST_REQUEST2": str(request2),
        "CA_TEST_OUTPUT": str(output),
        "CA_TEST_TIMEOUT": str(WAIT_S),
    }
    command = [_emacs(), "--batch", "-Q", "-l", str(DRIVER)]
    process = subprocess.Popen(command, cwd=workspace, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # Emacs and the server it started
        log, _ = process.communicate()
        raise AssertionError(f"Emacs did not finish within {TIMEOUT_S} s\n{log[-20000:]}") from None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert output.is_file(), (f"Emacs exited with {process.returncode} without writing results; {INSTALL_HINT}\n"
                              f"{log[-20000:]}")
    results: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    if "error" in results:
        hint = f"\n{INSTALL_HINT}" if "eglot" in results["error"].lower() else ""
        raise AssertionError(f"the Emacs driver failed at step {results['steps'][-1]!r}: {results['error']}{hint}\n"
                             f"results so far: {json.dumps(results, indent=2)}\n{log[-20000:]}")
    results["log"] = log
    return results


def test_emacs_eglot_client_against_the_server(example_copy: Path, tmp_path: Path) -> None:
    # inside a git repository, as most workspaces are: Eglot's version-control project won over
    # `.codebolt/` while it connected, and the first file opened was never managed
    subprocess.run(["git", "init", "-q", str(example_copy.parent)], check=True, capture_output=True)
    results = _run_driver(example_copy, tmp_path)
    context = f"Emacs {results['emacs_version']}, Eglot {results['eglot_version']}\n{results['log'][-5000:]}"

    # The package's mode, server and project root.
    assert results["major_mode"] == "context-assembly-json-mode", context
    assert results["server_is_ours"] is True, context
    assert Path(results["project_root"]).resolve() == example_copy.resolve(), context
    assert results["server_command"][1:] == ["-m", "context_assembly", "serve"], context

    # Settings answered to the server's workspace/configuration request for section contextAssembly.
    assert results["configuration_answer"] is not None, context
    assert json.loads(results["configuration_answer"]) == [{"pipeline_timeout_ms": 20000, "snapshots": False}]

    # (a) a Flymake diagnostic on the unknown operator, with its range on the word.
    bad = [d for d in results["diagnostics"] if "equal" in d["message"]]
    assert bad, f"no diagnostic about 'equal': {results['diagnostics']}\n{context}"
    assert bad[0]["type"] in {"eglot-error", ":error", "error"}, bad
    assert "equal" in bad[0]["text"] and bad[0]["line"] == 9, bad

    # (b) completion inside "scope.agent.
    assert "scope.agent.agent_name" in results["completion_labels"], results["completion_labels"]

    # (c) hover on an operator: the registry's description of `eq`.
    hover = results["hover"]
    assert isinstance(hover, str) and "strictly equals" in hover, hover

    # (d) contextAssembly/evaluateRules through the package's command.
    assert "architecture-docs" in results["evaluate_matched"], results["evaluate_matched"]
    assert "user-preferences" not in results["evaluate_matched"], results["evaluate_matched"]

    assert "matched_memories" in results["shown"] and "architecture-docs" in results["shown"], results["shown"]

    # false, null and {} reach the server unchanged, and false comes back as false.
    sent = json.loads((tmp_path / "request-false-null.json").read_text(encoding="utf-8"))
    assert json.loads(results["wire_request"]) == sent
    assert "user-preferences" in results["evaluate2_matched"], results["evaluate2_matched"]
    conditions = {c["field"]: c for c in results["evaluate2_conditions"]}
    assert conditions["addVar.dry_run"] == {"field": "addVar.dry_run", "actual_is_false": True, "result": True}
    assert conditions["addVar.reviewer"]["result"] is True

    # YAML definition files share the workspace's server.
    assert results["yaml_mode"] == "context-assembly-yaml-mode", context
    assert results["yaml_same_server"] is True, context

    assert results["server_exited"] is True, context
    assert results["ok"] is True
