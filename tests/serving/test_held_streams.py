"""Streams held open and sessions churned, as a hostile visitor tries them, on served apps: a
heartbeat for a made-up session is refused (a visitor's few waiting for their page's first join
answered within the wait, the rest at once), streams of real sessions are held up to their caps
and then the hoarder's oldest gives way, and one visitor's new sessions push out only its own, so
another learner's session and its results survive. Reached directly and behind a proxy (requests
from 127.0.0.1, which the apps trust as a proxy, carrying ``X-Forwarded-For``).

Two apps: a small one, served in this process with the app's serving options and small caps
(default run: seconds), and ``app.py`` launched trusting 127.0.0.1 as its proxy, with the default
caps and the numbers of the abuse that was found (``slow``: minutes). Every loop is bounded in
count and time, on 127.0.0.x only. The caps' edges are tested as pure functions in
tests/serving/test_visitor_shares.py.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from ipaddress import ip_network
from pathlib import Path

import gradio as gr
import httpx
import pytest

from benchmarks.app_server import AppServer, free_port, launch, stop
from conftest import wait_for
from playground.ui import serving
from playground.ui.serving import streams, visitors
from playground.ui.serving.sessions import ResultStore

API = "gradio_api"
PROXY = "127.0.0.1"  # both apps trust it as a proxy: its requests' visitor is their last X-Forwarded-For entry


# --- raw streams ---------------------------------------------------------------------------------


class Held:
    """A GET sent on a socket of its own from a loopback address and left open, read as it comes."""

    def __init__(self, port: int, source: str, path: str, forwarded: str | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        if forwarded:
            head += f"X-Forwarded-For: {forwarded}\r\n"
        self.sock.sendall((head + "\r\n").encode())
        self.sock.setblocking(False)
        self.t0 = time.perf_counter()
        self.buf = b""
        self.eof = False
        self.answered_s: float | None = None  # seconds from the request to its status line

    def pump(self) -> None:
        try:
            while data := self.sock.recv(1 << 16):
                self.buf += data
            self.eof = True
        except BlockingIOError:
            pass
        except OSError:
            self.eof = True
        if self.answered_s is None and b"\r\n" in self.buf:
            self.answered_s = time.perf_counter() - self.t0

    @property
    def status(self) -> int | None:
        match = re.match(rb"HTTP/1\.1 (\d{3})", self.buf)
        return int(match.group(1)) if match else None

    @property
    def ended(self) -> bool:
        """The server ended it: the connection closed, or the chunked body's last chunk came."""
        return self.eof or (self.status == 200 and b"\r\n0\r\n\r\n" in self.buf)

    @property
    def held(self) -> bool:
        return self.status == 200 and not self.ended

    def close(self) -> None:
        self.sock.close()


def pump(held: list[Held], seconds: float) -> None:
    deadline = time.perf_counter() + seconds
    while True:
        for h in held:
            h.pump()
        if time.perf_counter() >= deadline:
            return
        time.sleep(0.05)


def settle(held: list[Held], at_least: float, at_most: float = 60) -> None:
    """Read for ``at_least`` seconds, then on until every request has been answered or its
    connection closed (a loaded server takes a few seconds over a thousand), ``at_most`` in all."""
    t0 = time.perf_counter()
    pump(held, at_least)
    while any(h.status is None and not h.eof for h in held) and time.perf_counter() - t0 < at_most:
        pump(held, 0.5)


def heartbeat(port: int, source: str, session: str, forwarded: str | None = None) -> Held:
    return Held(port, source, f"/{API}/heartbeat/{session}", forwarded)


def fn_index(base: str, name: str) -> int:
    deps = httpx.get(base + "config", timeout=30).json()["dependencies"]
    return next(d["id"] for d in deps if d.get("api_name") == name)


