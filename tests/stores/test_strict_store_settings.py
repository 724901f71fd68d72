"""The `stores` settings refuse unknown keys: a typo (`"dns"` for `"dsn"`) is a diagnostic in the
editor, an error at start naming the key's path, and a clear error on every store call — never a
silent fall-back to the embedded stores, which would split a swarm's memory."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.editor.diagnostics import document_diagnostics
from context_assembly.editor.documents import build_document, overlay
from context_assembly.errors import StorageError
from context_assembly.runtime import Runtime
from context_assembly.workspace.loader import load_workspace
from context_assembly.workspace.settings import load_settings, store_problems

TYPO = {"stores": {"backend": "postgres", "dns": "postgresql://agent@db/memory"}}
PREFS = {"id": "prefs", "label": "Preferences", "description": "d", "status": "active",
         "retrieval": {"pipeline": [{"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["ada"]}]},
         "contribution": {"section": "constraints", "priority": "high", "max_items": 10}}


def workspace(root: Path, settings: object) -> Path:
    (root / ".codebolt" / "PersistentMemory").mkdir(parents=True)
    (root / ".codebolt" / "context-assembly.json").write_text(json.dumps(settings))
    (root / ".codebolt" / "PersistentMemory" / "prefs.json").write_text(json.dumps(PREFS))
    return root


@pytest.mark.parametrize(("stores", "expected"), [
    ({"backend": "postgres", "dns": "x"}, ["/stores/dns: unknown key (did you mean 'dsn'?)"]),
    ({"projct": "p", "zzz": 1}, ["/stores/projct: unknown key (did you mean 'project'?)",
                                 "/stores/zzz: unknown key (allowed: backend, dsn, project, invalidation, ef_search)"]),
    ({"backend": "mysql"}, ["/stores/backend: 'mysql' is not a known store backend; expected one of: embedded, "
                            "postgres"]),
    ({"invalidation": "push"}, ["/stores/invalidation: 'push' is not a known cache invalidation; expected one "
                                "of: notify, read"]),
    ("postgres", ["/stores: expected an object, got string"]),
    ({"backend": "postgres", "dsn": "postgresql://x@/y", "project": "p", "invalidation": "read"}, []),
])
def test_every_problem_under_stores_is_named_by_its_key_path(tmp_path: Path, stores: object,
                                                             expected: list[str]) -> None:
    path = workspace(tmp_path, {"cache_ttl_s": 5, "stores": stores}) / ".codebolt" / "context-assembly.json"
    assert store_problems(load_settings(path)[1]) == expected


def test_other_settings_problems_do_not_refuse_the_stores(tmp_path: Path) -> None:
    path = workspace(tmp_path, {"tokenizer": "words", "budget": {"nope": 1}}) / ".codebolt" / "context-assembly.json"
    settings, problems = load_settings(path)
    assert problems and store_problems(problems) == []
    runtime = Runtime(tmp_path)
    try:
        runtime.memory.write("kv://users/ada", "fine")
        assert runtime.memory.read("kv://users/ada")["value"] == "fine"
    finally:
        runtime.close()


def test_a_typo_is_an_error_at_start_and_on_every_store_call_and_nothing_is_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = workspace(tmp_path, TYPO)
    with caplog.at_level(logging.ERROR):
        runtime = Runtime(root)
    assert [r.getMessage() for r in caplog.records if "/stores/dns" in r.getMessage()]
    try:
        for call in (lambda: runtime.memory.read("kv://users/ada"), lambda: runtime.memory.write("kv://a", 1),
                     lambda: runtime.memory.write("vector://c/d", "text"), lambda: runtime.memory.list("log://")):
            with pytest.raises(StorageError, match=r"/stores/dns: unknown key \(did you mean 'dsn'\?\)"):
                call()
        assert runtime.memory.read("markdown://absent")["exists"] is False  # notes stay in the checkout
        result = runtime.assemble({"scope_variables": {}, "input": {"text": "t"}, "explicit_memory": ["prefs"]})
        assert [c.status for c in result.trace.memory_calls] == ["failed"]
        assert "/stores/dns" in json.dumps(result.context["warnings"], default=str)
    finally:
        runtime.close()
    assert not (root / ".codebolt" / "db").exists()  # no embedded database was made behind the user's back


@pytest.mark.parametrize("command", [["memory", "read", "kv://users/ada"], ["memory", "write", "kv://k", "1"],
                                     ["memory", "export", "-"], ["db", "migrate"]])
def test_every_cli_command_fails_with_the_key_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   command: list[str]) -> None:
    root = workspace(tmp_path, TYPO)
    assert main([*command, "--workspace", str(root)]) == 1
    assert "/stores/dns: unknown key (did you mean 'dsn'?)" in capsys.readouterr().err


def test_the_editor_shows_the_unknown_key(tmp_path: Path) -> None:
    root = workspace(tmp_path, {}).resolve()
    text = json.dumps(TYPO, indent=2)
    doc = build_document((root / ".codebolt" / "context-assembly.json").as_uri(), text, 1, root)
    assert doc is not None
    found = document_diagnostics(doc, overlay(load_workspace(root), [doc]), "utf-16")
    assert [(d["code"], d["severity"]) for d in found] == [("schema", 1)]
    assert "unknown property 'dns'" in found[0]["message"] and "dsn" in found[0]["message"]
