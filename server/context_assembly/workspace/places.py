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
        return cls.named(root, root)

    @classmethod
    def named(cls, spelling: Path | str, folder: Path | str) -> Places:
        """`folder`, resolved now and once, named as `spelling` (the same folder by another path)."""
        resolved = Path(folder).resolve()
        return cls(Path(os.path.abspath(spelling)), resolved, WorkspaceLayout(resolved).codebolt.resolve())

    def relpath(self, path: Path) -> str | None:
        """The workspace relpath of `path` (posix), None when it is no file of this workspace: as
        spelled under either root, else where its symlinks lead (the root, or a linked `.codebolt/`)."""
        found = self._mapped(path)
        return None if found is None or _nested_project(found) else found

    def _mapped(self, path: Path) -> str | None:
        path = path.absolute()  # not abspath: it would drop `..` before the symlinks are followed
        if ".." not in path.parts:  # a `..` may walk back out through a symlink: only the file system knows
            for base in (self.client_root, self.root):
                if path.is_relative_to(base):
                    return path.relative_to(base).as_posix()
        real = path.resolve()
        if real.is_relative_to(self.root):
            return real.relative_to(self.root).as_posix()
        if self._linked_codebolt and real.is_relative_to(self.codebolt):
            return PurePosixPath(CODEBOLT, real.relative_to(self.codebolt).as_posix()).as_posix()
        return None

    def readable(self, path: Path) -> Path | None:
        """`path` resolved, when it lies in the workspace or its `.codebolt/` as the file system
        sees it: a symlink inside pointing out is no workspace file (nothing is read outside)."""
        real = path.resolve()
        inside = real.is_relative_to(self.root) or (self._linked_codebolt and real.is_relative_to(self.codebolt))
        return real if inside else None

    @property
    def _linked_codebolt(self) -> bool:
        """`.codebolt` is a link to a folder of its own elsewhere, one that holds no workspace (a link
        to `/`, the home folder or the project's parent would make everything below it ours)."""
        return not self.codebolt.is_relative_to(self.root) and not self.root.is_relative_to(self.codebolt)

    @property
    def layout(self) -> WorkspaceLayout:
        """The layout in the client's spelling (where a new file is named)."""
        return WorkspaceLayout(self.client_root)

    def path(self, relpath: str) -> Path:
        return self.client_root / relpath

    def uri(self, relpath: str) -> str:
        return self.path(relpath).as_uri()


def _nested_project(relpath: str) -> bool:
    """A path of another project's `.codebolt/` below the root (a nested project, or one linked in):
    not a file of this workspace, whose definitions are in its own `.codebolt/` only."""
    return CODEBOLT in PurePosixPath(relpath).parts[1:]


__all__ = ["Places"]
