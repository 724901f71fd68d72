"""The client's decoding of message bodies: plain JSON as sent, and the cyclic collector paused
while a large body is decoded, left exactly as found (on errors too)."""

from __future__ import annotations

import gc

import orjson
import pytest

from context_assembly.client.connection import PAUSE_COLLECTOR_FROM, decode
from tests.collector import young_collections

# an answer shaped like an evaluateRules trace: thousands of small containers
LARGE = orjson.dumps({"engine_results": [{"engine_id": f"e{i}", "rules": [
    {"rule_id": f"r{j}", "matched": j % 2 == 0, "conditions": [{"fact": "x", "passed": True}]}
    for j in range(40)]} for i in range(200)]})


def test_a_large_body_decodes_without_collections(collector: None) -> None:
    assert len(LARGE) >= PAUSE_COLLECTOR_FROM
    before = young_collections()
    decoded = decode(LARGE)
    during = young_collections() - before
    assert decoded == orjson.loads(LARGE)
    # ~24,000 containers: with the collector running, a collection per 700 of them (over 30)
    assert during <= 1
    assert gc.isenabled()


def test_the_collector_runs_while_a_small_body_decodes(collector: None) -> None:
    small = orjson.dumps([[i] for i in range(3000)])
    assert len(small) < PAUSE_COLLECTOR_FROM
    before = young_collections()
    assert decode(small) == [[i] for i in range(3000)]
    assert young_collections() - before >= 2 and gc.isenabled()


def test_a_failing_decode_leaves_the_collector_enabled(collector: None) -> None:
    broken = LARGE[:-1]
    with pytest.raises(orjson.JSONDecodeError):
        decode(broken)
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled(collector: None) -> None:
    gc.disable()
    assert decode(LARGE) == orjson.loads(LARGE)
    assert not gc.isenabled()
    with pytest.raises(orjson.JSONDecodeError):
        decode(LARGE[:-1])
    assert not gc.isenabled()


def test_bodies_stay_plain_json() -> None:
    body = b'{"scope.agent.agent_name": [1, 2.5, null, "\\u00e9"], "n": 18446744073709551615}'
    assert decode(body) == {"scope.agent.agent_name": [1, 2.5, None, "é"], "n": 18446744073709551615}
