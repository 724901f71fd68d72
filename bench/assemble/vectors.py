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
import contextlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from context_assembly.stores.embedding import HASHING, default_embedder_name, get_embedder
from context_assembly.stores.sqlite.database import Database
from context_assembly.stores.sqlite.vector import SqliteVectorStore, cosine_scores
from context_assembly.workspace.layout import WorkspaceLayout

COLLECTION = "bench"
TOP_K = 10
TARGET_MS = 15.0
SEED = 20261122

TOPICS, TOPIC_WORDS, TOPIC_SHARE = 300, 40, 0.3


def vocabulary() -> list[str]:
    """~9k English words in rough frequency order: the whole-word tokens of the WordLlama tokenizer.

    Real words give the embedder real tokens, and their Zipf-like spread gives BM25 realistic
    posting lists (a tiny vocabulary would make every term match every chunk). Falls back to
    made-up words when the package is missing.
    """
    try:
        import wordllama

        config = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
        vocab = json.loads(config.read_text())["model"]["vocab"]
        words = [t[1:] for t in vocab if t.startswith("\u2581") and re.fullmatch(r"[a-z]{3,}", t[1:])]
        if len(words) > 2000:
            return words
    except (ImportError, OSError, KeyError, ValueError):
        pass
    return [f"w{n}x" for n in range(9000)]


