"""Memory URIs (SPEC §5.1): parsing into `MemoryUri`, rendering back, list prefixes, `since` times.

`parts` holds the percent-decoded address, its meaning fixed per scheme:

| scheme | parts |
| --- | --- |
| kv | (instance, namespace, key), defaults filled in |
| json | (doc,) — the fragment is the JSON pointer |
| markdown | (note,) — a relative path without `.md` |
| vector | (collection,) or (collection, doc_uri) |
| graph | (view,) or (instance, "node" or "edge", id) |
| log | (instance,) or (instance, event_id) |
| episodic | (thread_id,) |
| working | (thread_id,) or (thread_id, key) |
| blob | (bucket, key) |
| file | (path,) — workspace-relative |

Keys are opaque strings: after the segments a scheme names, the rest of the path (slashes
included) is the last part. `kv://` is the exception, since its one to three segments are told
apart by count: a `/` inside a KV key is written `%2F`.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from urllib.parse import quote, unquote

from attrs import field, frozen

from ..limits import current
from .confine import check_key, check_relative_path, refuse

DEFAULT = "default"
SCHEMES: tuple[str, ...] = ("kv", "json", "markdown", "vector", "graph", "log", "episodic", "working", "blob", "file")
# Room for any name the stores take, percent-encoded as `render` writes it (up to 12 characters
# for one: a path of 4,096 characters outside the BMP is 49,152), so every listed URI reads back.
MAX_URI_LENGTH = 65_536

# Which query parameters each scheme understands (camelCase spellings of the pipeline steps too).
_PARAMS: dict[str, frozenset[str]] = {
    "vector": frozenset({"q", "query", "top_k", "topK", "min_score", "minScore", "mode"}),
    "log": frozenset({"event_type", "eventType", "since", "limit", "fields", "before"}),
    "episodic": frozenset({"limit", "before"}),
}
# A view's query parameters are its bound parameters, so any name goes for `graph://<view>`.
_HISTORY = frozenset({"episodic", "log"})

_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
_SCHEME_ONLY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)(?::(?://)?)?")
_RELATIVE_TIME = re.compile(r"[+-]?\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)", re.IGNORECASE)
_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair: no store can encode it
# Rendering keeps the characters people type in names readable and encodes the rest.
_SAFE = "-._~!$&'()*+,;=:@"
# A name of those alone is written as it is: `quote` is a few microseconds a part, and every hit of
# a restricted caller's search is named (its patterns are matched against the name)
_PLAIN = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]*")
_PLAIN_PATH = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]*")


def _encoded(part: str, safe: str) -> str:
    plain = _PLAIN_PATH if "/" in safe else _PLAIN
    return part if plain.fullmatch(part) else quote(part, safe=safe)


@frozen
class MemoryUri:
    scheme: str
    parts: tuple[str, ...]
    params: tuple[tuple[str, str], ...] = ()
    fragment: str | None = None
    since: float | None = None  # log://…?since=, as epoch seconds (relative times taken at parse time)
    text: str = field(default="", eq=False)  # the URI as written

    def param(self, *names: str) -> str | None:
        """The last value of the first of `names` present (aliases such as top_k / topK)."""
        for name in names:
            values = [v for k, v in self.params if k == name]
            if values:
                return values[-1]
        return None

    def param_list(self, *names: str) -> list[str]:
        """Every value of `names`, repeated or comma-separated."""
        return [item.strip() for k, v in self.params if k in names for item in v.split(",") if item.strip()]

    @property
    def pointer(self) -> str:
        return self.fragment or ""

    @property
    def canonical(self) -> str:
        return render(self.scheme, self.parts, pointer=self.fragment)


def is_memory_uri(text: object) -> bool:
    """Whether `text` looks like a store URI of a known scheme (not whether it is well-formed)."""
    if not isinstance(text, str):
        return False
    match = _URI.match(text)
    return match is not None and match.group(1).lower() in SCHEMES


def default_section(uri: MemoryUri | str) -> str:
    """The section a store URI used directly as a reference contributes to (SPEC §5.1)."""
    scheme = uri.scheme if isinstance(uri, MemoryUri) else split_scheme(uri)
    if scheme in _HISTORY:
        return "history"
    if scheme == "working":
        return "working_memory"
    return "knowledge"


def split_scheme(text: object, pointer: str = "/uri") -> str:
    if not isinstance(text, str):
        raise refuse("a memory URI must be a string", pointer)
    match = _URI.match(text)
    if not match:
        raise refuse(f"{_short(text)} is not a memory URI (expected <scheme>://…, scheme one of "
                     f"{', '.join(SCHEMES)})", pointer)
    scheme = match.group(1).lower()
    if scheme not in SCHEMES:
        raise refuse(f"unknown memory URI scheme '{scheme}://' (known: {', '.join(SCHEMES)})", pointer)
    return scheme


def parse_uri(text: object, *, pointer: str = "/uri", now: float | None = None) -> MemoryUri:
    """Parse a §5.1 store URI; InvalidParamsError (at `pointer`) when it is malformed."""
    scheme = split_scheme(text, pointer)
    assert isinstance(text, str)
    if len(text) > MAX_URI_LENGTH:
        raise refuse(f"the URI is too long ({len(text)} characters; at most {MAX_URI_LENGTH})", pointer)
    if _CONTROL.search(text):
        raise refuse(f"{_short(text)} contains a control character", pointer)
    _check_surrogates(text, pointer)
    rest = text[len(scheme) + 3:]
    rest, hash_mark, fragment_raw = rest.partition("#")
    path, question, query = rest.partition("?")
    params = _parse_query(scheme, query, pointer) if question else ()
    fragment: str | None = None
    if hash_mark:
        if scheme != "json":
            raise refuse(f"{_short(text)}: only json:// takes a #fragment (a JSON pointer); "
                         "write '#' in a name as %23", pointer)
        fragment = _decode(fragment_raw, text, pointer)
        if fragment and not fragment.startswith("/"):
            raise refuse(f"{_short(text)}: the JSON pointer must start with '/' (got {fragment!r})", pointer)
    if question and scheme not in _PARAMS and not (scheme == "graph" and "/" not in path):
        raise refuse(f"{_short(text)}: {scheme}:// takes no ?query; write '?' in a name as %3F", pointer)
    parts = _PARSERS[scheme](path, text, pointer)
    since = None
    if scheme == "log":
        since_text = dict(params).get("since")
        if since_text is not None:
            since = parse_since(since_text, now=now, pointer=pointer)
        limit = dict(params).get("limit")
        if limit is not None:
            parse_limit(limit, pointer)
    if scheme == "episodic" and dict(params).get("limit") is not None:
        parse_limit(dict(params)["limit"], pointer)
    if scheme in _HISTORY and dict(params).get("before") is not None:
        parse_before(dict(params)["before"], pointer)
    return MemoryUri(scheme, parts, params, fragment, since, text)


def parse_limit(text: str | int, pointer: str = "/uri") -> int:
    """The `limit` of a log:// or episodic:// read: 1 to limits.log_limit."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise refuse(f"limit must be a positive integer (got {text!r})", pointer) from None
    maximum = current().log_limit
    if not 1 <= value <= maximum:
        raise refuse(f"limit must be between 1 and {maximum} (got {value}; limits.log_limit)", pointer)
    return value


