"""The package's folders in the user's cache (compiled rules, model files): each one under
`platformdirs.user_cache_dir("context-assembly")`, or where an environment variable names it;
that variable set to `0`, `off`, `false`, `no` or empty means none."""

from __future__ import annotations

import os
from pathlib import Path

OFF = ("", "0", "off", "false", "no")


def cache_folder(env: str, name: str) -> Path | None:
    """The folder `name` of the user's cache, or the one `$env` names; None when it asks for none."""
    chosen = os.environ.get(env)
    if chosen is not None:
        return None if chosen.strip().lower() in OFF else Path(chosen).expanduser()
    import platformdirs  # only when a cache is used

    return Path(platformdirs.user_cache_dir("context-assembly", appauthor=False)) / name
