"""The trace page: one self-contained HTML file (no script, style or font from anywhere else)
showing an assembly as people read it — the sections in order with their items, a token bar per
section against the budget, the rules that fired with their conditions, what was dropped and why,
and the timing of each stage and pipeline. Also the page of a replay and of a diff.

Works on the JSON shape of an assembly (a fresh result, or a snapshot's `result`) and renders
trace entries generically: a decision kind, a stage or a trace key it does not know is still
shown, with every field it carries. Every text from the assembly is escaped, and its control
characters and bidirectional overrides are shown as escapes (`\u202e`: a title must not reverse
the source printed after it); a value of an unexpected type is shown, never a failure. The page
stays bounded: titles cut at TITLE_CHARS, content at PREVIEW_CHARS, each table at MAX_ROWS rows
(the JSON result has all of them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from html import escape
from typing import Any

from .controls import BIDI, C1
from .registry.sections import SECTION_NAMES

# One colour per section: the token bars and the section headings share it.
COLOURS = {"state": "#2f6fdf", "warnings": "#d9822b", "constraints": "#8e44ad", "knowledge": "#1e9e5a",
           "history": "#c0392b", "suggestions": "#16a0b5", "working_memory": "#7f8c1d"}
OTHER_COLOUR = "#777777"
KNOWN_TRACE_KEYS = ("memory_calls", "rules_applied", "variables_used", "missing_variables", "sections", "decisions",
                    "section_order", "stages", "ladder")
PREVIEW_CHARS = 4000
TITLE_CHARS = 200
MAX_ROWS = 500  # rows of one table (10,000 decisions made a 5 MB page)
# controls but tab, newline and carriage return; C1; the bidirectional marks, embeddings and overrides
_UNSEEN = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{C1}{BIDI}]")
KEPT_CHANGED = ("shortened", "priority")  # decisions about items still in the context

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d1f23;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:16px 0 6px}
.meta{color:#555}.muted{color:#777}.warn{color:#b04a00}
table{border-collapse:collapse;width:100%;margin:6px 0}
td,th{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{position:relative;height:16px;background:#e9ecef;border-radius:3px;min-width:240px}
.bar>span{position:absolute;left:0;top:0;bottom:0;border-radius:3px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.item{border:1px solid #ddd;border-left-width:5px;background:#fff;margin:6px 0;border-radius:3px}
.item summary{cursor:pointer;padding:4px 8px;overflow-wrap:anywhere}
td{overflow-wrap:anywhere}
.item pre{margin:0;padding:6px 10px;white-space:pre-wrap;word-break:break-word;border-top:1px solid #eee;
background:#fcfcfc;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
.tag{display:inline-block;border:1px solid #ccc;border-radius:9px;padding:0 7px;margin-left:4px;font-size:12px;
color:#444;background:#fff}
.cond{font:12px/1.5 ui-monospace,SFMono-Regular,Menlo,monospace;margin:0 0 0 18px;padding:0;list-style:none}
.cond li.ok::before{content:"\\2713 ";color:#1e9e5a}.cond li.no::before{content:"\\2717 ";color:#c0392b}
.added{background:#e8f7ee}.removed{background:#fdecea}.moved{background:#eef3fd}.changed{background:#fff7e0}
"""


def _shown(text: str) -> str:
    return _UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _e(value: Any) -> str:
    return escape(_shown("" if value is None else str(value)), quote=True)


def _json(value: Any) -> str:
    return escape(_shown(json.dumps(value, ensure_ascii=False, default=str)), quote=True)


def _num(value: Any) -> float:
    """A number of the trace as a float (0 for what is none: a value of another type is not fatal)."""
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _texts(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value or "")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _capped(rows: list[Any], width: int) -> list[Any]:
    """At most MAX_ROWS rows, the last one saying how many more the JSON result holds."""
    if len(rows) <= MAX_ROWS:
        return rows
    more = f"<span class=muted>… {len(rows) - MAX_ROWS + 1} more in the JSON result</span>"
    return rows[: MAX_ROWS - 1] + [[more] + [""] * (width - 1)]


