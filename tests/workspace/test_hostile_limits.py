"""Every limit of `context_assembly.limits`, at its edge and just past it: the value at the limit is
served, one past it is refused with a clear -32602 (InvalidParamsError) naming the limit, or, for a
file on disk, reported and skipped, and the assembly says so. Malformed definitions on disk never
break workspace-wide answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.editor.completion import complete
from context_assembly.editor.documents import build_document
from context_assembly.errors import InvalidParamsError
from context_assembly.limits import LIMITS, SEARCH_TOP_K, LimitSpec
from context_assembly.methods import Session, call
from context_assembly.methods.session import SharedRuntimes
from context_assembly.schemas.validate import built_schema
from context_assembly.workspace.loader import load_workspace

from ..lsp.support import REPO, REQUEST
from .builder import write

ENGINES = ".codebolt/context-rule-engines"


def rule(rule_id: str, condition: Any = None) -> dict[str, Any]:
    return {"id": rule_id, "when": [condition or {"field": "addVar.phase", "operator": "eq", "value": rule_id}],
            "then": {"add_memories": ["architecture-docs"]}}


def engine(engine_id: str, count: int, **extra: Any) -> dict[str, Any]:
    return {"id": engine_id, "name": engine_id, "enabled": True, "rules": [rule(f"r{i}") for i in range(count)],
            **extra}


@pytest.fixture
def session(example_copy: Path) -> Any:
    opened = Session(example_copy)
    yield opened
    opened.close()


def refused(session: Session, method: str, params: Any) -> str:
    with pytest.raises(InvalidParamsError) as caught:
        call(session, method, params)
    return caught.value.message


def settings_file(root: Path, **limits: int) -> None:
    write(root, "context-assembly.json", {"limits": limits})


def padded_to(document: dict[str, Any], size: int) -> str:
    text = json.dumps(document)
    document = {**document, "description": "x" * (size - len(text) - len(', "description": ""'))}
    text = json.dumps(document)
    assert len(text) == size
    return text


# -- definition files ------------------------------------------------------------------------------


def test_a_definition_file_at_the_size_limit_loads_one_byte_more_is_reported(session: Session) -> None:
    root = session.root
    settings_file(root, definition_file_bytes=4096)
    (root / ENGINES / "at.json").write_text(padded_to(engine("at", 1), 4096))
    (root / ENGINES / "past.json").write_text(padded_to(engine("past", 1), 4097))
    workspace = session.workspace()
    assert "at" in workspace.engines and "past" not in workspace.engines
    [problem] = [p for p in workspace.problems if p.file and p.file.endswith("past.json")]
    assert problem.code == "limits" and "4097 bytes; at most 4096 (limits.definition_file_bytes)" in problem.message
    warnings = [w["content"] for w in call(session, "contextAssembly/assemble", REQUEST)["context"]["warnings"]]
    assert any("past.json failed to load" in w for w in warnings)


def test_create_past_the_definition_file_size_is_refused(session: Session) -> None:
    session.set_settings({"limits": {"definition_file_bytes": 2048}})
    message = refused(session, "contextRuleEngine/create", engine("big", 20))
    assert "limits.definition_file_bytes" in message
    assert not (session.root / ENGINES / "big.json").exists()


def test_rules_per_engine_at_the_limit_load_one_more_is_reported(session: Session) -> None:
    root = session.root
    settings_file(root, rules_per_engine=3)
    write(root, "context-rule-engines/three.json", engine("three", 3))
    write(root, "context-rule-engines/four.json", engine("four", 4))
    workspace = session.workspace()
    assert "three" in workspace.engines and "four" not in workspace.engines
    assert any("4 rules; at most 3 (limits.rules_per_engine)" in p.message for p in workspace.problems)


def test_create_and_add_rule_past_rules_per_engine_are_refused(session: Session) -> None:
    session.set_settings({"limits": {"rules_per_engine": 3}})
    assert call(session, "contextRuleEngine/create", engine("three", 3))["id"] == "three"
    assert "limits.rules_per_engine" in refused(session, "contextRuleEngine/addRule",
                                                {"engine_id": "three", "rule": rule("r3")})
    assert "limits.rules_per_engine" in refused(session, "contextRuleEngine/create", engine("four", 4))
    assert len(call(session, "contextRuleEngine/get", {"id": "three"})["rules"]) == 3


# -- nesting ---------------------------------------------------------------------------------------


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_params_at_the_nesting_limit_are_served_one_level_more_is_refused(session: Session) -> None:
    depth = session.limits().nesting_depth
    # the params object is one level, the value's lists the others
    assert call(session, "memory/write", {"uri": "kv://deep/at", "value": nested(depth - 1)})["written"]
    message = refused(session, "memory/write", {"uri": "kv://deep/past", "value": nested(depth)})
    assert f"more than {depth} levels, limits.nesting_depth" in message


def test_nesting_depth_at_most_512_and_a_huge_setting_is_refused_not_honoured(session: Session) -> None:
    """2**31 - 1 was allowed, and the first request then built a list that deep to probe orjson's
    own limit (memory grew until the process died). The limit is at most 512, as in definition
    files; a larger setting is refused by the schema and the default holds."""
    session.set_settings({"limits": {"nesting_depth": 2**31 - 1}})
    assert session.limits().nesting_depth == 128
    assert call(session, "memory/write", {"uri": "kv://deep/ok", "value": nested(100)})["written"]
    session.set_settings({"limits": {"nesting_depth": 512}})
    assert session.limits().nesting_depth == 512
    assert "more than 512 levels" in refused(session, "memory/write", {"uri": "kv://deep/no", "value": nested(512)})
    # within the limit, past what the stores write: said so, not "not JSON"
    assert refused(session, "memory/write", {"uri": "kv://deep/no", "value": nested(300)}) == \
        "the value is nested too deeply to store (more than 254 levels)"


def test_params_within_a_nesting_limit_past_the_schemas_own_are_still_checked_by_the_schema(
        session: Session) -> None:
    # the params' depth is walked once, by `call`; the schema check trusts that walk only when its
    # own limit (256 levels) is at least the session's
    session.set_settings({"limits": {"nesting_depth": 400}})
    deep = {**REQUEST, "additional_variables": {"x": nested(300)}}
    answer = call(session, "contextAssembly/validate", deep)
    assert answer["valid"] is False
    assert answer["errors"] == [{"path": "", "message": "the document is nested more than 256 levels deep"}]
    with pytest.raises(InvalidParamsError) as refusal:
        call(session, "contextAssembly/evaluateRules", deep)
    assert refusal.value.errors == answer["errors"]
    shallow = {**REQUEST, "additional_variables": {"x": nested(200)}}
    assert call(session, "contextAssembly/validate", shallow)["valid"] is True


def test_not_nested_900_deep_is_invalid_params_and_the_file_on_disk_is_reported(session: Session) -> None:
    condition: Any = {"field": "input.text", "operator": "eq", "value": "x"}
    for _ in range(900):
        condition = {"not": condition}
    deep = {**engine("deep", 0), "rules": [rule("r", condition)]}
    assert "limits.nesting_depth" in refused(session, "contextRuleEngine/create", deep)
    assert "limits.nesting_depth" in refused(session, "contextRuleEngine/validate", deep)
    (session.root / ENGINES / "deep.json").write_text(json.dumps(deep))
    warnings = [w["content"] for w in call(session, "contextAssembly/assemble", REQUEST)["context"]["warnings"]]
    assert any("deep.json failed to load: nested too deeply" in w for w in warnings)


# -- values written --------------------------------------------------------------------------------


def test_a_value_at_the_write_limit_is_stored_one_byte_more_is_refused(session: Session) -> None:
    session.set_settings({"limits": {"write_value_bytes": 1024}})
    assert call(session, "memory/write", {"uri": "kv://v/at", "value": "x" * 1022})["written"]  # 1,024 with quotes
    message = refused(session, "memory/write", {"uri": "kv://v/past", "value": "x" * 1023})
    assert "1025 bytes; at most 1024 (limits.write_value_bytes)" in message
    assert call(session, "memory/read", {"uri": "kv://v/past"})["exists"] is False


def test_the_write_limit_holds_for_what_an_ingestion_writes_too(session: Session) -> None:
    """memory/write refused a value over the limit, and memory/event wrote it through a route."""
    session.set_settings({"limits": {"write_value_bytes": 1024}})
    pipelines = session.root / ".codebolt" / "MemoryIngestion"
    pipelines.mkdir(parents=True, exist_ok=True)
    (pipelines / "big.json").write_text(json.dumps({
        "id": "big", "label": "big", "status": "active", "trigger": "onAction", "processors": [],
        "routing": [{"from": "payload.text", "write_to": "kv://v/{{payload.n}}"}]}))
    result = call(session, "memory/event", {"trigger": "onAction", "payload": {"text": "x" * 5000, "n": "big"}})
    [run] = [e for e in result["executions"] if e["pipeline_id"] == "big"]
    assert run["status"] == "failed"
    assert "at most 1024 (limits.write_value_bytes)" in run["routes"][0]["errors"][0]["message"]
    assert call(session, "memory/read", {"uri": "kv://v/big"})["exists"] is False
    small = call(session, "memory/event", {"trigger": "onAction", "payload": {"text": "x" * 100, "n": "small"}})
    assert [e["status"] for e in small["executions"] if e["pipeline_id"] == "big"] == ["ok"]


# -- graph and search ------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "ok"), [(10_000, True), (10_001, False), (-1, False), (10**20, False),
                                           (2**63, False)])
def test_graph_view_limit_parameter(session: Session, limit: int, ok: bool) -> None:
    params = {"uri": f"graph://dependents?name=auth&limit={limit}"}
    if ok:
        assert call(session, "memory/read", params)["exists"] is True
        return
    with pytest.raises(InvalidParamsError) as caught:
        call(session, "memory/read", params)
    [error] = caught.value.data["errors"]
    assert error["path"] == "/params/limit"
    assert "out of range" in error["message"] and "limits.graph_view_rows" in error["message"]


@pytest.mark.parametrize("limit", [-1, 10**20])
def test_a_graph_view_step_past_its_limit_fails_its_memory_with_a_clear_reason(session: Session, limit: int) -> None:
    write(session.root, "PersistentMemory/gv.json", {
        "id": "gv", "label": "Graph", "status": "active", "retrieval": {"pipeline": [
            {"type": "graph_view_read", "view": "dependents", "params": {"name": "auth", "limit": limit}}]}})
    result = call(session, "contextAssembly/assemble", {**REQUEST, "explicit_memory": ["gv"]})
    [gv] = [c for c in result["trace"]["memory_calls"] if c["reference"] == "gv"]
    assert gv["status"] == "failed"
    assert f"bad parameters for graph view 'dependents': {limit} is out of range" in gv["error"]
    assert "limits.graph_view_rows" in gv["error"]


def test_search_top_k_at_the_limit_and_past_it(session: Session) -> None:
    found = call(session, "memory/read", {"uri": f"vector://docs?q=auth&top_k={SEARCH_TOP_K}"})
    assert found["exists"] is True
    with pytest.raises(InvalidParamsError) as caught:
        call(session, "memory/read", {"uri": f"vector://docs?q=auth&top_k={SEARCH_TOP_K + 1}"})
    assert "limits.search_top_k" in str(caught.value.data)


# -- graph, search and log limits set in the settings file ---------------------------------------


def graph_with_fan_out(session: Session, fan_out: int, depth: int) -> None:
    """Node `hub` with `fan_out` children, each the head of a chain `depth` long, and a view naming hub."""
    call(session, "memory/write", {"uri": "graph://default/node/hub", "value": {"kind": "module", "name": "hub"}})
    for child in range(fan_out):
        previous = "hub"
        for level in range(depth):
            node = f"n{child}-{level}"
            call(session, "memory/write", {"uri": f"graph://default/node/{node}", "value": {"kind": "module"}})
            call(session, "memory/write", {"uri": f"graph://default/edge/{previous}-{node}",
                                           "value": {"kind": "USES", "from": previous, "to": node}})
            previous = node
    write(session.root, "knowledgegraph/views/hub.json", {
        "id": "hub", "cypher": "MATCH (n:Entity {name: 'hub'}) RETURN n.id AS id, n.name AS name LIMIT 1"})


def expand(session: Session, **step: int) -> dict[str, Any]:
    write(session.root, "PersistentMemory/expand.json", {
        "id": "expand", "status": "active", "retrieval": {"pipeline": [
            {"type": "graph_view_read", "view": "hub"}, {"type": "graph_neighbor_expand", **step}]}})
    return call(session, "persistentMemory/execute", {"id": "expand", "request": REQUEST})


def test_graph_limit_and_depth_from_the_settings_file_at_and_past_the_edge(session: Session) -> None:
    settings_file(session.root, graph_limit=3, graph_depth=2)
    graph_with_fan_out(session, fan_out=4, depth=3)
    at = expand(session, limit=3, depth=2)
    assert at["status"] == "ok" and len(at["items"]) == 1 + 3
    past = expand(session, limit=4, depth=1)
    assert past["status"] == "failed" and "limits.graph_limit" in json.dumps(past)
    deep = expand(session, limit=3, depth=3)
    assert deep["status"] == "failed" and "limits.graph_depth" in json.dumps(deep)


def test_graph_view_rows_from_the_settings_file(session: Session) -> None:
    settings_file(session.root, graph_view_rows=5)
    assert call(session, "memory/read", {"uri": "graph://dependents?name=auth&limit=5"})["exists"] is True
    with pytest.raises(InvalidParamsError) as caught:
        call(session, "memory/read", {"uri": "graph://dependents?name=auth&limit=6"})
    [error] = caught.value.data["errors"]
    assert "from 0 to 5 (limits.graph_view_rows)" in error["message"]


def test_search_top_k_from_the_settings_file(session: Session) -> None:
    settings_file(session.root, search_top_k=7)
    assert call(session, "memory/read", {"uri": "vector://docs?q=auth&top_k=7"})["exists"] is True
    with pytest.raises(InvalidParamsError) as caught:
        call(session, "memory/read", {"uri": "vector://docs?q=auth&top_k=8"})
    assert "from 0 to 7 (limits.search_top_k)" in str(caught.value.data)


def test_a_pipeline_of_an_assembly_runs_under_the_workspace_limits(session: Session) -> None:
    """The executor's threads see the settings' limits: architecture-docs searches with topK 8."""
    settings_file(session.root, search_top_k=7)
    warnings = [w["content"] for w in call(session, "contextAssembly/assemble", REQUEST)["context"]["warnings"]]
    assert any("architecture-docs" in w and "limits.search_top_k" in w for w in warnings)
    settings_file(session.root, search_top_k=8)
    warnings = [w["content"] for w in call(session, "contextAssembly/assemble", REQUEST)["context"]["warnings"]]
    assert not any("limits.search_top_k" in w for w in warnings)


def test_log_limit_from_the_settings_file_for_event_log_and_episodic_reads(session: Session) -> None:
    settings_file(session.root, log_limit=4)
    for n in range(6):
        call(session, "memory/write", {"uri": "log://ops", "value": {"event_type": "e", "payload": {"n": n}}})
    assert len(call(session, "memory/read", {"uri": "log://ops?limit=4"})["value"]) == 4
    assert len(call(session, "memory/read", {"uri": "episodic://t1?limit=4"})["value"]) == 0
    for uri in ("log://ops?limit=5", "episodic://t1?limit=5"):
        with pytest.raises(InvalidParamsError) as caught:
            call(session, "memory/read", {"uri": uri})
        assert "between 1 and 4 (got 5; limits.log_limit)" in caught.value.message


def test_a_client_override_holds_for_its_own_session_only(example_copy: Path) -> None:
    """Sessions share the stores; each call is checked against its own session's limits."""
    runtimes = SharedRuntimes()
    strict, default = Session(example_copy, runtimes=runtimes), Session(example_copy, runtimes=runtimes)
    try:
        assert strict.runtime is default.runtime
        assert strict.set_settings({"limits": {"search_top_k": 2}}) == []
        assert call(default, "memory/read", {"uri": "vector://docs?q=auth&top_k=3"})["exists"] is True
        with pytest.raises(InvalidParamsError):
            call(strict, "memory/read", {"uri": "vector://docs?q=auth&top_k=3"})
        assert call(strict, "memory/read", {"uri": "vector://docs?q=auth&top_k=2"})["exists"] is True
    finally:
        strict.close()
        default.close()


