"""A public Space under load and abuse, on a launched app: memory that comes back after
generation traffic and floods of bad session ids, work stopped for clients that stop reading,
session ids that are short tokens, connections bounded (header timeout, per address and in all),
and the app still answering a normal generation quickly afterwards.

Everything runs against loopback addresses (127.0.0.x), bounded in count and time. The slow
tests share one app launched with small connection limits (``guarded_app``), so that the caps
are reached by a few dozen sockets.
"""

from __future__ import annotations

import json
import re
import select
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from benchmarks.app_server import AppServer, launch, stop
from benchmarks.load import LONG_PROMPT, abandon
from playground import limits
from playground.ui.serving import connections, orphaned
from conftest import wait_for

API = "gradio_api"
PER_ADDRESS, IN_ALL = 24, 48  # the guarded app's connection limits
EVENTS_PER_ADDRESS = 6  # ... and requests waiting or running per client address
PROBE_ARGS = ["ROMEO:", 32, 0.8, 50, 0.95, 1]
PROMPT_300 = LONG_PROMPT[:1_350]  # about 300 GPT-2 tokens


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))


def _host_port(server: AppServer) -> tuple[str, int]:
    host, port = server.url.split("//")[1].rstrip("/").split(":")
    return host, int(port)


def _connect(server: AppServer, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(_host_port(server))
    return sock


def _closed(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (what it sent is read and dropped)."""
    deadline = time.perf_counter() + timeout
    try:
        while (left := deadline - time.perf_counter()) > 0:
            sock.settimeout(left)
            if not sock.recv(1 << 20):
                return True
    except ConnectionResetError:
        return True
    except (TimeoutError, socket.timeout):
        return False
    return False


def _closed_now(socks: list[socket.socket], at_least: int = 1) -> list[socket.socket] | None:
    """Those of ``socks`` the server has closed by now, if there are ``at_least`` of them (else
    None: for :func:`conftest.wait_for`)."""
    readable, _, _ = select.select(socks, [], [], 0)
    closed = [s for s in readable if _closed(s, 0.1)]
    return closed if len(closed) >= at_least else None


def generate(base: str, args: list, timeout: float = 300, source: str = "127.0.0.1") -> dict:
    """POST /gradio_api/call/generate from address ``source`` and read its stream to the end:
    the final result."""
    with httpx.Client(timeout=timeout, transport=httpx.HTTPTransport(local_address=source)) as http:
        r = http.post(f"{base}{API}/call/generate", json={"data": args})
        assert r.status_code == 200, r.text
        text = http.get(f"{base}{API}/call/generate/{r.json()['event_id']}").text
    events = re.findall(r"event: (\w+)\ndata: (.*)", text)
    assert events and events[-1][0] == "complete", text[-500:]
    return json.loads(events[-1][1])[0]


def probe_s(base: str, source: str = "127.0.0.9") -> float:
    """Seconds a normal 32-token generation takes, from its POST to its last token (from another
    client's address than the tests' abuse)."""
    t0 = time.perf_counter()
    out = generate(base, PROBE_ARGS, source=source)
    assert out["new_tokens"] == 32 and out["finished"] is True
    return time.perf_counter() - t0


@pytest.fixture(scope="module")
def guarded_app(tmp_path_factory) -> Iterator[AppServer]:
    server = launch(tmp_path_factory.mktemp("guarded") / "app.log", extra_env={
        "PLAYGROUND_MAX_CONNECTIONS": str(IN_ALL), "PLAYGROUND_MAX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
        limits.MAX_EVENTS_PER_ADDRESS_ENV: str(EVENTS_PER_ADDRESS),
    })
    generate(server.url, PROBE_ARGS)  # the engine is open
    yield server
    stop(server)


# --- session ids -------------------------------------------------------------------------------------


def test_a_session_id_that_is_not_a_short_token_is_refused_with_a_message(app_server):
    deps = httpx.get(app_server.url + "config", timeout=30).json()["dependencies"]
    index = next(d["id"] for d in deps if d.get("api_name") == "tokenize")
    for session in ["x" * 900_000, "a b", "../etc", ""]:
        r = httpx.post(f"{app_server.url}{API}/queue/join", timeout=30,
                       json={"data": ["hello"], "fn_index": index, "session_hash": session})
        assert r.status_code == 400, (session[:10], r.text)
        assert "session_hash must be a short token" in r.json()["detail"]
    r = httpx.get(f"{app_server.url}{API}/queue/data", params={"session_hash": "y" * 2_000}, timeout=30)
    assert r.status_code == 400 and "short token" in r.json()["detail"]
    ok = httpx.post(f"{app_server.url}{API}/queue/join", timeout=30,
                    json={"data": ["hello"], "fn_index": index, "session_hash": "abc-123_XYZ"})
    assert ok.status_code == 200, ok.text


def test_a_stream_for_an_unknown_session_is_404_with_a_message_and_no_traceback(app_server):
    before = len(app_server.log())
    r = httpx.get(f"{app_server.url}{API}/queue/data", params={"session_hash": "nobody-joined"}, timeout=30)
    assert r.status_code == 404 and "POST /gradio_api/queue/join first" in r.json()["detail"]
    assert "Traceback" not in app_server.log()[before:]


@pytest.mark.slow
def test_hundreds_of_oversized_session_ids_leave_memory_where_it_was(guarded_app):
    """300 joins, each with a 900,000-character session id: refused, RSS within 100 MB 30 s later."""
    base, pid = guarded_app.url, guarded_app.process.pid
    before = _rss_mb(pid)
    body = json.dumps({"data": ["hello"], "fn_index": 0, "session_hash": "x" * 900_000})

    def join(_: int) -> int:
        with httpx.Client(timeout=60) as http:
            return http.post(f"{base}{API}/queue/join", content=body, headers={"content-type": "application/json"}).status_code

    with ThreadPoolExecutor(8) as pool:  # 8 connections: under the per-address cap
        statuses = list(pool.map(join, range(300)))
    assert set(statuses) == {400}, set(statuses)
    time.sleep(30)  # memory is measured 30 s after
    print(f"\nRSS {before:.0f} MB before, {_rss_mb(pid):.0f} MB 30 s after 300 oversized session ids")
    assert _rss_mb(pid) - before <= 100, (before, _rss_mb(pid))


# --- connections ----------------------------------------------------------------------------------


@pytest.mark.slow  # a launched app of its own; the default run: connections.decide's edges (test_visitor_shares.py), its install on uvicorn (below)
def test_a_connection_that_never_finishes_its_headers_is_closed(guarded_app):
    sock = _connect(guarded_app)
    try:
        sock.sendall(b"G")  # one byte, then nothing: a slowloris client
        assert _closed(sock, connections.HEADER_TIMEOUT_S + 5)
    finally:
        sock.close()
    assert httpx.get(guarded_app.url + "config", timeout=30).status_code == 200


@pytest.mark.slow  # a launched app of its own; the default run: connections.decide's edges (test_visitor_shares.py), its install on uvicorn (below)
def test_connections_are_capped_per_address_and_in_all(guarded_app):
    held: list[socket.socket] = []
    try:
        mine = [_connect(guarded_app, "127.0.0.2") for _ in range(PER_ADDRESS + 6)]
        held += mine
        # The ones past the cap, closed before anything was read: at once, well before the header
        # timeout would close an idle one (and any one closed wrongly, opened before them, with them).
        refused = wait_for(lambda: _closed_now(mine, 6), connections.HEADER_TIMEOUT_S / 2,
                           message="the connections past the cap to be closed")
        assert set(refused) == set(mine[-6:]), f"{len(refused)} closed"  # the newest: refused, not made room for
        # Another address still gets in ...
        assert httpx.get(guarded_app.url + "config", timeout=30).status_code == 200
        # With the connections in all at their cap, all idle, a newcomer still gets in: the
        # idlest is closed for it (and idle ones are closed sooner as the total fills).
        others = [_connect(guarded_app, "127.0.0.3") for _ in range(IN_ALL - PER_ADDRESS)]
        held += others
        late = _connect(guarded_app, "127.0.0.4")
        held.append(late)
        late.sendall(b"GET /config HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        late.settimeout(30)
        assert late.recv(64).startswith(b"HTTP/1.1 200"), "the newcomer was not served"
        closed = wait_for(lambda: _closed_now(mine[:PER_ADDRESS] + others), 5, message="a connection closed for the newcomer")
        assert mine[0] in closed, "the idlest connection was not the one closed"
        assert len(mine[:PER_ADDRESS]) + len(others) - len(closed) < IN_ALL  # the total stayed within its cap
    finally:
        for s in held:
            s.close()
    wait_for(lambda: httpx.get(guarded_app.url + "config", timeout=30).status_code == 200, 30, message="the app to answer again")


@pytest.mark.slow
def test_20000_idle_connections_then_a_generation_within_5_s(guarded_app):
    """20,000 connections from one address, held idle: past the cap each is closed at once (no
    file descriptor kept, a rate-limited log line); once they are gone a 32-token generation
    takes at most 5 s, and the log stays small."""
    log_before = len(guarded_app.log())
    held: list[socket.socket] = []
    opened = 0
    t0 = time.perf_counter()
    try:
        while opened < 20_000 and time.perf_counter() - t0 < 240:
            try:
                held.append(_connect(guarded_app, "127.0.0.5"))
                opened += 1
            except OSError:
                time.sleep(0.01)  # the listen backlog is full for a moment
            if len(held) >= 500:  # let the server catch up: past the cap each one is closed at once
                settle = time.perf_counter() + 15
                while len(held) > 2 * PER_ADDRESS and time.perf_counter() < settle:
                    readable, _, _ = select.select(held, [], [], 0.2)
                    for s in readable:  # closed by the server: end-of-file; close our end
                        held.remove(s)
                        s.close()
                assert len(held) <= 2 * PER_ADDRESS, f"the server kept {len(held)} connections from one address"
        assert opened == 20_000, f"only {opened} connections in 240 s"
    finally:
        for s in held:
            s.close()
    assert probe_s(guarded_app.url) <= 5.0
    assert len(guarded_app.log()) - log_before < 200_000  # bytes: rate-limited lines, no tracebacks


@pytest.mark.slow
def test_idle_connections_from_many_addresses_leave_room_for_a_new_learner(guarded_app):
    """4 addresses, each under its cap, hold idle connections past the total (80 of 48 allowed),
    reopening each one the server closes; meanwhile every probe from another address is served:
    the idlest connection is closed for it, and idle ones go sooner as the total fills."""
    held: dict[socket.socket, str] = {}
    served = 0
    try:
        for address in ("127.0.6.1", "127.0.6.2", "127.0.6.3", "127.0.6.4"):
            for _ in range(20):
                held[_connect(guarded_app, address)] = address
        for _ in range(6):
            # reopen what the server closed, as an attacker would
            readable, _, _ = select.select(list(held), [], [], 0.2)
            for s in readable:
                if _closed(s, 0.1):
                    address = held.pop(s)
                    s.close()
                    held[_connect(guarded_app, address)] = address
            with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.6.9")) as http:
                served += http.get(guarded_app.url + "config").status_code == 200
            time.sleep(0.5)
    finally:
        for s in held:
            s.close()
    assert served == 6


# --- work nobody reads ------------------------------------------------------------------------------


def _open_never_read(base: str, seed: int, read_first: int = 0) -> socket.socket | None:
    """POST a 512-token generation, open its result stream, read ``read_first`` bytes, then stop
    (None: the POST was refused: too many of this visitor's, or busy)."""
    r = httpx.post(f"{base}{API}/call/generate", json={"data": [LONG_PROMPT, 512, 0.8, 50, 0.95, seed]}, timeout=30)
    if r.status_code in (429, 503):
        assert int(r.headers["retry-after"]) >= 1, r.headers
        return None
    host, port = base.split("//")[1].rstrip("/").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(f"GET /{API}/call/generate/{r.json()['event_id']} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    got = 0
    while got < read_first:
        got += len(sock.recv(read_first - got))
    return sock


@pytest.mark.slow
@pytest.mark.parametrize("how", ["never-read", "read-then-stalled", "call", "join"])
def test_abandoned_generations_and_a_new_one_within_5_s(guarded_app, how):
    """20 generations of 512 tokens (the batch holds 16 rows) from one address, abandoned one way:
    past the visitor's share of generations waiting or running they are refused (429, Retry-After); those not refused are stopped once noticed
    (POST- and join-only: the reader grace; a stream whose socket fills: a stalled write), and a
    stream that is open but never fills its socket runs on in its share. Once the deadlines for
    noticing have passed, a normal 32-token generation from another client takes at most 5 s."""
    base = guarded_app.url
    sockets: list[socket.socket] = []
    refused = 0
    t0 = time.monotonic()
    try:
        for seed in range(20):
            if how in ("call", "join"):
                try:
                    abandon(base, how, seed=seed)
                except httpx.HTTPStatusError as err:
                    assert err.response.status_code in (429, 503) and "try again" in err.response.text, err.response.text
                    refused += 1
            elif (sock := _open_never_read(base, seed, 0 if how == "never-read" else 2_000)) is not None:
                sockets.append(sock)
            else:
                refused += 1
        # At most the visitor's share at once: the rest refused (fewer when some were already
        # stopped while the later ones were sent).
        assert refused >= 1
        # The deadlines under test: the grace (a stream never opened) or a stalled write, plus a sweep.
        time.sleep(max(0.0, t0 + orphaned.READER_GRACE_S + orphaned.STALLED_SEND_S + 2 - time.monotonic()))
        assert probe_s(base) <= 5.0
    finally:
        for s in sockets:
            s.close()


# --- memory under generation traffic -----------------------------------------------------------------


@pytest.mark.slow
def test_memory_comes_back_after_three_rounds_of_16_long_generations(guarded_app):
    """The memory reproduction: 16 concurrent 512-token generations from ~300-token prompts, three
    rounds; 30 s after, RSS at most 400 MB above where it was."""
    base, pid = guarded_app.url, guarded_app.process.pid
    before = _rss_mb(pid)
    for round_ in range(3):
        with ThreadPoolExecutor(16) as pool:
            outs = list(pool.map(lambda i: generate(base, [PROMPT_300, 512, 0.8, 50, 0.95, i + 16 * round_],
                                                    source=f"127.0.0.{20 + i}"), range(16)))  # 16 clients
        assert all(out["finished"] for out in outs)
    busy = _rss_mb(pid)
    time.sleep(30)
    after = _rss_mb(pid)
    print(f"\nRSS {before:.0f} MB before, {busy:.0f} MB after three rounds, {after:.0f} MB 30 s later")
    assert after - before <= 400, (before, after)


def test_the_guarded_protocol_is_installed_on_the_tested_uvicorn():
    """install() extends uvicorn's protocol only on the version it was tested with."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Config:
        http_protocol_class = H11Protocol

    class Server:
        config = Config()

    assert connections.install(Server()) is (uvicorn.__version__ == connections.TESTED_UVICORN)
    if uvicorn.__version__ == connections.TESTED_UVICORN:
        assert issubclass(Server.config.http_protocol_class, H11Protocol)
        for name in ("connection_made", "connection_lost", "data_received", "on_response_complete", "cycle", "scope"):
            assert name in dir(H11Protocol) or name in H11Protocol.__init__.__code__.co_names, name


def test_log_lines_are_rate_limited_per_kind():
    import logging

    limiter = connections.RateLimitedLog(burst=3, window_s=60)
    records = [logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, "Invalid HTTP request received.", None, None)
               for _ in range(10)]
    other = logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, "something else", None, None)
    assert [limiter.filter(r) for r in records] == [True] * 3 + [False] * 7
    assert limiter.filter(other)


# --- small items --------------------------------------------------------------------------------------


def test_an_empty_upload_is_refused_and_leaves_no_file(app_server):
    files = [("files", ("empty.txt", b"", "text/plain"))]
    r = httpx.post(f"{app_server.url}{API}/upload", files=files, timeout=30)
    assert r.status_code == 413 and "Uploads are off" in r.json()["detail"]


def test_a_number_just_past_a_bound_is_shown_as_it_was_sent():
    from playground.validation import InputError, validate_float

    with pytest.raises(InputError, match=r"not 1\.0000001$"):
        validate_float(1.0000001, name="top_p", minimum=0.0, maximum=1.0, min_inclusive=False)
    with pytest.raises(InputError, match=r"not 1e\+308$"):
        validate_float(1e308, name="top_p", minimum=0.0, maximum=1.0)
