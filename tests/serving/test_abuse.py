"""Reliability under abuse, as someone hammering a public Space would try it: a malformed call
of an endpoint or a page event is answered with a message (never ``{"error": null}``), tiny temperatures
give the greedy text (never garbage), files come only from artifacts/, request bodies are capped
before they are read, results nobody reads are dropped, and memory settles whatever the
traffic (the soak test, on its own launched app).

The launched-app tests use raw HTTP (httpx, sockets) and gradio_client, like a hand-written
client and a Python user would.
"""

from __future__ import annotations

import asyncio
import json
import re
import select
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gradio as gr
import httpx
import numpy as np
import pytest
from gradio_client.exceptions import AppError

from conftest import wait_for
from export.build import artifact_paths
from runtime.sampling import Settings, choose_rows, sample, sampling_distribution, softmax
from playground import limits
from playground.ui import serving
from playground.ui import gradio_internals
from playground.ui.serving import sessions, unread
from playground.validation import InputError, format_number, parse_int_list, validate_float, validate_int

API = "gradio_api"
ENDPOINTS = {  # name -> a valid argument list
    "tokenize": ["hello everyone"],
    "tokenize_encodings": ["hello everyone"],
    "embedding_arithmetic": ["king - man + woman", 3],
    "positional_encoding": [4, 4, 10000],
    "generate": ["ROMEO:", 2, 0.8, 50, 0.95, 1],
    "attention": ["hello everyone", 0, 0],
    "inside": ["hello everyone", 0, 0],
    "compare": ["ROMEO:", "king", "hello everyone"],
    "learn": [5, 0, "proper", 5],
}
# Parameters an endpoint gained last, with defaults: a caller that sends the list without them
# (written before they existed) is answered as before.
ADDED_LAST = {"generate": ["precision"]}


# --- helpers: raw HTTP the way a hand-written client sends it ----------------------------------


def call_raw(base: str, endpoint: str, body: Any, timeout: float = 120) -> tuple[str, Any]:
    """POST to /gradio_api/call/<endpoint>, then read the result stream; the last (event, data)."""
    url = f"{base}{API}/call/{endpoint}"
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    r = httpx.post(url, content=content, headers={"content-type": "application/json"}, timeout=timeout)
    assert r.status_code == 200, r.text
    text = httpx.get(f"{url}/{r.json()['event_id']}", timeout=timeout).text
    events = re.findall(r"event: (\w+)\ndata: (.*)", text)
    assert events, text
    event, data = events[-1]
    return event, json.loads(data)


def fn_index(base: str, api_name: str) -> int:
    deps = httpx.get(base + "config", timeout=30).json()["dependencies"]
    return next(d["id"] for d in deps if d.get("api_name") == api_name)


def join(base: str, body: dict, session: str | None = None, timeout: float = 120) -> tuple[int, Any]:
    """A page's event by hand: POST queue/join, read queue/data; (HTTP status of the join, the
    completion message or the join's answer)."""
    session = session or uuid.uuid4().hex
    content = json.dumps({"session_hash": session, **body})  # ensure_ascii: the longest encoding
    r = httpx.post(f"{base}{API}/queue/join", content=content, headers={"content-type": "application/json"}, timeout=timeout)
    if r.status_code != 200:
        return r.status_code, r.json()
    with httpx.stream("GET", f"{base}{API}/queue/data", params={"session_hash": session}, timeout=timeout) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return 200, message
    raise AssertionError("the stream ended without a result")


def assert_message(error: Any, *fragments: str) -> str:
    """An error answered with words: a non-empty string, no traceback, the fragments in it."""
    text = error["error"] if isinstance(error, dict) else error
    assert isinstance(text, str) and text.strip(), f"no message: {error!r}"
    assert "Traceback" not in text and 'File "' not in text, text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    return text


# --- every malformed request gets a message ------------------------------------------------------


