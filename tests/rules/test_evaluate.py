"""Evaluation order, conflicts, explicit memories and the explanation (SPEC §4.3, §4.6)."""

from __future__ import annotations

from context_assembly.model import unstructure

from .support import engine, evaluate, request, rule

PHASE = {"field": "addVar.phase", "operator": "eq", "value": "planning"}
ALWAYS: list = []


def test_every_matching_rule_adds_its_memories_deduplicated_in_order() -> None:
    engines = [engine([rule("a", [PHASE], ["m1", "m2"], priority=1), rule("b", ALWAYS, ["m2", "m3"], priority=5)])]
    result = evaluate(engines, request({"phase": "planning"}))
    assert result.matched_memories == ["m2", "m3", "m1"]  # b runs first: higher priority


def test_priority_descending_and_ties_in_file_order() -> None:
    rules = [rule("low", ALWAYS, priority=1), rule("tie1", ALWAYS, priority=5), rule("high", ALWAYS, priority=9),
             rule("tie2", ALWAYS, priority=5)]
    result = evaluate([engine(rules)], request())
    assert [r.rule_id for r in result.engine_results[0].rules] == ["high", "tie1", "tie2", "low"]
    assert result.matched_memories == ["high", "tie1", "tie2", "low"]


def test_engines_in_id_order_with_context_rules_last() -> None:
    engines = [engine([rule("r", ALWAYS, ["from-context-rules"])], "context-rules"),
               engine([rule("r", ALWAYS, ["from-b"])], "b"), engine([rule("r", ALWAYS, ["from-a"])], "a")]
    result = evaluate(engines, request())
    assert [e.engine_id for e in result.engine_results] == ["a", "b", "context-rules"]
    assert result.matched_memories == ["from-a", "from-b", "from-context-rules"]


def test_disabled_engines_are_skipped_unless_named() -> None:
    engines = [engine([rule("r", ALWAYS, ["on"])], "on"), engine([rule("r", ALWAYS, ["off"])], "off", enabled=False)]
    assert evaluate(engines, request()).matched_memories == ["on"]
    named = evaluate(engines, request(rule_engine_ids=["off"]))
    assert named.matched_memories == ["off"]
    assert [e.engine_id for e in named.engine_results] == ["off"]


def test_rule_engine_ids_select_exactly_those_and_warn_on_unknown() -> None:
    engines = [engine([rule("r", ALWAYS, ["a"])], "a"), engine([rule("r", ALWAYS, ["b"])], "b")]
    result = evaluate(engines, request(rule_engine_ids=["b", "nope"]))
    assert result.matched_memories == ["b"]
    assert result.warnings == ["unknown rule engine 'nope'"]
    assert evaluate(engines, request(rule_engine_ids=[])).matched_memories == []


def test_first_matching_rule_decides_conflicts() -> None:
    include_first = [engine([rule("inc", ALWAYS, ["kv://x"], priority=2),
                             rule("exc", ALWAYS, [], priority=1, exclude_memories=["kv://*"])])]
    result = evaluate(include_first, request())
    assert result.matched_memories == ["kv://x"]
    assert [(d.reference, d.outcome, d.rule, d.overridden) for d in result.decisions] == \
        [("kv://x", "included", "e/inc", ["e/exc"])]

    exclude_first = [engine([rule("exc", ALWAYS, [], priority=2, exclude_memories=["kv://*"]),
                             rule("inc", ALWAYS, ["kv://x", "other"], priority=1)])]
    result = evaluate(exclude_first, request())
    assert result.matched_memories == ["other"]
    assert result.excluded_memories == ["kv://*"]
    assert [(d.reference, d.outcome, d.rule) for d in result.decisions] == [("kv://x", "excluded", "e/exc")]


def test_first_cap_priority_and_boost_win() -> None:
    rules = [rule("one", ALWAYS, [], priority=2, caps=[{"target": "history", "max_tokens": 100}],
                  set_priority={"history": "low"}, boost=[{"target": "m", "weight": 2}]),
             rule("two", ALWAYS, [], priority=1, caps=[{"target": "history", "max_tokens": 999}],
                  set_priority={"history": "high", "knowledge": "critical"}, boost=[{"target": "m", "weight": 9}])]
    result = evaluate([engine(rules)], request())
    assert [(c.target, c.max_tokens) for c in result.caps] == [("history", 100)]
    assert result.set_priority == {"history": "low", "knowledge": "critical"}
    assert [(b.target, b.weight) for b in result.boost] == [("m", 2)]


def test_explicit_memory_always_stays_and_the_attempt_is_noted() -> None:
    engines = [engine([rule("exc", ALWAYS, ["explicit-one"], exclude_memories=["explicit-*"])])]
    result = evaluate(engines, request(explicit_memory=["explicit-one"]))
    assert "explicit-one" in result.matched_memories
    assert [(d.reference, d.outcome, d.overridden) for d in result.decisions] == \
        [("explicit-one", "kept_explicit", ["e/exc"])]


def test_a_mention_is_explicit_too() -> None:
    """SPEC §5.1: @mentions in the task text are explicit references, which no rule excludes; an
    exclusion met first used to drop the mention here while the assembly still ran it."""
    engines = [engine([rule("exc", ALWAYS, [], priority=2, exclude_memories=["arch-*", "kv://**"]),
                       rule("inc", ALWAYS, ["arch-docs", "arch-notes"], priority=1)])]
    result = evaluate(engines, request(text="see @arch-docs and @kv://flags, mail bob@arch-notes.io",
                                       explicit_memory=["kv://explicit"]))
    assert result.matched_memories == ["arch-docs"]
    assert result.excluded_memories == ["arch-*", "kv://**"]  # patterns stay: they still drop pipeline items
    assert [(d.reference, d.outcome, d.rule, d.overridden) for d in result.decisions] == [
        ("arch-docs", "kept_explicit", "mention", ["e/exc"]),
        ("kv://explicit", "kept_explicit", "explicit_memory", ["e/exc"]),
        ("kv://flags", "kept_explicit", "mention", ["e/exc"]),
        ("arch-notes", "excluded", "e/exc", ["e/inc"])]  # an e-mail address is no mention


