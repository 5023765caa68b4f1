"""Who gets a place in the queue, checked when a request arrives (before Gradio queues it), and in
which order the waiting ones are served. A visitor is :func:`.visitors.visitor_of`'s answer (the
socket's address, or behind a trusted proxy the address it appended):

- a session id that is a short token (HTTP 400 otherwise: Gradio keeps the ids it is sent, so
  long made-up ones would fill memory);
- at most :data:`MAX_EVENTS_PER_ADDRESS` requests waiting or running from one visitor, in all;
- at most ``per_visitor[group]`` of one concurrency group's (a few generations, a few heavy
  passes, two training runs): past these the answer is HTTP 429 with ``Retry-After`` and a
  message saying which cap (the page shows it as an error; gradio_client raises it);
- at most ``max_waiting[group]`` requests waiting for a slot in a concurrency group (the
  generations, the heavy passes, the training runs): Gradio caps only the whole queue, so a burst
  of generations would fill it and turn the light tabs away too;
- when a group's waiting places are full, shares shrink to make room (max-min fairness,
  :func:`give_way`): the visitor holding the most of the group (running and waiting) gives up its
  newest *waiting* request to the newcomer, provided it holds at least two more than the
  newcomer. So a visitor with nothing there is admitted before anyone's second request, and a
  group of addresses each within its own cap can no longer fill the places for good: it takes
  one address per place (``concurrency + max_waiting``), each holding one. The request that gave
  way is failed from the queue with a "Busy" message and a time to try again
  (``gradio_internals.fail_waiting``); where nobody holds more, the newcomer gets HTTP 503 "Busy"
  with ``Retry-After`` (the page says "This application is currently busy. Please try again.",
  gradio_client raises ``QueueError``);
- a group's waiting requests are served visitors in turn (:func:`fair_order`), not first come
  first served: a visitor's n-th request waits behind every other visitor's requests up to their
  n-th, so one visitor's backlog delays another by at most its turn. A visitor's turn counts the
  requests of the group it was served in the last :data:`RECENT_S` seconds (five minutes) too, running or done
  (:meth:`VisitorEvents.served_recently`): a group of addresses each sending one heavy pass after
  another is served one pass per address in turn, and a learner's first pass goes ahead of their
  next ones, however many addresses the group has.

Installed by :func:`admit` through ``gradio_internals.gate_pushes``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import gradio as gr

from ...limits import GENERATIONS_PER_VISITOR, HEAVY_PER_VISITOR, MAX_EVENTS_PER_ADDRESS, RUNS_PER_VISITOR
from .. import gradio_internals
from ..gradio_internals import Arrival, Refusal
from .sessions import session_problem
from .visitors import visitor_of

__all__ = ["MAX_EVENTS_PER_ADDRESS", "RETRY_AFTER_S", "VisitorEvents", "admit",
           "check_arrival", "fair_order", "ahead_of", "ahead_in", "Held", "Decision", "give_way", "decide", "gave_way_message",
           "DEFAULT_PER_VISITOR", "GENERATIONS_PER_VISITOR", "HEAVY_PER_VISITOR", "RUNS_PER_VISITOR"]

log = logging.getLogger("playground")


# How long a refused visitor is told to wait before trying again, by group (a 32-token generation
# in a full batch takes a few seconds; a light request far less).
RETRY_AFTER_S: dict[str, float] = {"generate": 10.0, "forward": 5.0, "learn": 30.0}
DEFAULT_RETRY_AFTER_S = 5.0
# What a per-visitor cap of a group is called in its message.
GROUP_WORDS = {"generate": "generations", "forward": "heavy passes (Embeddings, Attention, Inside)", "learn": "training runs"}

# Each visitor's share of a group, waiting or running (the numbers and their variables: playground/limits.py).
DEFAULT_PER_VISITOR = {"generate": GENERATIONS_PER_VISITOR, "forward": HEAVY_PER_VISITOR, "learn": RUNS_PER_VISITOR}


def fair_order(waiting: Sequence[tuple[str, str]], running: Mapping[str, int]) -> list[str]:
    """The ids of a group's waiting events ``(event_id, visitor)`` (in arrival order) in the order
    they should be served: visitors in turn. An event's turn is how many of its visitor's events
    were served (``running``: those running, or served lately, :func:`admit`) or wait before it;
    lower turns first, arrival order among equal turns."""
    seen: Counter[str] = Counter()
    ranked = []
    for index, (event_id, visitor) in enumerate(waiting):
        ranked.append((running.get(visitor, 0) + seen[visitor], index, event_id))
        seen[visitor] += 1
    return [event_id for _, _, event_id in sorted(ranked)]


@dataclass(frozen=True)
class Held:
    """What one visitor holds of one concurrency group: how many run, and the ids of those
    waiting, oldest first."""

    running: int = 0
    waiting: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.running + len(self.waiting)


def give_way(holdings: Mapping[str, Held], newcomer: str, served: Mapping[str, int] | None = None) -> tuple[str, str] | None:
    """When a group's waiting places are full: ``(visitor, event id)`` of the waiting request that
    gives its place to ``newcomer``'s, or None when none should. The visitor holding the most
    gives up its newest waiting request, and only when it holds at least two more than the
    newcomer: with one more, the swap would only move the excess from one to the other (and the
    two would evict each other in turn). Among equals, the one with more waiting; then by name,
    so that the choice never depends on a dict's order. ``served``: each visitor's requests of the
    group that ran lately (:meth:`VisitorEvents.served_recently`), counted where more than those
    running now, so that addresses each sending one request after another, holding one place
    each, give way to a learner who was served none."""
    served = served or {}

    def total(visitor: str) -> int:
        h = holdings.get(visitor, Held())
        return max(h.running, served.get(visitor, 0)) + len(h.waiting)

    mine = total(newcomer)
    candidates = [(total(visitor), len(h.waiting), visitor) for visitor, h in holdings.items() if h.waiting and visitor != newcomer]
    if not candidates:
        return None
    most, _, visitor = min(candidates, key=lambda c: (-c[0], -c[1], c[2]))
    if most < mine + 2:
        return None
    return visitor, holdings[visitor].waiting[-1]


class Decision(NamedTuple):
    """What :func:`decide` answers: the refusal (None: admitted) and, when the newcomer takes a
    waiting request's place, ``(visitor, event id)`` of the request that gives way."""

    refusal: Refusal = None
    evict: tuple[str, str] | None = None


