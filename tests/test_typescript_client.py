"""The Node client (`editor-clients/typescript`) against the real server: `npm ci` (when needed) and
`npm test` (build + `node --test`), with the sidecar started as `<this python> -m context_assembly serve`.

Node and npm are required, not optional: CI machines have them, so a missing tool fails this test.
`npm ci` needs the npm registry (or a configured mirror); nothing else is downloaded.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .npm_package import NpmPackage

PACKAGE = Path(__file__).resolve().parent.parent / "editor-clients" / "typescript"
TIMEOUT_S = 600


def test_typescript_client_against_the_server() -> None:
    package = NpmPackage(PACKAGE, "the TypeScript client", TIMEOUT_S,
                         CONTEXT_ASSEMBLY_SERVER=f"{sys.executable} -m context_assembly serve")
    package.install()
    package.run("test")