@pytest.mark.parametrize("spec", [spec for spec in LIMITS if spec.settable], ids=lambda spec: spec.name)
def test_every_settable_limit_is_in_the_schema_completed_and_checked(example_copy: Path, spec: LimitSpec) -> None:
    schema = built_schema("settings")["properties"]["limits"]["properties"][spec.name]
    assert (schema["minimum"], schema["maximum"], schema["default"]) == (spec.minimum, spec.maximum, spec.default)
    text = '{"limits": {"": 1}}'
    uri = (example_copy / ".codebolt" / "context-assembly.json").as_uri()
    document = build_document(uri, text, 1, example_copy)
    assert document is not None
    offered = complete(document, text.index('""') + 1, load_workspace(example_copy))
    assert spec.name in {item["label"] for item in offered}
    for value, ok in ((spec.minimum, True), (spec.maximum, True), (spec.minimum - 1, False), (spec.maximum + 1, False)):
        settings_file(example_copy, **{spec.name: value})
        workspace = load_workspace(example_copy)
        assert getattr(workspace.settings.limits, spec.name) == (value if ok else spec.default)
        assert any(f"/limits/{spec.name}" in (p.path or "") for p in workspace.problems) is not ok


# -- malformed definitions on disk -----------------------------------------------------------------


def test_an_invalid_regex_on_disk_is_a_warning_of_the_assembly(session: Session) -> None:
    write(session.root, "context-rule-engines/badre.json",
          {**engine("badre", 0), "rules": [rule("r", {"field": "input.text", "operator": "regex", "value": "(("})]})
    warnings = [w["content"] for w in call(session, "contextAssembly/assemble", REQUEST)["context"]["warnings"]]
    assert any(w.startswith("Warning: rule 'badre/r' can never match: regex") for w in warnings)


def test_a_two_segment_field_does_not_break_possible_variables_or_completion(session: Session) -> None:
    write(session.root, "context-rule-engines/half.json",
          {**engine("half", 0), "rules": [rule("r", {"field": "scope.agent", "operator": "eq", "value": "x"})]})
    keys = [item["key"] for item in call(session, "contextRuleEngine/possibleVariables", {})["items"]]
    assert "scope.agent" not in keys and "scope.agent.agent_type" in keys
    text = '{"id": "t", "rules": [{"id": "a", "when": [{"field": "scope.", "operator": "eq"}]}]}'
    uri = (session.root / ENGINES / "t.json").as_uri()
    document = build_document(uri, text, 1, session.root)
    assert document is not None
    labels = {item["label"] for item in complete(document, text.index("scope.") + 6, session.workspace())}
    assert labels


def test_the_readme_table_lists_every_limit() -> None:
    readme = (REPO / "README.md").read_text()
    for spec in LIMITS:
        assert f"| `{spec.name}` |" in readme, spec.name
