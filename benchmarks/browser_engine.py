"""The browser engine in headless Chromium beside native onnxruntime, in one run (a benchmark,
not a test):

    python -m benchmarks.browser_engine [--tokens 64] [--repeats 5] [--threads 1 2] [--out DIR]

Writes the static edition (``python -m deploy.static``) into a temporary folder (or uses
``--out``), serves it from a loopback server that also sends the cross-origin isolation headers
multi-threaded WebAssembly needs, and measures:

- decoding speed: greedy tokens/s of the engine in the page (one thread, and each ``--threads``
  count), with and without the candidates each step shows, beside plain onnxruntime on the same
  file in this process, one thread (what one learner gets from a server), alternated;
- what a learner waits for: from opening a Text generation link to the first token drawn, with an
  empty browser cache (cold: the model downloaded) and again with the model in the browser's cache;
  Generate's tokens/s as the page's own card shows it;
- the folder's size and the first screen's weight (bytes the browser fetches to show the first tab);
- the page's Generate beside the same page's engine alone (``--page-only`` for these rows alone), in
  the static edition and in the app's Text generation with "Run on: this browser" (the app
  launched from this checkout), with Chromium's CPU throttled 1x, 4x and 6x (``--rates``): the
  tokens/s the page shows, the engine's alone on the same tokens and candidates, and the first
  token from opening the page, with an empty cache and from the cache;
- whether shipping onnxruntime-web's wasm gzipped pays on a phone: the page's unpacking of it
  (``DecompressionStream``) with Chromium's CPU throttled 1x, 4x and 6x, beside the time the
  bytes it saves take at a phone's 10 and 50 Mbit/s.

Prints a table; docs/browser.md keeps the dated figures.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import re
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.plain_onnx import onnxruntime_greedy  # plain onnxruntime, no project code: what the tests compare with too

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-quic"]
GENERATION_LINK = "?tab=generation&text=ROMEO:&max_new_tokens=32&temperature=0"

# In the page: a fresh engine with `threads` WebAssembly threads (one onnxruntime module a page,
# so each thread count gets its own page), then `repeats` greedy runs of `tokens` tokens.
ENGINE_SPEED = """async ([threads, tokens, repeats]) => {
  const { Engine, loadOrt } = await import('./engine/engine.js');
  const site = await (await fetch('./data/site.json')).json();
  const f = site.files;
  const ort = await loadOrt('./vendor/ort/', { threads, wasm: f['vendor/ort/ort-wasm-simd-threaded.wasm.gz'] });
  const engine = await Engine.load({ ort, model: f['model/model.onnx'], tokenizer: f['model/tokenizer.json'], config: f['model/config.json'] });
  const ids = engine.tokenizer.encode('ROMEO:');
  const run = async (nCandidates) => {
    const t0 = performance.now(); let last;
    for await (const step of engine.generate(ids, { maxNewTokens: tokens, temperature: 0, nCandidates })) last = step;
    return { seconds: (performance.now() - t0) / 1000, ids: last.ids, ttft: last.timeToFirstToken };
  };
  await run(10); await run(0);  // warm-up: WebAssembly tiers up on the first calls
  const out = { with: [], without: [], ids: null, isolated: self.crossOriginIsolated };
  for (let r = 0; r < repeats; r++) {
    const a = await run(10); const b = await run(0);
    out.with.push(tokens / a.seconds); out.without.push(tokens / b.seconds); out.ids = a.ids;
  }
  return out;
}"""


class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files with the headers a static Space's ``custom_headers`` can set: cross-origin
    isolation, which SharedArrayBuffer (threads) needs."""

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

    def log_message(self, *args) -> None:
        pass


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


@contextlib.contextmanager
def static_edition(out: Path | None) -> Iterator[tuple[Path, str]]:
    """(folder, address) of a static edition served on loopback: ``out`` as it is, or one written
    anew into a temporary folder (removed afterwards)."""
    from deploy.static import write_static

    with tempfile.TemporaryDirectory() as tmp:
        folder = out
        if folder is None:
            folder = Path(tmp)
            write_static(folder, progress=lambda text: None)
        server, url = serve(folder)
        try:
            yield folder, url
        finally:
            server.shutdown()


def print_rows(heading: str, rows: list[tuple[str, str]]) -> None:
    """A benchmark's table: the heading, then each row's label and value in two columns."""
    width = max(len(k) for k, _ in rows)
    print(heading)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