@pytest.mark.parametrize("endpoint, data", [("generate", ["ROMEO:", 2, 0.0, 0, 1.0, 0]), ("learn", [5, 0, "proper"])])
def test_a_list_written_before_the_last_parameters_is_answered(app_server, endpoint, data):
    """Raw HTTP callers that send the endpoint's old argument list (without `precision`, without
    `steps`) get their answer with the defaults, not "didn't receive enough input values"."""
    event, payload = call_raw(app_server.url, endpoint, {"data": data})
    assert event == "complete", payload
    answer = payload[0]
    if endpoint == "generate":
        assert answer["new_tokens"] == 2 and answer["finished"]
    else:
        assert answer["status"] in ("finished", "stopped") and answer["losses"][0][0] == 0


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_missing_arguments_get_a_message(app_server, endpoint):
    """Gradio's own message (serving/errors.py), not ``{"error": null}``: it says how many values
    the endpoint needs, without Gradio's advice to developers and its components' reprs."""
    event, data = call_raw(app_server.url, endpoint, {"data": []})
    assert event == "error"
    needed = len(ENDPOINTS[endpoint]) + len(ADDED_LAST.get(endpoint, ()))
    text = assert_message(data, "didn't receive enough input values", f"needed: {needed}, got: 0")
    assert " object at 0x" not in text and "Check if" not in text, text


def test_gradios_own_errors_leave_a_log_line_not_a_traceback(app_server):
    """Gradio prints each of its own errors with a traceback straight to stderr, past the log's
    rate limit: a flood of malformed requests would grow the log by a traceback each."""
    before = len(app_server.log())
    event, data = call_raw(app_server.url, "tokenize", {"data": []})  # too few arguments
    status, message = join(app_server.url, {"fn_index": fn_index(app_server.url, "ui_positional"), "data": [1024, 1024, 10000, "2"]})
    assert event == "error" and message["success"] is False  # 1024 is past the d_model slider's end
    added = app_server.log()[before:]
    assert "Traceback" not in added, added[-3000:]  # (the log line itself is rate-limited: not asserted)


def test_queue_less_routes_are_closed_so_every_call_meets_the_caps(app_server):
    """Outside a Space Gradio opens /gradio_api/run/<endpoint>, which skips the queue and with it
    the generations' concurrency cap; the app closes it."""
    for route in ("run", "api"):
        r = httpx.post(f"{app_server.url}{API}/{route}/generate", json={"data": ENDPOINTS["generate"]}, timeout=30)
        assert r.status_code == 404 and "join the queue" in r.json()["detail"]


def test_a_page_event_without_event_data_gets_a_clear_message(app_server):
    index = fn_index(app_server.url, "ui_pick_token")
    for event_data in (None, "junk", {"sample": 0}):
        status, message = join(app_server.url, {"fn_index": index, "data": [None], "event_data": event_data})
        assert status == 200 and message["success"] is False
        assert_message(message["output"], "sample and step as event data", '"step": 3')
    status, message = join(app_server.url, {"fn_index": index, "data": [None], "event_data": {"sample": "x", "step": 1}})
    assert_message(message["output"], "sample must be a number", "'x'")
    # What the page really sends, before any generation in this session: nothing to show, no error.
    status, message = join(app_server.url, {"fn_index": index, "data": [None], "event_data": {"sample": 0, "step": 1}})
    assert message["success"] is True


def test_page_events_with_wrong_counts_or_values_get_messages(app_server):
    base = app_server.url
    status, message = join(base, {"fn_index": fn_index(base, "ui_tokenize"), "data": []})
    assert message["success"] is False
    assert_message(message["output"], "didn't receive enough input values", "got: 0")
    # null for a slider: Gradio's own preprocessing fails; its message says which input and why.
    status, message = join(base, {"fn_index": fn_index(base, "ui_generate"), "data": ["ROMEO:", None, 0.8, 50, 0.95, 1, 1, "full", None]})
    assert message["success"] is False
    assert_message(message["output"], "index 1", "slider", "None")
    assert "Original error" not in message["output"]["error"]


def test_an_event_that_runs_only_in_the_page_gets_a_message(app_server):
    deps = httpx.get(app_server.url + "config", timeout=30).json()["dependencies"]
    stop = next(d["id"] for d in deps if not d["backend_fn"] and d.get("cancels"))  # the Stop button: cancels in the page
    status, message = join(app_server.url, {"fn_index": stop, "data": []})
    assert status == 200 and message["success"] is False
    assert_message(message["output"], "no backend method")


