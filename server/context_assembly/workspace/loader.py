"""Finding and loading every `.codebolt/` definition file, tolerating broken ones.

A broken file never stops the others: it is skipped and each problem is reported with its file,
JSON pointer, line and column. Files are parsed and engines compiled once per file version
(path, mtime, size); `WorkspaceLoader.load()` re-reads only what changed. A loader asked more than
once watches the definition folders (changes.py): while nothing changed there, `load()` answers
its last workspace without a `stat` per file.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import cattrs
from attrs import define, field

from ..collector import paused
from ..documents import ParsedDocument, parse_document
from ..limits import DEFAULT as DEFAULT_LIMITS
from ..limits import Limits, too_large
from ..model.converter import structure
from ..model.definitions import IngestionPipeline, MemoryDefinition
from ..model.problems import Problem
from ..model.rules import Rule, RuleEngine
from ..pipelines.shorthand import normalise_memory
from ..rules.background import BackgroundCompiler
from ..rules.cache import CompileCache
from ..rules.compile import LeafMemo
from ..rules.deferred_trace import TraceBuilder
from ..rules.dialects import CONTEXT_RULES_ID, NormalisedRule, context_rules_engine, normalise_file
from ..rules.engine import (
    CompiledEngine,
    compile_engine,
    compile_matcher,
    pin_compiled,
    provisional_engine,
)
from ..rules.evaluate import RuleSet
from ..rules.persist import entry_of, restore_engine, restore_matcher
from ..rules.trace_cache import KeptTrace
from .changes import ChangeWatch
from .layout import DEFINITION_DIRS, WorkspaceLayout
from .memo import SourceMemo
from .settings import Settings, load_settings

JSON_SUFFIXES = (".json",)
ANY_SUFFIXES = (".json", ".yaml", ".yml")

# kind -> (directory attribute of WorkspaceLayout, accepted suffixes)
_SUFFIXES = {"rule-engine": JSON_SUFFIXES, "graph-view": JSON_SUFFIXES}
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    kind: (attribute, _SUFFIXES.get(kind, ANY_SUFFIXES)) for kind, attribute in DEFINITION_DIRS.items()
}
logger = logging.getLogger(__name__)
_UNPACKING = threading.RLock()  # a restored file is parsed once, whichever thread reads it first
# A load with at least this many rules' matchers to compile compiles them in the background (when
# the loader has a background compiler): below it, compiling first costs less than ~0.1 s.
BACKGROUND_FROM_RULES = 2_000
COLLECT_FROM = 0.25  # the share of the files replaced since the last full collection that starts one


@define(eq=False)
class SourceFile:
    """One definition file as last read."""

    path: Path
    relpath: str  # relative to the workspace root, with forward slashes
    kind: str
    _document: ParsedDocument | None  # None: restored from the compile cache, parsed on first read
    stamp: tuple[int, int]  # (mtime_ns, size): the file version
    problems: list[Problem] = field(factory=list)
    dialect: str | None = None  # context-rule files: "seed-004" | "seed-003"
    rules: list[NormalisedRule] = field(factory=list)  # context-rule files: normalised rules
    _engine: RuleEngine | None = None  # rule-engine files, structured
    _compiled: CompiledEngine | None = None
    _definition: MemoryDefinition | IngestionPipeline | None = None  # made once per file version
    # per-rule work shared by successive versions of one document: the editor hands the previous
    # version's memo to the next version (see workspace/memo.py)
    memo: SourceMemo = field(factory=SourceMemo, repr=False)
    # a file whose engine came from the compile cache: its bytes and limits, read on first need
    _unread: tuple[bytes, Limits] | None = field(default=None, repr=False)

    @property
    def document(self) -> ParsedDocument:
        if self._document is None:
            self._unpack()
        return self._document  # type: ignore[return-value]

    @property
    def engine(self) -> RuleEngine | None:
        if self._unread is not None:
            self._unpack()
        return self._engine

    @engine.setter
    def engine(self, engine: RuleEngine | None) -> None:
        self._engine = engine

    def _unpack(self) -> None:
        """Parse and prepare a file restored from the compile cache, as `_read` would have (it
        was clean when its entry was written: no problems come of it)."""
        with _UNPACKING:
            if self._unread is None:
                return
            raw, limits = self._unread
            self._document = parse_document(raw.decode("utf-8", errors="replace"), self.path.name)
            prepare_source(self, limits)
            self._unread = None

    @property
    def value(self) -> Any:
        return self.document.value

    @property
    def compiled(self) -> CompiledEngine | None:
        """The engine compiled on first use: the editor re-reads a file on every keystroke and
        needs only its structure, so compiling (~1 s for 5,000 rules) waits until rules run."""
        if self._compiled is None and self.engine is not None:
            self._compiled = compile_engine(self.engine)
        return self._compiled

    def definition(self) -> MemoryDefinition | IngestionPipeline | None:
        """A persistent-memory file as its (normalised) definition, an ingestion file as its
        pipeline; None for other kinds and for a value that is not an object."""
        if self._definition is None and isinstance(self.value, dict):
            if self.kind == "persistent-memory":
                self._definition = structure(normalise_memory(self.value, self.path.stem), MemoryDefinition)
            elif self.kind == "ingestion-pipeline":
                self._definition = structure(self.value, IngestionPipeline)
        return self._definition

    def locate(self, problem: Problem) -> Problem:
        """Fill the problem's file and 1-based line/column from its JSON pointer."""
        problem.file = self.relpath
        if problem.line is None:
            part = "key" if problem.data.get("on") == "key" else "value"
            span = self.document.span(problem.path, part) or (0, 0)
            problem.line, problem.column = self.document.lines.line_col(span[0])
            problem.end_line, problem.end_column = self.document.lines.line_col(span[1])
        return problem


