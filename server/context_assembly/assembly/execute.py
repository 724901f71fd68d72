"""Stage 3: run every resolved memory concurrently, each against its own deadline.

A pipeline that fails, times out or lacks its variables becomes a warning; the others still
assemble. Results are cached for a short TTL under a key that any relevant change alters (see
cache.py). Blocking store work runs on worker threads so the caller's event loop stays free.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextvars
import time
from collections.abc import Callable
from typing import Any

import orjson
from attrs import define, field

from ..errors import ContextAssemblyError
from ..model.converter import unstructure
from ..model.definitions import MemoryDefinition
from ..model.request import AssemblyRequest
from ..pipelines.context import Llm
from ..pipelines.items import NOT_READ, Item, Readable, may_read_item
from ..pipelines.runner import run_pipeline
from ..registry.steps import lookup_step
from .cache import ResultCache
from .direct import Miss, read_items
from .notes_read import RecordingStores, Stamp, ViewStamp, still_holds, views_hold
from .resolve import Reference

UNCACHED_STORES = {"file", "working"}  # not generation-tracked cheaply, or per turn by nature


@define
class Execution:
    reference: Reference
    status: str  # ok | cached | failed | timeout | skipped | missing | cancelled
    items: list[Item] = field(factory=list)
    duration_ms: float = 0.0
    error: str | None = None
    missing_variables: list[str] = field(factory=list)
    steps: list[dict[str, Any]] = field(factory=list)
    definition: MemoryDefinition | None = None
    variables_used: list[str] = field(factory=list)
    notes_read: tuple[Stamp, ...] = ()  # what a cached copy is checked against (notes_read.py)
    views_read: tuple[ViewStamp, ...] = ()  # the graph views it ran, likewise
    warnings: list[str] = field(factory=list)  # the steps' (a missing key or note, a fallback): the assembly's warnings


def _stores_read(steps: Any, found: set[str]) -> set[str] | None:
    """The store schemes a pipeline reads, or None when it cannot be cached."""
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        spec = lookup_step(step.get("type"))
        if spec is None:
            return None
        if spec.reads:
            if spec.reads in UNCACHED_STORES:
                return None
            found.add(spec.reads)
        for branch in ("then_steps", "else_steps"):
            if _stores_read(step.get(branch), found) is None:
                return None
    return found


def _lookup_key(lookup: dict[str, Any]) -> bytes | None:
    """The request's variables as sorted JSON, once per assembly: part of every pipeline's cache key.
    None (run uncached) for an integer past 64 bits: the step that reads it says what is wrong."""
    try:
        return orjson.dumps(lookup, option=orjson.OPT_SORT_KEYS, default=str)
    except orjson.JSONEncodeError:
        return None


def _key_stores(definition: MemoryDefinition) -> set[str] | None:
    """The store schemes whose write generations a cache key covers; None: no caching. Notes are
    not among them: a run records the notes it reads, and a hit holds while they do (notes_read.py)."""
    schemes = _stores_read(definition.steps, set())
    return None if schemes is None else schemes - {"markdown"}


# definition -> its JSON for cache keys; definitions are read-only once loaded, and the entry holds
# the definition itself, so an id is never reused while its entry lives
_FINGERPRINTS: dict[int, tuple[MemoryDefinition, bytes]] = {}
_MAX_FINGERPRINTS = 4096


def _fingerprint(definition: MemoryDefinition) -> bytes:
    """The definition as sorted JSON, made once per definition object (32 us -> a lookup)."""
    hit = _FINGERPRINTS.get(id(definition))
    if hit is not None and hit[0] is definition:
        return hit[1]
    value = orjson.dumps(unstructure(definition), option=orjson.OPT_SORT_KEYS, default=str)
    if len(_FINGERPRINTS) >= _MAX_FINGERPRINTS:
        _FINGERPRINTS.clear()
    _FINGERPRINTS[id(definition)] = (definition, value)
    return value


class Executor:
    def __init__(self, memory: Any, stores: Any, cache: ResultCache, workers: int = 8) -> None:
        self.memory = memory
        self.stores = stores
        self.cache = cache
        self.pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pipeline")

    def _cache_key(self, definition: MemoryDefinition, lookup_key: bytes | None,
                   generations: dict[str, int]) -> tuple | None:
        schemes = _key_stores(definition)
        if schemes is None or lookup_key is None:
            return None
        try:
            for scheme in schemes - generations.keys():  # normally filled once per assembly by run()
                generations[scheme] = self.memory.generation(scheme)
        except ContextAssemblyError:
            return None  # a store that cannot say its generation: run uncached (and fail there, clearly)
        try:
            fingerprint = _fingerprint(definition)
        except orjson.JSONEncodeError:  # an integer past 64 bits in a step: run uncached, the step says what is wrong
            return None
        return fingerprint, lookup_key, tuple((s, generations[s]) for s in sorted(schemes))

    def _cached(self, ref: Reference, definition: MemoryDefinition, key: tuple | None) -> Execution | None:
        """The cached run under `key`, if any and the notes it read are unchanged since."""
        hit = self.cache.get(key) if key is not None else None
        if hit is None:
            return None
        if still_holds(self.stores.notes, hit.notes_read) and (
                not hit.views_read or views_hold(self.stores.graph.layout, hit.views_read)):
            # the steps as they ran then, each marked: their timings are the cached run's, not this turn's
            steps = [{**step, "cached": True} for step in hit.steps]
            return Execution(ref, "cached", list(hit.items), 0.0, steps=steps, definition=definition,
                             variables_used=hit.variables_used, notes_read=hit.notes_read,
                             views_read=hit.views_read, warnings=list(hit.warnings))
        self.cache.discard(key)  # a note or view it read changed since
        return None

    def _run_definition(self, ref: Reference, definition: MemoryDefinition, request: AssemblyRequest,
                        lookup: dict[str, Any], deadline: float, cancelled: Callable[[], bool],
                        key: tuple | None, llm: Llm | None = None, readable: Readable | None = None) -> Execution:
        stores = RecordingStores(self.stores)
        run = run_pipeline(definition, request, stores, lookup=lookup, deadline=deadline, cancelled=cancelled,
                           llm=llm, readable=readable)
        steps = [s.to_dict() for s in run.steps]  # skipped, nested (depth, branch) and warned steps say so
        execution = Execution(ref, run.status, run.items, run.duration_ms, run.error, run.missing_variables,
                              steps, definition, run.variables_used, stores.stamps, stores.view_stamps,
                              list(run.warnings))
        if run.status == "ok" and key is not None and stores.exact and not run.passing:
            self.cache.put(key, execution)
        return execution

    def _run_uri(self, ref: Reference, query: str, min_score: float, readable: Readable | None = None) -> Execution:
        started = time.perf_counter()
        try:
            items = read_items(self.memory, ref.reference, query, min_score, readable)
            status, error = "ok", None
        except Miss as miss:
            items, status, error = [], "missing", str(miss)
        except Exception as exc:  # a refused URI, a store error: this reference only
            items, status, error = [], "failed", str(getattr(exc, "message", exc))
        warnings: list[str] = []
        if readable is not None:
            items = [i for i in items if may_read_item(readable, i.source, i.metadata)]
            if not items and not readable(ref.reference):
                # a URI the caller may not read says the same whether or not (and why not) it is there
                items, status, error = [], "ok", None
                warnings.append(NOT_READ)
        return Execution(ref, status, items, round((time.perf_counter() - started) * 1000, 3), error,
                         warnings=warnings)

    def run(self, references: list[Reference], memories: dict[str, MemoryDefinition], request: AssemblyRequest,
            lookup: dict[str, Any], timeout_s: float, cancelled: Callable[[], bool],
            done: Callable[[Execution], None], vector_min_score: float = 0.0,
            llm: Llm | None = None, readable: Readable | None = None) -> list[Execution]:
        """`llm`: the client's model, for steps that ask one (derive_query llm_rephrase). `readable`: a
        restricted caller's read patterns; its runs read and keep only what they cover, and are cached
        under them."""
        query = request.input.text if request.input and request.input.text else ""
        deadline = time.monotonic() + timeout_s
        generations = self._generations(references, memories)
        lookup_key = _lookup_key(lookup)
        pending: dict[futures.Future[Execution], Reference] = {}
        results: dict[int, Execution] = {}
        for index, ref in enumerate(references):
            # each task in a copy of this context: the caller's `limits.current()` holds on the pool's threads
            if ref.kind == "definition":
                definition = memories[ref.reference]
                key = self._cache_key(definition, lookup_key, generations)
                if key is not None:  # with a model a rephrasing step derives another query than without
                    key = _with_reader((*key, llm is not None), readable)
                # a hit is answered here: the hand-off to the pool and back costs more than the lookup
                hit = self._cached(ref, definition, key)
                if hit is not None:
                    results[index] = hit
                    continue
                task = self.pool.submit(contextvars.copy_context().run, self._run_definition, ref,
                                        definition, request, lookup, deadline, cancelled, key, llm, readable)
            elif ref.kind == "uri":
                task = self.pool.submit(contextvars.copy_context().run, self._run_uri, ref, query, vector_min_score,
                                        readable)
            else:
                results[index] = Execution(ref, "missing", error=ref.error)
                continue
            pending[task] = ref
        for execution in list(results.values()):  # the hits, after the misses have started
            done(execution)
        order = {id(ref): i for i, ref in enumerate(references)}
        # as each finishes (its pipelineComplete goes out at once), with a little grace past the
        # deadline: a pipeline notices the deadline between steps
        try:
            for task in futures.as_completed(pending, timeout=max(0.0, deadline - time.monotonic()) + 0.05):
                ref = pending.pop(task)
                results[order[id(ref)]] = execution = _outcome(task, ref)
                done(execution)
        except futures.TimeoutError:
            pass
        for task, ref in pending.items():
            task.cancel()
            results[order[id(ref)]] = execution = Execution(
                ref, "timeout", error=f"did not finish within {timeout_s * 1000:.0f} ms", duration_ms=timeout_s * 1000)
            done(execution)
        return [results[i] for i in sorted(results)]

    def _generations(self, references: list[Reference], memories: dict[str, MemoryDefinition]) -> dict[str, int]:
        """Each store's write generation, read once per assembly (not once per pipeline)."""
        schemes: set[str] = set()
        for ref in references:
            needs = _key_stores(memories[ref.reference]) if ref.kind == "definition" else None
            schemes |= needs or set()
        found: dict[str, int] = {}
        for scheme in sorted(schemes):
            try:
                found[scheme] = self.memory.generation(scheme)
            except ContextAssemblyError:
                continue  # unreachable: the pipelines reading it fail with the store's own error
        return found

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _with_reader(key: tuple, readable: Readable | None) -> tuple:
    """A run's cache key with the caller's read patterns (an unrestricted caller's key unchanged)."""
    return key if readable is None else (*key, "read", readable.patterns)


def _outcome(task: futures.Future[Execution], ref: Reference) -> Execution:
    try:
        return task.result()
    except Exception as exc:  # the runner never raises; this guards the guard
        return Execution(ref, "failed", error=f"{type(exc).__name__}: {exc}")
