"""Each processor type, alone and inside a pipeline."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.ingestion import PROCESSOR_FUNCTIONS, LLMUnavailable
from context_assembly.ingestion.processors import ProcessorContext, ProcessorError, parser, redact_pii
from context_assembly.ingestion.templates import TemplateVariables
from context_assembly.registry.ingestion import processor_names

from .support import FakeLLM, engine_over, keys, pipeline


def test_every_registered_processor_has_a_function() -> None:
    assert sorted(PROCESSOR_FUNCTIONS) == sorted(processor_names())


def run_one(tmp_path: Path, processor: dict[str, Any], payload: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Run one processor and route its output to json://out; the execution result plus what was written."""
    definition = pipeline("p", [processor], [{"from": processor["id"], "write_to": "json://out"}])
    with engine_over(tmp_path, definition, **options) as (engine, runtime):
        result = engine.execute("p", payload)
        result["stored"] = runtime.memory.read("json://out")["value"]
        return result


# -- chunker


def test_chunker_splits_text_into_indexed_overlapping_chunks(tmp_path: Path) -> None:
    text = " ".join(f"w{i:03d}" for i in range(200))
    result = run_one(tmp_path, {"id": "c", "type": "chunker", "input": "payload.text", "chunk_size": 40,
                                "overlap": 10}, {"text": text})
    chunks = result["stored"]
    assert result["status"] == "ok" and result["processors"][0]["count"] == len(chunks) > 3
    assert [c["index"] for c in chunks] == list(range(len(chunks)))
    assert all(len(c["text"]) <= 160 for c in chunks)
    first_end = chunks[0]["text"].split()[-1]
    assert first_end in chunks[1]["text"]  # the overlap


def test_chunker_chunks_each_element_of_a_list(tmp_path: Path) -> None:
    sections = [{"heading": "A", "text": "alpha"}, {"heading": "B", "text": "beta"}]
    result = run_one(tmp_path, {"id": "c", "type": "chunker", "input": "payload.sections"}, {"sections": sections})
    assert result["stored"] == [{"text": "alpha", "index": 0, "source": 0, "heading": "A"},
                                {"text": "beta", "index": 1, "source": 1, "heading": "B"}]


def test_chunker_refuses_an_overlap_as_large_as_the_chunk(tmp_path: Path) -> None:
    result = run_one(tmp_path, {"id": "c", "type": "chunker", "chunk_size": 10, "overlap": 10}, {"text": "a b"})
    assert result["status"] == "failed"  # the validator says so before anything runs


# -- normalizer


def test_normalizer_applies_its_operations_in_order_recursively(tmp_path: Path) -> None:
    payload = {"title": "  Hello   WORLD \n\n\n\n next\tline ", "tags": [" A ", None], "gone": None, "n": 3}
    result = run_one(tmp_path, {"id": "n", "type": "normalizer", "input": "payload",
                                "operations": ["remove_nulls", "whitespace", "trim", "lowercase"]}, payload)
    assert result["stored"] == {"title": "hello world\n\nnext line", "tags": ["a"], "n": 3}


@pytest.mark.parametrize(("text", "expected"), [
    ("mail jane.doe+tag@example.co.uk now", "mail [redacted-email] now"),
    ("call +1 (555) 123-4567 today", "call [redacted-phone] today"),
    ("or 555-123-4567.", "or [redacted-phone]."),
    ("card 4111 1111 1111 1111 ok", "card [redacted-card] ok"),
    ("card 4111-1111-1111-1111", "card [redacted-card]"),
    ("host 192.168.10.254 down", "host [redacted-ip] down"),
    # not PII: a timestamp, a date, a version, a number that fails the card checksum
    *[(text, text) for text in ("at 1700000000 on 2024-01-15", "v1.2.3 id 1234567812345678")],
])
def test_redact_pii(text: str, expected: str) -> None:
    assert redact_pii(text) == expected


