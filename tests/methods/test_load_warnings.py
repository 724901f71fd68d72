"""A definition file that failed to load is named wherever a request needed it (SPEC §2, §8)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.methods.session import Session
from context_assembly.methods.table import call

from ..workspace.builder import write

REQUEST = {"scope_variables": {}, "input": {"text": "go"}}
ENGINE = ".codebolt/context-rule-engines/broken.json failed to load: "
MEMORY = ".codebolt/PersistentMemory/docs.json failed to load: "


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    write(tmp_path, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "r", "when": [], "then": {"add_memories": ["docs"]}}]})
    write(tmp_path, "context-rule-engines/broken.json", '{"id": "broken", "rules": [\n')
    write(tmp_path, "PersistentMemory/docs.json", '{"id": "docs", \n')
    return tmp_path


@pytest.fixture
def session(workspace: Path) -> Iterator[Session]:
    session = Session(workspace)
    yield session
    session.runtime.close()


def test_evaluate_rules_warns_about_a_broken_engine_file(session: Session) -> None:
    warnings = call(session, "contextAssembly/evaluateRules", REQUEST)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith(ENGINE) and "(line " in warnings[0]
    assert call(session, "contextAssembly/evaluateRules", {**REQUEST, "rule_engine_ids": ["main"]})["warnings"] == []


def test_assemble_names_the_broken_engine_and_memory_files(session: Session) -> None:
    result = call(session, "contextAssembly/assemble", REQUEST)
    contents = [item["content"] for item in result["context"]["warnings"]]
    assert sum(ENGINE in c for c in contents) == 1
    [memory] = [c for c in contents if MEMORY in c]
    assert "no persistent memory" not in memory
    [docs] = [c for c in result["trace"]["memory_calls"] if c["reference"] == "docs"]
    assert docs["error"].startswith(MEMORY)


def test_the_cli_prints_each_once(workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    assert main(["evaluate", "--workspace", str(workspace), "--request", str(request)]) == 0
    assert capsys.readouterr().out.count(ENGINE) == 1
    assert main(["assemble", "--workspace", str(workspace), "--request", str(request), "--json"]) == 0
    out = capsys.readouterr().out
    assert ENGINE in out and MEMORY in out


def test_a_log_event_keeps_its_extra_fields_in_the_payload(session: Session) -> None:
    call(session, "memory/write", {"uri": "log://audit", "value": {"event_type": "login", "user": "u-1",
                                                                 "payload": {"ip": "10.0.0.1", "user": "wins"}}})
    call(session, "memory/write", {"uri": "log://audit", "value": {"event_type": "logout", "user": "u-2"}})
    events = call(session, "memory/read", {"uri": "log://audit"})["value"]
    assert [(e["event_type"], e["payload"]) for e in events] == [
        ("logout", {"user": "u-2"}), ("login", {"user": "wins", "ip": "10.0.0.1"})]
    assert call(session, "memory/read", {"uri": "log://audit?fields=user"})["value"][0]["payload"] == {"user": "u-2"}


@pytest.mark.parametrize("value", ["just text", 3, ["login"], {"payload": {}}, {"event_type": 1}])
def test_a_value_that_is_not_an_event_is_refused_saying_what_an_event_is(session: Session, value: object) -> None:
    from context_assembly.errors import InvalidParamsError

    with pytest.raises(InvalidParamsError) as refused:
        call(session, "memory/write", {"uri": "log://audit", "value": value})
    assert "an event is a JSON object with a string event_type and any other fields" in refused.value.message
    assert refused.value.errors[0]["path"].startswith("/value")
    assert call(session, "memory/read", {"uri": "log://audit"})["value"] == []


def test_a_bad_memory_uri_is_named_once(tmp_path: Path) -> None:
    write(tmp_path, "context-rule-engines/main.json", {"id": "main", "rules": [
        {"id": "r", "when": [], "then": {"add_memories": ["kv://a/../b"]}}]})
    session = Session(tmp_path)
    try:
        result = call(session, "contextAssembly/assemble", REQUEST)
    finally:
        session.runtime.close()
    [warning] = [item["content"] for item in result["context"]["warnings"] if "kv://a/../b" in item["content"]]
    assert warning.count("kv://a/../b") == 1, warning