def _colour(section: str) -> str:
    return COLOURS.get(section, OTHER_COLOUR)


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[int] = ()) -> str:
    nums = set(numeric)
    headers = list(headers)
    head = "".join(f'<th{" class=num" if i in nums else ""}>{_e(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in nums else ""}>{c}</td>' for i, c in enumerate(row))
                   + "</tr>" for row in _capped([list(r) for r in rows], len(headers)))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>\n")


# -- one assembly --------------------------------------------------------------------------------


def _order(result: dict[str, Any]) -> list[str]:
    trace = result.get("trace") or {}
    context = result.get("context") or {}
    order = [s for s in trace.get("section_order") or SECTION_NAMES if s in context]
    return order + [s for s in context if s not in order]


def _bars(result: dict[str, Any]) -> str:
    meta, trace = result.get("meta") or {}, result.get("trace") or {}
    sections = trace.get("sections") or {}
    context = result.get("context") or {}
    budget = meta.get("max_tokens")
    tokens = {name: int(_num((sections.get(name) or {}).get("tokens")) or sum(int(_num(i.get("tokens")))
                        for i in _dicts(context.get(name)))) for name in _order(result)}
    scale = budget or max(sum(tokens.values()), 1)
    rows = []
    for name, count in tokens.items():
        info = sections.get(name) or {}
        width = min(100.0, 100.0 * count / scale) if scale else 0.0
        bar = (f'<div class=bar title="{count} of {scale} tokens"><span style="width:{width:.2f}%;'
               f'background:{_colour(name)}"></span></div>')
        rows.append((f'<span class=swatch style="background:{_colour(name)}"></span>{_e(name)}', str(count),
                     _e(info.get("items", len(context.get(name) or []))), _e(info.get("dropped", 0)),
                     "yes" if info.get("truncated") else "", bar))
    total = sum(tokens.values())
    caption = f"{total} of {budget} tokens used" if budget else f"{total} tokens (no budget: bars are shares)"
    return (f'<section id=budget><h2>Tokens per section</h2><p class=meta>{_e(caption)}</p>'
            + _table(("section", "tokens", "items", "dropped", "truncated", "share of the budget"), rows, (1, 2, 3))
            + "</section>")


def _item(item: Any) -> str:
    if not isinstance(item, dict):
        return f"<pre>{_json(item)}</pre>"
    content = str(item.get("content") or "")
    shown = content if len(content) <= PREVIEW_CHARS else content[:PREVIEW_CHARS] + "\n… (cut in this view)"
    metadata: dict[str, Any] = item["metadata"] if isinstance(item.get("metadata"), dict) else {}
    title = _cut(str(metadata.get("title") or item.get("id")), TITLE_CHARS)
    score = item.get("score")
    tags = [f"<span class=tag>{_e(item.get('priority'))}</span>",
            f"<span class=tag>{_e(item.get('tokens'))} tok</span>"]
    if isinstance(score, int | float):
        tags.append(f"<span class=tag>score {float(score):.2f}</span>")
    source = item.get("memory_id") or item.get("source")
    return (f'<details class=item data-item="{_e(item.get("id"))}" style="border-left-color:'
            f'{_colour(str(item.get("section")))}" open><summary><b>{_e(title)}</b> '
            f'<span class=muted>&lt;{_e(_cut(str(source), TITLE_CHARS))}&gt;</span>{"".join(tags)}</summary>'
            f'<pre>{_e(shown)}</pre></details>')


def _sections(result: dict[str, Any]) -> str:
    context = result.get("context") or {}
    out = ["<section id=sections><h2>Sections, in packing order</h2>"]
    for name in _order(result):
        items: list[Any] = context[name] if isinstance(context.get(name), list) else []
        tokens = sum(int(_num(i.get("tokens"))) for i in _dicts(items))
        out.append(f'<section class=context-section id="section-{_e(name)}" data-section="{_e(name)}">'
                   f'<h3><span class=swatch style="background:{_colour(name)}"></span>{_e(name)} '
                   f'<span class=muted>({len(items)} items, {tokens} tokens)</span></h3>')
        out += [_item(item) for item in items] or ["<p class=muted>empty</p>"]
        out.append("</section>")
    out.append("</section>")
    return "".join(out)


