"""The editor state of one session: the document store and the workspace as the editor sees it.

A field of the server (`ContextAssemblyServer.editor`); `lsp/features/state.py` makes it per session.
"""

from __future__ import annotations

from typing import Any

from ..editor.documents import DocumentStore, overlay
from ..methods import Session
from ..workspace.loader import KINDS, Workspace, stamp_or_none


class EditorState:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.store = DocumentStore(session.root)
        self.timers: dict[str, Any] = {}  # uri -> asyncio.TimerHandle of a pending publish
        # The client watches `.codebolt/` for us: what is on disk is re-read on its events (and on
        # saves) instead of on every request, which would stat every definition file per keystroke.
        self.watched = False
        self.asked: set[str] = set()  # pull-style features the client has requested (refreshed when stale)
        self._disk: Workspace | None = None
        self._token: tuple[Any, ...] | None = None  # settings generation and folder stamps `_disk` was read at
        self._overlay: tuple[tuple[Any, ...], Workspace] | None = None
        # uri -> (the text they ran on, results of a test file's full-assembly cases run by "Run test")
        self.test_runs: dict[str, tuple[str, list[Any]]] = {}
        session.editor_view = self.workspace  # validate checks drafts against what the editor sees

    def workspace(self) -> Workspace:
        """The workspace on disk with the open documents' unsaved text laid over it (the same
        object while neither changed)."""
        token = self._disk_token()
        disk = self._disk
        if disk is None or not self.watched or self._token != token:
            self._token = token
            disk = self._disk = self.session.workspace()
        documents = self.store.all()
        key = (disk, *(document.source for document in documents))
        cached = self._overlay
        if cached is not None and _same(cached[0], key):
            return cached[1]
        result = overlay(disk, documents)
        self._overlay = (key, result)
        return result

    def ready(self, uri: str, version: int | None) -> bool:
        """Is everything a request on `uri` at `version` reads already built (the document, the
        workspace)? Then it costs well under a millisecond and may run on the event loop."""
        document = self.store.get(uri)
        if document is None or document.version != version or version is None:
            return False
        disk, cached = self._disk, self._overlay
        return self.watched and disk is not None and self._token == self._disk_token() and cached is not None \
            and _same(cached[0], (disk, *(d.source for d in self.store.all())))

    def _disk_token(self) -> tuple[Any, ...]:
        """What the cached disk workspace was read at: the settings generation, and the stamps
        of the definition folders and the settings file. Folder stamps see files created,
        deleted or atomically replaced (as this server writes them) even before the client's
        watcher reports them; edits in place are left to the watcher."""
        layout = self.session.layout
        paths = [getattr(layout, attribute) for attribute, _ in KINDS.values()] + [layout.settings_path]
        return self.session.settings_generation, *(stamp_or_none(path) for path in paths)

    def disk_changed(self) -> None:
        """`.codebolt/` (or the settings) changed: read the disk again on the next request."""
        self._disk = None


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