@define(eq=False)
class Workspace:
    root: Path
    layout: WorkspaceLayout
    settings: Settings
    files: dict[str, SourceFile]
    engines: Mapping[str, RuleEngine]
    engine_sources: dict[str, SourceFile]  # engine id -> file (context-rules: the first rule file)
    memories: dict[str, MemoryDefinition]  # id -> canonical definition (shorthand normalised)
    memory_sources: dict[str, SourceFile]
    ingestion: dict[str, IngestionPipeline]
    graph_views: dict[str, dict[str, Any]]
    rule_set: RuleSet
    problems: list[Problem]

    def files_of(self, kind: str) -> list[SourceFile]:
        return [f for f in self.files.values() if f.kind == kind]


class EngineMap(Mapping[str, RuleEngine]):
    """Engine id -> structured engine, read from the compiled engines: an engine restored from the
    compile cache is structured only when something reads it here."""

    def __init__(self, compiled: dict[str, CompiledEngine]) -> None:
        self._compiled = compiled

    def __getitem__(self, engine_id: str) -> RuleEngine:
        return self._compiled[engine_id].engine

    def __iter__(self) -> Iterator[str]:
        return iter(self._compiled)

    def __len__(self) -> int:
        return len(self._compiled)

    def __contains__(self, engine_id: object) -> bool:
        return engine_id in self._compiled


def _structured(source: SourceFile) -> RuleEngine:
    """A restored file's structured engine (it was clean when its entry was written)."""
    engine = source.engine
    if engine is None:
        raise RuntimeError(f"{source.relpath}: the rule engine restored from the compile cache no longer reads")
    return engine


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def stamp_or_none(path: Path) -> tuple[int, int] | None:
    """(mtime_ns, size), or None when there is nothing at `path`."""
    try:
        return _stamp(path)
    except OSError:
        return None


def _read(path: Path, relpath: str, kind: str, raw: bytes | None = None) -> SourceFile:
    raw = path.read_bytes() if raw is None else raw
    text = raw.decode("utf-8", errors="replace")
    document = parse_document(text, path.name)
    source = SourceFile(path, relpath, kind, document, _stamp(path))
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        source.problems.append(Problem("the file is not valid UTF-8", "encoding", path=""))
    for issue in document.syntax_errors:
        line, column = document.lines.line_col(issue.start)
        end_line, end_column = document.lines.line_col(issue.end)
        source.problems.append(Problem(issue.message, "syntax", path="", line=line, column=column,
                                       end_line=end_line, end_column=end_column))
    return source


