"""Who gets a place in the queue, checked when a request arrives (before Gradio queues it), and in
which order the waiting ones are served. A visitor is :func:`.visitors.visitor_of`'s answer (the
socket's address, or behind a trusted proxy the address it appended):

- a session id that is a short token (HTTP 400 otherwise: 1,000 joins with 900,000-character ids
  had kept 773 MB);
- at most :data:`MAX_EVENTS_PER_ADDRESS` requests waiting or running from one visitor, in all;
- at most ``per_visitor[group]`` of one concurrency group's (a few generations, a few heavy
  passes): past these the answer is HTTP 429 with ``Retry-After`` and a message saying which cap
  (the page shows it as an error; gradio_client raises it);
- at most ``max_waiting[group]`` requests waiting for a slot in a concurrency group (the
  generations, the training runs): Gradio caps only the whole queue, so a burst of generations
  would fill it and turn the light tabs away too. Past it: HTTP 503 "Busy" with ``Retry-After``
  (the page says "This application is currently busy. Please try again.", gradio_client raises
  ``QueueError``);
- a group's waiting requests are served visitors in turn (:func:`fair_order`), not first come
  first served: a visitor's n-th request waits behind every other visitor's requests up to their
  n-th, so one visitor's backlog delays another by at most its turn.

Installed by :func:`admit` through ``gradio_internals.gate_pushes``.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gradio as gr

from .. import gradio_internals
from ..gradio_internals import Arrival, Refusal
from .sessions import session_problem
from .visitors import visitor_of

__all__ = ["MAX_EVENTS_PER_ADDRESS_ENV", "MAX_EVENTS_PER_ADDRESS", "RETRY_AFTER_S", "VisitorEvents", "admit",
           "check_arrival", "fair_order", "DEFAULT_PER_VISITOR", "GENERATIONS_PER_VISITOR", "HEAVY_PER_VISITOR"]

log = logging.getLogger("playground")


def _env_count(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if raw.isdigit() and 1 <= int(raw) <= 100_000:
        return int(raw)
    if raw:
        log.warning("%s=%r is not a whole number from 1 to 100000: using %d", name, raw, default)
    return default


# Requests queued or running at once from one visitor: one that submits and never reads (or reads
# too slowly for its socket ever to fill) holds at most this many places. The page makes a few at
# once; the per-group caps below are what keep one visitor to its share of the slow work.
MAX_EVENTS_PER_ADDRESS_ENV = "PLAYGROUND_MAX_EVENTS_PER_ADDRESS"
MAX_EVENTS_PER_ADDRESS = _env_count(MAX_EVENTS_PER_ADDRESS_ENV, 64)
# How long a refused visitor is told to wait before trying again, by group (a 32-token generation
# in a full batch takes a few seconds; a light request far less).
RETRY_AFTER_S: dict[str, float] = {"generate": 10.0, "forward": 5.0, "learn": 30.0}
DEFAULT_RETRY_AFTER_S = 5.0
# What a per-visitor cap of a group is called in its message.
GROUP_WORDS = {"generate": "generations", "forward": "heavy passes (Embeddings, Attention, Inside)", "learn": "training runs"}


# A few generations and a few heavy passes per visitor, waiting or running: one visitor then holds
# at most a quarter of the 16 generation slots, and a class of 40 fits beside a visitor asking for
# hundreds. PLAYGROUND_GENERATIONS_PER_VISITOR / PLAYGROUND_HEAVY_PER_VISITOR change them.
GENERATIONS_PER_VISITOR = _env_count("PLAYGROUND_GENERATIONS_PER_VISITOR", 4)
HEAVY_PER_VISITOR = _env_count("PLAYGROUND_HEAVY_PER_VISITOR", 4)
DEFAULT_PER_VISITOR = {"generate": GENERATIONS_PER_VISITOR, "forward": HEAVY_PER_VISITOR}


def fair_order(waiting: Sequence[tuple[str, str]], running: Mapping[str, int]) -> list[str]:
    """The ids of a group's waiting events ``(event_id, visitor)`` (in arrival order) in the order
    they should be served: visitors in turn. An event's turn is how many of its visitor's events
    run or wait before it; lower turns first, arrival order among equal turns."""
    seen: Counter[str] = Counter()
    ranked = []
    for index, (event_id, visitor) in enumerate(waiting):
        ranked.append((running.get(visitor, 0) + seen[visitor], index, event_id))
        seen[visitor] += 1
    return [event_id for _, _, event_id in sorted(ranked)]


class VisitorEvents:
    """The events each visitor has in the queue (waiting or running), with their groups."""

    def __init__(self, is_live: Callable[[str], bool]) -> None:
        self.is_live = is_live
        self.events: dict[str, dict[str, str | None]] = {}  # visitor -> event id -> concurrency group

    def pending(self, visitor: str, group: str | None = None) -> int:
        """The visitor's live events (of ``group`` only, when given); forgets finished ones."""
        live = {e: g for e, g in self.events.get(visitor, {}).items() if self.is_live(e)}
        if live:
            self.events[visitor] = live
        else:
            self.events.pop(visitor, None)
        return len(live) if group is None else sum(1 for g in live.values() if g == group)

    def add(self, visitor: str, event_id: str, group: str | None) -> None:
        self.events.setdefault(visitor, {})[event_id] = group

    def visitor_of_event(self) -> dict[str, str]:
        return {e: v for v, events in self.events.items() for e in events}

    def in_group(self, group: str) -> Counter[str]:
        """Live events of ``group`` per visitor (waiting or running)."""
        counts: Counter[str] = Counter()
        for visitor in list(self.events):
            if (n := self.pending(visitor, group)):
                counts[visitor] = n
        return counts


