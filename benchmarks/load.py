"""Load test: many gradio_client users at once on loopback, each generating text and using the
light tabs in between. Reports the p50/p95 latency of both kinds of call and every failure.

    python -m benchmarks.load                 # launches app.py on a free loopback port
    python -m benchmarks.load --clients 16 --generations 10 --tokens 12
    python -m benchmarks.load --table         # the throughput table (docs/export.md): 1 and 16 clients, the engine alone
    python -m benchmarks.load --abandoned     # 6 abandoned 512-token jobs, then one normal generation
    python -m benchmarks.load --abandoned --url http://127.0.0.1:7860/   # against a running app
    python -m benchmarks.load --mix           # 4 clients loop every tab's heaviest request; /tokenize timed
    python -m benchmarks.load --mix 60 --clients 0 --reloaders 8   # 8 clients reloading the page instead
    python -m benchmarks.load --mix 60 --clients 0 --reloaders 8 --links   # ... each reload a new share link

Every user here comes from one address, which the app takes for one visitor with a few
generations and heavy passes at once (serving/admission.py): the app it launches has those
shares raised (:data:`LOAD_ENV`); against a running app (``--url``), start it with the same
environment. ``python -m benchmarks.classroom`` is the class of distinct visitors.

``tests/serving/test_load.py`` runs the same thing (marked slow) against an app launched so. A "busy"
answer (Gradio's full queue: gradio_client's QueueError "Queue is full! Please try again.") is a
documented outcome, counted apart; anything else that fails is a failure.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from gradio_client import Client
from gradio_client.utils import apply_diff
from gradio_client.utils import QueueError

from playground.learn.scheduler import ONE_RUN_PER_VISITOR

# A load generator is many users behind one address: their per-visitor shares raised to its size.
LOAD_ENV = {"PLAYGROUND_GENERATIONS_PER_VISITOR": "64", "PLAYGROUND_HEAVY_PER_VISITOR": "64"}

# The light calls a user makes between generations, in turn: each tab's main endpoint.
LIGHT_CALLS: list[tuple[str, tuple]] = [
    ("/tokenize", ("Hi my name is Moussa",)),
    ("/positional_encoding", (64, 128, 10000)),
    ("/embedding_arithmetic", ("king - man + woman", 5)),
]
API = "gradio_api"  # the app's HTTP API root
BUSY_RETRY_S = 1.0  # a user told "busy, try again" waits a moment and tries again
# gradio_client's HTTP calls give up after httpx's default 5 s; a browser waits far longer. On a
# small machine whose cores are busy, accepting 16 users at once can take more than 5 s: that
# is a slow answer (it shows in the latencies), not a failed one.
HTTP_TIMEOUT_S = 120.0


@dataclass
class LoadReport:
    clients: int
    generations_per_client: int
    new_tokens: int
    light_s: list[float] = field(default_factory=list)
    generation_s: list[float] = field(default_factory=list)
    busy: int = 0
    failures: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    token_ids: dict[int, list[int]] = field(default_factory=dict)  # seed -> the generation's new token ids
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            (self.light_s if kind == "light" else self.generation_s).append(seconds)

    def percentile(self, kind: str, q: int) -> float:
        values = self.light_s if kind == "light" else self.generation_s
        if len(values) < 2:
            return values[0] if values else float("nan")
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1]

    def summary(self) -> str:
        pct = self.percentile
        lines = [
            f"{self.clients} clients x {self.generations_per_client} generations of {self.new_tokens} tokens "
            f"(+ a light call before each) in {self.wall_s:.0f} s",
            f"light calls: {len(self.light_s)}, p50 {pct('light', 50) * 1000:.0f} ms, p95 {pct('light', 95) * 1000:.0f} ms",
            f"generations: {len(self.generation_s)}, p50 {pct('generation', 50):.1f} s, p95 {pct('generation', 95):.1f} s "
            "(end to end, queue wait included)",
            f"busy answers: {self.busy}; failures: {len(self.failures)}",
        ]
        lines += [f"  failure: {f}" for f in self.failures[:10]]
        return "\n".join(lines)


def generation_args(seed: int, new_tokens: int) -> tuple:
    """The /generate arguments every load-test user sends, differing only by seed."""
    return ("ROMEO:", new_tokens, 0.8, 50, 0.95, seed)


def _call(client: Client, report: LoadReport, kind: str, endpoint: str, args: tuple, deadline: float) -> dict:
    """One request, retried while the app answers busy, timed from the first try."""
    t0 = time.perf_counter()
    while True:
        try:
            out = client.predict(*args, api_name=endpoint)
            if kind == "generation" and not out.get("finished"):
                raise RuntimeError(f"generation not finished: {out}")
            report.add(kind, time.perf_counter() - t0)
            return out
        except QueueError:
            with report.lock:
                report.busy += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(BUSY_RETRY_S)


def _user(url: str, index: int, report: LoadReport, deadline: float) -> None:
    client = Client(url, verbose=False, httpx_kwargs={"timeout": HTTP_TIMEOUT_S})
    for i in range(report.generations_per_client):
        if time.monotonic() > deadline:
            report.failures.append(f"client {index}: out of time after {i} generations")
            return
        endpoint, args = LIGHT_CALLS[(index + i) % len(LIGHT_CALLS)]
        try:
            _call(client, report, "light", endpoint, args, deadline)
            seed = index * 100 + i
            out = _call(client, report, "generation", "/generate", generation_args(seed, report.new_tokens), deadline)
            with report.lock:
                report.token_ids[seed] = out["token_ids"]
        except Exception as err:  # noqa: BLE001 -- every failure is reported, none stops the others
            with report.lock:
                report.failures.append(f"client {index}, round {i}: {type(err).__name__}: {err}")


def run_load(url: str, clients: int = 16, generations: int = 10, new_tokens: int = 12, time_limit_s: float = 900) -> LoadReport:
    """Drive the app at ``url`` (loopback only) with ``clients`` concurrent users; bounded by
    ``clients * generations`` requests of each kind and ``time_limit_s``."""
    if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise ValueError(f"the load test only targets a local app, not {url}")
    report = LoadReport(clients, generations, new_tokens)
    deadline = time.monotonic() + time_limit_s
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients, thread_name_prefix="load-user") as pool:
        for future in [pool.submit(_user, url, i, report, deadline) for i in range(clients)]:
            future.result()
    report.wall_s = time.perf_counter() - t0
    return report


# --- The throughput table (docs/export.md, "Many users at once") -------------------------------------------

TABLE_PROMPT = "ROMEO:"
TABLE_SETTINGS = (0.8, 50, 0.95)  # temperature, top-k, top-p: the app's defaults


@dataclass
class Phase:
    """One row of the table: ``clients`` users of one client ``kind``, each generating
    ``generations`` x ``tokens``."""

    clients: int
    kind: str = "gradio_client"
    tokens: int = 0  # new tokens received in all
    wall_s: float = 0.0
    latency_s: list[float] = field(default_factory=list)  # per generation, submit to last update
    ttft_s: list[float] = field(default_factory=list)  # per generation, submit to first token
    light_s: list[float] = field(default_factory=list)  # /tokenize while they generate
    failures: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else float("nan")


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def _client(url: str) -> Client:
    # ssl_verify=False: the app is plain HTTP on loopback, so there is nothing to verify, and
    # with it gradio_client loaded the CA bundle into new TLS contexts at every call (45-50 ms of
    # CPU a call, 0.85 of the 2 cores for 16 users: CPU a real user spends on their own machine,
    # which here came out of the app's).
    return Client(url, verbose=False, ssl_verify=False, httpx_kwargs={"timeout": HTTP_TIMEOUT_S})


# How often a gradio_client user looks for the first streamed update. gradio_client's own loops
# poll: its Job iterator every 1 ms (16 such users took more of the 2 cores than the app did),
# its message queue every 50 ms (so every call it makes waits 25 ms on average, ~70 ms in all
# for a call the app answers in 6 ms). 10 ms is far below the latter.
FIRST_UPDATE_POLL_S = 0.01


class SSEUser:
    """A client that reads the app's event stream as the page and ``curl -N`` do: POST
    ``/gradio_api/call/<endpoint>``, then GET its stream and read each event when it comes."""

    def __init__(self, url: str) -> None:
        self.url = url + API + "/call/"
        self.http = httpx.Client(timeout=HTTP_TIMEOUT_S)

    def events(self, endpoint: str, args: list) -> Iterator[tuple[str, object]]:
        r = self.http.post(self.url + endpoint, json={"data": args})
        r.raise_for_status()
        with self.http.stream("GET", f"{self.url}{endpoint}/{r.json()['event_id']}") as stream:
            kind = None
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind:
                    yield kind, json.loads(line[6:])

    def call(self, endpoint: str, args: list) -> object:
        for kind, data in self.events(endpoint, args):
            if kind == "complete":
                return data[0]
            if kind == "error":
                raise RuntimeError(f"{endpoint}: {data}")
        raise RuntimeError(f"{endpoint}: the stream ended without a result")


def _user_for(kind: str, url: str) -> Client | SSEUser:
    return _client(url) if kind == "gradio_client" else SSEUser(url)


def _one_generation(user: Client | SSEUser, args: tuple, t0: float) -> tuple[float | None, dict]:
    """(time to the first streamed update, the final update) of one /generate call."""
    if isinstance(user, SSEUser):
        first, last = None, None
        for kind, data in user.events("generate", list(args)):
            if kind == "error":
                raise RuntimeError(f"/generate: {data}")
            if kind in ("generating", "complete"):
                first = first if first is not None else time.perf_counter() - t0
                last = data[0]
        return first, last or {}
    job = user.submit(*args, api_name="/generate")
    while not job.outputs() and not job.done():
        time.sleep(FIRST_UPDATE_POLL_S)
    first = time.perf_counter() - t0 if job.outputs() else None
    return first, job.result()


def _generations(user: Client | SSEUser, index: int, phase: Phase, generations: int, tokens: int, lock: threading.Lock) -> None:
    for i in range(generations):
        t0 = time.perf_counter()
        try:
            first, last = _one_generation(user, (TABLE_PROMPT, tokens, *TABLE_SETTINGS, index * 1000 + i), t0)
            if not last.get("finished"):
                raise RuntimeError(f"generation not finished: {last}")
        except Exception as err:  # noqa: BLE001 -- reported, the others go on
            with lock:
                phase.failures.append(f"client {index}, generation {i}: {type(err).__name__}: {err}")
            continue
        with lock:
            phase.tokens += last["new_tokens"]
            phase.latency_s.append(time.perf_counter() - t0)
            phase.ttft_s.append(first if first is not None else float("nan"))


def _light_prober(user: Client | SSEUser, phase: Phase, stop: threading.Event, every_s: float = 0.25) -> None:
    """/tokenize, as a user on the Tokenization tab would call it, while the generations run."""
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            _tokenize(user, "Hi my name is Moussa")
            phase.light_s.append(time.perf_counter() - t0)
        except Exception as err:  # noqa: BLE001
            phase.failures.append(f"/tokenize: {type(err).__name__}: {err}")
        stop.wait(every_s)


def _prober_process(url: str, kind: str, ready, stop, results) -> None:
    """:func:`_light_prober` in a process of its own, as the visitor on the Tokenization tab is:
    in the load generator's process its calls waited on the 16 users' threads for the GIL
    (/tokenize p95 0.54 s there, 0.03 s from a process of its own, the app unchanged)."""
    phase, done = Phase(0, kind), threading.Event()
    user = _user_for(kind, url)
    _tokenize(user, "Hi")  # untimed: a new client's first request opens its connections
    ready.set()
    thread = threading.Thread(target=_light_prober, args=(user, phase, done), daemon=True)
    thread.start()
    stop.wait()
    done.set()
    thread.join()
    results.put((phase.light_s, phase.failures))



@dataclass
class _Visitor:
    """:func:`_prober_process` started, waited for and collected."""

    process: Any
    ready: Any
    stop: Any
    results: Any

    @classmethod
    def start(cls, url: str, kind: str) -> _Visitor:
        import multiprocessing

        spawn = multiprocessing.get_context("spawn")  # no fork of a process with threads
        ready, stop, results = spawn.Event(), spawn.Event(), spawn.Queue()
        process = spawn.Process(target=_prober_process, args=(url, kind, ready, stop, results), daemon=True)
        process.start()
        return cls(process, ready, stop, results)

    def wait_ready(self, timeout_s: float = 120) -> list[str]:
        """The failures of its start: none once it has made its first call."""
        return [] if self.ready.wait(timeout_s) else [f"/tokenize: the prober did not start within {timeout_s:g} s"]

    def finish(self) -> tuple[list[float], list[str]]:
        """Stop it: its ``/tokenize`` latencies and failures."""
        self.stop.set()
        try:
            light_s, failures = self.results.get(timeout=120)
        except queue.Empty:
            light_s, failures = [], ["/tokenize: the prober sent no results"]
        self.process.join(10)
        return light_s, failures

def _tokenize(user: Client | SSEUser, text: str) -> None:
    if isinstance(user, SSEUser):
        user.call("tokenize", [text])
    else:
        user.predict(text, api_name="/tokenize")


def run_phase(url: str, clients: int, generations: int, tokens: int, kind: str = "gradio_client") -> Phase:
    phase, lock = Phase(clients, kind), threading.Lock()
    visitor = _Visitor.start(url, kind)
    with ThreadPoolExecutor(max_workers=clients, thread_name_prefix="load-user") as pool:
        # Connected and warmed first (a gradio_client reads the app's API description, and any
        # client's first call opens its connections; the engine alone is warmed too): the clock
        # then times only the generations.
        users = list(pool.map(lambda _: _user_for(kind, url), range(clients)))
        list(pool.map(lambda u: _one_generation(u, (TABLE_PROMPT, 2, *TABLE_SETTINGS, 0), time.perf_counter()), users))
        phase.failures += visitor.wait_ready()
        t0 = time.perf_counter()
        for future in [pool.submit(_generations, users[i], i, phase, generations, tokens, lock) for i in range(clients)]:
            future.result()
    phase.wall_s = time.perf_counter() - t0
    phase.light_s, failures = visitor.finish()
    phase.failures += failures
    return phase


def engine_alone(generations: int, tokens: int) -> float:
    """Tokens/s of the int8 engine alone in this process (no app, no HTTP), the same generations
    one after the other: what one client could get at best."""
    from export.naming import INT8_NAME, hub_dir
    from model import get_tokenizer
    from runtime.engine import Engine
    from runtime.generate import generate
    from runtime.params import SamplingParams

    engine = Engine.load(hub_dir() / INT8_NAME, provider="cpu")
    prompt = get_tokenizer().encode(TABLE_PROMPT)
    generate(engine, prompt, SamplingParams(8))
    t0, n = time.perf_counter(), 0
    for i in range(generations):
        n += len(generate(engine, prompt, SamplingParams(tokens, *TABLE_SETTINGS, seed=i, stop_at_eot=False)))
    return n / (time.perf_counter() - t0)


CLIENT_KINDS = {"gradio_client": "gradio_client", "sse": "HTTP + event stream (the page, curl)"}


def table(url: str, clients: list[int], generations: int, tokens: int, kinds: tuple[str, ...] = tuple(CLIENT_KINDS)) -> tuple[str, list[Phase]]:
    # The engine alone just before and just after each kind's phases, the mean its yardstick: on a
    # shared machine the speed of one minute is not the next one's.
    phases, alone_by_kind = [], {}
    for kind in kinds:
        before = engine_alone(generations, tokens)
        phases += [run_phase(url, n, generations, tokens, kind) for n in clients]
        alone_by_kind[kind] = (before + engine_alone(generations, tokens)) / 2
    lines = [
        f"{generations} generations of {tokens} tokens per client (\"{TABLE_PROMPT}\", temperature "
        f"{TABLE_SETTINGS[0]}, top-k {TABLE_SETTINGS[1]}, top-p {TABLE_SETTINGS[2]}), streamed; "
        f"/tokenize called every 0.25 s meanwhile by one more client of the same kind, in a process of its own; "
        f"each client's first call (2 tokens, untimed) opens its connections. "
        f"The int8 engine alone, same generations, no app, just before and after each kind's rows: "
        f"{', '.join(f'{v:.0f}' for v in alone_by_kind.values())} tokens/s.",
        "",
        "| client | clients | tokens/s in all | × 1 client | % of the engine alone | latency p50 / p95 "
        "| time to first token p50 / p95 | /tokenize p50 / p95 | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ph in phases:
        one = next(p for p in phases if p.kind == ph.kind).tokens_per_s
        lines.append(
            f"| {CLIENT_KINDS[ph.kind]} | {ph.clients} | {ph.tokens_per_s:.0f} | {ph.tokens_per_s / one:.2f} "
            f"| {100 * ph.tokens_per_s / alone_by_kind[ph.kind]:.0f} % "
            f"| {_pct(ph.latency_s, 50):.2f} / {_pct(ph.latency_s, 95):.2f} s "
            f"| {_pct(ph.ttft_s, 50):.2f} / {_pct(ph.ttft_s, 95):.2f} s "
            f"| {1000 * _pct(ph.light_s, 50):.0f} / {1000 * _pct(ph.light_s, 95):.0f} ms | {len(ph.failures)} |"
        )
    for ph in phases:
        lines += [f"  failure ({ph.clients} {ph.kind} clients): {f}" for f in ph.failures[:5]]
    return "\n".join(lines), phases


# --- work nobody reads (orphaned jobs) ------------------------------------------------------------

# A long prompt (~4,000 characters, the prompt limit): far past the context, so every abandoned
# job also costs the context's full reading.
LONG_PROMPT = ("ROMEO:\nBut soft, what light through yonder window breaks? It is the east, and Juliet is the sun.\n" * 45)[:4000]


def abandon(url: str, how: str, seed: int, new_tokens: int = 512, prompt: str = LONG_PROMPT,
            source: str = "127.0.0.1") -> str:
    """Submit a generation from address ``source`` and never read its result, as a careless or
    hostile client does: ``call``: POST /gradio_api/call/generate, no GET of its result stream;
    ``join``: the page's POST queue/join (the /generate endpoint by its event index), no GET
    queue/data. Returns the event id (``join``: ``session:event_id``)."""
    args = [prompt, new_tokens, 0.8, 50, 0.95, seed]
    with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=source)) as http:
        if how == "call":
            r = http.post(f"{url}{API}/call/generate", json={"data": args})
            r.raise_for_status()
            return r.json()["event_id"]
        deps = http.get(url + "config").json()["dependencies"]
        index = next(d["id"] for d in deps if d.get("api_name") == "generate")
        session = f"abandoned-{seed}-{time.time_ns()}"
        r = http.post(f"{url}{API}/queue/join", json={"data": args, "fn_index": index, "session_hash": session})
        r.raise_for_status()
        return f"{session}:{r.json()['event_id']}"


def _tokens(result: object) -> int | None:
    if isinstance(result, list) and result and isinstance(result[0], dict):
        return result[0].get("new_tokens")
    return None


def _late_summary(updates: list, final: object, error: str | None) -> str:
    """``updates``: the results streamed before the end; ``final``: the completed result, or
    None with ``error`` the message the app answered instead."""
    if error is None:
        return f"ran to its end: {_tokens(final)} tokens, stop reason {final[0]['stop_reason']!r}"  # type: ignore[index]
    ran = f"after {_tokens(updates[-1])} tokens" if updates else "before it started"
    return f"stopped {ran}: {error}"


def late_answer(url: str, handle: str) -> str:
    """What a client that comes back for an abandoned job's result is told: how far it ran, and
    the error the app answers if it was stopped."""
    if ":" not in handle:
        r = httpx.get(f"{url}{API}/call/generate/{handle}", timeout=120)
        if r.status_code != 200:
            return f"HTTP {r.status_code}: {r.text}"
        pairs = [(kind, json.loads(data)) for kind, data in re.findall(r"event: (\w+)\ndata: (.*)", r.text)]
        updates = [data for kind, data in pairs if kind == "generating"]
        if not pairs or pairs[-1][0] not in ("complete", "error"):
            return f"no result: {r.text[:200]!r}"
        kind, data = pairs[-1]
        error = None if kind == "complete" else (data.get("error") if isinstance(data, dict) else str(data))
        return _late_summary(updates, data, error)
    session, _ = handle.split(":")
    updates = []
    try:
        with httpx.stream("GET", f"{url}{API}/queue/data", params={"session_hash": session}, timeout=120) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                output = message.get("output") or {}
                if message.get("msg") == "process_generating":
                    # The page's protocol sends a generator's first outputs whole, then diffs.
                    data = output.get("data", [])
                    updates.append(data if not updates else [apply_diff(o, d) for o, d in zip(updates[-1], data)])
                elif message.get("msg") == "process_completed":
                    error = None if message.get("success") else str(output.get("error"))
                    return _late_summary(updates, output.get("data"), error)
            return "the stream ended without a result"
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {err}"


def run_abandoned(url: str, jobs: int = 6, new_tokens: int = 512, probe_tokens: int = 32) -> dict:
    """``jobs`` abandoned generations (``new_tokens`` each, the long prompt; half POST-only, half
    join-only), then one normal ``probe_tokens`` generation with gradio_client: how long it took
    from its submission to its last token, and what a late reader of each abandoned job is told."""
    if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise ValueError(f"the load test only targets a local app, not {url}")
    client = Client(url, verbose=False, httpx_kwargs={"timeout": HTTP_TIMEOUT_S})
    client.predict("ROMEO:", 2, 0.8, 50, 0.95, 0, api_name="/generate")  # warm: the engine is open
    # each from an address of its own: one visitor holds only a few generations
    handles = [abandon(url, "call" if i % 2 == 0 else "join", seed=i, new_tokens=new_tokens, source=f"127.0.5.{i % 250 + 1}")
               for i in range(jobs)]
    t0 = time.perf_counter()
    out = client.predict("ROMEO:", probe_tokens, 0.8, 50, 0.95, 1, api_name="/generate")
    probe_s = time.perf_counter() - t0
    client.close()
    return {
        "jobs": jobs,
        "new_tokens": new_tokens,
        "prompt_chars": len(LONG_PROMPT),
        "probe_s": probe_s,
        "probe_tokens": out["new_tokens"],
        "probe_finished": out["finished"],
        "late_answers": [late_answer(url, h) for h in handles],
    }



# --- every tab's heaviest request at once (a busy Space) ------------------------------------------

MIX_TEXT = ("Romeo.\nBut soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun!\n" * 40)


def _tokens_cut(text: str, n: int) -> str:
    from model import get_tokenizer

    enc = get_tokenizer()
    return enc.decode(enc.encode(text)[:n])


def heaviest_requests() -> list[tuple[str, tuple]]:
    """The heaviest request each tab's API accepts (its limits in playground/limits.py): the
    largest positional table, 64-token passes (Attention, Inside, Compare), a 512-token
    generation from a 4,000-character prompt, 50 arithmetic neighbours, 20,000 characters in
    every encoding, and a training run."""
    longest = _tokens_cut(MIX_TEXT, 64)
    return [
        ("/positional_encoding", (1024, 1024, 10000)),
        ("/inside", (longest, 5, 7)),
        ("/attention", (longest, 5, 7)),
        ("/compare", ("Romeo.\nWhat say you to", "love", longest)),
        ("/generate", (LONG_PROMPT, 512, 0.8, 50, 0.95, 1)),
        ("/embedding_arithmetic", ("king - man + woman", 50)),
        ("/tokenize_encodings", (MIX_TEXT[:20_000],)),
        ("/learn", (20, 1, "proper")),
    ]


@dataclass
class Mix:
    """What :func:`run_mix` measured: ``/tokenize`` latencies from a prober process of its own,
    the heavy requests answered (endpoint -> count), page reloads, and every failure."""

    clients: int
    reloaders: int
    seconds: float
    light_s: list[float] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=dict)
    reloads: int = 0
    busy: int = 0
    failures: list[str] = field(default_factory=list)
    wall_s: float = 0.0  # until the last request started before the end was answered

    def percentile(self, q: int) -> float:
        """The ``q``-th percentile of the ``/tokenize`` latencies, in seconds."""
        return _pct(self.light_s, q)

    def summary(self) -> str:
        heavy = ", ".join(f"{name} {n}" for name, n in sorted(self.answered.items()))
        return (
            f"{self.clients} clients looping every tab's heaviest request and {self.reloaders} reloading the page, "
            f"{self.seconds:.0f} s (the last answered after {self.wall_s:.0f} s)\n"
            f"/tokenize: {len(self.light_s)} calls, p50 {self.percentile(50):.3f} s, p95 {self.percentile(95):.3f} s, "
            f"max {max(self.light_s, default=float('nan')):.3f} s\n"
            f"heavy requests answered: {heavy or 'none'}; page loads {self.reloads}; told busy {self.busy}; "
            f"failures {len(self.failures)}" + "".join(f"\n  {f}" for f in self.failures[:10])
        )


def _heavy_client(url: str, index: int, requests: list[tuple[str, tuple]], mix: Mix, lock: threading.Lock,
                  deadline: float) -> None:
    client = _client(url)
    k = index  # each client starts on another tab
    while time.perf_counter() < deadline:
        name, args = requests[k % len(requests)]
        k += 1
        try:
            client.predict(*args, api_name=name)
        except QueueError:
            with lock:
                mix.busy += 1
            time.sleep(BUSY_RETRY_S)
            continue
        except Exception as err:  # noqa: BLE001 -- reported, the others go on
            with lock:
                # The clients share one address, so one visitor: its runs and shares are capped, and
                # a request past them is told to retry (the scheduler's words, or admission's 429).
                capped = isinstance(err, httpx.HTTPStatusError) and err.response.status_code == 429
                if capped or ONE_RUN_PER_VISITOR in str(err):
                    mix.busy += 1
                else:
                    mix.failures.append(f"{name}: {type(err).__name__}: {str(err)[:200]}")
            if capped:
                time.sleep(BUSY_RETRY_S)
            continue
        with lock:
            mix.answered[name] = mix.answered.get(name, 0) + 1


def _reloader(url: str, mix: Mix, lock: threading.Lock, deadline: float, links: bool = False) -> None:
    """A visitor reloading the page, as a browser does with the ETag it was given; with ``links``,
    opening a new share link each time (``/?tab=tokenization&text=...``, a page it never had)."""
    with httpx.Client(headers={"Accept-Encoding": "gzip"}, timeout=HTTP_TIMEOUT_S) as http:
        etag = None
        while time.perf_counter() < deadline:
            if links:
                r = http.get(url, params={"tab": "tokenization", "text": f"a line {uuid.uuid4().hex}"})
            else:
                r = http.get(url, headers={"If-None-Match": etag} if etag else {})
            if r.status_code not in (200, 304):
                with lock:
                    mix.failures.append(f"page: HTTP {r.status_code}")
                return  # one failure says it; reloading at once would only repeat it
            etag = r.headers.get("etag", etag)
            with lock:
                mix.reloads += 1


def run_mix(url: str, clients: int = 4, seconds: float = 60.0, reloaders: int = 0, links: bool = False) -> Mix:
    """``clients`` gradio_client users each looping the heaviest request of every tab in turn
    (:func:`heaviest_requests`) and ``reloaders`` reloading the page (with ``links``, each time a
    new share link), for ``seconds``, while a visitor in a process of its own calls ``/tokenize``
    every 0.25 s."""
    mix, lock = Mix(clients, reloaders, seconds), threading.Lock()
    requests = heaviest_requests()
    visitor = _Visitor.start(url, "gradio_client")
    mix.failures += visitor.wait_ready()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    with ThreadPoolExecutor(max_workers=max(1, clients + reloaders), thread_name_prefix="mix") as pool:
        futures = [pool.submit(_heavy_client, url, i, requests, mix, lock, deadline) for i in range(clients)]
        futures += [pool.submit(_reloader, url, mix, lock, deadline, links) for _ in range(reloaders)]
        for future in futures:
            future.result()
    mix.wall_s = time.perf_counter() - t0
    mix.light_s, failures = visitor.finish()
    mix.failures += failures
    return mix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, help="users at once (default 16; with --mix 4)")
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=12)
    parser.add_argument("--time-limit", type=float, default=900)
    parser.add_argument("--table", action="store_true",
                        help="the throughput table of docs/export.md instead: 1 and 16 clients x 8 generations of 64 tokens, and the engine alone")
    parser.add_argument(
        "--abandoned", type=int, nargs="?", const=6, metavar="N",
        help="instead: N (default 6) abandoned 512-token generations with a 4,000-character prompt, then time a "
        "normal 32-token one",
    )
    parser.add_argument(
        "--mix", type=float, nargs="?", const=60.0, metavar="SECONDS",
        help="instead: --clients (here default 4) loop every tab's heaviest request for SECONDS (default 60) while "
        "/tokenize is timed; with --reloaders N, N more reload the page",
    )
    parser.add_argument("--reloaders", type=int, default=0, help="with --mix: clients reloading the page")
    parser.add_argument("--links", action="store_true", help="with --reloaders: each reload a new share link")
    parser.add_argument("--url", help="an app already running on loopback (default: launch app.py)")
    args = parser.parse_args(argv)
    clients = args.clients or 16
    from .app_server import launch, stop

    server = None
    if args.url:
        url = args.url if args.url.endswith("/") else args.url + "/"
    else:
        server = launch(Path(tempfile.mkdtemp()) / "app.log", extra_env=LOAD_ENV)
        url = server.url
        print(f"app ready in {server.startup_s:.1f} s at {url}", flush=True)
    try:
        if args.table:
            text, phases = table(url, [1, clients], 8, 64)
            print(text)
            return 1 if any(ph.failures for ph in phases) else 0
        if args.mix:
            mix = run_mix(url, clients=4 if args.clients is None else args.clients, seconds=args.mix, reloaders=args.reloaders,
                          links=args.links)
            print(mix.summary())
            return 1 if mix.failures else 0
        if args.abandoned:
            result = run_abandoned(url, jobs=args.abandoned)
            print(
                f"after {result['jobs']} abandoned {result['new_tokens']}-token jobs ({result['prompt_chars']}-character "
                f"prompt; half POST-only, half join-only), a normal {result['probe_tokens']}-token generation took "
                f"{result['probe_s']:.1f} s (finished: {result['probe_finished']})"
            )
            for i, answer in enumerate(result["late_answers"]):
                print(f"  abandoned job {i} ({'call' if i % 2 == 0 else 'join'}), read late: {answer[:240]}")
            return 0
        report = run_load(url, clients, args.generations, args.tokens, args.time_limit)
    finally:
        if server is not None:
            stop(server)
    print(report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
