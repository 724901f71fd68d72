"""Deadlines that fire: a pipeline step that really runs past `pipeline_timeout_ms` (a graph view
whose query walks hundreds of millions of pairs in the embedded graph database). The assembly
returns with the memory marked `timeout` and a warning for the agent, the other memories assemble,
and the work it abandons never takes more than the executor's bounded set of threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import TimeoutError_
from context_assembly.methods import Session, call

from ..lsp.support import REQUEST

SIDE = 30_000  # SIDE² pairs: about ten seconds of work for the graph database; the deadline is 50 ms
SLOW_VIEW = {"id": "slow", "description": "Counts through many rows.",
             "cypher": "UNWIND range(1, $n) AS a UNWIND range(1, $n) AS b WITH a, b WHERE (a * b) % 7 = 3 "
                       "RETURN count(*) AS c",
             "params": {"n": {"type": "integer"}}}
SLOW_MEMORY = {"id": "slow-count", "label": "Slow count", "status": "active",
               "retrieval": {"pipeline": [{"type": "graph_view_read", "view": "slow", "params": {"n": SIDE}}]},
               "contribution": {"section": "knowledge", "priority": "medium"}}


@pytest.fixture
def session(example_copy: Path) -> Any:
    codebolt = example_copy / ".codebolt"
    (codebolt / "knowledgegraph" / "views" / "slow.json").write_text(json.dumps(SLOW_VIEW))
    (codebolt / "PersistentMemory" / "slow-count.json").write_text(json.dumps(SLOW_MEMORY))
    opened = Session(example_copy, settings={"pipeline_timeout_ms": 50, "cache_ttl_s": 0})
    yield opened
    opened.close()


def assemble(session: Session) -> dict[str, Any]:
    request = {**REQUEST, "explicit_memory": ["slow-count", "markdown://style-guide"]}
    result: dict[str, Any] = call(session, "contextAssembly/assemble", request)
    return result


def pipeline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pipeline")]


def test_a_step_past_the_deadline_times_out_with_a_warning(session: Session) -> None:
    result = assemble(session)
    calls = {c["reference"]: c for c in result["trace"]["memory_calls"]}
    assert calls["slow-count"]["status"] == "timeout"
    warnings = [w["content"] for w in result["context"]["warnings"]]
    assert any("timed out" in w and "slow-count" in w for w in warnings), warnings
    assert calls["markdown://style-guide"]["status"] == "ok"  # the others still assemble


def test_abandoned_work_stays_within_the_executor_threads(session: Session) -> None:
    workers = session.runtime.executor.pool._max_workers
    for _ in range(workers + 4):
        result = assemble(session)
        assert any(c["status"] == "timeout" for c in result["trace"]["memory_calls"])
        assert len(pipeline_threads()) <= workers


def test_the_database_stops_a_view_query_at_the_pipeline_deadline(session: Session) -> None:
    # The step hands its remaining time to the graph database, which interrupts the query: the
    # abandoned work ends instead of running on.
    with pytest.raises(TimeoutError_) as caught:
        session.runtime.graph.run_view("slow", {"n": SIDE}, timeout_ms=50)
    assert "ran too long" in caught.value.message
    assert session.runtime.graph.run_view("slow", {"n": 10})[0]["c"] == 14  # the connection serves on