def prepare_source(source: SourceFile, limits: Limits = DEFAULT_LIMITS) -> None:
    """Kind-specific work done once per file version: dialect normalising, engine structuring."""
    value = source.value
    if source.document.syntax_errors or value is None:
        return
    rules = value.get("rules") if isinstance(value, dict) else value if isinstance(value, list) else None
    if source.kind in ("context-rules", "rule-engine") and isinstance(rules, list) \
            and len(rules) > limits.rules_per_engine:
        source.problems.append(Problem(f"the file has {len(rules)} rules; at most {limits.rules_per_engine} "
                                       "(limits.rules_per_engine): skipped", "limits", path=""))
        return
    if source.kind == "context-rules":
        source.dialect, source.rules, problems = normalise_file(value, source.path.stem, source.path.suffix)
        source.problems.extend(problems)
    elif source.kind == "rule-engine":
        source.engine = _structure_engine(value, source)


def _oversized(path: Path, relpath: str, kind: str, stamp: tuple[int, int], limit: int) -> SourceFile:
    """A file too large to read: reported, never parsed."""
    message = too_large("the file", stamp[1], limit, "definition_file_bytes") + ": skipped"
    return SourceFile(path, relpath, kind, parse_document("", path.name), stamp, [Problem(message, "limits", path="")])


def _structure_engine(value: Any, source: SourceFile) -> RuleEngine | None:
    if not isinstance(value, dict):
        source.problems.append(Problem("a rule engine must be a JSON object", "schema", path=""))
        return None
    try:
        engine = _structure_rules(value, source.memo) if isinstance(value.get("rules"), list) \
            else structure(value, RuleEngine)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        message = "; ".join(cattrs.transform_error(exc)) if isinstance(exc, cattrs.BaseValidationError) \
            else str(exc)
        source.problems.append(Problem(f"cannot read the rule engine: {message}", "schema", path=""))
        return None
    if not engine.id:
        engine.id = source.path.stem
    return engine


def _structure_rules(value: dict[str, Any], memo: SourceMemo) -> RuleEngine:
    """`structure(value, RuleEngine)`, structuring only the rules the memo has not seen: one call
    with those rules and every other member (which alone can fail, with the same message)."""
    made: list[RuleEngine] = []  # the engine compute() structured (it runs exactly once)

    def compute(misses: list[Any]) -> list[Rule]:
        made.append(structure({**value, "rules": misses}, RuleEngine))
        return made[0].rules

    rules = memo.rules.reuse(value["rules"], compute)
    made[0].rules = rules
    return made[0]


