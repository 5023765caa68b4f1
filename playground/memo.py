"""The one way a module keeps what it built for later requests: a bounded, thread-safe cache.

A module that loads a model, an index or a figure once and serves it to every request holds it in a
:class:`Memo` instead of a global and a lock of its own: one lock a cache, at most ``size`` entries
(the least recently used leaves, and ``close`` is called on it), and a build that raises is not
kept, so the next request tries again (rebuilding a file fixes a running app).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

__all__ = ["Memo"]


class Memo(Generic[K, V]):
    """Values built on first use by key, at most ``size`` of them.

    ``build(key)`` runs under the cache's lock, so two requests for the same missing key build it
    once; requests for kept keys wait only for a build in progress."""

    def __init__(self, build: Callable[[K], V] | None = None, size: int = 1, close: Callable[[V], None] | None = None) -> None:
        if size < 1:
            raise ValueError(f"a Memo keeps at least one entry, not {size}")
        self._build, self.size, self._close = build, size, close
        self._entries: OrderedDict[K, V] = OrderedDict()
        self.lock = threading.RLock()  # reentrant: a build may read another entry of the same cache

    def get(self, key: K, build: Callable[[K], V] | None = None) -> V:
        """The value of ``key``, built by ``build`` (else the cache's own) when missing."""
        with self.lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            make = build or self._build
            if make is None:
                raise KeyError(key)
            value = make(key)
            self.put(key, value)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key`` (replacing and closing an older one), then trim to ``size``."""
        with self.lock:
            old = self._entries.pop(key, None)
            if old is not None and old is not value and self._close is not None:
                self._close(old)
            self._entries[key] = value
            while len(self._entries) > self.size:
                _, dropped = self._entries.popitem(last=False)
                if self._close is not None:
                    self._close(dropped)

    def peek(self, key: K) -> V | None:
        """The kept value of ``key`` or None, building nothing."""
        with self.lock:
            return self._entries.get(key)

    def pop(self, key: K) -> V | None:
        """Forget ``key`` (not closed: the caller has it); its value or None."""
        with self.lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry, closing each."""
        with self.lock:
            entries, self._entries = list(self._entries.values()), OrderedDict()
            if self._close is not None:
                for value in entries:
                    self._close(value)

    def __len__(self) -> int:
        with self.lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        with self.lock:
            return key in self._entries
