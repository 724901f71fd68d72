"""`context-assembly memory read|write|delete|list`: the memory/* calls from a terminal, as JSON."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from context_assembly.cli import memory as memory_cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """Through the command's own parser, as `context-assembly` wires every command."""
    parser = argparse.ArgumentParser(prog="context-assembly")
    memory_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["memory", *argv])
    status = args.run(args)
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out.strip() else None, captured.err


def test_write_read_list_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = ["--workspace", str(tmp_path)]
    assert run(capsys, "write", "kv://users/alice", '{"theme": "dark"}', *ws)[:2] == (
        0, {"uri": "kv://users/alice", "written": True})
    assert run(capsys, "read", "kv://users/alice", *ws)[:2] == (
        0, {"uri": "kv://users/alice", "exists": True, "value": {"theme": "dark"}})
    status, listed, _ = run(capsys, "list", "kv://users/", *ws)
    assert status == 0 and [i["uri"] for i in listed["items"]] == ["kv://users/alice"]
    assert run(capsys, "delete", "kv://users/alice", *ws)[:2] == (0, {"uri": "kv://users/alice", "deleted": True})
    assert run(capsys, "read", "kv://users/alice", *ws)[1]["exists"] is False


def test_an_append_run_again_with_its_key_lands_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write = ["write", "log://deploys", '{"event_type": "deployed", "version": "1.2"}', "--workspace", str(tmp_path)]
    assert run(capsys, *write, "--idempotency-key", "deploy-1.2")[:2] == (0, {"uri": "log://deploys", "written": True})
    assert run(capsys, *write, "--idempotency-key", "deploy-1.2")[:2] == (
        0, {"uri": "log://deploys", "written": True, "duplicate": True})
    assert len(run(capsys, "read", "log://deploys", "--workspace", str(tmp_path))[1]["value"]) == 1