class WorkspaceLoader:
    """Loads a workspace, reusing what it parsed and compiled for files that did not change."""

    def __init__(self, root: Path | str, cache: CompileCache | None | bool = True, background: bool = False,
                 background_from: int = BACKGROUND_FROM_RULES) -> None:
        """`cache`: True for the compile cache the environment names (rules/cache.py), False for
        none, or that cache. `background` (a long-lived loader: the sidecar's): a load with at
        least `background_from` rules to compile answers through interpreted matchers while a
        thread compiles them (rules/background.py); else `load()` compiles before it returns."""
        self.root = Path(root).resolve()
        self._store = CompileCache.from_environment() if cache is True else cache or None
        self.compiler = BackgroundCompiler() if background else None
        # first traces with many programs to build: answered from the plain path meanwhile
        self.traces = TraceBuilder(self.compiler, background_from) if self.compiler is not None else None
        self._background_from = background_from
        self._pending: list[tuple[SourceFile, str | None]] = []  # (file, cache key) to compile by the next load
        self._leaves: LeafMemo = {}  # the conditions' leaves this load made (rules/compile.py), shared
        self._kept: list[KeptTrace] = []  # where this load's engines keep their trace programs
        self.layout = WorkspaceLayout(self.root)
        self._cache: dict[str, SourceFile] = {}
        self._replaced = 0.0  # the share of the files replaced since the last full collection
        self._context_rules: tuple[tuple, CompiledEngine, RuleEngine] | None = None
        self._last: tuple[tuple[int, int] | None, Workspace] | None = None  # (settings stamp, workspace)
        self._settings: tuple[tuple[int, int] | None, Settings, list[Problem]] | None = None
        self._watch: ChangeWatch | None = None  # made by the second load: a one-shot loader needs none
        self._links = False  # the last scan met a symbolic link: a watch cannot vouch for its target

    def discover(self) -> list[tuple[Path, str]]:
        return [(Path(path), kind) for path, kind, _, _ in self._scan()]

    def _scan(self) -> list[tuple[str, str, str, tuple[int, int] | None]]:
        """(path, kind, relative path, stamp) of every definition file: one `scandir` per folder and
        one `stat` per file (this runs on every method call)."""
        found = []
        for kind, (attribute, suffixes) in KINDS.items():
            directory: Path = getattr(self.layout, attribute)
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:  # absent (or not a folder)
                continue
            prefix = directory.relative_to(self.root).as_posix() + "/"
            if directory.is_symlink():
                self._links = True
            for entry in entries:
                if entry.name.startswith(".") or os.path.splitext(entry.name)[1] not in suffixes:
                    continue
                try:
                    if not entry.is_file():
                        continue
                    if entry.is_symlink():
                        self._links = True
                    st = entry.stat()
                    stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
                except OSError:
                    stamp = None
                found.append((entry.path, kind, prefix + entry.name, stamp))
        return found

    def _source(self, where: Path | str, kind: str, limits: Limits, relpath: str | None = None,
                stamp: tuple[int, int] | None = None) -> SourceFile:
        if relpath is not None and stamp is not None:  # the common case: unchanged, no Path made
            known = self._cache.get(relpath)
            if known is not None and known.stamp == stamp:
                return known
        path = Path(where)
        relpath = path.relative_to(self.root).as_posix() if relpath is None else relpath
        cached = self._cache.get(relpath)
        try:
            stamp = _stamp(path) if stamp is None else stamp
            if cached is not None and cached.stamp == stamp:
                return cached
            if stamp[1] > limits.definition_file_bytes:
                return _oversized(path, relpath, kind, stamp, limits.definition_file_bytes)
            if kind == "rule-engine":
                return self._engine_file(self._store, path, relpath, limits)
            source = _read(path, relpath, kind)
        except OSError as exc:
            document = parse_document("", path.name)
            source = SourceFile(path, relpath, kind, document, (0, 0),
                                [Problem(f"cannot read the file: {exc.strerror}", "io", path="")])
            return source
        prepare_source(source, limits)
        return source

    def _engine_file(self, store: CompileCache | None, path: Path, relpath: str, limits: Limits) -> SourceFile:
        """A rule-engine file through the compile cache: restored when an entry for its bytes
        exists (then parsed only when something reads it), else read, its conditions compiled and
        its matcher left to `_compile_pending` (which stores the entry of a clean file)."""
        raw = path.read_bytes()
        key = store.key(raw, path.stem) if store is not None else None
        payload = store.get(key) if store is not None and key is not None else None
        kept = KeptTrace(store, key) if store is not None and key is not None else None  # its trace program's
        self._kept += [kept] if kept is not None else []
        if payload is not None:
            source = SourceFile(path, relpath, "rule-engine", None, _stamp(path), unread=(raw, limits))
            try:
                compiled: CompiledEngine | None = restore_engine(payload, partial(_structured, source))
            except Exception as exc:  # an entry that is not one: compiled again below, and replaced
                logger.info("compile cache: entry %s for %s unusable (%s)", key, relpath, exc)
                compiled = None
            if compiled is not None and len(compiled.rules) <= limits.rules_per_engine:
                compiled.kept_trace = kept
                source._compiled = compiled
                return source
        source = _read(path, relpath, "rule-engine", raw)
        prepare_source(source, limits)
        if source.engine is not None:
            source._compiled = provisional_engine(source.engine, self._leaves)
            self._pending.append((source, None if source.problems else key))  # only a clean file is kept
            if not source.problems:
                source._compiled.kept_trace = kept
        return source

    def _compile_pending(self) -> None:
        """Compile the matchers of the files this load read: here, or (many rules, a background
        compiler) in the background, each job skipped when its file version is no longer loaded."""
        pending, self._pending = self._pending, []
        rules = sum(len(source.compiled.rules) for source, _ in pending if source.compiled is not None)
        later = self.compiler is not None and rules >= self._background_from
        jobs = [partial(self._compile, source, key, self.compiler is not None, later) for source, key in pending]
        if self.compiler is None or not later:
            for job in jobs:
                job()
        else:
            # in an order of its own: a swarm's sidecars starting at once on a cold cache then
            # compile different engines first, and each takes the others' entries (`_adopted`)
            random.shuffle(jobs)
            self.compiler.submit(jobs)

    def _defer_trace_writes(self, files: dict[str, SourceFile]) -> None:
        """Many rules (as for compiling): trace entries written after the answer (~27 MB on 17,400
        rules); few: at once, so a server killed right after an answer still leaves them."""
        kept, self._kept = self._kept, []
        if self.compiler is None or not kept:
            return
        rules = sum(len(f._compiled.rules) for f in files.values() if f._compiled is not None)
        if rules >= self._background_from:
            for where in kept:
                where.writer = self.compiler.write

    def _compile(self, source: SourceFile, key: str | None, only_current: bool, later: bool = False) -> None:
        """Compile the matcher of `source`'s engine (`only_current`: unless a newer version of the
        file is loaded since; `later`: in the background, where another process may have kept it
        since the file was read)."""
        compiled = source._compiled
        if compiled is None or compiled.generated:
            return
        if only_current and self._cache.get(source.relpath) is not source:
            return  # edited or removed since: the newer version has its own job
        if later and self._adopted(compiled, key):
            return
        emitter = compile_matcher(compiled)
        if key is not None and self._store is not None:
            entry = entry_of(compiled, emitter)
            if entry is not None:
                self._store.put(key, entry)

    def _adopted(self, compiled: CompiledEngine, key: str | None) -> bool:
        """Whether another process kept this file version's matcher since the file was read (a
        swarm's sidecars compiling at once): then that one is put in place, not compiled again."""
        payload = self._store.get(key) if key is not None and self._store is not None else None
        if payload is None:
            return False
        try:
            matcher = restore_matcher(payload, compiled)
        except Exception as exc:  # an entry that is not one: compiled here, and replaced
            logger.info("compile cache: entry %s for engine %r unusable (%s)", key, compiled.id, exc)
            return False
        if matcher is None:
            return False
        compiled.matcher, compiled.generated = matcher, True
        return True

    def _current_settings(self) -> tuple[tuple[int, int] | None, Settings, list[Problem]]:
        """The settings file, read again only when it changed; a change of limits re-reads every file."""
        stamp = stamp_or_none(self.layout.settings_path)
        if self._settings is None or self._settings[0] != stamp:
            settings, problems = load_settings(self.layout.settings_path)
            if self._settings is not None and self._settings[1].limits != settings.limits:
                self._cache = {}
            self._settings = (stamp, settings, problems)
        return self._settings

    def _watching(self) -> ChangeWatch | None:
        """The watch, made on the second load (a loader asked again is a long-lived one)."""
        if self._watch is None and self._last is not None:
            folders = [getattr(self.layout, attribute) for attribute, _ in KINDS.values()]
            self._watch = ChangeWatch(self.root, folders)
        return self._watch

    def load(self) -> Workspace:
        watch = self._watching()
        if watch is not None and self._last is not None and watch.unchanged():
            return self._last[1]  # nothing under the watched folders changed since the last scan
        if self._last is None:  # the first load makes objects that live as long as the server does
            with paused():
                return self._load(watch)
        return self._load(watch)

    def _load(self, watch: ChangeWatch | None) -> Workspace:
        if watch is not None:
            watch.arm()  # before the scan: a change made while scanning is seen by the next load
        self._links = False
        settings_stamp, settings, setting_problems = self._current_settings()
        files = {}
        for path, kind, relpath, stamp in self._scan():
            source = self._source(path, kind, settings.limits, relpath, stamp)
            files[source.relpath] = source
        if watch is not None and self._links:
            watch.armed = False
        self._leaves = {}
        before = self._cache
        changed = files.keys() != before.keys() or any(before[k] is not v for k, v in files.items())
        self._cache = files
        self._compile_pending()
        self._defer_trace_writes(files)
        if not changed and self._last is not None and self._last[0] == settings_stamp:
            return self._last[1]  # the same object: callers may cache what they derive from it
        workspace = self._assemble(files, settings, setting_problems)
        previous = self._last[1].rule_set if self._last is not None else None
        self._last = (settings_stamp, workspace)
        self._fuse_later(workspace, previous)
        if changed:
            pin_compiled(collect=self._collect(before, files))
        return workspace

    def _collect(self, before: dict[str, SourceFile], files: dict[str, SourceFile]) -> bool:
        """Whether this reload runs a full collection: once the versions replaced since the last
        one (files edited or removed) add up to `COLLECT_FROM` of the workspace's files. Their
        compiled engines are cyclic garbage (trace programs, predicates made on first call) that
        only a full collection frees, and it walks every object the workspace holds (~0.3 s on
        17,400 rules): one edit of one file waits for it only now and then, and memory stays
        within that share of the compiled workspace."""
        self._replaced += sum(files.get(k) is not v for k, v in before.items()) / max(len(before), 1)
        if self._replaced < COLLECT_FROM:
            return False
        self._replaced = 0.0
        return True

    def _fuse_later(self, workspace: Workspace, previous: RuleSet | None) -> None:
        """A long-lived loader fuses the matchers of the workspace's enabled engines (rules/fused.py):
        with few rules at once, else on the background compiler after the matchers compiling there
        (a job `close` keeps, so that its entries are written and a later start reads them)."""
        rule_set = workspace.rule_set
        enabled = [engine for engine in rule_set.engines if engine.enabled]
        if self.compiler is None or len(enabled) < 2:
            return
        if sum(len(engine.rules) for engine in enabled) < self._background_from:
            rule_set.fuse(self._store, previous)
        else:
            self.compiler.submit([partial(self._fuse, workspace, previous)], keep=True)

    def _fuse(self, workspace: Workspace, previous: RuleSet | None) -> None:
        """Fuse the workspace's matchers, unless a newer version is loaded since."""
        if self._last is not None and self._last[1] is workspace:
            workspace.rule_set.fuse(self._store, previous)

    def _assemble(self, files: dict[str, SourceFile], settings: Settings,
                  setting_problems: list[Problem]) -> Workspace:
        engines: dict[str, CompiledEngine] = {}
        engine_sources: dict[str, SourceFile] = {}
        compiled: list[CompiledEngine] = []
        for source in files.values():
            if source.kind == "rule-engine" and source.compiled is not None:
                engine_id = source.compiled.id
                if engine_id in engines:
                    continue  # a duplicate id: the lint reports both places; the first file wins
                engines[engine_id] = source.compiled
                engine_sources[engine_id] = source
                compiled.append(source.compiled)
        rule_files = [f for f in files.values() if f.kind == "context-rules" and f.rules]
        if rule_files:
            engine, compiled_rules = self._context_rules_engine(rule_files)
            engines[engine.id or ""] = compiled_rules
            engine_sources[engine.id or ""] = rule_files[0]
            compiled.append(compiled_rules)
        memories, memory_sources = collect_memories(files)
        problems = [f.locate(p) for f in files.values() for p in f.problems]
        if setting_problems and self.layout.settings_path.is_file():
            settings_file = _read(self.layout.settings_path, self.layout.settings_path.relative_to(
                self.root).as_posix(), "settings")
            problems += [settings_file.locate(p) for p in setting_problems]
        return Workspace(
            root=self.root, layout=self.layout, settings=settings, files=files, engines=EngineMap(engines),
            engine_sources=engine_sources, memories=memories, memory_sources=memory_sources,
            ingestion=collect_pipelines(files), graph_views=_by_id(files, "graph-view"),
            rule_set=RuleSet(compiled), problems=problems,
        )

    def settled(self) -> bool:
        """True when a load now would return the last workspace without reading or compiling
        anything: the watch vouches that nothing changed and no engine is compiling in the
        background. (A change it finds is not lost: the next load scans.)"""
        watch = self._watch
        if self._last is None or watch is None or (self.compiler is not None and self.compiler.busy):
            return False
        return watch.unchanged()

    def foreground(self) -> AbstractContextManager[None]:
        """Around a request: compiling in the background waits for it (rules/background.py)."""
        return self.compiler.foreground() if self.compiler is not None else nullcontext()

    def close(self) -> None:
        """Stop compiling in the background; release the watch (an inotify instance: the kernel
        allows a user a limited number)."""
        if self.compiler is not None:
            self.compiler.close()
        if self._watch is not None:
            self._watch.close()

    def _context_rules_engine(self, rule_files: list[SourceFile]) -> tuple[RuleEngine, CompiledEngine]:
        key = tuple((f.relpath, f.stamp) for f in rule_files)
        if self._context_rules is not None and self._context_rules[0] == key:
            return self._context_rules[2], self._context_rules[1]
        raw = context_rules_engine([r.rule for f in rule_files for r in f.rules])
        engine = structure(raw, RuleEngine)
        compiled = compile_engine(engine)
        self._context_rules = (key, compiled, engine)
        return engine, compiled


