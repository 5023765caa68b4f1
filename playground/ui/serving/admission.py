"""Who gets a place in the queue, checked when a request arrives (before Gradio queues it):

- a session id that is a short token (HTTP 400 otherwise: 1,000 joins with 900,000-character ids
  had kept 773 MB);
- at most :data:`MAX_EVENTS_PER_ADDRESS` requests waiting or running from one client address;
- at most ``max_waiting[group]`` requests waiting for a slot in a concurrency group (the
  generations, the training runs): Gradio caps only the whole queue, so a burst of generations
  would fill it and turn the light tabs away too.

Past a cap the answer is Gradio's own "busy" (HTTP 503: the page says "This application is
currently busy. Please try again.", gradio_client raises ``QueueError``), with a message saying
which cap. Installed by :func:`admit` through ``gradio_internals.gate_pushes``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import gradio as gr

from .. import gradio_internals
from ..gradio_internals import Arrival, Refusal
from .sessions import session_problem

__all__ = ["MAX_EVENTS_PER_ADDRESS_ENV", "MAX_EVENTS_PER_ADDRESS", "EventsPerAddress", "admit"]

log = logging.getLogger("playground")


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

    def __init__(self, demo: gr.Blocks) -> None:
        self.demo = demo
        self.events: dict[str, set[str]] = {}

    def pending(self, address: str) -> int:
        live = {e for e in self.events.get(address, ()) if gradio_internals.live(self.demo, e)}
        if live:
            self.events[address] = live
        else:
            self.events.pop(address, None)
        return len(live)

    def add(self, address: str, event_id: str) -> None:
        self.events.setdefault(address, set()).add(event_id)


def admit(demo: gr.Blocks, max_waiting: Mapping[str, int] | None = None) -> None:
    """Check every request for a place in ``demo``'s queue (call after ``demo.queue()``);
    ``max_waiting``: concurrency group -> how many of its requests may wait for a slot."""
    per_address = EventsPerAddress(demo)
    caps = dict(max_waiting or {})

    def refuse(arrival: Arrival) -> Refusal:
        if arrival.session is not None and (problem := session_problem(arrival.session)):
            return problem, "error"
        if (pending := per_address.pending(arrival.address)) >= MAX_EVENTS_PER_ADDRESS:
            return (f"Busy: {pending} requests from your address are already waiting or running (at most "
                    f"{MAX_EVENTS_PER_ADDRESS}); read their results, or wait for one to finish."), "queue_full"
        group = arrival.concurrency_id
        if group in caps and (waiting := gradio_internals.waiting(demo, group)) >= caps[group]:
            return f"Busy: {waiting} requests already wait for {group}; try again shortly.", "queue_full"
        return None

    gradio_internals.gate_pushes(demo, refuse, lambda arrival, event_id: per_address.add(arrival.address, event_id))