def parse_before(text: str, pointer: str = "/uri") -> int:
    """The `before` of a log:// or episodic:// read (paging back): an event id or a turn's seq."""
    if not (text.isascii() and text.isdigit()) or int(text) >= 2**63:
        raise refuse(f"before must be an event id or a turn's seq, a whole number (got {text!r})", pointer)
    return int(text)


def parse_since(text: object, *, now: float | None = None, pointer: str = "/uri") -> float:
    """`-7d`, `-12h`, `-30m`, `-45s`, `-2w` (ago), an ISO 8601 time, or epoch seconds → epoch seconds."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise refuse(f"since must be a relative age such as -7d or an ISO 8601 time (got {text!r})", pointer)
    if isinstance(text, (int, float)):
        return _finite(float(text), text, pointer)
    stripped = text.strip()
    relative = _RELATIVE_TIME.fullmatch(stripped)
    if relative:
        amount = float(relative.group(1)) * _UNITS[relative.group(2).lower()]
        return (time.time() if now is None else now) - amount
    try:
        return _finite(float(stripped), text, pointer)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        raise refuse(f"since {text!r} is neither a relative age (-7d, -12h, -30m) nor an ISO 8601 time",
                     pointer) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # a time without offset is read as UTC
    return moment.timestamp()


def _finite(seconds: float, text: object, pointer: str) -> float:
    """Epoch seconds that compare: NaN matched nothing and kept every event out, silently."""
    if not math.isfinite(seconds):
        raise refuse(f"since must be a finite time (got {text!r})", pointer)
    return seconds


_HEADED = frozenset({"vector", "log", "working", "blob"})  # <head>/<rest> (`_head_and_rest`)


def render(scheme: str, parts: tuple[str, ...] | list[str], *, pointer: str | None = None,
           longest: bool = False) -> str:
    """The canonical URI of an address: shortest kv:// form, each part percent-encoded.
    `longest`: kv:// with all three segments, defaults written (how pipeline items name an entry)."""
    parts = tuple(parts)
    if scheme == "kv":
        instance, namespace, key = parts
        shown = [instance, namespace, key] if longest else [key] if (instance, namespace) == (DEFAULT, DEFAULT) \
            else [namespace, key] if instance == DEFAULT else [instance, namespace, key]
        body = "/".join(_encoded(p, _SAFE) for p in shown)
    elif scheme in _HEADED or scheme == "graph" and len(parts) == 3:
        # <head>/<rest>, <instance>/<kind>/<id>: the head is one segment, its '/' encoded (a thread
        # "t/1" listed as working://t/1/k read another item); the rest, an id too, is a path as written
        body = "/".join(_encoded(p, _SAFE if i == 0 else _SAFE + "/") for i, p in enumerate(parts))
    else:
        body = "/".join(_encoded(p, _SAFE + "/") for p in parts)
        if scheme == "markdown" and body.endswith(".md"):
            body += ".md"  # a note named `x.md`: the parser drops one written `.md`
    uri = f"{scheme}://{body}"
    if pointer:
        uri += "#" + quote(pointer, safe=_SAFE + "/")
    return uri