def native_speed(path: Path, prompt: list[int], tokens: int) -> tuple[float, list[int]]:
    """Greedy tokens/s of :func:`onnxruntime_greedy` on one thread (what one learner gets from a
    server), and its ids. The session's start is timed too: a short run, so it is small."""
    start = time.perf_counter()
    ids = onnxruntime_greedy(path, prompt, tokens, threads=1)
    return tokens / (time.perf_counter() - start), ids


def first_token(browser, url: str, context=None) -> tuple[float, float, object]:
    """Seconds from opening the Text generation link to the first generated token drawn (the
    Generate button pressed as soon as the model is ready) and the page card's tokens/s, in
    ``context`` (a new one, empty cache, when None)."""
    context = context or browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url + GENERATION_LINK, wait_until="domcontentloaded")
    page.wait_for_selector("#gen-output[data-ready=true]", timeout=180_000)
    page.click("#gen-run")
    page.wait_for_selector("#gen-completion .gen-tok", timeout=60_000)
    waited = time.perf_counter() - start
    page.wait_for_selector("#gen-output[data-done=true]", timeout=60_000)
    card = page.inner_text("#gen-stats").split("\n")
    speed = float(card[card.index("tokens / s") - 1])
    page.close()
    return waited, speed, context


def first_screen_bytes(browser, url: str) -> tuple[int, int]:
    """Bytes and requests the browser fetches to show the first tab (Tokenization) from an empty cache."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sizes: list[int] = []
    page.on("requestfinished", lambda r: sizes.append(r.sizes()["responseBodySize"]))
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_function("document.querySelector('#tok-ids')?.textContent.startsWith('[')")
    page.wait_for_load_state("networkidle")
    context.close()
    return sum(sizes), len(sizes)


# In the page: the wasm.gz's bytes fetched once, then unpacked `repeats` times (ms each, median).
UNPACK = """async ([address, repeats]) => {
  const { gunzip } = await import('./engine/fetch.js');
  const packed = new Uint8Array(await (await fetch(address)).arrayBuffer());
  const times = []; let size = 0;
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now(); size = (await gunzip(packed)).length; times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)], packed: packed.length, size };
}"""


def unpack_cost(browser, url: str, address: str, rates=(1, 4, 6), repeats: int = 3) -> list[tuple[int, dict]]:
    """The page's unpacking of the wasm.gz with the CPU throttled by each of ``rates``."""
    out = []
    for rate in rates:
        page = browser.new_page()
        page.goto(url + "?tab=tokenization", wait_until="domcontentloaded")
        cdp = page.context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})
        out.append((rate, page.evaluate(UNPACK, [address, repeats])))
        page.close()
    return out


# In the page, after its own Generate: the page's loaded engine alone, the same greedy tokens with
# the candidates the page asks for, timed as the engine times itself (from the first token), median
# of `repeats` runs.
ENGINE_ALONE = """async ([tokens, repeats]) => {
  const engine = window.pgEngine;
  const ids = engine.tokenizer.encode('ROMEO:');
  const speeds = [];
  for (let r = 0; r < repeats; r++) {
    let last;
    for await (const step of engine.generate(ids, { maxNewTokens: tokens, temperature: 0, nCandidates: 10, stopAtEot: false })) last = step;
    speeds.push(last.tokensPerS);
  }
  speeds.sort((a, b) => a - b);
  return speeds[Math.floor(speeds.length / 2)];
}"""


def page_generate(browser, url: str, rate: int, tokens: int, repeats: int = 3) -> dict[str, float]:
    """The page's Generate with Chromium's CPU throttled ``rate`` times (4x: a mid-range phone, 6x:
    a low-end one): seconds from opening the link to the first token drawn and the page card's
    tokens/s, with an empty cache (cold) and again with the model in the browser's cache; then
    the same page's engine alone on the same tokens."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    link = f"?tab=generation&text=ROMEO:&max_new_tokens={tokens}&temperature=0"
    out: dict[str, float] = {}
    for visit in ("cold", "cached"):
        page = context.new_page()
        cdp = page.context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})
        start = time.perf_counter()
        page.goto(url + link, wait_until="domcontentloaded")
        page.wait_for_selector("#gen-output[data-ready=true]", timeout=600_000)
        page.click("#gen-run")
        page.wait_for_selector("#gen-completion .gen-tok", timeout=600_000)
        out[f"{visit} first token s"] = time.perf_counter() - start
        page.wait_for_selector("#gen-output[data-done=true]", timeout=600_000)
        card = page.inner_text("#gen-stats").split("\n")
        out[f"{visit} page tokens/s"] = float(card[card.index("tokens / s") - 1])
        if visit == "cached":
            speeds, alone = [], []
            for _ in range(repeats):  # the page's Generate again, warm, and the engine alone, in turns
                page.evaluate("() => { delete document.querySelector('#gen-output').dataset.done; }")
                page.click("#gen-run")
                page.wait_for_selector("#gen-output[data-done=true]", timeout=600_000)
                card = page.inner_text("#gen-stats").split("\n")
                speeds.append(float(card[card.index("tokens / s") - 1]))
                alone.append(page.evaluate(ENGINE_ALONE, [tokens, 1]))
            out["warm page tokens/s"] = statistics.median(speeds)
            out["engine alone tokens/s"] = statistics.median(alone)
        page.close()
    context.close()
    return out


def _stats_speed(page) -> float:
    """The tokens/s the app's browser panel shows once its generation has ended."""
    page.wait_for_function("() => document.querySelector('#gen-browser-stats')?.dataset.stopReason", timeout=600_000)
    return float(re.search(r"([\d.]+) tokens/s", page.inner_text("#gen-browser-stats")).group(1))


