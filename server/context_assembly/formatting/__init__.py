"""The formatter of definition files (`context-assembly format`, LSP formatting, the server's own
writes): canonical key order from the schemas, stable indentation, YAML comments kept.

Formatting never changes what a file means: the result is parsed again and compared with the
original, and a file whose value would change is refused (FormatError), never rewritten."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from ..documents import parse_document
from ..documents.formats import document_kind
from .json_text import FormatError, dump_json, load_json
from .order import schema
from .yaml_text import dump_yaml, format_yaml, merge_yaml

__all__ = ["FormatError", "format_text", "format_value", "schema_of_path"]

SETTINGS_FILE = "context-assembly.json"


def format_text(text: str, name: str | PurePath, schema_name: str | None) -> str:
    """`text`, the file `name` (its suffix picks JSON or YAML), formatted for `schema_name` (a
    published schema; None keeps the key order and only lays the file out)."""
    root = schema(schema_name) if schema_name else {}
    bom = "\ufeff" if text.startswith("\ufeff") else ""  # kept as it is
    # the file's own line ending, kept: laid out on "\n" (YAML comments kept their "\r" alone, and
    # a CRLF JSON file became one whole-file edit to LF in the editor, while the CLI saw no change)
    newline = "\r\n" if "\r\n" in text else "\n"
    body = text[len(bom):].replace("\r\n", "\n")
    if document_kind(name) == "yaml":
        formatted = bom + format_yaml(body, root, root)
    else:
        formatted = bom + dump_json(load_json(body), root, root)
    formatted = formatted.replace("\n", newline) if newline != "\n" else formatted
    if formatted != text:
        _same_value(text, formatted, name)
    elif bom and parse_document(text, str(name)).syntax_errors:  # as `check` reads it: not "already formatted"
        raise FormatError(parse_document(text, str(name)).syntax_errors[0].message)
    return formatted


def format_value(value: Any, schema_name: str | None, *, yaml: bool) -> str:
    """A value built in code (a definition the server stores) as formatted file text."""
    root = schema(schema_name) if schema_name else {}
    text = dump_yaml(value, root, root) if yaml else dump_json(value, root, root)
    parsed = parse_document(text, "value.yaml" if yaml else "value.json")
    if parsed.syntax_errors or parsed.value != value:
        raise FormatError("this value cannot be written without changing it")
    return text


def update_text(text: str, before: dict[str, Any], after: dict[str, Any], schema_name: str | None) -> str:
    """A YAML definition file's `text` (its value `before`) rewritten to hold `after`, changing only
    the top-level keys that differ: the others keep their comments. FormatError when it cannot."""
    root = schema(schema_name) if schema_name else {}
    changed = {key: value for key, value in after.items() if key not in before or before[key] != value}
    removed = [key for key in before if key not in after]
    body = text.replace("\r\n", "\n")
    updated = merge_yaml(body, changed, removed, root, root)
    parsed = parse_document(updated, "value.yaml")
    if parsed.syntax_errors or parsed.value != after:
        raise FormatError("this value cannot be written over the file without changing it")
    return updated.replace("\n", "\r\n") if "\r\n" in text else updated


def schema_of_path(path: Path) -> str | None:
    """The schema of a file under a `.codebolt/` folder by where it lives: a definition kind (the
    kinds are named as their schemas), the settings file, else None."""
    from ..editor.documents import kind_of_path  # the editor's recognition, one place

    parts = path.parts
    if ".codebolt" not in parts:
        return None
    index = len(parts) - 1 - parts[::-1].index(".codebolt")
    root = Path(*parts[:index]) if index else Path(".")
    if path.name == SETTINGS_FILE and path.parent.name == ".codebolt":
        return "settings"
    return kind_of_path(path, root)


def _same_value(before: str, after: str, name: str | PurePath) -> None:
    old, new = parse_document(before, str(name)), parse_document(after, str(name))
    if old.syntax_errors:
        raise FormatError(old.syntax_errors[0].message)
    if new.syntax_errors or old.value != new.value:
        raise FormatError("formatting would change the value of this file; it is left as it is")