def check_arrival(arrival: Arrival, pending: int, pending_in_group: int, waiting_in_group: int,
                  per_visitor: Mapping[str, int], max_waiting: Mapping[str, int],
                  max_events: int = MAX_EVENTS_PER_ADDRESS, queued: int = 0, max_queued: int | None = None) -> Refusal:
    """Whether a request gets a place, given what its visitor has in the queue (``pending`` in
    all, ``pending_in_group`` in its group), how many of its group wait, and how many wait in the
    whole queue (``queued`` of at most ``max_queued``); None to admit."""
    if arrival.session is not None and (problem := session_problem(arrival.session)):
        return problem, "error"
    group = arrival.concurrency_id
    retry = RETRY_AFTER_S.get(group or "", DEFAULT_RETRY_AFTER_S)
    if pending >= max_events:
        return (f"Too many requests: {pending} of yours are already waiting or running (at most {max_events}); "
                f"read their results, or try again in about {retry:g} s."), "too_many", retry
    if group in per_visitor and pending_in_group >= per_visitor[group]:
        words = GROUP_WORDS.get(group, f"{group} requests")
        return (f"Too many {words} at once: {pending_in_group} of yours are already waiting or running (at most "
                f"{per_visitor[group]} per visitor, so that everyone gets a turn); try again when one finishes, "
                f"in about {retry:g} s."), "too_many", retry
    if group in max_waiting and waiting_in_group >= max_waiting[group]:
        return (f"Busy: {waiting_in_group} requests already wait for {group}; try again in about {retry:g} s."), \
            "queue_full", retry
    if max_queued is not None and queued >= max_queued:  # Gradio's own cap, answered with a time to try again
        return (f"Busy: {queued} requests already wait in the queue (at most {max_queued}); "
                f"try again in about {retry:g} s."), "queue_full", retry
    return None


def admit(demo: gr.Blocks, max_waiting: Mapping[str, int] | None = None,
          per_visitor: Mapping[str, int] | None = None, visitor: Callable[[Any], str] = visitor_of) -> VisitorEvents:
    """Check every request for a place in ``demo``'s queue (call after ``demo.queue()``);
    ``max_waiting``: concurrency group -> how many of its requests may wait for a slot;
    ``per_visitor``: group -> how many of one visitor's may wait or run (their waiting ones are
    served visitors in turn; :data:`DEFAULT_PER_VISITOR` when None); ``visitor``: who sent a request."""
    events = VisitorEvents(lambda event_id: gradio_internals.live(demo, event_id))
    caps = dict(max_waiting or {})
    shares = dict(DEFAULT_PER_VISITOR if per_visitor is None else per_visitor)

    def refuse(arrival: Arrival) -> Refusal:
        group = arrival.concurrency_id
        return check_arrival(
            arrival, events.pending(arrival.address),
            events.pending(arrival.address, group) if group in shares else 0,
            gradio_internals.waiting(demo, group) if group in caps else 0,
            shares, caps, MAX_EVENTS_PER_ADDRESS, *gradio_internals.queue_load(demo))

    def admitted(arrival: Arrival, event_id: str) -> None:
        events.add(arrival.address, event_id, arrival.concurrency_id)
        group = arrival.concurrency_id
        if group in shares:  # the new event takes its turn among the group's waiting ones
            waiting = gradio_internals.waiting_events(demo, group)
            if len(waiting) > 1:
                owner = events.visitor_of_event()
                pairs = [(e._id, owner.get(e._id, "?")) for e in waiting]
                queued = Counter(v for _, v in pairs)
                running = {v: n - queued[v] for v, n in events.in_group(group).items()}
                gradio_internals.reorder_waiting(demo, group, fair_order(pairs, running))

    gradio_internals.gate_pushes(demo, refuse, admitted, visitor=visitor)
    return events