def join(base: str, index: int, data: list, session: str, source: str = "127.0.0.1", forwarded: str | None = None,
         timeout: float = 120, until: str = "process_completed") -> dict:
    """A page's event by hand (queue/join, then queue/data until a message ``until``): that message."""
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    with httpx.Client(timeout=timeout, headers=headers, transport=httpx.HTTPTransport(local_address=source)) as http:
        r = http.post(f"{base}{API}/queue/join", json={"data": data, "fn_index": index, "session_hash": session})
        assert r.status_code == 200, r.text
        with http.stream("GET", f"{base}{API}/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("msg") == until:
                        return message
    raise AssertionError(f"the stream ended without a {until} message")


# --- the small app: the wiring, in seconds -----------------------------------------------------------

SMALL = {"MAX_STREAMS": 12, "MAX_STREAMS_PER_VISITOR": 6, "MAX_STREAMS_PER_SESSION": 2,
         "HEARTBEAT_JOIN_WAIT_S": 1.0, "HEARTBEATS_WAITING_PER_VISITOR": 2}
SMALL_SESSIONS, SMALL_SESSIONS_PER_VISITOR = 40, 10
STORE = ResultStore(capacity=8, per_visitor=3)  # the small app's results


def remember(text: str):
    return f"kept {text}", text


def recall(kept):
    return "nothing kept" if kept is None else f"recalled {kept}"


def recall_as(who: str, kept):
    """Wired with the state first among its inputs: the value reaches ``kept`` by its name."""
    return f"{who}: {recall(kept)}"


def a_while(n: float):
    """A slow event: a tick every 0.1 s for ``n`` seconds (its result stream open meanwhile)."""
    for i in range(int(n * 10)):
        time.sleep(0.1)
        yield str(i)


@pytest.fixture(scope="module")
def small() -> Iterator[tuple[str, int]]:
    """(URL, port) of a one-textbox app with a result kept per session, served in this process
    with the app's serving options, the caps above, and 127.0.0.1 trusted as a proxy."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in SMALL.items():
            mp.setattr(streams, name, value)
        mp.setattr(serving, "MAX_SESSIONS", SMALL_SESSIONS)
        mp.setattr(serving, "SESSIONS_PER_VISITOR", SMALL_SESSIONS_PER_VISITOR)
        mp.setattr(visitors, "PROXIES", visitors.Proxies(networks=(ip_network(f"{PROXY}/32"),)))
        with gr.Blocks(analytics_enabled=False) as demo:
            box, out = gr.Textbox(), gr.Textbox()
            state = STORE.state()
            box.submit(*STORE.through(remember, inputs=[box, state], outputs=[out, state], state=state), api_name="remember")
            out.submit(*STORE.through(recall, inputs=[state], outputs=[out], state=state, read="kept"), api_name="recall")
            who = gr.Textbox(visible=False)
            who.submit(*STORE.through(recall_as, inputs=[state, who], outputs=[out], state=state, read="kept"), api_name="recall_as")
            gr.Number(visible=False).submit(a_while, [gr.Number(visible=False)], [out], api_name="a_while")
        demo.queue()
        serving.harden(demo)
        port = free_port()
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **serving.launch_options(demo))
        try:
            yield f"http://127.0.0.1:{port}/", port
        finally:
            demo.close()


def test_a_made_up_sessions_heartbeat_is_refused_and_past_the_waiting_few_at_once(small):
    base, port = small
    wait_s, waiting = SMALL["HEARTBEAT_JOIN_WAIT_S"], SMALL["HEARTBEATS_WAITING_PER_VISITOR"]
    made_up = [heartbeat(port, "127.0.3.1", f"made-up-{i}") for i in range(waiting + 10)]
    try:
        pump(made_up, wait_s + 1.5)
        assert [h.status for h in made_up] == [404] * len(made_up)
        fast = sorted(h.answered_s for h in made_up)
        print(f"\n{len(made_up)} made-up heartbeats: answered in {fast[0]:.2f}-{fast[-1]:.2f} s")
        assert sum(s < wait_s / 2 for s in fast) >= len(made_up) - waiting  # all but the waiting few at once
        assert all(s < wait_s + 1.0 for s in fast)  # and those within the wait
        assert b"queue/join first" in made_up[-1].buf
    finally:
        for h in made_up:
            h.close()


def test_a_pages_heartbeat_sent_before_its_first_join_is_held(small):
    base, port = small
    session = uuid.uuid4().hex
    early = heartbeat(port, "127.0.3.2", session)  # the page opens it as it loads ...
    try:
        time.sleep(0.3)  # the scenario: the heartbeat reaches the server before the join
        join(base, fn_index(base, "remember"), ["hi", None], session, source="127.0.3.2")  # ... then its first event joins
        pump([early], 0.5)
        assert early.held, early.buf[:200]
    finally:
        early.close()


def test_a_sessions_streams_past_its_cap_close_its_oldest(small):
    base, port = small
    session = uuid.uuid4().hex
    join(base, fn_index(base, "remember"), ["mine", None], session, source="127.0.3.3")
    beats = []
    try:
        for _ in range(SMALL["MAX_STREAMS_PER_SESSION"] + 1):
            beats.append(heartbeat(port, "127.0.3.3", session))
            pump(beats, 0.3)
        assert [h.held for h in beats] == [False] + [True] * SMALL["MAX_STREAMS_PER_SESSION"]
        # given way: its response finished (the chunked body's last chunk), its connection kept, not cut off
        assert beats[0].status == 200 and b"\r\n0\r\n\r\n" in beats[0].buf and not beats[0].eof
    finally:
        for h in beats:
            h.close()


def test_a_result_stream_that_gives_way_is_finished_not_cut_off(small):
    """A result stream closed for room ends as if its client had left, its chunked response
    finished rather than cut off (the connection stays usable: no error in the server's log)."""
    base, port = small
    session = uuid.uuid4().hex
    r = httpx.post(f"{base}{API}/queue/join", json={"data": [30], "fn_index": fn_index(base, "a_while"), "session_hash": session},
                   headers={"X-Forwarded-For": "203.0.113.9"}, timeout=30)
    assert r.status_code == 200, r.text
    results = Held(port, PROXY, f"/{API}/queue/data?session_hash={session}", "203.0.113.9")
    beats: list[Held] = []
    try:
        pump([results], 1.0)
        assert results.held and b"process_generating" in results.buf
        for _ in range(SMALL["MAX_STREAMS_PER_SESSION"]):  # the session's cap: its oldest, the result stream, gives way
            beats.append(heartbeat(port, PROXY, session, "203.0.113.9"))
        pump([results, *beats], 1.0)
        assert all(h.held for h in beats)
        assert b"\r\n0\r\n\r\n" in results.buf and not results.eof, results.buf[-200:]
        seen = results.buf.count(b"process_generating")
        pump([results], 0.5)
        assert results.buf.count(b"process_generating") == seen  # nothing more streamed to it
    finally:
        for h in (results, *beats):
            h.close()


def test_behind_the_proxy_a_hoarder_keeps_its_share_and_a_learners_streams_stay(small):
    base, port = small
    index = fn_index(base, "remember")
    learner, hoarder = "203.0.113.7", "203.0.113.66"
    mine = uuid.uuid4().hex
    join(base, index, ["learner", None], mine, source=PROXY, forwarded=learner)
    hoards = [uuid.uuid4().hex for _ in range(8)]
    for session in hoards:
        join(base, index, ["hoard", None], session, source=PROXY, forwarded=hoarder)
    beats = [heartbeat(port, PROXY, mine, learner)]
    try:
        pump(beats, 0.3)
        for i in range(3 * SMALL["MAX_STREAMS"]):  # from the proxy's one address, with no per-address cap
            beats.append(heartbeat(port, PROXY, hoards[i % len(hoards)], hoarder))
            pump(beats, 0.02)
        pump(beats, 0.5)
        held = [h for h in beats[1:] if h.held]
        assert beats[0].held, "the learner's heartbeat gave way"
        assert len(held) == SMALL["MAX_STREAMS_PER_VISITOR"], len(held)
        assert held == beats[-len(held):]  # the hoarder's newest; its oldest gave way
        # a learner's page still loads, behind the proxy and reached directly
        for source, forwarded in ((PROXY, "203.0.113.8"), ("127.0.3.9", None)):
            headers = {"X-Forwarded-For": forwarded} if forwarded else {}
            with httpx.Client(timeout=10, headers=headers, transport=httpx.HTTPTransport(local_address=source)) as http:
                assert http.get(base).status_code == 200
    finally:
        for h in beats:
            h.close()


def test_one_visitors_churned_sessions_leave_another_learners_result(small):
    base, _ = small
    remember_, recall_ = fn_index(base, "remember"), fn_index(base, "recall")
    mine = uuid.uuid4().hex
    join(base, remember_, ["my result", None], mine, source=PROXY, forwarded="203.0.113.7")

    def churn(i: int) -> None:
        join(base, remember_, [f"churn {i}", None], uuid.uuid4().hex, source=PROXY, forwarded="203.0.113.66")

    n = 3 * SMALL_SESSIONS
    with ThreadPoolExecutor(SMALL["MAX_STREAMS_PER_VISITOR"] - 2) as pool:  # each holds a result stream while it waits
        list(pool.map(churn, range(n)))
    answer = join(base, recall_, [None], mine, source=PROXY, forwarded="203.0.113.7")
    assert answer["output"]["data"][0] == "recalled my result", answer
    assert len(STORE) <= STORE.capacity


def test_two_sessions_each_read_back_their_own_result_never_the_others(small):
    """Through Gradio's own call path (the session's state substituted for what the request sends):
    turn by turn, each session reads back what it kept last, by the handler's parameter name."""
    base, _ = small
    remember_, recall_as_ = fn_index(base, "remember"), fn_index(base, "recall_as")
    sessions_ = {"ann": uuid.uuid4().hex, "bob": uuid.uuid4().hex}
    assert join(base, recall_as_, [None, "ann"], sessions_["ann"])["output"]["data"][0] == "ann: nothing kept"
    for turn in range(2):
        for who, session in sessions_.items():
            join(base, remember_, [f"{who}'s run {turn}", None], session)
        for who, session in sessions_.items():
            answer = join(base, recall_as_, [None, who], session)
            assert answer["output"]["data"][0] == f"{who}: recalled {who}'s run {turn}", answer


# --- app.py with the default caps: the abuse as it was found ----------------------------------------


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Iterator[AppServer]:
    server = launch(tmp_path_factory.mktemp("held") / "app.log", extra_env={"PLAYGROUND_TRUSTED_PROXIES": PROXY})
    yield server
    stop(server)


def _port(server: AppServer) -> int:
    return int(server.url.rstrip("/").rsplit(":", 1)[1])


def learner_served_s(base: str, source: str, forwarded: str | None = None) -> tuple[float, float]:
    """A learner's page, then a 32-token /generate read to its end: (seconds for the page, for the
    generation)."""
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    with httpx.Client(timeout=60, headers=headers, transport=httpx.HTTPTransport(local_address=source)) as http:
        t0 = time.perf_counter()
        page = http.get(base)
        page_s = time.perf_counter() - t0
        assert page.status_code == 200 and "window.gradio_config" in page.text
        t0 = time.perf_counter()
        r = http.post(f"{base}{API}/call/generate", json={"data": ["ROMEO:", 32, 0.8, 50, 0.95, 1]})
        assert r.status_code == 200, r.text
        text = http.get(f"{base}{API}/call/generate/{r.json()['event_id']}").text
        generate_s = time.perf_counter() - t0
    events = re.findall(r"event: (\w+)\ndata: (.*)", text)
    assert events and events[-1][0] == "complete", text[-300:]
    assert json.loads(events[-1][1])[0]["new_tokens"] == 32
    return page_s, generate_s


ADDRESSES = [f"127.0.5.{i}" for i in range(1, 21)]  # 20 addresses reached directly
PER_ADDRESS = 60


@pytest.mark.slow
def test_20_addresses_holding_60_heartbeats_each_then_a_learner_is_served(app):
    """Reached directly, 20 addresses x 60 heartbeats: for made-up sessions all refused (all but a
    few at once); for real joined sessions held up to the caps (32 a visitor, 500 in all), the
    hoarders' oldest giving way; then another learner's page and a 32-token generation within 10 s."""
    base, port = app.url, _port(app)
    waiting, wait_s = streams.HEARTBEATS_WAITING_PER_VISITOR, streams.HEARTBEAT_JOIN_WAIT_S
    learner_served_s(base, "127.0.0.9")  # the engine is open
    held: list[Held] = []
    try:
        t0 = time.perf_counter()
        for i in range(PER_ADDRESS):
            for address in ADDRESSES:
                held.append(heartbeat(port, address, f"made-up-{address.replace('.', '-')}-{i}"))
            pump(held, 0.0)
        settle(held, wait_s + 1)
        opened_s = time.perf_counter() - t0
        statuses = Counter(h.status for h in held)
        times = sorted(h.answered_s for h in held if h.answered_s is not None)
        waited = [t for t in times if t >= wait_s]
        print(f"\n{len(held)} made-up heartbeats from {len(ADDRESSES)} addresses in {opened_s:.1f} s: {dict(statuses)} "
              f"(None: the connection closed unanswered); answered in {times[len(times) // 2]:.2f} s (median), "
              f"{times[int(len(times) * 0.9)]:.2f} s (p90), {times[-1]:.2f} s (max); {len(waited)} after the join wait "
              f"({wait_s:g} s)")
        assert not [h for h in held if h.held]
        # answered 404, or (past the 1,000 connections, as the idlest made room) closed: never held
        assert set(statuses) <= {404, None} and statuses[404] >= len(held) // 2
        assert all(h.eof for h in held if h.status is None)
        # refused without waiting for a join (1,200 at once take the server a few seconds to answer
        # on a shared 2-core machine), but each visitor's few waiting ones
        assert len(waited) <= waiting * len(ADDRESSES) + len(held) // 20
        assert times[-1] < wait_s + 5
        page_s, generate_s = learner_served_s(base, "127.0.0.9")
        print(f"then a learner: page {page_s:.2f} s, 32 tokens {generate_s:.2f} s")
        assert page_s + generate_s < 10
    finally:
        for h in held:
            h.close()
        held.clear()

    # real sessions: each address joins 15 (4 heartbeats a session fit), then holds 60 heartbeats
    index = fn_index(base, "tokenize")
    sessions = {address: [f"{address.replace('.', '-')}-{uuid.uuid4().hex[:8]}" for _ in range(15)] for address in ADDRESSES}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda pair: join(base, index, ["hello"], pair[1], source=pair[0]),
                      [(a, s) for a, ss in sessions.items() for s in ss]))
    print(f"{sum(map(len, sessions.values()))} sessions joined in {time.perf_counter() - t0:.1f} s")
    try:
        t0 = time.perf_counter()
        for i in range(PER_ADDRESS):
            for address in ADDRESSES:
                held.append(heartbeat(port, address, sessions[address][i % 15]))
            pump(held, 0.0)
        settle(held, 3)
        by_address = Counter(a for h, a in zip(held, [a for _ in range(PER_ADDRESS) for a in ADDRESSES]) if h.held)
        total = sum(by_address.values())
        print(f"{len(held)} heartbeats of joined sessions opened in {time.perf_counter() - t0:.1f} s: {total} held, "
              f"{min(by_address.values())}-{max(by_address.values())} an address; "
              f"{Counter(h.status for h in held)}")
        # joined sessions: accepted (past the 1,000 connections some closed at once, unanswered) ...
        assert all(h.status == 200 or (h.status is None and h.eof) for h in held)
        assert total <= streams.MAX_STREAMS and max(by_address.values()) <= streams.MAX_STREAMS_PER_VISITOR  # ... to the caps
        assert total >= streams.MAX_STREAMS - len(ADDRESSES)  # and held up to them
        page_s, generate_s = learner_served_s(base, "127.0.0.9")
        print(f"beside them a learner: page {page_s:.2f} s, 32 tokens {generate_s:.2f} s")
        assert page_s + generate_s < 10
    finally:
        for h in held:
            h.close()


