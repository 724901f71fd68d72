"""How often a process logs access refusals: a flood of bad tokens (or of calls a token may not
make) must neither grow `log://access` without bound nor keep the workers writing it.

One token bucket per process (`LIMIT`, shared by every connection): a burst of `BURST` refusals
is logged, then `PER_S` a second. A refusal past that is counted, not logged; the next one logged
carries the count (`"suppressed": n` in its event, and in its warning), so a sustained flood still
shows in the log and in the server's output about once a second, with how many were left out.
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


class Bucket:
    """A token bucket, safe to share between threads (workers log refusals too)."""

    def __init__(self, burst: int = BURST, per_s: float = PER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.per_s = per_s
        self.clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._suppressed = 0
        self._lock = threading.Lock()

    def admit(self) -> int | None:
        """None: over the limit, this refusal is only counted. Else it is logged, carrying how
        many were counted since the previous one logged."""
        with self._lock:
            now = self.clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.per_s)
            self._at = now
            if self._tokens < 1:
                self._suppressed += 1
                return None
            self._tokens -= 1
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed


LIMIT = Bucket()
PEER_WARNINGS = Bucket()


def peer_warning(log: logging.Logger, message: str, *args: Any) -> None:
    """Log `message` within `PEER_WARNINGS`, saying how many were left out before it."""
    left_out = PEER_WARNINGS.admit()
    if left_out is not None:
        log.warning(message + (f" ({left_out} more such warnings left out: rate limit)" if left_out else ""), *args)
