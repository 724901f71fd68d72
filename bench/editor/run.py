"""Editor latency on a 5,000-rule engine file, ours (the real server over stdio) side by side with
vscode-json-languageservice (`../shared/bench/peers/peer_vscode_json_ls.js`), in one command.

    python bench/editor/run.py [--runs 10] [--warmup 2] [--cold-runs 5] [--out bench/out/editor] [--profile]

1. Generates the `lsp5000` workload (`gen_workload.py --size lsp5000 --out bench/out/data`) and
   uses `data/lsp5000/engines/e001.json` (2.8 MB, 5,000 rules, 128,484 lines).
2. Builds a workspace under `<out>/ws/` that declares every memory id and `addVar` name the file
   uses (one persistent-memory definition per id), so that the file is as valid for our linter as
   it is for the peer's schema: 0 diagnostics on both sides. The file itself is not on disk: it is
   opened unsaved at `.codebolt/context-rule-engines/e001.json`.
3. Ours, over LSP (push diagnostics, `diagnostics_debounce_ms: 0`, UTF-16): for `--cold-runs`
   fresh server processes, spawn → `initialize` answered, then (after the server's own workspace
   warm-up, awaited through one `contextRuleEngine/possibleVariables` call) `didOpen` → the first
   `publishDiagnostics` of that file (cold). In the last process: a one-character edit (insert or
   delete an `x` 3 characters into the `"field"` value nearest the middle, an incremental
   `didChange`) → its `publishDiagnostics`; `textDocument/completion` at that caret; and the
   edit → completion answered (`didChange` then `completion` right away; the edit's diagnostics
   are awaited, untimed, before the next run).
4. Ours, the pure functions in this process, no LSP (`build_document` + `overlay` +
   `document_diagnostics`, and `complete`): first call (cold), then warm medians.
5. The peer: `node peer_vscode_json_ls.js --file <that file> --runs N --warmup 2 --stats <out>`,
   NODE_PATH at the npm install cached in `bench/out/peers-node/` (see `bench/rules/peers.py`).
6. Prints the table with the ratios ours/peer and PASS/MISS against the targets (cold ≤ 1.0× the
   peer's cold parse + validate, edit → diagnostics ≤ 0.3×, completion ≤ 1.0×); also written to
   `<out>/summary.md`, raw numbers to `<out>/results.json`. A MISS (or `--profile`) profiles the
   pure functions with cProfile (`<out>/profile-*.txt`). A MISS does not change the exit status;
   wrong diagnostics or completions (the valid file must give 0, the field completion after `sco`
   must offer something under `scope.`) exit 1.
7. Many open files (`many_open.py`, `--many-files` 200, `--many-runs` 15, 0 to skip): two more
   servers, one with 200 rule files of about 22 KB open, one with only the first; a character typed
   into that file → its `publishDiagnostics`, the runs alternating between the two. Its row compares
   the keystroke with 200 open to the same keystroke with the file open alone (the median of the
   paired ratios; target ≤ 2×).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import itertools
import json
import os
import platform
import pstats
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO / "bench" / "rules"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import many_open  # noqa: E402
import peers  # noqa: E402
from lsp_client import LspProcess  # noqa: E402

SIZE = "lsp5000"
SETTINGS: dict[str, Any] = {"diagnostics_debounce_ms": 0}
SERVER = [sys.executable, "-m", "context_assembly", "serve"]
KEY = '"field": "'
TARGETS = {"cold": 1.0, "edit_diagnostics": 0.3, "edit_completion": 1.0, "completion": 1.0,
           "many_open": many_open.TARGET}


# -- workload and workspace --------------------------------------------------------------------------


def ensure_modules(cache: Path) -> Path:
    """The shared lock file's packages in `cache` (json-rules-engine and vscode-json-languageservice)."""
    modules = peers.ensure_node_peer(cache)
    if not (modules / "vscode-json-languageservice" / "package.json").is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm not found: install Node.js 20 to run the vscode-json-languageservice peer")
        peers._run([npm, "ci", "--no-audit", "--no-fund"], env={**os.environ, "npm_config_loglevel": "error"},
                   cwd=cache)
    return modules


