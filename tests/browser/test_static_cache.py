"""A return visit to the static edition downloads nothing large, whatever the host: the model,
onnxruntime-web's WebAssembly, plotly.js and the tokenizer come from the page's Cache Storage
(web/engine/fetch.js), not from the browser's HTTP cache and the host's headers. Served by
``python -m http.server``'s own handler, which counts the bytes it sends, with the least helpful
headers a host could send (``Cache-Control: no-store``: the HTTP cache keeps nothing); one Chromium
profile for both visits, as a learner's browser."""

from __future__ import annotations

import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import wait_for
from static_site import static_site  # noqa: F401
from test_browser import ARGS, CHROMIUM, TIMEOUT_MS

pytestmark = pytest.mark.browser

URL = "?tab=generation&text=ROMEO:&max_new_tokens=4&temperature=0"
CACHED = ("model.onnx", "ort-wasm-simd-threaded.wasm.gz", "plotly.min.js.gz", "tokenizer.json")


class Counting(SimpleHTTPRequestHandler):
    """http.server's handler (no compression), counting body bytes, telling the browser to keep nothing."""

    sent: dict[str, int] = {}

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def copyfile(self, source, outputfile) -> None:
        data = source.read()
        outputfile.write(data)
        Counting.sent[self.path] = Counting.sent.get(self.path, 0) + len(data)

    def log_message(self, *args) -> None:
        pass


def visit(context, base: str) -> tuple[float, float]:
    """Open the generation link, Generate, wait for the text and plotly.js: (s to the model ready,
    s to the first generated token), from the navigation."""
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.perf_counter()
    page.goto(base + URL, wait_until="domcontentloaded")
    page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
    ready = time.perf_counter() - t0
    page.click("#gen-run")
    page.wait_for_selector("#gen-completion .gen-tok", timeout=120_000)
    first = time.perf_counter() - t0
    page.wait_for_selector("#gen-output[data-done=true]", timeout=120_000)
    page.wait_for_function("() => !!window.Plotly", timeout=120_000)
    # the cache's writes are not awaited by the page: wait until it holds every large file
    held = lambda: page.evaluate("""async () => (await (await caches.open('gpt-playground')).keys())
        .map((k) => new URL(k.url).pathname.split('/').pop())""")  # noqa: E731
    wait_for(lambda: set(CACHED) <= set(held()), 60, 0.2, message="Cache Storage to hold the model, the wasm and plotly.js")
    assert not errors, errors
    page.close()
    return ready, first


def test_a_return_visit_fetches_under_a_megabyte(static_site, tmp_path):
    from playwright.sync_api import sync_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Counting, directory=str(static_site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    profile = tmp_path / "profile"
    try:
        with sync_playwright() as p:
            visits = []
            for _ in range(2):
                Counting.sent = {}
                context = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, args=ARGS)
                try:
                    visits.append((visit(context, base), sum(Counting.sent.values()), dict(Counting.sent)))
                finally:
                    context.close()
    finally:
        server.shutdown()
    (first_ready, first_token), first_bytes, _ = visits[0]
    (again_ready, again_token), again_bytes, again_sent = visits[1]
    print(f"\nfirst visit: {first_bytes / 1e6:.1f} MB, model ready {first_ready:.1f} s, first token {first_token:.1f} s; "
          f"return visit: {again_bytes / 1e3:.0f} kB, model ready {again_ready:.1f} s, first token {again_token:.1f} s")
    assert first_bytes > 20e6  # the model (18 MB), the wasm and plotly.js gzipped: the first visit did download them
    assert again_bytes < 1e6, sorted(again_sent.items(), key=lambda kv: -kv[1])[:8]
    assert not any(name in path for path in again_sent for name in CACHED)
