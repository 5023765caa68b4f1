"""The app under load, on the session's launched app: a cancelled or disconnected stream frees
its generation slot, a flood of generations is answered "busy" while the light tabs keep
serving, and (slow) 16 clients at once get every answer (benchmarks/load.py).

Every generation handler (limits.GENERATION_CONCURRENCY, 116: 16 decode and 100 take turns in the
decoding loop's line) is taken at once, by long generations sent together and not waited for one
by one (in turn, the last of 116 would get its first token only after the others' slices); each
test that takes them leaves the app idle before it ends (polled through ``/expected-wait``), so
the tests after it meet an app with nothing running."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from gradio_client.utils import QueueError, Status

from benchmarks.app_server import free_port
from conftest import wait_for
from playground.limits import GENERATION_CONCURRENCY, GENERATIONS_PER_VISITOR, MAX_WAITING_GENERATIONS

LONG = ("ROMEO:", 512, 0.8, 50, 0.95)  # the most a generation may ask for: none ends while a check runs
PROMPT_START_S = 8.0  # a freed slot must take the next generation within this (a busy box included)
# The probes and the visitors whose order is checked generate in full precision, a decoding loop of
# its own (the page's default; the API's "auto" is the 8-bit file's loop, which the long
# generations fill): what they wait for is a handler, not their turn behind 116 long generations.
FULL = "full"


def _from(source: str) -> httpx.HTTPTransport:
    """A transport from loopback address ``source``. Plain HTTP: without ``verify=False`` each
    client loads the system's certificates, 0.15 s of CPU on a loaded machine, 18 s for 116."""
    return httpx.HTTPTransport(local_address=source, verify=False)


def _source(i: int) -> str:
    """The i-th load client's own loopback address: each is a visitor of its own, as the users of
    a class are (one visitor holds at most a few generations: serving/admission.py)."""
    return f"127.0.1.{i + 1}"


def _expected(base: str) -> dict:
    """What ``/expected-wait`` says of a generation of the API's loop asked for now."""
    r = httpx.get(f"{base}expected-wait", params={"precision": "auto"}, timeout=30, verify=False)
    assert r.status_code == 200, r.text
    return r.json()


def _handlers_busy(base: str) -> int:
    return _expected(base)["line"]["running"]


