"""A class on one Space: the app started as on a Space (``SPACE_ID`` set) behind a small local
reverse proxy that appends ``X-Forwarded-For``, and N learners, each from its own loopback address
(127.0.0.x), going through a lesson with the page's own events: open the page, tokenize, attention,
inside, generate 32 tokens, start a Watch it learn run. Optionally beside an abusive visitor
(``--abuse``: 30 long generations at once, each forging ``X-Forwarded-For``), or a hostile group
(``--siege N``: N addresses each keeping its share of long generations, or with ``--siege-with``
Inside or Attention passes, in flight, sending again at once whenever one ends or is refused). Learners may obey ``Retry-After`` (``--patience S``:
a refused action is tried again after the time the app gave, for up to S seconds; its wait counts
from the first click). Prints, per action, the median and 95th percentile wait, the refusals
(with what they said), failures, and the app's memory.

    python -m benchmarks.classroom                    # 40 learners
    python -m benchmarks.classroom --learners 100
    python -m benchmarks.classroom --learners 16 --abuse
    python -m benchmarks.classroom --actions generate --abuse    # only the generation step
    python -m benchmarks.classroom --actions generate --learners 20 --siege 16 --patience 120
    python -m benchmarks.classroom --actions inside --learners 10 --siege 110 --siege-per 1 --siege-with inside
    python -m benchmarks.classroom --siege            # the siege table: every group shape beside the quiet baseline
    python -m benchmarks.classroom --siege --shapes 120x1   # one row of it
    python -m benchmarks.classroom --soak             # the mixed soak: memory 30 s after heavy traffic
    python -m benchmarks.classroom --url https://USER-NAME.hf.space/ --learners 10   # an app already running

With ``--url`` no app is started: the learners go to that app (a Space, or a proxy of your own).
Only on a loopback address does each learner get an address of its own (127.0.0.x); elsewhere
they all leave from this machine's address, which a Space counts as one visitor (4 generations
at once, the rest told to try again), so a remote class measures one visitor's share, not a
class. ``--abuse``, ``--siege`` and ``--soak`` run against loopback only.

Bounded in count (at most 200 learners, 60 abusive requests, 250 siege addresses) and time
(every action at most ``--timeout`` seconds, a siege ``--siege-for`` seconds). tests/serving/test_classroom.py
runs its bars.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

API = "gradio_api"
LESSON = ("page", "tokenize", "attention", "inside", "generate", "learn")
# Also: "learn15", a 15 s Watch it learn run through /learn, timed from the click to its end (its
# first point too); and, with "generate", the wait /expected-wait told the learner just before.
# The page's events, by the handler names Gradio gives them (config "api_name" of a private event).
PAGE_EVENTS = {"tokenize": "ui_tokenize", "attention": "ui_attention", "inside": "ui_run",
               "generate": "ui_generate", "learn": "ui_learn"}
MAX_LEARNERS = 200
ABUSE_REQUESTS = 30
ABUSE_TOKENS = 512
ABUSER_SOURCE = "127.0.0.250"
MAX_SIEGE_ADDRESSES = 250
SIEGE_TOKENS = 512
SIEGE_ENDPOINTS = ("generate", "inside", "attention", "mixed")  # long generations, heavy passes on 25-token texts no one else sent, or both
MIXED = ("generate", "generate", "inside", "attention")  # a "mixed" address's requests, by slot
# The group shapes of the siege table (--siege alone): addresses x requests each, what they send.
SIEGE_SHAPES = {"16x4": (16, 4, "generate"), "40x1": (40, 1, "generate"), "40x4-mixed": (40, 4, "mixed"),
                "110x1-inside": (110, 1, "inside"), "120x1": (120, 1, "generate")}
TABLE_ACTIONS = ("generate", "inside", "learn15")
TABLE_LEARNERS, TABLE_PATIENCE_S, TABLE_HEAD_START_S = 10, 60.0, 10.0
LEARN_SECONDS = 15
SIEGE_BACKOFF_S = 0.5  # a hostile client sends again at once; this only keeps the loop from spinning on a refusal


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host == "localhost" or host.startswith("127.")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))


def source_of(index: int) -> str:
    """Learner ``index``'s own loopback address: 127.0.0.2 onwards (127.0.0.1 is the proxy's)."""
    if not 0 <= index < MAX_LEARNERS:
        raise ValueError(f"at most {MAX_LEARNERS} learners")
    return f"127.0.0.{index + 2}"


# --- the reverse proxy ---------------------------------------------------------------------------


class Proxy:
    """A reverse proxy on loopback, as a Space's: each request's head gets the client's address
    appended to ``X-Forwarded-For`` (after whatever the client sent) and ``Connection: close``
    (one request a connection, so every request's head is rewritten); then bytes are piped."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> "Proxy":
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=2**16, backlog=1024)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self.loop.run_until_complete(serve())
        self.loop.run_forever()

    @staticmethod
    def rewrite(head: bytes, client: str) -> bytes:
        """A request head with ``client`` appended to X-Forwarded-For and Connection: close."""
        lines = head.split(b"\r\n")
        kept, forwarded = [lines[0]], []
        for line in lines[1:]:
            name = line.split(b":", 1)[0].strip().lower()
            if name == b"x-forwarded-for":
                forwarded.append(line.split(b":", 1)[1].strip())
            elif name not in (b"connection", b"keep-alive") and line:
                kept.append(line)
        kept.append(b"X-Forwarded-For: " + b", ".join([*forwarded, client.encode()]))
        kept.append(b"Connection: close")
        return b"\r\n".join(kept) + b"\r\n\r\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client = writer.get_extra_info("peername")[0]
        upstream_writer = None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            up_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            upstream_writer.write(self.rewrite(head[:-4], client))

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                try:
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                finally:
                    dst.close()

            await asyncio.gather(pipe(reader, upstream_writer), pipe(up_reader, writer), return_exceptions=True)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()
            if upstream_writer is not None:
                upstream_writer.close()


