"""Requests checked when they reach the queue (a session id that is a short token, an event that
exists, the requests waiting per client address: :func:`refuse_malformed`), and errors answered
with a message: wrong argument counts name the parameters, an error inside Gradio's own processing
reaches the client as a message, not ``null`` (:func:`explain_errors`)."""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any

import gradio as gr
from gradio.exceptions import ComponentProcessingError

from .sessions import session_problem

log = logging.getLogger("playground")


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