def _take_every_handler(app_server, taken: int = 0) -> list:
    """Long generations from addresses of their own until every generation handler runs one
    (``taken``: those already running), all sent at once; returned once the app says so."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(16) as pool:
        streams = list(pool.map(lambda i: _open_raw_stream(app_server, 100 + i, _source(i), first_token=False),
                                range(GENERATION_CONCURRENCY - taken)))
    wait_for(lambda: _handlers_busy(app_server.url) >= GENERATION_CONCURRENCY, 120,
             message=lambda: f"every generation handler to run (the app says {_expected(app_server.url)})")
    return streams


def _leave_idle(base: str) -> None:
    """Wait until the app runs no generation and none waits, in Gradio's line or the loop's."""
    def idle() -> bool:
        e = _expected(base)
        return e["line"]["running"] == 0 and e["line"]["waiting"] == 0 and (
            e["loop"] is None or e["loop"]["running_rows"] == e["loop"]["waiting"] == 0)

    wait_for(idle, 120, 0.2, message=lambda: f"the app to be idle again (it says {_expected(base)})")


def _fill_slots_with_client_jobs(app_server, client) -> tuple[list, list]:
    """Every generation slot taken by a long job: ``client``'s share of GENERATIONS_PER_VISITOR
    gradio_client jobs (its visitor's cap), streaming, then the rest hand-written streams from
    addresses of their own."""
    jobs = [client.submit(*LONG, seed, api_name="/generate") for seed in range(GENERATIONS_PER_VISITOR)]
    wait_for(lambda: all(job.outputs() for job in jobs), 120, message="the client's long generations to stream")
    return jobs, _take_every_handler(app_server, taken=len(jobs))


def _close(streams: list) -> None:
    for http, response, _ in streams:
        response.close()
        http.close()


def _generate_url(app_server) -> str:
    return app_server.url + "gradio_api/call/generate"


def _open_raw_stream(app_server, seed: int, source: str = "127.0.0.1", first_token: bool = True, tokens: int = LONG[1],
                     ) -> tuple[httpx.Client, httpx.Response, Iterator[str]]:
    """A hand-written client from address ``source``: POST the call (of ``tokens`` tokens), GET its
    event stream (and with ``first_token``, read until tokens flow). The line iterator is
    returned to keep it alive: dropping it would close the connection."""
    http = httpx.Client(timeout=120, transport=_from(source))
    r = http.post(_generate_url(app_server), json={"data": [LONG[0], tokens, *LONG[2:], seed]})
    assert r.status_code == 200, r.text
    response = http.send(http.build_request("GET", f"{_generate_url(app_server)}/{r.json()['event_id']}"), stream=True)
    lines = response.iter_lines()
    if not first_token:
        return http, response, lines
    for line in lines:
        if line.startswith("event: generating"):
            return http, response, lines
    raise AssertionError("the stream ended before any token")


@pytest.fixture(scope="module")
def full_precision_loop(app_server):
    """The full-precision file's loop open before any test takes every handler (its first use
    opens its engine: seconds that are no handler's)."""
    assert _post_from(app_server, "127.0.3.9", 0, precision=FULL).status_code == 200
    wait_for(lambda: _expected_full(app_server.url)["loop"] is not None, 120, message="the full-precision loop to open")
    _leave_idle(app_server.url)


def _expected_full(base: str) -> dict:
    return httpx.get(f"{base}expected-wait", params={"precision": FULL}, timeout=30, verify=False).json()


def _waiting(base: str) -> int:
    """Requests the app's queue holds waiting for a slot (Gradio's ``queue/status``)."""
    return httpx.get(f"{base}gradio_api/queue/status", timeout=30, verify=False).json()["queue_size"]


def _probe_waits_then_starts(base: str, free_slots) -> float:
    """Submit a short generation while every slot is taken, check that the queue holds it
    waiting, free the slots, and return how long it then took to stream its first update.

    The probe comes from a client and an address of its own: Gradio's ``/cancel`` stops every
    task of the cancelled job's session and endpoint (``<session>_<fn_index>``), so cancelling
    the slots' jobs one by one from the probe's own client stopped the probe too when it had
    already started (its result then never came: a CI run hung here)."""
    from concurrent.futures import ThreadPoolExecutor

    first: list[float] = []

    def probe() -> dict:
        with httpx.Client(timeout=120, transport=_from("127.0.3.1")) as http:
            r = http.post(f"{base}gradio_api/call/generate", json={"data": ["ROMEO:", 4, 0.8, 50, 0.95, 1, FULL]})
            assert r.status_code == 200, r.text
            with http.stream("GET", f"{base}gradio_api/call/generate/{r.json()['event_id']}") as stream:
                kind = None
                for line in stream.iter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                        if kind in ("generating", "complete") and not first:
                            first.append(time.perf_counter())
                    elif line.startswith("data: ") and kind == "complete":
                        return json.loads(line[6:])[0]
        raise AssertionError("the probe's stream ended without a result")

    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(probe)
        wait_for(lambda: _waiting(base) >= 1 or bool(first), 60, message="the probe to wait in the queue")
        assert not first, "the probe ran although every slot was taken: the test proves nothing"
        t0 = time.perf_counter()
        free_slots()
        wait_for(lambda: bool(first), 120, message="the probe to start")
        assert result.result(timeout=120)["finished"] is True
    return first[0] - t0


def test_a_cancelled_stream_frees_its_slot(app_server, client, full_precision_loop):
    jobs, streams = _fill_slots_with_client_jobs(app_server, client)

    def cancel() -> None:
        for job in jobs:
            assert not job.done()
            job.cancel()

    try:
        started = _probe_waits_then_starts(app_server.url, cancel)
    finally:
        _close(streams)
        _leave_idle(app_server.url)
    print(f"a new generation started {started:.2f} s after cancelling {len(jobs)} streams")
    assert started < PROMPT_START_S
    for job in jobs:
        assert job.status().code == Status.CANCELLED
        assert job.outputs()[-1]["new_tokens"] < LONG[1]


def test_a_client_that_disconnects_mid_stream_frees_its_slot(app_server, full_precision_loop):
    streams = _take_every_handler(app_server)
    try:
        started = _probe_waits_then_starts(app_server.url, lambda: _close(streams))
    finally:
        _close(streams)
        _leave_idle(app_server.url)
    print(f"a new generation started {started:.2f} s after {len(streams)} clients disconnected")
    assert started < PROMPT_START_S


# --- the same flood on a small app served in this process: every slot held until the test lets go --

SMALL_SLOTS, SMALL_WAITING = 2, 3


@pytest.fixture(scope="module")
def small_app() -> Iterator[tuple[str, threading.Event]]:
    """(URL, release) of an app served in this process with the app's serving (harden,
    launch_options): a "generate" group of SMALL_SLOTS slots and SMALL_WAITING waiting places
    whose handler holds its slot until ``release`` is set, and a light /tokenize. Nothing here
    ends on its own time: whatever the machine's load, the slots stay taken while the test
    floods the line."""
    import gradio as gr

    from playground.ui import serving

    release = threading.Event()

    def generate(prompt: str) -> str:
        release.wait(120)
        return prompt.upper()

    with gr.Blocks(analytics_enabled=False) as demo:
        text, out = gr.Textbox(), gr.Textbox()
        text.submit(generate, [text], [out], api_name="generate", concurrency_limit=SMALL_SLOTS, concurrency_id="generate")
        out.submit(lambda t: t[::-1], [out], [text], api_name="tokenize", concurrency_limit=4, concurrency_id="light")
    demo.queue(default_concurrency_limit=4)
    serving.harden(demo, max_waiting={"generate": SMALL_WAITING}, per_visitor={"generate": 4})
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **serving.launch_options(demo))
    try:
        yield f"http://127.0.0.1:{port}/", release
    finally:
        release.set()
        demo.close()


