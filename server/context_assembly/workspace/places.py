"""Where a workspace's files are, in the editor's spelling and in the file system's.

An editor names the workspace root, or reaches its `.codebolt/` folder, through a symlink as
often as not (a project under a linked home, a `.codebolt/` shared between projects). It only
knows documents by the URIs it uses, so the server answers in the client's spelling: every
workspace file is `<client root>/<relpath>`. A path the client sends is mapped back to its
relpath lexically first, through the symlinks last (`Places.relpath`).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from attrs import frozen

from .layout import WorkspaceLayout

CODEBOLT = WorkspaceLayout(Path()).codebolt.as_posix()  # `.codebolt`, relative to a root


@frozen
class Places:
    """One workspace root as the client names it and as the file system has it."""

    client_root: Path  # absolute, normalised, symlinks kept: the spelling of every URI we answer with
    root: Path  # symlinks resolved (what the runtime and the loader use)
    codebolt: Path  # the resolved `.codebolt/` folder, wherever a symlink puts it

    @classmethod
    def of(cls, root: Path | str | Places) -> Places:
        if isinstance(root, Places):
            return root
        resolved = Path(root).resolve()
        return cls(Path(os.path.abspath(root)), resolved, WorkspaceLayout(resolved).codebolt.resolve())

    def relpath(self, path: Path) -> str | None:
        """The workspace relpath of `path` (posix), None when it is no file of this workspace: as
        spelled under either root, else where its symlinks lead (the root, or a linked `.codebolt/`)."""
        path = path.absolute()  # not abspath: it would drop `..` before the symlinks are followed
        if ".." not in path.parts:  # a `..` may walk back out through a symlink: only the file system knows
            for base in (self.client_root, self.root):
                if path.is_relative_to(base):
                    return path.relative_to(base).as_posix()
        real = path.resolve()
        if real.is_relative_to(self.root):
            return real.relative_to(self.root).as_posix()
        if real.is_relative_to(self.codebolt):
            return PurePosixPath(CODEBOLT, real.relative_to(self.codebolt).as_posix()).as_posix()
        return None

    def readable(self, path: Path) -> Path | None:
        """`path` resolved, when it lies in the workspace or its `.codebolt/` as the file system
        sees it: a symlink inside pointing out is no workspace file (nothing is read outside)."""
        real = path.resolve()
        return real if real.is_relative_to(self.root) or real.is_relative_to(self.codebolt) else None

    @property
    def layout(self) -> WorkspaceLayout:
        """The layout in the client's spelling (where a new file is named)."""
        return WorkspaceLayout(self.client_root)

    def path(self, relpath: str) -> Path:
        return self.client_root / relpath

    def uri(self, relpath: str) -> str:
        return self.path(relpath).as_uri()


__all__ = ["Places"]