def decide(arrival: Arrival, holdings: Mapping[str, Held], pending: int, per_visitor: Mapping[str, int],
           max_waiting: Mapping[str, int], max_events: int = MAX_EVENTS_PER_ADDRESS, queued: int = 0,
           max_queued: int | None = None, served: Mapping[str, int] | None = None) -> Decision:
    """Whether a request gets a place, given what every visitor holds of its group
    (``holdings``: visitor -> :class:`Held`; empty for a group without caps) and what its own
    visitor has in the whole queue (``pending``). The per-visitor caps stay upper bounds; a group
    whose waiting places are full makes room by :func:`give_way` (freeing a place in the whole
    queue too); the whole queue full (``queued`` of ``max_queued``) while the group is not is a
    refusal."""
    group = arrival.concurrency_id
    mine = holdings.get(arrival.address, Held()).total
    waiting = sum(len(h.waiting) for h in holdings.values())
    refusal = check_arrival(arrival, pending, mine, waiting, per_visitor, max_waiting, max_events, queued, max_queued)
    if refusal is None or refusal[1] != "queue_full" or group not in max_waiting or waiting < max_waiting[group]:
        return Decision(refusal)
    victim = give_way(holdings, arrival.address, served)
    return Decision(refusal) if victim is None else Decision(None, victim)


def gave_way_message(group: str | None, held: int) -> tuple[str, float]:
    """(what a request that gave way is told, seconds to wait before trying again); ``held``: how
    many of the group its visitor held, it included."""
    retry = RETRY_AFTER_S.get(group or "", DEFAULT_RETRY_AFTER_S)
    words = GROUP_WORDS.get(group or "", f"{group} requests")
    return (f"Busy: every place for {words} was taken, and this one of yours (you held {held}) gave its place to "
            f"a visitor holding fewer, so that everyone gets a turn; try again in about {retry:g} s."), retry


# How long a visitor's served requests count in its turn (fair_order), and how many of them per
# visitor and group are remembered; visitors remembered per group, the longest quiet forgotten first.
# Longer than the line can take to move: with 110 addresses each sending one heavy pass after
# another on a loaded machine, a pass came 150 s after it was sent, so with a minute every
# address counted as served nothing, as a learner does, and the learner waited the whole line
# behind them by arrival (359 s median, 2026-12-01, load 26-35).
RECENT_S = 300.0
RECENT_PER_VISITOR = 16
RECENT_VISITORS = 4096


