"""The editor state of one session: the document store and the workspace as the editor sees it.

A field of the server (`ContextAssemblyServer.editor`); `lsp/features/state.py` makes it per session.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..editor.documents import DocumentStore, overlay
from ..methods import Session
from ..workspace.loader import KINDS, SourceFile, Workspace, stamp_or_none


class EditorState:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.store = DocumentStore(session.places)
        self.timers: dict[str, Any] = {}  # uri -> asyncio.TimerHandle of a pending publish
        # Re-checks of other documents, coalesced per debounce window (see features/diagnostics.py):
        self.contributed: dict[str, frozenset[Any]] = {}  # uri -> what the open version gives others
        self.pending: set[str] = set()  # uris to re-check at the end of the window
        self.flush: Any = None  # the window's asyncio.TimerHandle
        self.recent: OrderedDict[str, None] = OrderedDict()  # open uris, least recently touched first
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

    def disk_source(self, relpath: str) -> SourceFile | None:
        """The file as the workspace on disk has it (what an open document replaces)."""
        disk = self._disk if self._disk is not None else self.session.workspace()
        return disk.files.get(relpath)

    def touch(self, uri: str) -> None:
        self.recent[uri] = None
        self.recent.move_to_end(uri)

    def forget(self, uri: str) -> None:
        self.recent.pop(uri, None)
        self.contributed.pop(uri, None)
        self.pending.discard(uri)

    def eager(self, limit: int) -> set[str]:
        """The `limit` most recently touched open documents."""
        return set(list(self.recent)[-limit:])

    def disk_changed(self) -> None:
        """`.codebolt/` (or the settings) changed: read the disk again on the next request."""
        self._disk = None


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
