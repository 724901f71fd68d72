"""A rule-engine file from the shared workload generator: spans, broken variants, speed.

The default run generates a small engine (300 rules) so it stays fast; set
CONTEXT_ASSEMBLY_SLOW_TESTS=1 to also run the 5,000-rule (2.8 MB) language-service workload.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from context_assembly.documents import parse_json

GENERATOR = Path(__file__).resolve().parents[3] / "shared" / "bench" / "peers" / "gen_workload.py"

pytestmark = pytest.mark.skipif(not GENERATOR.exists(), reason=f"workload generator not found at {GENERATOR}")


def generate(out: Path, *args: str) -> Path:
    subprocess.run([sys.executable, str(GENERATOR), *args, "--out", str(out)], check=True, capture_output=True)
    return next(out.glob("*/engines/*.json"))


@pytest.fixture(scope="module")
def engine_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = generate(
        tmp_path_factory.mktemp("workload"), "--engines", "1", "--rules", "300", "--requests", "1", "--name", "t"
    )
    return path.read_text(encoding="utf-8")


def check_field_span(text: str, rule: int) -> None:
    document = parse_json(text)
    assert document.ok
    value = document.value["rules"][rule]["when"][0]["field"]
    start, end = document.span(f"/rules/{rule}/when/0/field")  # type: ignore[misc]
    assert json.loads(text[start:end]) == value
    key_start, key_end = document.span(f"/rules/{rule}/when/0/field", "key")  # type: ignore[misc]
    assert text[key_start:key_end] == '"field"'
    line, column = document.lines.line_col(key_start)
    assert text.splitlines()[line - 1][column - 1 :].startswith('"field": ' + json.dumps(value))
    assert document.pointer_at(start + 1) == (f"/rules/{rule}/when/0/field", "value")
    assert document.pointer_at(key_start + 1) == (f"/rules/{rule}/when/0/field", "key")


def test_span_of_a_field_deep_in_the_file(engine_text: str) -> None:
    check_field_span(engine_text, 150)


def test_missing_property_of_a_rule_points_at_its_brace(engine_text: str) -> None:
    document = parse_json(engine_text)
    start, end = document.span("/rules/150/nope")  # type: ignore[misc]
    assert engine_text[start:end] == "{"
    assert document.pointer_at(start) == ("/rules/150", "value")


def test_a_missing_comma_in_the_middle_is_found_on_its_line(engine_text: str) -> None:
    document = parse_json(engine_text)
    start, _ = document.span("/rules/150/when/0/operator", "key")  # type: ignore[misc]
    comma = engine_text.rindex(",", 0, start)
    broken = engine_text[:comma] + engine_text[comma + 1 :]
    parsed = parse_json(broken)
    assert [issue.message for issue in parsed.syntax_errors] == ["missing ',' between members"]
    assert parsed.syntax_errors[0].start == start - 1
    # positions still work around the damage
    assert parsed.pointer_at(start + 2) == ("/rules/150/when/0/operator", "key")
    later = document.span("/rules/200/id")
    assert later is not None
    assert parsed.span("/rules/200/id") == (later[0] - 1, later[1] - 1)


def test_a_truncated_file_is_an_unclosed_document(engine_text: str) -> None:
    document = parse_json(engine_text)
    start, _ = document.span("/rules/120/when/0/value")  # type: ignore[misc]
    truncated = engine_text[: start + 3]
    parsed = parse_json(truncated)
    assert [issue.message for issue in parsed.syntax_errors] == ["unclosed string"]
    assert parsed.pointer_at(len(truncated)) == ("/rules/120/when/0/value", "value")


@pytest.mark.skipif(os.environ.get("CONTEXT_ASSEMBLY_SLOW_TESTS") != "1", reason="set CONTEXT_ASSEMBLY_SLOW_TESTS=1")
def test_the_5000_rule_language_service_workload(tmp_path: Path) -> None:
    text = generate(tmp_path, "--size", "lsp5000").read_text(encoding="utf-8")
    assert len(text) > 2_500_000
    started = time.perf_counter()
    document = parse_json(text)
    document.span("")  # builds the tree
    document.lines.line_count()
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0, f"parse + tree + line index took {elapsed:.2f}s"
    check_field_span(text, 2500)
