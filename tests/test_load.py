"""The app under load, on the session's launched app: a cancelled or disconnected stream frees
its generation slot, a flood of generations is answered "busy" while the light tabs keep
serving, and (slow) 16 clients at once get every answer (benchmarks/load.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from gradio_client.utils import QueueError, Status

from playground.ui.common import GENERATION_CONCURRENCY, MAX_WAITING_GENERATIONS

LONG = ("ROMEO:", 512, 0.8, 50, 0.95)  # the most a generation may ask for: ~190 made by the time the checks cancel them
PROMPT_START_S = 8.0  # a freed slot must take the next generation within this (a busy box included)


def _wait(predicate, timeout: float, what: str) -> float:
    t0 = time.perf_counter()
    while not predicate():
        if time.perf_counter() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
    return time.perf_counter() - t0


def _fill_slots_with_client_jobs(client) -> list:
    # All submitted before any is waited for: filled one by one, the first had ~440 of its 512
    # tokens by the time the probe's check was done (the batched loop decodes 16 rows at once).
    jobs = [client.submit(*LONG, seed, api_name="/generate") for seed in range(GENERATION_CONCURRENCY)]
    _wait(lambda: all(job.outputs() for job in jobs), 120, "every long generation to stream")
    return jobs


def _generate_url(app_server) -> str:
    return app_server.url + "gradio_api/call/generate"


def _open_raw_stream(app_server, seed: int) -> tuple[httpx.Client, httpx.Response, Iterator[str]]:
    """A hand-written client: POST the call, GET its event stream and read until tokens flow.
    The line iterator is returned to keep it alive: dropping it would close the connection."""
    event_id = httpx.post(_generate_url(app_server), json={"data": [*LONG, seed]}, timeout=30).json()["event_id"]
    http = httpx.Client(timeout=120)
    response = http.send(http.build_request("GET", f"{_generate_url(app_server)}/{event_id}"), stream=True)
    lines = response.iter_lines()
    for line in lines:
        if line.startswith("event: generating"):
            return http, response, lines
    raise AssertionError("the stream ended before any token")


def _waiting(base: str) -> int:
    """Requests the app's queue holds waiting for a slot (Gradio's ``queue/status``)."""
    return httpx.get(f"{base}gradio_api/queue/status", timeout=30).json()["queue_size"]


def _probe_waits_then_starts(base: str, free_slots) -> float:
    """Submit a short generation while every slot is taken, check that the queue holds it
    waiting, free the slots, and return how long it then took to stream its first update.

    The probe comes from a client of its own: Gradio's ``/cancel`` stops every task of the
    cancelled job's session and endpoint (``<session>_<fn_index>``), so cancelling the slots'
    jobs one by one from the probe's own client stopped the probe too when it had already
    started (its result then never came: a CI run hung here)."""
    from gradio_client import Client

    probe = Client(base, verbose=False).submit("ROMEO:", 4, 0.8, 50, 0.95, 1, api_name="/generate")
    _wait(lambda: _waiting(base) >= 1 or bool(probe.outputs()), 60, "the probe to wait in the queue")
    assert not probe.outputs(), "the probe ran although every slot was taken: the test proves nothing"
    free_slots()
    started = _wait(lambda: bool(probe.outputs()), 120, "the probe to start")
    assert probe.result(timeout=120)["finished"] is True
    return started


def test_a_cancelled_stream_frees_its_slot(app_server, client):
    jobs = _fill_slots_with_client_jobs(client)

    def cancel() -> None:
        for job in jobs:
            assert not job.done()
            job.cancel()

    started = _probe_waits_then_starts(app_server.url, cancel)
    print(f"a new generation started {started:.2f} s after cancelling {len(jobs)} streams")
    assert started < PROMPT_START_S
    for job in jobs:
        assert job.status().code == Status.CANCELLED
        assert job.outputs()[-1]["new_tokens"] < LONG[1]


def test_a_client_that_disconnects_mid_stream_frees_its_slot(app_server):
    streams = [_open_raw_stream(app_server, seed) for seed in range(GENERATION_CONCURRENCY)]

    def disconnect() -> None:
        for http, response, _ in streams:
            response.close()
            http.close()

    started = _probe_waits_then_starts(app_server.url, disconnect)
    print(f"a new generation started {started:.2f} s after {len(streams)} clients disconnected")
    assert started < PROMPT_START_S


def test_a_flood_of_generations_is_told_busy_while_light_tabs_serve(app_server, client):
    jobs = _fill_slots_with_client_jobs(client)
    try:
        # Fill the generations' waiting places with 1-token calls (raw HTTP: no client thread each).
        for seed in range(MAX_WAITING_GENERATIONS):
            r = httpx.post(_generate_url(app_server), json={"data": ["ROMEO:", 1, 0.8, 50, 0.95, seed]}, timeout=30)
            assert r.status_code == 200, r.text
        refused = httpx.post(_generate_url(app_server), json={"data": ["ROMEO:", 1, 0.8, 50, 0.95, 0]}, timeout=30)
        assert refused.status_code == 503
        assert "try again" in refused.json()["detail"]
        with pytest.raises(QueueError, match="Please try again"):
            client.predict("ROMEO:", 1, 0.8, 50, 0.95, 0, api_name="/generate")
        # The light tabs share the queue but not the generations' places in it.
        assert client.predict("hello everyone", api_name="/tokenize")["ids"] == [31373, 2506]
    finally:
        for job in jobs:
            job.cancel()
    # Once the waiting ones are served, generations are accepted again.
    _wait(lambda: _accepted(app_server), 180, "the waiting generations to drain")
    assert client.predict("ROMEO:", 2, 0.8, 50, 0.95, 1, api_name="/generate")["finished"] is True


def _accepted(app_server) -> bool:
    r = httpx.post(_generate_url(app_server), json={"data": ["ROMEO:", 1, 0.8, 50, 0.95, 0]}, timeout=30)
    return r.status_code == 200


@pytest.mark.slow
def test_sixteen_clients_at_once_get_every_answer(app_server, client):
    """16 users at once, each alternating a light call and a 12-token generation: every call is
    answered, and a seeded generation gives the same tokens in the crowd (batched with the others)
    as alone. The latencies are printed, not asserted: on a shared 2-core machine the load
    generator's own 16 threads take the cores the app would use (``python -m benchmarks.load
    --table`` is the measurement)."""
    from benchmarks.load import generation_args, run_load

    report = run_load(app_server.url, clients=16, generations=10, new_tokens=12, time_limit_s=900)
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
