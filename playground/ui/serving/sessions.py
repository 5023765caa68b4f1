"""What a session keeps, whatever the traffic (every raw ``/gradio_api/call/...`` request is a new
session):

- its results, the values a page's later events read (a generation's candidates, attention's
  stages, a training run and the model it trained), live in a :class:`ResultStore` per kind, at
  most :data:`MAX_RESULTS` of each; the session's ``gr.State`` holds only their key;
- nothing else of its own: no copy of every component's config and of the last value each input
  and output took, which Gradio keeps only for deep links
  (:class:`playground.ui.gradio_internals.LeanSessionState`);
- at most :data:`MAX_SESSIONS` sessions are kept (Gradio's ``state_session_capacity``);
- its id is a short token (:data:`SESSION_HASH`, :func:`session_problem`).

Sessions and results each belong to a visitor (:func:`.visitors.visitor_of`), and what makes room
is :class:`VisitorShares`: a visitor past its share (:data:`SESSIONS_PER_VISITOR`,
:data:`RESULTS_PER_VISITOR`) loses its own least recently used, and at the bound whoever holds the
most does (:func:`to_drop`). A plain least-recently-used bound would let one visitor opening many
sessions push out every learner's session, and with it the key of the model a learner had just
trained; this way that visitor only ever pushes out its own.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import re
import threading
from collections import Counter, OrderedDict
from contextvars import ContextVar
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, get_type_hints

import gradio as gr

from ...limits import MAX_RESULTS, MAX_SESSIONS, RESULTS_PER_VISITOR, SESSIONS_PER_VISITOR
from .. import gradio_internals
from .visitors import UNKNOWN, visitor_of

__all__ = ["MAX_SESSIONS", "MAX_RESULTS", "SESSIONS_PER_VISITOR", "RESULTS_PER_VISITOR", "ResultStore",
           "VisitorShares", "to_drop", "current_visitor", "VisitorContext", "SESSION_HASH", "session_problem"]

log = logging.getLogger("playground")


def to_drop(order: Iterable[tuple[Hashable, str]], counts: Mapping[str, int], owner: str, capacity: int,
            share: int) -> Hashable | None:
    """Which entry goes after ``owner`` added one, given every entry ``(key, owner)`` least
    recently used first and how many each owner holds: ``owner``'s own oldest while it holds more
    than ``share``; else, while more than ``capacity`` are kept, the oldest entry of whoever holds
    the most (the oldest such, among owners holding as many); None when within both."""
    if counts.get(owner, 0) > share:
        return next((key for key, o in order if o == owner), None)
    if sum(counts.values()) > capacity:
        most = max(counts.values())
        return next((key for key, o in order if counts[o] == most), None)
    return None


class VisitorShares:
    """Keys least recently used first, each owned by a visitor, bounded by :func:`to_drop`: at
    most ``capacity`` in all and ``share`` per visitor. Not thread-safe: its user holds a lock."""

    def __init__(self, capacity: int, share: int) -> None:
        self.capacity, self.share = capacity, max(1, min(share, capacity))
        self.order: OrderedDict[Hashable, str] = OrderedDict()  # key -> owner
        self.counts: Counter[str] = Counter()

    def __contains__(self, key: Any) -> bool:
        return key in self.order

    def __len__(self) -> int:
        return len(self.order)

    def add(self, key: Hashable, owner: str) -> list[Hashable]:
        """``key`` kept as the most recently used, owned by ``owner``; the keys that make room
        for it (never ``key`` itself)."""
        self.discard(key)
        self.order[key] = owner
        self.counts[owner] += 1
        dropped = []
        while (victim := to_drop(self.order.items(), self.counts, owner, self.capacity, self.share)) is not None:
            if victim == key:
                break  # (a capacity below one: nothing else to drop)
            self.discard(victim)
            dropped.append(victim)
        return dropped

    def touch(self, key: Hashable) -> None:
        if key in self.order:
            self.order.move_to_end(key)

    def discard(self, key: Hashable) -> None:
        owner = self.order.pop(key, None)
        if owner is not None:
            self.counts[owner] -= 1
            if self.counts[owner] <= 0:
                del self.counts[owner]


# The visitor of the HTTP request being answered (:class:`VisitorContext`): Gradio makes a
# session when its join arrives, before any gate on the queue sees the request.
REQUEST_VISITOR: ContextVar[str | None] = ContextVar("playground_request_visitor", default=None)


def current_visitor() -> str:
    """Who sent the request being served: the one whose handler runs on this thread (Gradio's
    request context), else the HTTP request being answered (:data:`REQUEST_VISITOR`); "?"
    outside both."""
    request = gradio_internals.current_request()
    if request is not None:
        return visitor_of(request)
    return REQUEST_VISITOR.get() or UNKNOWN


class VisitorContext:
    """ASGI middleware: :data:`REQUEST_VISITOR` set for each HTTP request, for what Gradio does
    while answering it (making a session)."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = REQUEST_VISITOR.set(visitor_of(scope))
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST_VISITOR.reset(token)


