"""A byte budget per visitor for every file under /browser/ (playground/ui/serving/byte_budget.py,
browser_files.py): the bucket at its edges on a made-up clock, one address hammering the files for
20 s against what the budget allows while another visitor is served, ranges, and downloads open at
once per visitor for every file, in-process through the middleware the app installs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from playground.ui.serving import browser_files
from playground.ui.serving.browser_files import BrowserFiles, BrowserFileServer, DownloadSlots, byte_range
from playground.ui.serving.byte_budget import ByteBudget


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_a_minutes_bytes_then_says_when_and_refills_evenly():
    clock = Clock()
    budget = ByteBudget(6000, clock)  # 100 bytes a second
    assert budget.take("a", 6000) == 0.0
    assert budget.take("a", 1) == 1.0  # empty: one byte takes 10 ms, told a whole second
    assert budget.take("a", 500) == 5.0 and budget.level("a") == 0  # a refusal takes nothing
    clock.now += 4.99
    assert budget.take("a", 500) == 1.0
    clock.now += 0.01
    assert budget.take("a", 500) == 0.0  # exactly refilled
    assert budget.take("b", 6000) == 0.0  # another visitor has its own
    clock.now += 600
    assert budget.level("a") == 6000  # full again, never more than a minute's
    assert budget.take("a", 10**9) == 0.0  # larger than a minute's: served from a full bucket ...
    assert budget.take("a", 1) > 0  # ... which it empties


def test_one_visitors_bytes_over_20_s_stay_within_its_budget():
    clock = Clock()
    budget, got = ByteBudget(60_000, clock), 0  # 1,000 bytes a second
    for _ in range(2000):  # a request every 10 ms, of sizes that do not divide the rate
        if budget.take("a", 737) == 0.0:
            got += 737
        clock.now += 0.01
    assert 60_000 + 20 * 1000 - 737 <= got <= 60_000 + 20 * 1000


def test_visitors_remembered_stay_within_their_bound_the_full_forgotten_first():
    clock = Clock()
    budget = ByteBudget(6000, clock, max_visitors=3)
    for i, size in enumerate([6000, 100, 3000, 5000, 50]):
        budget.take(f"v{i}", size)
        assert len(budget.buckets) <= 3
    assert set(budget.buckets) == {"v0", "v3", "v2"}  # the emptiest kept


# --- through the middleware -----------------------------------------------------------------------


def _files(tmp_path: Path) -> BrowserFiles:
    hub = tmp_path / "hub"
    (hub / "onnx").mkdir(parents=True)
    (hub / "onnx" / "model_quantized.onnx").write_bytes(bytes(range(256)) * 1000)  # 256 kB
    (hub / "tokenizer.json").write_text("{}")
    (hub / "config.json").write_text("{}")
    ort = tmp_path / "ort"
    ort.mkdir()
    for name in browser_files.ORT_FILES:
        (ort / name).write_bytes(bytes(range(256)) * 400)  # 100 kB each, sent unencoded (no Accept-Encoding)
    engine = tmp_path / "engine"
    engine.mkdir()
    for name in browser_files.ENGINE_MODULES:
        (engine / name).write_text("export {};\n")
    return BrowserFiles.for_model({"quantized": hub / "onnx" / "model_quantized.onnx"}, ort_dir=ort, engine_dir=engine)


async def _ask(server: BrowserFileServer, route: str, visitor: str, headers: dict[str, str] | None = None,
               hold: asyncio.Event | None = None) -> tuple[int, dict, bytes]:
    status, sent, body = 0, {}, bytearray()

    async def receive():
        await asyncio.Event().wait()  # the client stays until the answer ends

    async def send(message):
        nonlocal status, sent
        if message["type"] == "http.response.start":
            status, sent = message["status"], dict(message["headers"])
        else:
            if hold is not None and status == 200:
                await hold.wait()
            body.extend(message.get("body", b""))

    scope = {"type": "http", "method": "GET", "path": route, "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()], "client": (visitor, 40000)}
    await asyncio.wait_for(server(scope, receive, send), 30)
    return status, sent, bytes(body)


async def _nothing(scope, receive, send):
    raise AssertionError(scope["path"])


def test_an_address_hammering_the_files_for_20_s_gets_its_budget_and_a_learner_is_served(tmp_path):
    files = _files(tmp_path)
    routes = [r for r in files.files if "/ort/" in r or r.endswith(".onnx")]
    clock = Clock()
    per_minute = 3_000_000  # 50 kB a second
    server = BrowserFileServer(_nothing, files, budget=ByteBudget(per_minute, clock))

    async def siege():
        got, refused, learner = 0, 0, []
        for tick in range(200):  # 20 s, 0.1 s apart, every file each time
            for route in routes:
                status, headers, body = await _ask(server, route, "10.0.0.66")
                if status == 200:
                    got += len(body)
                else:
                    refused += 1
                    assert status == 429 and float(headers[b"retry-after"]) >= 1
            if tick % 50 == 0:  # a learner's page now and then: its files, whole
                learner += [(await _ask(server, route, f"10.0.1.{tick}"))[0] for route in routes]
            clock.now += 0.1
        return got, refused, learner

    got, refused, learner = asyncio.run(siege())
    assert got <= per_minute + 20 * per_minute / 60  # a minute's bytes, and 20 s of refill
    assert got >= per_minute  # (and it was served that much: the bucket was really used)
    assert refused > 0 and learner == [200] * len(learner)


def test_a_range_is_sent_alone_charged_its_bytes_and_a_range_past_the_end_is_416(tmp_path):
    files = _files(tmp_path)
    route = next(r for r in files.files if r.endswith(".onnx"))
    whole = files.files[route].path.read_bytes()
    etag = f'"{files.files[route].digest[:32]}"'
    clock = Clock()
    server = BrowserFileServer(_nothing, files, budget=ByteBudget(1_000_000, clock))

    async def asks():
        part = await _ask(server, route, "a", {"Range": "bytes=1000-1999"})
        tail = await _ask(server, route, "a", {"Range": "bytes=-10"})
        past = await _ask(server, route, "a", {"Range": f"bytes={len(whole)}-"})
        other = await _ask(server, route, "a", {"Range": "bytes=0-9", "If-Range": '"another"'})
        same = await _ask(server, route, "a", {"Range": "bytes=0-9", "If-Range": etag})
        return part, tail, past, other, same

    part, tail, past, other, same = asyncio.run(asks())
    assert part[0] == 206 and part[2] == whole[1000:2000]
    assert part[1][b"content-range"] == f"bytes 1000-1999/{len(whole)}".encode() and part[1][b"content-length"] == b"1000"
    assert tail[0] == 206 and tail[2] == whole[-10:]
    assert past[0] == 416 and past[1][b"content-range"] == f"bytes */{len(whole)}".encode()
    assert other[0] == 200 and other[2] == whole  # another version: the whole file
    assert same[0] == 206 and same[2] == whole[:10]
    charged = 1_000_000 - server.budget.level("a")
    assert charged == 1000 + 10 + len(whole) + 10  # what was sent, not the file's size each time


@pytest.mark.parametrize("edge", [(None, 10), (b"bytes=0-0", 10), (b"bytes=5-", 10), (b"bytes=3-100", 10)])
def test_byte_range_reads_one_range_and_leaves_the_rest_whole(edge):
    header, size = edge
    assert byte_range(header, size) == {None: None, b"bytes=0-0": (0, 0), b"bytes=5-": (5, 9), b"bytes=3-100": (3, 9)}[header]
    assert byte_range(b"bytes=0-1,3-4", 10) is None and byte_range(b"lines=1-2", 10) is None
    assert byte_range(b"bytes=10-", 10) == browser_files.UNSATISFIABLE and byte_range(b"bytes=-0", 10) == browser_files.UNSATISFIABLE


def test_a_visitor_may_download_n_of_any_files_at_once_and_not_one_more(tmp_path):
    files = _files(tmp_path)
    route = next(r for r in files.files if r.endswith("engine.js"))
    n = 3
    server = BrowserFileServer(_nothing, files, any_slots=DownloadSlots(n))

    async def at_once():
        hold = asyncio.Event()
        tasks = [asyncio.create_task(_ask(server, route, "a", hold=hold)) for _ in range(n + 1)]
        other = asyncio.create_task(_ask(server, route, "b", hold=hold))
        while sum(t.done() for t in tasks) < 1:  # the one refused ends at once, the others wait for hold
            await asyncio.sleep(0.001)
        hold.set()
        return [await t for t in tasks], await other

    answers, other = asyncio.run(at_once())
    assert sorted(s for s, _, _ in answers) == [200] * n + [429] and other[0] == 200
    assert server.any_slots.open == {}
