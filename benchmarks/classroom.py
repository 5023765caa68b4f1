"""A class on one Space: the app started as on a Space (``SPACE_ID`` set) behind a small local
reverse proxy that appends ``X-Forwarded-For``, and N learners, each from its own loopback address
(127.0.0.x), going through a lesson with the page's own events: open the page, tokenize, attention,
inside, generate 32 tokens, start a Watch it learn run. Optionally beside an abusive visitor
(``--abuse``: 30 long generations at once, each forging ``X-Forwarded-For``). Prints, per action,
the median and 95th percentile wait, the refusals (with what they said), failures, and the app's
memory.

    python -m benchmarks.classroom                    # 40 learners
    python -m benchmarks.classroom --learners 16 --abuse
    python -m benchmarks.classroom --actions generate --abuse    # only the generation step
    python -m benchmarks.classroom --soak             # the mixed soak: memory 30 s after heavy traffic

Bounded in count (at most 200 learners, 60 abusive requests) and time (every action at most
``--timeout`` seconds); every byte goes to loopback. tests/test_classroom.py runs its bars.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

API = "gradio_api"
LESSON = ("page", "tokenize", "attention", "inside", "generate", "learn")
# The page's events, by the handler names Gradio gives them (config "api_name" of a private event).
PAGE_EVENTS = {"tokenize": "ui_tokenize", "attention": "ui_attention", "inside": "ui_run",
               "generate": "ui_generate", "learn": "ui_learn"}
MAX_LEARNERS = 200
ABUSE_REQUESTS = 30
ABUSE_TOKENS = 512
ABUSER_SOURCE = "127.0.0.250"


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
    """The app refused the request: its message says why and when to try again."""


class Page:
    """One learner's open page, as the browser's Gradio client talks to the app: ``queue/join``
    the page's events by number with the page's own input values, read ``queue/data``."""

    def __init__(self, url: str, source: str = "127.0.0.1", headers: dict[str, str] | None = None,
                 timeout_s: float = 300.0) -> None:
        self.url = url
        self.http = httpx.Client(timeout=timeout_s, headers=headers or {},
                                 transport=httpx.HTTPTransport(local_address=source))
        self.session = f"learner{time.time_ns() % 10**12}{id(self) % 10**6}"
        self.config: dict[str, Any] = {}

    def close(self) -> None:
        self.http.close()

    def open(self) -> None:
        """GET the page and its config, as a browser does."""
        for path in ("", "config"):
            r = self.http.get(self.url + path)
            if r.status_code in (429, 503):
                raise Refused(f"HTTP {r.status_code}: {r.text[:200]}")
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
            raise Refused(f"HTTP {r.status_code} (Retry-After {r.headers.get('retry-after')}): {detail}")
        event_id = r.json()["event_id"]
        with self.http.stream("GET", f"{self.url}{API}/queue/data", params={"session_hash": self.session}) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("event_id") not in (None, event_id):
                    continue
                kind = message.get("msg")
                if kind == "process_completed":
                    output = message.get("output") or {}
                    if not message.get("success"):
                        error = str(output.get("error"))
                        if "busy" in error.lower() or "too many" in error.lower():
                            raise Refused(error)
                        raise RuntimeError(f"{name}: {error}")
                    return message
                if kind == until:
                    return message
        raise RuntimeError(f"{name}: the stream ended without a result")


# --- the lesson ----------------------------------------------------------------------------------


@dataclass
class Action:
    waits: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass
class Report:
    learners: int
    tokens: int
    actions: dict[str, Action]
    memory_mb: dict[str, float] = field(default_factory=dict)
    abuser: dict[str, int] = field(default_factory=dict)

    def refusals(self, action: str | None = None) -> int:
        return sum(len(a.refused) for k, a in self.actions.items() if action in (None, k))

    def median(self, action: str) -> float:
        waits = self.actions[action].waits
        return statistics.median(waits) if waits else float("nan")

    def p95(self, action: str) -> float:
        waits = sorted(self.actions[action].waits)
        return waits[min(len(waits) - 1, int(0.95 * len(waits)))] if waits else float("nan")

    def summary(self) -> str:
        rows = [f"{self.learners} learners, {self.tokens} tokens a generation"
                + (f"; abuser: {self.abuser}" if self.abuser else ""),
                f"{'action':<10} {'done':>5} {'median s':>9} {'p95 s':>8} {'refused':>8} {'failed':>7}"]
        for name, a in self.actions.items():
            rows.append(f"{name:<10} {len(a.waits):>5} {self.median(name):>9.2f} {self.p95(name):>8.2f} "
                        f"{len(a.refused):>8} {len(a.failed):>7}")
        for name, a in self.actions.items():
            for what in sorted(set(a.refused))[:3]:
                rows.append(f"  {name} refused: {what[:160]}")
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
        "inside": lambda page: page.run(PAGE_EVENTS["inside"]),
        "generate": lambda page: page.run(PAGE_EVENTS["generate"], {"Max new tokens": tokens}),
        # A run trains for a while: "start" is its first update; the page is then closed.
        "learn": lambda page: page.run(PAGE_EVENTS["learn"], {"Seconds of training": 10}, until="process_generating"),
    }


def _learner(url: str, index: int, actions: list[str], steps: dict, report: Report, lock: threading.Lock,
             start: threading.Barrier, timeout_s: float) -> None:
    page = Page(url, source_of(index), timeout_s=timeout_s)
    try:
        if "page" not in actions:
            page.open()  # the page is open before the class starts
        start.wait(timeout_s)
        for name in actions:
            t0 = time.perf_counter()
            try:
                steps[name](page)
                with lock:
                    report.actions[name].waits.append(time.perf_counter() - t0)
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
                  abusive: bool = False, pid: int | None = None, timeout_s: float = 300.0) -> Report:
    """``learners`` pages going through ``actions`` at once (all start together), beside an abuser
    when ``abusive`` (its requests sent just before the class starts); ``pid``: the app's
    process, whose memory is reported."""
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"the classroom only targets a local app, not {url}")
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
        futures = [pool.submit(_learner, url, i, list(actions), steps, report, lock, start, timeout_s)
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


# --- the mixed soak --------------------------------------------------------------------------------

SOAK_ROUNDS, SOAK_REQUESTS = 3, 48


def soak_requests(round_: int) -> list[tuple[str, dict[str, Any]]]:
    """One round's 48 page events: generations at the settings' extremes (512 tokens from a long
    prompt, temperature 5, no top-k or top-p cut, the most samples), next-token steps, Inside and
    Attention passes on texts no other request used (nothing cached serves them)."""
    text = lambda i: f"Round {round_}, learner {i}: " + " ".join(f"word{round_}x{i}x{j}" for j in range(40))
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


def run_soak(url: str, pid: int, rounds: int = SOAK_ROUNDS, settle_s: float = 30.0) -> dict[str, Any]:
    """``rounds`` rounds of :func:`soak_requests`, each request a page of its own from its own
    address, a round's 48 at once; the app's RSS before, at its peak and ``settle_s`` after."""
    result: dict[str, Any] = {"before": rss_mb(pid), "failed": [], "refused": []}
    peak = [result["before"]]

    def one(i: int, name: str, overrides: dict) -> None:
        page = Page(url, source_of(i))
        try:
            page.open()
            if name == "generate":  # the most samples the page offers
                samples = next(c for c in page.config["components"] if c.get("props", {}).get("label") == "Samples")
                overrides = {**overrides, "Samples": samples["props"].get("maximum", 1)}
            page.run(SOAK_EVENTS[name], overrides)
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
    ap.add_argument("--learners", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--abuse", action="store_true", help="beside a visitor asking for 30 long generations, forging X-Forwarded-For")
    ap.add_argument("--actions", default=",".join(LESSON), help=f"comma-separated, from {','.join(LESSON)}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds an action may take")
    ap.add_argument("--settle", type=float, default=30.0, help="seconds after the class before the memory is read again")
    ap.add_argument("--soak", action="store_true", help="instead: the mixed soak (3 rounds of 48 heavy page events), memory 30 s later")
    args = ap.parse_args(argv)
    actions = tuple(a.strip() for a in args.actions.split(",") if a.strip())
    if unknown := set(actions) - set(LESSON):
        ap.error(f"unknown actions {sorted(unknown)}; known: {', '.join(LESSON)}")
    from benchmarks.app_server import stop

    log = Path(tempfile.mkdtemp(prefix="classroom-")) / "app.log"
    server, proxy = launch_space(log)
    try:
        warm = Page(proxy.url)
        warm.open()
        warm.run(PAGE_EVENTS["generate"], {"Max new tokens": 2})  # the engine is open
        warm.close()
        if args.soak:
            soak = run_soak(proxy.url, server.process.pid, settle_s=args.settle)
            print(f"mixed soak, {SOAK_ROUNDS} rounds of {SOAK_REQUESTS}: RSS {soak['before']:.0f} MB before, "
                  f"{soak['peak']:.0f} MB peak, {soak['after']:.0f} MB {args.settle:g} s later "
                  f"({soak['after'] - soak['before']:+.0f} MB); {len(soak['refused'])} refused, {len(soak['failed'])} failed")
            for line in sorted(set(soak["refused"] + soak["failed"]))[:6]:
                print("  " + line[:200])
            return 1 if soak["failed"] else 0
        report = run_classroom(proxy.url, args.learners, args.tokens, actions, args.abuse, server.process.pid, args.timeout)
        time.sleep(args.settle)
        report.memory_mb[f"{args.settle:g} s later"] = rss_mb(server.process.pid)
        print(report.summary())
    finally:
        proxy.stop()
        stop(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
