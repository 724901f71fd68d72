"""Input steps: derive the query the later steps search with, or rewrite it."""

from __future__ import annotations

import re
from typing import Any

from ...registry.values import MISSING
from ...registry.variables import canonical_field
from ..context import StepContext, StepError, choice_param, texts_param
from ..model import ModelUnavailable, ask_model

METHODS = ("passthrough", "keyword_extract", "llm_rephrase")

# Words that carry no meaning for a search; small on purpose (English, as the seeds are).
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing done down during each else few for from further get got had
has have having he her here hers herself him himself his how i if in into is it its itself just let lets like
make me more most my myself need no nor not now of off on once only or other our ours ourselves out over own
please same she should so some such than that the their theirs them themselves then there these they this
those through to too under until up us use using very want was we were what when where which while who whom
why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# a word: letters/digits, keeping inner `_ - . /` so identifiers and paths (auth_service.py) survive
_WORD = re.compile(r"[^\W_](?:[\w\-./]*[^\W_])?")


def keywords(text: str) -> list[str]:
    """Lowercase words without stopwords and punctuation, in order, each once."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_as_text(v) for v in value)
    return "" if value is None or isinstance(value, dict) else str(value)


def source_text(keys: list[str], ctx: StepContext) -> str:
    """The first key with a non-empty value wins: later keys are fallbacks (`query` = current query)."""
    for key in keys:
        if key == "query":
            value: Any = ctx.query
        else:
            canonical = canonical_field(key)
            ctx.variables_used.add(canonical)
            value = ctx.lookup.get(canonical, MISSING)
        text = _as_text(value).strip() if value is not MISSING else ""
        if text:
            return text
    return ""


def derive_query(params: dict[str, Any], ctx: StepContext) -> None:
    keys = texts_param(params, "from") or ["input.text"]
    method = choice_param(params, "method", METHODS, "passthrough")
    text = source_text(keys, ctx)
    if not text:
        ctx.warn(f"none of {', '.join(keys)} has a value: the query is empty")
    if method == "llm_rephrase":
        if text:  # nothing to rephrase: the model is not asked
            try:
                ctx.query = " ".join(ask_model(ctx, _rephrase_request(text)).split())
                return
            except ModelUnavailable as exc:  # keyword extraction is the honest stand-in
                ctx.warn(f"llm_rephrase: {exc}; used keyword_extract instead")
                ctx.passing = ctx.llm is not None  # the next turn asks the model again
        method = "keyword_extract"
    ctx.query = " ".join(keywords(text)) if method == "keyword_extract" else text


REPHRASE_SYSTEM = ("You turn a coding agent's task into a search query for its memory stores. "
                   "Answer with the query only: one line, no quotes, no explanation.")


def _rephrase_request(text: str) -> dict[str, Any]:
    return {"system": REPHRASE_SYSTEM, "prompt": f"Rephrase as a short search query:\n\n{text}"}


def rewrite_query(params: dict[str, Any], ctx: StepContext) -> None:
    # `template` was filled by the runner (${query} = the current query); a lone ${x} may be a number
    if params.get("template") is None:
        raise StepError("'template' is required")
    ctx.query = _as_text(params["template"]).strip()