class VisitorEvents:
    """The events each visitor has in the queue (waiting or running), with their groups, and when
    each visitor's recent requests of each group came (bounded: :data:`RECENT_PER_VISITOR` per
    visitor, :data:`RECENT_VISITORS` per group)."""

    def __init__(self, is_live: Callable[[str], bool], clock: Callable[[], float] = time.monotonic) -> None:
        self.is_live = is_live
        self.clock = clock
        self.events: dict[str, dict[str, str | None]] = {}  # visitor -> event id -> concurrency group
        self.recent: dict[str | None, dict[str, deque[float]]] = {}  # group -> visitor -> admission times

    def note(self, visitor: str, group: str | None) -> None:
        """``visitor``'s request of ``group`` was admitted now."""
        now = self.clock()
        visitors = self.recent.setdefault(group, {})
        times = visitors.pop(visitor, None) or deque(maxlen=RECENT_PER_VISITOR)
        times.append(now)
        visitors[visitor] = times  # (re-inserted: the most recent last)
        while len(visitors) > RECENT_VISITORS:
            del visitors[next(iter(visitors))]

    def served_recently(self, group: str | None, waiting: Counter[str]) -> dict[str, int]:
        """Per visitor, its requests of ``group`` admitted in the last :data:`RECENT_S` seconds
        that no longer wait (they run or are done), given how many of each visitor's wait."""
        now = self.clock()
        out = {}
        for visitor, times in self.recent.get(group, {}).items():
            n = sum(1 for t in times if now - t <= RECENT_S) - waiting.get(visitor, 0)
            if n > 0:
                out[visitor] = n
        return out

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

    def holdings(self, group: str, waiting: Sequence[str]) -> dict[str, Held]:
        """What each visitor holds of ``group``, given the ids of its waiting events (any
        order): the rest of a visitor's live events of the group run. A visitor's waiting ids
        come in its arrival order (a dict keeps insertion order)."""
        live = self.in_group(group)
        waiting_ids = set(waiting)
        mine = {v: tuple(e for e, g in self.events.get(v, {}).items() if g == group and e in waiting_ids) for v in live}
        return {v: Held(n - len(mine[v]), mine[v]) for v, n in live.items()}

    def in_group(self, group: str) -> Counter[str]:
        """Live events of ``group`` per visitor (waiting or running)."""
        counts: Counter[str] = Counter()
        for visitor in list(self.events):
            if (n := self.pending(visitor, group)):
                counts[visitor] = n
        return counts


def _turns(events: VisitorEvents, group: str, pairs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Each visitor's served count for :func:`fair_order`: what it runs now or was served in the
    last :data:`RECENT_S` seconds, whichever is more, given the group's waiting ``pairs``."""
    queued = Counter(v for _, v in pairs)
    served = events.served_recently(group, queued)
    running = {v: n - queued[v] for v, n in events.in_group(group).items()}
    return {v: max(served.get(v, 0), running.get(v, 0)) for v in {*served, *running}}


def waiting_order(events: VisitorEvents, group: str, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """:func:`fair_order` of a group's waiting ``(event id, visitor)``, each visitor's turn counting
    what it runs now or was served lately (:func:`_turns`)."""
    return fair_order(pairs, _turns(events, group, pairs))


NEWCOMER = "\0newcomer"  # an event id no request has


def ahead_of(events: VisitorEvents, group: str, pairs: Sequence[tuple[str, str]], visitor: str) -> int:
    """How many of a group's waiting ``(event id, visitor)`` would be served before a request
    ``visitor`` sent now: its place in :func:`waiting_order` (what ``/expected-wait`` tells a page)."""
    return fair_order([*pairs, (NEWCOMER, visitor)], _turns(events, group, pairs)).index(NEWCOMER)


def ahead_in(demo: gr.Blocks, events: VisitorEvents) -> Callable[[str, str], int]:
    """(group, visitor) -> :func:`ahead_of` in ``demo``'s queue now."""
    def ahead(group: str, visitor: str) -> int:
        owner = events.visitor_of_event()
        pairs = [(e._id, owner.get(e._id, "?")) for e in gradio_internals.waiting_events(demo, group)]
        return ahead_of(events, group, pairs, visitor)

    return ahead


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
        holdings = {}
        served: dict[str, int] = {}
        if group in shares or group in caps:
            holdings = events.holdings(group, [e._id for e in gradio_internals.waiting_events(demo, group)])
            served = events.served_recently(group, Counter({v: len(h.waiting) for v, h in holdings.items()}))
        decision = decide(arrival, holdings, events.pending(arrival.address), shares, caps, MAX_EVENTS_PER_ADDRESS,
                          *gradio_internals.queue_load(demo), served=served)
        if decision.evict is None:
            return decision.refusal
        visitor, event_id = decision.evict
        message, retry = gave_way_message(group, holdings[visitor].total)
        # No await since the holdings were read: the victim is still waiting, and nothing else
        # takes the place before this request's push.
        if not gradio_internals.fail_waiting(demo, group, event_id, message, "Busy", retry_after=retry):
            return check_arrival(arrival, 0, 0, caps[group], shares, caps)  # gone meanwhile: the group is full
        log.info("a %s request of %s gave its place to %s's (max-min share)", group, visitor, arrival.address)
        return None

    def admitted(arrival: Arrival, event_id: str) -> None:
        events.add(arrival.address, event_id, arrival.concurrency_id)
        group = arrival.concurrency_id
        events.note(arrival.address, group)
        if group in shares:  # the new event takes its turn among the group's waiting ones
            waiting = gradio_internals.waiting_events(demo, group)
            if len(waiting) > 1:
                owner = events.visitor_of_event()
                pairs = [(e._id, owner.get(e._id, "?")) for e in waiting]
                gradio_internals.reorder_waiting(demo, group, waiting_order(events, group, pairs))

    gradio_internals.gate_pushes(demo, refuse, admitted, visitor=visitor)
    return events
