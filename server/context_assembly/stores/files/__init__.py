"""File-backed stores: markdown notes under `.codebolt/memory/` and read-only workspace files."""

from .notes import MarkdownNotes
from .workspace_files import WorkspaceFiles

__all__ = ["MarkdownNotes", "WorkspaceFiles"]
