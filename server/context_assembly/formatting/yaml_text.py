"""Definition files in YAML, through ruamel.yaml's round trip: comments, quoting and flow style are
kept, keys take the canonical order (a comment travels with the key it follows), block mappings are
indented by two spaces and block sequences by two more, with the dash in between."""

from __future__ import annotations

import io
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from .json_text import FormatError
from .order import Schema, item_schemas, ordered_keys

# the round trip (load, reorder, dump) recurses per level: a few hundred levels, which parse, are too many
_TOO_DEEP = "nested too deeply to be formatted"


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # never re-wrap a long string
    return yaml


def format_yaml(text: str, node: Schema | None, root: Schema) -> str:
    yaml = _yaml()
    data = _load(yaml, text)
    if data is None:
        return text
    _refuse_cycles(data)
    try:
        _reorder(data, node, root)
    except RecursionError as exc:
        raise FormatError(_TOO_DEEP) from exc
    out = _dump(yaml, data)
    if isinstance(data, CommentedSeq):  # a top-level list starts at column 0, like a top-level mapping
        out = "".join(line[2:] if line.startswith("  ") else line for line in out.splitlines(keepends=True))
    return out


def merge_yaml(text: str, changed: dict[str, Any], removed: list[str], node: Schema | None, root: Schema) -> str:
    """`text` (a YAML mapping) with the top-level keys `changed` set and `removed` dropped, through
    the round trip: every other key keeps its comments, quoting and layout (a status toggled by
    `memoryIngestion/disable` rewrote the whole human-edited file without them)."""
    yaml = _yaml()
    data = _load(yaml, text)
    if not isinstance(data, CommentedMap):
        raise FormatError("not a YAML mapping")
    for key in removed:
        data.pop(key, None)
    for key, value in changed.items():
        data[key] = _load(yaml, dump_yaml(value, None, {}))  # quoted where YAML 1.1 would misread it
    _reorder(data, node, root)
    return _dump(yaml, data)


def _load(yaml: YAML, text: str) -> Any:
    try:
        return yaml.load(text)
    except YAMLError as exc:
        raise FormatError(str(exc).strip().splitlines()[-1] if str(exc).strip() else "invalid YAML") from exc
    except RecursionError as exc:
        raise FormatError(_TOO_DEEP) from exc


def _dump(yaml: YAML, data: Any) -> str:
    stream = io.StringIO()
    try:
        yaml.dump(data, stream)
    except YAMLError as exc:
        raise FormatError(str(exc)) from exc
    except RecursionError as exc:
        raise FormatError(_TOO_DEEP) from exc
    return stream.getvalue()


def dump_yaml(value: Any, node: Schema | None, root: Schema) -> str:
    """A plain value (as the server builds it) written as a formatted YAML document."""
    # PyYAML writes it first: it quotes what YAML 1.1 readers (PyYAML, the loader) would otherwise
    # take for another type (`yes`, `on`, `010`), and the round trip below keeps those quotes
    try:
        text = pyyaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=4096)
    except pyyaml.YAMLError as exc:
        raise FormatError(str(exc)) from exc
    return format_yaml(text, node, root)


def _reorder(value: Any, node: Schema | None, root: Schema) -> None:
    if isinstance(value, CommentedMap):
        keys, children = ordered_keys(dict(value), node, root)
        if list(value) != keys:
            for key in keys:
                value.move_to_end(key)  # comments are kept by key, so they move with it
        for key in keys:
            _reorder(value[key], children.get(key), root)
    elif isinstance(value, CommentedSeq):
        for item, sub in zip(value, item_schemas(list(value), node, root), strict=True):
            _reorder(item, sub, root)


def _refuse_cycles(data: Any) -> None:
    """An alias inside its own anchor (`- &x [*x]`) makes a node that contains itself: no definition
    file is one (the parser refuses it too), and ordering its keys would never end. Each node is
    walked once, however many aliases share it."""
    on_path: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        value, leaving = stack.pop()
        if leaving:
            on_path.discard(id(value))
            done.add(id(value))
        elif isinstance(value, dict | list) and id(value) not in done:
            if id(value) in on_path:
                raise FormatError("recursive alias: a node that contains itself cannot be formatted")
            on_path.add(id(value))
            stack.append((value, True))
            stack.extend((child, False) for child in (value.values() if isinstance(value, dict) else value))