# --- a learner's page -----------------------------------------------------------------------------


class Refused(Exception):
    """The app refused the request: its message says why and when to try again (``retry_after``:
    seconds, from the ``Retry-After`` header or, for a request that gave its place to another
    visitor's, from its message; None when the app gave none)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Page:
    """One learner's open page, as the browser's Gradio client talks to the app: ``queue/join``
    the page's events by number with the page's own input values, read ``queue/data``."""

    def __init__(self, url: str, source: str | None = "127.0.0.1", headers: dict[str, str] | None = None,
                 timeout_s: float = 300.0) -> None:
        self.url = url
        # source None: this machine's own address (an app that is not on loopback)
        self.http = httpx.Client(timeout=timeout_s, headers=headers or {},
                                 transport=httpx.HTTPTransport(local_address=source) if source else None)
        self.session = f"learner{time.time_ns() % 10**12}{id(self) % 10**6}"
        self.config: dict[str, Any] = {}
        self.first_update_at: float | None = None  # perf_counter() of the last event's first streamed update
        self.notes: dict[str, float] = {}  # what the last action measured beside its wait (first token, told wait...)

    def close(self) -> None:
        self.http.close()

    def open(self) -> None:
        """GET the page and its config, as a browser does."""
        for path in ("", "config"):
            r = self.http.get(self.url + path)
            if r.status_code in (429, 503):
                raise Refused(f"HTTP {r.status_code}: {r.text[:200]}", _seconds(r.headers.get("retry-after")))
            r.raise_for_status()
        self.config = r.json()

    def event(self, name: str, overrides: dict[str, Any] | None = None) -> tuple[int, list]:
        """(fn_index, data) of the page's event ``name`` with its inputs' values as the page
        first shows them, labels in ``overrides`` set instead."""
        components = {c["id"]: c for c in self.config["components"]}
        dep = next((d for d in self.config["dependencies"] if d.get("api_name") == name), None)
        if dep is None:
            raise LookupError(f"the page has no event {name!r}")
        data = []
        for i in dep["inputs"]:
            props = components[i].get("props", {})
            label = props.get("label")
            data.append((overrides or {}).get(label, props.get("value")))
        return dep["id"], data

    def run(self, name: str, overrides: dict[str, Any] | None = None, until: str = "process_completed") -> dict:
        """Run the page's event ``name`` and read its messages until ``until`` (``process_starts``:
        it began); the last message. Raises :class:`Refused` when the app turns it away."""
        fn_index, data = self.event(name, overrides)
        trigger = next((t[0] for t in next(d for d in self.config["dependencies"] if d["id"] == fn_index)["targets"]
                        if t[0] is not None), None)
        r = self.http.post(f"{self.url}{API}/queue/join", json={
            "data": data, "event_data": None, "fn_index": fn_index, "trigger_id": trigger, "session_hash": self.session})
        if r.status_code != 200:
            detail = r.json().get("detail") if r.headers.get("content-type", "").startswith("application/json") else r.text
            raise Refused(f"HTTP {r.status_code} (Retry-After {r.headers.get('retry-after')}): {detail}",
                          _seconds(r.headers.get("retry-after")))
        event_id = r.json()["event_id"]
        self.first_update_at = None
        with self.http.stream("GET", f"{self.url}{API}/queue/data", params={"session_hash": self.session}) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") not in (None, event_id):
                    continue
                kind = message.get("msg")
                if kind == "process_generating" and self.first_update_at is None:
                    self.first_update_at = time.perf_counter()
                if kind == "process_completed":
                    output = message.get("output") or {}
                    if not message.get("success"):
                        error = str(output.get("error"))
                        if "busy" in error.lower() or "too many" in error.lower():
                            raise Refused(error, _seconds(output.get("retry_after")))
                        raise RuntimeError(f"{name}: {error}")
                    return message
                if kind == until:
                    return message
        raise RuntimeError(f"{name}: the stream ended without a result")


    def expected_wait(self, precision: str = "full", tab: str = "generation") -> dict:
        """What ``/expected-wait`` tells this page now (a page asks it when its learner is about to
        click Generate, or Inside's Run with ``tab="inside"``)."""
        r = self.http.get(f"{self.url}expected-wait", params={"precision": precision, "tab": tab})
        r.raise_for_status()
        return r.json()

    def generate(self, tokens: int) -> None:
        """The page's Generate of ``tokens`` tokens, the wait the server told just before noted
        (``told_s``, None: long and not moving; ``offered``: the page would have offered the
        browser at once) with the first token's time (``first_s``, from the click)."""
        told = self.expected_wait()
        t0 = time.perf_counter()
        self.notes = {"told_s": told["expected_wait_s"], "offered": float(told["offer_browser"])}
        self.run(PAGE_EVENTS["generate"], {"Max new tokens": tokens})
        if self.first_update_at is not None:
            self.notes["first_s"] = self.first_update_at - t0

    def inside(self) -> None:
        """Inside's Run on the server, the wait the server told just before noted (``told_s``,
        ``offered``: the page would have offered this browser at once, which draws it in well
        under a second)."""
        told = self.expected_wait(tab="inside")
        self.notes = {"told_s": told["expected_wait_s"], "offered": float(told["offer_browser"])}
        self.run(PAGE_EVENTS["inside"])

    def learn(self, seconds: int = LEARN_SECONDS, seed: int = 0) -> None:
        """A Watch it learn run of ``seconds`` through ``/learn`` (as long as it may train: its cap
        ends it), read to its end; its first point's time noted (``first_s``, from the click)."""
        t0 = time.perf_counter()
        r = self.http.post(f"{self.url}{API}/call/learn", json={"data": [seconds, seed, "proper", 5000]})
        if r.status_code != 200:
            raise Refused(f"HTTP {r.status_code}: {r.text[:200]}", _seconds(r.headers.get("retry-after")))
        event = ""
        with self.http.stream("GET", f"{self.url}{API}/call/learn/{r.json()['event_id']}") as stream:
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event in ("generating", "complete"):
                    state = (json.loads(line[5:]) or [{}])[0]
                    if state.get("step", 0) > 0 and "first_s" not in self.notes:
                        self.notes = {"first_s": time.perf_counter() - t0}
                    if event == "complete":
                        return
                elif line.startswith("data:") and event == "error":
                    error = line[5:].strip()
                    if "busy" in error.lower() or "too many" in error.lower() or "try again" in error.lower():
                        raise Refused(error, 30.0)
                    raise RuntimeError(f"learn: {error}")
        raise RuntimeError("learn: the stream ended without a result")


def _seconds(value: Any) -> float | None:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None


# --- the lesson ----------------------------------------------------------------------------------


@dataclass
class Action:
    waits: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # refused for good (no patience, or it ran out)
    failed: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)  # refusals a patient learner waited out and tried again
    notes: list[dict[str, float]] = field(default_factory=list)  # what each served one measured beside its wait (Page.notes)

    def noted(self, key: str) -> list[float]:
        return [n[key] for n in self.notes if n.get(key) is not None]


