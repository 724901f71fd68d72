"""Answers written from pre-encoded rule entries (`EncodedList`): byte for byte what the plain
encoding of the same answer gives, in every explain mode and trace format, on arbitrary engines
and requests, on first use and when the entries are reused by later answers."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_assembly.encoded import EncodedJSON, EncodedList, encoded
from context_assembly.lsp.framing import encode_json
from context_assembly.model import AssemblyRequest, RuleEngine, structure, unstructure
from context_assembly.rules.engine import compile_engine
from context_assembly.rules.evaluate import RuleSet

from .test_properties import json_values, requests, rules, same_json

FORMATS = [(mode, trace_format) for mode in ("none", "matched", "all") for trace_format in ("full", "compact")]


def plain(value: Any) -> Any:
    """The answer with every list a plain list: what was encoded before entries were pre-encoded."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def rule_set_of(engine_docs: list[Any]) -> RuleSet:
    return RuleSet([compile_engine(structure({"id": f"e{i}", "rules": docs}, RuleEngine))
                    for i, docs in enumerate(engine_docs)])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=5), min_size=1, max_size=2),
       st.lists(requests, min_size=1, max_size=3), st.lists(st.sampled_from(FORMATS), min_size=1, max_size=4))
def test_pre_encoded_answers_are_the_plain_encoding(engine_docs: list[Any], request_docs: list[dict],
                                                    formats: list[tuple[str, str]]) -> None:
    rule_set = rule_set_of(engine_docs)
    for request_doc in request_docs:  # later requests reuse the entries earlier ones encoded
        request = structure(request_doc, AssemblyRequest)
        for mode, trace_format in formats:
            answer = rule_set.evaluate_wire(request, explain=mode, trace_format=trace_format)
            assert encode_json(answer) == orjson.dumps(plain(answer))
            if trace_format == "full":  # and that answer is the plain path's
                explain = {"all": True, "none": False}.get(mode, mode)
                assert same_json(answer, unstructure(rule_set.evaluate(request, explain=explain)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rules | json_values, max_size=5), min_size=1, max_size=3),
       st.lists(requests, min_size=1, max_size=3), st.booleans())
def test_an_answer_only_written_is_the_same_json(engine_docs: list[Any], request_docs: list[dict],
                                                 traced: bool) -> None:
    """`encoded=True` (the JSON-RPC layer's calls): a "none" answer's engines as their bytes alone,
    written byte for byte as the answer with Python values, first use and reuse (every piece made
    before: `_known_json`), in either order, with the engines' templates their own or their
    trace programs' (`traced`: a full trace answered first)."""
    rule_set = rule_set_of(engine_docs)
    for n, request_doc in enumerate(request_docs):
        request = structure(request_doc, AssemblyRequest)
        if traced:
            rule_set.evaluate_wire(request, explain="all")
        order = (True, False) if n % 2 else (False, True)
        first, second = (encode_json(rule_set.evaluate_wire(request, explain="none", encoded=e)) for e in order)
        assert first == second
        assert orjson.loads(first) == plain(rule_set.evaluate_wire(request, explain="none"))


def test_a_steady_none_answer_reads_every_engine_in_one_loop() -> None:
    """Once every piece was made, the engines' bytes come from `_known_json` (no call per
    engine); until then, and for an engine whose pieces are not all made, from the loop that makes
    them. Both write the same JSON."""
    from context_assembly.rules.trace import _known_json

    rule_set = rule_set_of([[{"id": "a", "when": [], "then": {"add_memories": ["m1"]}}],
                            [{"id": "b", "when": [{"field": "addVar.x", "operator": "exists"}],
                              "then": {"add_memories": ["m2"]}}]])
    plain_request = structure({}, AssemblyRequest)
    with_x = structure({"additional_variables": {"x": 1}}, AssemblyRequest)
    selection = rule_set._selection(None)
    first = rule_set.evaluate_wire(plain_request, explain="none", encoded=True)  # makes engine a's pieces
    assert _known_json(rule_set._match(selection, {})) is not None
    assert _known_json(rule_set._match(selection, {"addVar.x": 1})) is None  # rule b never matched yet
    second = rule_set.evaluate_wire(with_x, explain="none", encoded=True)
    assert _known_json(rule_set._match(selection, {"addVar.x": 1})) is not None
    assert orjson.loads(encode_json(first)) == plain(rule_set.evaluate_wire(plain_request, explain="none"))
    assert orjson.loads(encode_json(second)) == plain(rule_set.evaluate_wire(with_x, explain="none"))
    assert _known_json([]) == b"[]"  # no engine enabled


