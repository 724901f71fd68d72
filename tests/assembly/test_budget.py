"""Stage 6: the ladder strategy by strategy, their order, and properties over random items and budgets."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.assembly.budget import Packed, allocation_order, pack
from context_assembly.assembly.candidates import Candidate
from context_assembly.assembly.summary import Summariser, SummaryCache, shorten_item
from context_assembly.assembly.tokens import estimate, token_counter
from context_assembly.model.context import ContextItem
from context_assembly.registry.sections import SECTION_NAMES
from context_assembly.shortening import TRUNCATION_PREFIX, extractive, shorten, split_sentences
from context_assembly.workspace.settings import BudgetSettings

MARKER = re.compile(r"\n\[… truncated: (\d+) of (\d+) tokens left out\]$")
TASK = "fix the login timeout"
sentence = st.text(alphabet="abcdefg ", min_size=1, max_size=40).map(lambda s: (s.strip() or "x") + ".")
sentences = st.lists(sentence, min_size=1, max_size=8).map(" ".join)


def item(index: int, content: str, section: str = "knowledge", priority: str = "medium",
         score: float | None = None, source: str = "kv://x") -> ContextItem:
    return ContextItem(f"i{index}", content, "m", source, section, priority, score, estimate(content))


def candidates(*items: ContextItem, reference: str = "m") -> list[Candidate]:
    return [Candidate(it, reference, i) for i, it in enumerate(items)]


def run(ordered: list[Candidate], budget: int | None, llm=None, **budget_settings) -> Packed:  # type: ignore[no-untyped-def]
    summariser = Summariser(SummaryCache(), estimate, TASK, llm, 1.0)
    return pack(ordered, budget, estimate, BudgetSettings(**budget_settings), summariser)


def strategies(packed: Packed) -> list[str]:
    return [s.strategy for s in packed.steps]


# -- truncation and its marker ---------------------------------------------------------------------


def test_the_cut_is_at_a_sentence_boundary_with_a_marker_that_counts() -> None:
    text = "First sentence is here. Second sentence follows it. Third one is long enough to matter here."
    cut = shorten(text, 30, estimate)
    assert cut is not None and cut.startswith("First sentence is here. Second sentence follows it.\n")
    found = MARKER.search(cut)
    assert found and int(found.group(2)) == estimate(text)
    assert int(found.group(1)) == estimate(text) - estimate("First sentence is here. Second sentence follows it.")
    assert estimate(cut) <= 30


def test_the_cut_falls_back_to_words_then_gives_up() -> None:
    cut = shorten("one two three four five six seven eight nine ten eleven twelve " * 3, 20, estimate)
    assert cut is not None and cut.split("\n")[0].split()[-1] in "one two three four five six seven eight nine ten"
    assert shorten("word " * 50, 4, estimate) is None  # nothing but the marker would fit
    assert shorten_item(item(0, "word " * 50), 4, estimate) is None


def test_one_long_line_is_cut_at_a_word_not_at_the_last_line_break() -> None:
    """A sentence boundary that keeps less than half the room loses to a word cut: a tool's output
    as a JSON value is one line after its short keys, and cutting before it kept ~3% of the room."""
    value = json.dumps({"command": "pytest -x", "exit_code": 1,
                        "stdout": "\n".join(f"test_{i} FAILED - TimeoutError after {i} s" for i in range(200))},
                       indent=2)
    cut = shorten(value, 300, estimate)
    assert cut is not None and estimate(cut) <= 300 and estimate(cut) > 250
    assert '"stdout": "test_0 FAILED' in cut and MARKER.search(cut)
    # a sentence boundary that keeps half the room or more is still preferred
    text = "Short lead. " + "A longer second sentence follows here with more words. " * 3
    assert shorten(text, 40, estimate).split("\n")[0].endswith(".")


def test_cjk_text_is_cut_and_summarised_not_dropped() -> None:
    """Text without spaces (Japanese, Chinese) had no boundary to cut at, so a critical document
    over the budget was dropped whole: sentences now end at 。！？ too, and a cut falls back to a
    character where no boundary fits."""
    text = "これは重要な制約です。必ず守ってください。" * 40
    assert split_sentences(text)[:2] == ["これは重要な制約です。", "必ず守ってください。"]
    cut = shorten(text, 50, estimate)
    assert cut is not None and estimate(cut) <= 50 and MARKER.search(cut) and cut.startswith("これは")
    one_token = "あ" * 400  # no sentence end at all: cut at a character
    assert shorten(one_token, 30, estimate) is not None
    summary = extractive(text, TASK, 60, estimate)
    assert summary is not None and summary.startswith("これは重要な制約です。")


def test_extractive_gives_up_where_picking_sentences_keeps_nothing_useful() -> None:
    value = json.dumps({"command": "pytest", "stdout": "x " * 2000}, indent=2)
    assert extractive(value, TASK, 200, estimate) is None  # a JSON document: its lines are no sentences
    lead_only = "Output:\n" + "word " * 2000
    assert extractive(lead_only, TASK, 200, estimate) is None  # only the lead fits, filling 1% of the room
    assert extractive("Intro. " + "word " * 2000, TASK, 4, estimate) == "Intro."  # the lead fills the room


def test_exact_tokenizers_cut_within_the_budget() -> None:
    count = token_counter("cl100k")
    assert count("hello world") == 2 and token_counter("o200k")("hello world") == 2
    text = "A sentence about auth. " * 50
    long = ContextItem("a", text, None, "kv://a", "knowledge", "high", None, count(text))
    summariser = Summariser(SummaryCache(), count, "", None, 1)
    packed = pack([Candidate(long, "a", 0)], 30, count, BudgetSettings(ladder=["truncate"]), summariser)
    assert packed.tokens <= 30 and packed.cut and TRUNCATION_PREFIX in packed.cut[0].content


# -- each strategy ---------------------------------------------------------------------------------


def test_relevance_floor_drops_hits_below_the_floor_first_then_each_sources_weakest() -> None:
    hits = [item(i, f"Hit {i} about the login timeout.", score=s) for i, s in enumerate([0.9, 0.05, 0.6, 0.5])]
    other = [item(10 + i, f"Other {i} on sessions.", score=s, source="vector://b") for i, s in enumerate([0.8, 0.4])]
    ordered = candidates(*hits) + [Candidate(o, "other", 10 + i) for i, o in enumerate(other)]
    total = sum(c.item.tokens for c in ordered)
    packed = run(ordered, total - 1, ladder=["relevance_floor"])
    assert [s.item_id for s in packed.steps] == ["i1"]  # the 0.05 hit, below the floor of 0.2
    packed = run(ordered, total - 20, ladder=["relevance_floor"])
    # then one round: the weakest of each source, from the lowest-priority end (source "other" first)
    assert [s.item_id for s in packed.steps] == ["i1", "i11", "i3"]
    assert all(s.action == "dropped" and s.tokens_after == 0 for s in packed.steps)


def test_a_sources_best_hit_is_left_for_later_strategies() -> None:
    ordered = candidates(item(0, "Only hit. " * 30, score=0.9))
    packed = run(ordered, 20, ladder=["relevance_floor", "truncate"])
    assert strategies(packed) == ["truncate"] and packed.kept[0].metadata["truncated"]


def test_compress_turns_keeps_the_newest_verbatim_and_summarises_the_older() -> None:
    turns = [item(i, f"user: turn {i} talks about the login timeout and retries.", "history",
                  source="episodic://t-1") for i in range(8)]
    ordered = candidates(*turns)
    packed = run(ordered, sum(t.tokens for t in turns) - 10, ladder=["compress_turns"], keep_recent_turns=3)
    [step] = packed.steps
    assert step.strategy == "compress_turns" and step.action == "compressed" and step.tokens_after < step.tokens_before
    assert [i.content for i in packed.kept[1:]] == [t.content for t in turns[-3:]]
    assert packed.kept[0].content.startswith("Earlier turns (5, summarised):")
    assert packed.kept[0].metadata["compressed_turns"] == [f"i{i}" for i in range(5)]


def test_summarize_shortens_long_items_from_the_lowest_priority_end_extractively() -> None:
    long = " ".join(f"Sentence {i} is filler about nothing in particular." for i in range(40))
    long += " The login timeout is set in auth.py."
    a = item(0, long, "knowledge", "high")
    b = item(1, long.replace("Sentence", "Line"), "suggestions", "low")
    packed = run(candidates(a, b), a.tokens + 200, ladder=["summarize"])
    [step] = packed.steps
    assert step.item_id == "i1" and step.method == "extractive"  # the lower-priority one only
    summary = packed.kept[1].content
    assert summary.startswith("Line 0 is filler") and "The login timeout is set in auth.py." in summary
    assert packed.kept[0].content == long


def test_summaries_come_from_the_clients_model_when_offered_and_are_cached() -> None:
    asked: list[dict] = []

    def llm(request: dict) -> dict:
        asked.append(request)
        return {"text": "The timeout lives in auth.py."}

    long = "Filler sentence about many things. " * 100
    cache = SummaryCache()
    summariser = Summariser(cache, estimate, TASK, llm, 1.0)
    for _ in range(2):
        packed = pack(candidates(item(0, long)), 100, estimate, BudgetSettings(), summariser)
        assert packed.kept[0].content == "The timeout lives in auth.py." and packed.steps[0].method == "llm"
    assert len(asked) == 1 and TASK in asked[0]["prompt"]


def test_a_model_that_fails_or_is_slow_falls_back_to_the_extractive_summary() -> None:
    import threading

    release = threading.Event()

    def slow(request: dict) -> dict:
        release.wait(5)
        return {"text": "late"}

    def broken(request: dict) -> dict:
        raise RuntimeError("no model")

    long = "Filler sentence about many things. " * 100
    for llm, why in ((slow, "did not answer within 50 ms"), (broken, "the model failed: no model")):
        summariser = Summariser(SummaryCache(), estimate, TASK, llm, 0.05)
        packed = pack(candidates(item(0, long)), 100, estimate, BudgetSettings(), summariser)
        assert packed.steps[0].method.startswith("extractive") and why in packed.steps[0].method
    release.set()


def test_a_fallback_summary_is_not_kept_so_the_next_turn_asks_the_model_again() -> None:
    """One slow answer made every later turn read "extractive (the model did not answer…)" from the
    cache without asking the model again."""
    import threading

    asked: list[int] = []
    slow_once = threading.Event()

    def model(request: dict) -> dict:
        asked.append(1)
        if not slow_once.is_set():
            slow_once.set()
            threading.Event().wait(0.3)  # this once, past the 50 ms the summariser waits
        return {"text": "The model's summary."}

    cache = SummaryCache()
    long = "Filler sentence about many things. " * 100

    def turn(timeout_s: float) -> str:
        summariser = Summariser(cache, estimate, TASK, model, timeout_s)
        return pack(candidates(item(0, long)), 100, estimate, BudgetSettings(), summariser).steps[0].method

    assert turn(0.05).startswith("extractive")
    assert turn(5) == "llm" and len(asked) == 2
    assert turn(5) == "llm" and len(asked) == 2  # the model's own summary is kept


def test_extractive_summary_prefers_sentences_sharing_words_with_the_task() -> None:
    text = "Intro sentence here. Cats are nice. The login timeout is 30 s. Dogs bark."
    assert extractive(text, TASK, 14, estimate) == "Intro sentence here. The login timeout is 30 s."


# -- the order and the settings --------------------------------------------------------------------


def test_strategies_run_in_the_settings_order_and_stop_once_it_fits() -> None:
    low = item(0, "Weak hit on sessions.", score=0.05)
    long = item(1, " ".join(f"Long sentence {i} about the login." for i in range(60)), "suggestions", "low")
    ordered = candidates(low, long)
    total = low.tokens + long.tokens
    assert strategies(run(ordered, total - 2)) == ["relevance_floor"]
    packed = run(candidates(low, long), 150)
    assert strategies(packed) == ["relevance_floor", "summarize"]
    packed = run(candidates(low, long), 150, ladder=["truncate", "relevance_floor"])
    assert strategies(packed) == ["truncate"] and packed.kept[0].id == "i0"  # reordered: no floor at all


def test_with_the_ladder_switched_off_whole_items_are_dropped() -> None:
    packed = run(candidates(item(0, "A sentence. " * 40)), 20, ladder=[])
    assert packed.kept == [] and [s.strategy for s in packed.steps] == ["budget"]


def test_warnings_are_packed_after_constraints() -> None:
    warning = item(0, "Warning: " + "memory x missing. " * 20, "warnings", "high")
    constraint = item(1, "Never push to main.", "constraints", "high")
    ordered = candidates(warning, constraint)
    assert [c.item.id for c in allocation_order(ordered)] == ["i1", "i0"]
    packed = run(ordered, constraint.tokens + 5)
    assert constraint in packed.kept and warning not in packed.kept


# -- properties ------------------------------------------------------------------------------------

item_spec = st.tuples(st.sampled_from(SECTION_NAMES[2:]), st.sampled_from(["critical", "high", "medium", "low"]),
                      st.one_of(st.none(), st.floats(0, 1)), sentences, st.integers(0, 2))


def _in_global_order(specs: list[tuple]) -> list[Candidate]:
    made = [Candidate(ContextItem(f"i{i}", text, f"m{ref}", f"kv://s{ref}", section, priority, score,
                                  estimate(text)), f"m{ref}", i)
            for i, (section, priority, score, text, ref) in enumerate(specs)]
    return sorted(made, key=lambda c: (SECTION_NAMES.index(c.item.section), c.rank_key))


def _whole_sentences(text: str, original: str) -> bool:
    return all(s in original for s in split_sentences(text))


@settings(max_examples=400, deadline=None)
@given(st.lists(item_spec, max_size=10), st.integers(min_value=1, max_value=300))
def test_never_over_budget_never_half_a_sentence_never_drops_the_more_important(specs: list[tuple],
                                                                               budget: int) -> None:
    ordered = _in_global_order(specs)
    originals = {c.item.id: c.item for c in ordered}
    allocation = [c.item.id for c in allocation_order(ordered)]
    packed = run(list(ordered), budget, summarize_above_tokens=30, summary_tokens=20)
    assert packed.tokens == sum(i.tokens for i in packed.kept) <= budget
    for kept in packed.kept:
        original = originals[kept.id].content
        body = MARKER.split(kept.content)[0]
        if MARKER.search(kept.content) is None:  # no marker: only whole sentences of the original
            assert _whole_sentences(kept.content, original)
        else:
            assert original.startswith(body) or _whole_sentences(body.rsplit(" ", 1)[0], original)
    kept_ids = {i.id for i in packed.kept}
    room = budget - packed.tokens
    for dropped, strategy, _ in packed.dropped:
        if strategy == "relevance_floor":
            continue  # stage 1 drops weak hits by design, whatever their position
        for later in allocation[allocation.index(dropped.id) + 1:]:
            if later in kept_ids:  # could giving up `later` entirely have made room for a cut of `dropped`?
                freed = next(i for i in packed.kept if i.id == later).tokens
                assert shorten_item(dropped, room + freed, estimate) is None


def test_exact_tokenizers_count_a_lone_surrogate_as_a_replacement_character() -> None:
    """JSON lets a lone surrogate through; the exact encoders raised on it, ending the assembly."""
    for name in ("cl100k", "o200k"):
        count = token_counter(name)
        assert count("fix the \ud800 login") == count("fix the \ufffd login")


def test_what_a_cut_leaves_over_takes_later_items_that_fit_whole() -> None:
    """A cut at a sentence boundary can leave room: a later 4-token note was dropped all the same,
    said to be "over the budget"."""
    first = item(0, "Short lead item of eleven tokens or so here.")
    long = item(1, " ".join(f"Sentence number {n} about the login timeout fix." for n in range(12)))
    small = item(2, "Tiny note.")
    huge = item(3, "x" * 400)
    packed = run(candidates(first, long, small, huge), 130, ladder=["truncate"])
    kept = [i.id for i in packed.kept]
    assert kept == ["i0", "i1", "i2"] and packed.cut and packed.cut[0].id == "i1"
    assert packed.tokens <= 130
    [(dropped, strategy, why)] = packed.dropped
    assert dropped.id == "i3" and strategy == "truncate"
    assert why == f"100 tokens do not fit in the {130 - packed.tokens} left of the budget of 130"