@dataclass
class Report:
    learners: int
    tokens: int
    actions: dict[str, Action]
    memory_mb: dict[str, float] = field(default_factory=dict)
    abuser: dict[str, int] = field(default_factory=dict)
    siege: dict[str, Any] = field(default_factory=dict)

    def refusals(self, action: str | None = None) -> int:
        return sum(len(a.refused) for k, a in self.actions.items() if action in (None, k))

    def median(self, action: str) -> float:
        waits = self.actions[action].waits
        return statistics.median(waits) if waits else float("nan")

    def p95(self, action: str) -> float:
        waits = sorted(self.actions[action].waits)
        return waits[min(len(waits) - 1, int(0.95 * len(waits)))] if waits else float("nan")

    def max(self, action: str) -> float:
        waits = self.actions[action].waits
        return max(waits) if waits else float("nan")

    def summary(self) -> str:
        rows = [f"{self.learners} learners, {self.tokens} tokens a generation"
                + (f"; abuser: {self.abuser}" if self.abuser else "")
                + (f"; siege: {self.siege}" if self.siege else ""),
                f"{'action':<10} {'done':>5} {'median s':>9} {'p95 s':>8} {'refused':>8} {'failed':>7} {'retried':>8}"]
        for name, a in self.actions.items():
            rows.append(f"{name:<10} {len(a.waits):>5} {self.median(name):>9.2f} {self.p95(name):>8.2f} "
                        f"{len(a.refused):>8} {len(a.failed):>7} {len(a.retried):>8}")
        for name, a in self.actions.items():
            for what in sorted(set(a.refused))[:3]:
                rows.append(f"  {name} refused: {what[:160]}")
            for what in sorted(set(a.retried))[:2]:
                rows.append(f"  {name} told to try again: {what[:160]}")
            for what in sorted(set(a.failed))[:3]:
                rows.append(f"  {name} failed: {what[:160]}")
        if self.memory_mb:
            rows.append("app memory (RSS, MB): " + ", ".join(f"{k} {v:.0f}" for k, v in self.memory_mb.items()))
        return "\n".join(rows)


