"""Idempotency keys: an event retried with its key runs each pipeline once, and what a failed
attempt appended is not appended again by the retry."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import ConflictError, InvalidParamsError
from context_assembly.ingestion import LOG_EVENT_TYPE, LOG_INSTANCE, IngestionEngine
from context_assembly.runtime import Runtime

from .support import FakeLLM, add, engine_over, pipeline

FACTS = [{"fact": "uses JWT"}, {"fact": "rotates keys"}, {"fact": "tests expiry"}]
EXTRACT = {"id": "x", "type": "llm_extract", "input": "payload.text", "output": "facts"}
APPENDS = [{"from": "facts", "foreach": True, "write_to": "log://facts"},
           {"from": "payload.text", "write_to": "episodic://{{payload.thread}}"}]
EVENT = {"text": "The auth middleware now validates JWTs.", "thread": "t-1"}


class SlowLLM(FakeLLM):
    """A model that takes a while: time for a retry to arrive while the first attempt runs."""

    def __call__(self, request: dict[str, Any]) -> Any:
        time.sleep(0.3)
        return super().__call__(request)


def _records(runtime: Runtime) -> list[dict[str, Any]]:
    return runtime.memory.events.search(LOG_INSTANCE, LOG_EVENT_TYPE, limit=100)


def _facts(runtime: Runtime) -> list[str]:
    return sorted(e["payload"]["fact"] for e in runtime.memory.events.search("facts", limit=100))


def test_a_retried_event_runs_once_and_answers_the_first_run(tmp_path: Path) -> None:
    llm = FakeLLM({"text": '[{"fact": "uses JWT"}, {"fact": "rotates keys"}, {"fact": "tests expiry"}]'})
    definition = pipeline("p", [EXTRACT], APPENDS, trigger="onTaskCompleted")
    with engine_over(tmp_path, definition, llm=llm) as (engine, runtime):
        first = engine.on_event("onTaskCompleted", EVENT, idempotency_key="task-42")
        again = engine.on_event("onTaskCompleted", dict(EVENT), idempotency_key="task-42")
        [ran], [answered] = first["executions"], again["executions"]
        assert ran["status"] == "ok" and ran["idempotency_key"] == "task-42" and "duplicate" not in ran
        assert answered == {**ran, "duplicate": True}
        assert len(llm.requests) == 1  # the model was not asked again
        assert _facts(runtime) == sorted(f["fact"] for f in FACTS)
        assert runtime.memory.episodic.count("t-1") == 1
        assert len(_records(runtime)) == 1 and "request_hash" not in answered
        # another key is another event: it runs
        third = engine.on_event("onTaskCompleted", EVENT, idempotency_key="task-43")
        assert third["executions"][0]["execution_id"] != ran["execution_id"]
        assert len(llm.requests) == 2 and runtime.memory.episodic.count("t-1") == 2


def test_without_a_key_every_send_runs(tmp_path: Path) -> None:
    llm = FakeLLM({"text": '[{"fact": "a"}]'})
    with engine_over(tmp_path, pipeline("p", [EXTRACT], APPENDS), llm=llm) as (engine, runtime):
        one, two = (engine.execute("p", EVENT) for _ in range(2))
        assert one["execution_id"] != two["execution_id"] and "idempotency_key" not in one
        assert _facts(runtime) == ["a", "a"] and runtime.memory.episodic.count("t-1") == 2


def test_a_key_reused_for_another_event_is_a_conflict_and_runs_nothing(tmp_path: Path) -> None:
    llm = FakeLLM({"text": '[{"fact": "a"}]'})
    definition = pipeline("p", [EXTRACT], APPENDS, trigger="onTaskCompleted")
    with engine_over(tmp_path, definition, llm=llm) as (engine, runtime):
        engine.on_event("onTaskCompleted", EVENT, idempotency_key="k")
        # a pipeline added since has no run of this key: it must not run the other event either
        add(tmp_path, pipeline("a", routing=[{"from": "payload", "write_to": "log://a"}], trigger="onTaskCompleted"))
        with pytest.raises(ConflictError) as conflict:
            engine.on_event("onTaskCompleted", {**EVENT, "text": "something else"}, idempotency_key="k")
        assert conflict.value.data["idempotency_key"] == "k" and "different event" in conflict.value.message
        with pytest.raises(ConflictError):
            engine.on_event("onTaskCompleted", EVENT, scope_variables={"agent": {"agent_name": "x"}},
                            idempotency_key="k")
        assert len(llm.requests) == 1 and runtime.memory.events.search("a", limit=10) == []
        # key order inside the payload does not make another event
        again = engine.on_event("onTaskCompleted", {"thread": "t-1", "text": EVENT["text"]}, idempotency_key="k")
        assert [run.get("duplicate", False) for run in again["executions"]] == [False, True]  # a runs now, p not


def test_a_retry_after_a_cancelled_attempt_appends_only_what_was_missing(tmp_path: Path) -> None:
    routes = [{"from": "payload.items", "foreach": True, "write_to": "log://facts"}]
    items = {"items": [{"fact": str(n)} for n in range(5)]}
    with engine_over(tmp_path, pipeline("p", routing=routes)) as (engine, runtime):
        checks = iter(range(100))
        stopped = engine.execute("p", items, idempotency_key="k",
                                 cancelled=lambda: next(checks) >= 3)  # checked before each write
        assert stopped["status"] == "cancelled" and len(stopped["routes"][0]["written"]) == 3
        retried = engine.execute("p", items, idempotency_key="k")
        assert retried["status"] == "ok" and "duplicate" not in retried
        assert retried["execution_id"] == stopped["execution_id"]
        assert _facts(runtime) == ["0", "1", "2", "3", "4"]  # not 0, 1, 2 twice
        # both attempts are in the log; only the ok one answers later retries
        assert [r["payload"]["status"] for r in _records(runtime)] == ["ok", "cancelled"]
        assert engine.execute("p", items, idempotency_key="k")["duplicate"] is True


def test_a_failed_attempt_runs_again_on_retry(tmp_path: Path) -> None:
    llm = FakeLLM(RuntimeError("model overloaded"))
    with engine_over(tmp_path, pipeline("p", [EXTRACT], APPENDS), llm=llm) as (engine, runtime):
        assert engine.execute("p", EVENT, idempotency_key="k")["status"] == "failed"
        llm.answer = {"text": '[{"fact": "a"}]'}
        assert engine.execute("p", EVENT, idempotency_key="k")["status"] == "ok"
        assert _facts(runtime) == ["a"] and len(llm.requests) == 2


def test_a_disabled_pipeline_runs_on_retry_once_it_is_active(tmp_path: Path) -> None:
    definition = {**pipeline("p", routing=[{"from": "payload", "write_to": "log://seen"}]), "status": "disabled"}
    with engine_over(tmp_path, definition) as (engine, runtime):
        assert engine.execute("p", {"a": 1}, idempotency_key="k")["status"] == "skipped"
        engine.set_status("p", "active")
        assert engine.execute("p", {"a": 1}, idempotency_key="k")["status"] == "ok"
        assert len(runtime.memory.events.search("seen", limit=10)) == 1


def test_retries_in_flight_at_once_run_the_pipeline_once(tmp_path: Path) -> None:
    llm = SlowLLM({"text": '[{"fact": "a"}]'})
    with engine_over(tmp_path, pipeline("p", [EXTRACT], APPENDS), llm=llm) as (engine, runtime):
        results: list[dict[str, Any]] = []
        threads = [threading.Thread(target=lambda: results.append(engine.execute("p", EVENT, idempotency_key="k")))
                   for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(results) == 3 and len({r["execution_id"] for r in results}) == 1
        assert sorted(bool(r.get("duplicate")) for r in results) == [False, True, True]
        assert len(llm.requests) == 1 and _facts(runtime) == ["a"]


def test_the_same_key_on_two_pipelines_is_two_executions(tmp_path: Path) -> None:
    route = [{"from": "payload", "write_to": "log://seen"}]
    first = pipeline("a", routing=route, trigger="onAction")
    second = pipeline("b", routing=route, trigger="onAction")
    with engine_over(tmp_path, first, second) as (engine, runtime):
        answer = engine.on_event("onAction", {"x": 1}, idempotency_key="k")
        assert len({run["execution_id"] for run in answer["executions"]}) == 2
        assert len(runtime.memory.events.search("seen", limit=10)) == 2


@pytest.mark.parametrize("key", ["", 5, "a\x00"])
def test_a_malformed_key_is_refused_before_anything_runs(tmp_path: Path, key: Any) -> None:
    with engine_over(tmp_path, pipeline("p", routing=[{"from": "payload", "write_to": "log://seen"}])) as (
            engine, runtime):
        with pytest.raises(InvalidParamsError) as refused:
            engine.execute("p", {"a": 1}, idempotency_key=key)
        assert refused.value.errors[0]["path"] == "/idempotency_key"
        assert runtime.memory.events.search("seen", limit=10) == []


def test_a_key_reused_after_an_attempt_that_did_not_end_ok_is_still_a_conflict(tmp_path: Path) -> None:
    """Only an ok run kept the event a key stood for: another event under the key after a cancelled
    attempt ran with the first attempt's append keys, and three of its five events were lost."""
    routes = [{"from": "payload.items", "foreach": True, "write_to": "log://facts"}]
    old = {"items": [{"fact": f"old-{n}"} for n in range(5)]}
    with engine_over(tmp_path, pipeline("p", routing=routes)) as (engine, runtime):
        checks = iter(range(100))
        assert engine.execute("p", old, idempotency_key="k", cancelled=lambda: next(checks) >= 3)["status"] == \
            "cancelled"
        with pytest.raises(ConflictError):
            engine.execute("p", {"items": [{"fact": f"new-{n}"} for n in range(5)]}, idempotency_key="k")
        assert _facts(runtime) == ["old-0", "old-1", "old-2"]
        assert engine.execute("p", old, idempotency_key="k")["status"] == "ok"  # the same event: it goes on
        assert _facts(runtime) == [f"old-{n}" for n in range(5)]


def test_retries_on_two_connections_of_one_sidecar_run_once(tmp_path: Path) -> None:
    """Each TCP connection has its own engine: a client that reconnected to retry ran the pipeline
    beside the attempt in progress."""
    llm = SlowLLM({"text": '[{"fact": "a"}]'})
    with engine_over(tmp_path, pipeline("p", [EXTRACT], APPENDS), llm=llm) as (engine, runtime):
        other = IngestionEngine(runtime.memory, runtime.workspace, llm=llm)
        results: list[dict[str, Any]] = []
        threads = [threading.Thread(target=lambda e=e: results.append(e.execute("p", EVENT, idempotency_key="k")))
                   for e in (engine, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(bool(r.get("duplicate")) for r in results) == [False, True] and len(llm.requests) == 1
