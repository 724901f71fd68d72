"""Embedded stores vs PostgreSQL + pgvector, in one run (one command).

    python bench/stores/run.py                      # 100,000 chunks, 300 assemblies, 400 writes per writer count
    python bench/stores/run.py --chunks 20000 --assemblies 100

Starts a PostgreSQL 16 with pgvector from the `pgserver` wheel in a temporary folder (Unix socket),
then for each backend, in this process:

1. assembly served from the cache (same request, nothing written; cache on): on PostgreSQL once
   with the write generations pushed by LISTEN/NOTIFY (`stores.invalidation: "notify"`, no
   database round trip per use) and once read from the database before each use ("read");
2. the push's window: how long after a write returns in one runtime the listener of another
   runtime on the same project knows of it (p50/p99);
3. assembly, warm: a workspace with a KV memory and a hybrid vector-search memory over a
   2,000-document collection; the cache is off (`cache_ttl_s: 0`), so every assembly reads the
   stores; queries vary; p50/p99 after warm-up;
4. vector search at `--chunks` chunks (one chunk per document, the hashing embedder so loading is
   fast): p50 of `search(mode="vector", top_k=10)`; embedded is exact numpy, PostgreSQL is HNSW
   (cosine, the product's build parameters, ef_search 40, 100 = the default, and 200). Recall@10
   of HNSW against the exact answer, plain and with ties at the 10th score counted;
5. write throughput: 1, 4 and 16 threads each setting `--writes` distinct KV keys (every write its
   own transaction, and on PostgreSQL its NOTIFY), writes per second over all threads.

For the bulk load only, the bench drops the HNSW index and builds it after loading (what an
operator does for a big import); the product creates it when a collection is first written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "server"))

import psycopg  # noqa: E402

from context_assembly.runtime import Runtime  # noqa: E402
from context_assembly.stores.embedding import HASHING  # noqa: E402
from context_assembly.stores.postgres.migrations import hnsw_index_sql  # noqa: E402

EF_SEARCH_LEVELS = (40, 100, 200)

# A vocabulary with a long tail (3,000 rare terms after the common ones), so texts differ.
COMMON = "login timeout session token cache database index deploy build release queue worker retry schema"
WORDS = [*COMMON.split(" "), *(f"term{n}" for n in range(3000))]
PREFS = {"id": "prefs", "label": "Preferences", "description": "d", "status": "active",
         "retrieval": {"pipeline": [{"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["u1"]}]},
         "contribution": {"section": "constraints", "priority": "high", "max_items": 10}}
HISTORY = {"id": "history", "label": "History", "description": "d", "status": "active",
           "retrieval": {"pipeline": [
               {"type": "derive_query", "from": ["input.text"], "method": "keyword_extract"},
               {"type": "vector_search", "collection": "tasks", "topK": 5, "minScore": 0.0, "mode": "hybrid"}]},
           "contribution": {"section": "suggestions", "priority": "low", "max_items": 5}}


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(WORDS[min(len(WORDS) - 1, int(rng.paretovariate(0.8)) - 1)] for _ in range(n))


def workspace(root: Path, stores: dict[str, Any], cache_ttl_s: float = 0) -> Path:
    codebolt = root / ".codebolt"
    for folder in ("PersistentMemory", "vectordb/tasks", "vectordb/big"):
        (codebolt / folder).mkdir(parents=True, exist_ok=True)
    (codebolt / "context-assembly.json").write_text(json.dumps({"cache_ttl_s": cache_ttl_s, "stores": stores}))
    for name in ("tasks", "big"):
        (codebolt / "vectordb" / name / "collection.json").write_text(json.dumps({"embedding_model": HASHING}))
    for definition in (PREFS, HISTORY):
        (codebolt / "PersistentMemory" / f"{definition['id']}.json").write_text(json.dumps(definition))
    return root


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_assembly(runtime: Runtime, count: int) -> dict[str, float]:
    rng = random.Random(1)
    runtime.memory.write("kv://users/u1", "prefers short answers")
    runtime.vectors.upsert_many("tasks", [(f"t{i}", sentence(rng), {}) for i in range(2000)])
    times = []
    for n in range(count + 20):
        request = {"scope_variables": {}, "input": {"text": sentence(rng, 6)}, "explicit_memory": ["prefs", "history"],
                   "constraints": {"max_tokens": 2000}}
        start = time.perf_counter()
        result = runtime.assemble(request)
        elapsed = (time.perf_counter() - start) * 1000
        assert [c.status for c in result.trace.memory_calls] == ["ok", "ok"], result.trace.memory_calls
        if n >= 20:
            times.append(elapsed)
    return {"assembly p50": statistics.median(times), "assembly p99": percentile(times, 0.99)}


def bench_cached(root: Path, stores: dict[str, Any], count: int) -> dict[str, float]:
    """Assembly served from the cache (same request, nothing written), per way of checking generations."""
    modes = ("notify", "read") if stores["backend"] == "postgres" else ("local",)
    results = {}
    rng = random.Random(4)
    for mode in modes:
        settings = {**stores, "invalidation": mode} if mode != "local" else stores
        runtime = Runtime(workspace(root / f"cached-{mode}", settings, cache_ttl_s=3600))
        try:
            runtime.memory.write("kv://users/u1", "prefers short answers")
            runtime.vectors.upsert_many("tasks", [(f"t{i}", sentence(rng), {}) for i in range(200)])
            request = {"scope_variables": {}, "input": {"text": "login timeout"},
                       "explicit_memory": ["prefs", "history"], "constraints": {"max_tokens": 2000}}
            runtime.assemble(request)
            listener = getattr(getattr(runtime.memory.stores.kv, "db", None), "listener", None)
            if listener is not None and not listener.wait_for(lambda it: it.trusted(), 60):
                raise SystemExit("the generation listener never vouched for its counts")
            times = []
            for _ in range(count):
                start = time.perf_counter()
                result = runtime.assemble(request)
                times.append((time.perf_counter() - start) * 1000)
                assert [c.status for c in result.trace.memory_calls] == ["cached", "cached"]
            label = "assembly cached p50" + ("" if mode == "local" else f", generations by {mode}")
            results[label] = statistics.median(times)
        finally:
            runtime.close()
    return results


def bench_push(root: Path, stores: dict[str, Any], count: int) -> dict[str, float]:
    """How long after a write returns another sidecar's listener knows of it (the push's window)."""
    writer, reader = (Runtime(workspace(root / f"push-{name}", {**stores, "project": "push"}, cache_ttl_s=3600))
                      for name in ("writer", "reader"))
    try:
        writer.memory.write("kv://users/u1", 0)
        reader.memory.generation("kv")  # starts the reader's listener
        listener = reader.memory.stores.kv.db.listener  # type: ignore[attr-defined]
        if not listener.wait_for(lambda it: it.trusted(), 60):
            raise SystemExit("the generation listener never vouched for its counts")
        times = []
        for i in range(count):
            writer.memory.write("kv://users/u1", i)
            written = writer.memory.generation("kv")
            start = time.perf_counter()
            if not listener.wait_for(lambda it, n=written: it.value("kv") == n, 60):
                raise SystemExit("a write never reached the other sidecar's listener")
            times.append((time.perf_counter() - start) * 1000)
        return {"push: write returned -> other sidecar knows, p50": statistics.median(times),
                "push: write returned -> other sidecar knows, p99": percentile(times, 0.99)}
    finally:
        writer.close()
        reader.close()


def load_big(runtime: Runtime, chunks: int, dsn: str | None) -> float:
    rng = random.Random(2)
    runtime.vectors.upsert("big", "seed", "seed", {})  # claims the collection (and, on PostgreSQL, its index)
    if dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP INDEX IF EXISTS ca_vector_chunks_hnsw_256")
    start = time.perf_counter()
    for first in range(0, chunks, 10_000):
        batch = [(f"d{i}", sentence(rng), {}) for i in range(first, min(chunks, first + 10_000))]
        runtime.vectors.upsert_many("big", batch)
    if dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute(hnsw_index_sql(256))  # the product's index, build parameters included
            conn.execute("ANALYZE ca_vector_chunks")
    return time.perf_counter() - start


Answers = list[list[tuple[str, float]]]  # per query: (doc_uri, score) of each hit
# A restricted token's search (its read patterns as `admit`): ranked among what it may read
RESTRICTED: dict[str, Any] = {", restricted, all readable": lambda source, metadata: True,
                              ", restricted, 1% readable": lambda source, metadata: source.endswith("00")}


def bench_search(runtime: Runtime, queries: list[str], label: str = "",
                 admit: Any = None) -> tuple[dict[str, float], Answers]:
    restricted = {} if admit is None else {"admit": admit}
    for query in queries[:5]:
        runtime.vectors.search("big", query, top_k=10, **restricted)
    times, answers = [], []
    for query in queries:
        start = time.perf_counter()
        hits = runtime.vectors.search("big", query, top_k=10, **restricted)
        times.append((time.perf_counter() - start) * 1000)
        answers.append([(h["doc_uri"], h["score"]) for h in hits])
    return {f"vector search p50{label}": statistics.median(times),
            f"vector search p99{label}": percentile(times, 0.99)}, answers


def ties_at_tenth(runtime: Runtime, queries: list[str]) -> float:
    """The share of queries whose exact 11th chunk scores the same as the 10th (so the exact top 10
    is one arbitrary choice among equals, and plain recall cannot reach 1 even for a perfect index)."""
    tied = 0
    for query in queries:
        scores = [h["score"] for h in runtime.vectors.search("big", query, top_k=11)]
        tied += len(scores) == 11 and scores[10] >= scores[9] - 1e-6
    return 100 * tied / max(1, len(queries))


def recall(approx: Answers, exact: Answers) -> tuple[float, float]:
    """Recall@10 against the exact answer: plain, and counting a hit as good when it scores at least the
    exact 10th (several chunks often tie there, and the exact answer keeps an arbitrary few of them)."""
    plain, ties = [], []
    for got, want in zip(approx, exact, strict=True):
        plain.append(len({u for u, _ in got} & {u for u, _ in want}) / max(1, len(want)))
        floor = min((score for _, score in want), default=0.0) - 1e-6
        ties.append(min(len(want), sum(1 for _, score in got if score >= floor)) / max(1, len(want)))
    return statistics.mean(plain), statistics.mean(ties)


def bench_writes(runtime: Runtime, writers: int, per_writer: int) -> float:
    def work(w: int) -> None:
        for i in range(per_writer):
            runtime.memory.kv.set("bench", f"w{writers}-{w}", f"k{i}", {"i": i})

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return writers * per_writer / (time.perf_counter() - start)


def run_backend(name: str, root: Path, stores: dict[str, Any], args: argparse.Namespace,
                queries: list[str]) -> tuple[dict[str, float], dict[int, Answers]]:
    by_ef: dict[int, Answers] = {}
    results = bench_cached(root, stores, args.assemblies)
    if stores["backend"] == "postgres":
        results.update(bench_push(root, stores, args.assemblies))
    runtime = Runtime(workspace(root, stores))
    try:
        results.update(bench_assembly(runtime, args.assemblies))
        results[f"load {args.chunks:,} chunks (s)"] = load_big(runtime, args.chunks, stores.get("dsn"))
        search, answers = bench_search(runtime, queries)
        results.update(search)
        for label, admit in RESTRICTED.items():
            results.update(bench_search(runtime, queries, label, admit)[0])
        index = runtime.vectors.index
        if hasattr(index, "ef_search"):  # PostgreSQL: the other ef_search values too
            default = index.ef_search
            for ef in EF_SEARCH_LEVELS:
                if ef != default:
                    index.ef_search = ef
                    search, by_ef[ef] = bench_search(runtime, queries, f", ef_search {ef}")
                    results.update(search)
            index.ef_search = default
            by_ef[default] = answers
        else:  # the exact answers: how often several chunks tie at the 10th place
            results["exact answers with a tie at the 10th place (%)"] = ties_at_tenth(runtime, queries)
        for writers in (1, 4, 16):
            results[f"writes/s, {writers} writer{'s' if writers > 1 else ''}"] = bench_writes(
                runtime, writers, args.writes)
        if stores["backend"] == "postgres":  # the same writes without their NOTIFY, in the same run
            quiet = Runtime(workspace(root / "no-notify", {**stores, "invalidation": "read"}))
            try:
                for writers in (1, 16):
                    results[f"writes/s, {writers} writer{'s' if writers > 1 else ''}, no NOTIFY (read)"] = \
                        bench_writes(quiet, writers, args.writes)
            finally:
                quiet.close()
        print(f"  {name}: done", file=sys.stderr)
        return results, by_ef or {0: answers}
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--assemblies", type=int, default=300)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--writes", type=int, default=400, help="writes per writer")
    args = parser.parse_args()
    import pgserver  # type: ignore[import-untyped]

    folder = Path(tempfile.mkdtemp(prefix="ca-bench-"))
    folder.chmod(0o755)
    server = pgserver.get_server(str(folder / "pg"), cleanup_mode="stop")
    os.environ.pop("CONTEXT_ASSEMBLY_DSN", None)
    try:
        rng = random.Random(3)
        queries = [sentence(rng, 4) for _ in range(args.searches)]
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        embedded, exact = run_backend("embedded", folder / "embedded", {"backend": "embedded"}, args, queries)
        postgres, approx = run_backend("postgres", folder / "postgres",
                                       {"backend": "postgres", "dsn": server.get_uri(), "project": "bench"},
                                       args, queries)
        recalls = {ef: recall(answers, exact[0]) for ef, answers in sorted(approx.items())}
        load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nload before: {load}\nload after:  {load_after}\n")
    print("| measure | embedded | PostgreSQL | PostgreSQL / embedded |\n| --- | ---: | ---: | ---: |")
    for key in dict.fromkeys([*embedded, *postgres]):
        unit = "" if "/s" in key or "(s)" in key or "(%)" in key else " ms"
        one, two = embedded.get(key), postgres.get(key)
        ratio = f"{two / one:.2f}" if one and two is not None else ""
        print(f"| {key}{unit} | {'–' if one is None else f'{one:,.2f}'} | {'–' if two is None else f'{two:,.2f}'} "
              f"| {ratio} |")
    for ef, (plain, ties) in recalls.items():
        print(f"| HNSW recall@10 vs exact, ef_search {ef} (ties counted) | 1.00 | {plain:.3f} ({ties:.3f}) | |")
    notify, read = (postgres[f"assembly cached p50, generations by {mode}"] for mode in ("notify", "read"))
    print(f"\ncached assembly on PostgreSQL: the push saves {read - notify:.2f} ms at p50 "
          f"(read before each use / pushed = {read / notify:.2f})")


if __name__ == "__main__":
    main()
