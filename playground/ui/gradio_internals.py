"""Every use of Gradio's internals, in one place: what the app needs from Gradio and Gradio has no
public way to give. Everything else goes through Gradio's public API (``launch`` arguments,
``gr.State``, ``gr.set_static_paths``, its environment variables).

What is reached, and why:

- sessions: Gradio's ``SessionState`` builds, for every new session, a copy of every component's
  config and keeps the last value each input and output took, only to serve deep links (CPU and
  memory for every session, plus the values: a refused 5 MB text, a 1024 x 1024 table;
  docs/app.md, "Serving").
  :class:`LeanSessionState` keeps what the app uses (``gr.State`` values, components an event
  updated), installed by :func:`use_lean_sessions`, which also decides which sessions make room
  for a new one (per visitor, not Gradio's one least-recently-used line);
- the request a handler is running for (:func:`current_request`: Gradio's request context), and
  whether a session is one Gradio knows (:func:`session_known`);
- the queue: who gets in (:func:`gate_pushes`: session ids, requests per client address,
  requests waiting per concurrency group), a waiting request failed to make room for another
  (:func:`fail_waiting`: Gradio removes waiting events only for a client that left), which results nobody has read
  (:func:`unread_results`, :func:`drop_results`), which events may be stopped and stopping them
  with a message (:func:`stoppable_jobs`, :func:`stop_job`);
- errors inside Gradio's own processing of a request (a missing argument, ``null`` for a slider),
  which it answers ``{"error": null}`` and prints with a traceback, past the log's rate limit
  (:func:`on_processing_error`);
- route shapes: the paths of Gradio's routes the app's ASGI middleware guards (:data:`API`...);
- Gradio's shared folders, refused as file downloads (:func:`gradio_folders`), and the server
  Gradio starts (:func:`server_of`).

It was written against :data:`TESTED_GRADIO` (requirements.txt pins it, README.md's
``sdk_version`` too). :func:`check` runs at start-up: if any name or signature used here has moved
(:func:`moved`), the app refuses to start and names them: each patch would otherwise fail in the
middle of a request, or silently stop bounding memory on a public server. On another version whose
shapes still match, it starts and warns once, naming both versions. tests/serving/test_gradio_internals.py
fails when any of them changes; to move to a new Gradio, run it and the memory and abuse tests
(test_abuse, test_security, test_resources, test_orphaned_work, test_public_load), then update
:data:`TESTED_GRADIO` with the pin.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import inspect
import logging
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from copy import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr
from gradio.context import LocalContext
from gradio.queueing import Event, EventQueue, ProcessTime, Queue
from gradio.server_messages import ProcessCompletedMessage
from gradio.state_holder import SessionState, StateHolder

__all__ = [
    "TESTED_GRADIO", "API", "FILE_ROUTES", "QUEUE_DATA", "HEARTBEAT", "UPLOAD", "DEEP_LINK", "CALL_GET",
    "LeanSessionState", "LeanStateHolder", "use_lean_sessions", "current_request", "session_known",
    "Arrival", "Refusal", "gate_pushes", "queue_load", "waiting_events", "reorder_waiting", "fail_waiting", "queue_of", "live", "waiting", "event_known", "session_of_event", "holds_session",
    "unread_results", "drop_results", "forget_read_sessions", "Job", "stoppable_jobs", "stop_job",
    "event_name", "with_trailing_defaults", "on_processing_error", "messages_for_every_error", "server_of", "gradio_folders", "probe_app", "moved", "check",
    "SELF_CHECK_WAIT_S", "patient_self_check", "flat_lists_unwalked",
]

log = logging.getLogger("playground")

TESTED_GRADIO = "6.31.0"

# --- route shapes ------------------------------------------------------------------------------

API = "/gradio_api"
FILE_ROUTES = (f"{API}/file=", f"{API}/file/")  # a file by its path, or an http(s) URL Gradio fetches
QUEUE_DATA = f"{API}/queue/data"  # GET ?session_hash=...: the session's result stream
HEARTBEAT = f"{API}/heartbeat/"  # GET <session_hash>
UPLOAD = f"{API}/upload"
DEEP_LINK = f"{API}/deep_link"
CALL_GET = re.compile(rf"{API}/call/(?:v2/)?([^/]+)/([^/]+)/?")  # GET <endpoint>/<event_id>: one event's results

# (method, a path) that must reach one of Gradio's routes: what the middleware guards is real.
ROUTE_SAMPLES = (
    ("GET", f"{FILE_ROUTES[0]}/x"), ("GET", f"{FILE_ROUTES[1]}x"), ("GET", QUEUE_DATA), ("POST", f"{API}/queue/join"),
    ("GET", f"{HEARTBEAT}x"), ("POST", UPLOAD), ("GET", DEEP_LINK), ("GET", f"{API}/call/x/y"), ("POST", f"{API}/call/x"),
)


# --- sessions ------------------------------------------------------------------------------------


class LeanSessionState(SessionState):
    """Gradio's session state less ``config_values``, the copy of every component's config with
    the last value each input and output took, kept only for deep links. What stays: the
    session's ``gr.State`` values and the components an event updated (a slider's new maximum),
    exactly as Gradio keeps them."""

    def __init__(self, blocks: gr.Blocks):  # no super().__init__: it builds config_values
        self.blocks_config = copy(blocks.default_config)
        self.config_values: dict[int, Any] = {}
        self.state_data: dict[int, Any] = {}
        self._state_ttl: dict[int, Any] = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 3600  # Gradio's: a closed tab's state lives an hour

    def __setitem__(self, key: int, value: Any) -> None:
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, gr.State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())  # time_to_live and delete_callback work
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value

    def _update_config(self, key: int) -> None:
        pass

    def _update_value_in_config(self, key: int, value: Any) -> None:
        pass


class LeanStateHolder(StateHolder):
    """Gradio's store of sessions (at most ``launch(state_session_capacity=...)``), of
    :class:`LeanSessionState` sessions. Which ones make room for a new one: with ``shares`` (a
    ``serving.sessions.VisitorShares``: ``add(key, owner)`` returns the keys to drop) and
    ``owner_of`` (session id -> its visitor), whichever ``shares`` says; without, Gradio's own
    (the least recently used). A session dropped has its ``gr.State`` values' delete callbacks
    called, as Gradio calls them when it deletes a closed session's state, so that what it kept
    elsewhere (a result store's entry) goes with it."""

    shares: Any = None
    owner_of: Callable[[str], str] = staticmethod(lambda session_id: "?")

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = LeanSessionState(self.blocks)
        return super().__getitem__(session_id)

    def update(self, session_id: str) -> None:
        if self.shares is None:
            super().update(session_id)
            return
        dropped = []
        with self.lock:
            if session_id not in self.session_data:
                return
            self.session_data.move_to_end(session_id)
            if session_id in self.shares:
                self.shares.touch(session_id)
            else:
                for victim in self.shares.add(session_id, self.owner_of(session_id)):
                    state = self.session_data.pop(victim, None)
                    self.time_last_used.pop(victim, None)
                    if state is not None:
                        dropped.append(state)
        for state in dropped:
            _forget(state)


def _forget(state: SessionState) -> None:
    """Call the delete callbacks of a dropped session's ``gr.State`` values."""
    try:
        for component, value, _ in list(state.state_components):
            component.delete_callback(value)
    except Exception:  # noqa: BLE001 -- a callback's failure must not fail the request that made room
        log.exception("forgetting a dropped session's state failed")


def use_lean_sessions(app: Any, shares: Any = None, owner_of: Callable[[str], str] | None = None) -> LeanStateHolder:
    """Give the launched app (``demo.app``) a :class:`LeanStateHolder` (with ``shares`` and
    ``owner_of``: see there); call at start-up (the app's lifespan), before the first request."""
    holder = LeanStateHolder()
    holder.set_blocks(app.get_blocks())
    holder.shares = shares
    if owner_of is not None:
        holder.owner_of = owner_of
    app.state_holder = holder
    return holder


def current_request() -> Any:
    """The ``gr.Request`` of the event whose handler runs on this thread (Gradio sets it before
    each call, and before each step of a generator), or None outside one."""
    return LocalContext.request.get(None)


TASK_SEPARATOR = "<gradio-sep>"  # Gradio names an event's task "<session>_<fn><gradio-sep><event id>"


def event_stopped() -> Callable[[], bool] | None:
    """In a handler's thread: a check, cheap enough to make every few milliseconds from that
    thread, whether Gradio has stopped the event it serves: its task cancelled (``/cancel``,
    gradio_client's ``Job.cancel``) or the event no longer alive (its client gone, or stopped
    unread). Gradio acts on either only once the handler returns or yields, which a generation
    waiting for its turn in the decoding loop does not do; it reads this instead. None outside a
    queued event's handler thread."""
    import anyio.from_thread

    event_id = LocalContext.event_id.get(None)
    blocks = LocalContext.blocks.get(None)
    if event_id is None or blocks is None or getattr(blocks, "_queue", None) is None:
        return None

    def find() -> tuple[Any, Any]:
        suffix = TASK_SEPARATOR + event_id
        task = next((t for t in asyncio.all_tasks() if t.get_name().endswith(suffix)), None)
        event = next((e for job in list(blocks._queue.active_jobs) if job for e in job if e._id == event_id), None)
        return task, event

    try:
        task, event = anyio.from_thread.run_sync(find)
    except RuntimeError:  # not a thread of Gradio's event loop
        return None
    return lambda: (task is not None and (task.done() or task.cancelling() > 0)) or (event is not None and not event.alive)


def session_known(demo: gr.Blocks, session: str) -> bool:
    """Whether Gradio knows session ``session``: it joined the queue (its events wait, run, or
    their results wait), or it has state (an event of it ran)."""
    queue = demo._queue
    holder = getattr(getattr(demo, "app", None), "state_holder", None)
    return (session in queue.pending_messages_per_session or session in queue.pending_event_ids_session
            or (holder is not None and session in holder.session_data))


# --- the queue: who gets in ---------------------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    """A request asking for a place in the queue (``queue/join``, or a POST to ``call/<endpoint>``)."""

    session: Any  # its session id as sent (None: Gradio makes one)
    concurrency_id: str | None  # its event's concurrency group; None for an unknown event
    address: str  # the client's address ("?" when unknown)


# What a gate answers: None to let the request in, or (message, kind) to refuse it: kind "error"
# is HTTP 400, "queue_full" HTTP 503 (the page's "busy", gradio_client's QueueError), as Gradio's own;
# or (message, kind, retry_after_s): then "queue_full" is HTTP 503 and "too_many" HTTP 429, both with
# a Retry-After header (the page shows a 429's message as an error, gradio_client raises it).
Refusal = tuple[str, str] | tuple[str, str, float] | None
REFUSAL_STATUS = {"queue_full": 503, "too_many": 429, "error": 400}


def _refused(refusal: tuple) -> Any:
    """The HTTP error a refusal with a time to try again raises from inside ``push``."""
    from fastapi import HTTPException

    message, kind, retry_after_s = refusal
    return HTTPException(REFUSAL_STATUS.get(kind, 503), detail=message,
                         headers={"Retry-After": str(max(1, int(round(retry_after_s))))})


def gate_pushes(demo: gr.Blocks, refuse: Callable[[Arrival], Refusal], admitted: Callable[[Arrival, str], None],
                visitor: Callable[[Any], str] | None = None) -> None:
    """Ask ``refuse`` about every request before Gradio queues it, and tell ``admitted`` the
    event id of each one queued. ``visitor``: who sent a request (given the FastAPI request; by
    default its ASGI client's address). Call after ``demo.queue()``; several gates chain (the
    last installed asks first)."""
    queue = demo._queue
    push = queue.push

    async def gated_push(body: Any, request: Any, username: Any):
        fn = demo.fns.get(body.fn_index) if isinstance(body.fn_index, int) else None
        if visitor is not None:
            address = visitor(request)
        else:
            address = getattr(getattr(request, "client", None), "host", None) or "?"
        arrival = Arrival(body.session_hash, None if fn is None else fn.concurrency_id, address)
        if (refusal := refuse(arrival)) is not None:
            if len(refusal) == 3:
                raise _refused(refusal)
            return False, refusal[0], refusal[1]
        success, event_id, state = await push(body, request, username)
        if success:
            admitted(arrival, event_id)
        return success, event_id, state

    queue.push = gated_push


def queue_load(demo: gr.Blocks) -> tuple[int, int | None]:
    """(requests waiting in the whole queue, the most it holds: ``demo.queue(max_size=...)``)."""
    queue = demo._queue
    return len(queue), queue.max_size


def waiting_events(demo: gr.Blocks, concurrency_id: str) -> list[Any]:
    """The events of a concurrency group waiting for a slot, first served first (the list
    Gradio takes them from: reorder it with :func:`reorder_waiting`)."""
    group = demo._queue.event_queue_per_concurrency_id.get(concurrency_id)
    return [] if group is None else list(group.queue)


def reorder_waiting(demo: gr.Blocks, concurrency_id: str, order: list[str]) -> None:
    """Put the group's waiting events in the order of their ids ``order`` (ids not named keep
    their place after those named). No await: Gradio's loop never sees the list half-sorted."""
    group = demo._queue.event_queue_per_concurrency_id.get(concurrency_id)
    if group is None:
        return
    rank = {event_id: i for i, event_id in enumerate(order)}
    group.queue.sort(key=lambda event: rank.get(event._id, len(rank)))


def fail_waiting(demo: gr.Blocks, concurrency_id: str, event_id: str, error: str, title: str,
                 retry_after: float | None = None) -> bool:
    """Take event ``event_id`` out of the group's waiting line before it runs, its reader told
    ``error`` (the page shows it as a toast, ``/call``'s stream sends it as its ``error`` event,
    with ``retry_after`` in seconds beside it); False when it no longer waits. No await:
    Gradio's loop, which takes events from the same list, never sees it half done, and the
    caller's decision still holds. Its session keeps the event id as pending until the reader
    takes the message, as for a finished event."""
    queue = demo._queue
    group = queue.event_queue_per_concurrency_id.get(concurrency_id)
    event = None if group is None else next((e for e in group.queue if e._id == event_id), None)
    if event is None:
        return False
    group.queue.remove(event)
    queue.event_ids_to_events.pop(event_id, None)
    event.alive = False
    output: dict[str, Any] = {"error": error, "title": title, "visible": True}
    if retry_after is not None:
        output["retry_after"] = retry_after
    messages = queue.pending_messages_per_session.get(event.session_hash)
    if messages is not None:
        messages.put_nowait(ProcessCompletedMessage(event_id=event_id, output=output, success=False))
    return True


def queue_of(demo: gr.Blocks) -> Queue:
    """``demo``'s queue, as the functions below take it (``demo.queue()`` made it)."""
    return demo._queue


def live(demo: gr.Blocks, event_id: str) -> bool:
    """Whether event ``event_id`` is waiting or running."""
    return event_id in demo._queue.event_ids_to_events


def waiting(demo: gr.Blocks, concurrency_id: str) -> int:
    """Events of a concurrency group waiting for a slot."""
    group = demo._queue.event_queue_per_concurrency_id.get(concurrency_id)
    return 0 if group is None else len(group.queue)


def group_load(demo: gr.Blocks, concurrency_id: str) -> tuple[int, int | None, int]:
    """(events of a concurrency group running, its concurrency limit (None: none), events waiting
    for a slot); (0, None, 0) for a group nothing has used yet."""
    group = demo._queue.event_queue_per_concurrency_id.get(concurrency_id)
    if group is None:
        return 0, None, 0
    return group.current_concurrency, group.concurrency_limit, len(group.queue)


def group_pass_s(demo: gr.Blocks, concurrency_id: str) -> float | None:
    """The mean seconds an event of a concurrency group has taken to run (Gradio's own timing of
    each function, the ETA it sends; weighted by runs), or None when none has run."""
    total = runs = 0.0
    for fn, timing in list(demo._queue.process_time_per_fn.items()):
        if getattr(fn, "concurrency_id", None) == concurrency_id and timing.count:
            total, runs = total + timing.process_time, runs + timing.count
    return total / runs if runs else None


def event_known(demo: gr.Blocks, event_id: str) -> bool:
    """Whether the queue holds event ``event_id``: waiting, running, or its results unread."""
    queue = demo._queue
    return event_id in queue.event_ids_to_events or any(event_id in ids for ids in list(queue.pending_event_ids_session.values()))


def session_of_event(demo: gr.Blocks, event_id: str) -> str | None:
    """The session whose result stream carries event ``event_id``'s results, or None."""
    queue = demo._queue
    event = queue.event_ids_to_events.get(event_id)
    if event is not None:
        return event.session_hash
    return next((s for s, ids in list(queue.pending_event_ids_session.items()) if event_id in ids), None)


def holds_session(demo: gr.Blocks, session: str) -> bool:
    """Whether the queue has results (read or not) for ``session``: what ``queue/data`` streams."""
    return session in demo._queue.pending_messages_per_session


# --- the queue: results nobody reads --------------------------------------------------------------


def unread_results(queue: Any) -> list[tuple[str, list]]:
    """``(session, messages)`` for every session whose events have all finished and whose
    messages (results, errors) nobody has taken yet, in the queue's order."""
    found = []
    for session, messages in list(queue.pending_messages_per_session.items()):
        if messages.empty():
            continue
        events = queue.pending_event_ids_session.get(session, ())
        if any(event_id in queue.event_ids_to_events for event_id in events):
            continue  # queued or running: the messages are being produced (and read, or not)
        found.append((session, list(messages._queue)))  # asyncio.Queue's deque: no public peek
    return found


def drop_results(queue: Any, session: str) -> None:
    """Forget ``session``'s unread messages; a late reader finds no such session."""
    queue.pending_messages_per_session.pop(session, None)
    queue.pending_event_ids_session.pop(session, None)


def forget_read_sessions(queue: Any) -> None:
    """Gradio empties a session's set of pending events as their results are read but never
    removes it: one entry per session ever seen, forever. (No await between push creating a
    set and adding to it, so an empty set here belongs to no event.)"""
    for session, events in list(queue.pending_event_ids_session.items()):
        if not events:
            del queue.pending_event_ids_session[session]


# --- the queue: stopping work ---------------------------------------------------------------------


class Job(NamedTuple):
    """An event that stopping would spare work."""

    id: str
    session: str
    submitted: float  # time.monotonic() when it was queued


def stoppable_jobs(queue: Any) -> list[Job]:
    """Events still alive that stopping would spare work: waiting ones, and running ones that
    stream (a generator; a one-shot handler cannot be stopped half-way)."""
    queued = [event for group in list(queue.event_queue_per_concurrency_id.values()) for event in list(group.queue)]
    running = [event for job in list(queue.active_jobs) if job for event in job if event.fn.types_generator]
    return [Job(e._id, e.session_hash, e.enqueue_time) for e in queued + running if e.alive]


async def stop_job(queue: Any, job: Job, error: str, title: str) -> None:
    """Stop ``job`` as Gradio stops the events of a client that closed its stream
    (``clean_events``): waiting, it leaves the queue and never runs; running, it is no longer
    alive, so Gradio stops iterating it after its current update and closes it. Whoever reads
    its session later gets ``error`` (kept like any unread result)."""
    await queue.clean_events(event_id=job.id)
    messages = queue.pending_messages_per_session.get(job.session)
    if messages is not None:
        output = {"error": error, "title": title, "visible": True}
        messages.put_nowait(ProcessCompletedMessage(event_id=job.id, output=output, success=False))


# --- errors inside Gradio's processing -------------------------------------------------------------


def event_name(fn: Any) -> str:
    """How a client names event ``fn``: its endpoint, or the page's event by number and handler."""
    if fn.api_visibility != "private":
        return f"/{fn.api_name}"
    return f"event {fn._id} ({fn.name})" if fn.name else f"event {fn._id}"


def with_trailing_defaults(fn: Any, inputs: Any) -> Any:
    """``inputs`` of a public endpoint, the parameters a caller left out at the end filled with the
    handler's defaults. Gradio refuses a short list ("didn't receive enough input values") even
    where the handler has defaults, so a parameter added last with a default would break every
    raw HTTP caller that sends the old list; gradio_client fills them in from /info itself. The
    handler's leading parameters are the endpoint's inputs (a ``gr.Request`` comes after them)."""
    if getattr(fn, "api_visibility", "private") == "private" or not isinstance(inputs, list):
        return inputs
    wanted = len(fn.inputs)
    if len(inputs) >= wanted:
        return inputs
    try:
        params = list(inspect.signature(fn.fn).parameters.values())[:wanted]
    except (TypeError, ValueError):
        return inputs
    missing = params[len(inputs):]
    if len(params) < wanted or any(p.default is inspect.Parameter.empty for p in missing):
        return inputs  # Gradio's own message then says what is missing
    return [*inputs, *(p.default for p in missing)]


def on_processing_error(demo: gr.Blocks, answer: Callable[[str, Exception], Exception | None]) -> None:
    """Ask ``answer`` (the event's name, the exception) about every exception raised while Gradio
    processes a request (its checks of the values sent, a component's preprocessing, the app's
    handler); an exception it returns is raised instead, None lets the original through. Gradio
    prints the traceback of any error but a ``gr.Error`` whose ``print_exception`` is off, straight
    to stderr, past every log filter. Call after ``demo.queue()``."""
    process_api = demo.process_api

    async def process_api_answered(block_fn: Any, inputs: Any, *args: Any, **kwargs: Any):
        try:
            fn = demo.fns[block_fn] if isinstance(block_fn, int) else block_fn
            return await process_api(block_fn, with_trailing_defaults(fn, inputs), *args, **kwargs)
        except Exception as err:  # noqa: BLE001 -- each one is answered or let through
            fn = demo.fns[block_fn] if isinstance(block_fn, int) else block_fn
            replacement = answer(event_name(fn), err)
            if replacement is None:
                raise
            raise replacement from None

    demo.process_api = process_api_answered


_ORIGINAL_ERROR_PAYLOAD: Callable | None = None


def messages_for_every_error(message: str, title: str) -> None:
    """Every error Gradio sends carries a message: an exception that is not a ``gr.Error`` (raised
    past the app's handlers: a generator closed under it, a session dropped) is otherwise sent as
    ``{"error": null}``, which a page shows as a bare "Error" and a client reads as ``null``. The
    exception's own text stays in the server's log, never in the answer. Process-wide (Gradio's
    ``error_payload``, which its queue and routes call); calling it again changes the words only."""
    global _ORIGINAL_ERROR_PAYLOAD
    import gradio.queueing
    import gradio.utils

    if _ORIGINAL_ERROR_PAYLOAD is None:
        _ORIGINAL_ERROR_PAYLOAD = gradio.utils.error_payload
    original = _ORIGINAL_ERROR_PAYLOAD

    @functools.wraps(original)  # (the same signature: moved() checks it)
    def error_payload(error: BaseException | None, show_error: bool) -> dict:
        content = original(error, show_error)
        if not content.get("error"):
            content.update(error=message, title=title, visible=True)
        return content

    gradio.utils.error_payload = error_payload
    gradio.queueing.error_payload = error_payload


# --- what launch makes ----------------------------------------------------------------------------


def server_of(demo: gr.Blocks) -> Any:
    """The uvicorn server ``demo.launch`` started, or None before."""
    return getattr(demo, "server", None)


def gradio_folders() -> list[Path]:
    """Where Gradio keeps files it serves without being told (shared by every Gradio app on the
    machine): its upload and temporary folder (``GRADIO_TEMP_DIR``) and the examples cache."""
    from gradio.utils import get_cache_folder, get_upload_folder

    return [Path(get_upload_folder()).resolve(), Path(get_cache_folder()).resolve()]


# --- the launch's look at its own address -----------------------------------------------------------

# How long a launch keeps asking its own address before it gives up. Gradio asks once (a HEAD with
# a 3 s timeout, a few tries only while the answer is an error) and refuses to start on the first
# timeout: "When localhost is not accessible, a shareable link must be created". The first answer
# builds the page, which on a busy 2-core machine (a Space starting beside another, the tests at
# load 25) takes longer, and the app then died at start.
SELF_CHECK_WAIT_S = 60.0


def patient_self_check(wait_s: float = SELF_CHECK_WAIT_S) -> None:
    """Make ``launch``'s check of its own address (``gradio.networking.url_ok``) ask again, every
    half second, until it answers or ``wait_s`` have passed (installed once; again, it only
    changes the wait)."""
    from gradio import networking

    ask_once = getattr(networking.url_ok, "__wrapped__", networking.url_ok)

    @functools.wraps(ask_once)
    def url_ok(url: str) -> bool:
        deadline = time.monotonic() + wait_s
        while not ask_once(url):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)
        return True

    networking.url_ok = url_ok


