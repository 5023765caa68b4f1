"""What the server accepts and what it keeps, whatever the traffic (a public Space meets every
kind of client): memory bounded, request bodies capped, every malformed request answered with a
message, and nothing served or exposed that the app does not use.

Gradio (6.31, pinned in requirements.txt) keeps, per session, a copy of every component's
config with the last value each input and output took (for "deep links"), for up to 10,000
sessions, and every raw ``/gradio_api/call/...`` request is a new session; a result nobody comes
to read stays in the queue for good. Here:

- a session keeps only what the app uses: its ``gr.State`` values and the components an event
  updated (:class:`LeanSessionState`); at most :data:`MAX_SESSIONS` sessions are kept, and at
  most :data:`MAX_SESSIONS_WITH_RESULTS` of them keep their results (a generation's candidates,
  attention's stages), least recently used dropped first (:class:`BoundedStateHolder`);
- a finished result nobody has read is dropped after :data:`UNREAD_RESULT_WAIT_S` seconds, and
  past :data:`MAX_UNREAD_BYTES` of them at once (:func:`drop_unread_results`), and
  freed memory is handed back to the system every few seconds (glibc's ``malloc_trim``);
- work nobody reads is stopped: an event whose session has no result stream open (or only
  streams whose writes have waited :data:`STALLED_SEND_S`: a client that stopped reading)
  :data:`READER_GRACE_S` seconds after it was submitted (a POST to ``/gradio_api/call/<endpoint>``
  whose GET never came, a ``queue/join`` without ``queue/data``) leaves the queue unrun, or, if
  it is streaming (a generation), stops at its next update; a late reader is told why
  (:class:`ResultReaders`, :func:`stop_unread_work`); a stream whose write has waited
  :data:`STALLED_CLOSE_S` is closed. A client that closes its stream is stopped by Gradio itself;
- a session id is a short token (:data:`SESSION_HASH`), and a result stream is opened only for
  a session the queue holds (:class:`RouteGuard`, :func:`refuse_malformed`);
- a request body over :data:`playground.limits.MAX_REQUEST_BYTES` is refused with HTTP 413 before
  it is read (:class:`BodySizeLimit`);
- wrong argument counts get a message naming the parameters, and an error inside Gradio's own
  processing (a value a component cannot take) reaches the client as a message, not ``null``
  (:func:`explain_errors`); unknown events and endpoints are refused with a message naming the
  endpoints (:func:`refuse_malformed`, :class:`RouteGuard`);
- only ``artifacts/`` is served as files, a ``Range`` header Gradio cannot parse is ignored
  (RFC 9110 allows it: the whole file is sent), deep links and the monitoring page are off.

Below HTTP, connections are bounded by :mod:`playground.ui.connections` (header timeout,
connections per address and in all, rate-limited log lines).

Every piece is installed by :func:`harden` (at build time) and :func:`launch_options` (the
arguments of ``demo.launch``); tests/test_abuse.py and tests/test_public_load.py check the
behaviour on a launched app.
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import inspect
import logging
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from copy import copy
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.exceptions import ComponentProcessingError
from gradio.server_messages import ProcessCompletedMessage
from gradio.state_holder import SessionState, StateHolder

from .. import limits
from . import connections
from .compression import gzip_middleware

__all__ = [
    "MAX_SESSIONS",
    "MAX_SESSIONS_WITH_RESULTS",
    "UNREAD_RESULT_WAIT_S",
    "MAX_UNREAD_BYTES",
    "READER_GRACE_S",
    "STALLED_SEND_S",
    "STALLED_CLOSE_S",
    "LeanSessionState",
    "BoundedStateHolder",
    "BodySizeLimit",
    "RouteGuard",
    "approx_bytes",
    "drop_unread_results",
    "ResultReaders",
    "TrackReaders",
    "unread_events",
    "stop_unread_work",
    "event_problem",
    "arity_problem",
    "refuse_malformed",
    "SESSION_HASH",
    "session_problem",
    "explain_errors",
    "harden",
    "launch_options",
]

log = logging.getLogger("playground")

# Sessions kept (least recently used dropped first). A lean session without results costs a few
# kilobytes (a shallow copy of the app's component table), so this is a few megabytes at most.
MAX_SESSIONS = 1_000
# Sessions that keep their results: a 4 x 512-token generation's per-token candidates take about
# 5 MB, attention's stages about 1 MB; past this the least recently used session's results are
# dropped (its token and stage pickers then show nothing until the next run).
MAX_SESSIONS_WITH_RESULTS = 32
# A finished result nobody came to read (a POST to /gradio_api/call/<endpoint> whose GET never
# came, a queue/join without queue/data) is dropped after this long ...
UNREAD_RESULT_WAIT_S = 30.0
# ... or, the oldest first, as soon as such results together take more than this (estimated
# Python memory; one 1024 x 1024 positional-encoding table is about 34 MB). Small results are
# never dropped early, however many clients are slow to open their stream at once.
MAX_UNREAD_BYTES = 64 * 2**20
# Work nobody reads: an event whose session has had no result stream open for this long since it
# was submitted is stopped (queued: never runs; a generation: stops at its next update). The page
# and gradio_client open their stream within milliseconds of the POST, a script's GET follows its
# POST; a job nobody came for held a generation slot for up to a minute (6 of them made the next
# user wait 25 s; before the context shift, 188 s).
# PLAYGROUND_READER_GRACE_S sets it (seconds, 0.5-600): a shorter grace stops abandoned work
# sooner, a longer one waits for slow scripts. The sweep runs every second, or every half grace.
READER_GRACE_ENV = "PLAYGROUND_READER_GRACE_S"


def reader_grace_s() -> float:
    """``PLAYGROUND_READER_GRACE_S`` (seconds from 0.5 to 600), 5 when unset or not such a number."""
    raw = os.environ.get(READER_GRACE_ENV, "").strip()
    if not raw:
        return 5.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0.5 <= value <= 600:  # (nan is refused here too)
        log.warning("%s=%r is not a number of seconds from 0.5 to 600: using 5", READER_GRACE_ENV, raw)
        return 5.0
    return value


READER_GRACE_S = reader_grace_s()
SWEEP_EVERY_S = min(1.0, READER_GRACE_S / 2)
TRIM_EVERY_S = 5.0

API = "/gradio_api"


def _json_response(status: int, detail: str, headers: dict[str, str] | None = None):
    from starlette.responses import JSONResponse

    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _compact_bytes(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


# --- memory: what a session keeps ------------------------------------------------------------


class LeanSessionState(SessionState):
    """Gradio's session state less ``config_values``: the copy of every component's config,
    with the last value each input and output took, that Gradio keeps only to serve deep links
    (off in this app). Building that copy took ~0.1 s of CPU and ~290 KB per new session; the
    values (a 5 MB text, a 1024 x 1024 table) were kept until the session was evicted.

    What stays: the session's ``gr.State`` values and the components an event updated (a slider's
    new maximum), exactly as Gradio keeps them."""

    def __init__(self, blocks: gr.Blocks):  # noqa: D107 -- no super().__init__: it builds config_values
        self.blocks_config = copy(blocks.default_config)
        self.config_values: dict[int, Any] = {}
        self.state_data: dict[int, Any] = {}
        self._state_ttl: dict[int, Any] = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 3600  # Gradio's: a closed tab's state lives an hour

    def __setitem__(self, key: int, value: Any) -> None:
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, gr.State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value

    def _update_config(self, key: int) -> None:
        pass

    def _update_value_in_config(self, key: int, value: Any) -> None:
        pass


class BoundedStateHolder(StateHolder):
    """Gradio's store of sessions with :class:`LeanSessionState` sessions, at most
    ``capacity`` of them (Gradio's least-recently-used eviction), of which at most
    ``max_with_results`` keep their ``gr.State`` values."""

    def __init__(self, capacity: int = MAX_SESSIONS, max_with_results: int = MAX_SESSIONS_WITH_RESULTS):
        super().__init__()
        self.capacity = capacity
        self.max_with_results = max_with_results

    def set_blocks(self, blocks: gr.Blocks) -> None:
        self.blocks = blocks
        blocks.state_holder = self

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = LeanSessionState(self.blocks)
        self.update(session_id)
        self.time_last_used[session_id] = datetime.datetime.now()
        return self.session_data[session_id]

    def update(self, session_id: str) -> None:
        super().update(session_id)  # most recent last; past capacity the oldest session goes
        with self.lock:
            holding = [sid for sid, session in self.session_data.items() if session.state_data]
        for sid in holding[: max(0, len(holding) - self.max_with_results)]:
            session = self.session_data.get(sid)
            if sid != session_id and session is not None:
                self._drop_results(session)

    @staticmethod
    def _drop_results(session: SessionState) -> None:
        """All of a session's ``gr.State`` values, including the copy of a default Gradio makes
        when a State is first read (``delete_state`` leaves that one: it only knows the values
        an event set)."""
        for key, value in list(session.state_data.items()):
            block = session.blocks_config.blocks.get(key)
            if isinstance(block, gr.State):
                block.delete_callback(value)
        session.state_data.clear()
        session._state_ttl.clear()


def bound_sessions(app: Any) -> BoundedStateHolder:
    """Give the launched app (``demo.app``) a :class:`BoundedStateHolder`; called at start-up,
    before the first request."""
    holder = BoundedStateHolder()
    holder.set_blocks(app.get_blocks())
    app.state_holder = holder
    return holder


# --- memory: results nobody reads ------------------------------------------------------------


def approx_bytes(value: Any, depth: int = 0) -> int:
    """About how much memory ``value`` (a result: JSON-like dicts, lists, strings, numbers)
    takes as Python objects, in microseconds even for a 1024 x 1024 table: long lists are
    estimated from 16 of their items."""
    if isinstance(value, str):
        return 50 + len(value)
    if isinstance(value, (bytes, bytearray)):
        return 40 + len(value)
    if value is None or isinstance(value, (bool, int, float)):
        return 24  # the object; the list or dict holding it adds its pointer
    if depth > 12:
        return 64
    if isinstance(value, dict):
        items = list(value.items())
        sample = items if len(items) <= 32 else items[:: len(items) // 16][:16]
        each = sum(approx_bytes(k, depth + 1) + approx_bytes(v, depth + 1) for k, v in sample) / max(1, len(sample))
        return int(100 + 24 * len(items) + each * len(items))
    if isinstance(value, (list, tuple)):
        sample = value if len(value) <= 32 else value[:: len(value) // 16][:16]
        each = sum(approx_bytes(x, depth + 1) for x in sample) / max(1, len(sample))
        return int(56 + (8 + each) * len(value))
    output = getattr(value, "output", None)  # Gradio's messages carry the result in .output
    if output is not None:
        return 200 + approx_bytes(output, depth + 1)
    return sys.getsizeof(value)


def drop_unread_results(queue: Any, first_seen: dict[str, tuple[int, float]], now: float) -> list[str]:
    """Drop the messages of sessions whose events have all finished but whose results nobody
    has read: after :data:`UNREAD_RESULT_WAIT_S`, or the oldest first while all of them together
    take more than :data:`MAX_UNREAD_BYTES`. A session still running or waiting for an event is
    left alone. ``first_seen`` (session -> (id of the oldest unread message, when it was first
    seen)) carries over between calls. Returns the sessions dropped; a client that comes for one
    of their results later is told so (:class:`RouteGuard`)."""
    waiting: list[tuple[float, str, int]] = []
    for session, messages in list(queue.pending_messages_per_session.items()):
        if messages.empty():
            first_seen.pop(session, None)
            continue
        events = queue.pending_event_ids_session.get(session, ())
        if any(event_id in queue.event_ids_to_events for event_id in events):
            continue  # queued or running: the messages are being produced (and read, or not)
        unread = list(messages._queue)  # asyncio.Queue's deque: what nobody has taken yet
        seen = first_seen.get(session)
        if seen is None or seen[0] != id(unread[0]):  # new, or someone read since the last sweep
            seen = first_seen[session] = (id(unread[0]), now)
        waiting.append((seen[1], session, sum(approx_bytes(m) for m in unread)))
    waiting.sort(key=lambda item: item[0])  # stable: ties keep the queue's order, oldest session first
    total = sum(size for _, _, size in waiting)
    dropped = []
    for since, session, size in waiting:
        if total > MAX_UNREAD_BYTES or now - since >= UNREAD_RESULT_WAIT_S:
            dropped.append(session)
            total -= size
    for session in dropped:
        queue.pending_messages_per_session.pop(session, None)
        queue.pending_event_ids_session.pop(session, None)
        first_seen.pop(session, None)
    # Gradio empties a session's set of pending events as their results are read but never
    # removes it: one entry per session ever seen, forever. (No await between push creating a
    # set and adding to it, so an empty set here belongs to no event.)
    for session, events in list(queue.pending_event_ids_session.items()):
        if not events:
            del queue.pending_event_ids_session[session]
    return dropped


def _malloc_trim() -> Callable[[], Any] | None:
    """glibc's ``malloc_trim(0)``, or None elsewhere (macOS, Windows, musl)."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


async def _sweep(queue: Any, readers: ResultReaders | None = None) -> None:
    """Every SWEEP_EVERY_S: stop work nobody reads (with ``readers``), drop unread results; every
    TRIM_EVERY_S: hand freed memory back to the system. A 1024 x 1024 table passes through ~100 MB of short-lived objects on its way
    out; glibc keeps the freed pages of its heap unless asked (150 requests with such tables:
    RSS settled 190 MB above its start without trimming, 85 MB with it)."""
    first_seen: dict[str, tuple[int, float]] = {}
    trim = _malloc_trim()
    last_trim = time.monotonic()
    while True:
        await asyncio.sleep(SWEEP_EVERY_S)
        try:
            if readers is not None:
                stopped = await stop_unread_work(queue, readers, time.monotonic())
                if stopped:
                    log.info("stopped %d event(s) nobody reads", len(stopped))
            dropped = drop_unread_results(queue, first_seen, time.monotonic())
            if dropped:
                log.info("dropped %d unread result(s)", len(dropped))
            if trim is not None and time.monotonic() - last_trim >= TRIM_EVERY_S:
                last_trim = time.monotonic()
                trim(0)  # ~0.3-5 ms
        except Exception:  # noqa: BLE001 -- the sweeper must outlive any surprise
            log.exception("sweeping unread results failed")


# --- work nobody reads --------------------------------------------------------------------------


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


def unread_events(queue: Any, readers: ResultReaders, now: float) -> list[Any]:
    """The events nobody reads (see :class:`ResultReaders`) that stopping would spare work:
    queued ones, and running ones that stream (a generation; a one-shot handler cannot be
    stopped half-way, its result waits for a reader as any other, :func:`drop_unread_results`)."""
    queued = [event for waiting in list(queue.event_queue_per_concurrency_id.values()) for event in list(waiting.queue)]
    running = [event for job in list(queue.active_jobs) if job for event in job if event.fn.types_generator]
    return [
        event
        for event in queued + running
        if event.alive and not readers.reading(event.session_hash, event.enqueue_time, now)
    ]


def unread_stop_message() -> str:
    """What a late reader of a stopped event is told."""
    return (
        f"Stopped: nobody opened this request's result stream within {READER_GRACE_S:g} s of the request, so the "
        "app stopped its work. Open the stream right after the POST: GET /gradio_api/call/<endpoint>/<event_id> "
        "after /gradio_api/call/<endpoint>, GET /gradio_api/queue/data?session_hash=... after queue/join "
        "(gradio_client and the page do). Send it again."
    )


async def stop_unread_work(queue: Any, readers: ResultReaders, now: float) -> list[str]:
    """Stop :func:`unread_events` as Gradio stops the events of a client that closed its stream
    (``clean_events``): a queued one leaves the queue and never runs; a running one is no longer
    ``alive``, so Gradio stops iterating it after its current update and closes it (a generation's
    ``finally`` closes the engine's stream). Whoever comes for one later gets an error saying why
    (kept like any unread result: :func:`drop_unread_results`). Returns the events' ids."""
    stopped = []
    for event in unread_events(queue, readers, now):
        await queue.clean_events(event_id=event._id)
        messages = queue.pending_messages_per_session.get(event.session_hash)
        if messages is not None:
            output = {"error": unread_stop_message(), "title": "Stopped: nobody read the result", "visible": True}
            messages.put_nowait(ProcessCompletedMessage(event_id=event._id, output=output, success=False))
        stopped.append(event._id)
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
        if path.rstrip("/") == f"{API}/queue/data":
            from starlette.datastructures import QueryParams

            return QueryParams(scope.get("query_string", b"")).get("session_hash")
        if match := _CALL_GET.fullmatch(path):
            event_id = match.group(2)
            queue = self.demo._queue
            event = queue.event_ids_to_events.get(event_id)
            if event is not None:
                return event.session_hash
            # As Gradio's route finds it: a finished event's session still holds its id.
            return next((s for s, ids in list(queue.pending_event_ids_session.items()) if event_id in ids), event_id)
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


# --- requests: size, routes, files -------------------------------------------------------------


def _header(scope: dict, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


class BodySizeLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets HTTP 413 before it is read. A
    declared ``Content-Length`` is checked before anything is received; a chunked body is cut
    off as soon as it passes the cap (the app sees the client go away; its answer is dropped)."""

    def __init__(self, app: Callable, max_bytes: int = limits.MAX_REQUEST_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> Any:
        return _json_response(
            413,
            f"Request body too large: the limit is {self.max_bytes:,} bytes ({_compact_bytes(self.max_bytes)}), "
            "far above any valid input (the largest, 50,000 characters of token ids, is 50 KB as ASCII).",
            headers={"Connection": "close"},
        )

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _json_response(400, "Content-Length is not a number")(scope, receive, send)
                return
            if size > self.max_bytes:
                await self._too_large()(scope, receive, send)
                return
        received = 0
        refused = started = False

        async def capped_receive() -> dict:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    if not started:
                        await self._too_large()(scope, receive, send)
                    refused = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict) -> None:
            nonlocal started
            if refused and not started:
                return  # the 413 went out; the app's own answer to a cut-off body is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, capped_receive, guarded_send)


# A Range header Gradio's file route parses (it answers 500 to others, e.g. two ranges):
# one range of bytes, first-last (last >= first), first- or -suffix.
_SINGLE_RANGE = re.compile(r"bytes=(?:(\d+)-(\d*)|-(\d+))")
_FILE_ROUTES = (f"{API}/file=", f"{API}/file/")
_CALL_POST = re.compile(rf"{API}/(call/v2|call|run|api)/([^/]+)/?")
_CALL_GET = re.compile(rf"{API}/call/(?:v2/)?([^/]+)/([^/]+)/?")


# A session id is a short token: the page makes ~11 base-36 characters, gradio_client a UUID (36).
SESSION_HASH = re.compile(r"[A-Za-z0-9_-]{1,64}")
_QUEUE_DATA = f"{API}/queue/data"
_HEARTBEAT = f"{API}/heartbeat/"


def session_problem(session: Any) -> str | None:
    """Why ``session`` cannot be a session id, or None."""
    if isinstance(session, str) and SESSION_HASH.fullmatch(session):
        return None
    shown = f"{len(session):,} characters" if isinstance(session, str) else type(session).__name__
    return (f"session_hash must be a short token: 1 to 64 letters, digits, '-' or '_' (got {shown}); "
            "the page and gradio_client make one for you.")


def _usable_range(value: bytes) -> bool:
    match = _SINGLE_RANGE.fullmatch(value.decode("latin-1").strip())
    if match is None:
        return False
    first, last = match.group(1), match.group(2)
    return not (first and last) or int(first) <= int(last)


class RouteGuard:
    """ASGI middleware for the routes Gradio opens whatever the app uses:

    - files: only the ``allowed`` ones (the Model tab's downloads), not the shared Gradio
      cache of other apps on the machine nor any other path (403); a ``Range`` header other
      than one valid range of bytes is ignored, so the whole file is sent (Gradio answered 500
      to two ranges);
    - ``/gradio_api/deep_link``: off (404); sessions keep no values to link to;
    - ``/gradio_api/upload``: off (413) unless ``uploads``; no tab takes a file;
    - ``/gradio_api/call|run|api/<name>``: an unknown or private name gets 404 naming the
      endpoints, instead of a bare 500; the keyword form (``call/v2``) answers a bad argument
      with 400 and Gradio's message, instead of a bare 500;
    - ``GET /gradio_api/call/<name>/<event_id>`` for an event the queue does not hold (unknown,
      already read, or dropped unread) gets 404 saying so, instead of an SSE ``"404: Not Found"``.
    """

    def __init__(self, app: Callable, demo: gr.Blocks, allowed: Sequence[Path], uploads: bool = False):
        self.app = app
        self.demo = demo
        self.uploads = uploads
        self.allowed = [Path(p).resolve() for p in allowed]
        self.endpoints = sorted(
            fn.api_name for fn in demo.fns.values() if fn.fn is not None and fn.api_visibility == "public"
        )
        self.callable = set(self.endpoints) | {
            fn.api_name for fn in demo.fns.values() if fn.fn is not None and fn.api_visibility == "undocumented"
        }

    def _file_allowed(self, path: str) -> bool:
        from gradio.utils import abspath, is_in_or_equal

        if "://" in path or path.startswith(("http:", "https:", "file:", "data:")):
            return False
        try:
            target = abspath(path)
            return any(is_in_or_equal(target, allowed) for allowed in self.allowed)
        except (OSError, ValueError):
            return False

    def _unknown_endpoint(self, name: str) -> Any:
        listed = ", ".join(f"/{n}" for n in self.endpoints)
        return _json_response(404, f"No API endpoint /{name}. The endpoints are {listed} (see /gradio_api/info).")

    def _event_known(self, event_id: str) -> bool:
        queue = self.demo._queue
        return event_id in queue.event_ids_to_events or any(
            event_id in ids for ids in list(queue.pending_event_ids_session.values())
        )

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        if path.startswith(_FILE_ROUTES):
            file_path = path[len(_FILE_ROUTES[0]):]
            if not self._file_allowed(file_path):
                response = _json_response(403, "File not allowed: only the ONNX downloads (the Model tab's files) are served.")
                await response(scope, receive, send)
                return
            value = _header(scope, b"range")
            if value is not None and not _usable_range(value):
                scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k.lower() != b"range"])
        elif method == "GET" and (path.rstrip("/") == _QUEUE_DATA or path.startswith(_HEARTBEAT)):
            if path.startswith(_HEARTBEAT):
                session = path[len(_HEARTBEAT):]
            else:
                from starlette.datastructures import QueryParams

                session = QueryParams(scope.get("query_string", b"")).get("session_hash")
            if problem := session_problem(session):
                await _json_response(400, problem)(scope, receive, send)
                return
            if not path.startswith(_HEARTBEAT) and session not in self.demo._queue.pending_messages_per_session:
                detail = (f"No session {session} in the queue: POST /gradio_api/queue/join first (its results "
                          "stream here), or the session's results were already read or dropped unread.")
                await _json_response(404, detail)(scope, receive, send)
                return
        elif path.rstrip("/") == f"{API}/upload" and not self.uploads:
            # Gradio's max_file_size=0 still let an empty file through: 1,000 of them were 1,000
            # files in its shared temporary folder.
            detail = "Uploads are off: no tab of this app takes a file."
            await _json_response(413, detail, headers={"Connection": "close"})(scope, receive, send)
            return
        elif path.rstrip("/") == f"{API}/deep_link":
            await _json_response(404, "Deep links are off in this app.")(scope, receive, send)
            return
        elif method == "POST" and (match := _CALL_POST.fullmatch(path)):
            route, name = match.groups()
            known = self.endpoints if route == "call/v2" else self.callable
            if name not in known:
                await self._unknown_endpoint(name)(scope, receive, send)
                return
            if route == "call/v2":
                await self._call_v2(scope, receive, send)
                return
        elif method == "GET" and (match := _CALL_GET.fullmatch(path)):
            name, event_id = match.groups()
            if name not in self.callable:
                await self._unknown_endpoint(name)(scope, receive, send)
                return
            if not self._event_known(event_id):
                detail = (
                    f"No result for event {event_id}: it is unknown, was already read, or was dropped unread "
                    f"(a result waits {UNREAD_RESULT_WAIT_S:g} s for its reader, a big one less while others "
                    "pile up). POST again."
                )
                await _json_response(404, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _call_v2(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Gradio's keyword route raises TypeError/ValueError (a bare 500) for a missing,
        unknown or doubled argument; its message is clear, so send it with a 400."""
        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except (TypeError, ValueError) as err:
            if started:
                raise
            await _json_response(400, str(err))(scope, receive, send)


# --- requests: argument counts and Gradio's own errors --------------------------------------


def _parameter_names(fn: Any) -> list[str]:
    """The names a client sees: a ``gr.api`` endpoint's Python parameters, else the labels of
    the event's input components."""
    if all(type(block).__name__ == "Api" for block in fn.inputs) and fn.fn is not None:
        try:
            return list(inspect.signature(fn.fn).parameters)
        except (TypeError, ValueError):
            pass
    names = []
    for block in fn.inputs:
        label = getattr(block, "label", None)
        kind = type(block).__name__.lower()
        names.append(f"{label} ({kind})" if label else kind)
    return names


def _event_name(fn: Any) -> str:
    if fn.api_visibility != "private":
        return f"/{fn.api_name}"
    return f"event {fn._id} ({fn.name})" if fn.name else f"event {fn._id}"


def event_problem(demo: gr.Blocks, fn_index: Any) -> str | None:
    """Why no request can run event ``fn_index``, or None."""
    fn = demo.fns.get(fn_index) if isinstance(fn_index, int) else None
    if fn is None:
        endpoints = ", ".join(sorted(f"/{f.api_name}" for f in demo.fns.values() if f.api_visibility == "public"))
        return f"There is no event {fn_index!r} in this app. Its API endpoints are {endpoints} (see /gradio_api/info)."
    if fn.fn is None:
        return f"{_event_name(fn)} runs in the page only: there is nothing to call on the server."
    return None


def arity_problem(fn: Any, data: Any) -> str | None:
    """Why ``data`` is not an argument list for ``fn``, or None."""
    if fn.batch or not isinstance(data, list):
        return None
    names = _parameter_names(fn)
    if len(data) == len(names):
        return None
    plural = "" if len(names) == 1 else "s"
    return f"{_event_name(fn)} takes {len(names)} argument{plural} ({', '.join(names) or 'none'}); this request sent {len(data)}."


def _env_count(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if raw.isdigit() and 1 <= int(raw) <= 100_000:
        return int(raw)
    if raw:
        log.warning("%s=%r is not a whole number from 1 to 100000: using %d", name, raw, default)
    return default


# Requests queued or running at once from one client address: one client that submits and never
# reads (or reads too slowly for its socket ever to fill) holds at most this many places. The page
# makes a few at once, a script as many as its threads; the default stays above what the queue
# holds for generations (16 running, 24 waiting), which a load test from one machine fills. A
# server reached directly can set it lower (PLAYGROUND_MAX_EVENTS_PER_ADDRESS); behind a proxy
# every client has the proxy's address.
MAX_EVENTS_PER_ADDRESS_ENV = "PLAYGROUND_MAX_EVENTS_PER_ADDRESS"
MAX_EVENTS_PER_ADDRESS = _env_count(MAX_EVENTS_PER_ADDRESS_ENV, 64)


class EventsPerAddress:
    """The events each client address has in the queue (waiting or running)."""

    def __init__(self) -> None:
        self.events: dict[str, set[str]] = {}

    def pending(self, queue: Any, address: str) -> int:
        live = {e for e in self.events.get(address, ()) if e in queue.event_ids_to_events}
        if live:
            self.events[address] = live
        else:
            self.events.pop(address, None)
        return len(live)

    def add(self, address: str, event_id: str) -> None:
        self.events.setdefault(address, set()).add(event_id)


def refuse_malformed(demo: gr.Blocks) -> None:
    """Refuse, when it arrives, a request for an event that does not exist or runs only in the
    page, or whose session id is not a short token: HTTP 400 with a message naming the endpoints;
    past :data:`MAX_EVENTS_PER_ADDRESS` requests waiting or running from one client address,
    HTTP 503 "Busy" with a message (Gradio answered a bare 500, or ran it and
    answered ``{"error": null}``). Wraps the queue's ``push`` (Gradio 6.31 internals) after
    ``demo.queue()``."""
    queue = demo._queue
    push = queue.push
    per_address = EventsPerAddress()

    async def push_checked(body: Any, request: Any, username: Any):
        if body.fn_index is not None and (problem := event_problem(demo, body.fn_index)):
            return False, problem, "error"
        if body.session_hash is not None and (problem := session_problem(body.session_hash)):
            return False, problem, "error"
        address = getattr(getattr(request, "client", None), "host", None) or "?"
        if (pending := per_address.pending(queue, address)) >= MAX_EVENTS_PER_ADDRESS:
            return False, (f"Busy: {pending} requests from your address are already waiting or running (at most "
                           f"{MAX_EVENTS_PER_ADDRESS}); read their results, or wait for one to finish."), "queue_full"
        success, event_id, state = await push(body, request, username)
        if success:
            per_address.add(address, event_id)
        return success, event_id, state

    queue.push = push_checked


def _processing_message(fn: Any, err: Exception) -> str:
    if isinstance(err, ComponentProcessingError):
        # Gradio's text names the input, its component and the value; its last paragraph is the
        # internal exception, which says nothing more to a client.
        return str(err).split("\n\nOriginal error:")[0].strip()
    return (
        f"{_event_name(fn)} could not use this request's values ({type(err).__name__}). "
        f"It takes: {', '.join(_parameter_names(fn)) or 'no arguments'}."
    )


def explain_errors(demo: gr.Blocks) -> None:
    """Answer with a message (a ``gr.Error``: ``event: error`` with the text over raw HTTP,
    ``AppError`` in gradio_client) what Gradio answered ``{"error": null}`` plus a traceback in
    the log, or ran anyway:

    - a wrong number of arguments: the message names the event's parameters (Gradio failed on
      too few and silently dropped extra ones);
    - an error raised by Gradio itself while preparing a request, e.g. ``null`` for a slider.

    The app's handlers already answer with messages (``common.user_errors``); those pass
    through unchanged. Wraps ``demo.process_api`` (Gradio 6.31)."""
    process_api = demo.process_api

    async def process_api_explained(block_fn: Any, inputs: Any, *args: Any, **kwargs: Any):
        fn = demo.fns[block_fn] if isinstance(block_fn, int) else block_fn
        # A generator's later steps come back with its iterator and no inputs.
        if kwargs.get("iterator") is None and (problem := arity_problem(fn, inputs)):
            raise gr.Error(problem, title="Invalid request", print_exception=False)
        try:
            return await process_api(block_fn, inputs, *args, **kwargs)
        except gr.Error as err:
            if err.print_exception:  # raised by a component (a slider's range): one line, no traceback
                err.print_exception = False
                log.warning("refused a request to %s: %s", _event_name(fn), err.message)
            raise
        except Exception as err:  # noqa: BLE001 -- every error becomes a message
            message = _processing_message(fn, err)
            log.warning("refused a request to %s: %s", _event_name(fn), message.splitlines()[0])
            raise gr.Error(message, title="Invalid request", print_exception=False) from None

    demo.process_api = process_api_explained


# --- installing it all ---------------------------------------------------------------------------


def _quiet_analytics(demo: gr.Blocks) -> None:
    """With monitoring off nobody reads the queue's per-event analytics, yet Gradio keeps
    10,000 records and rebuilds a pandas summary of all of them after every event."""
    queue = demo._queue
    queue.ANALYTICS_MAX_EVENTS = 1
    queue.compute_analytics_summary = lambda records: queue.cached_event_analytics_summary


def harden(demo: gr.Blocks) -> None:
    """Install the request checks on the queue (call after ``demo.queue()``)."""
    refuse_malformed(demo)
    explain_errors(demo)
    _quiet_analytics(demo)


def launch_options(demo: gr.Blocks, allowed: Sequence[Path], readers: ResultReaders | None = None) -> dict[str, Any]:
    """The ``demo.launch`` arguments that bound memory and requests (see the module's doc);
    ``allowed``: the files (or folders) that may be downloaded, the Model tab's; ``readers``:
    where the result streams open are counted (a new :class:`ResultReaders` by default)."""
    from starlette.middleware import Middleware

    readers = readers if readers is not None else ResultReaders()

    @asynccontextmanager
    async def lifespan(app: Any):
        bound_sessions(app)
        connections.rate_limit_logs()
        tasks = [
            asyncio.create_task(connections.install_when_started(demo)),  # header timeout, connection caps
            asyncio.create_task(_sweep(demo._queue, readers)),
        ]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()

    return dict(
        app_kwargs={
            "middleware": [
                Middleware(BodySizeLimit, max_bytes=limits.MAX_REQUEST_BYTES),
                gzip_middleware(),  # the page and JSON, gzipped (compression.py)
                Middleware(RouteGuard, demo=demo, allowed=allowed),
                Middleware(TrackReaders, demo=demo, readers=readers),  # after RouteGuard: refused GETs read nothing
            ],
            "lifespan": lifespan,
        },
        state_session_capacity=MAX_SESSIONS,
        enable_monitoring=False,  # /monitoring and /monitoring/summary: 403
    )
