"""The server package's bytecode compiled before a bench spawns sidecars, as an install has it.

`pip install` compiles a wheel's modules when it installs them, so an installed sidecar imports
bytecode. A sidecar run from this checkout with `PYTHONDONTWRITEBYTECODE` set (as on these
machines) compiled every module of the package from source at each start instead: ~130 ms more
before a new sidecar's first assembly answered on the full bench workspace (2026-11-28,
`assemble/first_turns.py`: 443-454 ms without bytecode, 314-320 ms with). Benches that time
start-up call `compile_package()` first, so they measure what a user of the installed package
waits for. The bytecode goes to the package's `__pycache__` folders (ignored by git), for the
interpreter running the bench (the one its sidecars run on).
"""

from __future__ import annotations

import compileall
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "server"


def compile_package(server: Path = SERVER) -> None:
    """Compile the package under `server` (a tree's `server` folder) where its bytecode is missing
    or stale; raises when a module does not compile."""
    if not compileall.compile_dir(str(server / "context_assembly"), quiet=1, workers=0):
        raise SystemExit(f"the package under {server} does not compile")
