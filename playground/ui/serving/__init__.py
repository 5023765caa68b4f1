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


from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import gradio as gr

from ... import limits
from .. import connections
from ..compression import gzip_middleware
from .errors import explain_errors, refuse_malformed
from .middleware import BodySizeLimit, RouteGuard
from .orphaned import READER_GRACE_S, ResultReaders, TrackReaders, stop_unread_work
from .sessions import MAX_SESSIONS, bound_sessions
from .unread import TRIM_EVERY_S, drop_unread_results, malloc_trim

__all__ = ["harden", "launch_options", "SWEEP_EVERY_S"]

log = logging.getLogger("playground")

SWEEP_EVERY_S = min(1.0, READER_GRACE_S / 2)


async def _sweep(queue: Any, readers: ResultReaders | None = None) -> None:
    """Every SWEEP_EVERY_S: stop work nobody reads (with ``readers``), drop unread results; every
    TRIM_EVERY_S: hand freed memory back to the system. A 1024 x 1024 table passes through ~100 MB of short-lived objects on its way
    out; glibc keeps the freed pages of its heap unless asked (150 requests with such tables:
    RSS settled 190 MB above its start without trimming, 85 MB with it)."""
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
                trim(0)  # ~0.3-5 ms
        except Exception:  # noqa: BLE001 -- the sweeper must outlive any surprise
            log.exception("sweeping unread results failed")


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