def test_redaction_is_linear_on_hostile_input() -> None:
    hostile = "a" * 200_000 + "@" + "1-" * 100_000
    assert redact_pii(hostile)  # RE2: returns promptly whatever the shape


# -- parser


def context() -> ProcessorContext:
    return ProcessorContext("p", "e", "manual", None, TemplateVariables({}, "manual", "e", "p", 0.0))


def test_parser_json_and_yaml_with_a_path() -> None:
    doc = json.dumps({"files": [{"path": "a.py"}, {"path": "b.py"}]})
    assert parser(doc, {"format": "json", "path": "/files/1/path"}, context()) == "b.py"
    assert parser(doc, {"format": "json", "path": "files.0"}, context()) == {"path": "a.py"}
    assert parser("a:\n  b: [1, 2]\n", {"format": "yaml", "path": "a.b"}, context()) == [1, 2]
    assert parser({"already": "parsed"}, {"format": "json"}, context()) == {"already": "parsed"}
    with pytest.raises(ProcessorError, match="nothing at"):
        parser(doc, {"format": "json", "path": "/nope"}, context())
    with pytest.raises(ProcessorError, match="not valid YAML"):
        parser("a: [", {"format": "yaml"}, context())


def test_parser_markdown_sections() -> None:
    text = "intro\n\n# Title #\nbody\n```\n# not a heading\n```\n## C#\nmore\n"
    assert parser(text, {"format": "markdown"}, context()) == [
        {"heading": None, "level": 0, "text": "intro"},
        {"heading": "Title", "level": 1, "text": "body\n```\n# not a heading\n```"},
        {"heading": "C#", "level": 2, "text": "more"},
    ]


def test_parser_code() -> None:
    assert parser("```python\nx = 1\ny = 2\n```", {"format": "code"}, context()) == {
        "language": "python", "text": "x = 1\ny = 2", "lines": 2}
    assert parser({"language": "go", "code": "package main"}, {"format": "code"}, context()) == {
        "language": "go", "text": "package main", "lines": 1}
    assert parser("plain", {"format": "code"}, context()) == {"text": "plain", "lines": 1}


# -- vector_embed


def test_vector_embed_marks_items_for_the_vector_route(tmp_path: Path) -> None:
    result = run_one(tmp_path, {"id": "e", "type": "vector_embed", "input": "payload.chunks"},
                     {"chunks": [{"text": "alpha", "index": 0}, "beta"]})
    first, second = result["stored"]
    assert first["embed"] is True and first["text"] == "alpha" and first["metadata"]["index"] == 0
    assert first["metadata"]["pipeline_id"] == "p" and first["metadata"]["trigger"] == "manual"
    assert second["text"] == "beta"


def test_vector_embed_with_a_collection_writes_it_directly(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "e", "type": "vector_embed", "input": "payload.notes",
                                 "collection": "notes"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"notes": ["the deploy script needs sudo", "cats purr"]})
        assert result["status"] == "ok"
        hits = runtime.vectors.search("notes", "deploy script permissions", top_k=1)
        assert hits[0]["text"] == "the deploy script needs sudo"
        again = engine.execute("p", {"notes": ["the deploy script needs sudo"]})
        assert again["status"] == "ok" and len(runtime.vectors.list("notes")) == 2  # same text, same document