def lesson_steps(tokens: int) -> dict[str, Callable[[Page], Any]]:
    """Each action of the lesson on a learner's page."""
    return {
        "page": lambda page: page.open(),
        "tokenize": lambda page: page.run(PAGE_EVENTS["tokenize"]),
        "attention": lambda page: page.run(PAGE_EVENTS["attention"]),
        "inside": lambda page: page.inside(),
        "generate": lambda page: page.generate(tokens),
        # A run trains for a while: "start" is its first update; the page is then closed.
        "learn": lambda page: page.run(PAGE_EVENTS["learn"], {"Seconds of training": 10}, until="process_generating"),
        "learn15": lambda page: page.learn(LEARN_SECONDS),
    }


def _learner(url: str, index: int, actions: list[str], steps: dict, report: Report, lock: threading.Lock,
             start: threading.Barrier, timeout_s: float, patience_s: float = 0.0, delay_s: float = 0.0) -> None:
    page = Page(url, source_of(index) if is_loopback(url) else None, timeout_s=timeout_s)
    try:
        if "page" not in actions:
            page.open()  # the page is open before the class starts
        start.wait(timeout_s)
        time.sleep(delay_s)
        for name in actions:
            t0 = time.perf_counter()
            try:
                while True:
                    try:
                        steps[name](page)
                        break
                    except Refused as err:
                        # A patient learner does what the app said: waits its Retry-After, then clicks again.
                        wait_s = err.retry_after if err.retry_after is not None else 5.0
                        if time.perf_counter() + wait_s - t0 > patience_s:
                            raise
                        with lock:
                            report.actions[name].retried.append(str(err))
                        time.sleep(wait_s)
                with lock:
                    report.actions[name].waits.append(time.perf_counter() - t0)
                    report.actions[name].notes.append(dict(page.notes))
                page.notes = {}
            except Refused as err:
                with lock:
                    report.actions[name].refused.append(str(err))
            except Exception as err:  # noqa: BLE001 -- counted; the lesson goes on
                with lock:
                    report.actions[name].failed.append(f"{type(err).__name__}: {err}")
    finally:
        page.close()


def abuse(url: str, requests: int = ABUSE_REQUESTS, tokens: int = ABUSE_TOKENS, source: str = ABUSER_SOURCE) -> dict[str, int]:
    """One visitor asking for ``requests`` long generations at once, each forging another
    ``X-Forwarded-For``, and reading none of them (the app stops those nobody reads). Returns how
    many were accepted and refused."""
    from benchmarks.load import LONG_PROMPT

    counts = {"accepted": 0, "refused": 0}
    with httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address=source)) as http:
        for i in range(min(requests, 60)):
            r = http.post(f"{url}{API}/call/generate", headers={"X-Forwarded-For": f"198.51.100.{i + 1}"},
                          json={"data": [LONG_PROMPT, tokens, 0.8, 50, 0.95, i]})
            counts["accepted" if r.status_code == 200 else "refused"] += 1
    return counts


def run_classroom(url: str, learners: int = 40, tokens: int = 32, actions: tuple[str, ...] = LESSON,
                  abusive: bool = False, pid: int | None = None, timeout_s: float = 300.0, patience_s: float = 0.0,
                  spread_s: float = 0.0) -> Report:
    """``learners`` pages going through ``actions`` (all start together, or one every
    ``spread_s / learners`` seconds), beside an abuser when ``abusive`` (its requests sent just
    before the class starts); ``patience_s``: how long a learner keeps trying a refused action
    again, after the ``Retry-After`` the app gave; ``pid``: the app's process, whose memory is
    reported."""
    if abusive and not is_loopback(url):
        raise ValueError(f"the abuser only targets an app on loopback, not {url}")
    if not 1 <= learners <= MAX_LEARNERS:
        raise ValueError(f"learners: 1 to {MAX_LEARNERS}")
    report = Report(learners, tokens, {name: Action() for name in actions})
    steps, lock = lesson_steps(tokens), threading.Lock()
    start = threading.Barrier(learners + 1)
    peak, stop = [0.0], threading.Event()
    if pid is not None:
        report.memory_mb["before"] = rss_mb(pid)

        def sample() -> None:
            while not stop.wait(0.5):
                peak[0] = max(peak[0], rss_mb(pid))
        threading.Thread(target=sample, daemon=True).start()
    with ThreadPoolExecutor(learners) as pool:
        futures = [pool.submit(_learner, url, i, list(actions), steps, report, lock, start, timeout_s, patience_s,
                               spread_s * i / learners)
                   for i in range(learners)]
        if abusive:
            report.abuser = abuse(url)
        start.wait(timeout_s)
        for future in futures:
            future.result()
    stop.set()
    if pid is not None:
        report.memory_mb["peak"] = peak[0]
        report.memory_mb["after"] = rss_mb(pid)
    return report