# --- answers: Gradio's walk for files --------------------------------------------------------------

# Before an answer goes out, Gradio walks it element by element looking for files to serve
# (gradio_client.utils.traverse and async_traverse, from processing_utils' move to the cache and
# add_root_url), on the server's one event loop. A flat list (numbers, text) holds no file, since
# a file is a dict, yet the walk visits each element: /positional_encoding's 524,288 values held
# the loop about a second per answer, and every other visitor's /tokenize waited (p95 0.6 s
# while 4 clients looped every tab's heaviest request).
FLAT_TYPES = frozenset({int, float, str, bool, type(None)})


def _flat(obj: Any) -> bool:
    return type(obj) is list and FLAT_TYPES.issuperset(map(type, obj))  # map/type/issuperset: C speed


def flat_lists_unwalked() -> None:
    """Make Gradio's walk of an answer take a flat list whole (a copy, as the walk returns) instead
    of element by element; installed once, the walk is otherwise unchanged (a dict or nested list
    is walked, a file inside one still found)."""
    from gradio_client import utils as client_utils

    walk = getattr(client_utils.traverse, "__wrapped__", client_utils.traverse)
    walk_async = getattr(client_utils.async_traverse, "__wrapped__", client_utils.async_traverse)

    @functools.wraps(walk)
    def traverse(json_obj: Any, func: Callable, is_root: Callable[..., bool]) -> Any:
        if _flat(json_obj) and not is_root(json_obj):
            return json_obj[:]
        return walk(json_obj, func, is_root)  # its recursion calls the module's name: this one again

    @functools.wraps(walk_async)
    async def async_traverse(json_obj: Any, func: Callable, is_root: Callable[..., bool]) -> Any:
        if _flat(json_obj) and not is_root(json_obj):
            return json_obj[:]
        return await walk_async(json_obj, func, is_root)

    client_utils.traverse, client_utils.async_traverse = traverse, async_traverse


