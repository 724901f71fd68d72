"""Tolerant parsing of definition files (JSON, YAML) with exact positions.

Knows nothing of LSP or of rules: it turns text into a value plus syntax errors, and answers
"where is this JSON pointer" (`ParsedDocument.span`) and "which pointer is here"
(`ParsedDocument.pointer_at`), in `str` character offsets that `LineIndex` converts to LSP
positions (UTF-8/16/32) or to `line:col` for the command line.
"""

from typing import Any

from .document import ParsedDocument, Span, SyntaxIssue
from .formats import document_kind, parse_document
from .json_tree import parse_json
from .lines import LineIndex
from .pointers import format_pointer, parse_pointer


def __getattr__(name: str) -> Any:
    if name == "parse_yaml":  # PyYAML on first use (formats.py)
        from .yaml_tree import parse_yaml

        return parse_yaml
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LineIndex",
    "ParsedDocument",
    "Span",
    "SyntaxIssue",
    "document_kind",
    "format_pointer",
    "parse_document",
    "parse_json",
    "parse_pointer",
    "parse_yaml",
]