def _conditions(conditions: Any) -> str:
    rows = []
    for c in _dicts(conditions):
        mark = "ok" if c.get("result") else "no"
        if c.get("group"):
            rows.append(f"<li class={mark}>{_e(c['group'])}:{_conditions(c.get('conditions') or [])}</li>")
            continue
        value = "" if c.get("operator") in ("exists", "not_exists") else " " + _json(c.get("value"))
        actual = _json(c.get("actual")) if c.get("present", True) else "absent"
        error = f' <span class=warn>{_e(c["error"])}</span>' if c.get("error") else ""
        rows.append(f"<li class={mark}>{_e(c.get('field'))} {_e(c.get('operator'))}{value} "
                    f"<span class=muted>(actual: {actual})</span>{error}</li>")
    return f"<ul class=cond>{''.join(rows)}</ul>"


def _rules(trace: dict[str, Any]) -> str:
    rules = _dicts(trace.get("rules_applied"))
    if not rules:
        return "<section id=rules><h2>Rules that fired</h2><p class=muted>none</p></section>"
    out = [f"<section id=rules><h2>Rules that fired ({len(rules)})</h2>"]
    for rule in _capped(rules, 1):
        if isinstance(rule, list):  # the row saying how many more
            out.append(f"<p>{rule[0]}</p>")
            continue
        adds = _texts(rule.get("memories")) or "(actions only)"
        out.append(f'<div class=rule data-rule="{_e(rule.get("engine_id"))}/{_e(rule.get("rule_id"))}"><b>'
                   f'{_e(rule.get("engine_id"))}/{_e(rule.get("rule_id"))}</b> <span class=muted>priority '
                   f'{_e(rule.get("priority"))} → {_e(adds)}</span>{_conditions(rule.get("conditions") or [])}</div>')
    return "".join(out) + "</section>"


def _generic_rows(entries: list[dict[str, Any]], first: tuple[str, ...]) -> str:
    keys = list(first) + sorted({k for e in entries for k in e if k not in first})
    rows = [[_e(e.get(k)) if not isinstance(e.get(k), (dict, list)) else _json(e.get(k)) for k in keys]
            for e in entries]
    return _table(keys, rows)


def _ladder(trace: dict[str, Any]) -> str:
    """The budget ladder's steps (`trace.ladder`), one table per strategy in the order they ran."""
    steps = _dicts(trace.get("ladder"))
    if not steps:
        return ""
    strategies: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        strategies.setdefault(str(step.get("strategy")), []).append(step)
    out = [f"<h3>Budget ladder ({len(steps)} step(s))</h3>"]
    for strategy, entries in strategies.items():
        rows = [{k: v for k, v in e.items() if k != "strategy"} for e in entries]
        out.append(f'<h4 class=ladder-step data-strategy="{_e(strategy)}">{_e(strategy)} ({len(entries)})</h4>'
                   + _generic_rows(rows, ("action", "item_id", "memory_id", "section", "tokens_before",
                                          "tokens_after", "reason")))
    return "".join(out)


def _kinds(decisions: list[dict[str, Any]]) -> str:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for decision in decisions:
        kinds.setdefault(str(decision.get("kind")), []).append(decision)
    out = []
    for kind, entries in kinds.items():  # one table per kind (a ladder step, a cap, ...), in trace order
        rows = [{k: v for k, v in e.items() if k != "kind"} for e in entries]
        out.append(f'<h3 class=decision-kind data-kind="{_e(kind)}">{_e(kind)} ({len(entries)})</h3>'
                   + _generic_rows(rows, ("item_id", "memory_id", "section", "tokens", "reason", "by")))
    return "".join(out)


def _dropped(trace: dict[str, Any]) -> str:
    """What was left out, then what was kept but changed (shortened, re-prioritised) and the rule
    conflicts settled: the heading counts only the items left out."""
    decisions = _dicts(trace.get("decisions"))
    dropped = [d for d in decisions if d.get("kind") not in (*KEPT_CHANGED, "conflict")]
    kept = [d for d in decisions if d.get("kind") in KEPT_CHANGED]
    conflicts = [d for d in decisions if d.get("kind") == "conflict"]
    out = [f"<section id=dropped><h2>Dropped, and why ({len(dropped)})</h2>"
           + (_kinds(dropped) if dropped else "<p class=muted>nothing was dropped</p>")]
    if kept:
        out.append(f"<h2 id=kept-changed>Kept, changed ({len(kept)})</h2>" + _kinds(kept))
    if conflicts:
        out.append(f"<h2 id=conflicts>Rule conflicts settled ({len(conflicts)})</h2>" + _kinds(conflicts))
    return "".join(out) + _ladder(trace) + "</section>"


