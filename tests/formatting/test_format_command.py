"""`context-assembly format [--check] [PATHS]` and the server's own writes coming out formatted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.formatting import format_text
from context_assembly.workspace.layout import WorkspaceLayout
from context_assembly.workspace.repository import definition_repository, rule_engine_repository

from ..workspace.builder import memory, write

REPO = Path(__file__).resolve().parents[2]


def test_the_example_and_every_definition_the_tests_write_are_formatted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["format", "--check", str(REPO / "examples")]) == 0
    assert "0 file(s) would be reformatted" in capsys.readouterr().out


def test_check_reports_and_writes_nothing_then_format_rewrites(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    engine = write(tmp_path, "context-rule-engines/main.json", '{"rules": [], "id": "main"}')
    note = write(tmp_path, "memory/note.md", "# not a definition\n")
    kept = write(tmp_path, "PersistentMemory/m.json", format_text(json.dumps(memory("m")), "m.json",
                                                                    "persistent-memory"))
    assert main(["format", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"would reformat {engine}" in out and str(kept) not in out and str(note) not in out
    assert engine.read_text() == '{"rules": [], "id": "main"}'

    assert main(["format", str(tmp_path)]) == 0
    assert engine.read_text() == '{\n  "id": "main",\n  "rules": []\n}\n'
    assert main(["format", "--check", str(engine)]) == 0


def test_a_file_that_cannot_be_formatted_is_reported_and_left_alone(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    broken = write(tmp_path, "PersistentMemory/broken.json", '{"id": "a", "id": "b"}')
    good = write(tmp_path, "PersistentMemory/good.json", '{"label": "x", "id": "good"}')
    assert main(["format", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{broken}: cannot format: the key 'id' appears twice" in out
    assert broken.read_text() == '{"id": "a", "id": "b"}'
    assert json.loads(good.read_text()) == {"id": "good", "label": "x"}  # the others are still formatted


def test_explicit_files_that_are_not_definitions_are_named(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "package.json"
    other.write_text("{}")
    assert main(["format", str(other)]) == 0
    assert "not a definition file" in capsys.readouterr().out


def test_crud_writes_come_out_formatted(tmp_path: Path) -> None:
    layout = WorkspaceLayout(tmp_path)
    engines = rule_engine_repository(layout)
    engines.create({"rules": [{"then": {"add_memories": ["m"]}, "when": [], "id": "r"}], "name": "Main"})
    engines.add_rule("main", {"when": [{"value": "x", "operator": "eq", "field": "addVar.phase"}], "id": "r2"})
    path = layout.rule_engines_dir / "main.json"
    text = path.read_text()
    assert format_text(text, path.name, "rule-engine") == text
    assert text.index('"id": "r2"') < text.index('"when"', text.index('"id": "r2"'))

    memories = definition_repository(layout, "persistent-memory")
    write(tmp_path, "PersistentMemory/y.yaml", "# comment\nname: Y\nstep: kv_get\n")
    memories.update("y", {"description": "d"})
    text = (layout.persistent_memory_dir / "y.yaml").read_text()
    assert format_text(text, "y.yaml", "persistent-memory") == text


def test_a_path_that_does_not_exist_is_an_error_and_nothing_is_written(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    engine = write(tmp_path, "context-rule-engines/main.json", '{"rules": [], "id": "main"}')
    assert main(["format", str(tmp_path), str(tmp_path / "nowhere")]) == 2
    assert "no such file or directory" in capsys.readouterr().out
    assert engine.read_text() == '{"rules": [], "id": "main"}'


def test_a_folder_inside_codebolt_is_checked_too(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`format --check .codebolt/context-rule-engines` (or run from inside it) looked for .codebolt/
    folders below the path only: it checked nothing and passed."""
    engines = tmp_path / ".codebolt" / "context-rule-engines"
    engines.mkdir(parents=True)
    (engines / "e.json").write_text('{"rules": [], "id": "e"}')
    assert main(["format", "--check", str(engines)]) == 1
    assert "would reformat" in capsys.readouterr().out
    monkeypatch.chdir(engines)
    assert main(["format", "--check"]) == 1
    capsys.readouterr()
    assert main(["format", "."]) == 0
    assert main(["format", "--check", str(tmp_path)]) == 0
