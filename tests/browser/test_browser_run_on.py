"""Run on: this browser (the Text generation tab). The files the app serves for it, on the launched
app: each one's bytes, content hash and caching headers, a 304 on revalidation, gzip, every path
outside the list refused, and the bound on one visitor's downloads of the model (a pure function
at its edge, a class of 40 downloading at once in-process, n streams then a refusal on the app).
In headless Chromium: a greedy generation in the page is the one onnxruntime gives on the file the
page downloads; Stop; the server path after it; a busy server's message offering to run it
in the browser instead; and, at a phone's and a laptop's size, the browser mode as complete as
the server's: the same buttons in the same order, several samples (each the seed's own, as plain
onnxruntime on the same file draws them by the sampling rule), every step's candidates, Next token
with its earlier steps listed, Replay slowly, and the precision choice saying what it does here."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
import gzip
import hashlib
import http.client
import json
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from conftest import shipped_resources, wait_for
from model import get_tokenizer
from plain_onnx import onnxruntime_greedy, plain_decode, read, session
from playground.generation.browser import BROWSER_FILE
from playground.ui.serving import browser_files
from playground.ui.serving.browser_files import (IMMUTABLE, MODEL_STREAMS_PER_VISITOR, REVALIDATE, BrowserFiles,
                                                 BrowserFileServer, DownloadSlots)

PROMPT = "ROMEO:\nBut soft, what light"
N_TOKENS = 16


@pytest.fixture(scope="module")
def served(shipped_onnx) -> BrowserFiles:
    """The allow-list the launched app serves (the same files, so the same hashes)."""
    files = BrowserFiles.for_model(shipped_onnx)
    assert files.available, files.problem
    return files


def get(app_server, url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(urllib.parse.urljoin(app_server.url, url), headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def raw_status(app_server, method: str, path: str) -> int:
    """The status of ``path`` sent as written (urllib and browsers tidy ``..`` away)."""
    host = urllib.parse.urlsplit(app_server.url)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


# --- the files --------------------------------------------------------------------------------------


def test_each_file_is_served_whole_under_its_content_hash_with_its_caching_headers(app_server, served, shipped_onnx):
    quantized = Path(shipped_onnx["quantized"])
    for route, f in served.files.items():
        status, headers, body = get(app_server, f.url)
        assert status == 200, (route, status, body[:200])
        assert hashlib.sha256(body).hexdigest() == f.digest == hashlib.sha256(f.path.read_bytes()).hexdigest(), route
        assert headers["etag"].strip('"') == f.digest[:32] and headers["x-content-type-options"] == "nosniff"
        if route.startswith(("/browser/ort/", "/browser/plotly/")) or "/model/" in route:  # named by their hash
            assert headers["cache-control"] == IMMUTABLE, route
        else:  # the engine's modules import each other without a hash: revalidated
            assert headers["cache-control"] == REVALIDATE, route
            again, _, empty = get(app_server, f.url, {"If-None-Match": headers["etag"]})
            assert (again, empty) == (304, b""), route
    # the page runs the Hub folder's 8-bit file, named by its own hash, never the full-precision one
    model = served.files["/browser/model/model_quantized.onnx"]
    assert model.path == quantized and model.url.endswith("?v=" + hashlib.sha256(quantized.read_bytes()).hexdigest()[:16])
    assert get(app_server, model.url)[2] == quantized.read_bytes()
    assert get(app_server, model.url)[1]["content-type"] == "application/octet-stream"
    # onnxruntime-web asks for its .wasm by name beside its .mjs: the hash is the folder's
    ort = [next(f for f in served.files.values() if f.route.endswith("/" + name)) for name in browser_files.ORT_FILES]
    folder = {f.route.split("/")[3] for f in ort}
    assert folder == {hashlib.sha256("".join(f.digest for f in ort).encode()).hexdigest()[:16]}
    wasm = next(f for f in ort if f.route.endswith(".wasm"))
    assert get(app_server, wasm.url)[1]["content-type"] == "application/wasm"
    # under another address than its own hash a file is revalidated, never kept for a year
    for url in (model.route, model.route + "?v=0123456789abcdef"):
        status, headers, _ = get(app_server, url)
        assert (status, headers["cache-control"]) == (200, REVALIDATE), url


def test_text_and_webassembly_go_out_gzipped_and_the_model_as_it_is(app_server, served):
    for f in served.files.values():
        status, headers, body = get(app_server, f.url, {"Accept-Encoding": "gzip"})
        assert status == 200
        if f.path.suffix == ".onnx":
            assert "content-encoding" not in headers
        else:
            assert headers["content-encoding"] == "gzip" and headers["vary"] == "Accept-Encoding", f.route
            assert gzip.decompress(body) == f.path.read_bytes(), f.route
            assert headers["etag"] != get(app_server, f.url)[1]["etag"]  # another representation, another tag


def test_every_path_outside_the_list_is_refused(app_server, served):
    ort_folder = next(r for r in served.files if r.startswith("/browser/ort/")).rsplit("/", 1)[0]
    for path in (
        "/browser/", "/browser/model/model.onnx", "/browser/model/model_int8.onnx", "/browser/model/model.safetensors",
        "/browser/engine/../../app.py", "/browser/engine/..%2f..%2fapp.py", "/browser/engine/%2e%2e/%2e%2e/app.py",
        "/browser/engine/engine.js/", "/browser//engine/engine.js", "/browser/web/engine/engine.js",
        "/browser/ort/0123456789abcdef/ort.wasm.min.mjs", ort_folder + "/ort.all.min.mjs", ort_folder + "/../../app.py",
        "/browser/onnx/model_quantized.onnx", "/browser/model/tokenizer.json/../../../README.md",
    ):
        assert raw_status(app_server, "GET", path) == 404, path
    assert raw_status(app_server, "POST", "/browser/engine/engine.js") == 405
    assert raw_status(app_server, "HEAD", "/browser/engine/engine.js") == 200


# --- the bound on a visitor's downloads of the model ----------------------------------------------------


def test_a_visitor_may_hold_n_downloads_of_the_model_and_not_one_more():
    n = 3
    slots = DownloadSlots(n)
    assert all(slots.take("1.2.3.4") for _ in range(n))
    assert not slots.take("1.2.3.4")  # n + 1
    assert slots.take("5.6.7.8")  # another visitor has its own
    slots.give("1.2.3.4")
    assert slots.take("1.2.3.4") and not slots.take("1.2.3.4")
    for visitor, count in (("1.2.3.4", n), ("5.6.7.8", 1)):
        for _ in range(count):
            slots.give(visitor)
    assert slots.open == {}  # nobody downloading: nothing kept


def _fake_model_files(tmp_path: Path) -> tuple[BrowserFiles, bytes]:
    hub = tmp_path / "hub"
    (hub / "onnx").mkdir(parents=True)
    model = bytes(range(256)) * 3000  # 768 kB: several chunks
    (hub / "onnx" / "model_quantized.onnx").write_bytes(model)
    (hub / "tokenizer.json").write_text("{}")
    (hub / "config.json").write_text("{}")
    ort = tmp_path / "ort"
    ort.mkdir()
    for name in browser_files.ORT_FILES:
        (ort / name).write_bytes(name.encode())
    return BrowserFiles.for_model({"quantized": hub / "onnx" / "model_quantized.onnx"}, ort_dir=ort), model


def test_a_class_of_40_downloads_the_model_at_once_and_one_visitor_only_n_at_once(tmp_path):
    """In-process, through the middleware the app installs: every download is held open until
    all have started, as 40 learners opening the page at the same moment."""
    files, model = _fake_model_files(tmp_path)
    url = files.files["/browser/model/model_quantized.onnx"]

    async def app(scope, receive, send):  # what the middleware passes on: nothing here
        raise AssertionError(scope["path"])

    async def downloads(visitors: list[str]) -> list[tuple[int, dict, bytes]]:
        server = BrowserFileServer(app, files, DownloadSlots(MODEL_STREAMS_PER_VISITOR))
        started: list[int] = []
        all_started = asyncio.Event()

        async def one(visitor: str):
            status, headers, body = 0, {}, bytearray()

            async def receive():
                await asyncio.Event().wait()  # the client stays until the answer ends

            async def send(message):
                nonlocal status, headers
                if message["type"] == "http.response.start":
                    status, headers = message["status"], dict(message["headers"])
                    started.append(status)
                    if len(started) == len(visitors):
                        all_started.set()
                else:
                    await all_started.wait()
                    body.extend(message.get("body", b""))

            scope = {"type": "http", "method": "GET", "path": url.route, "query_string": f"v={url.version}".encode(),
                     "headers": [], "client": (visitor, 40000)}
            await asyncio.wait_for(server(scope, receive, send), 30)
            return status, headers, bytes(body)

        answers = await asyncio.gather(*(one(v) for v in visitors))
        assert server.slots.open == {}  # every slot given back
        return answers

    # in a thread of its own: Playwright's loop (this module's Chromium) may still run in this one
    run = lambda coro: ThreadPoolExecutor(1).submit(asyncio.run, coro).result()  # noqa: E731
    klass = run(downloads([f"10.0.0.{i}" for i in range(1, 41)]))
    assert [s for s, _, _ in klass] == [200] * 40 and all(body == model for _, _, body in klass)
    one_visitor = run(downloads(["10.0.0.1"] * (MODEL_STREAMS_PER_VISITOR + 1)))
    assert sorted(s for s, _, _ in one_visitor) == [200] * MODEL_STREAMS_PER_VISITOR + [429]
    refused = next(h for s, h, _ in one_visitor if s == 429)
    assert refused[b"retry-after"] == str(browser_files.RETRY_AFTER_S).encode()


def _open_model_stream(app_server, url: str) -> tuple[socket.socket, int]:
    """A download of the model that reads its status line and then nothing (a small receive window,
    so the 18 MB stay on the server's side: the stream stays open)."""
    host = urllib.parse.urlsplit(app_server.url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.settimeout(30)
    sock.connect((host.hostname, host.port))
    sock.sendall(f"GET {url} HTTP/1.1\r\nHost: {host.netloc}\r\n\r\n".encode())
    head = b""
    while b"\r\n" not in head:
        head += sock.recv(1)
    return sock, int(head.split()[1])


def test_the_app_lets_a_visitor_download_the_model_n_times_at_once_then_answers_429(app_server, served):
    url = served.files["/browser/model/model_quantized.onnx"].url
    streams = [_open_model_stream(app_server, url) for _ in range(MODEL_STREAMS_PER_VISITOR)]
    try:
        assert [status for _, status in streams] == [200] * MODEL_STREAMS_PER_VISITOR
        status, headers, body = get(app_server, url)
        assert status == 429 and headers["retry-after"] == str(browser_files.RETRY_AFTER_S)
        assert "at most" in json.loads(body)["detail"]
        assert get(app_server, served.url("config.json"))[0] == 200  # the small files are not counted
    finally:
        for sock, _ in streams:
            sock.close()
    wait_for(lambda: get(app_server, url)[0] == 200, 10, 0.2, message="a closed download to give its place back")


# --- in the browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium(app_server):
    """One headless Chromium context for the module: its pages share the browser's Cache Storage,
    so the first page downloads the model and the next ones take it from the cache."""
    from test_browser import ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
        context.set_default_timeout(120_000)
        yield context
        browser.close()


@contextmanager
def generation_tab(chromium, app_server):
    page = chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    try:
        page.goto(app_server.url, wait_until="domcontentloaded")
        page.get_by_role("tab", name=re.compile("Text generation")).click()
        page.locator("#gen-run-on").wait_for()
        yield page
    finally:
        page.close()


def run_on(page, where: str) -> None:
    page.locator("#gen-run-on label", has_text=where).click()


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]").first
    box.fill(str(value))
    box.blur()


# The output once the tab's views have drawn what the browser drew (the streamed text has no file).
DRAWN = f'#gen-output .gen-output[data-file="{BROWSER_FILE}"][data-done=true]'


def generate_here(page, button: str = "#gen-run-browser") -> float:
    """Generate (or Next token) in the browser; seconds from the click to the first token on the
    page. Returns once the tab's views drew the result."""
    page.evaluate("""() => { const o = document.querySelector('#gen-output .gen-output');
        if (o) { o.removeAttribute('data-file'); o.removeAttribute('data-done'); o.replaceChildren(); } }""")
    t0 = time.perf_counter()
    page.click(button)
    page.wait_for_selector("#gen-output .gen-tok", state="attached")
    first = time.perf_counter() - t0
    page.wait_for_selector(DRAWN, state="attached", timeout=180_000)
    return first


def shown_ids(page) -> list[int]:
    return page.evaluate("() => Array.from(document.querySelectorAll('#gen-output .gen-tok')).map((t) => Number(t.dataset.id))")


def sample_ids(page) -> list[list[int]]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('#gen-output .gen-sample'),
        (s) => Array.from(s.querySelectorAll('.gen-tok'), (t) => Number(t.dataset.id)))""")


@pytest.mark.browser
def test_this_browser_generates_greedily_what_onnxruntime_does_on_the_same_file(chromium, app_server, served, shipped_onnx):
    enc = get_tokenizer()
    expected = onnxruntime_greedy(Path(shipped_onnx["quantized"]), enc.encode(PROMPT), N_TOKENS)
    timings = {}
    for visit in ("cold", "cached"):
        with generation_tab(chromium, app_server) as page:
            assert page.is_visible("#gen-run") and not page.is_visible("#gen-run-browser")  # the server by default
            t0 = time.perf_counter()
            run_on(page, "this browser")
            page.wait_for_selector("#gen-browser [data-ready=true]", state="attached", timeout=180_000)
            ready_s = time.perf_counter() - t0
            assert page.is_visible("#gen-run-browser") and not page.is_visible("#gen-run") and page.is_visible("#gen-chart")
            assert ("cache" in page.inner_text("#gen-browser")) == (visit == "cached")
            page.locator("#gen-prompt textarea").fill(PROMPT)
            set_number(page, "gen-temp", 0)
            set_number(page, "gen-max", N_TOKENS)
            first_s = generate_here(page)
            ids = shown_ids(page)
            assert ids == expected
            if visit == "cold":  # the page downloaded the Hub folder's 8-bit file, by its own hash
                digest = hashlib.sha256(Path(shipped_onnx["quantized"]).read_bytes()).hexdigest()[:16]
                fetched = page.evaluate("() => performance.getEntriesByType('resource').map((e) => e.name)")
                assert any(u.endswith(f"/browser/model/model_quantized.onnx?v={digest}") for u in fetched), fetched
            texts = page.eval_on_selector_all("#gen-output .gen-tok", "ts => ts.map((t) => t.textContent)")
            assert [t for t, i in zip(texts, ids) if enc.decode([i]).strip()] == [enc.decode([i]) for i in ids if enc.decode([i]).strip()]
            stats = page.inner_text("#gen-browser-stats")
            assert f"{N_TOKENS} new tokens" in stats and "this browser" in stats and "stopped by: max_new_tokens" in stats
            tps = float(re.search(r"([\d.]+) tokens/s", stats).group(1))
            ttft_ms = float(re.search(r"time to first token (\d+) ms", stats).group(1))
            timings[visit] = (ready_s, first_s, ttft_ms, tps)
            if visit == "cached":
                # Stop ends a long generation at once, saying so
                set_number(page, "gen-max", 512)
                set_number(page, "gen-temp", 0.8)
                page.evaluate("() => { const o = document.querySelector('#gen-output .gen-output'); o.removeAttribute('data-file'); o.replaceChildren(); }")
                page.click("#gen-run-browser")
                page.wait_for_function("() => document.querySelectorAll('#gen-output .gen-tok').length >= 3")
                page.click("#gen-stop-browser")
                page.wait_for_selector(DRAWN, state="attached")
                assert "stopped by: stopped" in page.inner_text("#gen-browser-stats") and len(shown_ids(page)) < 512
                # back on the server: its own Generate, writing over the browser's text
                run_on(page, "the server")
                assert page.is_visible("#gen-run") and not page.is_visible("#gen-run-browser")
                set_number(page, "gen-max", 8)
                page.click("#gen-run")
                page.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('stopped by')", timeout=120_000)
                assert page.locator("#gen-output .gen-tok").count() == 8
                assert page.get_attribute("#gen-output .gen-output", "data-file") == "model.onnx"
            assert not page.errors
    for visit, (ready_s, first_s, ttft_ms, tps) in timings.items():
        print(f"\n{visit}: model ready {ready_s:.1f} s after choosing this browser; Generate -> first token on the page "
              f"{first_s * 1000:.0f} ms (engine's time to first token {ttft_ms:.0f} ms); {tps:.0f} tokens/s")


BUTTONS = ["Generate", "Next token", "Stop", "Replay slowly"]
SEED, SAMPLED = 42, dict(temperature=0.8, top_k=50, top_p=0.95)


@pytest.mark.browser
def test_a_page_whose_paints_are_dear_paints_less_often(chromium, app_server):
    """The page adds the tokens drawn since its last paint every 100 ms, and where a paint costs
    more (a slow phone, the app's large page), PAINT_SHARE (6) times what the last one took, at most
    a second (web/app/paint.js): here each addition to the text is made to cost 150 ms (an observer
    that holds the page), so additions come about a second apart, where every 100 ms would be about
    250 ms; the text is still whole."""
    with generation_tab(chromium, app_server) as page:
        run_on(page, "this browser")
        page.wait_for_selector("#gen-browser [data-ready=true]", state="attached", timeout=180_000)
        page.locator("#gen-prompt textarea").fill(PROMPT)
        set_number(page, "gen-temp", 0)
        set_number(page, "gen-max", 160)
        page.evaluate("""() => {
          window.pgAdds = [];
          const dear = new MutationObserver((records) => {
            const added = records.some((r) => r.target.classList && r.target.classList.contains('gen-completion') && r.addedNodes.length);
            if (!added) return;
            window.pgAdds.push(performance.now());
            const t = performance.now();
            while (performance.now() - t < 150) {}  // the paint's cost, made dear
          });
          dear.observe(document.querySelector('#gen-output'), { childList: true, subtree: true });
          window.pgDear = dear;
        }""")
        generate_here(page)
        adds = page.evaluate("() => { window.pgDear.disconnect(); return window.pgAdds; }")
        gaps = [b - a for a, b in zip(adds[:-2], adds[1:-1])]  # the last addition, at the end, may come sooner
        assert len(adds) >= 3 and gaps and min(gaps) >= 450, f"{len(adds)} additions, gaps {[round(g) for g in gaps]} ms"
        assert len(shown_ids(page)) == 160
        assert not page.errors, page.errors


def visible_buttons(page) -> list[str]:
    """The texts of the Generate row's buttons a learner sees, in reading order (top to bottom,
    left to right)."""
    return page.evaluate("""() => {
      const row = document.querySelector('#gen-run').parentElement;
      const shown = [...row.querySelectorAll('button')].filter((b) => b.offsetParent !== null);
      const at = (b) => b.getBoundingClientRect();
      shown.sort((a, b) => Math.round(at(a).top - at(b).top) || at(a).left - at(b).left);
      return shown.map((b) => b.innerText.trim());
    }""")


def drawn_by_the_rule(quantized: Path, prompt: list[int], samples: int, tokens: int, seed: int) -> tuple[list[list[int]], list]:
    """Each sample's tokens as plain onnxruntime on the page's file and the sampling rule draw them
    (token i of sample s with uniform(seed, SAMPLING, 1, i, s)), and the logits of every step."""
    from runtime import draws
    from runtime.sampling import sample

    steps = iter(range(tokens))

    def choose(logits):
        i = next(steps)
        return [sample(row, SAMPLED["temperature"], SAMPLED["top_k"], SAMPLED["top_p"], draws.uniform(seed, draws.SAMPLING, 1, i, s)[0])
                for s, row in enumerate(logits)]

    return plain_decode(session(quantized), prompt, samples, tokens, block_size=256, shift=64, choose=choose, eot=50256)


def chart_bars(page) -> dict[int, float]:
    """The candidates chart's model probabilities by token id (plotly's own data on the page)."""
    traces = page.evaluate("() => document.querySelector('#gen-chart .js-plotly-plot').data.map((t) => [t.name, t.x, t.y])")
    name, x, y = traces[0]
    assert name.startswith("model")
    return {int(label.rsplit("#", 1)[1]): p for p, label in zip(x, y)}


@pytest.mark.browser
@pytest.mark.parametrize("viewport", [pytest.param({"width": 390, "height": 844}, marks=pytest.mark.slow), {"width": 1280, "height": 800}],
                         ids=["phone", "laptop"])  # (the phone's layout in the slow run: 36 s)
def test_this_browser_has_the_servers_buttons_samples_candidates_next_token_and_replay(chromium, app_server, shipped_onnx, viewport):
    """What the server mode offers, in the browser: the same buttons in the same order (a button
    out of place, or one hidden, shows), several samples each drawn by its own lane of the seed,
    the candidates of a clicked step with the model's probabilities, two Next tokens with the
    earlier one listed under the newer, Replay slowly; the precision choice in place, off, saying
    which file the browser runs; nothing wider than the screen."""
    from runtime import draws
    from runtime.sampling import sample
    from playground.ui.generation import step_seed

    enc, quantized = get_tokenizer(), Path(shipped_onnx["quantized"])
    with generation_tab(chromium, app_server) as page:
        page.set_viewport_size(viewport)
        assert visible_buttons(page) == BUTTONS
        run_on(page, "this browser")
        page.wait_for_selector("#gen-browser [data-ready=true]", state="attached", timeout=180_000)
        assert visible_buttons(page) == BUTTONS
        assert page.is_visible("#gen-samples") and page.is_visible("#gen-chart") and page.is_visible("#gen-precision")
        assert page.locator("#gen-precision input").first.is_disabled()
        assert "model_quantized.onnx" in page.inner_text("#gen-precision-browser")
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")

        # Two samples: each the seed's own lane, as plain onnxruntime and the rule draw them.
        page.locator("#gen-prompt textarea").fill(PROMPT)
        for elem_id, value in (("gen-temp", SAMPLED["temperature"]), ("gen-topk", SAMPLED["top_k"]), ("gen-max", 10), ("gen-samples", 2)):
            set_number(page, elem_id, value)
        set_number(page, "gen-topp", SAMPLED["top_p"])
        set_number(page, "gen-seed", SEED)
        generate_here(page)
        expected, logits = drawn_by_the_rule(quantized, enc.encode(PROMPT), 2, 10, SEED)
        assert sample_ids(page) == expected and expected[0] != expected[1]
        assert page.locator("#gen-output .gen-sample-title").all_inner_texts() == ["Sample 1", "Sample 2"]
        assert page.locator("#gen-sample-pick").is_visible()

        # The candidates of a clicked step: sample 2, step 3, the model's probabilities of the page's file.
        page.locator('#gen-output .gen-tok[data-sample="1"][data-step="3"]').click()
        page.wait_for_function("() => document.querySelector('#gen-chart').textContent.includes('Step 3:')")
        bars = chart_bars(page)
        z = logits[1][2].astype(np.float64)
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        assert expected[1][2] in bars and len(bars) >= 10
        for token, shown in bars.items():
            assert shown == pytest.approx(p[token], rel=2e-3, abs=1e-6), token

        # Replay slowly: the tokens hidden, then shown one by one.
        page.click("#gen-replay")
        page.wait_for_function("""() => document.querySelector('.pg-replay-note')
            && [...document.querySelectorAll('#gen-output .gen-tok')].some((t) => t.style.visibility === 'hidden')""")
        page.wait_for_selector(".pg-replay-note", state="detached", timeout=30_000)

        # Next token, twice: each token the rule draws with the step's seed, appended; the first listed under the second.
        set_number(page, "gen-samples", 1)
        prompt = PROMPT
        drawn = []
        for _ in range(2):
            ids = enc.encode(prompt)
            token = sample(read(session(quantized), ids), SAMPLED["temperature"], SAMPLED["top_k"], SAMPLED["top_p"],
                           draws.uniform(step_seed(SEED, len(ids)), draws.SAMPLING, 1, 0, 0)[0])
            generate_here(page, "#gen-next-browser")
            assert shown_ids(page) == [token]
            prompt += enc.decode([token])
            page.wait_for_function("(p) => document.querySelector('#gen-prompt textarea').value === p", arg=prompt)
            drawn.append(token)
        rows = page.locator("#gen-history tbody tr")
        assert rows.count() == 2
        assert rows.nth(0).locator("td").first.inner_text() == "2" and rows.nth(1).locator("td").first.inner_text() == "1"
        assert "Next token" in page.inner_text("#gen-browser-stats")
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        assert not page.errors


@pytest.mark.browser
@pytest.mark.slow  # 27 s; the long expected wait's offer, the same page side, stays in the default run
def test_a_busy_server_offers_to_run_the_generation_in_this_browser(chromium, app_server):
    """The server's refusals as the page meets them: the queue's 503 (Gradio says "currently busy")
    and the per-visitor cap's 429 with its own message (serving/admission.py)."""
    from playground.ui.gradio_internals import REFUSAL_STATUS, Arrival
    from playground.ui.serving.admission import check_arrival

    message, kind, retry = check_arrival(Arrival("abc", "generate", "10.0.0.1"), 4, 4, 0, {"generate": 4}, {})
    with generation_tab(chromium, app_server) as page:
        for status, detail in ((503, "Busy"), (REFUSAL_STATUS[kind], message)):
            page.route("**/gradio_api/queue/join*", lambda route: route.fulfill(
                status=status, headers={"Retry-After": str(int(retry)), "Content-Type": "application/json"},
                body=json.dumps({"detail": detail})))
            page.click("#gen-run")
            offer = page.locator('[data-testid="toast-body"] .pg-run-here')
            offer.wait_for()
            page.unroute("**/gradio_api/queue/join*")
            if status == 503:
                assert "currently busy" in page.locator('[data-testid="toast-body"]').last.inner_text()
                page.locator('[data-testid="toast-close"]').first.click()
                page.wait_for_selector('[data-testid="toast-body"]', state="detached")
        assert "Too many generations" in page.locator('[data-testid="toast-body"]').last.inner_text()
        set_number(page, "gen-max", 8)
        page.locator('[data-testid="toast-body"] .pg-run-here').click()
        page.wait_for_selector("#gen-output .gen-output[data-done=true]", state="attached", timeout=180_000)
        assert page.is_checked('#gen-run-on input[value="browser"]') and page.is_visible("#gen-run-browser")
        assert len(shown_ids(page)) == 8 and "this browser" in page.inner_text("#gen-browser-stats")
        assert not page.errors