def test_text_values_and_stdin(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    ws = ["--workspace", str(tmp_path)]
    assert run(capsys, "write", "markdown://decisions", "--text", "We use SQLite.", *ws)[0] == 0
    assert (tmp_path / ".codebolt" / "memory" / "decisions.md").read_text() == "We use SQLite."
    monkeypatch.setattr("sys.stdin", io.StringIO('{"event_type": "deploy", "payload": {"v": 2}}'))
    assert run(capsys, "write", "log://default", "-", *ws)[0] == 0
    status, result, _ = run(capsys, "read", "log://default?event_type=deploy", *ws)
    assert status == 0 and result["value"][0]["payload"] == {"v": 2}


@pytest.mark.parametrize(("argv", "message"), [
    (["read", "nope://x"], "unknown memory URI scheme"),
    (["read", "file://../secret"], "'..' segments are not allowed"),
    (["write", "kv://k", "{not json"], "not JSON"),
    (["write", "kv://k"], "needs a VALUE"),
    (["write", "kv://k", "1", "--text", "x"], "not both"),
    (["read", "kv://k", "1"], "takes no VALUE"),
    (["delete", "log://default"], "append-only"),
    (["write", "file://a.txt", '"x"'], "read-only"),
    (["list", "nope://"], "unknown memory URI scheme"),
    (["write", "kv://k", '{"n": 18446744073709551617}'], "VALUE: the integer 18446744073709551617 is outside"),
    (["read", "log://x", "--idempotency-key", "k"], "takes no --idempotency-key"),
    (["write", "log://x", '{"event_type": "e"}', "--idempotency-key", ""], "idempotency key must be a non-empty"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                argv: list[str], message: str) -> None:
    status, out, err = run(capsys, *argv, "--workspace", str(tmp_path))
    assert status == 2 and out is None
    assert message in err and err.startswith("context-assembly memory: ")


def test_storage_failures_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = tmp_path / ".codebolt/db/project.db"
    database.parent.mkdir(parents=True)
    database.write_bytes(b"this is not a database" * 100)
    status, out, err = run(capsys, "read", "kv://k", "--workspace", str(tmp_path))
    assert (status, out) == (1, None) and "database" in err


def test_import_seeds_the_example_idempotently(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(example_copy / "seed.json")
    for _ in range(2):
        status, out, _ = run(capsys, "import", seed, "--workspace", str(example_copy))
        imported = out["imported"]
        assert status == 0 and {k: imported[k] for k in ("writes", "threads", "turns", "nodes", "edges")} == {
            "writes": 12, "threads": 1, "turns": 3, "nodes": 12, "edges": 15}
        assert sum(imported["stores"].values()) == 12
        assert imported["written"] == {**imported["stores"], "episodic": 3, "graph": 27}
        assert imported["units"] == [
            {"unit": "graph", "schemes": ["graph"], "state": "committed"},
            {"unit": "database", "schemes": ["episodic", "json", "kv", "vector", "working"], "state": "committed"}]
    _, turns, _ = run(capsys, "read", "episodic://t-42", "--workspace", str(example_copy))
    assert len(turns["value"]) == 3  # replaced, not appended twice
    _, prefs, _ = run(capsys, "read", "kv://users/u-ada", "--workspace", str(example_copy))
    assert prefs["value"]["wants_tests"] is True


def test_import_refuses_bad_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"writes": [{"uri": "log://default", "value": {}}], "extra": 1, "graph": "../../x.json"}')
    status, _, err = run(capsys, "import", str(bad), "--workspace", str(tmp_path))
    assert status == 2 and "/writes/0/uri" in err and "/extra" in err
    bad.write_text('{"graph": "../../outside.json"}')
    status, _, err = run(capsys, "import", str(bad), "--workspace", str(tmp_path))
    assert status == 2 and "/graph" in err
    bad.write_text('{"collections": {"c": {"embedding_model": "no-such-model"}}, "writes": []}')
    status, _, err = run(capsys, "import", str(bad), "--workspace", str(tmp_path))
    assert status == 2 and "/collections/c/embedding_model: unknown embedding model 'no-such-model'" in err
    bad.write_text('{"writes": [{"uri": "kv://n", "value": -9223372036854775809}]}')
    status, _, err = run(capsys, "import", str(bad), "--workspace", str(tmp_path))
    assert status == 2 and "the integer -9223372036854775809 is outside the range" in err


def test_import_checks_the_whole_file_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".codebolt").mkdir()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"writes": [{"uri": "kv://first", "value": 1}],
                               "threads": {"t-1": [{"role": "user", "content": "hi"}]},
                               "graph": {"nodes": [{"id": "a", "kind": "K"}], "edges": [{"kind": "R", "from": "a"}]}}))
    status, _, err = run(capsys, "import", str(bad), "--workspace", str(tmp_path))
    assert status == 2 and "/graph/edges/0/to" in err
    _, first, _ = run(capsys, "read", "kv://first", "--workspace", str(tmp_path))
    assert first["exists"] is False  # nothing was written
    _, turns, _ = run(capsys, "read", "episodic://t-1", "--workspace", str(tmp_path))
    assert turns["value"] == []


def test_import_takes_an_inline_graph_and_names_edges_without_ids(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".codebolt").mkdir()
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"writes": [{"uri": "kv://a", "value": 1}, {"uri": "json://doc", "value": {}}],
                                "graph": {"nodes": [{"id": "a", "kind": "K"}, {"id": "b", "kind": "K"}],
                                          "edges": [{"kind": "R", "from": "a", "to": "b"}]}}))
    for _ in range(2):  # the generated id is stable: importing twice gives one edge
        status, out, _ = run(capsys, "import", str(seed), "--workspace", str(tmp_path))
        assert status == 0 and out["imported"] == {
            "writes": 2, "threads": 0, "turns": 0, "nodes": 2, "edges": 1, "stores": {"kv": 1, "json": 1},
            "written": {"graph": 3, "json": 1, "kv": 1},
            "units": [{"unit": "graph", "schemes": ["graph"], "state": "committed"},
                      {"unit": "database", "schemes": ["json", "kv"], "state": "committed"}]}
    from context_assembly.stores.kuzu.graph import generated_edge_id

    uri = f"graph://default/edge/{generated_edge_id('R', 'a', 'b')}"
    _, edge, _ = run(capsys, "read", uri, "--workspace", str(tmp_path))
    assert edge["exists"] and (edge["value"]["from"], edge["value"]["to"]) == ("a", "b")