def _timings(result: dict[str, Any]) -> str:
    trace, meta = result.get("trace") or {}, result.get("meta") or {}
    stages: dict[str, Any] = trace["stages"] if isinstance(trace.get("stages"), dict) else {}
    total = _num(meta.get("duration_ms")) or sum([_num(ms) for ms in stages.values()]) or 1.0
    rows = [(_e(name), f"{_num(ms):.2f}", f'<div class=bar role=img aria-label="{_num(ms):.2f} ms"><span style="width:'
             f'{min(100.0, 100 * _num(ms) / total):.2f}%;background:#5b6b7f"></span></div>')
            for name, ms in stages.items()]
    out = [f"<section id=timings><h2>Timings</h2><p class=meta>{total:.2f} ms in all</p>",
           _table(("stage", "ms", "share"), rows, (1,))]
    calls = _dicts(trace.get("memory_calls"))
    if calls:
        out.append("<h3>Pipelines</h3>")
        call_rows = []
        for call in calls:
            steps = ", ".join(f"{s.get('type')} {_num(s.get('duration_ms')):.1f} ms ({s.get('count')})"
                              for s in _dicts(call.get("steps")))
            status = _e(call.get("status")) + (f' <span class=warn>{_e(call.get("error"))}</span>'
                                               if call.get("error") else "")
            call_rows.append((_e(call.get("reference")), status, _e(_texts(call.get("origin"))),
                              _e(call.get("items", 0)), f"{_num(call.get('duration_ms')):.2f}", _e(steps)))
        out.append(_table(("memory", "status", "from", "items", "ms", "steps"), call_rows, (3, 4)))
    return "".join(out) + "</section>"


def _variables(trace: dict[str, Any]) -> str:
    used, missing = _texts(trace.get("variables_used")), _texts(trace.get("missing_variables"))
    return (f"<section id=variables><h2>Variables</h2><p><b>used</b>: {_e(used) or '-'}</p>"
            f"<p><b>missing</b>: <span class=warn>{_e(missing) or '-'}</span></p></section>")


def _other(trace: dict[str, Any]) -> str:
    """Trace entries this page has no view of (added by later versions): shown as they are."""
    extra = {k: v for k, v in trace.items() if k not in KNOWN_TRACE_KEYS}
    if not extra:
        return ""
    out = ["<section id=other-trace><h2>More of the trace</h2>"]
    for key, value in extra.items():
        out.append(f'<h3 data-trace-key="{_e(key)}">{_e(key)}</h3>')
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out.append(_generic_rows(value, ()))
        elif isinstance(value, dict) and value and all(not isinstance(v, (dict, list)) for v in value.values()):
            out.append(_table(("key", "value"), ((_e(k), _e(v)) for k, v in value.items())))
        else:
            out.append(f"<pre>{_e(json.dumps(value, indent=2, ensure_ascii=False, default=str))}</pre>")
    return "".join(out) + "</section>"


def _header(result: dict[str, Any], heading: str) -> str:
    meta = result.get("meta") or {}
    budget = f" of {meta['max_tokens']}" if meta.get("max_tokens") else " (no budget)"
    truncated = " — <span class=warn>truncated</span>" if meta.get("truncated") else ""
    return (f"<h1>{_e(heading)}</h1><p class=meta>assembly <code>{_e(meta.get('assembly_id'))}</code>: "
            f"{_e(meta.get('total_items'))} items, {_e(meta.get('token_estimate'))} tokens{_e(budget)}, "
            f"{_num(meta.get('duration_ms')):.1f} ms, tokenizer {_e(meta.get('tokenizer', 'estimate'))}"
            f"{truncated}</p>")