def _call_and_hold(base: str, source: str, endpoint: str = "generate", data: str = "x") -> tuple[httpx.Client, httpx.Response, httpx.Response | None]:
    """A call from ``source`` and its result stream, opened right after and left unread:
    ``(client, the POST's answer, the open stream)`` (no stream when the call was refused)."""
    http = httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=source))
    answer = http.post(f"{base}gradio_api/call/{endpoint}", json={"data": [data]})
    if answer.status_code != 200:
        return http, answer, None
    return http, answer, http.send(http.build_request("GET", f"{base}gradio_api/call/{endpoint}/{answer.json()['event_id']}"), stream=True)


def test_a_full_line_of_generations_is_told_busy_while_light_calls_serve(small_app):
    """The flood's wiring, deterministic: the slots taken, the waiting places filled (each from an
    address of its own), the next generation is 503 with a Retry-After and "try again", a light
    call is answered meanwhile, and once the slots let go every waiting one is served and a new
    one accepted. (The launched app's own flood, with real generations holding the slots for as
    long as they take, is the slow ``test_a_flood_of_generations_is_told_busy_while_light_tabs_serve``.)"""
    base, release = small_app
    held = [_call_and_hold(base, f"127.0.5.{i + 1}", data=f"p{i}") for i in range(SMALL_SLOTS + SMALL_WAITING)]
    try:
        assert [answer.status_code for _, answer, _ in held] == [200] * (SMALL_SLOTS + SMALL_WAITING)
        wait_for(lambda: _waiting(base) == SMALL_WAITING, 30, message=f"{SMALL_WAITING} generations to wait")
        with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.5.200")) as http:
            refused = http.post(f"{base}gradio_api/call/generate", json={"data": ["late"]})
        assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1, refused.text
        assert "try again" in refused.json()["detail"]
        light = _call_and_hold(base, "127.0.5.201", "tokenize", "abc")
        assert light[1].status_code == 200
        assert '"cba"' in light[2].read().decode()  # answered while every slot is taken
        _close([light])
        release.set()
        outputs = [stream.read().decode() for _, _, stream in held]  # every one that waited is served
        assert [f'"P{i}"' in out for i, out in enumerate(outputs)] == [True] * len(held), outputs
        late = _call_and_hold(base, "127.0.5.200", data="again")
        assert late[1].status_code == 200 and '"AGAIN"' in late[2].read().decode()
        _close([late])
    finally:
        release.set()
        _close([h for h in held if h[2] is not None])


