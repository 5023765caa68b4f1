"""Bytes per visitor for the files under ``/browser/`` (:mod:`.browser_files`): a bucket per visitor
holding up to a minute's budget, refilled evenly, from which each answer takes its size before it
is sent. A visitor whose bucket lacks an answer's bytes is refused with the seconds until it holds
them (HTTP 429 and ``Retry-After``), so one address can never take the Space's outgoing bandwidth
from a class, and an honest page, which downloads each file once and keeps it, never notices.

Memory: a visitor whose bucket is full again is forgotten (it holds nothing a new bucket would
not); at most :data:`MAX_VISITORS` are kept, the fullest forgotten first past that.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["ByteBudget", "MAX_VISITORS"]

MAX_VISITORS = 4096


class ByteBudget:
    """``per_minute`` bytes a minute for each visitor, at most a minute's worth at once."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic, max_visitors: int = MAX_VISITORS) -> None:
        self.capacity = per_minute
        self.rate = per_minute / 60.0  # bytes a second
        self.clock = clock
        self.max_visitors = max_visitors
        self.buckets: dict[str, tuple[float, float]] = {}  # visitor -> (bytes left, when counted)

    def level(self, visitor: str, now: float | None = None) -> float:
        """Bytes ``visitor`` may take now."""
        now = self.clock() if now is None else now
        left, then = self.buckets.get(visitor, (self.capacity, now))
        return min(self.capacity, left + (now - then) * self.rate)

    def take(self, visitor: str, size: int) -> float:
        """Charge ``size`` bytes to ``visitor``: 0.0 when it has them (they are taken), else the
        seconds until it will (nothing taken). An answer larger than a minute's budget is
        charged a full bucket, so that it can still be served."""
        now = self.clock()
        need = min(size, self.capacity)
        level = self.level(visitor, now)
        if level < need:
            return max(1.0, math.ceil((need - level) / self.rate))
        self.buckets.pop(visitor, None)
        self.buckets[visitor] = (level - need, now)  # (re-inserted: the most recent last)
        self._bound(now)
        return 0.0

    def _bound(self, now: float) -> None:
        if len(self.buckets) <= self.max_visitors:
            return
        for visitor in [v for v in self.buckets if self.level(v, now) >= self.capacity]:
            del self.buckets[visitor]
        if len(self.buckets) > self.max_visitors:
            fullest = sorted(self.buckets, key=lambda v: -self.level(v, now))
            for visitor in fullest[: len(self.buckets) - self.max_visitors]:
                del self.buckets[visitor]
