"""What a session keeps, whatever the traffic (every raw ``/gradio_api/call/...`` request is a new
session):

- its results, the values a page's later events read (a generation's candidates, attention's
  stages, a training run), live in a :class:`ResultStore` per kind, at most :data:`MAX_RESULTS` of
  each, least recently used dropped first; the session's ``gr.State`` holds only their key;
- nothing else of its own: no copy of every component's config and of the last value each input
  and output took, which Gradio keeps only for deep links
  (:class:`playground.ui.gradio_internals.LeanSessionState`);
- at most :data:`MAX_SESSIONS` sessions are kept (Gradio's ``state_session_capacity``);
- its id is a short token (:data:`SESSION_HASH`, :func:`session_problem`).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr

__all__ = ["MAX_SESSIONS", "MAX_RESULTS", "ResultStore", "SESSION_HASH", "session_problem"]

# Sessions kept (least recently used dropped first). A session costs a few kilobytes (a shallow
# copy of the app's component table and its results' keys), so this is a few megabytes at most.
MAX_SESSIONS = 1_000
# Results kept per kind: a 4 x 512-token generation's per-token candidates take about 5 MB,
# attention's stages about 1 MB; past this the least recently used is dropped (its session's
# token and stage pickers then show nothing until its next run).
MAX_RESULTS = 32


class ResultStore:
    """Results a page's later events read, kept outside Gradio's sessions: at most ``capacity``,
    the least recently used dropped first, however many sessions there are. (``gr.State``'s
    ``time_to_live`` bounds how long a value lives, not how many live: a crowd of new sessions
    would still fill memory within any time to live.)

    The page's ``gr.State`` (:meth:`state`) holds a key, one a session; handlers see and return
    the results themselves, through :meth:`through`. Handlers run on Gradio's worker threads: a lock guards
    the store."""

    def __init__(self, capacity: int = MAX_RESULTS):
        self.capacity = capacity
        self._results: OrderedDict[int, Any] = OrderedDict()
        self._pinned: dict[int, Any] = {}
        self._keys = itertools.count(1)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._results)

    def put(self, value: Any, key: int | None = None) -> int:
        """Keep ``value`` (under ``key``, replacing what it held, or a new key); its key."""
        with self._lock:
            if key is None or key in self._pinned:
                key = next(self._keys)
            self._results[key] = value
            self._results.move_to_end(key)
            while len(self._results) > self.capacity:
                self._results.popitem(last=False)
        return key

    def get(self, key: Any) -> Any:
        """The value kept under ``key``; None when there is none, or it was dropped."""
        with self._lock:
            if key in self._pinned:
                return self._pinned[key]
            if key not in self._results:
                return None
            self._results.move_to_end(key)
            return self._results[key]

    def discard(self, key: Any) -> None:
        """Forget ``key`` (a pinned value stays)."""
        with self._lock:
            self._results.pop(key, None)

    def pin(self, value: Any) -> int:
        """Keep ``value`` for good (a default every session starts from); its key."""
        key = next(self._keys)
        self._pinned[key] = value
        return key

    def state(self, default: Any = None) -> gr.State:
        """A ``gr.State`` holding a key of this store, ``default``'s (pinned) to begin with. When
        Gradio deletes a session's state (an hour after its tab closed) its result goes too."""
        return gr.State(None if default is None else self.pin(default), delete_callback=self.discard)

    def through(self, fn: Callable, read: int | None = None, write: int | None = None, key: int | None = None) -> Callable:
        """``fn`` (a function or generator) wired to a :meth:`state` component: the argument at
        position ``read`` arrives as a key and reaches ``fn`` as its value; the value ``fn``
        returns (or yields) at position ``write`` of its outputs is kept and leaves as a key,
        replacing the value of the key the argument at position ``key`` holds (the session's
        own: one entry a session), an argument ``fn`` does not see unless it is also ``read``.
        ``None`` and ``gr.skip()`` pass as they are."""

        def load(args: tuple) -> tuple[list, Any]:
            args = list(args)
            old = args[key] if key is not None else None
            if read is not None:
                args[read] = self.get(args[read])
            if key is not None and key != read:
                del args[key]
            return args, old

        def save(result: Any, box: list) -> Any:
            if write is None:
                return result
            values = list(result)
            value = values[write]
            if value is None or (isinstance(value, dict) and value.get("__type__") == "update"):
                return result
            box[0] = values[write] = self.put(value, box[0])
            return tuple(values)

        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def wrapper(*args: Any) -> Iterator[Any]:
                args, old = load(args)
                box = [old]
                inner = fn(*args)
                try:
                    for result in inner:
                        yield save(result, box)
                finally:
                    inner.close()  # at once, not when collected: a generation frees its rows

        else:

            @functools.wraps(fn)
            def wrapper(*args: Any) -> Any:
                args, old = load(args)
                return save(fn(*args), [old])

        if key is not None and key != read:  # Gradio counts and places arguments by the signature
            parameters = list(inspect.signature(fn).parameters.values())
            parameters.insert(key, inspect.Parameter("result_key", inspect.Parameter.POSITIONAL_OR_KEYWORD))
            wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        return wrapper


# A session id is a short token: the page makes ~11 base-36 characters, gradio_client a UUID (36).
SESSION_HASH = re.compile(r"[A-Za-z0-9_-]{1,64}")


def session_problem(session: Any) -> str | None:
    """Why ``session`` cannot be a session id, or None."""
    if isinstance(session, str) and SESSION_HASH.fullmatch(session):
        return None
    shown = f"{len(session):,} characters" if isinstance(session, str) else type(session).__name__
    return (f"session_hash must be a short token: 1 to 64 letters, digits, '-' or '_' (got {shown}); "
            "the page and gradio_client make one for you.")
