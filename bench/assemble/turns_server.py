"""The baseline sidecar of `turns.py`: `serve`, with the graph database closed whenever it has been
idle for `hold_s` (0.2 s), whether or not another process waits for it, as every sidecar did
before it kept the database open between uses.

    python bench/assemble/turns_server.py [serve options]
"""

from __future__ import annotations

import functools
import sys

from context_assembly.cli.main import main
from context_assembly.stores.kuzu import session

# KuzuSessions reads the default settings from its module when it is made: idle for hold_s, it closes
session.SessionSettings = functools.partial(  # type: ignore[misc]
    session.SessionSettings, idle_hold_s=session.SessionSettings().hold_s)

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
