"""What a user installing the package relies on: one version everywhere, the licence, the changelog,
and install advice that names nothing unpublished."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from context_assembly import __version__
from context_assembly.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


def test_version_is_defined_once_and_printed(capsys: pytest.CaptureFixture[str]) -> None:
    project = _pyproject()["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert _pyproject()["tool"]["hatch"]["version"]["path"] == "server/context_assembly/__init__.py"
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"context-assembly {__version__}"


def test_changelog_follows_keep_a_changelog_and_knows_the_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog
    assert "## [Unreleased]" in changelog
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.M)


def test_licence_is_the_one_pyproject_states_and_ships_in_both_archives() -> None:
    assert _pyproject()["project"]["license"] == "MIT"
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert "LICENSE" in _pyproject()["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]


def test_every_dependency_has_an_upper_bound() -> None:
    project = _pyproject()["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    for requirement in requirements:
        assert re.search(r"(<|==)", requirement), f"{requirement}: a major release could break us"


def test_no_install_advice_names_an_unpublished_package() -> None:
    texts = [REPO / "README.md", *(REPO / "editor-clients").glob("*/README.md"),
             REPO / "editor-clients" / "vscode" / "src" / "serverCommand.ts"]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            if re.search(r"pip install context-assembly\b", line):
                assert "finds nothing" in line or "alone" in line, f"{path.name}: {line.strip()}"


def test_the_semantic_embedder_is_an_optional_extra_and_its_absence_is_named() -> None:
    project = _pyproject()["project"]
    assert not any(r.startswith("wordllama") for r in project["dependencies"])
    assert any(r.startswith("wordllama") for r in project["optional-dependencies"]["embeddings"])
    # .ci/wheel checks, in a fresh environment without the extra, that its absence is reported by name
