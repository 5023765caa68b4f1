"""Whose turn it is in the decoding loop: visitors served in turn by the tokens they have been
given (max-min in tokens, not in places), and a running generation that yields its rows after a
slice when a visitor given fewer tokens waits. Pure functions on the loop's state, so that the
edges (a slice of n - 1 tokens keeps its rows, n yields) are tested without threads.

``runtime.batching.Scheduler`` calls :func:`plan` between steps and keeps :class:`Served`;
:func:`wait_steps` says, from the same state, how many steps a request arriving now waits for its
rows (the expected wait a page shows, in the loop's measured seconds a step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

# Tokens a generation decodes (per row) before it yields its rows to a waiting visitor who has
# been given fewer. A learner's first token then comes within one slice of each other visitor's
# turn (docs/space.md, "Turns in the decoding loop"); a shorter slice parks and resumes more
# often (a copy of the request's cache each way, ~1 ms a row at full context).
SLICE_TOKENS = 32
# Visitors whose tokens are remembered while the loop is busy (a visitor who comes back keeps
# its count rather than starting afresh); past this the longest-forgotten go first. The loop
# forgets everyone once it is idle.
MAX_REMEMBERED_VISITORS = 4096


class Turn(Protocol):
    """What :func:`plan` reads of a request (``runtime.batching.Request`` has it)."""

    visitor: str
    arrival: int  # the scheduler's count of requests when it came
    n: int  # rows
    index: int  # tokens decoded so far (per row)
    slice_start: int  # ``index`` when it last entered the batch
    remaining: int  # tokens it may still decode (per row): its rows are free after these at the latest


class Served:
    """Tokens given to each visitor while the loop is busy, bounded by
    :data:`MAX_REMEMBERED_VISITORS`. A visitor arriving when others are busy starts at the
    fewest any busy visitor has (start-time fair queuing's virtual time, as Linux's CFS does):
    never behind those already there, and with no credit for the time it was away, which would
    let it hold the loop for as long as it stayed away."""

    def __init__(self, capacity: int = MAX_REMEMBERED_VISITORS) -> None:
        self.capacity = capacity
        self.tokens: dict[str, int] = {}

    def __getitem__(self, visitor: str) -> int:
        return self.tokens.get(visitor, 0)

    def arrive(self, visitor: str, busy: set[str]) -> None:
        """``visitor`` sends a request while ``busy`` (the visitors with a request in the loop,
        waiting or running) are served."""
        if visitor in busy:
            return
        floor = min((self.tokens.get(v, 0) for v in busy), default=0)
        self.tokens[visitor] = max(self.tokens.pop(visitor, 0), floor)  # (re-inserted: the newest)
        while len(self.tokens) > self.capacity:
            oldest = next((v for v in self.tokens if v not in busy and v != visitor), None)
            if oldest is None:
                break
            del self.tokens[oldest]

    def add(self, visitor: str, tokens: int) -> None:
        if visitor in self.tokens:
            self.tokens[visitor] += tokens

    def clear(self) -> None:
        self.tokens.clear()


def line(waiting: Sequence[Turn], served: Served) -> list:
    """The waiting requests in the order they are served: their visitor's tokens so far, fewest
    first; among equals, a visitor's n-th request (in arrival order) after every other visitor's
    up to their n-th, so that a visitor who sent several at once is not ahead of a newcomer with
    all of them (as Gradio's line is ordered: serving/admission.fair_order); then arrival."""
    rank: dict[str, int] = {}
    keyed = []
    for s in sorted(waiting, key=lambda s: s.arrival):
        keyed.append(((served[s.visitor], rank.get(s.visitor, 0), s.arrival), s))
        rank[s.visitor] = rank.get(s.visitor, 0) + 1
    return [s for _, s in sorted(keyed, key=lambda pair: pair[0])]


def plan(waiting: Sequence[Turn], running: Sequence[Turn], served: Served, room: int,
         slice_tokens: int = SLICE_TOKENS) -> tuple[list, list]:
    """``(admitted, parked)``: the waiting requests that enter the batch now, and the running ones
    that yield their rows to them first.

    Waiting requests are taken by their visitor's tokens so far, fewest first; among equals a
    visitor's n-th waiting request after every other visitor's up to their n-th (:func:`line`),
    then arrival order. One that does not fit in ``room`` rows is given rows by running requests that
    have decoded a whole slice since they entered and whose visitor has been given more tokens
    than its own (the most served first). The first that still does not fit stops the line, so a
    request of many samples is not passed for ever. (Where the yielded rows' cache goes is the
    scheduler's business: kept aside within a bound, else read anew.)"""
    order = line(waiting, served)
    admitted: list = []
    parked: list = []
    for seq in order:
        if seq.n > room:
            mine = served[seq.visitor]
            candidates = sorted(
                (s for s in running if s not in parked and s.index - s.slice_start >= slice_tokens
                 and served[s.visitor] > mine),
                key=lambda s: (-served[s.visitor], -(s.index - s.slice_start), -s.arrival),
            )
            chosen, freed = [], 0
            for s in candidates:
                if room + freed >= seq.n:
                    break
                chosen.append(s)
                freed += s.n
            if room + freed < seq.n:
                break
            parked += chosen
            room += freed
        admitted.append(seq)
        room -= seq.n
    return admitted, parked


def _turn_of(visitor: str, busy: set[str], served: Served) -> int:
    """The tokens ``visitor`` counts as given when its request comes now (:meth:`Served.arrive`)."""
    if visitor in busy:
        return served[visitor]
    return max(served[visitor], min((served[v] for v in busy), default=0))


def wait_steps(waiting: Sequence[Turn], running: Sequence[Turn], served: Served, visitor: str, max_rows: int,
               rows: int = 1, slice_tokens: int = SLICE_TOKENS) -> int:
    """Steps of the loop before a request of ``rows`` rows from ``visitor``, arriving now, gets
    its rows, as :func:`plan` would serve it (0: rows are free for it at once).

    Ahead of it wait the requests of visitors given fewer tokens than it (its turn begins at the
    fewest any busy visitor has), and of those given as many, each visitor's first requests up to
    as many as the newcomer's own waiting ahead of it (:func:`line`); rows come free at once, or as running requests end, or end their
    slice once their visitor has been given more than it; when more rows are needed than the
    batch has, each row frees again a slice after it was taken. Joining the cache on an aligned step, and a generation ending
    early at ``<|endoftext|>``, are not counted."""
    busy = {s.visitor for s in (*running, *waiting)}
    mine = _turn_of(visitor, busy, served)
    # ahead: those given fewer, and among those given as many, their visitor's first as many as it has waiting
    own = sum(1 for s in waiting if s.visitor == visitor)
    counted: dict[str, int] = {}
    need = rows
    for s in sorted(waiting, key=lambda s: s.arrival):
        if served[s.visitor] < mine or (served[s.visitor] == mine and counted.get(s.visitor, 0) <= own):
            need += s.n
        counted[s.visitor] = counted.get(s.visitor, 0) + 1
    frees = [0] * max(0, max_rows - sum(s.n for s in running))  # when each row comes free, in steps from now
    for s in running:
        # at the end of its slice, or later once its visitor has been given more than the newcomer
        # (its count grows by its rows every step; the newcomer's does not while it waits)
        slice_left = max(0, slice_tokens - (s.index - s.slice_start))
        given_more = 0 if served[s.visitor] > mine else (mine - served[s.visitor]) // s.n + 1
        own = s.visitor == visitor  # (a visitor's count grows with each of its requests: never more than its own)
        frees += [s.remaining if own else max(0, min(s.remaining, max(slice_left, given_more)))] * s.n
    if not frees:  # (no rows at all)
        return 0
    frees.sort()
    rounds, k = divmod(need - 1, len(frees))  # (a row taken by one ahead comes free again a slice later)
    return frees[k] + rounds * slice_tokens


def first_end_steps(remaining: Sequence[tuple[int, int]], max_rows: int) -> int | None:
    """Steps of the loop before the first of its requests ends (``remaining``: each request's rows
    and the tokens it may still decode, running or waiting), when they take turns for
    ``max_rows`` rows: while more rows want the batch than it has, each request decodes about
    ``max_rows`` / (their rows) of the steps, so the one with least left ends after that many of its
    tokens, stretched by as much (None: no request). A generation ending early at
    ``<|endoftext|>`` is not counted: it is an upper bound for those, a fair guess for long ones."""
    if not remaining:
        return None
    rows = sum(n for n, _ in remaining)
    least = min(left for _, left in remaining)
    return math.ceil(least * max(1.0, rows / max(max_rows, 1)))