@pytest.mark.slow  # real generations hold the slots: they must outlast the flood, minutes on a busy 2-core machine
def test_a_flood_of_generations_is_told_busy_while_light_tabs_serve(app_server, client, full_precision_loop):
    streams = _take_every_handler(app_server)
    try:
        # Fill the generations' waiting places with 1-token calls, each from an address of its
        # own (raw HTTP: no client thread each; one address holds only a few), their streams
        # open: sending 100 takes seconds on a loaded machine, and the app stops a call nobody
        # reads 5 s after it came (the reader grace), which would free its place.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(16) as pool:
            streams += pool.map(lambda seed: _open_raw_stream(app_server, seed, f"127.0.2.{seed + 1}", first_token=False,
                                                              tokens=1), range(MAX_WAITING_GENERATIONS))
        assert _waiting(app_server.url) >= MAX_WAITING_GENERATIONS
        # what a page asking now is told: the line, and the browser offered at once
        said = _expected(app_server.url)
        assert said["offer_browser"] is True and said["line"]["waiting"] >= MAX_WAITING_GENERATIONS, said
        assert f"all {GENERATION_CONCURRENCY} of its generation handlers are busy" in said["words"], said
        assert said["expected_wait_s"] is None or said["expected_wait_s"] > said["offer_after_s"], said
        refused = _post_from(app_server, "127.0.2.250", 0)
        assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
        assert "try again" in refused.json()["detail"]
        with pytest.raises(QueueError, match="Please try again"):
            client.predict("ROMEO:", 1, 0.8, 50, 0.95, 0, api_name="/generate")
        # The light tabs share the queue but not the generations' places in it.
        assert client.predict("hello everyone", api_name="/tokenize")["ids"] == [31373, 2506]
    finally:
        _close(streams)
    # Once the waiting ones are served, generations are accepted again (polled: the probes that
    # find the line still full on a busy machine are told busy, and stopped unread in 5 s).
    wait_for(lambda: _accepted(app_server), 180, message="the waiting generations to drain")
    _leave_idle(app_server.url)
    done: list[dict] = []

    def generated() -> bool:
        try:
            done.append(client.predict("ROMEO:", 2, 0.8, 50, 0.95, 1, api_name="/generate"))
        except QueueError:
            return False
        return True

    wait_for(generated, 120, message="a generation to be accepted again")
    assert done[-1]["finished"] is True and done[-1]["new_tokens"] == 2
    _leave_idle(app_server.url)


def _post_from(app_server, source: str, seed: int, tokens: int = 1, precision: str = "auto") -> httpx.Response:
    with httpx.Client(timeout=30, transport=_from(source)) as http:
        return http.post(_generate_url(app_server), json={"data": ["ROMEO:", tokens, 0.8, 50, 0.95, seed, precision]})


def _accepted(app_server) -> bool:
    return _post_from(app_server, "127.0.2.251", 0).status_code == 200