# --- the start-up check ---------------------------------------------------------------------------

# str(inspect.signature(...)) of what is called, overridden or replaced, as in TESTED_GRADIO.
SIGNATURES: dict[str, str] = {
    "gradio.utils.error_payload": "(error: BaseException | None, show_error: bool) -> dict[str, bool | str | float | None]",
    "gradio.queueing.error_payload": "(error: BaseException | None, show_error: bool) -> dict[str, bool | str | float | None]",
    "gradio.state_holder.SessionState.__init__": "(self, blocks: 'Blocks')",
    "gradio.state_holder.SessionState.__setitem__": "(self, key: 'int', value: 'Any')",
    "gradio.state_holder.SessionState._update_config": "(self, key: 'int')",
    "gradio.state_holder.SessionState._update_value_in_config": "(self, key: 'int', value: 'Any')",
    "gradio.state_holder.StateHolder.__init__": "(self)",
    "gradio.state_holder.StateHolder.__getitem__": "(self, session_id: 'str') -> 'SessionState'",
    "gradio.state_holder.StateHolder.set_blocks": "(self, blocks: 'Blocks')",
    "gradio.state_holder.StateHolder.update": "(self, session_id: 'str')",
    "gradio.queueing.Queue.push": (
        "(self, body: 'PredictBodyInternal', request: 'fastapi.Request', username: 'str | None') -> "
        "\"tuple[bool, str | list[dict[str, Any]], Literal['success', 'error', 'queue_full', 'validator_error']]\""
    ),
    "gradio.queueing.Queue.clean_events": "(self, *, session_hash: 'str | None' = None, event_id: 'str | None' = None) -> 'None'",
    "gradio.queueing.Event.__init__": "(self, session_hash: 'str | None', fn: 'BlockFunction', request: 'fastapi.Request', username: 'str | None')",
    "gradio.queueing.EventQueue.__init__": "(self, concurrency_id: 'str', concurrency_limit: 'int | None')",
    "gradio.blocks.Blocks.process_api": (
        "(self, block_fn: 'BlockFunction | int', inputs: 'list[Any]', state: 'SessionState | None' = None, "
        "request: 'Request | list[Request] | None' = None, iterator: 'AsyncIterator | None' = None, "
        "session_hash: 'str | None' = None, event_id: 'str | None' = None, event_data: 'EventData | None' = None, "
        "in_event_listener: 'bool' = True, simple_format: 'bool' = False, explicit_call: 'bool' = False, "
        "root_path: 'str | None' = None, oauth_token: 'oauth.OAuthToken | None' = None) -> 'dict[str, Any]'"
    ),
    "gradio.networking.url_ok": "(url: 'str') -> 'bool'",
    "gradio_client.utils.traverse": "(json_obj: 'Any', func: 'Callable', is_root: 'Callable[..., bool]') -> 'Any'",
    "gradio_client.utils.async_traverse": (
        "(json_obj: 'Any', func: 'Callable[..., Coroutine[Any, Any, Any]]', is_root: 'Callable[..., bool]') -> 'Any'"
    ),
    "gradio.utils.get_upload_folder": "() -> str",
    "gradio.utils.get_cache_folder": "() -> pathlib.Path",
}
# Attributes read or written, on instances made as Gradio makes them.
QUEUE_ATTRIBUTES = ("pending_messages_per_session", "pending_event_ids_session", "event_ids_to_events",
                    "event_queue_per_concurrency_id", "active_jobs", "process_time_per_fn")