class ResultStore:
    """Results a page's later events read, kept outside Gradio's sessions: at most ``capacity``,
    however many sessions there are, at most ``per_visitor`` of them one visitor's (the one whose
    handler put it: :func:`current_visitor`); what makes room is :class:`VisitorShares`'s (a
    visitor's own least recently used, or at the bound the least recently used of whoever holds
    the most). (``gr.State``'s ``time_to_live`` bounds how long a value lives, not how many live:
    a crowd of new sessions would still fill memory within any time to live.)

    The page's ``gr.State`` (:meth:`state`) holds a key, one a session; handlers see and return
    the results themselves, through :meth:`through`. Handlers run on Gradio's worker threads: a lock guards
    the store."""

    def __init__(self, capacity: int = MAX_RESULTS, per_visitor: int = RESULTS_PER_VISITOR):
        self.capacity = capacity
        self._results: dict[int, Any] = {}
        self._shares = VisitorShares(capacity, per_visitor)
        self._pinned: dict[int, Any] = {}
        self._keys = itertools.count(1)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._results)

    def put(self, value: Any, key: int | None = None, owner: str | None = None) -> int:
        """Keep ``value`` (under ``key``, replacing what it held, or a new key) as ``owner``'s (by
        default the visitor whose request is being handled); its key."""
        owner = current_visitor() if owner is None else owner
        with self._lock:
            if key is None or key in self._pinned:
                key = next(self._keys)
            self._results[key] = value
            for dropped in self._shares.add(key, owner):
                self._results.pop(dropped, None)
        return key

    def get(self, key: Any) -> Any:
        """The value kept under ``key``; None when there is none, or it was dropped."""
        with self._lock:
            if key in self._pinned:
                return self._pinned[key]
            if key not in self._results:
                return None
            self._shares.touch(key)
            return self._results[key]

    def owner(self, key: Any) -> str | None:
        """Whose result ``key`` is (None when it is not kept)."""
        with self._lock:
            return self._shares.order.get(key)

    def discard(self, key: Any) -> None:
        """Forget ``key`` (a pinned value stays)."""
        with self._lock:
            if key in self._pinned:
                return
            self._results.pop(key, None)
            self._shares.discard(key)

    def pin(self, value: Any) -> int:
        """Keep ``value`` for good (a default every session starts from); its key."""
        key = next(self._keys)
        self._pinned[key] = value
        return key

    def state(self, default: Any = None) -> gr.State:
        """A ``gr.State`` holding a key of this store, ``default``'s (pinned) to begin with. When
        Gradio deletes a session's state (an hour after its tab closed) its result goes too."""
        return gr.State(None if default is None else self.pin(default), delete_callback=self.discard)

    def through(self, fn: Callable, inputs: list, outputs: list, state: gr.State, read: str | None = None) -> "Wiring":
        """An event of ``fn`` (a function or generator) whose session's result lives here, made as
        one :class:`Wiring` (``button.click(*wiring, ...)``), so the lists ``fn`` was wired for are
        the very lists the event gets. ``state`` (one of :meth:`state`'s) is found in them by
        identity, never by position. In ``inputs`` it carries the session's key: ``fn`` gets the
        value kept under it as its parameter named ``read`` (if any) and the other inputs, in their
        order, as its other parameters. In ``outputs``, what ``fn`` returns (or yields) in its place
        is kept, replacing the session's own (one entry a session), and leaves as its key; ``None``
        and ``gr.skip()`` there pass as they are. A wiring that would hand a handler another
        session's result, or another input's value, raises ValueError here, when the page is built."""
        name = getattr(fn, "__name__", repr(fn))
        inputs, outputs = list(inputs), list(outputs)  # the event's own: a list changed later changes neither

        def wrong(problem: str) -> ValueError:
            return ValueError(f"{type(self).__name__}.through({name}): {problem}")

        # Its delete callback is this store's: a state of another store would read keys it never gave.
        if not isinstance(state, gr.State) or getattr(state, "delete_callback", None) != self.discard:
            raise wrong("`state` must be a gr.State made by this store's state()")
        at_in = [i for i, c in enumerate(inputs) if c is state]
        at_out = [i for i, c in enumerate(outputs) if c is state]
        if len(at_in) != 1:
            raise wrong(f"the state must be among the inputs exactly once (it is there {len(at_in)} times): it carries "
                        "the session's key, without which a result read is nobody's and a result kept is a new entry "
                        "every run")
        if len(at_out) > 1:
            raise wrong(f"the state is among the outputs {len(at_out)} times")
        if read is None and not at_out:
            raise wrong("it neither reads (read=...) nor keeps (the state among the outputs) a result")
        here, write = at_in[0], (at_out[0] if at_out else None)

        parameters = list(inspect.signature(fn).parameters.values())
        by_name = [p for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD]
        if by_name:
            raise wrong(f"it is called with its arguments by name: {by_name[0]} cannot be given so")
        if any(p.name == RESULT_KEY for p in parameters):
            raise wrong(f"a parameter may not be named {RESULT_KEY!r}: the key travels under that name")
        filled = _filled_by_gradio(fn, parameters)
        if read is not None and (read not in {p.name for p in parameters} or read in filled):
            raise wrong(f"read={read!r} must name one of its parameters that an input fills")
        rest = [p for p in parameters if p.name != read]
        given = len(inputs) - 1
        takes = [p for p in rest[:given] if p.name not in filled]
        missing = [p.name for p in rest[given:] if p.name not in filled and p.default is inspect.Parameter.empty]
        if len(takes) < given or missing:
            to = f" (the state's value goes to {read!r})" if read else ""
            raise wrong(f"the event's {given} inputs besides the state and its parameters "
                        f"{[p.name for p in rest if p.name not in filled]}{to} must pair off in order: every input "
                        "its parameter, every parameter without a default its input")
        # Gradio places each input, and what it fills itself (the request, event data), by this signature.
        key = inspect.Parameter(RESULT_KEY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=None if any(p.default is not p.empty for p in rest[:here]) else inspect.Parameter.empty)
        signature = [*rest[:here], key, *rest[here:]]
        names = [p.name for p in signature]

        def load(args: tuple, kwargs: dict) -> tuple[dict, Any]:
            named = {**dict(zip(names, args)), **kwargs}
            old = named.pop(RESULT_KEY, None)
            if read is not None:
                named[read] = self.get(old)
            return named, old

        def save(result: Any, box: list) -> Any:
            if write is None:
                return result
            one = len(outputs) == 1
            values = [result] if one else list(result)
            if len(values) != len(outputs):
                raise ValueError(f"{name} gave {len(values)} values for its {len(outputs)} outputs: which one is the "
                                 "result to keep is unknown")
            value = values[write]
            if value is None or (isinstance(value, dict) and value.get("__type__") == "update"):
                return result
            box[0] = values[write] = self.put(value, box[0])
            return values[0] if one else tuple(values)

        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
                named, old = load(args, kwargs)
                box = [old]
                inner = fn(**named)
                try:
                    for result in inner:
                        yield save(result, box)
                finally:
                    inner.close()  # at once, not when collected: a generation frees its rows

        else:

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                named, old = load(args, kwargs)
                return save(fn(**named), [old])

        wrapper.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
        return Wiring(wrapper, inputs, outputs)


