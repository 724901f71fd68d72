"""Vector store benchmark: bulk load, exact top-k search, hybrid search, cold matrix load.

    python bench/assemble/vectors.py [--chunks 100000] [--queries 200] [--words 120] [--out FILE]

Builds a collection of `--chunks` one-chunk documents of generated text in a scratch workspace
with `upsert_many`, then measures: embedding throughput (default model and feature hashing, embed
only, and the whole bulk load), warm search latency p50/p95 per mode for top-10 (query embedding +
matrix-vector product + argpartition + fetching the hits), the numpy part alone, and the cold load
of the matrix from SQLite. Target: vector top-10 over 100k chunks ~15 ms or better, so that an
assembly with vector search stays within 50 ms warm p50.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from context_assembly.stores.embedding import HASHING, WORDLLAMA, default_embedder_name, get_embedder
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.vector import SqliteVectorStore
from context_assembly.workspace.layout import WorkspaceLayout

COLLECTION = "bench"
TOP_K = 10
TARGET_MS = 15.0
SEED = 20261122

TOPICS = {
    "auth": "login password token session credential authentication timeout expired oauth account user",
    "database": "query index table transaction postgres connection pool migration schema replica lock",
    "network": "request latency socket proxy dns packet bandwidth retry gateway certificate tls",
    "build": "compiler linker dependency package artifact pipeline cache version release wheel",
    "testing": "assertion fixture mock coverage flaky regression suite runner snapshot benchmark",
    "ui": "button layout theme color font render component modal accessibility screen",
    "storage": "disk file volume backup snapshot bucket blob quota compression archive",
    "memory": "heap allocation leak garbage pointer buffer overflow stack cache eviction",
    "cooking": "recipe flour sugar oven bake butter bread banana dough yeast",
    "travel": "flight hotel passport luggage airport train ticket itinerary visa beach",
    "finance": "invoice payment budget ledger tax account revenue expense audit refund",
    "health": "doctor fever patient symptom clinic medicine vaccine nurse diagnosis therapy",
}
COMMON = ("the a an of to in for on with when after before because while and or but not is was were has "
          "have will can should must this that these those it they we our system team service error issue "
          "problem change update fix report").split()


def make_text(rng: random.Random, words: int) -> str:
    topic, second = rng.sample(sorted(TOPICS), 2)
    vocab = TOPICS[topic].split() * 3 + TOPICS[second].split() + COMMON * 2
    out, sentence = [], []
    for _ in range(words):
        sentence.append(rng.choice(vocab))
        if len(sentence) >= rng.randint(8, 16):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def make_query(rng: random.Random) -> str:
    topic = rng.choice(sorted(TOPICS))
    return " ".join(rng.sample(TOPICS[topic].split(), 3) + rng.sample(COMMON, 2))


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def embed_rate(name: str, texts: list[str]) -> float:
    embedder = get_embedder(name)
    embedder.embed(texts[:64])  # load and warm
    t = time.perf_counter()
    for start in range(0, len(texts), 4096):
        embedder.embed(texts[start:start + 4096])
    return len(texts) / (time.perf_counter() - t)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--words", type=int, default=120, help="words per generated chunk")
    parser.add_argument("--sample", type=int, default=20_000, help="texts for the embed-only throughput")
    parser.add_argument("--batch", type=int, default=10_000, help="documents per upsert_many call")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()

    model = default_embedder_name()
    rng = random.Random(SEED)
    print(f"generating {args.chunks} chunks of ~{args.words} words ...", flush=True)
    texts = [make_text(rng, args.words) for _ in range(args.chunks)]
    queries = [make_query(rng) for _ in range(args.queries)]
    rows: list[tuple[str, str]] = []
    figures: dict[str, Any] = {"chunks": args.chunks, "words_per_chunk": args.words, "model": model,
                               "python": platform.python_version(), "numpy": np.__version__,
                               "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}

    sample = texts[:args.sample]
    for name in dict.fromkeys((model, HASHING)):
        rate = embed_rate(name, sample)
        figures[f"embed_{name}_per_s"] = rate
        rows.append((f"embed only, {name}", f"{rate:,.0f} chunks/s"))

    with tempfile.TemporaryDirectory(prefix="vector-bench-") as tmp:
        layout = WorkspaceLayout(tmp)
        store = SqliteVectorStore.for_workspace(layout, default_model=model)
        print(f"bulk loading with {model} ...", flush=True)
        t = time.perf_counter()
        for start in range(0, args.chunks, args.batch):
            docs = [(f"doc-{i:06d}", texts[i], {"n": i}) for i in range(start, min(start + args.batch, args.chunks))]
            store.upsert_many(COLLECTION, docs)
        build_s = time.perf_counter() - t
        figures["bulk_load_s"] = build_s
        rows.append((f"upsert_many, {model} (end to end)", f"{args.chunks / build_s:,.0f} chunks/s ({build_s:.1f} s)"))
        size_mb = sum(p.stat().st_size for p in layout.db_path.parent.iterdir()) / 2**20
        rows.append(("database size", f"{size_mb:,.0f} MiB"))

        # Cold: a fresh process-like store (new connection, empty cache) loads the matrix.
        cold_store = SqliteVectorStore(Database(layout.db_path), layout.vectordb_dir, default_model=model)
        t = time.perf_counter()
        index = cold_store._index(COLLECTION)
        cold_ms = (time.perf_counter() - t) * 1000
        assert index is not None and index.matrix.shape[0] == args.chunks
        figures["cold_load_ms"] = cold_ms
        rows.append((f"cold matrix load ({index.matrix.shape[0]:,} x {index.matrix.shape[1]})", f"{cold_ms:,.0f} ms"))
        t = time.perf_counter()
        cold_store.search(COLLECTION, queries[0], top_k=TOP_K)
        figures["first_search_after_load_ms"] = (time.perf_counter() - t) * 1000

        qvecs = get_embedder(model).embed(queries)
        matrix = index.matrix
        numpy_ms = []
        for q in qvecs:
            t = time.perf_counter()
            scores = matrix @ q
            top = np.argpartition(scores, len(scores) - TOP_K)[-TOP_K:]
            top[np.argsort(-scores[top])]
            numpy_ms.append((time.perf_counter() - t) * 1000)
        figures["numpy_top10_ms"] = {"p50": percentile(numpy_ms, 0.5), "p95": percentile(numpy_ms, 0.95)}
        rows.append(("numpy matrix @ q + argpartition",
                     f"p50 {percentile(numpy_ms, 0.5):.2f} ms, p95 {percentile(numpy_ms, 0.95):.2f} ms"))

        embed_ms = []
        for q in queries:
            t = time.perf_counter()
            get_embedder(model).embed([q])
            embed_ms.append((time.perf_counter() - t) * 1000)
        rows.append(("query embedding", f"p50 {percentile(embed_ms, 0.5):.2f} ms"))

        for mode in ("vector", "hybrid", "keyword"):
            for q in queries[:5]:
                cold_store.search(COLLECTION, q, top_k=TOP_K, mode=mode)  # warm
            samples = []
            for q in queries:
                samples += timed(lambda q=q, mode=mode: cold_store.search(COLLECTION, q, top_k=TOP_K, mode=mode), 1)
            p50, p95 = percentile(samples, 0.5), percentile(samples, 0.95)
            figures[f"search_{mode}_ms"] = {"p50": p50, "p95": p95}
            mark = "" if mode != "vector" else ("  OK" if p50 <= TARGET_MS else f"  MISS (target {TARGET_MS:g} ms)")
            rows.append((f"search top-{TOP_K}, {mode} (warm)", f"p50 {p50:.2f} ms, p95 {p95:.2f} ms{mark}"))

    width = max(len(name) for name, _ in rows)
    print(f"\nvector store, {args.chunks:,} chunks, {args.queries} queries, model {model}, numpy {np.__version__}"
          f", OPENBLAS_CORETYPE={figures['OPENBLAS_CORETYPE']}")
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