def test_encoded_json_is_written_as_its_bytes_by_either_encoder() -> None:
    part = EncodedJSON(rb'[{"a":1},"\u00e9"]')
    assert encode_json({"x": part}) == rb'{"x":[{"a":1},"\u00e9"]}'
    # an integer orjson refuses sends the whole message through the stdlib encoder
    assert encode_json({"x": part, "big": 2 ** 70}) == rb'{"x": [{"a": 1}, "\u00e9"], "big": 1180591620717411303424}'


def test_a_none_answer_carries_its_matched_rules_encoded() -> None:
    rule_set = rule_set_of([[{"id": "a", "when": [], "then": {"add_memories": ["m1"]}},
                             {"id": "b", "when": [{"field": "addVar.x", "operator": "exists"}]}]])
    request = structure({"scope_variables": {}, "additional_variables": {}}, AssemblyRequest)
    results = rule_set.evaluate_wire(request, explain="none")["engine_results"]
    assert isinstance(results, EncodedList)  # one piece per engine: its entry, matched rules included
    rules_entry = results[0]
    assert [r["rule_id"] for r in rules_entry["rules"]] == ["a"]  # to Python, the list of dicts
    assert results.pieces == [orjson.dumps(rules_entry)]
    for explain in ("none", "all"):  # a compact answer lists no rules: they are its layout's
        compact = rule_set.evaluate_wire(request, explain=explain, trace_format="compact")
        assert "rules" not in compact["engine_results"][0]
        assert compact["engine_results"][0]["trace"]["matched"] == [0]


def test_an_entry_orjson_cannot_encode_leaves_the_list_plain() -> None:
    # a lone surrogate in a rule's name: orjson refuses it, the stdlib encoder writes it escaped
    rule_set = rule_set_of([[{"id": "a", "name": "bad \ud800 name", "when": []}, {"id": "b", "when": []}]])
    request = structure({"scope_variables": {}, "additional_variables": {}}, AssemblyRequest)
    answer = rule_set.evaluate_wire(request, explain="none")
    assert type(answer["engine_results"]) is list
    rules_entry = answer["engine_results"][0]["rules"]
    assert type(rules_entry) is list and [r["rule_id"] for r in rules_entry] == ["a", "b"]
    assert encode_json(answer) == json.dumps(answer, ensure_ascii=True).encode("ascii")
    assert encoded({"name": "\ud800"}) is None


def test_an_engine_id_orjson_cannot_encode_leaves_the_engines_plain() -> None:
    engines = [compile_engine(structure({"id": name, "rules": [{"id": "a", "when": []}]}, RuleEngine))
               for name in ("fine", "bad \ud800 id")]
    request = structure({"scope_variables": {}, "additional_variables": {}}, AssemblyRequest)
    answer = RuleSet(engines).evaluate_wire(request, explain="none")
    assert type(answer["engine_results"]) is list
    assert sorted(e["engine_id"] for e in answer["engine_results"]) == ["bad \ud800 id", "fine"]
    assert encode_json(answer) == json.dumps(answer, ensure_ascii=True).encode("ascii")


def test_a_changed_encoded_list_is_written_as_it_is_now() -> None:
    items = [{"a": 1}, {"b": [2]}]
    changed = EncodedList(items, [orjson.dumps(i) for i in items])
    assert encode_json({"x": changed}) == b'{"x":[{"a":1},{"b":[2]}]}'
    changed.append({"c": 3})
    assert encode_json({"x": changed}) == b'{"x":[{"a":1},{"b":[2]},{"c":3}]}'


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Names(list[str]):
    pass


def test_subclasses_of_json_types_are_written_as_before() -> None:
    value = {"colour": Colour.RED, "size": Size.BIG, "ordered": OrderedDict(b=1, a=2), "names": Names(["x"]),
             "nested": [OrderedDict(k=[Colour.RED])]}
    assert encode_json(value) == orjson.dumps(value)
    assert encode_json(value) == b'{"colour":"red","size":3,"ordered":{"b":1,"a":2},"names":["x"],' \
                                 b'"nested":[{"k":["red"]}]}'
