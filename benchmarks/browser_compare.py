"""Compare's untrained start in the static edition, drawn in the learner's browser (a benchmark, not a test):

    python -m benchmarks.browser_compare [--out DIR] [--rates 1 4 6] [--repeats 3]

Serves a static edition (written anew, or ``--out``) and, in Debian's headless Chromium with its CPU
throttled by each rate (4x: a mid-range phone, 6x: a low-end one), times drawing the untrained
model's 17.7 M weights in the page (web/engine/init.js's drawWeights: in Web Workers, one per core,
as the tab draws them, and on the page's own thread, given back every 50 ms), the link to Compare until all three comparisons are drawn (an empty
cache: the trained 8-bit weights downloaded from loopback and the untrained ones drawn meanwhile),
and a new prompt's click to its charts (two passes of the stage graph); the bytes the tab
fetched and the page's JavaScript heap after it. Beside them, Python drawing the same weights at
the app's first use (playground.initial.drawn_gpt). docs/browser.md keeps the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from benchmarks.browser_engine import ARGS, CHROMIUM, print_rows, static_edition

# In the page: data/compare.json's spec drawn `repeats` times (ms each).
DRAW = """async ([repeats, workers]) => {
  const { drawWeights } = await import('./engine/init.js');
  const site = await (await fetch('./data/site.json')).json();
  const { spec, seed } = await (await fetch(site.files['data/compare.json'])).json();
  const times = [];
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    await drawWeights(spec, seed, workers === null ? {} : { workers });
    times.push(performance.now() - t0);
  }
  return { times, cores: navigator.hardwareConcurrency };
}"""

LINK = "?tab=compare"


def draw_ms(browser, url: str, rate: int, repeats: int, workers: int | None = None) -> dict:
    """drawWeights' milliseconds with the CPU throttled ``rate`` times, by ``workers`` Web Workers
    (None: the page's default, one per core; 0: on the page's own thread)."""
    page = browser.new_page()
    page.goto(url + "?tab=tokenization", wait_until="domcontentloaded")
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": rate})
    out = page.evaluate(DRAW, [repeats, workers])
    page.close()
    return out


def compare_tab(browser, url: str, rate: int) -> dict[str, float]:
    """Link -> the three comparisons drawn, from an empty cache; then a new prompt's click -> its charts."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sizes: list[int] = []
    page.on("requestfinished", lambda r: sizes.append(r.sizes()["responseBodySize"]))
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": rate})
    start = time.perf_counter()
    page.goto(url + LINK, wait_until="domcontentloaded")
    page.wait_for_selector("#cmp-att-view[data-done]", timeout=900_000)
    opened = time.perf_counter() - start
    heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
    done = page.get_attribute("#cmp-next-view", "data-done")
    page.fill("#cmp-prompt", "JULIET.\nO Romeo, Romeo, wherefore art thou")
    start = time.perf_counter()
    page.click("#cmp-next-run")
    page.wait_for_function(f"document.querySelector('#cmp-next-view').dataset.done !== '{done}'", timeout=300_000)
    prompt = time.perf_counter() - start
    context.close()
    return {"opened s": opened, "prompt s": prompt, "bytes": sum(sizes), "heap": heap}


def python_draw(repeats: int) -> list[tuple[float, float]]:
    """(wall, cpu) seconds of drawn_gpt for the shipped model's shape, as the app's first Compare draws it."""
    from model import load_pretrained
    from playground.initial import drawn_gpt

    config = load_pretrained().config
    out = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        drawn_gpt(config, 0)
        out.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.browser_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="an existing static edition folder (default: written anew)")
    ap.add_argument("--rates", type=int, nargs="+", default=[1, 4, 6], help="CPU throttling rates")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    rows: list[tuple[str, str]] = []
    load = os.getloadavg()[0]
    py = python_draw(args.repeats)
    rows.append(("Python: drawn_gpt, 17.7 M weights (wall / CPU, median)",
                 f"{statistics.median(w for w, _ in py):.1f} s / {statistics.median(c for _, c in py):.1f} s"))
    with static_edition(args.out) as (_, url), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for rate in args.rates:
            alone = draw_ms(browser, url, rate, args.repeats, workers=0)
            pool = draw_ms(browser, url, rate, args.repeats)
            rows.append((f"Chromium CPU {rate}x: drawWeights on the page's thread / in {pool['cores']} workers (median)",
                         f"{statistics.median(alone['times']) / 1000:.1f} s / {statistics.median(pool['times']) / 1000:.1f} s"))
        for rate in args.rates:
            r = compare_tab(browser, url, rate)
            rows.append((f"Chromium CPU {rate}x: link -> all three drawn, empty cache", f"{r['opened s']:.1f} s"))
            rows.append((f"Chromium CPU {rate}x: a new prompt -> its charts (two passes)", f"{r['prompt s']:.1f} s"))
            if rate == args.rates[0]:
                rows.append(("bytes fetched for the tab / JS heap after it", f"{r['bytes'] / 1e6:.1f} MB / {r['heap'] / 1e6:.0f} MB"))
        browser.close()
    print_rows(f"{time.strftime('%Y-%m-%d')}, load average {load:.1f} at the start on {os.cpu_count()} cores", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
