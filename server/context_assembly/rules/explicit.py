"""The references a request names itself: `explicit_memory` and `@mentions` in the task text (SPEC §5.1).

Both are explicit: no rule excludes them (§4.3). Settling reads them here, the assembly's
resolve stage too, so `evaluateRules` explains exactly what `assemble` decides.
"""

from __future__ import annotations

import re

from ..model.request import AssemblyRequest

# @architecture-docs, @kv://user-preferences, @file://src/auth.py — not e-mail addresses
_MENTION = re.compile(r"(?<![\w@])@([a-z][a-z0-9+.-]*://[^\s,;)\]}>\"']+|[A-Za-z0-9_](?:[\w.-]*[\w])?)")
EXPLICIT = "explicit_memory"
MENTION = "mention"


def mentions(text: str | None) -> list[str]:
    if not text or "@" not in text:  # (most task texts: no scan)
        return []
    found = [m.group(1).rstrip(".") for m in _MENTION.finditer(text)]
    return list(dict.fromkeys(found))


def explicit_references(request: AssemblyRequest) -> dict[str, str]:
    """Each reference the request names -> how: `explicit_memory` first, then `mention`."""
    named = dict.fromkeys(request.explicit_memory, EXPLICIT)
    for reference in mentions(request.input.text if request.input else None):
        named.setdefault(reference, MENTION)
    return named