class Corpus:
    """Chunks of Zipf-distributed background words mixed with words of one of TOPICS topics."""

    def __init__(self, seed: int) -> None:
        self.words = np.array(vocabulary())
        self.rng = np.random.default_rng(seed)
        ranks = np.arange(1, len(self.words) + 1)
        self.p = (1.0 / ranks) / (1.0 / ranks).sum()
        middle = np.arange(len(self.words) // 10, len(self.words))  # topic words: not the commonest
        self.topics = [self.rng.choice(middle, TOPIC_WORDS, replace=False) for _ in range(TOPICS)]

    def texts(self, count: int, words: int) -> list[str]:
        background = self.rng.choice(len(self.words), size=(count, words), p=self.p)
        topical = self.rng.random((count, words)) < TOPIC_SHARE
        topic_of = self.rng.integers(0, TOPICS, count)
        picks = self.rng.integers(0, TOPIC_WORDS, (count, words))
        topic_table = np.stack(self.topics)
        ids = np.where(topical, topic_table[topic_of[:, None], picks], background)
        out = []
        for row in self.words[ids]:
            sentences = [" ".join(row[i:i + 12]) for i in range(0, len(row), 12)]
            out.append(". ".join(s.capitalize() for s in sentences) + ".")
        return out

    def queries(self, count: int) -> list[str]:
        out = []
        for _ in range(count):
            topic = self.topics[int(self.rng.integers(0, TOPICS))]
            terms = list(self.words[self.rng.choice(topic, 3, replace=False)])
            terms.insert(int(self.rng.integers(0, 4)), str(self.words[self.rng.choice(len(self.words), p=self.p)]))
            out.append(" ".join(terms))
        return out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall ms, this process's CPU ms): on a shared machine the CPU time shows the cost without the wait."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def timed_each(fn: Callable[[Any], Any], items: Any) -> list[float]:
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
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
    parser.add_argument("--workspace", type=Path,
                        help="build in (and keep) this folder; a collection already there of the right size is reused")
    args = parser.parse_args()

    model = default_embedder_name()
    corpus = Corpus(SEED)
    print(f"generating {args.chunks} chunks of {args.words} words ...", flush=True)
    texts = corpus.texts(args.chunks, args.words)
    queries = corpus.queries(args.queries)
    rows: list[tuple[str, str]] = []
    figures: dict[str, Any] = {"chunks": args.chunks, "words_per_chunk": args.words, "model": model,
                               "python": platform.python_version(), "numpy": np.__version__,
                               "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}

    sample = texts[:args.sample]
    for name in dict.fromkeys((model, HASHING)):
        rate = embed_rate(name, sample)
        figures[f"embed_{name}_per_s"] = rate
        rows.append((f"embed only, {name}", f"{rate:,.0f} chunks/s"))

    with contextlib.ExitStack() as stack:
        root = args.workspace or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vector-bench-")))
        layout = WorkspaceLayout(root)
        store = SqliteVectorStore.for_workspace(layout, default_model=model)
        existing = {c["collection"]: c["chunks"] for c in store.list()}.get(COLLECTION)
        if existing == args.chunks:
            rows.append(("upsert_many", f"skipped: reusing {root}"))
        else:
            if existing:
                raise SystemExit(f"{root} holds a {existing}-chunk collection; remove it or pick another folder")
            print(f"bulk loading with {model} ...", flush=True)
            t = time.perf_counter()
            for start in range(0, args.chunks, args.batch):
                docs = [(f"doc-{i:06d}", texts[i], {"n": i})
                        for i in range(start, min(start + args.batch, args.chunks))]
                store.upsert_many(COLLECTION, docs)
            build_s = time.perf_counter() - t
            figures["bulk_load_s"] = build_s
            rows.append((f"upsert_many, {model} (end to end)",
                         f"{args.chunks / build_s:,.0f} chunks/s ({build_s:.1f} s)"))
        size_mb = sum(p.stat().st_size for p in layout.db_path.parent.iterdir()) / 2**20
        rows.append(("database size", f"{size_mb:,.0f} MiB"))

        # Cold: a fresh process-like store (new connection, empty cache) loads the matrix.
        cold_store = SqliteVectorStore(Database(layout.db_path), layout.vectordb_dir, default_model=model)
        t = time.perf_counter()
        index = cold_store.index._index(COLLECTION)  # the embedded index's cached matrix
        cold_ms = (time.perf_counter() - t) * 1000
        assert index is not None and index.matrix.shape[0] == args.chunks
        figures["cold_load_ms"] = cold_ms
        rows.append((f"cold matrix load ({index.matrix.shape[0]:,} x {index.matrix.shape[1]})", f"{cold_ms:,.0f} ms"))
        t = time.perf_counter()
        cold_store.search(COLLECTION, queries[0], top_k=TOP_K)
        figures["first_search_after_load_ms"] = (time.perf_counter() - t) * 1000

        qvecs = get_embedder(model).embed(queries)
        matrix = index.matrix
        blas_ms = timed_each(lambda q: matrix @ q, qvecs)
        figures["blas_matvec_ms"] = {"p50": percentile(blas_ms, 0.5), "p95": percentile(blas_ms, 0.95)}
        rows.append(("for comparison: BLAS matrix @ q alone",
                     f"p50 {percentile(blas_ms, 0.5):.2f} ms, p95 {percentile(blas_ms, 0.95):.2f} ms"))
        numpy_ms = []
        for q in qvecs:
            t = time.perf_counter()
            scores = cosine_scores(matrix, q)
            top = np.argpartition(scores, len(scores) - TOP_K)[-TOP_K:]
            top[np.argsort(-scores[top])]
            numpy_ms.append((time.perf_counter() - t) * 1000)
        figures["numpy_top10_ms"] = {"p50": percentile(numpy_ms, 0.5), "p95": percentile(numpy_ms, 0.95)}
        rows.append(("scores (einsum) + argpartition + sort",
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
            pairs = [timed(lambda q=q, mode=mode: cold_store.search(COLLECTION, q, top_k=TOP_K, mode=mode))
                     for q in queries]
            wall, cpu = [w for w, _ in pairs], [c for _, c in pairs]
            p50, p95 = percentile(wall, 0.5), percentile(wall, 0.95)
            figures[f"search_{mode}_ms"] = {"p50": p50, "p95": p95, "cpu_p50": percentile(cpu, 0.5),
                                            "cpu_p95": percentile(cpu, 0.95)}
            mark = "" if mode != "vector" else ("  OK" if p50 <= TARGET_MS else f"  MISS (target {TARGET_MS:g} ms)")
            rows.append((f"search top-{TOP_K}, {mode} (warm)",
                         f"p50 {p50:.2f} ms, p95 {p95:.2f} ms (CPU p50 {percentile(cpu, 0.5):.2f}, "
                         f"p95 {percentile(cpu, 0.95):.2f}){mark}"))

    width = max(len(name) for name, _ in rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nload average {load:.1f} on {os.cpu_count()} CPUs (other work on the machine inflates wall times)")
    print(f"vector store, {args.chunks:,} chunks, {args.queries} queries, model {model}, numpy {np.__version__}"
          f", OPENBLAS_CORETYPE={figures['OPENBLAS_CORETYPE']}")
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 60}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
