"""Which parser a file gets, by its name."""

from __future__ import annotations

from pathlib import PurePath

from .document import ParsedDocument
from .json_reparse import reparse_json
from .json_tree import parse_json

YAML_SUFFIXES = (".yaml", ".yml")


def document_kind(path_or_name: str | PurePath) -> str:
    """The format of a file by its name: "yaml" for .yaml/.yml (any case), else "json"."""
    return "yaml" if str(path_or_name).lower().endswith(YAML_SUFFIXES) else "json"


def parse_document(text: str, path_or_name: str | PurePath, previous: ParsedDocument | None = None) -> ParsedDocument:
    """`previous`, an earlier version of the same JSON document, makes the parse incremental."""
    if document_kind(path_or_name) == "yaml":
        from .yaml_tree import parse_yaml  # here: a workspace of JSON files never imports PyYAML

        return parse_yaml(text)
    if previous is not None and previous.kind == "json":
        return reparse_json(previous, text)
    return parse_json(text)