def assembly_body(result: dict[str, Any], heading: str = "Assembled context") -> str:
    trace = result.get("trace") or {}
    return (_header(result, heading) + _bars(result) + _sections(result) + _rules(trace) + _dropped(trace)
            + _timings(result) + _variables(trace) + _other(trace))


def assembly_page(result: dict[str, Any], title: str | None = None) -> str:
    meta = result.get("meta") or {}
    return _page(title or f"Assembly {meta.get('assembly_id')}", assembly_body(result))


# -- replay and diff -----------------------------------------------------------------------------


def _diff_body(diff: dict[str, Any]) -> str:
    out = ["<section id=diff><h2>What changed</h2>"]
    if diff.get("identical"):
        out.append("<p>Identical: the same items in the same places.</p>")
    for key, css, label in (("added", "added", "added"), ("removed", "removed", "removed")):
        rows = [(_e(i.get("section")), _e(i.get("memory")), _e(i.get("id")), _e(i.get("tokens")), _e(i.get("preview")))
                for i in diff.get(key) or []]
        if rows:
            out.append(f"<h3 class={css}>{label} ({len(rows)})</h3>"
                       + _table(("section", "memory", "item", "tokens", "preview"), rows, (3,)))
    moved = [(_e(i.get("memory")), _e(i.get("id")), _e(i.get("from")), _e(i.get("to")))
             for i in diff.get("moved") or []]
    if moved:
        out.append(f"<h3 class=moved>moved between sections ({len(moved)})</h3>"
                   + _table(("memory", "item", "from", "to"), moved))
    ranks = [(_e(i.get("section")), _e(i.get("memory")), _e(i.get("id")), _e(i.get("from_rank")), _e(i.get("to_rank")))
             for i in diff.get("reranked") or []]
    if ranks:
        out.append(f"<h3 class=moved>re-ranked ({len(ranks)})</h3>"
                   + _table(("section", "memory", "item", "rank before", "rank after"), ranks, (3, 4)))
    changed = [(_e(i.get("section")), _e(i.get("memory")), _e(i.get("id")), _e(i.get("tokens_before")),
                _e(i.get("tokens"))) for i in diff.get("changed") or []]
    if changed:
        out.append(f"<h3 class=changed>content changed ({len(changed)})</h3>"
                   + _table(("section", "memory", "item", "tokens before", "tokens after"), changed, (3, 4)))
    sections = diff.get("sections") or {}
    out.append("<h3>Tokens per section</h3>" + _table(
        ("section", "before", "after", "delta"),
        ((f'<span class=swatch style="background:{_colour(n)}"></span>{_e(n)}', _e(t.get("before")),
          _e(t.get("after")), f"{int(t.get('delta') or 0):+d}") for n, t in sections.items()), (1, 2, 3)))
    rules, memories = diff.get("rules") or {}, diff.get("memories") or {}
    facts = [("rules now firing", rules.get("fired")), ("rules no longer firing", rules.get("no_longer_fired")),
             ("memories now activated", memories.get("added")),
             ("memories no longer activated", memories.get("removed"))]
    out += [f"<p><b>{_e(label)}</b>: {_e(', '.join(values))}</p>" for label, values in facts if values]
    for change in memories.get("status_changed") or []:
        out.append(f"<p><b>{_e(change.get('reference'))}</b>: {_e(change.get('before'))} → "
                   f"{_e(change.get('after'))}</p>")
    return "".join(out) + "</section>"


def diff_page(diff: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> str:
    body = ("<h1>Assembly diff</h1>" + _diff_body(diff)
            + f"<div id=before>{assembly_body(before, 'A (before)')}</div>"
            + f"<div id=after>{assembly_body(after, 'B (after)')}</div>")
    return _page("Assembly diff", body)


def replay_page(replay: dict[str, Any]) -> str:
    before = replay.get("before") or {}
    verdict = "drifted" if replay.get("drifted") else "no drift"
    body = (f"<h1>Replay of {_e((before.get('meta') or {}).get('assembly_id'))}: {_e(verdict)}</h1>"
            + _diff_body(replay.get("drift") or {})
            + f"<div id=after>{assembly_body(replay.get('after') or {}, 'Today')}</div>"
            + f"<div id=before>{assembly_body(before, 'As stored')}</div>")
    return _page("Replay", body)