def test_a_result_asked_for_an_unknown_event_is_404_saying_why(app_server):
    r = httpx.get(f"{app_server.url}{API}/call/tokenize/deadbeef", timeout=30)
    assert r.status_code == 404
    assert_message(r.json()["detail"], "No result for event deadbeef", "POST again")


@pytest.mark.parametrize(
    "endpoint, args, says",
    [
        ("positional_encoding", [1e308, 4, 10000], "not 1e+308"),
        ("positional_encoding", [10**400, 4, 10000], "not 1e+400"),
        ("generate", ["ROMEO:", 2, 10**400, 50, 0.95, 1], "not 1e+400"),
        ("generate", ["ROMEO:", 2, 0.8, 50, 0.95, 10**30], "not 1e+30"),
    ],
    ids=["float-1e308", "int-1e400", "temperature-1e400", "seed-1e30"],
)
def test_huge_numbers_are_printed_compactly(app_server, endpoint, args, says):
    event, data = call_raw(app_server.url, endpoint, {"data": args})
    assert event == "error"
    text = assert_message(data, says)
    assert len(text) < 200 and not re.search(r"\d{20}", text), text


def test_format_number_is_short_whatever_the_size():
    assert format_number(10**308) == "1e+308"
    assert format_number(-(10**4000)) == "-1e+4000"
    assert format_number(123456789012345678901) == "1.23456e+20"
    assert format_number(4294967295) == "4294967295"
    assert format_number(1e-300) == "1e-300" and format_number(0.5) == "0.5"
    with pytest.raises(InputError, match=r"not 1e\+400$"):
        validate_float(10**400, name="t", minimum=0, maximum=5)
    with pytest.raises(InputError, match=r"not 1e\+308$"):
        validate_int(1e308, name="d", minimum=2, maximum=1024)
    with pytest.raises(InputError, match="5,000 digits, far out of range"):
        parse_int_list("9" * 5_000, max_chars=50_000, max_count=5_000)
    with pytest.raises(InputError, match="must be a number"):
        validate_int("9" * 5_000, name="seed", minimum=0, maximum=5)


# --- tiny temperatures: the T -> 0 limit is greedy ------------------------------------------------


@pytest.mark.parametrize("temperature", [5e-324, 1e-308, 1e-30])
def test_tiny_temperatures_give_the_argmax_not_garbage(temperature):
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(3, 50257)) * 4).astype(np.float32)
    probs = sampling_distribution(logits, temperature, None, None)
    assert np.isfinite(probs).all()
    one_hot = np.zeros_like(probs)  # (np.eye(50257) would be 20 GB for these three rows)
    one_hot[np.arange(len(logits)), logits.argmax(axis=-1)] = 1
    np.testing.assert_array_equal(probs, one_hot)
    for top_k, top_p in [(None, None), (50, None), (None, 0.9), (40, 0.5)]:
        u = np.random.default_rng(1).random(len(logits))
        picked = choose_rows(logits, [Settings(temperature, top_k, top_p)] * len(logits), u)[0]
        np.testing.assert_array_equal(picked, logits.argmax(axis=-1))
        assert [sample(row, temperature, top_k, top_p, x) for row, x in zip(logits, u)] == logits.argmax(axis=-1).tolist()


def test_tiny_temperatures_split_exact_ties_evenly():
    logits = np.array([[1.0, 3.0, 3.0, -2.0]])
    np.testing.assert_allclose(sampling_distribution(logits, 1e-308, None, None)[0], [0, 0.5, 0.5, 0])