def _ask_the_wait(page) -> None:
    """Focus the server's Generate (the page asks the server's wait then), and wait for the answer."""
    page.evaluate("() => { const w = document.querySelector('#gen-server-wait'); if (w) delete w.dataset.offer; }")
    page.locator("#gen-prompt textarea").focus()
    page.focus("#gen-run")
    page.wait_for_selector("#gen-server-wait[data-offer]", state="attached")


@pytest.mark.browser
def test_a_long_expected_wait_offers_this_browser_at_once_and_a_short_one_goes_to_the_server(chromium, app_server):
    """The server idle: no wait shown, and Generate goes to the server. The server saying its wait is
    long (its own answer for 116 busy handlers, 3 more waiting and a loop a turn behind, given to
    the page in place of the idle app's): the wait shows under Run on, and a click on Generate sends
    nothing to the server but offers this browser with the wait in words; "Wait for the server"
    sends it there after all, "Run it in this browser instead" generates here."""
    from playground.ui.serving import wait
    from runtime.batching import Load

    busy = Load(running_rows=16, waiting=100, wait_steps=200, step_s=0.1, ends_per_s=0.5)
    long = wait.answer(wait.expected(busy, (116, 116, 3), [busy]), "full", 16)
    assert long["offer_browser"] and long["expected_wait_s"] == 28.0
    joins: list[str] = []
    with generation_tab(chromium, app_server) as page:
        page.on("request", lambda r: joins.append(r.url) if "/queue/join" in r.url else None)
        set_number(page, "gen-max", 4)
        _ask_the_wait(page)
        assert page.locator("#gen-server-wait").is_hidden()
        before = len(joins)
        page.click("#gen-run")
        page.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('stopped by')", timeout=120_000)
        assert page.locator("#gen-wait-offer").count() == 0 and len(joins) > before
        page.route("**/expected-wait*", lambda route: route.fulfill(status=200, content_type="application/json",
                                                                     body=json.dumps(long)))
        for choice, tokens in (("Wait for the server", 5), ("Run it in this browser instead", 4)):
            set_number(page, "gen-max", tokens)
            _ask_the_wait(page)
            assert page.inner_text("#gen-server-wait") == (
                "The server now: about 28 s before the first token (this browser starts in seconds).")
            sent = len(joins)
            page.click("#gen-run")
            offer = page.locator("#gen-wait-offer")
            offer.wait_for()
            assert long["words"] in offer.inner_text() and "all 116 of its generation handlers are busy" in long["words"]
            assert len(joins) == sent, "the click went to the server while the offer was shown"
            offer.get_by_role("button", name=choice).click()
            assert page.locator("#gen-wait-offer").count() == 0
            if choice == "Wait for the server":
                wait_for(lambda: len(joins) > sent, 30, message="the generation to go to the server")
                page.wait_for_function("() => document.querySelectorAll('#gen-output .gen-tok').length === 5", timeout=120_000)
        # the browser's 4 tokens, drawn by the tab's own views once the run sends them back (the
        # server's 5 stay shown, done, until then)
        page.wait_for_function("() => document.querySelectorAll('#gen-output .gen-tok').length === 4", timeout=180_000)
        assert page.is_checked('#gen-run-on input[value="browser"]') and len(shown_ids(page)) == 4
        assert "this browser" in page.inner_text("#gen-browser-stats")
        assert not page.errors