def test_one_visitor_gets_a_few_generations_and_is_told_when_to_try_again(app_server):
    """Reached directly, the visitor is the socket: a forged X-Forwarded-For on each request
    changes no limit. GENERATIONS_PER_VISITOR long ones are accepted, the next is 429 with a
    Retry-After and a message saying why; another address is still accepted. (Nobody reads
    them: the app stops them within its reader grace.)"""
    with httpx.Client(timeout=30, transport=_from("127.0.4.1")) as http:
        answers = [http.post(_generate_url(app_server), headers={"X-Forwarded-For": f"203.0.113.{i + 1}"},
                             json={"data": [*LONG, i]}) for i in range(GENERATIONS_PER_VISITOR + 1)]
    assert [a.status_code for a in answers] == [200] * GENERATIONS_PER_VISITOR + [429], [a.text for a in answers]
    refused = answers[-1]
    assert int(refused.headers["retry-after"]) >= 1
    assert f"at most {GENERATIONS_PER_VISITOR} per visitor" in refused.json()["detail"]
    assert "try again" in refused.json()["detail"]
    assert _post_from(app_server, "127.0.4.2", 0).status_code == 200  # another visitor: its own share
    _leave_idle(app_server.url)


@pytest.fixture(scope="module")
def one_address_app(tmp_path_factory):
    """An app whose per-visitor shares are raised as for a load generator: 16 users from one
    address (benchmarks/load.py's LOAD_ENV)."""
    from benchmarks.app_server import launch, stop
    from benchmarks.load import LOAD_ENV

    server = launch(tmp_path_factory.mktemp("one-address") / "app.log", extra_env=LOAD_ENV)
    yield server
    stop(server)


@pytest.mark.slow
def test_sixteen_clients_at_once_get_every_answer(one_address_app):
    """16 users at once, each alternating a light call and a 12-token generation: every call is
    answered, and a seeded generation gives the same tokens in the crowd (batched with the others)
    as alone. The latencies are printed, not asserted: on a shared 2-core machine the load
    generator's own 16 threads take the cores the app would use (``python -m benchmarks.load
    --table`` is the measurement)."""
    from benchmarks.load import generation_args, run_load

    from gradio_client import Client

    client = Client(one_address_app.url, verbose=False)
    report = run_load(one_address_app.url, clients=16, generations=10, new_tokens=12, time_limit_s=900)
    print("\n" + report.summary())
    assert not report.failures, report.summary()
    assert len(report.generation_s) == 160 and len(report.light_s) == 160
    assert sorted(report.token_ids) == sorted(c * 100 + i for c in range(16) for i in range(10))
    assert all(len(ids) == 12 for ids in report.token_ids.values())
    for seed in (0, 507, 1509):  # first, middle and last clients' generations, now one at a time
        alone = client.predict(*generation_args(seed, 12), api_name="/generate")["token_ids"]
        assert report.token_ids[seed] == alone, f"seed {seed} changed in the crowd"


@pytest.mark.parametrize("kind", ["gradio_client", "sse"])
def test_the_load_tables_clients_count_what_they_received(app_server, client, kind):
    """The load table of docs/export.md (``benchmarks.load --table``) in small: 2 users of each client kind, 2
    generations of 5 tokens each: every token counted, each time to first token inside its
    latency, the /tokenize prober answered, and the event-stream client reads what gradio_client
    reads (the same seeded text)."""
    from benchmarks.load import SSEUser, TABLE_PROMPT, TABLE_SETTINGS, run_phase

    phase = run_phase(app_server.url, clients=2, generations=2, tokens=5, kind=kind)
    assert not phase.failures, phase.failures
    assert phase.tokens == 2 * 2 * 5 and len(phase.latency_s) == 4
    assert all(0 < first <= total for first, total in zip(phase.ttft_s, phase.latency_s))
    assert phase.light_s and phase.tokens_per_s > 0
    args = [TABLE_PROMPT, 5, *TABLE_SETTINGS, 7]
    assert SSEUser(app_server.url).call("generate", args)["token_ids"] == client.predict(*args, api_name="/generate")["token_ids"]


