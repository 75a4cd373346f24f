"""A token bucket per app: `--rate-limit N/s` allows bursts of N, then N per second."""

from __future__ import annotations

import threading
import time


class RateLimiter:
    def __init__(self, per_second: float) -> None:
        self.rate = per_second
        self.burst = max(1.0, per_second)
        self._buckets: dict[str, tuple[float, float]] = {}  # app -> (tokens, last time)
        self._lock = threading.Lock()

    def allow(self, app: str) -> bool:
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(app, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[app] = (tokens, now)
                return False
            self._buckets[app] = (tokens - 1.0, now)
            return True