def test_the_shift_leaves_ordinary_temperatures_unchanged():
    logits = np.random.default_rng(2).normal(size=(2, 100)) * 3 + 1000  # large offsets too
    for t in (0.05, 0.8, 1.0, 5.0):
        np.testing.assert_allclose(sampling_distribution(logits, t, None, None), softmax(logits / t), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("temperature", [5e-324, 1e-308])
def test_tiny_temperature_at_the_api_gives_the_greedy_text(client, temperature):
    greedy = client.predict("ROMEO:", 12, 1.0, 1, 1.0, 0, api_name="/generate")  # top_k 1: greedy
    out = client.predict("ROMEO:", 12, temperature, 50257, 1.0, 7, api_name="/generate")
    assert out["token_ids"] == greedy["token_ids"] and out["completion"] == greedy["completion"]
    assert len(set(out["token_ids"])) > 1 and "!!!!" not in out["completion"]


def test_negative_tiny_temperatures_are_still_refused_with_the_range(client):
    with pytest.raises(AppError) as info:
        client.predict("ROMEO:", 2, -5e-324, 50, 0.95, 1, api_name="/generate")
    assert_message(str(info.value), "temperature", "[0, 5]", "-4.94066e-324")


# --- files, monitoring, deep links ---------------------------------------------------------------

ONNX = artifact_paths()["int8"]  # built by the launched app before any request reaches it


def _file_url(base: str, path: Path) -> str:
    return f"{base}{API}/file={path}"


@pytest.mark.parametrize(
    "range_header, status",
    [
        ("bytes=0-1,5-9", 200),  # two ranges: Gradio answered 500; ignored, the whole file is sent
        ("bytes=1-2-3", 200),  # malformed: ignored
        ("bytes=10-5", 200),  # last < first: invalid, ignored (Gradio sent one byte)
        ("items=0-5", 200),  # a unit nobody knows: ignored, as RFC 9110 requires
        ("bytes=0-9", 206),
        ("bytes=-5", 206),
        ("bytes=99999999999-", 416),
    ],
)
def test_range_headers_never_give_a_500(app_server, range_header, status):
    size = ONNX.stat().st_size
    r = httpx.get(_file_url(app_server.url, ONNX), headers={"Range": range_header}, timeout=120)
    assert r.status_code == status, (range_header, r.status_code, r.text[:200])
    if status == 200:
        assert len(r.content) == size
    if range_header == "bytes=0-9":
        assert r.content == ONNX.read_bytes()[:10]


def test_files_in_the_shared_gradio_cache_of_other_apps_are_not_served(app_server):
    """Every Gradio app on a machine shares one upload folder (GRADIO_TEMP_DIR or /tmp/gradio);
    this app serves only its own artifacts/."""
    from gradio.utils import get_upload_folder

    folder = Path(get_upload_folder()) / f"other-app-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    secret = folder / "notes.txt"
    secret.write_text("another app's file")
    try:
        for url in (_file_url(app_server.url, secret), f"{app_server.url}{API}/file/{secret}"):
            r = httpx.get(url, timeout=30)
            assert r.status_code == 403, (url, r.status_code)
            assert "another app's file" not in r.text
            assert_message(r.json()["detail"], "File not allowed")
    finally:
        secret.unlink()
        folder.rmdir()


@pytest.mark.parametrize("path, status", [("monitoring", 403), ("monitoring/summary", 403), (f"{API}/deep_link?session_hash=x", 404)])
def test_monitoring_and_deep_links_are_off(app_server, path, status):
    r = httpx.get(app_server.url + path, timeout=30)
    assert r.status_code == status
    assert "functions" not in r.text  # the per-endpoint counts /monitoring/summary used to give


# --- request bodies: capped before they are read -------------------------------------------------


def _socket_to(base: str) -> socket.socket:
    host, port = base.split("//")[1].rstrip("/").split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def _read_response(s: socket.socket) -> bytes:
    """The whole answer: the server closes the connection after a 413 (the body was not read)."""
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:  # the unread request body makes the close a reset
            break
        if not chunk:
            break
        data += chunk
    return data


def test_a_50_mb_body_is_refused_before_it_is_read(app_server):
    """Content-Length says 50 MB; only the headers and 64 KB are sent, and the 413 comes at once:
    the server did not wait for (or read) the rest."""
    s = _socket_to(app_server.url)
    try:
        s.sendall(
            f"POST /{API}/call/tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {50 * 2**20}\r\n\r\n".encode()
        )
        s.sendall(b'{"data": ["' + b"x" * 65536)
        t0 = time.perf_counter()
        head = _read_response(s)
        assert time.perf_counter() - t0 < 5  # a hang bound: a server waiting for the rest would wait for ever
    finally:
        s.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert b"limit is 1,048,576 bytes" in head


def test_a_chunked_body_is_cut_off_at_the_cap(app_server):
    s = _socket_to(app_server.url)
    sent = 0
    try:
        s.sendall(
            f"POST /{API}/call/tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        piece = b"x" * 65536
        while sent < 50 * 2**20:
            if select.select([s], [], [], 0)[0]:
                break  # the server answered: stop sending
            s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            sent += len(piece)
            time.sleep(0.001)  # the scenario: a client sending as it can, the server's answer looked for between pieces
        head = _read_response(s)
    finally:
        s.close()
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    # Answered once the cap was passed, long before the 50 MB the client meant to send (what it
    # sent meanwhile includes what sat in the sockets' buffers).
    assert limits.MAX_REQUEST_BYTES < sent < 8 * 2**20, sent


def _worst_case_bodies() -> dict[str, bytes]:
    """The largest valid input of each text box, in the longest JSON encoding a client may use
    (every character escaped: 12 bytes for one outside the BMP, 6 for any other)."""
    astral, bmp_space = "\U0001f600", "\u3000"  # an emoji; the ideographic space (ids may be separated by it)
    ids_text = (("50256" + bmp_space * 5) * 5_000)[: limits.MAX_IDS_TEXT_CHARS]
    inputs = {
        "tokenize": [astral * limits.MAX_TEXT_CHARS],
        "ids": [ids_text],
        "generate": [astral * limits.MAX_PROMPT_CHARS, 512, 5.0, 50257, 1.0, 2**32 - 1],
        "attention": [astral * limits.MAX_ATTENTION_CHARS, 5, 7],
        "context": [astral * 40, astral * limits.MAX_SENTENCE_CHARS, astral * limits.MAX_SENTENCE_CHARS],
    }
    return {
        name: json.dumps({"data": data, "fn_index": 99, "session_hash": "x" * 32, "event_data": None}).encode()
        for name, data in inputs.items()
    }


def test_every_valid_input_fits_well_under_the_cap():
    sizes = {name: len(body) for name, body in _worst_case_bodies().items()}
    assert max(sizes.values()) < limits.MAX_REQUEST_BYTES / 2, sizes


def test_the_largest_valid_inputs_are_answered_not_refused(app_server, client):
    base = app_server.url
    text = "\U0001f600" * limits.MAX_TEXT_CHARS
    event, data = call_raw(base, "tokenize", json.dumps({"data": [text]}))  # escaped: 240 KB
    assert event == "complete" and data[0]["n_characters"] == limits.MAX_TEXT_CHARS
    ids_text = ("50256" + "\u3000" * 5) * 5_000
    status, message = join(base, {"fn_index": fn_index(base, "ui_decode"), "data": [ids_text]})
    assert status == 200 and message["success"], message
    assert message["output"]["data"][0] == "<|endoftext|>" * 5_000


# --- results nobody reads -------------------------------------------------------------------------


class _Event:
    pass


def _fake_queue(sessions: dict[str, tuple[list, bool]]) -> Any:
    """A stand-in for Gradio's queue: session -> (unread messages, still running)."""
    queue = _Event()
    queue.pending_messages_per_session, queue.pending_event_ids_session, queue.event_ids_to_events = {}, {}, {}
    for session, (unread, running) in sessions.items():
        messages: asyncio.Queue = asyncio.Queue()
        for message in unread:
            messages.put_nowait(message)
        queue.pending_messages_per_session[session] = messages
        queue.pending_event_ids_session[session] = {f"{session}-event"}
        if running:
            queue.event_ids_to_events[f"{session}-event"] = _Event()
    return queue


def test_unread_results_are_dropped_after_the_wait():
    queue = _fake_queue({"read": ([], False), "running": (["a", "b"], True), **{f"unread{i}": ([f"r{i}"], False) for i in range(3)}})
    seen: dict = {}
    assert unread.drop_unread_results(queue, seen, now=0.0) == []
    # Someone reads unread0 meanwhile (and a new message comes): its wait starts again.
    queue.pending_messages_per_session["unread0"].get_nowait()
    queue.pending_messages_per_session["unread0"].put_nowait("later")
    dropped = unread.drop_unread_results(queue, seen, now=unread.UNREAD_RESULT_WAIT_S + 1)
    assert sorted(dropped) == ["unread1", "unread2"]
    assert {"read", "running", "unread0"} <= set(queue.pending_messages_per_session)
    assert "unread1" not in queue.pending_event_ids_session


def test_sessions_whose_results_were_all_read_leave_no_entry():
    queue = _fake_queue({"read": ([], False), "running": (["a"], True)})
    queue.pending_event_ids_session["read"] = set()  # what Gradio leaves once the last result is read
    unread.drop_unread_results(queue, {}, now=0.0)
    assert "read" not in queue.pending_event_ids_session and "running" in queue.pending_event_ids_session


def test_big_unread_results_are_dropped_oldest_first_past_the_budget():
    big = _Event()
    big.output = {"data": [[[0.5] * 1024] * 1024]}  # like a 1024 x 1024 table
    size = unread.approx_bytes(big)
    assert 30e6 < size < 45e6  # a 1024 x 1024 table: ~34 MB of Python objects
    fit = unread.MAX_UNREAD_BYTES // size
    queue = _fake_queue({f"big{i}": ([big], False) for i in range(fit + 3)})
    dropped = unread.drop_unread_results(queue, {}, now=0.0)
    assert dropped == ["big0", "big1", "big2"]  # the oldest first, until the rest fits
    assert len(queue.pending_messages_per_session) == fit


def test_many_small_unread_results_are_kept():
    """Sixteen gradio_client users whose light calls finish before they open their stream must
    all get their answers."""
    queue = _fake_queue({f"client{i}": ([{"data": [{"ids": [31373, 2506]}]}], False) for i in range(200)})
    assert unread.drop_unread_results(queue, {}, now=0.0) == []


def test_big_results_nobody_reads_are_dropped_and_a_late_reader_told_why(app_server):
    """Six of the largest tables (the first 512 of 1024 x 1024, ~17 MB of Python objects each)
    nobody reads, then the newest one read: the others (~85 MB) pass the budget, so the oldest
    go, and whoever comes for one late is told why."""
    base = app_server.url
    posted = []
    for _ in range(6):
        # One at a time (the tables run one by one): posted together, the last would wait in the
        # queue past the reader grace on a loaded machine and be stopped unrun, not kept unread.
        wait_for(lambda: httpx.get(f"{base}{API}/queue/status", timeout=30).json()["queue_size"] == 0, 60, message="the queue to empty")
        r = httpx.post(f"{base}{API}/call/positional_encoding", json={"data": [1024, 1024, 10000]}, timeout=30)
        posted.append(r.json()["event_id"])
    newest = httpx.get(f"{base}{API}/call/positional_encoding/{posted[-1]}", timeout=120)  # the others ran before it
    assert "event: complete" in newest.text
    # The scenario: a reader who comes late, after a few sweeps (there is no state to poll from
    # outside the app: asking for the result earlier would read it).
    time.sleep(3 * serving.SWEEP_EVERY_S)
    late = httpx.get(f"{base}{API}/call/positional_encoding/{posted[0]}", timeout=30)
    assert late.status_code == 404
    assert_message(late.json()["detail"], "dropped unread", f"waits {unread.UNREAD_RESULT_WAIT_S:g} s", "POST again")
    kept = httpx.get(f"{base}{API}/call/positional_encoding/{posted[-2]}", timeout=120)
    assert kept.status_code == 200 and "event: complete" in kept.text, kept.text[-300:]


# --- what a session keeps -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_demo() -> gr.Blocks:
    with gr.Blocks() as demo:
        box = gr.Textbox()
        state = gr.State(None)
        out = gr.Textbox()
        box.submit(lambda text: (text, text), [box], [out, state])
    return demo


def _ids(demo: gr.Blocks) -> tuple[int, int]:
    box = next(b for b in demo.blocks.values() if isinstance(b, gr.Textbox))
    state = next(b for b in demo.blocks.values() if isinstance(b, gr.State))
    return box._id, state._id


def test_a_session_keeps_no_copy_of_inputs_and_outputs(small_demo):
    holder = gradio_internals.LeanStateHolder()
    holder.set_blocks(small_demo)
    box, state = _ids(small_demo)
    session = holder["a"]
    assert isinstance(session, gradio_internals.LeanSessionState) and session.config_values == {}
    session._update_value_in_config(box, "x" * 5_000_000)  # what Gradio does with every input
    session[box] = small_demo.blocks[box]
    assert session.config_values == {} and list(session.components) == []
    session[state] = "a result"
    assert session[state] == "a result"


def test_sessions_are_bounded_by_gradios_capacity(small_demo):
    holder = gradio_internals.LeanStateHolder()
    holder.set_blocks(small_demo)
    holder.capacity = 50  # launch(state_session_capacity=...) sets it
    _, state = _ids(small_demo)
    for i in range(80):
        holder[f"s{i}"][state] = f"result {i}"
    assert list(holder.session_data) == [f"s{i}" for i in range(30, 80)]  # the most recently used


def test_results_are_bounded_whatever_the_sessions():
    store = sessions.ResultStore(capacity=5)
    keys = [store.put(f"result {i}") for i in range(30)]
    assert len(store) == 5
    assert store.get(keys[0]) is None and store.get(keys[-1]) == "result 29"  # dropped: the oldest
    store.get(keys[25])  # read: now the most recent
    store.put("one more")
    assert store.get(keys[25]) == "result 25" and store.get(keys[26]) is None


def test_a_sessions_new_result_replaces_its_last():
    """A session's key (what its state holds) is reused: one entry a session, however many runs."""
    store = sessions.ResultStore(capacity=5)
    state = store.state()

    def run(prompt):
        return f"html of {prompt}", f"result of {prompt}"

    wired = store.through(run, inputs=[gr.Textbox(), state], outputs=[gr.HTML(), state], state=state).fn
    html, key = wired("a", None)
    for prompt in "bcdefgh":
        html, again = wired(prompt, key)
        assert again == key
    assert len(store) == 1 and store.get(key) == "result of h"
    assert wired("other", None)[1] != key  # another session: a key of its own


def test_results_reach_handlers_as_values_and_generators_close_at_once():
    store = sessions.ResultStore()
    closed = []

    def stream(n):
        try:
            for i in range(n):
                yield f"update {i}", {"tokens": i}
        finally:
            closed.append(True)

    def pick(result, step):
        return None if result is None else result["tokens"] + step

    state, n, step, out = store.state(), gr.Number(), gr.Number(), gr.Textbox()
    wired = store.through(stream, inputs=[n, state], outputs=[out, state], state=state).fn
    updates = list(wired(3, None))
    keys = {key for _, key in updates}
    assert len(keys) == 1 and store.get(keys.pop()) == {"tokens": 2}  # one key, the last update
    picked = store.through(pick, inputs=[state, step], outputs=[out], state=state, read="result").fn
    assert picked(updates[-1][1], 10) == 12
    assert picked(None, 10) is None  # no run yet in this session
    partial = wired(1000, None)
    next(partial)
    partial.close()  # Gradio cancels the stream
    assert closed == [True, True]


def test_a_pinned_default_is_shared_not_copied():
    """Attention's example stages (~1 MB): every session starts from the one pinned copy; a
    session's own run gets a key of its own and never overwrites the default."""
    store = sessions.ResultStore(capacity=2)
    state = store.state(["example stages"])
    default = state.value
    assert store.get(default) == ["example stages"]
    wired = store.through(lambda text: ("figure", [text]), inputs=[gr.Textbox(), state], outputs=[gr.Plot(), state], state=state).fn
    _, key = wired("mine", default)
    assert key != default and store.get(key) == ["mine"]
    for text in "abc":
        store.put(text)
    assert store.get(default) == ["example stages"]  # pinned: never dropped
    state.delete_callback(default)  # what Gradio calls when it deletes a session's state
    assert store.get(default) == ["example stages"]
    state.delete_callback(key)
    assert store.get(key) is None


# --- the soak test ---------------------------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _soak_requests(base: str) -> list:
    """A few hundred requests, each in a new session, of every kind the app meets."""
    from gradio_client import Client

    names = ("ui_tokenize", "ui_positional", "ui_attention", "ui_stage", "ui_generate", "ui_pick_token", "ui_decode")
    ids = {name: fn_index(base, name) for name in names}
    long_text = ("ROMEO: But soft, what light through yonder window breaks? " * 400)[: limits.MAX_TEXT_CHARS]
    five_mb = json.dumps({"data": ["x" * 5_000_000]}).encode()

    def raw(endpoint, args):
        return lambda: call_raw(base, endpoint, {"data": args})

    def unread(endpoint, args):
        def post_only():
            return httpx.post(f"{base}{API}/call/{endpoint}", json={"data": args}, timeout=60).status_code

        post_only.unread = True  # left out of the warm-up: its result would still be held at the start
        return post_only

    def page(name, args):
        return lambda: join(base, {"fn_index": ids[name], "data": args})

    def refused(body):
        return lambda: httpx.post(f"{base}{API}/call/tokenize", content=body, headers={"content-type": "application/json"}, timeout=60).status_code

    def new_client():
        return Client(base, verbose=False).predict("a new client", api_name="/tokenize")["n_tokens"]

    kinds = [
        (6, raw("positional_encoding", [1024, 1024, 10000])),  # ~17 MB of Python objects each (the table cap)
        (4, unread("positional_encoding", [1024, 1024, 10000])),
        (30, raw("tokenize", [long_text])),
        (20, unread("tokenize", [long_text])),
        (90, raw("tokenize", ["hello everyone"])),
        (30, refused(five_mb)),  # 413
        (30, raw("embedding_arithmetic", ["king - man + woman", 10])),
        (30, raw("attention", ["the king spoke to the queen of the land", 2, 3])),
        (10, raw("generate", ["ROMEO:", 16, 0.8, 50, 0.95, 1])),
        (30, raw("tokenize", [])),  # malformed: a message
        (20, page("ui_tokenize", [long_text, True, False, len(long_text)])),
        (3, page("ui_positional", [512, 1024, 10000, "2, 4, 6, 8"])),  # the slider's largest d_model
        (3, page("ui_positional", [1024, 1024, 10000, "2, 4, 6, 8"])),  # past it: Gradio's slider says so
        (20, page("ui_attention", ["the king spoke to the queen of the land", 1, 1, None])),
        (20, page("ui_stage", [None, 2])),  # a new session reads the pinned default stages
        (10, page("ui_pick_token", [None])),  # no event data: a message
        (6, page("ui_generate", ["ROMEO:", 16, 0.8, 50, 0.95, 1, 2, "full", None])),
        (20, page("ui_decode", [", ".join(["31373"] * 5_000)])),
        (10, new_client),
    ]
    return [request for count, request in kinds for _ in range(count)]


@pytest.mark.slow
def test_soak_memory_settles_whatever_the_traffic(tmp_path):
    """Its own app, so the numbers are its own. A warm-up of every kind first (first-use
    allocations), then a few hundred requests, four at a time; then the RSS must settle within
    200 MB of where it started, and the app must still answer."""
    from benchmarks.app_server import launch, stop

    server = launch(tmp_path / "soak.log")
    try:
        requests = _soak_requests(server.url)
        # Warm-up: each kind four times, four at a time, so worker threads, their allocator
        # arenas and first-use buffers exist before the measurement starts.
        kinds = [r for r in {id(r): r for r in requests}.values() if not getattr(r, "unread", False)]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda r: r(), [r for r in kinds for _ in range(4)]))
        time.sleep(2 * unread.TRIM_EVERY_S)
        before = _rss_mb(server.process.pid)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda r: r(), requests))
        elapsed = time.perf_counter() - t0
        peak_after_run = _rss_mb(server.process.pid)
        time.sleep(unread.UNREAD_RESULT_WAIT_S + unread.TRIM_EVERY_S + 2)
        after = _rss_mb(server.process.pid)
        print(
            f"\nsoak: {len(requests)} requests in {elapsed:.0f} s; RSS {before:.0f} MB before, "
            f"{peak_after_run:.0f} MB right after, {after:.0f} MB settled (growth {after - before:+.0f} MB)"
        )
        assert results.count(413) == 30  # the 5 MB bodies
        assert after - before <= 200, f"RSS grew from {before:.0f} MB to {after:.0f} MB"
        event, data = call_raw(server.url, "tokenize", {"data": ["still serving"]})
        assert event == "complete" and data[0]["n_tokens"] == 2
        log = server.log()
        assert "Traceback" not in log, log[-3000:]
    finally:
        stop(server)