def normalize_prefix(prefix: object, pointer: str = "/prefix") -> tuple[str, str]:
    """(scheme, prefix) with the prefix written as `render` writes URIs, for string comparison.

    `kv`, `kv:` and `kv://` all mean every kv:// item.
    """
    if not isinstance(prefix, str):
        raise refuse("the prefix must be a string such as kv:// or markdown://notes/", pointer)
    match = _URI.match(prefix)
    if match is None:
        bare = _SCHEME_ONLY.fullmatch(prefix)
        if bare is None:
            raise refuse(f"{_short(prefix)} is not a memory URI prefix (expected <scheme>://…)", pointer)
        match_scheme, body = bare.group(1), ""
    else:
        match_scheme, body = match.group(1), match.group(2)
    scheme = match_scheme.lower()
    if scheme not in SCHEMES:
        raise refuse(f"unknown memory URI scheme '{scheme}://' (known: {', '.join(SCHEMES)})", pointer)
    if _CONTROL.search(body):
        raise refuse(f"{_short(prefix)} contains a control character", pointer)
    _check_surrogates(body, pointer)
    if "?" in body or "#" in body:
        raise refuse(f"{_short(prefix)}: a list prefix takes no ?query or #fragment", pointer)
    # each segment as `render` writes that part: a '/' inside it (written %2F) is encoded only where
    # render encodes it (every kv:// part, the head of a <head>/<rest> URI), so both spellings list alike
    segments = [quote(_decode(segment, prefix, pointer), safe=_SAFE if _slash_encoded(scheme, i) else _SAFE + "/")
                for i, segment in enumerate(body.split("/"))]
    return scheme, f"{scheme}://" + "/".join(segments)


def _slash_encoded(scheme: str, position: int) -> bool:
    """Whether `render` writes a '/' inside the part at this position of a URI as %2F."""
    return scheme == "kv" or position == 0 and (scheme in _HEADED or scheme == "graph")


# -- per-scheme parts


def _segments(path: str, text: str, pointer: str) -> list[str]:
    if not path:
        raise refuse(f"{_short(text)} names nothing after the scheme", pointer)
    raw = path.split("/")
    if "" in raw:
        raise refuse(f"{_short(text)} has an empty segment ('//' or a trailing '/')", pointer)
    return [_decode(segment, text, pointer) for segment in raw]


def _head_and_rest(path: str, text: str, pointer: str, what: tuple[str, str], rest_required: bool) -> tuple[str, ...]:
    head_raw, slash, rest_raw = path.partition("/")
    head = check_key(_decode(head_raw, text, pointer) if head_raw else "", what=what[0], pointer=pointer)
    if not slash:
        if rest_required:
            raise refuse(f"{_short(text)} names no {what[1]}", pointer)
        return (head,)
    rest = check_key(_decode(rest_raw, text, pointer) if rest_raw else "", what=what[1], pointer=pointer)
    return (head, rest)


def _kv(path: str, text: str, pointer: str) -> tuple[str, ...]:
    segments = _segments(path, text, pointer)
    if len(segments) > 3:
        raise refuse(f"{_short(text)}: kv:// takes at most <instance>/<namespace>/<key>; "
                     "write '/' inside a key as %2F", pointer)
    for segment, what in zip(segments, ("instance", "namespace", "key")[-len(segments):], strict=True):
        check_key(segment, what=f"KV {what}", pointer=pointer)
    return tuple([DEFAULT] * (3 - len(segments)) + segments)


