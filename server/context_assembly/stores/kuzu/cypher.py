"""Static checks on view Cypher: read-only clauses only, and which `$parameters` it uses.

The keyword check is conservative (a property or alias spelled like a write keyword is refused too)
and is the first of two guards: views also run inside a read-only transaction, so a write the
text check misses still fails.
"""

from __future__ import annotations

import functools
import re

# Clauses that change data, schema, settings or the attached databases (the Kuzu/LadybugDB grammar).
WRITE_KEYWORDS = frozenset({
    "CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "ALTER", "COPY", "LOAD", "INSTALL",
    "UNINSTALL", "ATTACH", "USE", "EXPORT", "IMPORT", "BEGIN", "COMMIT", "ROLLBACK", "CHECKPOINT",
})

# Table functions that only read the catalog; any other CALL (settings like `CALL threads=4`,
# extension procedures) is refused.
READ_PROCEDURES = frozenset({
    "show_tables", "table_info", "show_connection", "db_version", "show_functions", "current_setting",
    "show_warnings", "show_indexes", "show_sequences", "show_macros", "show_attached_databases",
    "show_loaded_extensions", "show_official_extensions", "show_projected_graphs",
})

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CALL = re.compile(r"\bCALL\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def blank_literals(cypher: str) -> str:
    """`cypher` with string literals, quoted names and comments turned into spaces (same length).

    An unterminated literal or comment blanks the rest of the text; Kuzu rejects such a query anyway.
    """
    out = list(cypher)
    i, n = 0, len(cypher)
    while i < n:
        ch = cypher[i]
        if ch in "'\"`":
            j = i + 1
            while j < n and cypher[j] != ch:
                j += 2 if cypher[j] == "\\" and ch != "`" else 1
            end = min(j + 1, n)
        elif cypher.startswith("//", i):
            newline = cypher.find("\n", i)
            end = n if newline < 0 else newline
        elif cypher.startswith("/*", i):
            close = cypher.find("*/", i + 2)
            end = n if close < 0 else close + 2
        else:
            i += 1
            continue
        for k in range(i, end):
            if out[k] != "\n":
                out[k] = " "
        i = end
    return "".join(out)


def read_only_problems(cypher: str) -> list[str]:
    """Why `cypher` is not a single read-only query; empty when it is."""
    code = blank_literals(cypher)
    problems: list[str] = []
    found = sorted({word.upper() for word in _WORD.findall(code) if word.upper() in WRITE_KEYWORDS})
    if found:
        problems.append(f"views may only read; found {', '.join(found)}")
    for match in _CALL.finditer(code):
        if match.group(1).lower() not in READ_PROCEDURES:
            problems.append(f"views may only CALL read-only catalog functions, not {match.group(1)}")
    if ";" in code.rstrip().rstrip(";"):
        problems.append("a view is one query: remove the ';' between statements")
    return problems


@functools.lru_cache(maxsize=512)
def parameter_names(cypher: str) -> frozenset[str]:
    """The `$name` parameters the query uses (outside literals and comments); worked out once per
    query text (every run of a view binds its parameters)."""
    return frozenset(_PARAM.findall(blank_literals(cypher)))
