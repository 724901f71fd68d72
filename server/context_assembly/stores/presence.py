"""Whether the stores hold anything yet, answered without opening them.

Evaluating rules reads one store value, a thread's turn count (`rules/lookup.py`). On a workspace
whose embedded database was never created, every count is 0: answering so without opening it keeps
a rules-only request from creating the database (and from importing the store backends).
"""

from __future__ import annotations

import os
from functools import lru_cache

from ..workspace.layout import WorkspaceLayout
from ..workspace.settings import StoreSettings


def nothing_stored(layout: WorkspaceLayout, settings: StoreSettings) -> bool:
    """True when the settings name the embedded stores and their database does not exist yet (one
    `stat` a call: another process may create it at any time)."""
    return settings.backend == "embedded" and not os.path.exists(_database(layout))


@lru_cache(maxsize=64)
def _database(layout: WorkspaceLayout) -> str:
    """The database's path as a string, made once per layout (asked twice per rule evaluation)."""
    return os.fspath(layout.db_path)
