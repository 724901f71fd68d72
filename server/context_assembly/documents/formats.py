"""Which parser a file gets, by its name."""

from __future__ import annotations

from pathlib import PurePath

from .document import ParsedDocument
from .json_tree import parse_json
from .yaml_tree import parse_yaml

YAML_SUFFIXES = (".yaml", ".yml")


def document_kind(path_or_name: str | PurePath) -> str:
    """The format of a file by its name: "yaml" for .yaml/.yml (any case), else "json"."""
    return "yaml" if str(path_or_name).lower().endswith(YAML_SUFFIXES) else "json"


def parse_document(text: str, path_or_name: str | PurePath) -> ParsedDocument:
    return parse_yaml(text) if document_kind(path_or_name) == "yaml" else parse_json(text)
