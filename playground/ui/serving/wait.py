"""How long a generation asked for now would wait for its first token, as the page shows it:
``GET /expected-wait?precision=full`` answers in JSON (never queued, never cached), from what the
server holds and what it measured:

- **Gradio's line for a handler**, when every handler of the generation group is busy: the
  requests waiting there and this one, at the rate the decoding loops let their requests go lately
  (:attr:`runtime.batching.Load.ends_per_s`), and never sooner than the first of the loops'
  requests can end, taking turns (:attr:`runtime.batching.Load.first_end_s`);
- **the decoding loop's turns** for rows: :meth:`runtime.batching.Scheduler.load` for this
  visitor, in the loop's own seconds a step.

Past :data:`OFFER_AFTER_S` the answer says to offer "Run on: this browser" at once
(``offer_browser``), and ``words`` say the wait and why, in the page's words. A loop not opened yet
(nothing generated in that precision) has nothing waiting: no question here opens an engine.

``GET /expected-wait?tab=inside`` answers the same for a heavy pass (Inside the model's Run, and
every event of the group it shares with Embeddings and Attention): with every handler of the group
busy, the passes served before this visitor's (the group's waiting ones in the order they will be
served, visitors in turn: serving/admission.py, :func:`.admission.ahead_of`), taken ``handlers`` at
a time at the seconds a pass of the group has taken (Gradio's own mean), then its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr

from runtime.batching import Load, Scheduler

from ...generation.params import DEFAULT_PRECISION, PRECISIONS as TAB_PRECISIONS
from ...resources import AUTO_PRECISION
from .. import gradio_internals
from .visitors import visitor_of

__all__ = ["ROUTE", "OFFER_AFTER_S", "PRECISIONS", "TABS", "Expected", "expected", "words", "answer", "ExpectedPass",
           "pass_answer", "ExpectedWait"]

ROUTE = "/expected-wait"
# A first token expected later than this on the server: the page offers the browser at once (a
# generation there starts in 3-4 s the first time, at once once the model is kept: docs/browser.md).
OFFER_AFTER_S = 5.0
PRECISIONS = (*TAB_PRECISIONS, AUTO_PRECISION)  # the Text generation tab's precision radio, and the API's default
TABS = ("generation", "inside")  # ?tab=: whose wait (a generation's first token, or a heavy pass)


@dataclass(frozen=True)
class Expected:
    """The wait of a generation asked for now: in Gradio's line for a handler, then in the loop."""

    loop: Load | None  # None: the loop of that precision is not open (nothing waits in it)
    handlers: int | None  # the generation group's handlers (None: the group has not run yet)
    running: int  # handlers busy
    line: int  # requests waiting in Gradio's line for one
    ends_per_s: float | None  # requests leaving the decoding loops a second, all together

    @property
    def handlers_busy(self) -> bool:
        """Every handler runs a generation. (Requests in Gradio's line beside a free handler are
        the moment before Gradio starts them.)"""
        return self.handlers is not None and self.running >= self.handlers

    first_end_s: float | None = None  # seconds before the first of the open loops' requests ends (None: not known)

    @property
    def line_s(self) -> float | None:
        """Seconds in Gradio's line before a handler takes it: 0 with one free; with every handler
        busy, the line ahead and this one at the rate the loops let requests go lately, but never
        sooner than the first of their requests can end (a group's long generations, taking turns,
        end late and together: the last minute's rate says nothing of when the next ends); None
        when neither is known (and long)."""
        if not self.handlers_busy:
            return 0.0
        known = [s for s in (self.rate_s, self.first_end_s) if s is not None]
        return max(known) if known else None

    @property
    def rate_s(self) -> float | None:
        """The line ahead and this one at the rate the loops let requests go lately (None: none went)."""
        return (self.line + 1) / self.ends_per_s if self.ends_per_s else None

    @property
    def seconds(self) -> float | None:
        """Seconds to the first token (None: not known, and long); once a handler takes it, the
        request meets the loop as a newcomer does now."""
        line_s = self.line_s
        return None if line_s is None else line_s + (self.loop.expected_wait_s if self.loop is not None else 0.0)

    @property
    def offer_browser(self) -> bool:
        seconds = self.seconds
        return seconds is None or seconds > OFFER_AFTER_S