# --- a hostile group -------------------------------------------------------------------------------


def siege_source(index: int) -> str:
    """Siege address ``index``: 127.0.1.1 onwards, apart from the learners' 127.0.0.x."""
    if not 0 <= index < MAX_SIEGE_ADDRESSES:
        raise ValueError(f"at most {MAX_SIEGE_ADDRESSES} siege addresses")
    return f"127.0.1.{index + 1}"


class Siege:
    """``addresses`` visitors, each keeping ``per_address`` long generations in flight for
    ``duration_s`` seconds: a request that ends, is refused or gives its place to another
    visitor's is sent again at once (after :data:`SIEGE_BACKOFF_S` on a refusal). Each reads its
    stream, as a client the app cannot tell from a learner's. Runs on threads of its own:
    :meth:`start`, then :meth:`join` for the counts."""

    def __init__(self, url: str, addresses: int, per_address: int = 4, duration_s: float = 60.0,
                 tokens: int = SIEGE_TOKENS, endpoint: str = "generate", precision: str = "full") -> None:
        if not is_loopback(url):
            raise ValueError(f"a siege only targets an app on loopback, not {url}")
        if not 1 <= addresses <= MAX_SIEGE_ADDRESSES or not 1 <= per_address <= 8:
            raise ValueError(f"1 to {MAX_SIEGE_ADDRESSES} addresses, 1 to 8 requests each")
        if endpoint not in SIEGE_ENDPOINTS:
            raise ValueError(f"a siege sends one of {', '.join(SIEGE_ENDPOINTS)}, not {endpoint!r}")
        self.url, self.addresses, self.per_address, self.duration_s, self.tokens = url, addresses, per_address, duration_s, tokens
        self.endpoint = endpoint
        # the learners' loop: the page's Generate runs in full precision (the API's own default,
        # "auto", is another loop, the 8-bit file's, which a group aiming at a class would leave alone)
        self.precision = precision
        self.counts = {"accepted": 0, "finished": 0, "held at the end": 0, "refused": 0, "gave way": 0, "failed": 0}
        self.in_flight = 0
        self.durations: list[float] = []  # seconds from the POST to the last token, of those finished
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.deadline = 0.0

    def _count(self, what: str, flight: int = 0) -> None:
        with self._lock:
            self.counts[what] += 1
            self.in_flight += flight

    def _one(self, source: str, slot: int) -> None:
        from benchmarks.load import LONG_PROMPT

        seed = slot
        endpoint = MIXED[slot % len(MIXED)] if self.endpoint == "mixed" else self.endpoint
        with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=source, verify=False)) as http:
            while time.perf_counter() < self.deadline:
                seed += self.per_address
                data = ([LONG_PROMPT, self.tokens, 0.8, 50, 0.95, seed, self.precision] if endpoint == "generate" else
                        [f"Siege {source} pass {seed}: " + " ".join(f"w{seed}x{j}" for j in range(8)), 5, 3])
                try:
                    r = http.post(f"{self.url}{API}/call/{endpoint}", json={"data": data})
                except httpx.HTTPError:
                    self._count("failed")
                    time.sleep(SIEGE_BACKOFF_S)
                    continue
                if r.status_code != 200:
                    self._count("refused")
                    time.sleep(SIEGE_BACKOFF_S)
                    continue
                self._count("accepted", +1)
                outcome, t0 = "failed", time.perf_counter()
                try:
                    with http.stream("GET", f"{self.url}{API}/call/{endpoint}/{r.json()['event_id']}",
                                     timeout=httpx.Timeout(30, read=max(1.0, self.deadline - time.perf_counter() + 30))) as stream:
                        event = ""
                        for line in stream.iter_lines():
                            if time.perf_counter() >= self.deadline:
                                outcome = "held at the end"
                                break
                            if line.startswith("event:"):
                                event = line[6:].strip()
                            elif line.startswith("data:") and event in ("complete", "error"):
                                outcome = "finished" if event == "complete" else ("gave way" if "busy" in line.lower() else "failed")
                                break
                except httpx.HTTPError:
                    pass
                self._count(outcome, -1)
                if outcome == "finished":
                    with self._lock:
                        self.durations.append(time.perf_counter() - t0)
                if outcome not in ("finished", "held at the end"):
                    time.sleep(SIEGE_BACKOFF_S)

    def start(self) -> "Siege":
        self.deadline = time.perf_counter() + self.duration_s
        for a in range(self.addresses):
            for slot in range(self.per_address):
                t = threading.Thread(target=self._one, args=(siege_source(a), slot), name=f"siege-{a}-{slot}", daemon=True)
                t.start()
                self._threads.append(t)
        return self

    def stop(self) -> None:
        """End the siege now (each request in flight ends at its next update)."""
        self.deadline = time.perf_counter()

    def join(self) -> dict[str, int]:
        for t in self._threads:
            t.join(max(1.0, self.deadline - time.perf_counter() + 60))
        done = sorted(self.durations)
        return dict(self.counts, addresses=self.addresses, per_address=self.per_address,
                    **({"generation s (median)": round(statistics.median(done), 1)} if done else {}))


