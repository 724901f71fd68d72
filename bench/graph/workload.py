"""One graph engine's timings on the store's own schema and Cypher (run by bench/graph/run.py).

Standalone on purpose: it imports only the engine (`kuzu` or `ladybug`, the same Python API) and the
standard library, so it runs in any interpreter that has the engine installed. It builds the
embedded graph's tables (`Entity`, `Relates`) with the statements `stores/kuzu/graph.py` uses,
bulk-loads a generated graph in UNWIND batches, then times the reads a pipeline makes: a view
matching by name, a primary-key lookup, a 1-hop expansion from one key and a 2-hop variable-length
expansion. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

NODE_DDL = ("CREATE NODE TABLE Entity(key STRING, instance STRING, id STRING, kind STRING, name STRING, "
            "attributes STRING, PRIMARY KEY(key))")
REL_DDL = ("CREATE REL TABLE Relates(FROM Entity TO Entity, key STRING, instance STRING, id STRING, kind STRING, "
           "from_id STRING, to_id STRING, attributes STRING)")
MERGE_NODES = ("UNWIND $rows AS row MERGE (n:Entity {key: row.key}) SET n.instance = row.instance, "
               "n.id = row.id, n.kind = row.kind, n.name = row.name, n.attributes = row.attributes")
CREATE_EDGES = ("UNWIND $rows AS row WITH row, row.from_key AS fk MATCH (a:Entity {key: fk}) "
                "WITH a, row, row.to_key AS tk MATCH (b:Entity {key: tk}) "
                "CREATE (a)-[:Relates {key: row.key, instance: row.instance, id: row.id, kind: row.kind, "
                "from_id: row.from_id, to_id: row.to_id, attributes: row.attributes}]->(b)")
QUERIES = {
    "view by name (owners)": ("MATCH (p:Entity)-[:Relates {kind: 'OWNS'}]->(m:Entity {name: $name}) "
                              "RETURN p.id AS id, p.name AS name LIMIT 20", "name"),
    "primary-key lookup": ("MATCH (m:Entity {key: $key}) RETURN m.id, m.name, m.kind, m.attributes", "key"),
    "1-hop from one key": ("MATCH (s:Entity)-[r:Relates]-(n:Entity) WHERE s.key = $key "
                           "RETURN n.id, n.name, r.kind LIMIT 100", "key"),
    "2-hop variable length": ("MATCH (s:Entity)-[:Relates*1..2]-(n:Entity) WHERE s.key = $key "
                              "RETURN DISTINCT n.id LIMIT 25", "key"),
}
BATCH = 1000
MODULES = 40


def graph(nodes: int, edges: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    node_rows = []
    for n in range(nodes):
        kind = "module" if n < MODULES else ("person" if n < MODULES * 2 else "function")
        node_id = f"{kind}:{n:06d}"
        node_rows.append({"key": f"default/{node_id}", "instance": "default", "id": node_id, "kind": kind,
                          "name": f"m{n}" if kind == "module" else f"{kind}-{n}", "attributes": "{}"})
    edge_rows = []
    for e in range(edges):
        if e < MODULES * 3:
            a, b, kind = node_rows[MODULES + e % MODULES], node_rows[e % MODULES], "OWNS"
        else:
            a, b = rng.sample(node_rows, 2)
            kind = rng.choice(("CALLS", "DEPENDS_ON", "MENTIONS"))
        edge_rows.append({"key": f"default/e{e}", "from_key": a["key"], "to_key": b["key"], "instance": "default",
                          "id": f"e{e}", "kind": kind, "from_id": a["id"], "to_id": b["id"], "attributes": "{}"})
    return node_rows, edge_rows


def timed(run) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=("kuzu", "ladybug"))
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--edges", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    started = time.perf_counter()
    engine = importlib.import_module(args.engine)
    import_ms = (time.perf_counter() - started) * 1000
    nodes, edges = graph(args.nodes, args.edges, seed=7)
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "graph"
        db = engine.Database(str(path))
        conn = engine.Connection(db)
        conn.execute(NODE_DDL)
        conn.execute(REL_DDL)
        load_nodes = timed(lambda: [conn.execute(MERGE_NODES, {"rows": nodes[i:i + BATCH]})
                                    for i in range(0, len(nodes), BATCH)])
        load_edges = timed(lambda: [conn.execute(CREATE_EDGES, {"rows": edges[i:i + BATCH]})
                                    for i in range(0, len(edges), BATCH)])
        count = conn.execute("MATCH ()-[r:Relates]->() RETURN count(r)").get_next()[0]
        if count != len(edges):
            sys.exit(f"{args.engine}: loaded {count} edges of {len(edges)}")
        samples: dict[str, list[float]] = {name: [] for name in QUERIES}
        digest = hashlib.sha256()  # the same rows from both engines, or the run is void
        for _ in range(args.runs):
            for name, (cypher, param) in QUERIES.items():
                node = nodes[rng.randrange(MODULES)] if param == "name" else rng.choice(nodes)
                value = node["name"] if param == "name" else node["key"]
                rows: list = []
                samples[name].append(timed(lambda c=cypher, p=param, v=value, out=rows: out.extend(
                    conn.execute(c, {p: v}).get_all())))
                if "LIMIT" not in cypher or len(rows) < 20:  # a capped result may pick any rows
                    digest.update(json.dumps(sorted(map(str, rows))).encode())
        conn.close()
        db.close()
        size = sum(f.stat().st_size for f in path.parent.rglob("*") if f.is_file())
    quantiles = {name: {"p50": statistics.median(v), "p99": sorted(v)[int(len(v) * 0.99) - 1]}
                 for name, v in samples.items()}
    print(json.dumps({"engine": args.engine, "version": getattr(engine, "__version__", "?"),
                      "import_ms": import_ms, "load_nodes_ms": load_nodes, "load_edges_ms": load_edges,
                      "disk_bytes": size, "queries": quantiles,
                      "digest": digest.hexdigest()}))


if __name__ == "__main__":
    main()
