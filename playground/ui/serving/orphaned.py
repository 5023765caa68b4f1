"""Work nobody reads is stopped: an event whose session has no result stream open (or only streams
whose writes have waited :data:`STALLED_SEND_S`: a client that stopped reading)
:data:`READER_GRACE_S` seconds after it was submitted (a POST to ``/gradio_api/call/<endpoint>``
whose GET never came, a ``queue/join`` without ``queue/data``) leaves the queue unrun, or, if it is
streaming (a generation), stops at its next update; a late reader is told why
(:class:`ResultReaders`, :func:`stop_unread_work`); a stream whose write has waited
:data:`STALLED_CLOSE_S` is closed (:class:`TrackReaders`). A client that closes its stream is
stopped by Gradio itself."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import gradio as gr

from ...limits import READER_GRACE_S
from .. import gradio_internals
from . import connections
from ..gradio_internals import CALL_GET, QUEUE_DATA, Job

log = logging.getLogger("playground")

# A result stream whose last write has waited this long without progress is not being read: the
# client's socket and ours are full (a reader that stopped reading, or reads a few bytes a
# minute), so its work is stopped as if its stream were closed. A reader keeping up never waits more than a network
# round trip or two; this is short enough that, with a sweep a second, such work stops within 5 s.
STALLED_SEND_S = 2.0
# ... and one whose write has made no progress for this long is closed, which frees what it holds
# (a result being written: a 1024 x 1024 table is ~17 MB of JSON). A write going out slowly (the
# server's buffer for the connection shrinking, checked every PROGRESS_EVERY_S) is never stalled.
STALLED_CLOSE_S = 10.0
PROGRESS_EVERY_S = 0.5


class StalledReader(Exception):
    """A result stream's client has read nothing for :data:`STALLED_CLOSE_S` seconds."""


class ResultReaders:
    """The result streams open now, per session, as :class:`TrackReaders` counts them: the
    page's and gradio_client's ``GET /gradio_api/queue/data?session_hash=...``, a hand-written
    client's ``GET /gradio_api/call/<endpoint>/<event_id>`` (Gradio streams a session's messages,
    all its events', to whichever of them is open). A stream whose write has waited
    :data:`STALLED_SEND_S` or more does not count: its client stopped reading."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()
        # stream -> (session, when its pending write began, its connection's client address)
        self.blocked: dict[int, tuple[str, float, Any]] = {}

    def opened(self, session: str) -> None:
        self.open[session] += 1

    def closed(self, session: str) -> None:
        self.open[session] -= 1
        if self.open[session] <= 0:
            del self.open[session]

    def writing(self, stream: int, session: str, since: float, client: Any = None) -> None:
        """Stream ``stream`` of ``session`` (on connection ``client``) began a write at ``since``
        (``time.monotonic()``)."""
        self.blocked[stream] = (session, since, client)

    def written(self, stream: int) -> None:
        self.blocked.pop(stream, None)

    def stalled(self, session: str, now: float) -> int:
        """How many of ``session``'s streams have waited :data:`STALLED_SEND_S` or more on a write
        with bytes still waiting for their client. A write that waited with nothing waiting
        (the event loop was busy, on a loaded machine) is not the client's doing."""
        return sum(
            1 for s, since, client in list(self.blocked.values())
            if s == session and now - since >= STALLED_SEND_S and connections.write_backlog(client) != 0
        )

    def reading(self, session: str, submitted: float, now: float) -> bool:
        """Whether a result of ``session`` submitted at ``submitted`` (``time.monotonic()``) has
        a reader, or may still get one: a stream is open and not stalled, or
        :data:`READER_GRACE_S` has not passed yet."""
        return self.open[session] > self.stalled(session, now) or now - submitted < READER_GRACE_S


def unread_events(queue: Any, readers: ResultReaders, now: float) -> list[Job]:
    """The events nobody reads (see :class:`ResultReaders`) that stopping would spare work:
    queued ones, and running ones that stream (a generation; a one-shot handler cannot be
    stopped half-way, its result waits for a reader as any other: ``unread.drop_unread_results``)."""
    return [job for job in gradio_internals.stoppable_jobs(queue) if not readers.reading(job.session, job.submitted, now)]