def test_nesting_any_all_not_to_depth() -> None:
    nested = {"all": [{"any": [{"field": "addVar.a", "operator": "eq", "value": 1},
                               {"not": {"field": "addVar.b", "operator": "exists"}}]},
                      {"not": {"any": [{"field": "input.text", "operator": "contains", "value": "skip"}]}}]}
    engines = [engine([rule("n", [nested])])]
    assert evaluate(engines, request({"a": 1, "b": 1}, "go")).matched_memories == ["n"]
    assert evaluate(engines, request({"a": 2}, "go")).matched_memories == ["n"]
    assert evaluate(engines, request({"a": 2, "b": 1}, "go")).matched_memories == []
    assert evaluate(engines, request({"a": 1}, "please SKIP")).matched_memories == []
    assert evaluate([engine([rule("e", [{"any": []}])])], request()).matched_memories == []
    assert evaluate([engine([rule("e", [{"all": []}])])], request()).matched_memories == ["e"]


def test_explanation_per_condition_with_nested_groups() -> None:
    when = [PHASE, {"any": [{"field": "scope.agent.agent_type", "operator": "in", "value": ["coder"]},
                            {"field": "addVar.missing", "operator": "exists"}]}]
    engines = [engine([rule("r", when)])]
    result = evaluate(engines, request({"phase": "review"}, scopes={"agent": {"agent_type": "coder"}}))
    explained = unstructure(result.engine_results[0].rules[0])
    assert explained["matched"] is False
    assert explained["conditions"][0] == {"result": False, "field": "addVar.phase", "operator": "eq",
                                          "value": "planning", "actual": "review", "present": True}
    group = explained["conditions"][1]
    assert group["group"] == "any" and group["result"] is True
    assert group["conditions"][1] == {"result": False, "field": "addVar.missing", "operator": "exists",
                                      "present": False}
    assert result.variables_used == ["addVar.missing", "addVar.phase", "scope.agent.agent_type"]
    assert result.missing_variables == ["addVar.missing"]


def test_fast_path_lists_only_matched_rules() -> None:
    engines = [engine([rule("yes", ALWAYS), rule("no", [PHASE])])]
    result = evaluate(engines, request(), explain=False)
    assert [r.rule_id for r in result.engine_results[0].rules] == ["yes"]


def test_seed004_field_aliases_and_turn_count() -> None:
    engines = [engine([rule("t", [{"field": "task.text", "operator": "contains", "value": "refactor"},
                                  {"field": "agent.name", "operator": "eq", "value": "code-agent"},
                                  {"field": "session.turnCount", "operator": "gte", "value": 3}])])]
    req = request({"turn_count": 4}, "Refactor it", scopes={"agent": {"agent_name": "code-agent"}})
    assert evaluate(engines, req).matched_memories == ["t"]


def test_per_source_rules_wait_for_assembly() -> None:
    engines = [engine([rule("ps", [{"field": "memory.source", "operator": "starts_with", "value": "vector://"}],
                            caps=[{"target": "vector://*", "max_tokens": 10}])])]
    result = evaluate(engines, request())
    assert result.matched_memories == [] and result.caps == []
    assert result.engine_results[0].rules[0].per_source is True
    assert "memory.source" not in result.missing_variables


def test_unreadable_rule_is_reported_and_never_matches() -> None:
    engines = [engine([{"id": "bad", "priority": "high", "when": [], "then": {"add_memories": ["x"]}},
                       rule("good", ALWAYS)])]
    result = evaluate(engines, request())
    assert result.matched_memories == ["good"]
    bad = next(r for r in result.engine_results[0].rules if r.rule_id == "bad")
    assert not bad.matched and "cannot read this rule" in (bad.error or "")


def test_catastrophic_pattern_returns_promptly() -> None:
    # (a+)+$ backtracks exponentially in a backtracking engine; RE2 answers in linear time.
    engines = [engine([rule("r", [{"field": "input.text", "operator": "regex", "value": "(a+)+$"}])])]
    result = evaluate(engines, request(text="a" * 100_000 + "b"))
    assert result.matched_memories == []  # no run of a's ends the text; what matters is that it returns
    ok = evaluate(engines, request(text="b" + "a" * 100_000))
    assert ok.matched_memories == ["r"]


def test_explaining_matched_rules_only() -> None:
    engines = [engine([rule("yes", [PHASE]), rule("no", [{"field": "addVar.phase", "operator": "eq", "value": "x"}])])]
    result = evaluate(engines, request({"phase": "planning"}), explain="matched")
    [only] = result.engine_results[0].rules
    assert only.rule_id == "yes" and only.conditions[0].actual == "planning"


def test_a_null_turn_count_leaves_the_count_to_the_server() -> None:
    """`"turn_count": null` counts as absent (§4.3): it kept the thread's own count out as well."""
    from context_assembly.rules.lookup import request_lookup

    for variables in ({}, {"turn_count": None}):
        req = request(variables, scopes={"thread": {"thread_id": "t-1"}})
        lookup, derived = request_lookup(req, lambda thread: 7)
        assert lookup["addVar.turn_count"] == 7 and derived, variables
    lookup, _ = request_lookup(request({"turn_count": 2}, scopes={"thread": {"thread_id": "t-1"}}), lambda thread: 7)
    assert lookup["addVar.turn_count"] == 2  # a value the caller gives wins