def wait_idle(url: str, timeout_s: float = 300.0) -> None:
    """Until the app runs and holds nothing: no generation (Gradio's line, the loop's), no queued
    request (the last siege's requests stopped or done)."""
    deadline = time.perf_counter() + timeout_s
    with httpx.Client(timeout=30) as http:
        while time.perf_counter() < deadline:
            try:
                said = http.get(f"{url}expected-wait").json()
                queued = http.get(f"{url}{API}/queue/status").json()["queue_size"]
            except (httpx.HTTPError, ValueError):
                time.sleep(1.0)
                continue
            loop = said.get("loop") or {}
            if not said["line"]["running"] and not said["line"]["waiting"] and not queued and not loop.get("running_rows") \
                    and not loop.get("waiting"):
                return
            time.sleep(1.0)
    raise RuntimeError(f"the app was still busy {timeout_s:g} s after the siege")


@dataclass
class Row:
    """One row of the siege table: a shape (None: the quiet baseline) and what its learners met."""

    shape: str
    report: Report
    load: tuple[float, float]  # the machine's load average (1 min) before and after


def siege_row(url: str, shape: str | None, learners: int = TABLE_LEARNERS, patience_s: float = TABLE_PATIENCE_S,
              head_start_s: float = TABLE_HEAD_START_S, limit_s: float = 600.0) -> Row:
    """``learners`` learners through :data:`TABLE_ACTIONS` beside the group ``shape`` (a key of
    :data:`SIEGE_SHAPES`; None: alone), arriving ``head_start_s`` into the siege, obeying
    ``Retry-After`` for ``patience_s``; the siege lasts until they are done."""
    import os

    wait_idle(url)
    load0 = os.getloadavg()[0]
    siege = None
    if shape is not None:
        addresses, per, endpoint = SIEGE_SHAPES[shape]
        siege = Siege(url, addresses, per, limit_s, endpoint=endpoint).start()
        time.sleep(head_start_s)
    try:
        report = run_classroom(url, learners, 32, TABLE_ACTIONS, patience_s=patience_s)
    finally:
        if siege is not None:
            siege.stop()
            report.siege = siege.join()
    return Row(shape or "quiet (no siege)", report, (load0, os.getloadavg()[0]))


def siege_table(rows: list[Row]) -> str:
    """The rows as docs/space.md's table: per action, served of the learners, median and max wait."""
    def cell(report: Report, action: str) -> str:
        a = report.actions[action]
        if not a.waits:
            return f"0 of {report.learners}"
        busy = f", {len(a.retried)} told busy first" if a.retried else ""
        return f"{len(a.waits)} of {report.learners}: **{report.median(action):.1f} s**, {report.max(action):.1f} s{busy}"

    out = ["| a group keeps up (learners arrive 10 s in, obey Retry-After) | learners' 32 tokens: served, median, max "
           "| first token, median (told by /expected-wait, median; offered the browser) | Inside pass (told; offered the browser) "
           "| 15 s Watch it learn run "
           "(first point, median) | siege: accepted, gave way | load |",
           "|---|---|---|---|---|---|---|"]
    for row in rows:
        r, gen = row.report, row.report.actions["generate"]
        firsts, told = gen.noted("first_s"), [t for t in gen.noted("told_s")]
        offered = sum(1 for n in gen.notes if n.get("offered"))
        unknown = sum(1 for n in gen.notes if "told_s" in n and n["told_s"] is None)
        told_text = (f"{statistics.median(told):.1f} s" if told else "–") + (f", {unknown} long" if unknown else "")
        first = f"{statistics.median(firsts):.1f} s" if firsts else "–"
        learned = r.actions["learn15"].noted("first_s")
        learn = cell(r, "learn15") + (f" ({statistics.median(learned):.1f} s)" if learned else "")
        siege = f"{r.siege.get('accepted', 0)}, {r.siege.get('gave way', 0)}" if r.siege else "–"
        ins = r.actions["inside"]
        ins_told = [t for t in ins.noted("told_s")]
        ins_unknown = sum(1 for n in ins.notes if "told_s" in n and n["told_s"] is None)
        inside = (cell(r, "inside") + f" ({statistics.median(ins_told):.1f} s" if ins_told else cell(r, "inside") + " (–")
        inside += (f", {ins_unknown} long" if ins_unknown else "") + f"; {sum(1 for n in ins.notes if n.get('offered'))} of {len(ins.notes)})"
        out.append(f"| {row.shape} | {cell(r, 'generate')} | {first} ({told_text}; {offered} of {len(gen.notes)}) "
                   f"| {inside} | {learn} | {siege} | {row.load[0]:.1f}–{row.load[1]:.1f} |")
    return "\n".join(out)


