"""Seed-004 JSON and seed-003 YAML rules normalise into the canonical model (SPEC §4.5)."""

from __future__ import annotations

from context_assembly.rules.dialects import detect_dialect, normalise_file


def test_seed004_single_rule_and_actions() -> None:
    document = {"name": "cap history", "condition": {"field": "task.type", "op": "equals", "value": "question"},
                "action": {"cap": {"section": "history", "tokens": 1000}}}
    dialect, rules, problems = normalise_file(document, "01_base", ".json")
    assert dialect == "seed-004" and problems == []
    [rule] = rules
    assert rule.rule == {"id": "cap-history", "name": "cap history",
                         "when": [{"field": "scope.task.task_type", "operator": "eq", "value": "question"}],
                         "then": {"caps": [{"target": "history", "max_tokens": 1000}]}}
    assert rule.pointer == "" and rule.condition_pointer(0) == "/condition"


def test_seed004_array_include_exclude_priority_and_source_caps() -> None:
    document = [
        {"name": "a", "condition": [{"field": "task.text", "op": "contains", "value": "pay"},
                                    {"field": "task.text", "op": "not_contains", "value": "refund"}],
         "action": {"include": ["kv://x", "json://y"], "exclude": "vector://test-history"}},
        {"condition": {"field": "agent.name", "op": "startsWith", "value": "code"},
         "action": {"cap": {"source": "vector://", "tokens": 512}, "setPriority": {"section": "history",
                                                                                  "value": "high"}}},
    ]
    _, rules, problems = normalise_file(document, "02_x", ".json")
    assert problems == []
    assert rules[0].rule["then"] == {"add_memories": ["kv://x", "json://y"],
                                     "exclude_memories": ["vector://test-history"]}
    assert rules[0].condition_pointer(1) == "/0/condition/1"
    assert rules[1].rule["id"] == "02_x-2"
    assert rules[1].rule["when"][0]["operator"] == "starts_with"
    assert rules[1].rule["then"]["caps"] == [{"target": "vector://**", "max_tokens": 512}]
    assert rules[1].rule["then"]["set_priority"] == {"history": "high"}


def test_seed003_yaml_sketch() -> None:
    document = {"when": {"task_contains": ["auth", "login"]},
                "then": {"always_include": [{"path": "docs/security.md"}],
                         "boost": [{"kg_entity": "AuthService", "weight": 2.0}],
                         "exclude": [{"path": "generated/**"}]}}
    dialect, [rule], problems = normalise_file(document, "sec", ".yaml")
    assert dialect == "seed-003" and problems == []
    assert rule.rule["when"] == [{"any": [{"field": "input.text", "operator": "contains", "value": "auth"},
                                          {"field": "input.text", "operator": "contains", "value": "login"}]}]
    assert rule.rule["then"] == {"add_memories": ["file://docs/security.md"],
                                 "exclude_memories": ["file://generated/**"],
                                 "boost": [{"target": "kg_entity:AuthService", "weight": 2.0}]}


def test_unknown_seed003_condition_is_reported_and_never_matches() -> None:
    _, [rule], problems = normalise_file({"when": {"task_type": "bug"}, "then": {}}, "x", ".yaml")
    assert [p.path for p in problems] == ["/when/task_type"]
    reason = "unknown condition 'task_type' (seed-003 rules understand task_contains)"
    assert rule.rule["when"] == [{"$unreadable": "task_type", "reason": reason}]


def test_seed003_words_yaml_reads_as_numbers_stay_words_and_booleans_are_reported() -> None:
    """`task_contains: [404, 500, yes]`: YAML reads 404 as a number and yes as true; the numbers
    were dropped (the rule could never fire) and nothing was said."""
    _, [rule], problems = normalise_file({"when": {"task_contains": [404, 2.5, "auth", True]}, "then": {}},
                                         "x", ".yaml")
    assert [c["value"] for c in rule.rule["when"][0]["any"]] == ["404", "auth"]  # 2.5 may have been "2.50"
    assert [p.path for p in problems] == [f"/when/task_contains/{i}" for i in (0, 1, 3)]
    assert 'write it in quotes (matched as "404" meanwhile)' in problems[0].message
    assert "(not matched: its text is lost)" in problems[1].message


def test_dialect_detection() -> None:
    assert detect_dialect({"condition": {}}, ".yaml") == "seed-004"
    assert detect_dialect([{"when": {}}], ".json") == "seed-003"
    assert detect_dialect({}, ".yml") == "seed-003"
    assert detect_dialect({}, ".json") == "seed-004"
