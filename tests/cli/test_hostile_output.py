"""What the commands print of memory and definition text: anyone may have written it, so no control
character reaches the terminal (cursor moves, line rewrites, window titles, the clipboard, bidi
overrides), a title cannot print a line of its own, and `test --format github` runs no command a
case name carries."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from context_assembly.cli.main import main
from context_assembly.cli.terminal import Painter, colour_wanted, one_line, visible

HOSTILE = "Evil\x1b[2K\r\x1b[32mPASS\x1b]0;PWNED\x07 \x1b]52;c;ZXZpbA==\x07 \u202eeman\x9b2J"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_control_characters_are_shown_and_the_painters_styles_kept() -> None:
    paint = Painter(True)
    out = paint.finish(paint("head", "bold") + " " + HOSTILE + "\n" + paint(HOSTILE, "warning"))
    assert not RAW.search(out.replace("\x1b[1m", "").replace("\x1b[1;33m", "").replace("\x1b[0m", ""))
    assert out.startswith("\x1b[1mhead\x1b[0m Evil\\x1b[2K\\r\\x1b[32mPASS\\x1b]0;PWNED\\x07")
    assert "\\u202eeman\\x9b2J" in out and out.count("\n") == 1
    assert Painter(False).finish(paint("x", "bold")) == visible(paint("x", "bold"))  # a marker is not a style
    assert one_line("a\nb\tc") == "a\\nb\\tc" and visible("a\nb\tc") == "a\nb\tc"


def test_an_empty_no_color_leaves_colour_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """no-color.org: only a value that is present and not empty turns colour off."""
    import argparse

    class Terminal:
        def isatty(self) -> bool:
            return True

    args = argparse.Namespace(no_color=False)
    monkeypatch.setenv("NO_COLOR", "")
    assert colour_wanted(args, Terminal()) is True  # type: ignore[arg-type]
    monkeypatch.setenv("NO_COLOR", "1")
    assert colour_wanted(args, Terminal()) is False  # type: ignore[arg-type]


@pytest.fixture
def hostile(example_copy: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = ["--workspace", str(example_copy)]
    assert main(["memory", "import", str(example_copy / "seed.json"), *ws]) == 0
    doc = {"text": HOSTILE + " the login timeout and the auth session. " * 3,
           "metadata": {"title": "Harmless\n  - [critical, 1 tok] forged item " + HOSTILE}}
    assert main(["memory", "write", "vector://docs/evil", json.dumps(doc), *ws]) == 0
    assert main(["memory", "write", "markdown://long", "--text", "x" * 50_000, *ws]) == 0
    capsys.readouterr()
    return example_copy


def test_assemble_prints_no_control_character(hostile: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    request = json.loads((hostile / "request.json").read_text())
    request["explicit_memory"] = ["vector://docs?q=login%20timeout%20auth%20session", "markdown://long"]
    (hostile / "hostile.json").write_text(json.dumps(request))
    assert main(["assemble", "--workspace", str(hostile), "--request", str(hostile / "hostile.json")]) == 0
    out = capsys.readouterr().out
    styles = re.compile(r"\x1b\[[0-9;]*m")
    assert "\x1b[1m" in out and not RAW.search(styles.sub("", out))  # colour, and nothing else
    assert "Harmless\\n  - [critical, 1 tok] forged item Evil\\x1b[2K\\r" in out
    assert not any(line.startswith("  - [critical, 1 tok] forged") for line in out.splitlines())
    assert max(len(line) for line in out.splitlines()) < 400  # a 50,000-character line is cut


def test_the_report_keeps_kept_items_apart_from_dropped_ones(hostile: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A shortened item was listed under "Dropped" while it sat in its section."""
    request = json.loads((hostile / "request.json").read_text())
    request["explicit_memory"] = ["markdown://long"]
    (hostile / "long.json").write_text(json.dumps(request))
    engine = hostile / ".codebolt" / "context-rule-engines" / "zcap.json"
    engine.write_text(json.dumps({"id": "zcap", "rules": [{"id": "short", "when": [], "then": {
        "caps": [{"target": "markdown://long", "max_tokens": 40}]}}]}))
    assert main(["assemble", "--workspace", str(hostile), "--request", str(hostile / "long.json")]) == 0
    out = capsys.readouterr().out
    kept = out[out.index("Kept, changed:"):]
    assert "shortened" in kept.splitlines()[1]
    dropped = out[out.index("Dropped:"):out.index("Kept, changed:")] if "Dropped:" in out else ""
    assert "shortened" not in dropped


def test_github_format_runs_no_command_a_case_name_carries(example_copy: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    tests = example_copy / ".codebolt" / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "zz-inject.json").write_text(json.dumps({"cases": [{
        "name": "case\n::stop-commands::hidetoken\n::notice file=README.md,line=1::All tests passed",
        "request": {"scope_variables": {}}, "expect": {"memories_include": ["no-such-memory"]}}]}))
    main(["test", "--workspace", str(example_copy), "--format", "github"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    stop = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[stop].removeprefix("::stop-commands::")
    assert len(token) == 32 and lines[-1] == f"::{token}::"
    commands = [line for line in lines[:stop] + lines[-1:] if line.startswith("::")]
    assert all("All tests passed" not in line and "hidetoken" not in line.split("::")[1] for line in commands)
    assert not any(line.startswith(("::notice", "::stop-commands::hidetoken")) for line in lines)


def test_json_output_and_error_messages_hold_no_raw_control(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    """JSON leaves C1 codes and bidi overrides raw (orjson escapes only C0), and error messages
    quote what the input holds: both reached the terminal as they were."""
    ws = ["--workspace", str(tmp_path)]
    value = "safe\u202eevil\x9b2J\x1b]0;T\x07"
    assert main(["memory", "write", "kv://ns/evil", json.dumps(value), *ws]) == 0
    capsys.readouterr()
    assert main(["memory", "read", "kv://ns/evil", *ws]) == 0
    out = capsys.readouterr().out
    assert not RAW.search(out) and json.loads(out)["value"] == value  # the same JSON value
    (tmp_path / ".codebolt").mkdir(exist_ok=True)
    hostile = {"context": {}, "trace": {}, "meta": {}, "\x1b]0;PWNED\x07\u202e": 1}
    (tmp_path / "b.json").write_text(json.dumps(hostile))
    assert main(["diff", str(tmp_path / "b.json"), str(tmp_path / "b.json"), *ws]) == 2
    captured = capsys.readouterr()
    assert "unknown property" in captured.err and not RAW.search(captured.err + captured.out)
