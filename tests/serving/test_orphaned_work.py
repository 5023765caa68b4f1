"""No orphaned work: a job whose client never opens its result stream (a POST to
``/gradio_api/call/<endpoint>`` without its GET, a ``queue/join`` without ``queue/data``) or
closes it stops; a client that reads, or opens its stream within the grace period, gets every
update. Raw HTTP, as a hand-written client sends it.

Two apps: a small one, launched in this process with the app's serving options and a generator
that ticks for as long as it is iterated (so what stopped and when is exact, whatever the
machine's speed), and the session's launched ``app.py`` with real generations
(benchmarks/load.py ``--abandoned`` prints the timings).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator

import gradio as gr
import httpx
import pytest

from benchmarks.app_server import free_port
from conftest import wait_for
from benchmarks.load import abandon, late_answer
from playground import limits
from playground.ui import gradio_internals, serving
from playground.ui.serving import orphaned

API = "gradio_api"
GRACE_S = 1.0  # the small app's grace period (the app's own: orphaned.READER_GRACE_S, 5 s)
TICK_S = 0.02
FOREVER = 3_000  # ticks: a minute or more, far past every wait below, if nothing stops it
STOPPED = "Stopped: nobody opened this request's result stream"
STALLED_CLOSE_S = 4.0  # the small app's; the app's own: orphaned.STALLED_CLOSE_S


# --- the small app ----------------------------------------------------------------------------------

RUNS: dict[str, dict] = {}  # tag -> what the generator did: ticks, finished (ran to its end), closed
READERS = orphaned.ResultReaders()  # the small app's count of open result streams


def ticks(tag: str, n: int) -> Iterator[int]:
    """Count to n, one tick every TICK_S, recording how far it got and how it ended."""
    run = RUNS.setdefault(tag, {"ticks": 0, "finished": False, "closed": False})
    try:
        for i in range(n):
            time.sleep(TICK_S)
            run["ticks"] = i + 1
            yield i + 1
        run["finished"] = True
    finally:
        run["closed"] = True


BLOB = "x" * 65_536  # one update of /blobs: a reader that stops fills the sockets in a few ticks


def blobs(tag: str, n: int) -> Iterator[str]:
    """``ticks``, each update a 64 KB string."""
    for _ in ticks(tag, n):
        yield BLOB


@pytest.fixture(scope="module")
def small_served() -> Iterator[tuple[gr.Blocks, str]]:
    """A one-endpoint app (``/ticks``, one at a time) served with the app's serving options,
    its grace period shortened to GRACE_S and its sweeper to five times a second: (the app, its URL)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(orphaned, "READER_GRACE_S", GRACE_S)
        mp.setattr(serving, "SWEEP_EVERY_S", 0.2)
        mp.setattr(orphaned, "STALLED_CLOSE_S", STALLED_CLOSE_S)
        with gr.Blocks(analytics_enabled=False) as demo:
            gr.api(ticks, api_name="ticks", concurrency_limit=1, concurrency_id="ticks")
            gr.api(blobs, api_name="blobs", concurrency_limit=4, concurrency_id="blobs")
        demo.queue()
        serving.harden(demo)
        port = free_port()
        demo.launch(
            server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
            **serving.launch_options(demo, readers=READERS),
        )
        try:
            yield demo, f"http://127.0.0.1:{port}/"
        finally:
            demo.close()


@pytest.fixture(scope="module")
def small_app(small_served) -> str:
    return small_served[1]


