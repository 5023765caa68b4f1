"""Click-to-drawn times of the Inside the model tab in headless Chromium (a benchmark, not a test):

    python -m benchmarks.browser_inside [--repeats 7] [--width 1280] [--url URL]

Launches ``python app.py`` (benchmarks/app_server.py; or uses a running app with ``--url``), opens
the tab in Debian's Chromium at 1280 px and times, in the page, from the user's action (the key
press or click, its event's time stamp) to the next painted frame after every changed panel shows
the new state: a new text (typed, then Run: the whole pass computed and drawn), the layer and head
moved one step with the arrow keys on their sliders, the token moved one step likewise. Prints the
median and the slowest of ``--repeats`` changes of each kind. docs/app.md keeps the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from collections.abc import Callable

from benchmarks.app_server import app_url

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
LINES = (
    "Romeo.\nBut soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun!",
    "Juliet.\nO Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name;",
    "Hamlet.\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer",
    "Antony.\nFriends, Romans, countrymen, lend me your ears;\nI come to bury Caesar, not to praise him.",
)

# Stamps the time of the next key press or click (its event's own time stamp, in the page's clock),
# then watches, via a MutationObserver, until ``cond`` holds; sets ``__drawn`` to the milliseconds
# from the action to the frame painted after it (two animation frames: the one that lays out, the
# next), and ``__updated`` to those until the page's elements held the answer (the rest is the
# browser's style, layout and paint).
ARM = """(cond) => {
  window.__drawn = null;
  window.__updated = null;
  let t0 = null;
  const stamp = (e) => { if (t0 === null) t0 = e.timeStamp; };
  document.addEventListener('keydown', stamp, {capture: true, once: true});
  document.addEventListener('click', stamp, {capture: true, once: true});
  const check = new Function('return (' + cond + ')');
  const obs = new MutationObserver(() => {
    if (t0 === null || !check()) return;
    obs.disconnect();
    window.__updated = performance.now() - t0;
    requestAnimationFrame(() => requestAnimationFrame(() => { window.__drawn = performance.now() - t0; }));
  });
  obs.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


# textContent, not innerText: the checks run at every change of the page, and innerText would
# force a layout each time (measured: 40 ms of a layer change).
def info_says(fragment: str) -> str:
    return f"(document.querySelector('#ins-info')?.textContent ?? '').includes({fragment!r})"


def panel_says(anchor: str, fragment: str) -> str:
    return f"(document.querySelector('#ins-s-{anchor}')?.textContent ?? '').includes({fragment!r})"


def timed(page, cond: str, action: Callable[[], None]) -> tuple[float, float]:
    """Milliseconds from ``action``'s key press or click to the frame painted once ``cond`` holds,
    and of those, the ones the browser spent drawing after its elements held the answer."""
    page.evaluate(ARM, cond)
    action()
    page.wait_for_function("() => window.__drawn !== null", timeout=120_000)
    drawn, updated = page.evaluate("() => [window.__drawn, window.__updated]")
    return float(drawn), float(drawn - updated)


def state(page) -> tuple[int, int, int]:
    """(layer, head, token) as the sliders' number boxes say."""
    return tuple(int(page.locator(f"#ins-{name} input[type=number]").input_value()) for name in ("layer", "head", "token"))


def measure(url: str, repeats: int, width: int) -> dict[str, list[tuple[float, float]]]:
    """Per kind of change, ``repeats`` (click to drawn, of which drawing) pairs in milliseconds."""
    from playwright.sync_api import sync_playwright

    times: dict[str, list[tuple[float, float]]] = {"text": [], "layer": [], "head": [], "token": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_context(viewport={"width": width, "height": 900}, device_scale_factor=1).new_page()
        page.set_default_timeout(120_000)
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_role("tab", name="Inside the model").click()
        page.wait_for_function("() => /tokens; showing layer/.test(document.querySelector('#ins-info')?.innerText ?? '')")
        box = page.locator("#ins-text textarea").first
        for r in range(repeats):
            # a new text each time (never in the pass cache): its first line names the repeat
            text = f"{r + 1}. " + LINES[r % len(LINES)]
            box.fill(text)
            times["text"].append(timed(page, f"{panel_says('output', text.split(chr(10))[-1][-12:])} && "
                                              f"{info_says('showing layer')}", lambda: page.locator("#ins-run").click()))
            for name in ("layer", "head", "token"):
                layer, head, token = state(page)
                # one step, away from 0 where the slider starts there (the tab may open on token 0)
                key = "ArrowRight" if {"layer": layer, "head": head, "token": token}[name] == 0 else "ArrowLeft"
                step = 1 if key == "ArrowRight" else -1
                layer, head, token = (layer + step * (name == "layer"), head + step * (name == "head"),
                                      token + step * (name == "token"))
                want = f"showing layer {layer}, head {head}, token {token} "
                cond = {
                    "layer": f"{info_says(want)} && {panel_says('layernorm', f'Layer {layer}, token {token}')}",
                    "head": f"{info_says(want)} && {panel_says('attention', f'Layer {layer}, head {head}')}",
                    "token": f"{info_says(want)} && {panel_says('layernorm', f'Layer {layer}, token {token}')}",
                }[name]
                rng = page.locator(f"#ins-{name} input[type=range]")
                times[name].append(timed(page, cond, lambda: rng.press(key)))
        browser.close()
    return times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--url", help="a running app (default: launch python app.py)")
    args = ap.parse_args(argv)
    with app_url(args.url) as url:
        times = measure(url, args.repeats, args.width)
    load = os.getloadavg()[0]
    print(f"Inside the model in headless Chromium at {args.width} px, click (or key) to drawn, {args.repeats} changes each "
          f"(load average {load:.1f} on {os.cpu_count()} cores):")
    for name, pairs in times.items():
        total, drawing = [a for a, _ in pairs], [b for _, b in pairs]
        print(f"  {name:6s} change: median {statistics.median(total):6.0f} ms   max {max(total):6.0f} ms"
              f"   (of which the browser's layout and paint: median {statistics.median(drawing):4.0f} ms)")


if __name__ == "__main__":
    main()