@pytest.mark.slow
def test_light_tabs_stay_fast_while_every_tabs_heaviest_request_loops(app_server):
    """The busy Space's bar: 4 clients loop the heaviest request of every tab (the 1024 x 1024
    positional table, 64-token passes, a 512-token generation, a training run...) and 4 more
    reload the page, for a minute; a visitor on the Tokenization tab, in a process of its own,
    gets ``/tokenize`` answered within 0.5 s at the 95th percentile, and nothing fails."""
    from benchmarks.load import heaviest_requests, run_mix

    mix = run_mix(app_server.url, clients=4, seconds=60, reloaders=4)
    print("\n" + mix.summary())
    assert not mix.failures, mix.summary()
    assert set(mix.answered) == {name for name, _ in heaviest_requests()}, "some tab's request never ran: no load"
    assert mix.reloads > 0 and len(mix.light_s) >= 100
    assert mix.percentile(95) <= 0.5, mix.summary()


def test_waiting_generations_are_served_visitors_in_turn(app_server, full_precision_loop):
    """Every slot taken; one visitor queues 4 generations, then another visitor 1. Two slots free:
    the first visitor's first and the second visitor's one start (visitors in turn), not the first
    visitor's first two (first come, first served would make the second visitor wait for a third
    slot, here a long generation's end)."""
    import threading

    base = app_server.url
    streams = _take_every_handler(app_server)
    started: dict[str, float] = {}

    def follow(name: str, source: str, seed: int) -> None:
        tokens = 8 if name == "second" else 64  # the first's long enough to hold its slot during the check
        with httpx.Client(timeout=120, transport=_from(source)) as http:
            r = http.post(_generate_url(app_server), json={"data": ["ROMEO:", tokens, 0.8, 50, 0.95, seed, FULL]})
            assert r.status_code == 200, r.text
            with http.stream("GET", f"{_generate_url(app_server)}/{r.json()['event_id']}") as stream:
                for line in stream.iter_lines():
                    if line.startswith("event: generating") or line.startswith("event: complete"):
                        started.setdefault(name, time.perf_counter())

    threads = []
    try:
        for i in range(GENERATIONS_PER_VISITOR):
            threads.append(threading.Thread(target=follow, args=(f"first{i}", "127.0.8.1", i), daemon=True))
            threads[-1].start()
            wait_for(lambda: _waiting(base) >= i + 1, 30, message="the first visitor's generation to wait")
        threads.append(threading.Thread(target=follow, args=("second", "127.0.8.2", 9), daemon=True))
        threads[-1].start()
        wait_for(lambda: _waiting(base) >= GENERATIONS_PER_VISITOR + 1, 30, message="the second visitor's generation to wait")
        assert not started, f"something started while every slot was taken: {started}"
        _close(streams[:2])  # two slots free
        wait_for(lambda: "second" in started, 60, message="the second visitor's generation to start")
        firsts = [n for n in started if n.startswith("first")]
        assert len(firsts) <= 1, f"the first visitor's backlog went before the second visitor: {sorted(started)}"
    finally:
        _close(streams)
        for t in threads:
            t.join(timeout=60)
        _leave_idle(base)


def test_an_idle_app_expects_no_wait_and_a_wrong_precision_is_told_what_is_accepted(app_server):
    _leave_idle(app_server.url)
    said = _expected(app_server.url)
    assert said["expected_wait_s"] < said["offer_after_s"] and said["offer_browser"] is False, said
    r = httpx.get(f"{app_server.url}expected-wait", params={"precision": "fp16"}, timeout=30, verify=False)
    assert r.status_code == 400 and r.json()["detail"] == "precision must be one of full, 8-bit, auto, not 'fp16'"
    assert r.headers["cache-control"] == "no-store"
    # a heavy pass's wait (Inside the model's Run): a handler free, nothing offered; a wrong tab is told the accepted ones
    heavy = httpx.get(f"{app_server.url}expected-wait", params={"tab": "inside"}, timeout=30, verify=False).json()
    assert heavy["tab"] == "inside" and heavy["offer_browser"] is False and heavy["line"]["ahead"] == 0, heavy
    r = httpx.get(f"{app_server.url}expected-wait", params={"tab": "learn"}, timeout=30, verify=False)
    assert r.status_code == 400 and r.json()["detail"] == "tab must be one of generation, inside, not 'learn'"
