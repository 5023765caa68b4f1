"""What the server accepts and what it keeps, whatever the traffic (a public Space meets every
kind of client): memory bounded, request bodies capped, malformed requests answered with a
message, and nothing served or exposed that the app does not use. One module a concern:

- :mod:`.sessions`: a session keeps its results in bounded stores and nothing else, at most
  1,000 sessions; a session id is a short token; sessions and results are shared out per visitor
  (one visitor's new ones push out its own oldest, never another learner's);
- :mod:`.streams`: streams held open (heartbeats, result streams) only for sessions that joined,
  counted per session, per visitor and in all; at a cap the hoarder's oldest gives way;
- :mod:`.unread`: a finished result nobody has read is dropped after 30 s, or sooner while such
  results pile up; freed memory is handed back to the system;
- :mod:`.orphaned`: work nobody reads (a result stream never opened, or no longer read) is stopped;
- :mod:`.visitors`: who a visitor is (the socket's address; behind a trusted proxy, the address
  it appended to ``X-Forwarded-For``): :func:`visitor_of`, used by every per-visitor limit;
- :mod:`.admission`: who gets a place in the queue (session ids, requests per visitor, a few
  generations, heavy passes and training runs per visitor, requests waiting per concurrency
  group, a full group's places shared max-min: the visitor holding the most gives up its newest
  waiting request to a newcomer) and the order the waiting ones are served in (visitors in turn);
- :mod:`.errors`: errors inside Gradio's own processing answered with its message, logged in a line;
- :mod:`.middleware`: request bodies capped before they are read; the routes Gradio opens
  whatever the app uses guarded (URLs as files, uploads, deep links, unknown events and sessions);
- :mod:`.page_cache`: the page and ``/config`` built once, kept compressed, revalidated by ``ETag``;
- :mod:`.browser_files`: the files a page needs to run the model itself (the engine,
  onnxruntime-web, the 8-bit model) from a fixed list, cached by content hash, the model's
  downloads bounded per visitor;
- :mod:`.wait`: how long a generation asked for now would wait (``/expected-wait``), from
  Gradio's line and the decoding loop's turns, for the page to offer the browser at once.

Where Gradio has a public way, it is used (the ``launch`` arguments of :func:`launch_options`,
the environment of :func:`before_queue`); what it has not goes through
:mod:`playground.ui.gradio_internals`, checked at start-up against the Gradio version it was
tested with. Below HTTP, connections are bounded by :mod:`playground.ui.serving.connections`.

app.py calls :func:`before_queue`, ``demo.queue(...)``, :func:`harden`, then
``demo.launch(**launch_options(demo))``; tests/serving/test_abuse.py, test_security.py,
test_orphaned_work.py and test_public_load.py check the behaviour on launched apps.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from contextlib import asynccontextmanager
from typing import Any

import gradio as gr

from ... import limits
from ...resources import Resources
from .. import gradio_internals
from ..common import FORWARD, GENERATE
from . import connections
from .compression import gzip_middleware
from .admission import admit, ahead_in
from .browser_files import BrowserFiles, BrowserFileServer
from .errors import explain_errors
from .middleware import BodySizeLimit, RouteGuard
from .orphaned import READER_GRACE_S, ResultReaders, TrackReaders, stop_unread_work
from .page_cache import PageCache
from .sessions import MAX_SESSIONS, SESSIONS_PER_VISITOR, VisitorContext, VisitorShares
from .streams import JoinWatch, OpenStreams, StreamLimits
from .unread import TRIM_EVERY_S, drop_unread_results, limit_malloc_arenas, malloc_trim
from .visitors import distrust_forwarded_headers, is_trusted_proxy, visitor_of
from .wait import ExpectedWait

__all__ = ["SWEEP_EVERY_S", "BrowserFiles", "before_queue", "harden", "launch_options", "visitor_of"]

log = logging.getLogger("playground")

SWEEP_EVERY_S = min(1.0, READER_GRACE_S / 2)

# Read by Gradio when the queue is made. With monitoring off nobody reads the queue's per-event
# analytics, yet by default Gradio keeps 10,000 records and rebuilds a pandas summary of all of
# them after every event: keep one record, and rebuild the summary once in a billion events.
QUEUE_ENVIRONMENT = {"GRADIO_ANALYTICS_MAX_EVENTS": "1", "GRADIO_ANALYTICS_CACHE_FREQUENCY": str(10**9)}


def before_queue() -> None:
    """Call before ``demo.queue()``: the environment Gradio reads when it makes the queue
    (:data:`QUEUE_ENVIRONMENT`; a value the operator set is kept), and uvicorn told to trust no
    ``X-Forwarded-For`` of its own (:func:`.visitors.distrust_forwarded_headers`)."""
    for name, value in QUEUE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    distrust_forwarded_headers()
    limit_malloc_arenas()


def harden(demo: gr.Blocks, max_waiting: Mapping[str, int] | None = None,
           per_visitor: Mapping[str, int] | None = None) -> None:
    """Check Gradio's internals against the version they were tested with (refusing to start
    when they moved), install the admission checks on the queue and the answers to Gradio's own
    errors; call after ``demo.queue()``. ``max_waiting``: concurrency group -> how many of its
    requests may wait for a slot; ``per_visitor``: group -> how many of one visitor's may wait or
    run (served visitors in turn)."""
    gradio_internals.check(demo)
    # kept with the app: /expected-wait reads the order it serves a group's waiting requests in
    demo.pg_admission = admit(demo, max_waiting, per_visitor)
    explain_errors(demo)


async def _sweep(demo: gr.Blocks, readers: ResultReaders | None = None) -> None:
    """Every SWEEP_EVERY_S: stop work nobody reads (with ``readers``), drop unread results; every
    TRIM_EVERY_S: hand freed memory back to the system. A big table passes through many
    short-lived objects on its way out; glibc keeps the freed pages of its heap unless asked
    (docs/app.md, "Serving", measures the difference)."""
    queue = gradio_internals.queue_of(demo)
    first_seen: dict[str, tuple[int, float]] = {}
    trim = malloc_trim()
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
                trim(0)  # milliseconds: cheap at this interval
        except Exception:  # noqa: BLE001 -- the sweeper must outlive any surprise
            log.exception("sweeping unread results failed")


def launch_options(demo: gr.Blocks, readers: ResultReaders | None = None, browser: BrowserFiles | None = None,
                   res: Resources | None = None) -> dict[str, Any]:
    """The ``demo.launch`` arguments that bound memory and requests (see the module's doc);
    ``readers``: where the result streams open are counted (a new :class:`ResultReaders` by
    default); ``browser``: the files "Run on: this browser" needs (none served when None); ``res``:
    the app's resources, whose decoding loops' load ``/expected-wait`` reads (None: no loop). Which
    other files are served is ``gr.set_static_paths`` (playground/ui/startup.py)."""
    from starlette.middleware import Middleware

    gradio_internals.patient_self_check()  # a busy machine answers launch's look at the page late
    gradio_internals.flat_lists_unwalked()  # a big answer's values do not hold the event loop
    readers = readers if readers is not None else ResultReaders()
    admission = getattr(demo, "pg_admission", None)  # harden's (None: an app served without it)
    joins = JoinWatch(demo)  # a gate on the queue: whose each session is, and which have joined

    @asynccontextmanager
    async def lifespan(app: Any):
        gradio_internals.use_lean_sessions(app, VisitorShares(MAX_SESSIONS, SESSIONS_PER_VISITOR), joins.owner_of)
        connections.rate_limit_logs()
        connections.quiet_abandoned_streams()  # Gradio's result streams closed after their reader left
        tasks = [
            # header timeout, connection caps
            asyncio.create_task(connections.install_when_started(demo, is_proxy=is_trusted_proxy, visitor=visitor_of)),
            asyncio.create_task(_sweep(demo, readers)),
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
                # Outside the compression: it sends its own, compressed once (browser_files.py).
                *([Middleware(BrowserFileServer, files=browser)] if browser is not None else []),
                # (answered at once, outside the queue: what a page asks when its learner clicks Generate)
                Middleware(ExpectedWait, demo=demo, loop_of=res.open_loop if res else (lambda precision: None),
                           loops=res.open_loops if res else list, group=GENERATE,
                           pass_group=FORWARD, ahead=ahead_in(demo, admission) if admission is not None else None),
                Middleware(PageCache),  # outside the compression: keeps what went out (page_cache.py)
                gzip_middleware(),  # the page and JSON, gzipped (compression.py)
                Middleware(VisitorContext),  # whose request it is, for the session Gradio makes for it (sessions.py)
                Middleware(RouteGuard, demo=demo),
                Middleware(StreamLimits, demo=demo, streams=OpenStreams(), joins=joins),  # after RouteGuard: refused ones count for nothing
                Middleware(TrackReaders, demo=demo, readers=readers),  # after RouteGuard: refused GETs read nothing
            ],
            "lifespan": lifespan,
        },
        state_session_capacity=MAX_SESSIONS,
        # Gradio serves the static paths, and what it put in its own folders, shared by every Gradio
        # app on the machine (other users' files on a public server): those are refused.
        blocked_paths=[str(p) for p in gradio_internals.gradio_folders()],
        enable_monitoring=False,  # /monitoring and /monitoring/summary: 403
        # Every group's handlers at once, generations beyond the batch's rows included (limits.py).
        max_threads=limits.WORKER_THREADS,
    )