def _json(path: str, text: str, pointer: str) -> tuple[str, ...]:
    return (check_key(_decode(path, text, pointer) if path else "", what="JSON document name", pointer=pointer),)


def _markdown(path: str, text: str, pointer: str) -> tuple[str, ...]:
    note = _decode(path, text, pointer) if path else ""
    if note.endswith(".md"):
        note = note[:-3]
    return (check_relative_path(note, what="markdown note", pointer=pointer, allow_hidden=False),)


def _file(path: str, text: str, pointer: str) -> tuple[str, ...]:
    # Checked on the raw text too: an encoded traversal must not hide behind the decoding.
    check_relative_path(path, what="file path", pointer=pointer)
    return (check_relative_path(_decode(path, text, pointer) if path else "", what="file path", pointer=pointer),)


def _vector(path: str, text: str, pointer: str) -> tuple[str, ...]:
    return _head_and_rest(path, text, pointer, ("vector collection", "document URI"), rest_required=False)


def _graph(path: str, text: str, pointer: str) -> tuple[str, ...]:
    if "/" not in path:
        return (check_key(_decode(path, text, pointer) if path else "", what="graph view", pointer=pointer),)
    instance_raw, _, rest = path.partition("/")
    kind_raw, slash, ident_raw = rest.partition("/")
    if kind_raw not in ("node", "edge") or not slash:
        raise refuse(f"{_short(text)}: expected graph://<view>, graph://<instance>/node/<id> or "
                     "graph://<instance>/edge/<id>", pointer)
    instance = check_key(_decode(instance_raw, text, pointer) if instance_raw else "", what="graph instance",
                         pointer=pointer)
    ident = check_key(_decode(ident_raw, text, pointer) if ident_raw else "", what=f"{kind_raw} id",
                      pointer=pointer)
    return (instance, kind_raw, ident)


def _log(path: str, text: str, pointer: str) -> tuple[str, ...]:
    parts = _head_and_rest(path, text, pointer, ("event log instance", "event id"), rest_required=False)
    if len(parts) == 2 and not (parts[1].isascii() and parts[1].isdigit()):  # not '²' or '١'
        raise refuse(f"{_short(text)}: an event id is a number (log://<instance>/<id>)", pointer)
    return parts


def _episodic(path: str, text: str, pointer: str) -> tuple[str, ...]:
    return (check_key(_decode(path, text, pointer) if path else "", what="thread id", pointer=pointer),)


def _working(path: str, text: str, pointer: str) -> tuple[str, ...]:
    return _head_and_rest(path, text, pointer, ("thread id", "working-memory key"), rest_required=False)


def _blob(path: str, text: str, pointer: str) -> tuple[str, ...]:
    return _head_and_rest(path, text, pointer, ("blob bucket", "blob key"), rest_required=True)


_PARSERS = {
    "kv": _kv, "json": _json, "markdown": _markdown, "vector": _vector, "graph": _graph, "log": _log,
    "episodic": _episodic, "working": _working, "blob": _blob, "file": _file,
}


def _parse_query(scheme: str, query: str, pointer: str) -> tuple[tuple[str, str], ...]:
    # '+' stays a plus (RFC 3986), so an ISO time's "+02:00" survives; encode spaces as %20.
    pairs = []
    for item in query.split("&"):
        if not item:
            continue
        key, _, value = item.partition("=")
        pairs.append((_decode(key, query, pointer), _decode(value, query, pointer)))
    allowed = _PARAMS.get(scheme)
    if allowed is not None:
        unknown = sorted({k for k, _ in pairs} - allowed)
        if unknown:
            raise refuse(f"{scheme}:// does not take the parameter(s) {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(allowed))})", pointer)
    return tuple(pairs)


def _decode(part: str, text: str, pointer: str) -> str:
    try:
        decoded = unquote(part, errors="strict")
    except UnicodeDecodeError:
        raise refuse(f"{_short(text)}: percent-encoding that is not valid UTF-8", pointer) from None
    if "\x00" in decoded:
        raise refuse(f"{_short(text)} is refused: it contains a NUL character", pointer)
    return decoded


def _check_surrogates(text: str, pointer: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise refuse(f"the URI holds a lone surrogate (U+{ord(found.group()):04X}, not valid Unicode) at character "
                     f"{found.start() + 1}", pointer)


def _short(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:117] + "...")
