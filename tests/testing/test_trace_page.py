"""The trace page (`assemble --html`, `replay --html`, `diff --html`): self-contained, escaped,
generic about trace entries it does not know, and rendered by headless Chromium with every section."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.trace_page import COLOURS, assembly_page

from .chromium import dump_dom, pixels, screenshot


@pytest.fixture
def seeded(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["memory", "import", str(example_copy / "seed.json"), "--workspace", str(example_copy)]) == 0
    capsys.readouterr()
    return example_copy


def _assemble_html(root: Path, page: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main(["assemble", "--workspace", str(root), "--request", str(root / "request.json"), "--json",
                 "--html", str(page), *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_page_is_self_contained_and_escaped(seeded: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    note = seeded / ".codebolt" / "memory" / "coding-standards.md"
    note.write_text("# Standards <script>alert('x')</script> & \"quotes\"\n")
    page = tmp_path / "page.html"
    result = _assemble_html(seeded, page, capsys, "--max-tokens", "600")
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html and "alert('x')" not in html and "&lt;script&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)  # nothing loaded from elsewhere
    assert "default-src 'none'" in html
    for section in ("budget", "sections", "rules", "dropped", "timings", "variables"):
        assert f"<section id={section}>" in html
    assert f"{result['meta']['token_estimate']} of 600 tokens used" in html
    assert 'data-rule="planning/arch-in-planning"' in html and "addVar.phase eq" in html
    for kind in {d["kind"] for d in result["trace"]["decisions"]}:
        assert f'data-kind="{kind}"' in html  # what was dropped, and why
    for strategy in {s["strategy"] for s in result["trace"]["ladder"]}:
        assert f'data-strategy="{strategy}"' in html  # each step of the budget ladder
    assert result["trace"]["ladder"]
    for stage in result["trace"]["stages"]:
        assert f"<td>{stage}</td>" in html


def test_unknown_trace_entries_are_still_shown() -> None:
    result = {
        "context": {"state": [{"id": "s", "content": "task", "memory_id": None, "source": "assembly://state",
                               "section": "state", "priority": "critical", "score": None, "tokens": 1,
                               "metadata": {}}]},
        "trace": {"decisions": [{"kind": "summarise_step", "reason": "summarised the older turns",
                                 "item_id": "t1", "ratio": 0.4}],
                  "ladder": [{"strategy": "compress_turns", "freed_tokens": 120}],
                  "rerank": [{"step": "x", "moved": 2}],
                  "stages": {"validate": 0.1, "new_stage": 2.5}},
        "meta": {"assembly_id": "a1", "token_estimate": 1, "total_items": 1, "duration_ms": 3.0},
    }
    html = assembly_page(result)
    assert 'data-kind="summarise_step"' in html and "<th>ratio</th>" in html and "0.4" in html
    assert 'data-strategy="compress_turns"' in html and "<th>freed_tokens</th>" in html
    assert 'data-trace-key="rerank"' in html and "<th>moved</th>" in html
    assert "<td>new_stage</td>" in html


def test_keys_and_counts_from_a_snapshot_are_escaped_too() -> None:
    """A snapshot or `--json` file is input like any other: its trace's keys become table headers
    and its section counts cells, both escaped."""
    result = {"context": {"state": []}, "meta": {"assembly_id": "a1"},
              "trace": {"decisions": [{"kind": "later", "<script>alert(1)</script>": "x"}],
                        "sections": {"state": {"tokens": 1, "items": "<img src=x>", "dropped": "<u>"}}}}
    html = assembly_page(result)
    assert "<script" not in html and "<img" not in html and "<u>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x&gt;" in html


def test_chromium_renders_every_section(seeded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "page.html"
    result = _assemble_html(seeded, page, capsys)
    dom = dump_dom(page, tmp_path / "profile-dom")
    for name in result["context"]:
        assert f'id="section-{name}"' in dom
    assert dom.count('class="item"') == result["meta"]["total_items"]
    width, height, colours = pixels(screenshot(page, tmp_path / "profile-shot", tmp_path / "shot.png"))
    assert (width, height) == (1200, 3000)
    # each section that holds tokens has its coloured bar (and swatch) on the screen
    for name, items in result["context"].items():
        if items:
            colour = tuple(int(COLOURS[name][i:i + 2], 16) for i in (1, 3, 5))
            assert colour in colours, name


def test_replay_and_diff_pages(seeded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = seeded / ".codebolt" / "context-assembly.json"
    settings.write_text(settings.read_text().replace('"snapshots": false', '"snapshots": true'))
    first = _assemble_html(seeded, tmp_path / "a.html", capsys)["meta"]["assembly_id"]
    replay_page, diff_page = tmp_path / "replay.html", tmp_path / "diff.html"
    assert main(["replay", first, "--workspace", str(seeded), "--html", str(replay_page)]) == 0
    other = json.loads((seeded / "request.json").read_text())
    other["constraints"] = {"max_tokens": 300}
    (tmp_path / "small.json").write_text(json.dumps(other))
    assert main(["diff", first, str(tmp_path / "small.json"), "--workspace", str(seeded),
                 "--html", str(diff_page)]) == 0
    capsys.readouterr()
    replay_dom = dump_dom(replay_page, tmp_path / "p1")
    assert "no drift" in replay_dom and 'id="before"' in replay_dom and 'id="after"' in replay_dom
    diff_dom = dump_dom(diff_page, tmp_path / "p2")
    assert "removed (" in diff_dom and "Tokens per section" in diff_dom
    assert diff_dom.count('id="section-knowledge"') == 2  # A and B


def _one_item(title: str, decisions: list[dict] | None = None, **trace: object) -> dict:
    return {"context": {"knowledge": [{"id": "k1", "content": "text", "memory_id": None, "source": "vector://docs/k1",
                                       "section": "knowledge", "priority": "medium", "score": 0.5, "tokens": 3,
                                       "metadata": {"title": title}}]},
            "trace": {"decisions": decisions or [], **trace},
            "meta": {"assembly_id": "a1", "token_estimate": 3, "total_items": 1, "duration_ms": 1.0}}


def test_a_title_can_neither_reverse_what_follows_nor_grow_the_page() -> None:
    """A right-to-left override in a title showed the source after it reversed; a 200,000-character
    title went into the page whole and past its width."""
    html = assembly_page(_one_item("Harmless note \u202e\x1b[2J" + "y" * 200_000))
    assert "\u202e" not in html and "\x1b" not in html and "Harmless note \\u202e\\u001b[2J" in html
    assert len(html) < 20_000 and "overflow-wrap:anywhere" in html


def test_tables_are_bounded_and_the_count_of_dropped_items_is_true() -> None:
    decisions = ([{"kind": "budget", "reason": "over", "item_id": f"i{n}"} for n in range(10_000)]
                 + [{"kind": "shortened", "reason": "cut", "item_id": "k1"},
                    {"kind": "priority", "reason": "medium -> critical", "item_id": "k1"},
                    {"kind": "conflict", "reason": "excluded", "source": "x", "by": "e/r"}])
    html = assembly_page(_one_item("t", decisions, stages={"validate": "slow"}))
    assert "Dropped, and why (10000)" in html and "Kept, changed (2)" in html and "Rule conflicts settled (1)" in html
    assert html.count("<tr>") < 1_000 and "… 9501 more in the JSON result" in html
    assert len(html) < 200_000


def test_a_result_of_the_wrong_shape_is_refused_with_its_path(seeded: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """tracePage and `diff --html` failed as internal errors (a traceback, exit 1) on a score that
    was a word or an item that was a string."""
    from context_assembly.errors import InvalidParamsError
    from context_assembly.methods import Session, call

    result = _assemble_html(seeded, tmp_path / "a.html", capsys)
    section = next(name for name, items in result["context"].items() if items)
    result["context"][section][0]["score"] = "high"
    session = Session(seeded)
    try:
        with pytest.raises(InvalidParamsError) as caught:
            call(session, "contextAssembly/tracePage", {"result": result})
    finally:
        session.close()
    assert [e["path"] for e in caught.value.errors] == [f"/result/context/{section}/0/score"]
    (tmp_path / "bad.json").write_text(json.dumps(result))
    status = main(["diff", str(seeded / "request.json"), str(tmp_path / "bad.json"), "--workspace", str(seeded),
                   "--html", str(tmp_path / "d.html")])
    captured = capsys.readouterr()
    assert status == 2 and "Traceback" not in captured.err and f"/context/{section}/0/score" in captured.err
    snapshot = seeded / "bad-snapshot.json"
    snapshot.write_text(json.dumps({"request": json.loads((seeded / "request.json").read_text()), "result": result}))
    status = main(["replay", "bad-snapshot.json", "--workspace", str(seeded)])
    captured = capsys.readouterr()
    assert status == 2 and "Traceback" not in captured.err
    assert f"/snapshot/result/context/{section}/0/score" in captured.err
