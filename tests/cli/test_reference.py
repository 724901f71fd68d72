"""The README's reference tables are the registries' own output."""

from __future__ import annotations

import pytest

from context_assembly.cli.main import main
from context_assembly.registry.operators import OPERATORS
from context_assembly.registry.reference import TOPICS, fill_markers

from ..conftest import REPO


def test_readme_tables_match_the_registries() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert fill_markers(readme) == readme, "run: context-assembly reference --fill README.md"


def test_every_operator_and_alias_is_documented() -> None:
    table = TOPICS["operators"]()
    for op in OPERATORS:
        assert f"`{op.name}`" in table
        for alias in op.aliases:
            assert f"`{alias}`" in table


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_reference_command_prints_each_topic(topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reference", topic]) == 0
    assert capsys.readouterr().out.startswith("| ")
