"""The Helix snippet (`editor-clients/helix/languages.toml`): valid TOML, the server entry starts
`context-assembly serve` with settings the server accepts, and only files under `.codebolt/` get the
two languages that use it (JSON and YAML elsewhere keep Helix's own servers). Helix itself is not
packaged for Debian, so its glob rule is reproduced here."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parent.parent
HELIX = REPO / "editor-clients" / "helix"
SERVER = "context-assembly"


def _config() -> dict[str, Any]:
    with (HELIX / "languages.toml").open("rb") as handle:
        return tomllib.load(handle)


def _server_names(language: dict[str, Any]) -> list[str]:
    """`language-servers` entries are names or tables `{ name = …, only-features = … }`."""
    return [entry if isinstance(entry, str) else entry["name"] for entry in language.get("language-servers", [])]


def test_server_entry_starts_the_sidecar_on_stdio() -> None:
    server = _config()["language-server"][SERVER]
    assert server["command"] == "context-assembly"
    assert server["args"] == ["serve"]
    assert set(server) <= {"command", "args", "config", "environment", "timeout", "required-root-patterns"}


def test_settings_reach_both_places_the_server_reads_and_are_valid() -> None:
    config = _config()["language-server"][SERVER]["config"]
    # initializationOptions.settings and the workspace/configuration section `contextAssembly`
    assert set(config) == {"settings", "contextAssembly"}
    assert config["settings"] == config["contextAssembly"], "keep the two copies of the settings equal"
    schema = json.loads((REPO / "schemas" / "settings.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(config["settings"], schema)  # no key the server would drop
    assert config["settings"], "the snippet should show at least one setting"


def _helix_glob_matches(glob: str, path: str) -> bool:
    """Helix's rule: a relative glob gets `*/` in front and is matched against the absolute path,
    with `*` crossing `/` (globset's default)."""
    pattern = glob if glob.startswith(("/", "*")) else "*/" + glob
    return fnmatch.fnmatchcase(path, pattern)


def test_only_files_under_codebolt_get_the_languages_that_start_the_server() -> None:
    languages = {entry["name"]: entry for entry in _config()["language"]}
    assert set(languages) == {"codebolt-json", "codebolt-yaml"}, "json and yaml themselves stay Helix's"
    cases = {
        "codebolt-json": (["/home/u/shop/.codebolt/context-rule-engines/planning.json",
                           "/home/u/shop/.codebolt/knowledgegraph/views/dependents.json",
                           "/srv/mono/svc/.codebolt/PersistentMemory/docs.json"],
                          ["/home/u/shop/package.json", "/home/u/shop/.codebolt-old/a.json",
                           "/home/u/shop/.codebolt/PersistentMemory/a.yaml"]),
        "codebolt-yaml": (["/home/u/shop/.codebolt/ContextRuleEngine/02_security.yaml",
                           "/home/u/shop/.codebolt/PersistentMemory/notes.yml"],
                          ["/home/u/shop/.github/workflows/ci.yml", "/home/u/shop/codebolt/a.yaml"]),
    }
    for name, language in languages.items():
        assert _server_names(language) == [SERVER], name
        fmt = name.removeprefix("codebolt-")
        assert language["grammar"] == fmt and language["language-id"] == fmt, name
        assert language["roots"] == [".codebolt"] and language["scope"].startswith("source."), name
        globs = [entry["glob"] for entry in language["file-types"]]
        matching, other = cases[name]
        for path in matching:
            assert any(_helix_glob_matches(glob, path) for glob in globs), (name, path)
        for path in other:
            assert not any(_helix_glob_matches(glob, path) for glob in globs), (name, path)
        # the grammar's highlighting, indentation and text objects, found by language name
        queries = HELIX / "runtime" / "queries" / name
        for query in ("highlights.scm", "indents.scm", "textobjects.scm"):
            assert (queries / query).read_text(encoding="utf-8").strip() == f"; inherits: {fmt}", (name, query)


def test_readme_names_the_places_and_the_health_check() -> None:
    readme = (HELIX / "README.md").read_text(encoding="utf-8")
    for needle in ("~/.config/helix/languages.toml", ".helix/languages.toml", "hx --health codebolt-json",
                   "~/.config/helix/runtime/queries/", "Helix 24.03", "pipx install ."):
        assert needle in readme, needle
