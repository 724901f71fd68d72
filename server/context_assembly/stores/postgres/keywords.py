"""PostgreSQL's keyword index tokenised as the embedded FTS5 index is.

PostgreSQL's `simple` parser keeps `config.yaml`, `src/auth/session.py`, `bob@example.com` and
`v1.2.3` as single tokens and keeps accents, where FTS5's `unicode61 remove_diacritics 2` splits
them into words and folds case and accents: a query for `auth` or `cafe` found those texts
embedded only. So the sidecar tokenises here, with FTS5's own tables (fts5_tables.py), and hands
PostgreSQL the finished `tsvector` of each chunk and the `tsquery` of each search: the parser
never runs, and both backends see the same words at the same positions.

Chunks another writer inserts (a sidecar of an earlier version) get their words from the
database's trigger, through `ca_keyword_tsvector`: the same tables in SQL (separators by a regular
expression, folds by `translate`, which costs ~4 ms per KB of non-ASCII text: a fallback).
What remains different: a `tsvector` holds at most 256 positions per word and positions up to
16,383, and no word longer than 2,046 bytes (such a word is left out); FTS5 has no such limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .fts5_tables import DROPPED, FOLDED, INTO, SEPARATORS

MAX_POSITION = 16_383  # PostgreSQL's last tsvector position (later words share it)
MAX_POSITIONS = 256  # positions a tsvector keeps per word
MAX_WORD_BYTES = 2_046  # (PostgreSQL: "word is too long (2047 bytes, max 2046 bytes)")

_FOLD = {**{code: code + 32 for code in range(ord("A"), ord("Z") + 1)},
         **{ord(a): ord(b) for a, b in zip(FOLDED, INTO, strict=True)}, **dict.fromkeys(map(ord, DROPPED))}


def _escaped(code: int) -> str:
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(_escaped(a) if a == b else f"{_escaped(a)}-{_escaped(b)}" for a, b in ranges)


_SPLIT = re.compile(f"[{_class(SEPARATORS)}]+")
_SQL_CLASS = _class((max(a, 1), b) for a, b in SEPARATORS)  # (PostgreSQL text holds no NUL)


_ASCII_WORD = re.compile(r"[a-z0-9]+")  # in ASCII text FTS5's words are its runs of letters and digits
_RUN = re.compile(r"[A-Za-z0-9\x80-\U0010ffff]+")  # what is left once ASCII's separators are gone


def words(text: str) -> list[str]:
    """The text's words as FTS5 makes them: split at its separators, each folded (a word that
    folds to nothing, a lone diacritic, is no word and takes no position)."""
    if text.isascii():  # most chunks: one pass in C (~10x the general path)
        return _ASCII_WORD.findall(text.lower())
    found: list[str] = []
    for run in _RUN.findall(text):  # the large separator class only where a run holds non-ASCII
        if run.isascii():
            found.append(run.lower())
        else:
            found += [word for word in (part.translate(_FOLD) for part in _SPLIT.split(run)) if word]
    return found


def _quoted(word: str) -> str:
    if "'" in word or "\\" in word:  # (never, FTS5 separates at both: kept for the literal's sake)
        word = word.replace("\\", "\\\\").replace("'", "''")
    return f"'{word}'"


def _fits(word: str) -> bool:
    return len(word) * 4 <= MAX_WORD_BYTES or len(word.encode("utf-8", "surrogatepass")) <= MAX_WORD_BYTES


def tsvector(text: str) -> str:
    """The chunk's `tsvector` literal: each word with its positions (1-based, as to_tsvector)."""
    found = words(text)
    positions: dict[str, list[int]] = {}
    for at, word in enumerate(found, start=1):
        kept = positions.get(word)
        if kept is None:
            positions[word] = [at]
        elif len(kept) < MAX_POSITIONS:
            kept.append(at)
    if len(found) > MAX_POSITION:  # (a chunk of that many words is rare: later words share the last position)
        positions = {word: list(dict.fromkeys(min(at, MAX_POSITION) for at in kept))
                     for word, kept in positions.items()}
    return " ".join([f"{_quoted(word)}:{','.join(map(str, kept))}" for word, kept in positions.items() if _fits(word)])


def tsquery(terms: Iterable[str]) -> str:
    """A `tsquery` literal matching any of the terms, each a phrase of its words (`src_auth`:
    `'src' <-> 'auth'`, as FTS5 reads a quoted term); "" when no term has a word."""
    phrases = []
    for term in terms:
        found = [_quoted(word) for word in words(term) if _fits(word)]
        if found:
            phrases.append(found[0] if len(found) == 1 else "(" + " <-> ".join(found) + ")")
    return " | ".join(dict.fromkeys(phrases))


def function_sql() -> str:
    """`ca_keyword_text(text)`: the text's words, as `words` makes them, separated by spaces; and
    `ca_keyword_tsvector(text)`: their `tsvector`, as `tsvector` writes it (made from the words,
    not by PostgreSQL's parser, which drops letters its locale does not know)."""
    assert not set(FOLDED + INTO + DROPPED) & {"'", "$"}
    split = f"regexp_replace(t COLLATE \"C\", '[{_SQL_CLASS}]+', ' ', 'g')"
    return (
        "CREATE FUNCTION ca_keyword_text(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$\n"
        f"SELECT CASE WHEN octet_length(t) = char_length(t) THEN lower({split})\n"
        f"    ELSE translate(lower({split}), '{FOLDED}{DROPPED}', '{INTO}') END\n"
        "$fn$;\n"
        "CREATE FUNCTION ca_keyword_tsvector(t text) RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE\n"
        "AS $fn$\n"
        "SELECT coalesce(string_agg(quote_literal(w) || ':' || p, ' '), '')::tsvector FROM (\n"
        f"    SELECT w, string_agg(least(at, {MAX_POSITION})::text, ',' ORDER BY at) AS p FROM (\n"
        "        SELECT w, at, row_number() OVER (PARTITION BY w ORDER BY at) AS nth FROM (\n"
        "            SELECT w, row_number() OVER (ORDER BY n) AS at\n"
        "            FROM unnest(string_to_array(ca_keyword_text(t), ' ')) WITH ORDINALITY AS u(w, n)\n"
        "            WHERE w <> '') numbered) counted\n"
        f"    WHERE nth <= {MAX_POSITIONS} AND octet_length(w) <= {MAX_WORD_BYTES} GROUP BY w) words\n"
        "$fn$;\n")
