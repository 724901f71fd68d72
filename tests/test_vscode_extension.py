"""The VS Code extension (`editor-clients/vscode`): `npm ci` (when needed), `npm test` (copy the schemas,
type-check, bundle with esbuild, then the unit tests under Node's test runner) and `npm run package`
(`vsce package`), then a look inside the `.vsix`.

Node and npm are required, not optional: CI machines have them, so a missing tool fails this test.
`npm ci` needs the npm registry (or a configured mirror); nothing else is downloaded, and no VS Code.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from .npm_package import NpmPackage

PACKAGE = Path(__file__).resolve().parent.parent / "editor-clients" / "vscode"
TIMEOUT_S = 900


def test_vscode_extension_builds_tests_and_packages() -> None:
    package = NpmPackage(PACKAGE, "the VS Code extension", TIMEOUT_S, CI="1")
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    vsix = PACKAGE / f"{manifest['name']}-{manifest['version']}.vsix"
    vsix.unlink(missing_ok=True)

    package.install()
    package.run("test")
    package.run("run", "package")

    assert vsix.is_file(), f"{vsix.name} was not written"
    assert zipfile.is_zipfile(vsix), f"{vsix.name} is not a zip archive"
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        assert {"extension/package.json", "extension/dist/extension.js", "extension.vsixmanifest"} <= names, names
        assert "extension/schemas/settings.schema.json" in names, names
        assert not any(name.startswith(("extension/node_modules/", "extension/src/", "extension/test/"))
                       for name in names), names
        packaged = json.loads(archive.read("extension/package.json"))
    assert packaged["main"] == "./dist/extension.js"
    assert "extensionDependencies" not in packaged
    for entry in packaged["contributes"]["jsonValidation"]:
        assert "extension/" + entry["url"].removeprefix("./") in names, entry