def app_generate(browser, app_url: str, rate: int, tokens: int, repeats: int = 3) -> dict[str, float]:
    """The app's Text generation with "Run on: this browser", as page_generate measures the static
    edition's: from opening the app to the first token drawn (this browser chosen and Generate
    pressed as soon as the model is ready), cold and cached, the panel's tokens/s, then the same
    page's engine alone (window.pgRunOnEngine) on the same tokens and candidates."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(600_000)  # (the app's page, throttled 6x on a busy machine, takes minutes)
    out: dict[str, float] = {}

    def fill(elem_id: str, value) -> None:
        box = page.locator(f"#{elem_id} input[type=number]").first
        box.fill(str(value))
        box.blur()

    def generate() -> None:
        page.evaluate("() => { const s = document.querySelector('#gen-browser-stats'); if (s) delete s.dataset.stopReason; }")
        page.evaluate("() => document.querySelector('#gen-output .gen-output')?.replaceChildren()")
        page.click("#gen-run-browser")

    for visit in ("cold", "cached"):
        page = context.new_page()
        cdp = page.context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})
        start = time.perf_counter()
        page.goto(app_url, wait_until="domcontentloaded")
        page.get_by_role("tab", name=re.compile("Text generation")).click()
        page.locator("#gen-run-on label", has_text="this browser").click()
        page.locator("#gen-prompt textarea").fill("ROMEO:")
        fill("gen-temp", 0)
        fill("gen-max", tokens)
        page.wait_for_selector("#gen-browser [data-ready=true]", state="attached", timeout=600_000)
        generate()
        page.wait_for_selector("#gen-output .gen-tok", state="attached", timeout=600_000)
        out[f"{visit} first token s"] = time.perf_counter() - start
        out[f"{visit} page tokens/s"] = _stats_speed(page)
        if visit == "cached":
            speeds, alone = [], []
            for _ in range(repeats):  # the page's Generate again, warm, and the engine alone, in turns
                generate()
                speeds.append(_stats_speed(page))
                alone.append(page.evaluate(ENGINE_ALONE.replace("window.pgEngine", "window.pgRunOnEngine"), [tokens, 1]))
            out["warm page tokens/s"] = statistics.median(speeds)
            out["engine alone tokens/s"] = statistics.median(alone)
        page.close()
    context.close()
    return out


def page_rows(edition: str, r: dict[str, float], rate: int) -> list[tuple[str, str]]:
    """A page_generate or app_generate measurement as the table's rows."""
    return [
        (f"{edition}, CPU {rate}x: link -> first token, cold / cached", f"{r['cold first token s']:.1f} s / {r['cached first token s']:.1f} s"),
        (f"{edition}, CPU {rate}x: page's Generate (card), cold / cached / warm median",
         f"{r['cold page tokens/s']:.0f} / {r['cached page tokens/s']:.0f} / {r['warm page tokens/s']:.0f} tokens/s"),
        (f"{edition}, CPU {rate}x: the page's engine alone, same tokens and candidates",
         f"{r['engine alone tokens/s']:.0f} tokens/s (page warm / engine: {r['warm page tokens/s'] / r['engine alone tokens/s']:.0%})"),
    ]


