"""Streams held open: a page's heartbeat (``GET /gradio_api/heartbeat/<session>``, open as long as
the page) and its result streams (``GET /gradio_api/queue/data?session_hash=...``, ``GET
/gradio_api/call/<endpoint>/<event_id>``) each hold a connection for as long as the client
likes, and Gradio accepts a heartbeat for any made-up session. One address behind the proxy, or a
few dozen reached directly, could hold enough of them that the next learner got no page; closing
the idlest connection at the cap misses them (a heartbeat is never idle). docs/space.md, "Held
streams and churned sessions", measures both.

Here (:class:`StreamLimits`, after the route guard, so a refused request is never counted):

- a heartbeat for a session Gradio does not know (it never joined the queue, and has no state) is
  answered 404. The page opens its heartbeat as it loads, a second or so before its first event
  joins (the link event every page load runs), and never opens it again: so a visitor's first
  :data:`HEARTBEATS_WAITING_PER_VISITOR` such heartbeats wait up to :data:`HEARTBEAT_JOIN_WAIT_S`
  for that join (woken by it: :class:`JoinWatch`), counted as streams while they wait, and any
  more are answered 404 at once (:func:`may_wait_for_join`). A result stream for a session the
  queue does not hold is the route guard's 404;
- streams are counted per visitor (:func:`.visitors.visitor_of`: behind the proxy too) and per
  session: at most :data:`MAX_STREAMS_PER_SESSION` of one session, :data:`MAX_STREAMS_PER_VISITOR`
  of one visitor and :data:`MAX_STREAMS` in all. A new stream is never refused for these: at a
  cap the oldest stream of the session, of the visitor, or (at the total) of the visitor holding
  the most gives way (:func:`stream_to_close`), so the newcomer, a learner opening a page, gets
  in, and whoever hoards streams loses its own. ``MAX_STREAMS`` is half the connection cap, so
  streams can never take every connection.

A stream that gives way ends as if its client had gone (its request sees the disconnect; Gradio
stops what it was streaming), and its response is finished properly, so that the connection can
serve again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from ...limits import (HEARTBEAT_JOIN_WAIT_S, HEARTBEATS_WAITING_PER_VISITOR, MAX_STREAMS, MAX_STREAMS_PER_SESSION,
                       MAX_STREAMS_PER_VISITOR)
from .. import gradio_internals
from ..gradio_internals import CALL_GET, HEARTBEAT, QUEUE_DATA, Arrival
from .middleware import json_response
from .sessions import MAX_SESSIONS, current_visitor
from .visitors import visitor_of

__all__ = ["MAX_STREAMS", "MAX_STREAMS_PER_VISITOR", "MAX_STREAMS_PER_SESSION", "HEARTBEAT_JOIN_WAIT_S",
           "HEARTBEATS_WAITING_PER_VISITOR", "Stream", "may_wait_for_join", "stream_to_close", "OpenStreams", "JoinWatch",
           "StreamLimits"]

log = logging.getLogger("playground")


def may_wait_for_join(waiting: int, per_visitor: int) -> bool:
    """Whether a heartbeat for a session not yet known may wait for its join, its visitor having
    ``waiting`` such heartbeats waiting already (at most ``per_visitor``)."""
    return waiting < per_visitor


@dataclass(frozen=True)
class Stream:
    id: int
    visitor: str
    session: str


def stream_to_close(open_streams: Sequence[Stream], visitor: str, session: str, max_total: int, per_visitor: int,
                    per_session: int) -> tuple[Stream, str] | None:
    """Which of ``open_streams`` (oldest first) gives way for a new stream of ``visitor`` and
    ``session``, and why ("session", "visitor", "total"): the session's oldest when it holds
    ``per_session``; else the visitor's oldest when it holds ``per_visitor``; else, when
    ``max_total`` are open, the oldest stream of the visitor holding the most (the earliest opened
    among visitors holding as many). None when the new one fits."""
    same_session = [s for s in open_streams if s.session == session]
    if len(same_session) >= per_session:
        return same_session[0], "session"
    mine = [s for s in open_streams if s.visitor == visitor]
    if len(mine) >= per_visitor:
        return mine[0], "visitor"
    if len(open_streams) >= max_total:
        counts = Counter(s.visitor for s in open_streams)
        most = max(counts.values())
        return next(s for s in open_streams if counts[s.visitor] == most), "total"
    return None


class OpenStreams:
    """The streams open now, oldest first, with how to close each (see :func:`stream_to_close`)."""

    def __init__(self, max_total: int | None = None, per_visitor: int | None = None, per_session: int | None = None) -> None:
        self.max_total = MAX_STREAMS if max_total is None else max_total
        self.per_visitor = MAX_STREAMS_PER_VISITOR if per_visitor is None else per_visitor
        self.per_session = MAX_STREAMS_PER_SESSION if per_session is None else per_session
        self.streams: OrderedDict[int, Stream] = OrderedDict()
        self._closers: dict[int, Callable[[str], None]] = {}
        self._ids = iter(range(1, 1 << 62))
        self.closed_for_room: Counter[str] = Counter()  # why streams gave way, for the log and tests

    def __len__(self) -> int:
        return len(self.streams)

    def per(self, visitor: str) -> int:
        return sum(1 for s in self.streams.values() if s.visitor == visitor)

    def open(self, visitor: str, session: str, close: Callable[[str], None]) -> Stream:
        """Count a new stream (``close(reason)`` ends it), closing whichever gives way for it."""
        while (found := stream_to_close(list(self.streams.values()), visitor, session, self.max_total,
                                        self.per_visitor, self.per_session)) is not None:
            victim, reason = found
            self.closed_for_room[reason] += 1
            log.warning("closed a stream of %s (session %s) for a new one of %s: %s (%d open in all, limits %d in all, "
                        "%d a visitor, %d a session)", victim.visitor, victim.session, visitor,
                        {"session": "its session holds the most a session may",
                         "visitor": "it holds the most a visitor may",
                         "total": "it holds the most, and the total is full"}[reason],
                        len(self.streams), self.max_total, self.per_visitor, self.per_session)
            closer = self._closers.get(victim.id)
            self.closed(victim)
            if closer is not None:
                closer(reason)
        stream = Stream(next(self._ids), visitor, session)
        self.streams[stream.id] = stream
        self._closers[stream.id] = close
        return stream

    def closed(self, stream: Stream) -> None:
        self.streams.pop(stream.id, None)
        self._closers.pop(stream.id, None)


class JoinWatch:
    """Every request admitted to the queue, seen through a gate on it: whose each session is
    (:meth:`owner_of`, the visitor of its first join: who a new session's place among the kept
    sessions is charged to) and which sessions have joined (:meth:`wait`: a heartbeat waiting for
    its page's first event). Installed on ``demo``'s queue when made (after ``demo.queue()``)."""

    def __init__(self, demo: gr.Blocks | None, visitor: Callable[[Any], str] = visitor_of,
                 remember: int = 4 * MAX_SESSIONS) -> None:
        self.demo = demo
        self.remember = remember
        self.owners: OrderedDict[str, str] = OrderedDict()  # session -> visitor, the latest joined last
        self._waiting: dict[str, tuple[asyncio.Event, list[int]]] = {}
        if demo is not None:
            gradio_internals.gate_pushes(demo, lambda arrival: None, self._admitted, visitor=visitor)

    def _admitted(self, arrival: Arrival, event_id: str) -> None:
        session = arrival.session
        if session is None and self.demo is not None:
            session = gradio_internals.session_of_event(self.demo, event_id)
        if isinstance(session, str):
            self.joined(session, arrival.address)

    def joined(self, session: str, visitor: str) -> None:
        if session not in self.owners:
            self.owners[session] = visitor
            while len(self.owners) > self.remember:
                self.owners.popitem(last=False)
        waiting = self._waiting.get(session)
        if waiting is not None:
            waiting[0].set()

    def owner_of(self, session: str) -> str:
        """The visitor of ``session``'s first join; for a session Gradio makes while answering a
        request (a join, before any gate sees it), that request's visitor."""
        return self.owners.get(session) or current_visitor()

    def known(self, session: str) -> bool:
        return self.demo is not None and gradio_internals.session_known(self.demo, session)

    async def wait(self, session: str, timeout_s: float, stop: asyncio.Event) -> bool:
        """Whether ``session`` is known, waiting up to ``timeout_s`` for its first join (or until
        ``stop`` is set)."""
        if self.known(session):
            return True
        if timeout_s <= 0 or stop.is_set():
            return False
        event, waiters = self._waiting.setdefault(session, (asyncio.Event(), [0]))
        waiters[0] += 1
        tasks = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            waiters[0] -= 1
            if waiters[0] <= 0:
                self._waiting.pop(session, None)
        return self.known(session)


def stream_of(scope: dict, demo: gr.Blocks | None) -> tuple[str, str] | None:
    """("heartbeat" or "results", its session) for a request that holds a stream open, else None."""
    if scope.get("method") != "GET":
        return None
    path: str = scope["path"]
    if path.startswith(HEARTBEAT):
        return "heartbeat", path[len(HEARTBEAT):]
    if path.rstrip("/") == QUEUE_DATA:
        from starlette.datastructures import QueryParams

        session = QueryParams(scope.get("query_string", b"")).get("session_hash")
        return None if session is None else ("results", session)
    if match := CALL_GET.fullmatch(path):
        event_id = match.group(2)
        session = gradio_internals.session_of_event(demo, event_id) if demo is not None else None
        return "results", session or event_id
    return None


class StreamLimits:
    """ASGI middleware: heartbeats only for sessions Gradio knows, and streams counted and bounded
    per session, per visitor and in all (see the module's doc). Install after the route guard."""

    def __init__(self, app: Callable, demo: gr.Blocks | None, streams: OpenStreams | None = None,
                 joins: JoinWatch | None = None, visitor: Callable[[Any], str] = visitor_of,
                 join_wait_s: float | None = None, waiting_per_visitor: int | None = None) -> None:
        self.app = app
        self.demo = demo
        self.streams = streams if streams is not None else OpenStreams()
        self.joins = joins if joins is not None else JoinWatch(None)
        self.visitor = visitor
        self.join_wait_s = HEARTBEAT_JOIN_WAIT_S if join_wait_s is None else join_wait_s
        self.waiting_per_visitor = HEARTBEATS_WAITING_PER_VISITOR if waiting_per_visitor is None else waiting_per_visitor
        self.waiting: Counter[str] = Counter()  # visitor -> its heartbeats waiting for their session's join

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        found = stream_of(scope, self.demo) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        kind, session = found
        visitor = self.visitor(scope)
        waits = kind == "heartbeat" and not self.joins.known(session)
        if waits and (self.join_wait_s <= 0 or not may_wait_for_join(self.waiting[visitor], self.waiting_per_visitor)):
            await self._unknown(session)(scope, receive, send)
            return
        stop = asyncio.Event()
        why: list[str] = []

        def close(reason: str) -> None:
            why.append(reason)
            stop.set()

        stream = self.streams.open(visitor, session, close)
        try:
            if waits:
                self.waiting[visitor] += 1
                try:
                    known = await self.joins.wait(session, self.join_wait_s, stop)
                finally:
                    self.waiting[visitor] -= 1
                    if self.waiting[visitor] <= 0:
                        del self.waiting[visitor]
                if not known:
                    await (self._gave_way(why[0]) if why else self._unknown(session))(scope, receive, send)
                    return
            await self._serve(scope, receive, send, stop)
        finally:
            self.streams.closed(stream)

    @staticmethod
    def _unknown(session: str) -> Any:
        return json_response(404, f"No session {session}: a heartbeat keeps alive a session that joined the queue. "
                                  "POST /gradio_api/queue/join first (the page does).")

    def _gave_way(self, reason: str) -> Any:
        limit = {"session": f"{self.streams.per_session} a session", "visitor": f"{self.streams.per_visitor} a visitor",
                 "total": f"{self.streams.max_total} in all"}[reason]
        return json_response(429, f"Too many streams open (at most {limit}): this one was closed to make room for a newer one.",
                             headers={"Retry-After": "5"})

    async def _serve(self, scope: dict, receive: Callable, send: Callable, stop: asyncio.Event) -> None:
        started = finished = False

        async def stoppable_receive() -> dict:
            if stop.is_set():
                return {"type": "http.disconnect"}
            tasks = [asyncio.ensure_future(receive()), asyncio.ensure_future(stop.wait())]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    if not task.done():
                        task.cancel()
            return tasks[0].result() if tasks[0] in done else {"type": "http.disconnect"}

        async def watched_send(message: dict) -> None:
            nonlocal started, finished
            if finished:
                return
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        await self.app(scope, stoppable_receive, watched_send)
        if stop.is_set() and started and not finished:
            # Ended for room, not by its client: finish the response (the last chunk of its
            # chunked body) instead of leaving the server to log it half-sent and drop the connection.
            await send({"type": "http.response.body", "body": b"", "more_body": False})