def collect_memories(files: dict[str, SourceFile]) -> tuple[dict[str, MemoryDefinition], dict[str, SourceFile]]:
    memories: dict[str, MemoryDefinition] = {}
    sources: dict[str, SourceFile] = {}
    for source in files.values():
        definition = source.definition() if source.kind == "persistent-memory" else None
        if not isinstance(definition, MemoryDefinition):
            continue
        memory_id = definition.id
        if isinstance(memory_id, str) and memory_id not in memories:
            memories[memory_id] = definition
            sources[memory_id] = source
    return memories, sources


def collect_pipelines(files: dict[str, SourceFile]) -> dict[str, IngestionPipeline]:
    """Ingestion pipelines by id (the file name when the file has none); the first file wins."""
    out: dict[str, IngestionPipeline] = {}
    for source in files.values():
        pipeline = source.definition() if source.kind == "ingestion-pipeline" else None
        if isinstance(pipeline, IngestionPipeline):
            out.setdefault(pipeline.id or source.path.stem, pipeline)
    return out


def _by_id(files: dict[str, SourceFile], kind: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for source in files.values():
        if source.kind == kind and isinstance(source.value, dict):
            out.setdefault(str(source.value.get("id") or source.path.stem), source.value)
    return out


def failed_to_load(source: SourceFile) -> str | None:
    """`<path> failed to load: <first problem>` when the file gave the workspace nothing (it was
    skipped), else None. A file that loaded with problems is the linter's business, not this."""
    if source.kind == "rule-engine":
        skipped = source.compiled is None
    elif source.kind == "context-rules":
        skipped = not source.rules and any(p.is_error for p in source.problems)
    else:
        skipped = not isinstance(source.value, dict)
    if not skipped:
        return None
    first = next((p for p in source.problems if p.is_error), None)
    where = f" (line {first.line})" if first is not None and first.line else ""
    reason = f"{first.message}{where}" if first is not None else "it holds no definition"
    return f"{source.relpath} failed to load: {reason}"


def load_warnings(workspace: Workspace, engine_ids: list[str] | None, references: Iterable[str] = ()) -> list[str]:
    """A warning per skipped definition file a request needed: every rule file of the engines it
    runs (all enabled ones, or those named: a broken file's id is its file name), and the
    persistent-memory files named as its references."""
    wanted = set(references)
    out = []
    for source in workspace.files.values():
        if source.kind in ("rule-engine", "context-rules"):
            engine_id = source.path.stem if source.kind == "rule-engine" else CONTEXT_RULES_ID
            needed = engine_ids is None or engine_id in engine_ids
        else:
            needed = source.kind == "persistent-memory" and source.path.stem in wanted
        message = failed_to_load(source) if needed else None
        if message:
            out.append(message)
    return out


def load_workspace(root: Path | str) -> Workspace:
    return WorkspaceLoader(root).load()


__all__ = ["KINDS", "SourceFile", "Workspace", "WorkspaceLoader", "failed_to_load", "load_warnings", "load_workspace",
           "stamp_or_none"]
