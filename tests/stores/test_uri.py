"""Memory URIs (SPEC §5.1): what each scheme's parts mean, what is refused, `since` times."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.uri import (
    MemoryUri,
    default_section,
    is_memory_uri,
    normalize_prefix,
    parse_since,
    parse_uri,
    render,
)

NOW = 1_700_000_000.0

VALID = [
    ("kv://prefs", "kv", ("default", "default", "prefs")),
    ("kv://users/alice", "kv", ("default", "users", "alice")),
    ("kv://team/users/alice", "kv", ("team", "users", "alice")),
    ("kv://users/a%2Fb", "kv", ("default", "users", "a/b")),
    ("KV://prefs", "kv", ("default", "default", "prefs")),
    ("kv://caf%C3%A9", "kv", ("default", "default", "café")),
    ("kv://user%20prefs", "kv", ("default", "default", "user prefs")),
    ("json://project-config", "json", ("project-config",)),
    ("json://project-config#/conventions/0", "json", ("project-config",)),
    ("markdown://architecture-notes", "markdown", ("architecture-notes",)),
    ("markdown://decisions/auth.md", "markdown", ("decisions/auth",)),
    ("markdown://my%20notes", "markdown", ("my notes",)),
    ("vector://docs", "vector", ("docs",)),
    ("vector://docs/file://src/a.py", "vector", ("docs", "file://src/a.py")),
    ("vector://docs?q=auth&top_k=3", "vector", ("docs",)),
    ("graph://module-dependencies", "graph", ("module-dependencies",)),
    ("graph://module-dependencies?module=auth", "graph", ("module-dependencies",)),
    ("graph://main/node/auth.py", "graph", ("main", "node", "auth.py")),
    ("graph://main/edge/e/1", "graph", ("main", "edge", "e/1")),
    ("log://default", "log", ("default",)),
    ("log://default/42", "log", ("default", "42")),
    ("log://default?event_type=tool_error&since=-7d", "log", ("default",)),
    ("episodic://t-1", "episodic", ("t-1",)),
    ("episodic://t-1?limit=5", "episodic", ("t-1",)),
    ("working://t-1", "working", ("t-1",)),
    ("working://t-1/plan", "working", ("t-1", "plan")),
    ("working://t-1/a/b", "working", ("t-1", "a/b")),
    ("blob://attachments/report.pdf", "blob", ("attachments", "report.pdf")),
    ("blob://attachments/2024/report.pdf", "blob", ("attachments", "2024/report.pdf")),
    ("file://src/auth.py", "file", ("src/auth.py",)),
    ("file://./src/auth.py", "file", ("src/auth.py",)),
    ("file://docs/my%20doc.md", "file", ("docs/my doc.md",)),
]


@pytest.mark.parametrize(("text", "scheme", "parts"), VALID)
def test_valid_uris(text: str, scheme: str, parts: tuple[str, ...]) -> None:
    uri = parse_uri(text, now=NOW)
    assert (uri.scheme, uri.parts) == (scheme, parts)
    assert uri.text == text
    assert is_memory_uri(text)


INVALID = [
    "prefs",  # no scheme
    "kv:/prefs",
    "nope://x",  # unknown scheme
    "http://example.com",
    "kv://",  # nothing named
    "kv://a//b",  # empty segment
    "kv://a/",  # trailing slash: empty key
    "kv://a/b/c/d",  # too many segments
    "kv://a%00b",  # NUL
    "kv://a\x00b",
    "kv://a\nb",  # control character
    "kv://%C3%28",  # percent-encoding that is not UTF-8
    "kv://a#frag",  # only json takes a fragment
    "kv://a?x=1",  # kv takes no query
    "json://",
    "json://doc#pointer",  # a pointer starts with /
    "markdown://../secret",
    "markdown://.hidden",
    "markdown://a/../../x",
    "file:///etc/passwd",
    "file://../outside",
    "file://..%2foutside",
    "file://%2e%2e/outside",
    "file://%252e%252e/outside",
    "file://C:/x",
    "file://a\\..\\..\\x",
    "file://a//b",
    "graph://main/node",  # no id
    "graph://main/vertex/1",
    "graph://main/node/x?a=1",  # only views take parameters
    "log://default/abc",  # an event id is a number
    "log://default?limit=0",
    "log://default?limit=many",
    "log://default?since=yesterday",
    "log://default?colour=red",  # unknown parameter
    "episodic://t-1?limit=-1",
    "blob://bucket",  # no key
    "vector://docs?topp=3",
    "x" * 9000,
    "kv://" + "k" * 9000,
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_uris_are_refused_at_uri(text: str) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        parse_uri(text, now=NOW)
    assert caught.value.errors and caught.value.errors[0]["path"] == "/uri"
    assert caught.value.errors[0]["message"]


@pytest.mark.parametrize("value", [None, 3, b"kv://x", ["kv://x"]])
def test_non_strings_are_refused(value: object) -> None:
    with pytest.raises(InvalidParamsError):
        parse_uri(value)
    assert not is_memory_uri(value)


def test_query_and_fragment() -> None:
    uri = parse_uri("log://default?event_type=a,b&event_type=c&since=-7d&limit=5&fields=tool", now=NOW)
    assert uri.param_list("event_type") == ["a", "b", "c"]
    assert uri.param("limit") == "5"
    assert uri.since == NOW - 7 * 86400
    assert uri.param("missing") is None
    doc = parse_uri("json://cfg#/a~1b/0")
    assert doc.pointer == "/a~1b/0" and doc.canonical == "json://cfg#/a~1b/0"
    vec = parse_uri("vector://docs?topK=3&minScore=0.4")
    assert vec.param("top_k", "topK") == "3" and vec.param("min_score", "minScore") == "0.4"


def test_plus_in_query_stays_a_plus() -> None:
    uri = parse_uri("log://default?since=2024-01-01T10:00:00+02:00")
    assert uri.since == datetime(2024, 1, 1, 8, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("text", "expected"), [
    ("-7d", NOW - 7 * 86400),
    ("-12h", NOW - 12 * 3600),
    ("-30m", NOW - 1800),
    ("-45s", NOW - 45),
    ("-2w", NOW - 14 * 86400),
    ("7d", NOW - 7 * 86400),
    ("-1.5h", NOW - 5400),
    ("2024-03-01T12:00:00Z", datetime(2024, 3, 1, 12, tzinfo=UTC).timestamp()),
    ("2024-03-01T12:00:00", datetime(2024, 3, 1, 12, tzinfo=UTC).timestamp()),  # no offset: UTC
    ("2024-03-01", datetime(2024, 3, 1, tzinfo=UTC).timestamp()),
    ("1700000000", 1_700_000_000.0),
    (1_600_000_000, 1_600_000_000.0),
])
def test_since(text: str | int, expected: float) -> None:
    assert parse_since(text, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "yesterday", "-7x", "7 days", "2024-13-01", None, True, []])
def test_bad_since(text: object) -> None:
    with pytest.raises(InvalidParamsError):
        parse_since(text, now=NOW)


def test_render_is_the_inverse_of_parse() -> None:
    for text, _, _ in VALID:
        uri = parse_uri(text)
        again = parse_uri(uri.canonical)
        assert (again.scheme, again.parts, again.fragment) == (uri.scheme, uri.parts, uri.fragment)
    assert render("kv", ("default", "default", "k")) == "kv://k"
    assert render("kv", ("default", "ns", "k")) == "kv://ns/k"
    assert render("kv", ("i", "ns", "a/b c")) == "kv://i/ns/a%2Fb%20c"
    assert render("markdown", ("notes/x",)) == "markdown://notes/x"


def test_default_section() -> None:
    assert default_section("kv://x") == "knowledge"
    assert default_section("markdown://x") == "knowledge"
    assert default_section("file://a.py") == "knowledge"
    assert default_section("episodic://t") == "history"
    assert default_section(parse_uri("log://default")) == "history"
    assert default_section("working://t/k") == "working_memory"


def test_memory_uri_is_a_value() -> None:
    assert parse_uri("kv://a") == parse_uri("kv://default/a")
    assert hash(parse_uri("kv://a")) == hash(parse_uri("kv://default/default/a"))
    assert isinstance(parse_uri("kv://a"), MemoryUri)
    assert not is_memory_uri("architecture-docs")


@pytest.mark.parametrize(("prefix", "expected"), [
    ("kv", ("kv", "kv://")),
    ("kv:", ("kv", "kv://")),
    ("kv://", ("kv", "kv://")),
    ("kv://users/", ("kv", "kv://users/")),
    ("kv://user prefs/", ("kv", "kv://user%20prefs/")),
    ("kv://user%20prefs/", ("kv", "kv://user%20prefs/")),
    ("Markdown://notes/", ("markdown", "markdown://notes/")),
])
def test_normalize_prefix(prefix: str, expected: tuple[str, str]) -> None:
    assert normalize_prefix(prefix) == expected


@pytest.mark.parametrize("prefix", ["", "nope://", "kv://a?x", "kv://a#b", 3, "kv://\x00"])
def test_bad_prefix(prefix: object) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        normalize_prefix(prefix)
    assert caught.value.errors[0]["path"] == "/prefix"


def test_render_encodes_a_head_segment_s_slash_and_keeps_paths_as_written() -> None:
    """A thread, bucket, log instance, collection or graph instance is one segment (its '/' encoded:
    listed raw, working://t/1/k read another item); a key, document or graph id is a path as written
    (an access pattern such as graph://default/node/src/** names it so)."""
    from context_assembly.stores.uri import render

    assert render("working", ("t/1", "k")) == "working://t%2F1/k"
    assert render("working", ("t", "1/k")) == "working://t/1/k"
    assert render("blob", ("b/x", "key")) == "blob://b%2Fx/key"
    assert render("log", ("ops/prod",)) == "log://ops%2Fprod"
    assert render("vector", ("docs", "src/a.py")) == "vector://docs/src/a.py"
    assert render("graph", ("default", "node", "src/a.py")) == "graph://default/node/src/a.py"
    assert render("graph", ("a/b", "node", "x")) == "graph://a%2Fb/node/x"
    for uri in ("working://t%2F1/k", "graph://default/node/src/a.py", "graph://a%2Fb/node/x", "log://ops%2Fprod"):
        parsed = parse_uri(uri)
        assert render(parsed.scheme, parsed.parts) == uri


@given(st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("-._~!$&'()*+,;=:@/%#? "), max_size=12))
def test_a_plain_name_is_written_as_quote_writes_it(name: str) -> None:
    """`render`'s fast path for names of safe characters only writes what `quote` would."""
    from urllib.parse import quote

    from context_assembly.stores.uri import _SAFE, _encoded

    for safe in (_SAFE, _SAFE + "/"):
        assert _encoded(name, safe) == quote(name, safe=safe)
