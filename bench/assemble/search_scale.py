"""Vector search at 1M chunks (ANN index) and hybrid search at 100k chunks on two corpora, each
next to its peer measured in the same run.

    python bench/assemble/search_scale.py                       # every row (generated once, then reused)
    python bench/assemble/search_scale.py --vector-chunks 200000 --hybrid-chunks 20000   # smaller

Collections are generated once into `bench/out/assemble/search/<corpus>-<chunks>/project.db`
(the vector store's own tables, created by its migrations; embeddings by the default embedder)
and reused; the ANN index the store keeps beside the database is built by the first search after
generation (timed) and persisted like any store's. Corpora:

- `assemble`: the documents of `bench/assemble`'s workspace (`workspace._chunk_docs`: a title and
  3-6 sentences mixing the domain vocabulary with Zipf-distributed English words);
- `natural`: natural English text: the docstrings of the Python standard library and of the
  installed packages, cut into chunks of about 60 words (what is installed decides the text, so
  the row records how many chunks it found).

Rows: vector top-10 at `--vector-chunks` through `SqliteVectorStore.search` (ANN), recall@10
against exact search over the same vectors, and exact search (the peer); hybrid top-10 at
`--hybrid-chunks` on both corpora, the keyword leg answered from the in-memory postings (read from
the FTS index first, timed), its top-k checked equal to FTS5's own `bm25()` ranking; peers: FTS5's
ranking alone, and the hybrid search with the keyword leg on FTS5 (as before the postings); with
`--keyword-peers`, tantivy and bm25s over the same chunks.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

COLLECTION = "docs"
TOP_K = 10
TARGETS = {"vector": 20.0, "hybrid": 30.0}  # p50 ms
RECALL_TARGET = 0.95
BATCH = 5_000
NATURAL_WORDS = 60


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- corpora ---------------------------------------------------------------------------------------


def assemble_docs(count: int) -> Iterator[tuple[str, str]]:
    import workspace

    sizes = workspace.Sizes.full()
    sizes = workspace.Sizes(**{**sizes.__dict__, "chunks": count})
    words = workspace.Words(random.Random(workspace.SEED))
    for batch in workspace._chunk_docs(sizes, words):
        for doc_uri, text, _ in batch:
            yield doc_uri, text


def natural_docs(count: int) -> Iterator[tuple[str, str]]:
    """Docstrings of the standard library and installed packages, in ~NATURAL_WORDS-word chunks."""
    paths = sysconfig.get_paths()
    made = 0
    for root in dict.fromkeys((paths["stdlib"], paths["purelib"])):
        for file in sorted(Path(root).rglob("*.py")):
            try:
                tree = ast.parse(file.read_bytes())
            except (SyntaxError, ValueError, OSError):
                continue
            for node in ast.walk(tree):
                if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                doc = ast.get_docstring(node)
                words = doc.split() if doc else []
                for start in range(0, len(words), NATURAL_WORDS):
                    piece = words[start:start + NATURAL_WORDS]
                    if len(piece) < 8:
                        continue
                    yield f"py/{made:07d}", " ".join(piece)
                    made += 1
                    if made == count:
                        return


CORPORA: dict[str, Callable[[int], Iterator[tuple[str, str]]]] = {"assemble": assemble_docs,
                                                                   "natural": natural_docs}


# -- generation ------------------------------------------------------------------------------------


def generate(folder: Path, corpus: str, count: int) -> int:
    """The collection as the store writes it, bulk-inserted in batches; returns the chunk count."""
    from context_assembly.stores.embedding import default_embedder_name, get_embedder
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex

    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        for leftover in tmp.rglob("*"):
            if leftover.is_file():
                leftover.unlink()
    tmp.mkdir(parents=True, exist_ok=True)
    db = Database(tmp / "project.db")
    SqliteVectorIndex(db)
    model = default_embedder_name()
    embedder = get_embedder(model)
    conn = db.connection()
    conn.execute("INSERT INTO vector_collections VALUES (?, ?, ?)", (COLLECTION, model, embedder.dimension))
    started, made = time.perf_counter(), 0
    larger = sorted((p for p in folder.parent.glob(f"{corpus}-*") if p.suffix != ".tmp"
                     and p.name.split("-")[-1].isdigit() and int(p.name.split("-")[-1]) > count),
                    key=lambda p: int(p.name.split("-")[-1]))
    if larger and _same_model(larger[0], model):
        # The generators are deterministic: a larger collection's first chunks are this one.
        log(f"  copying the first {count:,} chunks of {larger[0].name}")
        conn.execute("ATTACH DATABASE ? AS larger", (str(larger[0] / "project.db"),))
        conn.execute("BEGIN")
        conn.execute("INSERT INTO vector_documents SELECT d.* FROM larger.vector_documents d JOIN "
                     "larger.vector_chunks c ON c.collection = d.collection AND c.doc_uri = d.doc_uri "
                     "WHERE c.id <= ? ORDER BY c.id", (count,))
        conn.execute("INSERT INTO vector_chunks(id, collection, doc_uri, ord, text, embedding) "
                     "SELECT id, collection, doc_uri, ord, text, embedding FROM larger.vector_chunks "
                     "WHERE id <= ? ORDER BY id", (count,))
        for store in ("vector", f"vector:{COLLECTION}"):
            db.bump(conn, store)
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE larger")
        made = int(conn.execute("SELECT count(*) FROM vector_chunks").fetchone()[0])
        db.close()
        tmp.rename(folder)
        return made
    docs = CORPORA[corpus](count)
    while True:
        batch = [doc for _, doc in zip(range(BATCH), docs, strict=False)]
        if not batch:
            break
        vectors = embedder.embed([text for _, text in batch])
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO vector_documents VALUES (?, ?, ?, '{}', 0)",
                         [(COLLECTION, uri, text) for uri, text in batch])
        conn.executemany("INSERT INTO vector_chunks(collection, doc_uri, ord, text, embedding) VALUES (?, ?, 0, ?, ?)",
                         [(COLLECTION, uri, text, vector.astype("<f4").tobytes())
                          for (uri, text), vector in zip(batch, vectors, strict=True)])
        for store in ("vector", f"vector:{COLLECTION}"):
            db.bump(conn, store)
        conn.execute("COMMIT")
        made += len(batch)
        elapsed = time.perf_counter() - started
        log(f"  {corpus}: {made:,}/{count:,} chunks, {made / elapsed:,.0f} chunks/s")
    db.close()
    tmp.rename(folder)
    return made


def _same_model(folder: Path, model: str) -> bool:
    import sqlite3

    with sqlite3.connect(folder / "project.db") as conn:
        row = conn.execute("SELECT embedding_model FROM vector_collections WHERE collection = ?",
                           (COLLECTION,)).fetchone()
    return bool(row) and row[0] == model


def ensure(out: Path, corpus: str, count: int) -> Path:
    folder = out / f"{corpus}-{count}"
    if not folder.is_dir():
        log(f"generating {folder} ({count:,} chunks of the {corpus} corpus; once) ...")
        t = time.perf_counter()
        made = generate(folder, corpus, count)
        log(f"  {made:,} chunks in {time.perf_counter() - t:.0f} s")
    return folder


# -- queries ---------------------------------------------------------------------------------------


def queries(corpus: str, folder: Path, count: int) -> list[str]:
    """`assemble`: the keywords of `bench/assemble`'s request texts (what its vector steps search
    with); `natural`: 8 consecutive words of a random chunk, stopwords and all."""
    import workspace
    from context_assembly.pipelines.steps.input import keywords

    if corpus == "assemble":
        sizes = workspace.Sizes.full()
        return [" ".join(keywords(r["input"]["text"])) for r in workspace.requests(count, sizes)]
    from context_assembly.stores.sqlite.database import Database

    db = Database(folder / "project.db")
    total = db.read("SELECT max(id) FROM vector_chunks")[0][0]
    rng = random.Random(11)
    out = []
    while len(out) < count:
        rows = db.read("SELECT text FROM vector_chunks WHERE id = ?", (rng.randint(1, total),))
        words = rows[0][0].split() if rows else []
        if len(words) >= 8:
            start = rng.randrange(len(words) - 7)
            out.append(" ".join(words[start:start + 8]))
    db.close()
    return out


# -- measuring -------------------------------------------------------------------------------------


Row = tuple[str, list[float], str, str]  # label, samples (ms), target verdict, note


def timed(fn: Callable[[str], Any], items: list[str]) -> list[float]:
    for item in items[:3]:
        fn(item)  # warm
    samples = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        samples.append((time.perf_counter() - t) * 1000)
    return samples


def verdict(samples: list[float], target: float) -> str:
    p50 = statistics.median(samples)
    return f"{'PASS' if p50 <= target else 'MISS'} (≤ {target:g})"


def open_store(folder: Path, ann_min_chunks: int | None = None, postings_min_chunks: int | None = None) -> Any:
    from context_assembly.stores.sqlite.ann import ANN_MIN_CHUNKS
    from context_assembly.stores.sqlite.database import Database
    from context_assembly.stores.sqlite.postings_keeper import POSTINGS_MIN_CHUNKS
    from context_assembly.stores.sqlite.vector import SqliteVectorIndex
    from context_assembly.stores.vector_collections import VectorCollections

    db = Database(folder / "project.db")
    index = SqliteVectorIndex(db, ann_min_chunks=ANN_MIN_CHUNKS if ann_min_chunks is None else ann_min_chunks,
                              postings_min_chunks=POSTINGS_MIN_CHUNKS if postings_min_chunks is None
                              else postings_min_chunks)
    return VectorCollections(index, folder / "vectordb")


def vector_rows(folder: Path, count: int, texts: list[str]) -> tuple[list[Row], dict[str, Any]]:
    from context_assembly.stores.embedding import get_embedder

    figures: dict[str, Any] = {}
    store = open_store(folder)
    index = store.index
    t = time.perf_counter()
    ann = index.ann.current(COLLECTION)
    figures["ann_load_s"] = time.perf_counter() - t
    if ann is None:
        log("building the ANN index (once; persisted beside the database) ...")
        t = time.perf_counter()
        assert index.build_ann(COLLECTION), "usearch is not installed"
        figures["ann_build_s"] = time.perf_counter() - t
        figures.pop("ann_load_s")
    exact = open_store(folder)
    exact.index.ann_min_chunks = None  # the peer: always exact, never the index persisted beside the database
    t = time.perf_counter()
    exact.index._index(COLLECTION)
    figures["matrix_load_s"] = time.perf_counter() - t
    model = index.claimed_model(COLLECTION)[0]
    vectors = get_embedder(model).embed(texts)
    hits = 0
    for q in vectors:
        want = {i for i, _ in exact.index.nearest(COLLECTION, q, TOP_K, -1.0)}
        got = {i for i, _ in index.nearest(COLLECTION, q, TOP_K, -1.0)}
        hits += len(want & got)
    recall = hits / (TOP_K * len(vectors))
    figures["recall_at_10"] = recall
    ann_ms = timed(lambda q: store.search(COLLECTION, q, top_k=TOP_K, mode="vector"), texts)
    exact_ms = timed(lambda q: exact.search(COLLECTION, q, top_k=TOP_K, mode="vector"), texts)
    by_text = dict(zip(texts, vectors, strict=True))
    ann_alone = timed(lambda q: index.nearest(COLLECTION, by_text[q], TOP_K, -1.0), texts)
    exact_alone = timed(lambda q: exact.index.nearest(COLLECTION, by_text[q], TOP_K, -1.0), texts)
    embed_ms = timed(lambda q: get_embedder(model).embed([q]), texts)
    note = f"recall@10 {recall:.3f} ({'PASS' if recall >= RECALL_TARGET else 'MISS'} ≥ {RECALL_TARGET})"
    rows = [(f"vector top-10, {count:,} chunks, ANN (usearch HNSW, re-scored exactly)", ann_ms,
             verdict(ann_ms, TARGETS["vector"]), note),
            ("  peer: exact search over the matrix", exact_ms, "", ""),
            ("  nearest-k alone (query embedded), ANN", ann_alone, "", ""),
            ("  nearest-k alone (query embedded), exact", exact_alone, "", ""),
            ("  query embedding alone", embed_ms, "", "")]
    return rows, figures


def hybrid_rows(corpus: str, folder: Path, count: int, texts: list[str], figures: dict[str, Any],
                peers: bool) -> list[Row]:
    from context_assembly.stores.sqlite.vector import fts_query
    from context_assembly.stores.vector_collections import fts_terms

    store = open_store(folder)
    index = store.index
    shutil.rmtree(folder / "keyword-postings", ignore_errors=True)  # read from the FTS index, not a saved file
    t = time.perf_counter()
    assert index.build_postings(), "the keyword postings could not be read"
    figures[f"{corpus}_postings_build_s"] = time.perf_counter() - t
    snapshot = index.postings.current()
    arrays = (snapshot.main.docs, snapshot.main.freqs, snapshot.main.offsets, snapshot.ids, snapshot.collections,
              snapshot.live, snapshot.lengths, snapshot.norm())
    figures[f"{corpus}_postings_mb"] = sum(a.nbytes for a in arrays) / 1e6  # and the words' dict
    fts5 = open_store(folder, postings_min_chunks=10**12)  # the same store, keyword leg on FTS5 (before)
    pool = 50  # the hybrid leg's pool (vector_collections.HYBRID_POOL)
    same = 0
    for text in texts:
        terms = fts_terms(text)
        got = index.full_text(COLLECTION, terms, pool) if terms else []
        want = index._bm25(COLLECTION, fts_query(terms), pool) if terms else []
        same += got == want  # same chunks, same order, bit-identical scores
    hybrid_ms = timed(lambda q: store.search(COLLECTION, q, top_k=TOP_K, mode="hybrid"), texts)
    keyword_ms = timed(lambda q: index.full_text(COLLECTION, fts_terms(q), pool) if fts_terms(q) else [], texts)
    plain_ms = timed(lambda q: index._bm25(COLLECTION, fts_query(fts_terms(q)), pool) if fts_terms(q) else [],
                     texts)
    before_ms = timed(lambda q: fts5.search(COLLECTION, q, top_k=TOP_K, mode="hybrid"), texts)
    before_keyword_ms = timed(lambda q: fts5.index.full_text(COLLECTION, fts_terms(q), pool) if fts_terms(q) else [],
                              texts)
    note = f"keyword top-{pool} = FTS5's bm25() ranking (ids, order, scores) for {same}/{len(texts)} queries"
    rows = [(f"hybrid top-10, {count:,} chunks, {corpus} corpus", hybrid_ms, verdict(hybrid_ms, TARGETS["hybrid"]),
             note),
            (f"  keyword leg alone (top-{pool}, in-memory postings)", keyword_ms, "", ""),
            (f"  peer: FTS5 ORDER BY bm25() LIMIT {pool} over every match", plain_ms, "", ""),
            ("  before: hybrid with the keyword leg on FTS5 (pruned when provable)", before_ms, "", ""),
            ("  before: that keyword leg alone", before_keyword_ms, "", "")]
    return rows + (keyword_peer_rows(corpus, folder, texts, pool, figures) if peers else [])


def keyword_peer_rows(corpus: str, folder: Path, texts: list[str], pool: int, figures: dict[str, Any]) -> list[Row]:
    """The keyword engines considered instead of the postings (not dependencies of the project:
    `--keyword-peers` needs `tantivy` and `bm25s` importable), each ranking by its own BM25."""
    import re
    import shutil
    import sqlite3

    import bm25s
    import tantivy

    from context_assembly.stores.vector_collections import fts_terms

    word = re.compile(r"[a-z0-9]+")
    with sqlite3.connect(folder / "project.db") as conn:
        rows = conn.execute("SELECT id, text FROM vector_chunks ORDER BY id").fetchall()

    def tokens(q: str) -> list[str]:
        return list(dict.fromkeys(t for term in fts_terms(q) for t in word.findall(term)))

    where = folder / "tantivy"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False)
    builder.add_integer_field("id", stored=True, indexed=False, fast=True)
    schema = builder.build()
    t = time.perf_counter()
    tindex = tantivy.Index(schema, path=str(where))
    writer = tindex.writer(heap_size=200_000_000, num_threads=1)
    for chunk_id, text in rows:
        writer.add_document(tantivy.Document(id=chunk_id, text=text))
    writer.commit()
    writer.wait_merging_threads()
    tindex.reload()
    figures[f"{corpus}_tantivy_build_s"] = time.perf_counter() - t
    searcher = tindex.searcher()

    def tantivy_top(q: str) -> list[Any]:
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", w)) for w in tokens(q)]
        if not should:
            return []
        return [(searcher.doc(a)["id"][0], score) for score, a in searcher.search(
            tantivy.Query.boolean_query(should), pool).hits]

    t = time.perf_counter()
    retriever = bm25s.BM25(method="robertson", k1=1.2, b=0.75)
    retriever.index([word.findall(text.lower()) for _, text in rows], show_progress=False)
    figures[f"{corpus}_bm25s_build_s"] = time.perf_counter() - t

    def bm25s_top(q: str) -> Any:
        known = [w for w in tokens(q) if w in retriever.vocab_dict]
        return retriever.retrieve([known], k=min(pool, len(rows)), show_progress=False, n_threads=1) if known else []

    return [("  peer: tantivy top-50 (its own BM25 ranking; persisted index)", timed(tantivy_top, texts), "", ""),
            ("  peer: bm25s top-50 (its own BM25 ranking; in memory, scipy)", timed(bm25s_top, texts), "", "")]


def table(rows: list[Row]) -> list[str]:
    lines = ["| search | n | p50 ms | p95 ms | target | note |", "|---|---|---|---|---|---|"]
    for label, samples, target, note in rows:
        p95 = sorted(samples)[min(len(samples) - 1, int(0.95 * len(samples)))]
        lines.append(f"| {label.strip()} | {len(samples)} | {statistics.median(samples):.2f} | {p95:.2f} | "
                     f"{target} | {note} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vector-chunks", type=int, default=1_000_000)
    ap.add_argument("--hybrid-chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip", choices=("vector", "hybrid"), action="append", default=[])
    ap.add_argument("--keyword-peers", action="store_true",
                    help="also time tantivy and bm25s on the hybrid corpora (both must be importable)")
    ap.add_argument("--out", type=Path, default=HERE.parent / "out" / "assemble" / "search")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    folders = {}
    if "vector" not in args.skip:
        folders["vector"] = ensure(args.out, "assemble", args.vector_chunks)
    if "hybrid" not in args.skip:
        for corpus in CORPORA:
            folders[corpus] = ensure(args.out, corpus, args.hybrid_chunks)
    load = [os.getloadavg()]
    rows: list[Row] = []
    figures: dict[str, Any] = {}
    if "vector" in folders:
        vrows, figures = vector_rows(folders["vector"], args.vector_chunks,
                                     queries("assemble", folders["vector"], args.queries))
        rows += vrows
    for corpus in CORPORA:
        if corpus in folders:
            rows += hybrid_rows(corpus, folders[corpus], args.hybrid_chunks,
                                queries(corpus, folders[corpus], args.queries), figures, args.keyword_peers)
    load.append(os.getloadavg())
    extra = ", ".join(f"{k.replace('_', ' ')} {v:.3f}" if k.startswith("recall") else f"{k.replace('_', ' ')} {v:.1f}"
                      for k, v in figures.items())
    lines = [f"load average {' / '.join(f'{x:.2f}' for x in load[0])} → {' / '.join(f'{x:.2f}' for x in load[1])}"
             f" on {os.cpu_count()} CPUs; {extra}", "", *table(rows)]
    print("\n".join(lines))
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