def engine_rows(browser, url: str, folder: Path, prompt: list[int], size: int, args, rows: list[tuple[str, str]]) -> None:
    """The engine alone beside native onnxruntime, the learner's waits and the folder's weight."""
    speeds = {}
    native = []
    for threads in args.threads:
        page = browser.new_page()
        page.goto(url + "?tab=tokenization", wait_until="domcontentloaded")
        speeds[threads] = page.evaluate(ENGINE_SPEED, [threads, args.tokens, args.repeats])
        page.close()
        for _ in range(args.repeats):  # the native side between the browser's runs: the same machine load
            native.append(native_speed(folder / "model" / "model.onnx", prompt, args.tokens))
    native_ids = native[0][1]
    native_speed_median = statistics.median(s for s, _ in native)
    for threads, r in speeds.items():
        same = "same ids" if r["ids"] == native_ids else "ids differ"
        iso = "" if r["isolated"] else " (page not cross-origin isolated: one thread in effect)"
        rows.append((f"engine in Chromium, {threads} thread{'s' * (threads > 1)}{iso}, with the candidates",
                     f"{statistics.median(r['with']):.0f} tokens/s ({same} as native)"))
        rows.append((f"engine in Chromium, {threads} thread{'s' * (threads > 1)}, ids only",
                     f"{statistics.median(r['without']):.0f} tokens/s"))
    rows.append(("plain onnxruntime in Python, 1 thread, same file", f"{native_speed_median:.0f} tokens/s"))
    one = statistics.median(speeds[args.threads[0]]["with"])
    rows.append(("browser / native (with the candidates)", f"{one / native_speed_median:.2f}x"))

    cold, cold_speed, context = first_token(browser, url)
    warm, warm_speed, _ = first_token(browser, url, context)
    context.close()
    rows.append(("link opened -> first token, empty cache (model downloaded from loopback)", f"{cold:.2f} s"))
    rows.append(("link opened -> first token, model in the browser's cache", f"{warm:.2f} s"))
    rows.append(("Generate's tokens/s as the page's card shows it (cold, cached)", f"{cold_speed:.0f}, {warm_speed:.0f}"))
    first_bytes, requests = first_screen_bytes(browser, url)
    rows.append(("first screen (Tokenization): bytes fetched", f"{first_bytes / 1e6:.2f} MB in {requests} requests"))
    rows.append(("the static folder", f"{size / 1e6:.1f} MB"))
    import json

    wasm = json.loads((folder / "data" / "site.json").read_text())["files"]["vendor/ort/ort-wasm-simd-threaded.wasm.gz"]
    for rate, r in unpack_cost(browser, url, wasm):
        saved = r["size"] - r["packed"]
        rows.append((f"wasm.gz ({r['packed'] / 1e6:.1f} MB -> {r['size'] / 1e6:.1f} MB) unpacked in the page, CPU {rate}x slower",
                     f"{r['ms']:.0f} ms, against {saved * 8 / 10e6:.1f} s (10 Mbit/s) or {saved * 8 / 50e6:.1f} s "
                     f"(50 Mbit/s) for the {saved / 1e6:.1f} MB it saves"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.browser_engine", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", type=Path, help="an existing static edition folder (default: written anew)")
    ap.add_argument("--rates", type=int, nargs="+", default=[1, 4, 6], help="CPU throttling rates for the page's Generate")
    ap.add_argument("--page-tokens", type=int, default=128, help="greedy tokens of the page's Generate measured")
    ap.add_argument("--page-only", action="store_true", help="only the page's Generate beside the engine alone")
    ap.add_argument("--editions", nargs="+", choices=["static", "app"], default=["static", "app"],
                    help="whose page's Generate: the static edition's, the app's Run on: this browser (launched from this checkout)")
    args = ap.parse_args(argv)

    from model import get_tokenizer
    from playwright.sync_api import sync_playwright

    prompt = get_tokenizer().encode("ROMEO:")
    rows: list[tuple[str, str]] = []
    app = None
    with static_edition(args.out) as (folder, url):
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        try:
            if "app" in args.editions:
                from benchmarks.app_server import launch

                app = launch(Path(tempfile.mkdtemp()) / "app.log")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for rate in args.rates:  # the two editions one after the other at each rate: the same machine load
                    done = len(rows)
                    if "static" in args.editions:
                        rows += page_rows("static edition", page_generate(browser, url, rate, args.page_tokens), rate)
                    if app is not None:
                        rows += page_rows("app, this browser", app_generate(browser, app.url, rate, args.page_tokens), rate)
                    for k, v in rows[done:]:  # as they come: a long run's first rates survive a later failure
                        print(f"{k}  {v}", flush=True)
                if not args.page_only:
                    engine_rows(browser, url, folder, prompt, size, args, rows)
                browser.close()
        finally:
            if app is not None:
                from benchmarks.app_server import stop

                stop(app)
    print_rows(f"{time.strftime('%Y-%m-%d')}, greedy from 'ROMEO:': {args.tokens} tokens for the engine rows (median of {args.repeats}), "
               f"{args.page_tokens} for the page's Generate rows", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