@pytest.mark.slow
def test_one_visitor_behind_the_proxy_holding_1000_streams_then_a_learner_is_served(app):
    base, port = app.url, _port(app)
    hoarder = "203.0.113.66"
    index = fn_index(base, "tokenize")
    sessions = [uuid.uuid4().hex for _ in range(10)]
    for session in sessions:
        join(base, index, ["hello"], session, source=PROXY, forwarded=hoarder)
    held: list[Held] = []
    try:
        t0 = time.perf_counter()
        for i in range(1_000):
            held.append(heartbeat(port, PROXY, sessions[i % len(sessions)], hoarder))
            if i % 50 == 49:
                pump(held, 0.0)
        settle(held, 3)
        kept = [h for h in held if h.held]
        print(f"\n1,000 heartbeats of one visitor behind the proxy in {time.perf_counter() - t0:.1f} s: "
              f"{len(kept)} held, {Counter(h.status for h in held)}")
        assert len(kept) == streams.MAX_STREAMS_PER_VISITOR
        for source, forwarded in ((PROXY, "203.0.113.7"), ("127.0.0.9", None)):
            page_s, generate_s = learner_served_s(base, source, forwarded)
            print(f"a learner {'behind the proxy' if forwarded else 'reached directly'}: page {page_s:.2f} s, "
                  f"32 tokens {generate_s:.2f} s")
            assert page_s + generate_s < 10
    finally:
        for h in held:
            h.close()