# --- the mixed soak --------------------------------------------------------------------------------

SOAK_ROUNDS, SOAK_REQUESTS = 3, 48


def soak_requests(round_: int) -> list[tuple[str, dict[str, Any]]]:
    """One round's 48 page events: generations at the settings' extremes (512 tokens from a long
    prompt, temperature 5, no top-k or top-p cut, the most samples), next-token steps, Inside and
    Attention passes on texts no other request used (nothing cached serves them)."""
    # 55 tokens: within the 64 that Inside and Attention read (a longer text is refused at once)
    text = lambda i: f"Round {round_}, learner {i}: " + " ".join(f"word{round_}x{i}x{j}" for j in range(8))
    prompt = ("ROMEO:\nBut soft, what light through yonder window breaks? " * 60)[:4000]
    kinds = [
        ("generate", {"Prompt": prompt, "Max new tokens": 512, "Temperature": 5.0, "Top-k": 0, "Top-p": 1.0}),
        ("next_token", {"Prompt": prompt}),
        ("inside", {}),
        ("attention", {}),
    ]
    out = []
    for i in range(SOAK_REQUESTS):
        name, overrides = kinds[i % len(kinds)]
        if name in ("inside", "attention"):
            overrides = {"Text": text(i)}
        out.append((name, overrides))
    return out


SOAK_EVENTS = {**PAGE_EVENTS, "next_token": "ui_next_token"}


def inline_alert(message: dict) -> str | None:
    """The text of an error a tab showed in its page (an input refused: the event itself
    succeeded, and the learner sees the message where the result would be); None when none."""
    for value in (message.get("output") or {}).get("data") or []:
        value = value.get("value") if isinstance(value, dict) else value
        if isinstance(value, str) and 'role="alert"' in value:
            return re.sub(r"<[^>]+>", "", value).strip()
    return None


def run_soak(url: str, pid: int, rounds: int = SOAK_ROUNDS, settle_s: float = 30.0) -> dict[str, Any]:
    """``rounds`` rounds of :func:`soak_requests`, each request a page of its own from its own
    address, a round's 48 at once; the app's RSS before, at its peak and ``settle_s`` after.
    "Before" is read after one request of each kind, alone and as big as the soak's (what a
    first use of a kind and size loads, a second engine, PyTorch's and onnxruntime's buffers for
    that shape, is there before the crowd: what is measured is what the crowd leaves)."""
    def run(page: Page, name: str, overrides: dict) -> None:
        if name == "generate":  # the most samples the page offers
            samples = next(c for c in page.config["components"] if c.get("props", {}).get("label") == "Samples")
            overrides = {**overrides, "Samples": samples["props"].get("maximum", 1)}
        shown = page.run(SOAK_EVENTS[name], overrides)
        if alert := inline_alert(shown):
            raise RuntimeError(f"the page showed an error: {alert}")

    warm = Page(url, source_of(SOAK_REQUESTS))
    try:
        warm.open()
        for name, overrides in soak_requests(-1)[:4]:
            run(warm, name, overrides)
    finally:
        warm.close()
    result: dict[str, Any] = {"before": rss_mb(pid), "failed": [], "refused": []}
    peak = [result["before"]]

    def one(i: int, name: str, overrides: dict) -> None:
        page = Page(url, source_of(i))
        try:
            page.open()
            run(page, name, overrides)
        except Refused as err:
            result["refused"].append(f"{name}: {err}")
        except Exception as err:  # noqa: BLE001 -- counted
            result["failed"].append(f"{name}: {type(err).__name__}: {err}")
        finally:
            page.close()
            peak[0] = max(peak[0], rss_mb(pid))

    for round_ in range(rounds):
        with ThreadPoolExecutor(SOAK_REQUESTS) as pool:
            list(pool.map(lambda args: one(*args), [(i, *r) for i, r in enumerate(soak_requests(round_))]))
    result["peak"] = peak[0]
    time.sleep(settle_s)
    result["after"] = rss_mb(pid)
    return result


