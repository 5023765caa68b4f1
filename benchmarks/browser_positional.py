"""python -m benchmarks.browser_positional: click-to-drawn of the Positional encoding tab at
1024 positions x 512 dimensions, in headless Chromium (Debian's /usr/bin/chromium) on a launched
app (benchmarks/app_server.py).

Each repetition types a new base (10000, then 10001, ... so that every click computes a new
table), clicks Compute and waits until the summary, the table and the frequency plot all show
that base, then two animation frames (plotly has painted). Side by side in each repetition, the
same for the lesson's 100 x 20 table: the trip and the page's other figures, which a machine
shared with other work slows alike (the load average is printed with the times). Prints each
time, the medians and their ratio; the server's own share is ``python -m playground.bench``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

from benchmarks.app_server import app_url

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
D_MODEL, POSITIONS = 512, 1024
SMALL = (20, 100)  # the lesson's module example: d_model 20, 100 positions

# Drawn: the three places that name the base show the new one, then two frames have passed.
DRAWN_JS = """async (base) => {
  const t0 = performance.now();
  const text = (sel) => (document.querySelector(sel) || {}).textContent || '';
  while (!text('#pe-summary').includes(`base ${base}`)) await new Promise(r => setTimeout(r, 2));
  const answered = performance.now() - t0;
  const done = () => text('#pe-heatmap .gtitle').includes(`base ${base}`)
    && text('#pe-spectrum .gtitle').includes(`base ${base}`);
  while (!done()) await new Promise(r => setTimeout(r, 2));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return answered / 1000;
}"""


def click_to_drawn(page, base: int) -> tuple[float, float]:
    """Seconds from the click on Compute to the table for ``base`` drawn, and to the summary
    shown (the answer has arrived; the rest is the browser drawing the figures)."""
    page.locator("#pe-base input[type=number]").fill(str(base))
    page.evaluate("() => new Promise(r => requestAnimationFrame(r))")
    t0 = time.perf_counter()
    page.locator("#pe-run").click()
    t_click = time.perf_counter()
    answered = page.evaluate(DRAWN_JS, base)
    return time.perf_counter() - t0, t_click - t0 + answered


def set_size(page, size: tuple[int, int]) -> None:
    page.locator("#pe-dmodel input[type=number]").fill(str(size[0]))
    page.locator("#pe-npos input[type=number]").fill(str(size[1]))


def measure(url: str, repeats: int, width: int = 1280) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(times at 1024 x 512, times at 100 x 20), each (to drawn, to the answer shown)."""
    from playwright.sync_api import sync_playwright

    big, small = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.set_default_timeout(120_000)
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_role("tab", name=re.compile("Positional")).click()
        # The tab's first opening draws the model's own table: let it finish first.
        page.wait_for_function("() => document.querySelector('#pe-model-note').innerText.trim().length > 0")
        set_size(page, (D_MODEL, POSITIONS))
        click_to_drawn(page, 9999)  # warm-up: the first drawing loads plotly's code paths
        for i in range(repeats):
            set_size(page, SMALL)
            small.append(click_to_drawn(page, 10000 + 2 * i))
            set_size(page, (D_MODEL, POSITIONS))
            big.append(click_to_drawn(page, 10001 + 2 * i))
        browser.close()
    return big, small


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--url", help="an app already running (default: launch one)")
    args = parser.parse_args(argv)
    with app_url(args.url) as url:
        load_before = os.getloadavg()[0]
        big, small = measure(url, args.repeats)
        load_after = os.getloadavg()[0]
    print(f"load average {load_before:.1f} before, {load_after:.1f} after ({os.cpu_count()} cores)")
    for name, times in ((f"{POSITIONS} x {D_MODEL}", big), (f"{SMALL[1]} x {SMALL[0]}", small)):
        print(f"Positional encoding {name}, click to drawn in headless Chromium (s): "
              + ", ".join(f"{t:.2f}" for t, _ in times)
              + f"; median {statistics.median(t for t, _ in times):.2f}")
    ratio = statistics.median(t for t, _ in big) / statistics.median(t for t, _ in small)
    print(f"{POSITIONS} x {D_MODEL} takes {ratio:.2f}x the time of {SMALL[1]} x {SMALL[0]}")


if __name__ == "__main__":
    main()