@pytest.mark.slow
def test_1100_sessions_churned_by_one_visitor_leave_a_learners_trained_model(app):
    """A learner behind the proxy trains a model in Watch it learn (stopped after its first
    steps: a stopped run keeps its model); one visitor then opens 1,100 sessions (tokenize, 16 at
    a time); the learner's "Continue with your model" still finds the model."""
    base = app.url
    learner, churner = "203.0.113.7", "203.0.113.66"
    session = uuid.uuid4().hex
    learn, try_model = fn_index(base, "ui_learn"), fn_index(base, "ui_continue")
    headers = {"X-Forwarded-For": learner}
    t0 = time.perf_counter()
    with httpx.Client(timeout=120, headers=headers, transport=httpx.HTTPTransport(local_address=PROXY)) as http:
        r = http.post(f"{base}{API}/queue/join", json={"data": [0, "proper", "good", "tiny", "learned", None],
                                                       "fn_index": learn, "session_hash": session})
        assert r.status_code == 200, r.text
        with http.stream("GET", f"{base}{API}/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():  # until the run trains (its step 0 is scored); then the page leaves
                if (line.startswith("data:") and "At step 0" in line) or time.perf_counter() - t0 > 60:
                    break
    print(f"\nthe learner's run started training, then its page left (which stops it), in {time.perf_counter() - t0:.1f} s")
    prompt = ["Romeo.\n", 0, None]

    def tried() -> str:
        message = join(base, try_model, prompt, session, source=PROXY, forwarded=learner)
        return json.dumps(message["output"])

    wait_for(lambda: "no trained model" not in tried() and "still training" not in tried(), 60, message="the stopped run's model")
    tokenize = fn_index(base, "tokenize")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: join(base, tokenize, [f"churn {i}"], uuid.uuid4().hex, source=PROXY, forwarded=churner),
                      range(1_100)))
    print(f"1,100 sessions of another visitor in {time.perf_counter() - t0:.1f} s")
    after = tried()
    assert "gen-output" in after and "no trained model" not in after, after[:500]
