"""The Helix snippet (`editor-clients/helix/languages.toml`): valid TOML, the server entry starts
`context-assembly serve` with settings the server accepts, and JSON and YAML use it next to Helix's
default servers. (Helix itself is not packaged for Debian; what the server does with the
non-definition files Helix sends it is checked with a real editor in test_neovim_client.py.)"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parent.parent
HELIX = REPO / "editor-clients" / "helix"
SERVER = "context-assembly"
# Helix's built-in servers for these languages: the snippet replaces the list, so it must keep them
DEFAULT_SERVERS = {"json": "vscode-json-language-server", "yaml": "yaml-language-server"}


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


def test_json_and_yaml_use_the_server_next_to_the_defaults() -> None:
    languages = {entry["name"]: entry for entry in _config()["language"]}
    assert set(languages) == {"json", "yaml"}
    for name, language in languages.items():
        servers = _server_names(language)
        assert SERVER in servers, name
        assert DEFAULT_SERVERS[name] in servers, f"{name}: the built-in server would be dropped"
        assert len(servers) == len(set(servers)), name
        assert language.get("roots") == [".codebolt"], name
        # only what is needed: everything else of the language stays Helix's built-in configuration
        assert set(language) <= {"name", "language-servers", "roots"}, name


def test_readme_names_the_places_and_the_health_check() -> None:
    readme = (HELIX / "README.md").read_text(encoding="utf-8")
    for needle in ("~/.config/helix/languages.toml", ".helix/languages.toml", "hx --health", "language-servers"):
        assert needle in readme, needle