def build_workspace(target: Path, engine: dict[str, Any]) -> None:
    """A workspace declaring every memory id and addVar name the engine uses."""
    if target.exists():
        shutil.rmtree(target)
    codebolt = target / ".codebolt"
    (codebolt / "context-rule-engines").mkdir(parents=True)
    memories_dir = codebolt / "PersistentMemory"
    memories_dir.mkdir()
    memories = sorted({m for rule in engine["rules"] for m in rule.get("then", {}).get("add_memories", [])})
    addvars = sorted({c["field"].split(".", 1)[1] for rule in engine["rules"] for c in _conditions(rule["when"])
                      if isinstance(c.get("field"), str) and c["field"].startswith("addVar.")})
    for i, memory in enumerate(memories):
        definition: dict[str, Any] = {
            "id": memory, "label": memory, "status": "active",
            "retrieval": {"pipeline": [{"type": "episodic_recent", "limit": 1}]},
            "contribution": {"section": "history", "priority": "low"},
        }
        if i == 0:
            definition["additional_variables"] = [{"name": n, "type": "string", "required": False} for n in addvars]
        (memories_dir / f"{memory}.json").write_text(json.dumps(definition, indent=2) + "\n")


def _conditions(items: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else [items]:
        if not isinstance(item, dict):
            continue
        out.append(item)
        for group in ("any", "all"):
            out += _conditions(item.get(group, []))
        if "not" in item:
            out += _conditions(item["not"])
    return out


def caret_of(text: str) -> tuple[int, dict[str, int], str]:
    """As the peer: 3 characters into the `"field"` value nearest the middle (offset, position, value)."""
    at = text.find(KEY, len(text) >> 1)
    if at < 0:
        at = text.rfind(KEY)
    start = at + len(KEY)
    offset = start + 3
    line = text.count("\n", 0, offset)
    character = len(text[text.rfind("\n", 0, offset) + 1:offset].encode("utf-16-le")) // 2
    return offset, {"line": line, "character": character}, text[start:text.index('"', start)]


# -- statistics --------------------------------------------------------------------------------------


def summary(values: list[float]) -> dict[str, Any]:
    return {"median_ms": round(statistics.median(values), 3), "min_ms": round(min(values), 3),
            "max_ms": round(max(values), 3), "n": len(values), "runs_ms": [round(v, 3) for v in values]}


# -- ours over LSP ----------------------------------------------------------------------------------


def client_capabilities() -> dict[str, Any]:
    return {
        "general": {"positionEncodings": ["utf-16"]},
        "textDocument": {
            "synchronization": {"didSave": True, "dynamicRegistration": False},
            "publishDiagnostics": {"versionSupport": True, "relatedInformation": True,
                                   "codeDescriptionSupport": True, "dataSupport": True},
            "completion": {"completionItem": {"snippetSupport": True, "documentationFormat": ["markdown"]},
                           "contextSupport": True},
            "hover": {"contentFormat": ["markdown"]},
        },
        # as VS Code: the client watches files for the server (which then trusts its events)
        "workspace": {"workspaceFolders": True, "didChangeWatchedFiles": {"dynamicRegistration": True}},
    }


async def start_server(ws: Path) -> tuple[LspProcess, float, float]:
    """A fresh server: (process, spawn → initialize answered ms, initialized → workspace loaded ms)."""
    server = LspProcess(SERVER, ws, SETTINGS)
    await server.start()
    await server.request("initialize", {
        "processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": client_capabilities(),
        "initializationOptions": {"settings": SETTINGS},
        "workspaceFolders": [{"uri": ws.as_uri(), "name": "ws"}]})
    initialized = time.perf_counter()
    await server.notify("initialized", {})
    await server.request("contextRuleEngine/possibleVariables", {})  # waits for the server's warm-up load
    ready = time.perf_counter()
    return server, (initialized - server.spawned_at) * 1000, (ready - initialized) * 1000


def published(uri: str, version: int) -> Any:
    return lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri \
        and m["params"].get("version") == version


class EditorSession:
    """One open document in one server, with the one-character edit toggled at the caret."""

    def __init__(self, server: LspProcess, uri: str, caret: dict[str, int]) -> None:
        self.server = server
        self.uri = uri
        self.caret = caret
        self.version = 1
        self.inserted = False

    def edit_frame(self) -> bytes:
        self.version += 1
        line, character = self.caret["line"], self.caret["character"]
        if self.inserted:  # delete the x
            change = {"range": {"start": {"line": line, "character": character},
                                "end": {"line": line, "character": character + 1}}, "text": ""}
        else:
            change = {"range": {"start": {"line": line, "character": character},
                                "end": {"line": line, "character": character}}, "text": "x"}
        self.inserted = not self.inserted
        return self.server.notification_frame("textDocument/didChange", {
            "textDocument": {"uri": self.uri, "version": self.version}, "contentChanges": [change]})

    async def edit_to_diagnostics(self) -> tuple[float, int]:
        frame = self.edit_frame()
        future = self.server.wait_for(published(self.uri, self.version))
        t0 = time.perf_counter()
        await self.server.send_bytes(frame)
        arrived, message = await asyncio.wait_for(future, 300)
        return (arrived - t0) * 1000, len(message["params"]["diagnostics"])

    def completion_frame(self) -> tuple[int, bytes]:
        position = {"line": self.caret["line"], "character": self.caret["character"] + (1 if self.inserted else 0)}
        return self.server.request_frame("textDocument/completion", {
            "textDocument": {"uri": self.uri}, "position": position})

    async def completion(self) -> tuple[float, list[str]]:
        msg_id, frame = self.completion_frame()
        future = self.server.expect(msg_id)
        t0 = time.perf_counter()
        await self.server.send_bytes(frame)
        arrived, message = await asyncio.wait_for(future, 300)
        return (arrived - t0) * 1000, _labels(message.get("result"))

    async def edit_to_completion(self) -> tuple[float, list[str]]:
        edit = self.edit_frame()
        diagnostics = self.server.wait_for(published(self.uri, self.version))
        msg_id, frame = self.completion_frame()
        future = self.server.expect(msg_id)
        t0 = time.perf_counter()
        await self.server.send_bytes(edit + frame)
        arrived, message = await asyncio.wait_for(future, 300)
        await asyncio.wait_for(diagnostics, 300)  # untimed: the next run starts from a quiet server
        return (arrived - t0) * 1000, _labels(message.get("result"))


def _labels(result: Any) -> list[str]:
    items = result.get("items", []) if isinstance(result, dict) else (result or [])
    return [i["label"] for i in items]


async def measure_lsp(ws: Path, uri: str, text: str, caret: dict[str, int], cold_runs: int, runs: int,
                      warmup: int) -> dict[str, Any]:
    open_frame = LspProcess.notification_frame("textDocument/didOpen", {
        "textDocument": {"uri": uri, "languageId": "json", "version": 1, "text": text}})
    spawn, load, cold, cold_counts = [], [], [], []
    server: LspProcess | None = None
    for i in range(cold_runs):
        server, to_initialize, to_ready = await start_server(ws)
        spawn.append(to_initialize)
        load.append(to_ready)
        future = server.wait_for(published(uri, 1))
        t0 = time.perf_counter()
        await server.send_bytes(open_frame)
        arrived, message = await asyncio.wait_for(future, 300)
        cold.append((arrived - t0) * 1000)
        cold_counts.append(len(message["params"]["diagnostics"]))
        print(f"  cold {i + 1}/{cold_runs}: {cold[-1]:.0f} ms ({cold_counts[-1]} diagnostics)", flush=True)
        if i < cold_runs - 1:
            await server.close()
    assert server is not None
    session = EditorSession(server, uri, caret)
    try:
        edits, edit_counts = [], []
        for i in range(warmup + runs):
            ms, count = await session.edit_to_diagnostics()
            if i >= warmup:
                edits.append(ms)
                edit_counts.append(count)
        print(f"  edit -> diagnostics: median {statistics.median(edits):.0f} ms", flush=True)
        if session.inserted:  # back to the original text
            await session.edit_to_diagnostics()
        plain, labels = [], []
        for i in range(warmup + runs):
            ms, labels = await session.completion()
            if i >= warmup:
                plain.append(ms)
        print(f"  completion: median {statistics.median(plain):.1f} ms ({len(labels)} items)", flush=True)
        edit_complete, edit_labels = [], []
        for i in range(warmup + runs):
            ms, edit_labels = await session.edit_to_completion()
            if i >= warmup:
                edit_complete.append(ms)
        print(f"  edit -> completion: median {statistics.median(edit_complete):.0f} ms", flush=True)
    finally:
        await server.close()
    return {
        "spawn_to_initialize": summary(spawn), "initialized_to_workspace_loaded": summary(load),
        "cold_open_to_diagnostics": summary(cold), "cold_diagnostics_counts": cold_counts,
        "edit_to_diagnostics": summary(edits), "edit_diagnostics_counts": edit_counts,
        "completion": summary(plain), "completion_items": len(labels), "completion_labels": labels[:20],
        "edit_to_completion": summary(edit_complete), "edit_completion_items": len(edit_labels),
    }


# -- ours, the pure functions -----------------------------------------------------------------------


class Pure:
    """The editor's pure functions on the big file, in this process."""

    def __init__(self, ws: Path, uri: str, text: str, caret_offset: int) -> None:
        from context_assembly.methods import Session

        self.session = Session(ws)
        self.session.set_settings(SETTINGS)
        self.session.workspace()  # as the server's warm-up after initialized
        self.ws = ws.resolve()
        self.uri = uri
        self.text = text
        self.edited = text[:caret_offset] + "x" + text[caret_offset:]
        self.caret_offset = caret_offset
        self.version = 0
        self.current: Any = None  # the last version built: the next one re-parses from it, as in the server

    def diagnostics(self, text: str, incremental: bool = True) -> list[dict[str, Any]]:
        from context_assembly.editor.diagnostics import document_diagnostics
        from context_assembly.editor.documents import overlay

        document = self.document(text, incremental)
        return document_diagnostics(document, overlay(self.session.workspace(), [document]), "utf-16")

    def warm(self) -> None:
        """What the server does on a worker after publishing (untimed): the tree the next edit re-parses from."""
        self.current.parsed.warm()

    def completion(self, document: Any) -> list[dict[str, Any]]:
        from context_assembly.editor.completion import complete
        from context_assembly.editor.documents import overlay

        return complete(document, self.caret_offset, overlay(self.session.workspace(), [document]), "utf-16", True)

    def document(self, text: str, incremental: bool = True) -> Any:
        """The next version, re-parsed from the last one as the server does (or from scratch)."""
        from context_assembly.editor.documents import build_document

        self.version += 1
        self.current = build_document(self.uri, text, self.version, self.ws, self.current if incremental else None)
        return self.current

    def measure(self, runs: int, warmup: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        found = self.diagnostics(self.text, incremental=False)
        cold = (time.perf_counter() - t0) * 1000
        warm, edit = [], []
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            self.diagnostics(self.text, incremental=False)  # a whole new document, caches warm
            t1 = time.perf_counter()
            self.warm()
            t2 = time.perf_counter()
            self.diagnostics(self.edited)  # the edit, from the version before
            t3 = time.perf_counter()
            self.warm()
            if i >= warmup:
                warm.append((t1 - t0) * 1000)
                edit.append((t3 - t2) * 1000)
        document = self.document(self.text)
        self.warm()
        parse = []
        complete, edit_complete = [], []
        items: list[dict[str, Any]] = []
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            items = self.completion(document)
            t1 = time.perf_counter()
            edited = self.document(self.edited)
            t2 = time.perf_counter()
            self.completion(edited)
            t3 = time.perf_counter()
            self.current = document  # the next edit starts from the same version again
            if i >= warmup:
                complete.append((t1 - t0) * 1000)
                parse.append((t2 - t1) * 1000)
                edit_complete.append((t3 - t1) * 1000)
        return {"cold_diagnostics": round(cold, 3), "cold_diagnostics_count": len(found),
                "diagnostics": summary(warm), "edit_diagnostics": summary(edit), "build_document": summary(parse),
                "completion": summary(complete), "edit_completion": summary(edit_complete),
                "completion_items": len(items)}

    def profile(self, out: Path) -> dict[str, str]:
        reports = {}
        document = self.document(self.text)
        self.warm()
        texts = itertools.cycle((self.edited, self.text))  # each call an edit from the version before
        for name, action in (("diagnostics", lambda: self.diagnostics(next(texts))),
                             ("completion", lambda: self.completion(document))):
            profiler = cProfile.Profile()
            for _ in range(6 if name == "diagnostics" else 20):
                profiler.enable()
                action()
                profiler.disable()
                self.warm()
            profiler.dump_stats(str(out / f"profile-{name}.prof"))
            text = io.StringIO()
            stats = pstats.Stats(profiler, stream=text).strip_dirs()
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(30)
            (out / f"profile-{name}.txt").write_text(text.getvalue())
            reports[name] = text.getvalue()
        return reports


# -- the peer ---------------------------------------------------------------------------------------


def run_peer(file: Path, runs: int, warmup: int, stats: Path, modules: Path) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node not found: install Node.js 20 to run the vscode-json-languageservice peer")
    peers._run([node, str(peers.SHARED / "peer_vscode_json_ls.js"), "--file", str(file), "--runs", str(runs),
                "--warmup", str(warmup), "--stats", str(stats)], env={**os.environ, "NODE_PATH": str(modules)})
    return peers.read_json(stats)  # type: ignore[no-any-return]


# -- the table --------------------------------------------------------------------------------------


def verdict(ratio: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"{'PASS' if ratio <= target else 'MISS'} (≤ {target}×)"


def table(ours: dict[str, Any], pure: dict[str, Any], peer: dict[str, Any],
          many: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:
    rows = [
        ("cold: didOpen → publishDiagnostics (fresh server)", ours["cold_open_to_diagnostics"]["median_ms"],
         "parse + doValidation, cold (1 sample)", peer["parse_validate_cold_ms"], "cold"),
        ("1-char edit → publishDiagnostics", ours["edit_to_diagnostics"]["median_ms"],
         "1-char edit + parse + doValidation", peer["edit_parse_validate_ms"], "edit_diagnostics"),
        ("1-char edit → completion answered", ours["edit_to_completion"]["median_ms"],
         "1-char edit + parse + doComplete", peer["edit_parse_complete_ms"], "edit_completion"),
        ("completion in a `field` value (round trip)", ours["completion"]["median_ms"],
         "doComplete (already parsed)", peer["complete_ms"], "completion"),
        ("pure: build_document + diagnostics, first call", pure["cold_diagnostics"],
         "parse + doValidation, cold (1 sample)", peer["parse_validate_cold_ms"], None),
        ("pure: build_document + diagnostics, warm", pure["diagnostics"]["median_ms"],
         "parse + doValidation (parse + validate medians)", peer["parse_ms"] + peer["validate_ms"], None),
        ("pure: 1-char edit, build_document + diagnostics", pure["edit_diagnostics"]["median_ms"],
         "1-char edit + parse + doValidation", peer["edit_parse_validate_ms"], None),
        ("pure: 1-char edit, build_document alone", pure["build_document"]["median_ms"],
         "parseJSONDocument", peer["parse_ms"], None),
        ("pure: 1-char edit, build_document + complete", pure["edit_completion"]["median_ms"],
         "1-char edit + parse + doComplete", peer["edit_parse_complete_ms"], None),
        ("pure: complete (already parsed)", pure["completion"]["median_ms"],
         "doComplete (already parsed)", peer["complete_ms"], None),
    ]
    lines = ["| ours | ms | peer (vscode-json-languageservice) | ms | ours/peer | target |",
             "| --- | ---: | --- | ---: | ---: | --- |"]
    verdicts = {}
    for label, mine, peer_label, theirs, key in rows:
        ratio = mine / theirs if theirs else float("inf")
        v = verdict(ratio, TARGETS.get(key) if key else None)
        if key:
            verdicts[key] = v
        lines.append(f"| {label} | {mine:,.1f} | {peer_label} | {theirs:,.1f} | {ratio:.2f}× | {v} |")
    if many is not None:  # the floor is ours too: the same keystroke with that file open alone
        verdicts["many_open"] = v = verdict(many["ratio"], TARGETS["many_open"])
        lines.append(f"| keystroke in 1 of {many['files']} open 22 KB rule files → publishDiagnostics | "
                     f"{many['many_median_ms']:,.1f} | ours: the same keystroke, that file open alone | "
                     f"{many['single_median_ms']:,.1f} | {many['ratio']:.2f}× | {v} |")
    return "\n".join(lines), verdicts


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def top_lines(report: str, count: int = 14) -> str:
    lines = report.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    return "\n".join(lines[start:start + count + 1])


async def main_async(args: argparse.Namespace) -> int:
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now().astimezone()
    load_start = os.getloadavg()
    data = peers.gen_workload(SIZE, REPO / "bench" / "out" / "data")
    file = data / "engines" / "e001.json"
    text = file.read_text(encoding="utf-8")
    engine = json.loads(text)
    ws = out / "ws"
    build_workspace(ws, engine)
    uri = (ws / ".codebolt" / "context-rule-engines" / "e001.json").resolve().as_uri()
    caret_offset, caret, field_value = caret_of(text)
    print(f"{shown(file)}: {len(text.encode()):,} bytes, {text.count(chr(10)):,} lines, "
          f"{len(engine['rules']):,} rules; caret line {caret['line'] + 1} in {field_value!r}", flush=True)

    modules = ensure_modules(REPO / "bench" / "out" / "peers-node")
    print("peer: vscode-json-languageservice ...", flush=True)
    peer = run_peer(file, args.runs, args.warmup, out / f"{SIZE}.vscode.stats.json", modules)
    print(f"  cold {peer['parse_validate_cold_ms']:.0f} ms, edit+validate {peer['edit_parse_validate_ms']:.0f} ms, "
          f"complete {peer['complete_ms']:.1f} ms, edit+complete {peer['edit_parse_complete_ms']:.0f} ms "
          f"({peer['diagnostics_valid_file']} diagnostics, {peer['completion_items']} items)", flush=True)

    print("ours over LSP ...", flush=True)
    ours = await measure_lsp(ws, uri, text, caret, args.cold_runs, args.runs, args.warmup)
    print("ours, pure functions ...", flush=True)
    pure_runner = Pure(ws, uri, text, caret_offset)
    pure = pure_runner.measure(args.runs, args.warmup)
    many = None
    if args.many_files > 0:
        print(f"ours, {args.many_files} files open ...", flush=True)
        many = await many_open.measure(args.many_files, args.many_runs, out / "many")
    load_end = os.getloadavg()

    rendered, verdicts = table(ours, pure, peer, many)
    problems = []
    if any(ours["cold_diagnostics_counts"]) or pure["cold_diagnostics_count"]:
        problems.append(f"the valid file gave diagnostics: {ours['cold_diagnostics_counts']}, "
                        f"pure {pure['cold_diagnostics_count']}")
    if not any(label.strip('"').startswith("scope.") for label in ours["completion_labels"]):
        problems.append(f"the field completion after 'sco' offered nothing under scope.: {ours['completion_labels']}")
    conditions = (f"{started:%Y-%m-%d %H:%M %Z}, {platform.machine()}, {os.cpu_count()} CPUs, "
                  f"Python {platform.python_version()}, {peer['node']}; load average "
                  f"{' / '.join(f'{x:.2f}' for x in load_start)} at the start, "
                  f"{' / '.join(f'{x:.2f}' for x in load_end)} at the end; medians of {args.runs} runs after "
                  f"{args.warmup} warm-ups (cold: {args.cold_runs} fresh servers; the peer's cold is 1 sample)")
    extra = (f"Spawn → initialize answered: {ours['spawn_to_initialize']['median_ms']:,.0f} ms; initialized → "
             f"workspace loaded: {ours['initialized_to_workspace_loaded']['median_ms']:,.0f} ms (not in cold). "
             f"Diagnostics on the valid file: ours {ours['cold_diagnostics_counts'][0]}, peer "
             f"{peer['diagnostics_valid_file']}; after the edit: ours {ours['edit_diagnostics_counts'][-1]} "
             f"(every other run). Completion items: ours {ours['completion_items']}, peer {peer['completion_items']}.")
    if many is not None:
        extra += (f" Many open: the ratio is the median of {many['runs']} paired runs; opening {many['files']} "
                  f"files took {many['open_s']:.1f} s and {many['open_messages']} diagnostics messages.")
    text_out = f"{conditions}\n\n{rendered}\n\n{extra}\n"
    print("\n" + text_out)
    (out / "summary.md").write_text(text_out)
    results = {"conditions": conditions, "file": shown(file), "caret": caret,
               "field_value": field_value, "ours_lsp": ours, "ours_pure": pure, "peer": peer, "many_open": many,
               "verdicts": verdicts, "loadavg_start": load_start, "loadavg_end": load_end}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")

    if args.profile or any(v.startswith("MISS") for k, v in verdicts.items() if k != "many_open"):
        print("profiling the pure functions (cProfile) ...", flush=True)
        for name, report in pure_runner.profile(out).items():
            print(f"\n{name} (top by own time; full report in {shown(out / f'profile-{name}.txt')}):")
            print(top_lines(report))
    for problem in problems:
        print("ERROR:", problem)
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "editor")
    parser.add_argument("--profile", action="store_true", help="profile even when every target passes")
    parser.add_argument("--many-files", type=int, default=200, help="rule files open in the many-files row (0: skip)")
    parser.add_argument("--many-runs", type=int, default=15, help="paired keystrokes of the many-files row")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
    from as_installed import compile_package

    compile_package()  # the sidecars import bytecode, as an installed package does
    sys.exit(main())