def test_a_collection_filled_from_the_event_stays_one_collection(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "e", "type": "vector_embed", "input": "payload.text",
                                 "collection": "${payload.collection}"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        result = engine.execute("p", {"text": "t", "collection": "docs/../../x"})
        assert result["status"] == "failed" and "collection" in result["processors"][0]["error"]
        assert runtime.vectors.list() == []


# -- llm_extract


def test_llm_extract_asks_the_client_and_parses_its_json(tmp_path: Path) -> None:
    llm = FakeLLM({"text": '```json\n[{"decision": "use JWT"}]\n```'})
    result = run_one(tmp_path, {"id": "x", "type": "llm_extract", "input": "payload.summary",
                                "instructions": "List the decisions.",
                                "output_schema": {"type": "array", "items": {"type": "object"}}},
                     {"summary": "We decided to use JWT."}, llm=llm)
    assert result["status"] == "ok" and result["stored"] == [{"decision": "use JWT"}]
    [request] = llm.requests
    assert set(request) == {"prompt", "system", "schema"}
    assert "List the decisions." in request["prompt"] and "We decided to use JWT." in request["prompt"]
    assert request["schema"] == {"type": "array", "items": {"type": "object"}}


@pytest.mark.parametrize("answer", [
    "just text", {"no": "text"}, {"text": "not json"}, {"text": '{"not": "an array"}'}, RuntimeError("model down"),
])
def test_a_malformed_llm_answer_fails_the_processor(tmp_path: Path, answer: Any) -> None:
    result = run_one(tmp_path, {"id": "x", "type": "llm_extract", "input": "payload.summary",
                                "output_schema": {"type": "array"}}, {"summary": "s"}, llm=FakeLLM(answer))
    assert result["status"] == "failed" and result["processors"][0]["status"] == "failed"
    assert result["stored"] is None


@pytest.mark.parametrize("llm", [None, FakeLLM(LLMUnavailable("the client has no llm/complete"))])
def test_llm_steps_are_skipped_with_a_warning_without_a_client(tmp_path: Path, llm: Any) -> None:
    definition = pipeline("p", [{"id": "x", "type": "llm_extract", "input": "payload.summary"},
                                {"id": "n", "type": "normalizer"}],
                          [{"from": "n", "write_to": "json://facts"}, {"from": "payload", "write_to": "json://raw"}])
    with engine_over(tmp_path, definition, llm=llm) as (engine, runtime):
        result = engine.execute("p", {"summary": "s"})
        assert result["status"] == "ok"
        assert [p["status"] for p in result["processors"]] == ["skipped", "skipped"]
        assert [r["status"] for r in result["routes"]] == ["skipped", "ok"]
        assert len(result["warnings"]) == 3
        assert keys(runtime, "json://") == ["json://raw"]


# -- llm_extract_kb


def test_llm_extract_kb_writes_nodes_and_edges_to_the_graph(tmp_path: Path) -> None:
    llm = FakeLLM({"nodes": [{"id": "auth", "kind": "Module", "name": "Auth"},
                             {"id": "src/jwt.py", "kind": "Module"},
                             {"id": "d1", "kind": "Person"}],
                   "edges": [{"kind": "depends_on", "from": "auth", "to": "src/jwt.py"}]})
    definition = pipeline("p", [{"id": "kb", "type": "llm_extract_kb", "input": "payload.summary",
                                 "node_kinds": ["Module"], "edge_kinds": ["depends_on"]}],
                          [{"from": "kb", "write_to": "graph://project"}])
    with engine_over(tmp_path, definition, llm=llm) as (engine, runtime):
        result = engine.execute("p", {"summary": "auth depends on jwt"})
        assert result["status"] == "ok", result
        assert result["processors"][0]["count"] == 3 and "dropped" in result["processors"][0]["warning"]
        assert result["routes"][0]["written"] == ["graph://project/node/auth", "graph://project/node/src%2Fjwt.py",
                                                  "graph://project/edge/auth%3Adepends_on%3Asrc%2Fjwt.py"]
        node = runtime.memory.read("graph://project/node/auth")
        assert node["exists"] and node["value"]["kind"] == "Module"
        assert runtime.memory.read("graph://project/node/src%2Fjwt.py")["exists"]
        assert llm.requests[0]["schema"]["properties"]["nodes"]["items"]["properties"]["kind"] == {"enum": ["Module"]}


def test_llm_extract_kb_fails_on_a_malformed_graph(tmp_path: Path) -> None:
    llm = FakeLLM({"nodes": [{"kind": "Module"}], "edges": []})
    result = run_one(tmp_path, {"id": "kb", "type": "llm_extract_kb", "input": "payload"}, {"a": 1}, llm=llm)
    assert result["status"] == "failed" and "'id'" in result["processors"][0]["error"]


# -- blob_store


def test_blob_store_stores_text_and_base64(tmp_path: Path) -> None:
    definition = pipeline("p", [{"id": "b", "type": "blob_store", "input": "payload.files", "bucket": "att",
                                 "key": "{{payload.task}}-{{index}}"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        raw = base64.b64encode(b"\x00\x01binary").decode()
        result = engine.execute("p", {"task": "t1", "files": ["hello", {"base64": raw}]})
        assert result["status"] == "ok" and result["processors"][0]["count"] == 2
        assert base64.b64decode(runtime.memory.read("blob://att/t1-0")["value"]) == b"hello"
        assert base64.b64decode(runtime.memory.read("blob://att/t1-1")["value"]) == b"\x00\x01binary"
        hostile = engine.execute("p", {"task": "../t", "files": ["x"]})
        assert hostile["status"] == "failed" and "payload.task" in hostile["processors"][0]["error"]


def test_blob_store_checks_every_key_before_storing_any(tmp_path: Path) -> None:
    """The third key refused: the first two were stored, and the run said nothing was written."""
    definition = pipeline("p", [{"id": "b", "type": "blob_store", "input": "payload.files", "bucket": "att",
                                 "key": "{{item.name}}"}])
    with engine_over(tmp_path, definition) as (engine, runtime):
        files = [{"name": "a.txt", "text": "a"}, {"name": "b.txt", "text": "b"}, {"name": "../x", "text": "x"}]
        result = engine.execute("p", {"files": files})
        assert result["status"] == "failed" and "nothing was stored" in result["processors"][0]["error"]
        assert keys(runtime, "blob://") == []


def test_blob_store_names_a_blob_by_its_content_by_default(tmp_path: Path) -> None:
    result = run_one(tmp_path, {"id": "b", "type": "blob_store", "input": "payload.text", "bucket": "raw"},
                     {"text": "same"})
    stored = result["stored"]
    assert stored["key"] == stored["sha256"] and stored["uri"] == f"blob://raw/{stored['sha256']}"


# -- custom


def test_custom_processors_from_the_engine_mapping(tmp_path: Path) -> None:
    def shout(value: Any, config: dict[str, Any], context: dict[str, Any]) -> str:
        return str(value).upper() + config.get("suffix", "") + f" ({context['pipeline_id']})"

    result = run_one(tmp_path, {"id": "u", "type": "custom", "input": "payload.text", "entry_point": "shout",
                                "config": {"suffix": "!"}}, {"text": "hi"}, custom={"shout": shout})
    assert result["stored"] == "HI! (p)"


def test_custom_processors_from_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    entry = importlib.metadata.EntryPoint("reverse", "json:loads", "context_assembly.processors")
    monkeypatch.setattr(entry.__class__, "load", lambda self: lambda value, config, ctx: value[::-1])
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [entry] if group else [])
    result = run_one(tmp_path, {"id": "u", "type": "custom", "input": "payload.text", "entry_point": "reverse"},
                     {"text": "abc"})
    assert result["stored"] == "cba"


def test_an_unknown_or_failing_custom_processor_fails(tmp_path: Path) -> None:
    unknown = run_one(tmp_path, {"id": "u", "type": "custom", "entry_point": "nope"}, {"a": 1})
    assert unknown["status"] == "failed" and "no custom processor 'nope'" in unknown["processors"][0]["error"]

    def broken(value: Any, config: Any, context: Any) -> Any:
        raise KeyError("boom")

    failing = run_one(tmp_path / "2", {"id": "u", "type": "custom", "entry_point": "broken"}, {"a": 1},
                      custom={"broken": broken})
    assert failing["status"] == "failed" and "KeyError" in failing["processors"][0]["error"]