def unread_stop_message() -> str:
    """What a late reader of a stopped event is told."""
    return (
        f"Stopped: nobody opened this request's result stream within {READER_GRACE_S:g} s of the request, so the "
        "app stopped its work. Open the stream right after the POST: GET /gradio_api/call/<endpoint>/<event_id> "
        "after /gradio_api/call/<endpoint>, GET /gradio_api/queue/data?session_hash=... after queue/join "
        "(gradio_client and the page do). Send it again."
    )


async def stop_unread_work(queue: Any, readers: ResultReaders, now: float) -> list[str]:
    """Stop :func:`unread_events` as Gradio stops the events of a client that closed its stream:
    a queued one leaves the queue and never runs; a running one stops after its current update
    (a generation's ``finally`` closes the engine's stream). Whoever comes for one later gets an
    error saying why (kept like any unread result). Returns the events' ids."""
    stopped = []
    for job in unread_events(queue, readers, now):
        await gradio_internals.stop_job(queue, job, unread_stop_message(), "Stopped: nobody read the result")
        stopped.append(job.id)
    return stopped


def _caused_by(err: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``err`` is ``kind``, is caused by one, or is an exception group holding one."""
    seen: set[int] = set()
    todo = [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return True
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return False


class TrackReaders:
    """ASGI middleware: counts the result streams open per session in ``readers`` (a stream is
    open from its request until its response ends: finished, or the client gone), and notes
    the writes each is waiting on (a stalled reader)."""

    def __init__(self, app: Callable, demo: gr.Blocks, readers: ResultReaders):
        self.app = app
        self.demo = demo
        self.readers = readers

    def _session(self, scope: dict) -> str | None:
        """The session whose messages this request streams, or None (not a result stream)."""
        if scope["method"] != "GET":
            return None
        path: str = scope["path"]
        if path.rstrip("/") == QUEUE_DATA:
            from starlette.datastructures import QueryParams

            return QueryParams(scope.get("query_string", b"")).get("session_hash")
        if match := CALL_GET.fullmatch(path):
            event_id = match.group(2)
            # As Gradio's route finds it: a finished event's session still holds its id.
            return gradio_internals.session_of_event(self.demo, event_id) or event_id
        return None

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        session = self._session(scope) if scope["type"] == "http" else None
        if session is None:
            await self.app(scope, receive, send)
            return
        stream = id(scope)

        async def watched_send(message: dict) -> None:
            since = time.monotonic()
            client = scope.get("client")
            self.readers.writing(stream, session, since, client)
            backlog = connections.write_backlog(client)
            pending = asyncio.ensure_future(send(message))  # waits while the client's socket and ours are full
            try:
                while True:
                    done, _ = await asyncio.wait({pending}, timeout=PROGRESS_EVERY_S)
                    if done:
                        pending.result()
                        return
                    now_backlog = connections.write_backlog(client)
                    if now_backlog == 0 or (now_backlog is not None and backlog is not None and now_backlog < backlog):
                        # Nothing waiting for the client (the loop was busy), or going out slowly:
                        # a reader, on a slow link or a loaded machine.
                        since = time.monotonic()
                        self.readers.writing(stream, session, since, client)
                    backlog = now_backlog
                    if time.monotonic() - since >= STALLED_CLOSE_S:
                        raise StalledReader(session)
            finally:
                if not pending.done():
                    pending.cancel()
                self.readers.written(stream)

        self.readers.opened(session)
        try:
            await self.app(scope, receive, watched_send)
        except Exception as err:  # noqa: BLE001 -- Starlette may wrap it in an exception group
            if not _caused_by(err, StalledReader):
                raise
            log.info("closed a result stream whose client read nothing for %g s", STALLED_CLOSE_S)
            # Returning with the response unfinished makes the server close the connection.
        finally:
            self.readers.written(stream)
            self.readers.closed(session)