def expected(loop: Load | None, group: tuple[int, int | None, int], loads: Sequence[Load]) -> Expected:
    """The wait given the loop of the precision asked for, the generation group's ``(running,
    handlers, waiting)`` (:func:`gradio_internals.group_load`) and every open loop's load (their
    requests' ends together free the handlers)."""
    rates = [load.ends_per_s for load in loads if load.ends_per_s]
    firsts = [load.first_end_s for load in loads if load.first_end_s is not None]
    running, handlers, line = group
    return Expected(loop, handlers, running, line, sum(rates) if rates else None, min(firsts) if firsts else None)


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def words(e: Expected) -> str:
    """The wait as the page says it, with what makes it."""
    seconds, parts = e.seconds, []
    if e.handlers_busy:
        parts.append(f"all {e.handlers} of its generation handlers are busy and {e.line} more wait for one")
        if e.first_end_s is not None and (e.rate_s is None or e.first_end_s > e.rate_s):
            parts.append(f"the first of the generations they run ends in about {_s(e.first_end_s)}")
    if e.loop is not None and e.loop.wait_steps and e.loop.step_s:
        parts.append(f"{e.loop.waiting} generations take turns for the decoding loop's rows "
                     f"({e.loop.running_rows} decoding, {e.loop.step_s * 1000:.0f} ms a step)")
    why = f": {'; '.join(parts)}" if parts else ""
    if seconds is None:
        return f"The server's line is long and not moving lately{why}."
    if seconds < 1:
        return "Under a second before the first token on the server: it has rows free."
    return f"About {_s(seconds)} before the first token on the server{why}."


