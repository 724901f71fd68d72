"""Retrieval quality of each embedder the vector store offers, on a labelled set.

    python bench/retrieval/run.py [--out FILE]

Loads `corpus.json` (the example workspace's vector documents and note lines, plus distractor
passages from the same shop) into a scratch workspace's real vector store once per embedding
model, runs every query of `queries.json` in each search mode, and prints recall@1, recall@3 (a
query counts when one of its labelled passages is among the first k) and the mean reciprocal rank
of the first labelled passage. Models whose package is not installed are listed as such.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from context_assembly.stores.embedding import HASHING, MINILM, WORDLLAMA, is_available
from context_assembly.stores.sqlite.vector import SqliteVectorStore
from context_assembly.workspace.layout import WorkspaceLayout

HERE = Path(__file__).resolve().parent
MODELS = (WORDLLAMA, HASHING, MINILM)
MODES = ("vector", "keyword", "hybrid")
TOP_K = 10


def load() -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    passages = json.loads((HERE / "corpus.json").read_text(encoding="utf-8"))["passages"]
    queries = json.loads((HERE / "queries.json").read_text(encoding="utf-8"))["queries"]
    ids = {p["id"] for p in passages}
    for query in queries:
        unknown = set(query["relevant"]) - ids
        assert not unknown, f"{query['query']!r} names unknown passages {unknown}"
    return passages, queries


def measure(model: str, mode: str, store: SqliteVectorStore, queries: list[dict[str, Any]]) -> dict[str, float]:
    at1 = at3 = rr = 0.0
    for query in queries:
        hits = store.search(model, query["query"], top_k=TOP_K, mode=mode)
        ranked = [hit["doc_uri"] for hit in hits]
        rank = next((i for i, doc in enumerate(ranked, 1) if doc in query["relevant"]), None)
        at1 += rank == 1
        at3 += rank is not None and rank <= 3
        rr += 1 / rank if rank else 0.0
    n = len(queries)
    return {"recall@1": at1 / n, "recall@3": at3 / n, "MRR": rr / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the results as JSON to this file")
    args = parser.parse_args()
    passages, queries = load()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        layout = WorkspaceLayout(Path(scratch))
        for model in MODELS:
            if not is_available(model):
                rows.append({"model": model, "mode": "-", "note": "not installed"})
                continue
            store = SqliteVectorStore.for_workspace(layout, default_model=model)
            started = time.perf_counter()
            store.upsert_many(model, [(p["id"], p["text"], {}) for p in passages])  # one collection per model
            load_s = time.perf_counter() - started
            for mode in MODES:
                if mode == "keyword" and model != MODELS[0]:
                    continue  # BM25 does not depend on the model: one row
                name = "BM25 (no embedder)" if mode == "keyword" else model
                rows.append({"model": name, "mode": mode, **measure(model, mode, store, queries),
                             "load_s": load_s if mode != "keyword" else None})
    print(f"{len(passages)} passages, {len(queries)} queries; python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.1f}\n")
    print("| model | mode | recall@1 | recall@3 | MRR |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        if "note" in row:
            print(f"| {row['model']} | - | {row['note']} | | |")
        else:
            scores = " | ".join(f"{row[name]:.2f}" for name in ("recall@1", "recall@3", "MRR"))
            print(f"| {row['model']} | {row['mode']} | {scores} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