def test_missing_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "read", "kv://k", "--workspace", str(tmp_path / "nope"))
    assert status == 2 and "no such directory" in err
    assert not (tmp_path / "nope").exists()


def test_a_refusal_is_printed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".codebolt").mkdir()
    status, _, err = run(capsys, "write", "log://audit", "5", "--workspace", str(tmp_path))
    assert status == 2
    assert err.count("an event is a JSON object") == 1 and "/value" in err


def test_import_keeps_names_holding_percent_signs_and_slashes(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A thread "sprint%2024" and a log instance "ops%2Fprod" are those names, not "sprint 24" and
    "ops/prod" (decoded once more on the way in), so a second import finds the log written and
    skips it instead of appending the events again."""
    source = tmp_path / "in.json"
    source.write_text(json.dumps({"threads": {"sprint%2024": [{"role": "user", "content": "hi"}]},
                                  "events": {"ops%2Fprod": [{"event_type": "deploy", "payload": {"v": 1}}]}}))
    ws = ["--workspace", str(tmp_path)]
    assert run(capsys, "import", str(source), *ws)[0] == 0
    status, second, _ = run(capsys, "import", str(source), *ws)
    assert status == 0 and second["imported"]["skipped"] == {"events": {"ops%2Fprod": 1}}
    _, threads, _ = run(capsys, "list", "episodic://", *ws)
    assert [(i["thread_id"], i["uri"]) for i in threads["items"]] == [("sprint%2024", "episodic://sprint%252024")]
    _, logs, _ = run(capsys, "list", "log://", *ws)
    assert [(i["instance"], i["count"]) for i in logs["items"]] == [("ops%2Fprod", 1)]


def test_the_workspace_limits_hold_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The settings file's limits, as a sidecar's memory/* calls apply them (they did not here)."""
    settings = tmp_path / ".codebolt" / "context-assembly.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"limits": {"log_limit": 3, "write_value_bytes": 1024}}))
    ws = ["--workspace", str(tmp_path)]
    for n in range(4):
        assert run(capsys, "write", "log://default", json.dumps({"event_type": "e", "payload": {"n": n}}), *ws)[0] == 0
    status, read, _ = run(capsys, "read", "log://default?limit=3", *ws)
    assert status == 0 and len(read["value"]) == 3
    status, out, err = run(capsys, "read", "log://default?limit=4", *ws)
    assert (status, out) == (2, None) and "limits.log_limit" in err
    status, out, err = run(capsys, "write", "kv://big", json.dumps("x" * 1023), *ws)
    assert (status, out) == (2, None) and "at most 1024 (limits.write_value_bytes)" in err
    assert run(capsys, "read", "kv://big", *ws)[1]["exists"] is False
    status, exported, _ = run(capsys, "export", "-", *ws)  # an export is the whole store, past log_limit
    assert status == 0 and len(exported["events"]["default"]) == 4


def test_a_value_after_the_options_is_the_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`memory write URI --workspace DIR VALUE` failed with "unrecognized arguments"."""
    from context_assembly.cli.main import main

    assert main(["memory", "write", "kv://k", "--workspace", str(tmp_path), '{"a": 1}']) == 0
    capsys.readouterr()
    assert main(["memory", "read", "kv://k", "--workspace", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == {"a": 1}
    assert main(["memory", "write", "kv://n", "--workspace", str(tmp_path), "-5.5"]) == 0  # a number, not an option
    capsys.readouterr()
    assert main(["memory", "read", "kv://n", "--workspace", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == -5.5
    with pytest.raises(SystemExit) as caught:  # more than one left over is still an error
        main(["memory", "write", "kv://k", "--workspace", str(tmp_path), "1", "2"])
    assert caught.value.code == 2 and "unrecognized arguments: 1 2" in capsys.readouterr().err
    assert main(["memory", "list", "kv://", "--workspace", str(tmp_path), "stray"]) == 2  # its own words
    assert "list takes no VALUE" in capsys.readouterr().err