@dataclass(frozen=True)
class ExpectedPass:
    """The wait of a heavy pass asked for now: Gradio's line for one of the group's handlers, in
    the order the group serves its waiting requests."""

    handlers: int | None  # the group's handlers (None: the group has not run yet)
    running: int  # handlers busy
    line: int  # requests waiting for one
    ahead: int  # of those, the ones to be served before this visitor's
    pass_s: float | None  # a pass's mean seconds (None: none has run)

    @property
    def handlers_busy(self) -> bool:
        return self.handlers is not None and self.running >= self.handlers

    @property
    def seconds(self) -> float | None:
        """Seconds until the pass is drawn (None: not known, and long); 0 with a handler free
        and nothing measured yet."""
        if not self.handlers_busy:
            return self.pass_s or 0.0
        if self.pass_s is None:
            return None
        return (self.ahead // max(self.handlers or 1, 1) + 2) * self.pass_s  # a turn of the running ones, those ahead, its own

    @property
    def offer_browser(self) -> bool:
        seconds = self.seconds
        return seconds is None or seconds > OFFER_AFTER_S


def pass_answer(e: ExpectedPass) -> dict[str, Any]:
    """The JSON of ``/expected-wait?tab=inside`` for ``e``."""
    seconds = e.seconds
    why = ""
    if e.handlers_busy:
        why = (f": all {e.handlers} of its handlers for heavy passes are busy, and {e.ahead} of the {e.line} passes "
               f"waiting go before yours (visitors in turn)")
    if seconds is None:
        text = f"The server's line is long and not moving lately{why}."
    elif seconds < 1:
        text = "Under a second for the pass on the server: it has a handler free."
    else:
        text = f"About {_s(seconds)} before the pass is drawn on the server{why}."
    return {
        "tab": "inside",
        "until": "the pass is drawn",
        "expected_wait_s": None if seconds is None else round(seconds, 2),
        "offer_browser": e.offer_browser,
        "offer_after_s": OFFER_AFTER_S,
        "words": text,
        "line": {"handlers": e.handlers, "running": e.running, "waiting": e.line, "ahead": e.ahead,
                 "pass_s": None if e.pass_s is None else round(e.pass_s, 3)},
    }


class ExpectedWait:
    """ASGI middleware answering ``GET`` :data:`ROUTE` (the module's doc); anything else passes
    on. ``loop_of``: the open decoding loop of a precision, or None (``Resources.open_loop``);
    ``loops``: every open one; ``group``: the generation group's concurrency id; ``pass_group``
    the heavy passes'; ``ahead``: (group, visitor) -> how many of the group's waiting requests
    go before a newcomer's (the admission's order; None: all of them)."""

    def __init__(self, app: Callable, demo: gr.Blocks, loop_of: Callable[[str], Scheduler | None],
                 loops: Callable[[], list[Scheduler]], group: str, visitor: Callable[[Any], str] = visitor_of,
                 pass_group: str = "forward", ahead: Callable[[str, str], int] | None = None) -> None:
        self.app, self.demo, self.loop_of, self.loops, self.group, self.visitor = app, demo, loop_of, loops, group, visitor
        self.pass_group, self.ahead = pass_group, ahead

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "")
        root = scope.get("root_path") or ""
        if root and path.startswith(root + "/"):
            path = path[len(root):]
        if scope["type"] != "http" or path != ROUTE:
            await self.app(scope, receive, send)
            return
        from starlette.datastructures import QueryParams

        query = QueryParams(scope.get("query_string", b""))
        precision = query.get("precision") or DEFAULT_PRECISION
        tab = query.get("tab") or TABS[0]
        if scope.get("method") not in ("GET", "HEAD"):
            status, body = 405, {"detail": f"Only GET is answered at {ROUTE}."}
        elif tab not in TABS:
            status, body = 400, {"detail": f"tab must be one of {', '.join(TABS)}, not {tab[:40]!r}"}
        elif tab == "inside":
            status, body = 200, pass_answer(self.expected_pass(self.visitor(scope)))
        elif precision not in PRECISIONS:
            status, body = 400, {"detail": f"precision must be one of {', '.join(PRECISIONS)}, not {precision[:40]!r}"}
        else:
            status, body = 200, self.answer(precision, self.visitor(scope))
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": data if scope.get("method") != "HEAD" else b""})

    def answer(self, precision: str, visitor: str) -> dict[str, Any]:
        loop = self.loop_of(precision)
        e = expected(loop.load(visitor) if loop is not None else None, gradio_internals.group_load(self.demo, self.group),
                     [other.load() for other in self.loops()])
        return answer(e, precision, loop.max_rows if loop is not None else 0)

    def expected_pass(self, visitor: str) -> ExpectedPass:
        running, handlers, line = gradio_internals.group_load(self.demo, self.pass_group)
        ahead = min(self.ahead(self.pass_group, visitor), line) if self.ahead is not None and line else line
        return ExpectedPass(handlers, running, line, ahead, gradio_internals.group_pass_s(self.demo, self.pass_group))


def answer(e: Expected, precision: str, rows: int) -> dict[str, Any]:
    """The JSON of ``/expected-wait`` for ``e`` (``rows``: the loop's batch rows)."""
    seconds, load = e.seconds, e.loop
    return {
        "precision": precision,
        "expected_wait_s": None if seconds is None else round(seconds, 2),
        "offer_browser": e.offer_browser,
        "offer_after_s": OFFER_AFTER_S,
        "words": words(e),
        "line": {"handlers": e.handlers, "running": e.running, "waiting": e.line,
                 "wait_s": None if e.line_s is None else round(e.line_s, 2),
                 "ends_per_s": None if e.ends_per_s is None else round(e.ends_per_s, 3),
                 "first_end_s": None if e.first_end_s is None else round(e.first_end_s, 2)},
        "loop": None if load is None else {
            "rows": rows, "running_rows": load.running_rows, "waiting": load.waiting,
            "wait_steps": load.wait_steps, "step_s": None if load.step_s is None else round(load.step_s, 4),
            "wait_s": round(load.expected_wait_s, 2),
        },
    }
