"""Write generations pushed by the database: one LISTEN connection per sidecar.

Every write counts a generation in `ca_generations` and, once committed, sends `NOTIFY` on its
project's channel with the new count (`stores/postgres/database.py`). A `GenerationListener` holds
one connection that listens on the project's channel and the swarm namespace's, keeps the counts
in memory and lets the cache use them without asking the database.

It says it can be trusted only while that is proven: every second it sends a ping on a channel
of its own and waits for the echo. The database delivers notifications in commit order, so an
echoed ping proves every write committed before the ping was sent has been applied here. The
counts are trusted for `TRUST_S` after the last echoed ping was sent; otherwise (connecting,
reconnecting after the connection was lost or killed, a proxy that drops LISTEN, a thread starved
of time) the caller reads the database before each use, as without a listener. The counts are
also re-read every `RESYNC_S`, which bounds the effect of a notification a writer could not send
(a crash between its commit and its NOTIFY).

A write by another sidecar reaches this one when its notification arrives (normally well under a
millisecond after the commit on one network, see bench/stores): a client that needs a write by
one sidecar to be seen by the very next assembly on another, with no window at all, sets
`stores.invalidation` to `"read"`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import psycopg
from psycopg import sql

logger = logging.getLogger(__name__)

PING_S = 1.0  # how often the listener proves its channel works
TRUST_S = 3.0  # how long an echoed ping vouches for the counts
RESYNC_S = 5.0  # how often the counts are re-read from the database anyway
WAIT_S = 0.25  # the longest the thread waits on the socket before it looks at its stop flag
RETRY_S = (0.1, 0.2, 0.5, 1.0, 2.0)  # reconnection back-off


def channel(project: str) -> str:
    """The NOTIFY channel of a project key (a channel is an identifier of at most 63 bytes)."""
    return "ca_gen_" + hashlib.sha256(project.encode()).hexdigest()[:32]


def announcement(project: str, store: str, value: int) -> str:
    """The payload a write sends: which count it brought to which value."""
    return orjson.dumps([project, store, value]).decode()


class GenerationListener:
    def __init__(self, dsn: str, projects: Iterable[str], *, connect_kwargs: dict[str, Any] | None = None) -> None:
        self.dsn = dsn
        self.projects = tuple(dict.fromkeys(projects))
        self._channels = {channel(p) for p in self.projects}
        self._ping_channel = "ca_ping_" + uuid.uuid4().hex
        self._connect_kwargs = connect_kwargs or {}
        self._known: dict[tuple[str, str], int] = {}
        self._lock = threading.RLock()  # re-entered by predicates of wait_for that read value()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._vouched_at: float | None = None  # when the last echoed ping was sent (monotonic)
        self._ping: tuple[str, float, bool] | None = None  # the last ping: (token, sent at, echoed)
        self.backend_pid: int | None = None  # the listening connection's server process (tests stop it)
        self.connections = 0  # how many times it has (re)connected
        self.changed = threading.Condition(self._lock)  # notified on every state change (tests wait on it)

    # -- what the cache asks ----------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="generation-listener", daemon=True)
                self._thread.start()

    @property
    def vouched_at(self) -> float | None:
        """When (monotonic) the last ping that came back was sent: the counts are current as of then."""
        return self._vouched_at

    def trusted(self) -> bool:
        vouched = self._vouched_at
        return vouched is not None and time.monotonic() - vouched < TRUST_S

    def value(self, store: str) -> int | None:
        """The store's count summed over the listened projects, or None when it cannot be trusted."""
        if not self.trusted():
            return None
        with self._lock:
            return sum(self._known.get((project, store), 0) for project in self.projects)

    def merge(self, counts: Iterable[tuple[str, str, int]]) -> None:
        """Counts learnt elsewhere (a write of this process, a read from the database): keep the larger."""
        with self._lock:
            for project, store, value in counts:
                if value > self._known.get((project, store), -1):
                    self._known[(project, store)] = int(value)
            self.changed.notify_all()

    def stop(self, wait_s: float = 2.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)

    def wait_for(self, predicate: Callable[[GenerationListener], bool], timeout_s: float) -> bool:
        """Block until `predicate(self)` holds (re-checked on every state change), at most `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, WAIT_S))
        return True

    # -- the listening thread ---------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._listen()
                failures = 0
            except psycopg.Error as exc:
                logger.info("generation listener lost its connection (%s); reading generations from the database "
                            "until it is back", str(exc).strip().splitlines()[0] if str(exc).strip() else exc)
                failures += 1
            except Exception:  # a bug must not end the listener for good: the cache reads meanwhile
                logger.exception("generation listener failed; reading generations from the database until it "
                                 "is back")
                failures += 1
            finally:
                self._distrust()
            self._stop.wait(RETRY_S[min(failures, len(RETRY_S)) - 1] if failures else 0)

    def _listen(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True, **self._connect_kwargs) as conn:
            for name in (*sorted(self._channels), self._ping_channel):
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
            with self._lock:
                self.backend_pid = conn.info.backend_pid
                self.connections += 1
            self._resync(conn)  # after LISTEN: a write committed since is both read here and announced
            resynced = time.monotonic()
            self._send_ping(conn)
            while not self._stop.is_set():
                for note in conn.notifies(timeout=WAIT_S):
                    self._receive(note.channel, note.payload)
                now = time.monotonic()
                if now - resynced >= RESYNC_S:
                    self._resync(conn)
                    resynced = now
                ping = self._ping
                if ping is not None and not ping[2] and now - ping[1] > TRUST_S:
                    raise psycopg.OperationalError(f"no echo of the listener's ping within {TRUST_S:g} s")
                if ping is None or (ping[2] and now - ping[1] >= PING_S):
                    self._send_ping(conn)

    def _resync(self, conn: psycopg.Connection[Any]) -> None:
        rows = conn.execute("SELECT project, store, value FROM ca_generations WHERE project = ANY(%s)",
                            (list(self.projects),)).fetchall()
        self.merge((str(p), str(s), int(v)) for p, s, v in rows)

    def _send_ping(self, conn: psycopg.Connection[Any]) -> None:
        token = uuid.uuid4().hex
        self._ping = (token, time.monotonic(), False)
        conn.execute("SELECT pg_notify(%s, %s)", (self._ping_channel, token))

    def _receive(self, name: str, payload: str) -> None:
        if name == self._ping_channel:
            ping = self._ping
            if ping is not None and payload == ping[0]:
                with self._lock:
                    self._ping = (ping[0], ping[1], True)
                    self._vouched_at = ping[1]
                    self.changed.notify_all()
            return
        try:
            project, store, value = orjson.loads(payload)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            logger.warning("ignored a malformed generation notification on %s: %.80r", name, payload)
            return
        if project in self.projects and isinstance(store, str) and isinstance(value, int):
            self.merge([(project, store, value)])

    def _distrust(self) -> None:
        with self._lock:
            self._vouched_at = None
            self._ping = None
            self.backend_pid = None
            self.changed.notify_all()