@contextmanager
def hub_stand_in(model: Path, repo: str = "someone/gpt-playground"):
    """A local server standing in for the Hub: the repository's 8-bit file at its Hub address, with
    the Hub's CORS header (a page fetches it from another origin); yields (its base, the paths asked)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import threading

    body, asked = model.read_bytes(), []

    class Hub(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            asked.append(self.path)
            found = self.path == f"/{repo}/resolve/main/onnx/model_quantized.onnx"
            self.send_response(200 if found else 404)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Content-Length", str(len(body) if found else 0))
            self.end_headers()
            if found:
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


LOAD_FROM = """async ({engine, ort, sources, sha256, tokenizer, config}) => {
  const here = (path) => new URL(path, location.href).href;
  const { Engine, loadOrt } = await import(here(engine));
  const e = await Engine.load({ ort: await loadOrt(here(ort)), model: { sources: sources.map(here), sha256 },
                                tokenizer: here(tokenizer), config: here(config) });
  return e.modelSource;
}"""


@pytest.mark.browser
def test_the_engine_takes_the_model_from_the_hub_and_the_spaces_copy_when_the_hub_is_unreachable(chromium, app_server, served):
    """In Chromium, the engine the app serves, given the Hub's address first (a local server
    standing in) and the app's copy second: with the Hub up the model comes from it, checked by
    its digest; with the Hub gone, from the app."""
    from playground import hub_link

    model = served.files["/browser/model/model_quantized.onnx"]
    with hub_stand_in(model.path) as (hub, asked):
        address = hub_link.model_address("someone/gpt-playground", hub)
        config = {**served.page_config(address), "sources": served.page_config(address)["modelSources"]}
        with generation_tab(chromium, app_server) as page:
            assert page.evaluate(LOAD_FROM, {**config, "sha256": model.digest}) == address
            assert asked == ["/someone/gpt-playground/resolve/main/onnx/model_quantized.onnx"]
            assert not page.errors
            # (the browser kept it: this page would take it from its cache, wherever the Hub is)
            page.evaluate("(url) => caches.open('gpt-playground').then((c) => c.delete(url))", address)
    with generation_tab(chromium, app_server) as page:  # the Hub gone: nothing listens there now
        source = page.evaluate(LOAD_FROM, {**config, "sha256": model.digest})
        assert source == urllib.parse.urljoin(app_server.url, model.url.lstrip("/")), source


@pytest.mark.slow
@pytest.mark.browser
def test_an_app_naming_a_model_repository_runs_the_hubs_copy_in_the_browser(tmp_path, served, chromium):
    """The app launched with PLAYGROUND_MODEL_REPO (and the Hub moved to a local stand-in): Run on:
    this browser downloads the model from the Hub's address, says so, and generates; with the Hub
    gone, from the app, and generates the same."""
    from benchmarks.app_server import launch, stop

    model = served.files["/browser/model/model_quantized.onnx"]
    stand_in = hub_stand_in(model.path)
    hub, asked = stand_in.__enter__()
    app = launch(tmp_path / "app.log", extra_env={"PLAYGROUND_MODEL_REPO": "someone/gpt-playground", "PLAYGROUND_HUB_URL": hub})

    def visit() -> tuple[str, list[int]]:
        context = chromium.browser.new_context()  # the module's Chromium (one Playwright a thread), a fresh cache
        context.set_default_timeout(120_000)
        try:
            with generation_tab(context, app) as page:
                run_on(page, "this browser")
                page.wait_for_selector("#gen-browser [data-ready=true]", state="attached", timeout=180_000)
                said = page.inner_text("#gen-browser")
                page.locator("#gen-prompt textarea").fill(PROMPT)
                set_number(page, "gen-temp", 0)
                set_number(page, "gen-max", 8)
                generate_here(page)
                assert not page.errors
                return said, shown_ids(page)
        finally:
            context.close()

    try:
        said, from_hub = visit()
        assert "downloaded from the Hugging Face Hub" in said, said
        assert asked == ["/someone/gpt-playground/resolve/main/onnx/model_quantized.onnx"]
        stand_in.__exit__(None, None, None)  # the Hub unreachable now
        said, from_app = visit()
        assert "Hugging Face Hub" not in said and from_app == from_hub and len(from_hub) == 8
    finally:
        stop(app)
        stand_in.__exit__(None, None, None)


def test_without_onnxruntime_web_the_choice_says_what_is_missing_and_the_server_runs(tmp_path, shipped_onnx):
    from playground.ui import generation

    files = BrowserFiles.for_model(shipped_onnx, ort_dir=tmp_path)  # an empty folder: the repository's copy gone
    assert not files.available and all(r.startswith("/browser/views/") for r in files.files)  # the views alone: the app's tabs draw with them
    info = generation.run_on_info(files)
    assert info.startswith("Run on this browser needs onnxruntime-web's files, which come with the app (web/vendor/): ")
    assert f"{tmp_path / 'ort.wasm.min.mjs'} is missing" in info and info.endswith("Restart the app once they are back.")
    import gradio as gr

    with gr.Blocks() as demo:
        generation.build(shipped_resources(), files)
    radio = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "gen-run-on")
    assert radio.interactive is False and radio.value == "server" and "web/vendor/" in radio.info
    assert not any(getattr(b, "elem_id", None) in ("gen-run-browser", "gen-browser") for b in demo.blocks.values())
    assert any(getattr(b, "elem_id", None) == "gen-run" for b in demo.blocks.values())