def _post(base: str, tag: str, n: int = FOREVER) -> str:
    r = httpx.post(f"{base}{API}/call/ticks", json={"data": [tag, n]}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["event_id"]


def _join(base: str, tag: str, n: int = FOREVER) -> str:
    deps = httpx.get(base + "config", timeout=30).json()["dependencies"]
    index = next(d["id"] for d in deps if d.get("api_name") == "ticks")
    session = f"session-{tag}"
    r = httpx.post(f"{base}{API}/queue/join", json={"data": [tag, n], "fn_index": index, "session_hash": session}, timeout=30)
    assert r.status_code == 200, r.text
    return session


def _read_call(base: str, event_id: str) -> list[tuple[str, object]]:
    """GET the result stream of a POST to the end: its (event, data) pairs."""
    text = httpx.get(f"{base}{API}/call/ticks/{event_id}", timeout=60).text
    return [(event, json.loads(data)) for event, data in re.findall(r"event: (\w+)\ndata: (.*)", text)]


def _read_session(base: str, session: str) -> dict:
    """GET queue/data for a session until its completion message."""
    with httpx.stream("GET", f"{base}{API}/queue/data", params={"session_hash": session}, timeout=60) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return message
    raise AssertionError("the stream ended without a completion")


def _stopped_early(tag: str) -> None:
    run = RUNS[tag]
    assert run["closed"] and not run["finished"], run
    # Stopped after about the grace period and a sweep, not after running for long.
    assert run["ticks"] < FOREVER and run["ticks"] * TICK_S < 20, run


def test_a_post_whose_result_is_never_read_stops_and_a_late_reader_is_told_why(small_app):
    event_id = _post(small_app, "post-only")
    wait_for(lambda: RUNS.get("post-only", {}).get("closed"), 30, message="the unread job to stop")
    _stopped_early("post-only")  # closed: its generator ran its finally and can tick no more
    events = _read_call(small_app, event_id)
    assert events[-1][0] == "error"
    assert STOPPED in events[-1][1]["error"] and f"within {GRACE_S:g} s" in events[-1][1]["error"]
    assert "GET /gradio_api/call/<endpoint>/<event_id>" in events[-1][1]["error"]


def test_a_join_whose_session_is_never_read_stops_and_a_late_reader_is_told_why(small_app):
    session = _join(small_app, "join-only")
    wait_for(lambda: RUNS.get("join-only", {}).get("closed"), 30, message="the unread job to stop")
    _stopped_early("join-only")
    message = _read_session(small_app, session)
    assert message["success"] is False
    assert STOPPED in message["output"]["error"] and "queue/data" in message["output"]["error"]


def test_a_stream_read_to_the_end_is_never_stopped(small_app):
    """Read for three grace periods: the work a reader waits for runs to its end."""
    n = int(3 * GRACE_S / TICK_S)
    events = _read_call(small_app, _post(small_app, "read", n))
    assert events[-1] == ("complete", [n])
    assert RUNS["read"]["finished"]


def test_a_session_read_to_the_end_is_never_stopped(small_app):
    n = int(3 * GRACE_S / TICK_S)
    message = _read_session(small_app, _join(small_app, "read-session", n))
    assert message["success"] is True and message["output"]["data"] == [n]
    assert RUNS["read-session"]["finished"]


def test_a_reader_who_comes_within_the_grace_period_gets_every_update(small_app):
    n = int(2 * GRACE_S / TICK_S)
    event_id = _post(small_app, "late-but-in-time", n)
    time.sleep(GRACE_S / 2)  # the scenario: its reader comes half the grace period late
    events = _read_call(small_app, event_id)
    assert events[-1] == ("complete", [n])
    assert [data for event, data in events if event == "generating"][0] == [1]  # from its first update on


def test_an_unread_job_waiting_for_a_slot_never_runs(small_served):
    """One slot, held by a job that is read; an unread job behind it leaves the queue unrun."""
    demo, small_app = small_served
    holder_id = _post(small_app, "holder")
    http = httpx.Client(timeout=60)
    holder = http.send(http.build_request("GET", f"{small_app}{API}/call/ticks/{holder_id}"), stream=True)
    lines = holder.iter_lines()
    next(line for line in lines if line.startswith("event: generating"))
    submitted = time.monotonic()
    queued_id = _post(small_app, "queued")
    assert gradio_internals.live(demo, queued_id)  # waiting for the slot
    wait_for(lambda: not gradio_internals.live(demo, queued_id), 30, message="the unread job to leave the queue")
    assert time.monotonic() - submitted >= GRACE_S  # not before its grace
    assert "queued" not in RUNS  # it left the queue without ever starting, and now never can
    assert not RUNS["holder"]["closed"]  # read: still running past the grace
    holder.close()  # the reader goes: Gradio stops its job, the slot frees
    http.close()
    wait_for(lambda: RUNS["holder"]["closed"], 30, message="the holder to stop")
    assert "queued" not in RUNS, "the unread job ran"
    events = _read_call(small_app, queued_id)
    assert events[-1][0] == "error" and STOPPED in events[-1][1]["error"]


def test_a_client_that_opens_its_stream_then_leaves_is_stopped(small_app):
    """Gradio itself stops the events of a stream whose client disconnects (its ``clean_events``);
    kept covered here (tests/serving/test_load.py checks it frees a generation slot)."""
    event_id = _post(small_app, "leaves")
    with httpx.stream("GET", f"{small_app}{API}/call/ticks/{event_id}", timeout=60) as stream:
        seen = 0
        for line in stream.iter_lines():
            seen += line.startswith("event: generating")
            if seen == 3:
                break
    wait_for(lambda: RUNS["leaves"]["closed"], 30, message="the job to stop")
    _stopped_early("leaves")


def _stalled_reader(base: str, path: str, read_first: int = 0) -> socket.socket:
    """A raw client that sends GET ``path``, reads ``read_first`` bytes, then reads nothing."""
    host, port = base.split("//")[1].rstrip("/").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    got = 0
    while got < read_first:
        got += len(sock.recv(min(65_536, read_first - got)))
    return sock


def _closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (reading what it had sent)."""
    sock.settimeout(timeout)
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < timeout:
            if not sock.recv(1 << 20):
                return True
    except (ConnectionResetError, TimeoutError, socket.timeout) as err:
        return isinstance(err, ConnectionResetError)
    return False


@pytest.mark.parametrize("how", ["never-read", "read-then-stalled"])
def test_a_client_that_stops_reading_its_open_stream_is_stopped_within_5_s(small_app, how):
    """A stream opened and never read (or read a while, then not): once its writes wait
    (orphaned.STALLED_SEND_S), its work stops at the next sweep, and the server later closes the
    connection (STALLED_CLOSE_S), freeing what it held."""
    tag = f"stalled-{how}"
    r = httpx.post(f"{small_app}{API}/call/blobs", json={"data": [tag, FOREVER]}, timeout=30)
    event_id = r.json()["event_id"]
    sock = _stalled_reader(small_app, f"/{API}/call/blobs/{event_id}", 0 if how == "never-read" else 300_000)
    try:
        # The sockets fill within a few ticks; then the write waits STALLED_SEND_S, then a sweep.
        fill_s = 1.0
        wait_for(lambda: RUNS.get(tag, {}).get("closed"), fill_s + 5, message="the stalled reader's work to stop")
        assert not RUNS[tag]["finished"]
        assert _closed_by_server(sock, STALLED_CLOSE_S + 5)
    finally:
        sock.close()
    wait_for(lambda: event_id not in READERS.open and not READERS.blocked, 10, message="the stream to be uncounted")


def test_a_slow_reader_is_neither_stopped_nor_closed(small_app):
    """A client on a slow link: it reads 32 KB every quarter second, far slower than /blobs
    writes, for twice STALLED_CLOSE_S. Its writes wait, but go out: its work keeps running and
    its connection stays open."""
    tag = "slow-reader"
    r = httpx.post(f"{small_app}{API}/call/blobs", json={"data": [tag, FOREVER]}, timeout=30)
    sock = _stalled_reader(small_app, f"/{API}/call/blobs/{r.json()['event_id']}", 0)
    try:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2 * STALLED_CLOSE_S:
            assert sock.recv(32_768), "the server closed a slow reader's stream"
            time.sleep(0.25)  # the scenario: a slow link, 32 KB a quarter second
        assert not RUNS[tag]["closed"], RUNS[tag]
    finally:
        sock.close()
    wait_for(lambda: RUNS[tag]["closed"], 30, message="the job to stop once its reader left")


def test_readers_are_counted_per_session_while_their_stream_is_open(small_app):
    session = _join(small_app, "counted", int(2 * GRACE_S / TICK_S))
    counted: list[int] = []

    def watch() -> None:
        while not RUNS.get("counted", {}).get("closed"):
            counted.append(READERS.open[session])
            time.sleep(0.02)  # sampling the count while the stream is read, not waiting for a state

    watcher = threading.Thread(target=watch)
    watcher.start()
    message = _read_session(small_app, session)
    watcher.join(30)
    assert message["success"] is True and RUNS["counted"]["finished"]
    assert max(counted) == 1  # one stream, counted once, while it was open
    wait_for(lambda: session not in READERS.open, 10, message="the closed stream to be uncounted")


# --- the rule itself, without a server ------------------------------------------------------------


class _Fn:
    def __init__(self, streams: bool):
        self.types_generator = streams


class _Event:
    def __init__(self, session: str, submitted: float, streams: bool = True):
        self._id = f"{session}-event"
        self.session_hash = session
        self.enqueue_time = submitted
        self.fn = _Fn(streams)
        self.alive = True


class _Waiting:
    def __init__(self, events):
        self.queue = list(events)


class _Queue:
    def __init__(self, queued=(), running=()):
        self.event_queue_per_concurrency_id = {"any": _Waiting(queued)}
        self.active_jobs = [list(running), None]


def test_only_work_nobody_reads_past_the_grace_is_chosen():
    g = orphaned.READER_GRACE_S
    readers = orphaned.ResultReaders()
    readers.opened("read")
    queued = [_Event("read", 0.0), _Event("unread", 0.0), _Event("fresh", 100.0)]
    running = [_Event("read", 0.0), _Event("unread-stream", 0.0), _Event("unread-one-shot", 0.0, streams=False)]
    gone = _Event("already-stopped", 0.0)
    gone.alive = False
    queue = _Queue(queued, running + [gone])
    chosen = orphaned.unread_events(queue, readers, now=100.0 + g / 2)
    # fresh: still in its grace period; one-shot: cannot be stopped half-way (its result waits
    # for a reader like any other); already stopped: nothing to do.
    assert sorted(job.session for job in chosen) == ["unread", "unread-stream"]
    readers.closed("read")
    assert "read" not in readers.open
    assert len(orphaned.unread_events(queue, readers, now=100.0 + g / 2)) == 4  # now "read" is unread too
    assert orphaned.unread_events(queue, readers, now=g / 2) == []  # within everyone's grace


def test_a_write_that_waits_with_nothing_waiting_for_the_client_is_not_stalled(monkeypatch):
    """A write pending past STALLED_SEND_S counts as a client that stopped reading only while
    bytes wait for that client; with none waiting the event loop was busy (a loaded machine),
    and the reader keeps its work. Unknown (no guarded protocol): counted, as before."""
    backlog = {("127.0.0.1", 1): 0, ("127.0.0.1", 2): 65_536}
    monkeypatch.setattr(orphaned.connections, "write_backlog", lambda client: backlog.get(client))
    readers = orphaned.ResultReaders()
    late = orphaned.STALLED_SEND_S + 1
    readers.writing(1, "busy-loop", 0.0, ("127.0.0.1", 1))
    readers.writing(2, "not-reading", 0.0, ("127.0.0.1", 2))
    readers.writing(3, "unknown", 0.0, None)
    assert readers.stalled("busy-loop", late) == 0
    assert readers.stalled("not-reading", late) == 1 and readers.stalled("unknown", late) == 1
    assert readers.stalled("not-reading", orphaned.STALLED_SEND_S / 2) == 0  # not yet


# --- the launched app: real generations -------------------------------------------------------------


SHORT_GRACE_S = 0.5  # the launched app's grace below; it sweeps every half grace


@pytest.fixture(scope="module")
def short_grace_app(tmp_path_factory):
    """The app launched as a user would, with PLAYGROUND_READER_GRACE_S=0.5: a job nobody reads is
    stopped within ~0.75 s (the grace, then a sweep every quarter second). Six 512-token
    generations of a 4,000-character prompt take seconds of decoding on a CPU, so on the app's 5 s
    grace the batched loop may finish some before anyone looks (benchmarks/load.py --abandoned
    shows it); on this one none can."""
    from benchmarks.app_server import launch, stop

    server = launch(tmp_path_factory.mktemp("short_grace") / "app.log", extra_env={limits.READER_GRACE_ENV: str(SHORT_GRACE_S)})
    yield server
    stop(server)


@pytest.mark.slow  # an app launched for it; the default run: the same stops on the served app above (POST-only, join-only)
@pytest.mark.parametrize("how", ["call", "join"])
def test_abandoned_generations_stop_and_a_normal_one_goes_through(short_grace_app, how):
    """Six 512-token generations of a 4,000-character prompt, submitted and never read (POST-only
    or join-only), then a normal one with gradio_client: it gets all its tokens, and whoever comes
    back for an abandoned one is told it was stopped, with the tokens it had made (fewer than 512)."""
    from gradio_client import Client

    url = short_grace_app.url
    handles = [abandon(url, how, seed=seed, source=f"127.0.5.{seed + 1}") for seed in range(6)]  # 6 visitors
    submitted = time.monotonic()
    out = Client(url, verbose=False, ssl_verify=False).predict("ROMEO:", 32, 0.8, 50, 0.95, 1, api_name="/generate")
    assert out["finished"] is True and out["new_tokens"] == 32
    # Come back only once the grace and a few sweeps have passed: a reader who comes sooner
    # is a reader, and a stream being read is never cut (it would get all 512 tokens).
    time.sleep(max(0.0, submitted + SHORT_GRACE_S + 4 * SHORT_GRACE_S / 2 - time.monotonic()))
    answers = [late_answer(url, handle) for handle in handles]
    assert len(answers) == 6
    assert all(STOPPED in a and f"{SHORT_GRACE_S:g} s" in a for a in answers), [a[:40] for a in answers]
    # Each says how far it got: "stopped after N tokens", or "stopped before it started" (0).
    made = [int(m.group(1) or 0) for a in answers if (m := re.match(r"stopped (?:after (\d+) tokens|before it started)", a))]
    assert len(made) == len(answers), answers
    assert all(n < 512 for n in made), answers


def test_the_grace_period_is_read_from_the_environment(monkeypatch):
    """PLAYGROUND_READER_GRACE_S, from 0.5 to 600 s; anything else keeps the default with a warning."""
    for raw, want in (("", 5.0), ("2.5", 2.5), ("0.5", 0.5), ("600", 600.0), ("0.1", 5.0), ("1e9", 5.0), ("nan", 5.0), ("soon", 5.0)):
        monkeypatch.setenv(limits.READER_GRACE_ENV, raw)
        assert limits.reader_grace_s() == want, raw
