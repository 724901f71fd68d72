"""The embedded stores at scale: event-log search by payload field at 1M events, KV prefix listing
in a 1M-key namespace, the event log's `instances()`; each next to the query it replaced, timed in
the same run.

    python bench/assemble/scale.py                 # 1M events, 1M keys, 30 timed queries each
    python bench/assemble/scale.py --rows 100000   # smaller

The database is generated once into `bench/out/assemble/scale/<rows>.db` (rows bulk-inserted into
the stores' own tables, created by their migrations) and reused. Timed: `SqliteEventLog.search`
with `fields={"status": "failed"}` (one event in 50,000 matches; limit 20) and with a field only
one event holds; `SqliteKVStore.list(instance, namespace, prefix)` with a prefix 50 keys hold;
`SqliteEventLog.instances()`. The "before" rows run the replaced queries on the same database:
the newest-first scan tested in Python, `substr(key, 1, n) = ?`, and `GROUP BY instance`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.events import SqliteEventLog
from context_assembly.stores.sqlite.json_docs import decode_value
from context_assembly.stores.sqlite.kv import SqliteKVStore

HERE = Path(__file__).resolve().parent
RARE = 50_000  # one event in RARE has status "failed"
TARGETS = {"events": 10.0, "kv": 5.0}  # p50 ms


def build(path: Path, rows: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    db = Database(tmp)
    SqliteEventLog(db)
    SqliteKVStore(db)
    conn = db.connection()
    rng = random.Random(7)
    batch = 50_000
    for start in range(0, rows, batch):
        events = []
        for i in range(start, min(rows, start + batch)):
            payload = {"status": "failed" if i % RARE == RARE // 2 + 1 else rng.choice(("ok", "ok", "skipped")),
                       "task_id": f"task-{i:07d}", "file": f"src/m{rng.randrange(400)}.py", "n": i}
            events.append(("thread-big" if i % 20 else f"thread-{i % 400}", rng.choice(("edit", "test", "run")),
                           json.dumps(payload), 1_700_000_000.0 + i))
        conn.executemany("INSERT INTO events(instance, event_type, payload, ts) VALUES (?, ?, ?, ?)", events)
        conn.executemany("INSERT INTO kv VALUES ('proj', 'big', ?, ?, 0)",
                         [(f"{i // 50:06d}/{i % 50:02d}", json.dumps({"v": i}))
                          for i in range(start, min(rows, start + batch))])
        conn.commit()
    conn.execute("DELETE FROM event_instances")
    conn.execute("INSERT INTO event_instances SELECT instance, count(*), max(ts) FROM events GROUP BY instance")
    conn.commit()
    db.close()
    tmp.rename(path)


def timed(fn: Callable[[], Any], runs: int) -> tuple[list[float], Any]:
    result = fn()  # warm-up (and the first search by a field builds its index)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - t) * 1000)
    return samples, result


def scan_search(db: Database, instance: str, equal: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """The replaced path: newest first, every payload decoded and tested in Python."""
    found = []
    for row in db.connection().execute("SELECT id, payload FROM events WHERE instance = ? ORDER BY ts DESC, id DESC",
                                       (instance,)):
        payload = decode_value(row[1])
        if all(k in payload and payload[k] == v for k, v in equal.items()):
            found.append(row[0])
            if len(found) >= limit:
                break
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="events, and KV keys (default 1,000,000)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--before-runs", type=int, default=3, help="timed runs of the slow replaced queries")
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble" / "scale")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.rows}.db"
    load = [os.getloadavg()[0]]
    if not path.exists():
        print(f"generating {path} ({args.rows:,} events and keys) ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        build(path, args.rows)
        print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    db = Database(path)
    log, kv = SqliteEventLog(db), SqliteKVStore(db)
    t = time.perf_counter()
    log.search("thread-big", fields={"status": "failed"}, limit=1)
    log.search("thread-big", fields={"task_id": "x"}, limit=1)
    index_s = time.perf_counter() - t  # the first searches by these fields build their indexes (once)
    wanted = f"task-{args.rows // 3 // 20 * 20 + 1:07d}"
    prefix = f"{args.rows // 100:06d}/"
    rows: list[tuple[str, list[float], Any, float | None]] = []

    def add(label: str, fn: Callable[[], Any], runs: int, target: float | None = None) -> Any:
        samples, result = timed(fn, runs)
        rows.append((label, samples, result, target))
        return result

    failed = add("event search, fields {status: failed} (1 in 50k), limit 20",
                 lambda: [e["id"] for e in log.search("thread-big", fields={"status": "failed"}, limit=20)],
                 args.runs, TARGETS["events"])
    before = add("  before: scan in Python", lambda: scan_search(db, "thread-big", {"status": "failed"}, 20),
                 args.before_runs)
    assert failed == before and len(failed) == min(20, args.rows // RARE), "the indexed search differs from the scan"
    one = add("event search, fields {task_id: <one event>}",
              lambda: [e["id"] for e in log.search("thread-big", fields={"task_id": wanted}, limit=20)],
              args.runs, TARGETS["events"])
    assert one == scan_search(db, "thread-big", {"task_id": wanted}, 20) and len(one) == 1
    listed = add("KV list, prefix holding 50 keys", lambda: [e.key for e in kv.list("proj", "big", prefix)],
                 args.runs, TARGETS["kv"])
    old_kv = add("  before: substr(key, 1, n) = ?", lambda: [r[0] for r in db.read(
        "SELECT key FROM kv WHERE substr(key, 1, ?) = ? AND instance = 'proj' AND namespace = 'big' ORDER BY key",
        (len(prefix), prefix))], args.before_runs)
    assert listed == old_kv and len(listed) == 50
    inst = add("event log instances()", lambda: [(i.name, i.count) for i in log.instances()], args.runs)
    old_inst = add("  before: GROUP BY instance", lambda: [(r[0], r[1]) for r in db.read(
        "SELECT instance, count(*) FROM events GROUP BY instance ORDER BY instance")], args.before_runs)
    assert inst == old_inst
    db.close()
    load.append(os.getloadavg()[0])

    lines = [f"{args.rows:,} events (one thread of {args.rows - args.rows // 20:,}) and {args.rows:,} KV keys in "
             f"one namespace; load average {load[0]:.2f} → {load[1]:.2f}; indexes built by the first searches "
             f"{index_s:.1f} s", "",
             "| query | n | p50 ms | p95 ms | target | × faster than before |", "|---|---|---|---|---|---|"]
    for i, (label, samples, _, target) in enumerate(rows):
        p50 = statistics.median(samples)
        p95 = sorted(samples)[min(len(samples) - 1, int(0.95 * len(samples)))]
        verdict = "" if target is None else f"{'PASS' if p50 <= target else 'MISS'} (≤ {target:g})"
        nxt = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][0].startswith("  before") else None
        ratio = f"{statistics.median(nxt[1]) / p50:,.0f}×" if nxt else ""
        lines.append(f"| {label.strip()} | {len(samples)} | {p50:.2f} | {p95:.2f} | {verdict} | {ratio} |")
    print("\n".join(lines))
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