# The name the session's key travels under in a wired handler's signature (what Gradio passes it as).
RESULT_KEY = "result_key"


def _filled_by_gradio(fn: Callable, parameters: list[inspect.Parameter]) -> set[str]:
    """The names of ``fn``'s parameters that Gradio fills itself, from their type (the request,
    an event's data), not from an input."""
    try:  # as Gradio reads them: annotations it cannot resolve fill nothing
        hints = get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    filled = set()
    for p in parameters:
        hint = hints.get(p.name)
        kinds = [a for a in getattr(hint, "__args__", ()) if a is not type(None)] or [hint]
        if any(inspect.isclass(k) and issubclass(k, (gr.Request, gr.EventData)) for k in kinds):
            filled.add(p.name)
    return filled


class Wiring(NamedTuple):
    """An event's function and its inputs and outputs, in the order Gradio's listeners take them:
    ``button.click(*wiring, ...)``, ``gr.on(triggers, *wiring, ...)``, ``dict(wiring._asdict(), ...)``."""

    fn: Callable
    inputs: list
    outputs: list


# A session id is a short token: the page makes ~11 base-36 characters, gradio_client a UUID (36).
SESSION_HASH = re.compile(r"[A-Za-z0-9_-]{1,64}")


def session_problem(session: Any) -> str | None:
    """Why ``session`` cannot be a session id, or None."""
    if isinstance(session, str) and SESSION_HASH.fullmatch(session):
        return None
    shown = f"{len(session):,} characters" if isinstance(session, str) else type(session).__name__
    return (f"session_hash must be a short token: 1 to 64 letters, digits, '-' or '_' (got {shown}); "
            "the page and gradio_client make one for you.")