def launch_space(log_path: Path, extra_env: dict[str, str] | None = None):
    """app.py started as on a Space (``SPACE_ID`` set), and the proxy before it: (server, proxy)."""
    from benchmarks.app_server import launch

    server = launch(log_path, extra_env={"SPACE_ID": "classroom/benchmark", **(extra_env or {})})
    port = int(server.url.rstrip("/").rsplit(":", 1)[1])
    return server, Proxy(port).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="an app already running (a Space, or a proxy before one): no app is started")
    ap.add_argument("--learners", type=int, default=None, help=f"1 to {MAX_LEARNERS} (default 40; the siege table's {TABLE_LEARNERS})")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--abuse", action="store_true", help="beside a visitor asking for 30 long generations, forging X-Forwarded-For")
    ap.add_argument("--actions", default=",".join(LESSON), help=f"comma-separated, from {','.join(LESSON)}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds an action may take")
    ap.add_argument("--settle", type=float, default=30.0, help="seconds after the class before the memory is read again")
    ap.add_argument("--soak", action="store_true", help="instead: the mixed soak (3 rounds of 48 heavy page events), memory 30 s later")
    ap.add_argument("--siege", type=int, nargs="?", const=-1, default=0, metavar="N",
                    help="beside N addresses each keeping --siege-per long generations in flight (a hostile group); "
                         "alone: the siege table, every shape of --shapes beside the quiet baseline")
    ap.add_argument("--shapes", default=",".join(SIEGE_SHAPES),
                    help=f"the siege table's group shapes, comma-separated, from {','.join(SIEGE_SHAPES)}; 'quiet' for the baseline")
    ap.add_argument("--siege-per", type=int, default=4, help="requests each siege address keeps in flight (default 4)")
    ap.add_argument("--siege-with", default="generate", choices=SIEGE_ENDPOINTS,
                    help="what the siege sends: 512-token generations (default), or Inside or Attention passes")
    ap.add_argument("--siege-for", type=float, default=60.0, help="seconds the siege lasts (default 60)")
    ap.add_argument("--siege-head-start", type=float, default=10.0, help="seconds of siege before the class starts (default 10)")
    ap.add_argument("--patience", type=float, default=0.0,
                    help="seconds a learner keeps trying a refused action again, after the Retry-After given (default 0: never)")
    ap.add_argument("--spread", type=float, default=0.0, help="seconds over which the learners start, evenly (default 0: all at once)")
    args = ap.parse_args(argv)
    actions = tuple(a.strip() for a in args.actions.split(",") if a.strip())
    if unknown := set(actions) - {*LESSON, "learn15"}:
        ap.error(f"unknown actions {sorted(unknown)}; known: {', '.join(LESSON)}, learn15")
    table_learners = args.learners or TABLE_LEARNERS
    args.learners = args.learners or 40
    if not 1 <= args.learners <= MAX_LEARNERS:
        ap.error(f"--learners: 1 to {MAX_LEARNERS}")
    if args.url and not is_loopback(args.url) and (args.abuse or args.siege):
        ap.error("--abuse and --siege run only against an app on loopback")
    if args.url and args.soak:
        ap.error("--soak reads the app's memory: only with the app it starts (no --url)")
    if args.url and not args.url.endswith("/"):
        args.url += "/"
    from benchmarks.app_server import stop

    server = proxy = None
    if args.url:
        url, pid = args.url, None
        if not is_loopback(url):
            print(f"{url}: every learner leaves from this machine's address, one visitor to the app "
                  "(its share applies to the whole class)", flush=True)
    else:
        log = Path(tempfile.mkdtemp(prefix="classroom-")) / "app.log"
        server, proxy = launch_space(log)
        url, pid = proxy.url, server.process.pid
    try:
        warm = Page(url, "127.0.0.1" if is_loopback(url) else None)
        warm.open()
        warm.run(PAGE_EVENTS["generate"], {"Max new tokens": 2})  # the engine is open
        warm.close()
        if args.soak:
            soak = run_soak(url, pid, settle_s=args.settle)
            print(f"mixed soak, {SOAK_ROUNDS} rounds of {SOAK_REQUESTS}: RSS {soak['before']:.0f} MB before, "
                  f"{soak['peak']:.0f} MB peak, {soak['after']:.0f} MB {args.settle:g} s later "
                  f"({soak['after'] - soak['before']:+.0f} MB); {len(soak['refused'])} refused, {len(soak['failed'])} failed")
            for line in sorted(set(soak["refused"] + soak["failed"]))[:6]:
                print("  " + line[:200])
            return 1 if soak["failed"] else 0
        if args.siege == -1:
            shapes = [x.strip() for x in args.shapes.split(",") if x.strip()]
            if unknown_shapes := set(shapes) - {*SIEGE_SHAPES, "quiet"}:
                ap.error(f"unknown shapes {sorted(unknown_shapes)}; known: quiet, {', '.join(SIEGE_SHAPES)}")
            rows = []
            for shape in (["quiet"] if args.shapes == ",".join(SIEGE_SHAPES) else []) + shapes:
                rows.append(siege_row(url, None if shape == "quiet" else shape, table_learners))
                print(f"{rows[-1].shape}:\n{rows[-1].report.summary()}", flush=True)
            print(siege_table(rows))
            return 0
        siege = None
        if args.siege:
            siege = Siege(url, args.siege, args.siege_per, args.siege_for, endpoint=args.siege_with).start()
            time.sleep(min(args.siege_head_start, args.siege_for))
        report = run_classroom(url, args.learners, args.tokens, actions, args.abuse, pid, args.timeout,
                               args.patience, args.spread)
        if siege is not None:
            report.siege = siege.join()
        if pid:
            time.sleep(args.settle)
            report.memory_mb[f"{args.settle:g} s later"] = rss_mb(pid)
        print(report.summary())
    finally:
        if proxy is not None:
            proxy.stop()
        if server is not None:
            stop(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
