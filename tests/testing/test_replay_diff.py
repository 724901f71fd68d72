"""`context-assembly replay` and `diff`: a stored assembly re-run against today's definitions and
stores, and two assemblies compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.cli.main import main


@pytest.fixture
def snapshotting(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["memory", "import", str(example_copy / "seed.json"), "--workspace", str(example_copy)]) == 0
    settings = example_copy / ".codebolt" / "context-assembly.json"
    settings.write_text(settings.read_text().replace('"snapshots": false', '"snapshots": true'))
    capsys.readouterr()
    return example_copy


def _assemble(root: Path, capsys: pytest.CaptureFixture[str], request: Path) -> str:
    assert main(["assemble", "--workspace", str(root), "--request", str(request), "--json"]) == 0
    return str(json.loads(capsys.readouterr().out)["meta"]["assembly_id"])


def test_replay_without_and_with_drift(snapshotting: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assembly_id = _assemble(snapshotting, capsys, snapshotting / "request.json")
    assert main(["replay", assembly_id, "--workspace", str(snapshotting), "--exit-code"]) == 0
    out = capsys.readouterr().out
    assert f"Replay of {assembly_id}: no drift" in out and "(identical)" in out
    # a note changes and a rule stops firing: both show as drift
    note = snapshotting / ".codebolt" / "memory" / "coding-standards.md"
    note.write_text(note.read_text() + "\n- Tests name the behaviour they check.\n")
    engine = snapshotting / ".codebolt" / "context-rule-engines" / "planning.json"
    engine.write_text(engine.read_text().replace('"value": "bugfix"', '"value": "nothing"').replace(
        '"bugfix",', '"nothing",'))
    assert main(["replay", assembly_id, "--workspace", str(snapshotting), "--exit-code"]) == 1
    out = capsys.readouterr().out
    assert f"Replay of {assembly_id}: drifted" in out
    assert "content changed" in out and "project-conventions" in out
    assert "rule no longer fires: planning/similar-past-tasks" in out
    assert "memory no longer activated: related-tasks" in out
    assert main(["replay", assembly_id, "--workspace", str(snapshotting), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["drifted"] is True and set(result) == {"request", "before", "after", "drift", "drifted"}
    assert result["drift"]["sections"]["suggestions"]["after"] == 0
    assert result["drift"]["sections"]["suggestions"]["delta"] < 0
    # a replay keeps no snapshot of its own
    assert len(list((snapshotting / ".codebolt" / "memory" / "context").iterdir())) == 1


def test_replay_errors(snapshotting: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # so `../../etc/passwd` is no file from here: it names a snapshot
    assert main(["replay", "no-such-id", "--workspace", str(snapshotting)]) == 2
    assert "no such snapshot" in capsys.readouterr().err
    assert main(["replay", "../../etc/passwd", "--workspace", str(snapshotting)]) == 2
    assert "refused" in capsys.readouterr().err
    not_a_snapshot = tmp_path / "x.json"
    not_a_snapshot.write_text('{"context": {}}')
    assert main(["replay", str(not_a_snapshot), "--workspace", str(snapshotting)]) == 2
    assert "not an assembly snapshot" in capsys.readouterr().err
    assert main(["replay", "x", "--workspace", str(tmp_path / "missing")]) == 2


def test_diff_two_requests(snapshotting: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = json.loads((snapshotting / "request.json").read_text())
    other = {**request, "additional_variables": {**request["additional_variables"], "phase": "implementation"},
             "constraints": {"max_tokens": 400}}
    second = tmp_path / "other.json"
    second.write_text(json.dumps(other))
    assert main(["diff", str(snapshotting / "request.json"), str(second), "--workspace", str(snapshotting),
                 "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["identical"] is False
    assert result["rules"]["no_longer_fired"] == ["planning/arch-in-planning"]
    assert result["after"]["token_estimate"] <= 400 < result["before"]["token_estimate"]
    assert any(i["memory"] == "recent-history" for i in result["removed"])
    assert result["sections"]["history"]["after"] < result["sections"]["history"]["before"]
    assert all(set(v) == {"before", "after", "delta"} for v in result["sections"].values())
    assert main(["diff", str(snapshotting / "request.json"), str(second), "--workspace", str(snapshotting)]) == 0
    out = capsys.readouterr().out
    assert "rule no longer fires: planning/arch-in-planning" in out and "Section          before   after" in out


def test_diff_snapshots_moved_and_reranked(snapshotting: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    first = _assemble(snapshotting, capsys, snapshotting / "request.json")
    # history becomes a critical memory of another section; boosts re-rank knowledge
    memory = snapshotting / ".codebolt" / "PersistentMemory" / "recent-history.json"
    definition = json.loads(memory.read_text())
    definition["contribution"] = {**definition.get("contribution", {}), "section": "constraints"}
    memory.write_text(json.dumps(definition))
    second = _assemble(snapshotting, capsys, snapshotting / "request.json")
    assert main(["diff", first, second, "--workspace", str(snapshotting), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    moved = [m for m in result["moved"] if m["memory"] == "recent-history"]
    assert moved and all(m["from"] == "history" and m["to"] == "constraints" for m in moved)
    assert result["sections"]["history"]["after"] == 0
    # the same snapshot against itself
    assert main(["diff", first, first, "--workspace", str(snapshotting), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True
    assert main(["diff", first, "no-such-snapshot", "--workspace", str(snapshotting)]) == 2


def test_a_result_served_from_the_cache_is_no_drift(snapshotting: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sidecar's second assembly of a request reads its memories from the pipeline cache
    (status `cached`); replaying it runs them anew (`ok`): the same outcome, not a drift."""
    from context_assembly.methods.session import Session
    from context_assembly.methods.table import call

    request = json.loads((snapshotting / "request.json").read_text())
    session = Session(snapshotting)
    try:
        call(session, "contextAssembly/assemble", request)
        second = call(session, "contextAssembly/assemble", request)
    finally:
        session.runtime.close()
    assert "cached" in {c["status"] for c in second["trace"]["memory_calls"]}
    assembly_id = second["meta"]["assembly_id"]
    assert main(["replay", assembly_id, "--workspace", str(snapshotting), "--exit-code", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["drifted"] is False and result["drift"]["memories"]["status_changed"] == []


def test_found_from_a_subfolder_and_a_page_that_cannot_be_written(
        snapshotting: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    assembly_id = _assemble(snapshotting, capsys, snapshotting / "request.json")
    monkeypatch.chdir(snapshotting / "src")
    assert main(["replay", assembly_id, "--exit-code", "--no-color"]) == 0
    assert f"Replay of {assembly_id}: no drift" in capsys.readouterr().out
    assert main(["diff", assembly_id, assembly_id]) == 0
    assert "(identical)" in capsys.readouterr().out
    # the result is printed first; the page's folder missing is a clear error, not a traceback
    missing = str(tmp_path / "no-such-folder" / "page.html")
    assert main(["replay", assembly_id, "--json", "--html", missing]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["drifted"] is False
    assert captured.err.startswith(f"context-assembly replay: cannot write the trace page {missing}: ")
    assert main(["diff", assembly_id, assembly_id, "--html", missing]) == 2
    assert "context-assembly diff: cannot write the trace page" in capsys.readouterr().err
    assert main(["assemble", "--request", str(snapshotting / "request.json"), "--html", missing]) == 2
    captured = capsys.readouterr()
    assert "Tokens" in captured.out or "tokens" in captured.out
    assert "context-assembly assemble: cannot write the trace page" in captured.err
    monkeypatch.chdir(tmp_path)
    assert main(["replay", assembly_id]) == 2
    assert "no .codebolt/ folder in" in capsys.readouterr().err


def test_a_snapshot_in_a_linked_codebolt_is_read_and_nothing_beside_it(tmp_path: Path) -> None:
    """`.codebolt` linked to a shared folder: its snapshots are read by assembly id; a path leaving
    the linked folder stays refused."""
    from context_assembly.assembly.replay import read_snapshot
    from context_assembly.errors import InvalidParamsError

    shared = tmp_path / "shared" / "cb"
    (shared / "memory" / "context").mkdir(parents=True)
    (shared / "memory" / "context" / "asm-1.json").write_text(json.dumps({"request": {}, "result": {}}))
    (tmp_path / "shared" / "beside.json").write_text("{}")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".codebolt").symlink_to(shared, target_is_directory=True)
    assert read_snapshot(project, "asm-1") == {"request": {}, "result": {}}
    for escape in (".codebolt/../beside.json", ".codebolt/../../shared/beside.json"):
        with pytest.raises(InvalidParamsError):
            read_snapshot(project, escape)


def test_another_tokenizer_is_drift(snapshotting: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same items counted anew (cl100k for the estimate) changed every section's tokens, and the
    replay said "no drift"."""
    assembly_id = _assemble(snapshotting, capsys, snapshotting / "request.json")
    settings = snapshotting / ".codebolt" / "context-assembly.json"
    settings.write_text(settings.read_text().replace('"tokenizer": "estimate"', '"tokenizer": "cl100k"'))
    assert '"cl100k"' in settings.read_text()
    assert main(["replay", assembly_id, "--workspace", str(snapshotting), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["drifted"] is True
    assert result["drift"]["changed"] and all(c["tokens_before"] != c["tokens"] for c in result["drift"]["changed"])
    assert main(["replay", assembly_id, "--workspace", str(snapshotting), "--exit-code"]) == 1
