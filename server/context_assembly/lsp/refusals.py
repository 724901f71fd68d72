"""How often a process logs access refusals: a flood of bad tokens (or of calls a token may not
make) must neither grow `log://access` without bound nor keep the workers writing it.

One token bucket per process (`LIMIT`, shared by every connection): a burst of `BURST` refusals
is logged, then `PER_S` a second. A refusal past that is counted, not logged; the next one logged
carries the count (`"suppressed": n` in its event, and in its warning), so a sustained flood still
shows in the log and in the server's output about once a second, with how many were left out, and
once it ends its last refusal is logged as soon as there is room, carrying the rest of the count.
What peers make the server say (a refused handshake, input that is no JSON-RPC, a connection
without a token) goes through a bucket of its own (`peer_warning`), so a web page or a flood cannot
fill the log either.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

BURST = 20  # refusals logged back to back: a misconfigured agent's retries are all seen
PER_S = 1.0  # then one a second: an event and a warning a second whatever the flood


Tail = Callable[[int], None]  # logs a left-out item after all, given how many before it were left out
Schedule = Callable[[float, Callable[[], None]], None]  # run the callable after so many seconds


def _timer(delay: float, then: Callable[[], None]) -> None:
    timer = threading.Timer(delay, then)
    timer.daemon = True  # never holds the process at exit
    timer.start()


class Bucket:
    """A token bucket, safe to share between threads (workers log refusals too).

    A flood's last items would wait, uncounted, for the next item after it (hours later, or never):
    an item left out may leave a `tail`, and once the bucket has room again the last tail left is
    logged, carrying how many before it were left out, unless an item logged meanwhile did that."""

    def __init__(self, burst: int = BURST, per_s: float = PER_S,
                 clock: Callable[[], float] = time.monotonic, schedule: Schedule = _timer) -> None:
        self.burst = burst
        self.per_s = per_s
        self.clock = clock
        self.schedule = schedule
        self._tokens = float(burst)
        self._at = clock()
        self._suppressed = 0
        self._tail: Tail | None = None
        self._scheduled = False
        self._lock = threading.Lock()

    def admit(self, tail: Tail | None = None) -> int | None:
        """None: over the limit, this item is only counted (`tail` logs it later if nothing else
        is logged first). Else it is logged, carrying how many were counted since the previous one."""
        with self._lock:
            self._refill()
            if self._tokens < 1:
                self._suppressed += 1
                if tail is not None:
                    self._tail = tail
                    self._schedule()
                return None
            self._tokens -= 1
            suppressed, self._suppressed, self._tail = self._suppressed, 0, None
            return suppressed

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.per_s)
        self._at = now

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.schedule(max(1.0 - self._tokens, 0.0) / self.per_s, self._flush)

    def _flush(self) -> None:
        with self._lock:
            self._scheduled = False
            tail = self._tail
            if tail is None:
                return
            self._refill()
            if self._tokens < 1:  # taken meanwhile: try again once there is room
                self._schedule()
                return
            self._tokens -= 1
            before, self._suppressed, self._tail = self._suppressed - 1, 0, None
        try:
            tail(before)
        except Exception:  # a log that fails must not end the timer's thread with a traceback
            logging.getLogger(__name__).warning("could not log the last item of a flood", exc_info=True)


LIMIT = Bucket()
PEER_WARNINGS = Bucket()


def peer_warning(log: logging.Logger, message: str, *args: Any) -> None:
    """Log `message` within `PEER_WARNINGS`, saying how many were left out before it (the last of
    a flood is logged once there is room)."""
    def say(left_out: int) -> None:
        log.warning(message + (f" ({left_out} more such warnings left out: rate limit)" if left_out else ""), *args)

    left_out = PEER_WARNINGS.admit(say)
    if left_out is not None:
        say(left_out)