EVENT_ATTRIBUTES = ("_id", "session_hash", "enqueue_time", "alive", "fn")
EVENT_QUEUE_ATTRIBUTES = ("queue", "current_concurrency", "concurrency_limit")
FN_ATTRIBUTES = ("concurrency_id", "types_generator", "api_name", "api_visibility", "name", "_id")
MESSAGE_FIELDS = ("event_id", "output", "success")
HOLDER_ATTRIBUTES = ("session_data", "time_last_used", "lock", "capacity")


def _resolve(dotted: str) -> Any:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def probe_app() -> gr.Blocks:
    """A queued one-textbox app with a ``gr.State`` and one endpoint: what :func:`moved` looks at by default."""
    with gr.Blocks(analytics_enabled=False) as demo:
        box = gr.Textbox()
        gr.State(0)
        box.submit(lambda text: text, box, box, api_name="echo")
    demo.queue()
    return demo


def moved(demo: gr.Blocks | None = None) -> list[str]:
    """What this module uses that the installed Gradio no longer has as :data:`TESTED_GRADIO`
    had it (empty when nothing moved). ``demo``: a queued app to look at (default: a tiny one)."""
    from starlette.routing import Match

    found = []
    for dotted, expected in SIGNATURES.items():
        try:
            actual = str(inspect.signature(_resolve(dotted)))
        except (ImportError, AttributeError, TypeError, ValueError) as err:
            found.append(f"{dotted}: missing ({type(err).__name__})")
            continue
        if actual != expected:
            found.append(f"{dotted}{actual}: was {expected}")
    demo = demo if demo is not None and getattr(demo, "_queue", None) is not None else probe_app()
    try:
        gradios, ours = set(vars(SessionState(demo))), set(vars(LeanSessionState(demo)))
        if gradios != ours:
            found.append(f"gradio.state_holder.SessionState attributes {sorted(gradios ^ ours)} differ from LeanSessionState's")
    except Exception as err:  # noqa: BLE001 -- whatever broke, it is a moved shape
        found.append(f"gradio.state_holder.SessionState(blocks): {type(err).__name__}: {err}")
    queue = getattr(demo, "_queue", None)
    found += [f"gradio.queueing.Queue.{name}: missing" for name in QUEUE_ATTRIBUTES if not hasattr(queue, name)]
    fns = list(getattr(demo, "fns", {}).values())
    if not fns:
        found.append("gradio.Blocks.fns: missing or empty")
    found += [f"gradio.block_function.BlockFunction.{name}: missing" for name in FN_ATTRIBUTES if fns and not hasattr(fns[0], name)]
    try:
        event = Event(None, fns[0], None, None)  # type: ignore[arg-type]
        found += [f"gradio.queueing.Event.{name}: missing" for name in EVENT_ATTRIBUTES if not hasattr(event, name)]
        group = EventQueue("x", None)
        found += [f"gradio.queueing.EventQueue.{name}: missing" for name in EVENT_QUEUE_ATTRIBUTES if not hasattr(group, name)]
        timing = ProcessTime()
        found += [f"gradio.queueing.ProcessTime.{name}: missing" for name in ("process_time", "count") if not hasattr(timing, name)]
    except Exception as err:  # noqa: BLE001
        found.append(f"gradio.queueing.Event(...): {type(err).__name__}: {err}")
    holder = StateHolder()
    found += [f"gradio.state_holder.StateHolder.{name}: missing" for name in HOLDER_ATTRIBUTES if not hasattr(holder, name)]
    if not hasattr(SessionState, "state_components"):
        found.append("gradio.state_holder.SessionState.state_components: missing")
    if not isinstance(getattr(LocalContext, "request", None), ContextVar):
        found.append("gradio.context.LocalContext.request: missing (a handler's request is read through it)")
    fields = set(getattr(ProcessCompletedMessage, "model_fields", {}))
    found += [f"gradio.server_messages.ProcessCompletedMessage.{name}: missing" for name in MESSAGE_FIELDS if name not in fields]
    if not hasattr(asyncio.Queue(), "_queue"):
        found.append("asyncio.Queue._queue: missing (unread results are read through it)")
    app = getattr(demo, "app", None)
    if not hasattr(app, "state_holder"):
        found.append("gradio.routes.App.state_holder: missing")
    for method, path in ROUTE_SAMPLES:
        scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": []}
        if not any(route.matches(scope)[0] == Match.FULL for route in getattr(app, "routes", ())):
            found.append(f"route {method} {path}: no longer one of Gradio's")
    return found


def check(demo: gr.Blocks) -> None:
    """At start-up (after ``demo.queue()``): refuse to start, naming them, when names used here
    have moved; warn once when Gradio is another version than :data:`TESTED_GRADIO` whose shapes
    still match."""
    if problems := moved(demo):
        raise RuntimeError(
            f"GPT Playground's serving reaches into Gradio {TESTED_GRADIO}'s internals "
            f"(playground/ui/gradio_internals.py), and Gradio {gr.__version__} moved them:\n  - "
            + "\n  - ".join(problems)
            + f"\nInstall gradio=={TESTED_GRADIO} (requirements.txt), or port gradio_internals.py to this version "
            "(tests/serving/test_gradio_internals.py shows what moved)."
        )
    if gr.__version__ != TESTED_GRADIO:
        log.warning(
            "Gradio %s: GPT Playground's serving was tested with Gradio %s (playground/ui/gradio_internals.py); the "
            "internals it uses still have the same shape, so it starts, but its memory and abuse bounds are untested "
            "here: run tests/serving/test_gradio_internals.py and the abuse tests, or install gradio==%s",
            gr.__version__, TESTED_GRADIO, TESTED_GRADIO,
        )

