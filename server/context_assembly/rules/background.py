"""Compiling rule engines' matchers off the request path: one thread, while there is work.

A start without compile-cache entries (a new workspace, a cleared cache, a fresh machine) would
otherwise pay, before its first answer, for writing and compiling every engine's generated
matcher: ~85% of compiling, 1.5 s on 17,400 rules. A long-lived loader instead gives each engine
an interpreted matcher (engine.py `provisional_engine`: the same answers, slower per request) and
hands the compiling here: the thread compiles engine after engine, puts each generated matcher in
place (one attribute store) and writes its cache entry, then ends. Each job belongs to one engine
object, i.e. one file version: a file edited meanwhile is a new object with its own job, so an
answer never comes from an older version. `close` drops what has not started and waits for the
job running (one engine); the thread is a daemon, so it never holds up an exiting process.
Writes handed over with `write` (trace_cache.py: a first trace's program entries, ~27 MB on a
large workspace, written after the answer rather than before it) are kept by `close`: the thread
finishes them, without waiting for requests, before `close` returns.
While a request runs (`foreground`), the thread waits before its next engine, for at most
`YIELD_S`: requests keep most of the interpreter (compiling holds it), and a stream of requests
cannot stop the compiling.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)

Job = Callable[[], None]
YIELD_S = 0.05  # how long the next engine waits for the requests running to end


class BackgroundCompiler:
    """Runs jobs in order on one daemon thread, started when there is work and ended when there is none."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._quiet = threading.Condition(self._lock)
        self._foreground = 0  # requests running
        self._jobs: deque[tuple[Job, bool]] = deque()  # (job, kept by `close`)
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, jobs: Iterable[Job], keep: bool = False) -> None:
        """Run `jobs` in order on the thread. `keep`: `close` still runs them (work a later start
        would otherwise redo on its request path: deferred_trace.py), else it drops them."""
        with self._lock:
            if not self._closed:
                self._queue((job, keep) for job in jobs)

    def write(self, job: Job) -> None:
        """Run `job` (a cache write) off the request path, after the jobs queued before it; a
        closed compiler runs it here."""
        with self._lock:
            if not self._closed:
                self._queue([(job, True)])
                return
        _run_one(job)

    def _queue(self, items: Iterable[tuple[Job, bool]]) -> None:  # (under the lock)
        self._jobs.extend(items)
        if self._thread is None and self._jobs:
            self._thread = threading.Thread(target=self._run, name="rule-compiler", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._quiet.wait_for(lambda: not self._foreground or self._closed, YIELD_S)
                if not self._jobs:  # (`close` leaves only the kept ones)
                    self._thread = None
                    self._done.notify_all()
                    break
                job, _ = self._jobs.popleft()
            _run_one(job)
        # what the jobs made lives as long as its engines: out of the cyclic collector's way,
        # as the loader's `pin_compiled` does for what it compiles itself
        gc.freeze()

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """A request runs: the next engine waits (for a while) until none does."""
        with self._lock:
            self._foreground += 1
        try:
            yield
        finally:
            with self._lock:
                self._foreground -= 1
                if not self._foreground:
                    self._quiet.notify_all()

    @property
    def busy(self) -> bool:
        """Jobs are queued or running."""
        with self._lock:
            return self._thread is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every job submitted so far has run (or been dropped by `close`); False on timeout."""
        with self._done:
            return self._done.wait_for(lambda: self._thread is None, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Drop the queued compile jobs, and wait (at most `timeout`) for the running one and the
        queued writes and kept jobs; later submits are ignored, later writes run in the caller."""
        with self._lock:
            self._closed = True
            self._jobs = deque(item for item in self._jobs if item[1])
            self._quiet.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


def _run_one(job: Job) -> None:
    try:
        job()
    except Exception:  # a compile: the engine keeps its interpreted matcher (slower, never wrong);
        logger.exception("a job in the background failed")  # a write: the cache just misses
