"""Click-to-drawn times of Inside the model in headless Chromium, in both editions (a benchmark, not a test):

    python -m benchmarks.browser_inside [--repeats 7] [--width 1280] [--edition app static] [--rates 1 4]
                                        [--url URL] [--static DIR]

The app: launches ``python app.py`` (benchmarks/app_server.py; or uses a running app with
``--url``). The static edition: writes it (``python -m deploy.static``; or serves ``--static DIR``)
and serves it with Python's own HTTP server. In Debian's Chromium at ``--width`` px, with the CPU
throttled by each of ``--rates`` (4x: a mid-range phone), it times, in the page, from the user's
action (the key press or click, its event's time stamp) to the next painted frame after the view
has drawn the new state: a new text (typed, then Run: the whole pass computed and drawn), the layer
and head moved one step with the arrow keys on their sliders, the token likewise (in the app its
rows come from the server; in the static edition its logit lens is computed then, unless the page
had already worked it out beside the last token: each change comes ``LOOK_S`` seconds after the
last, as a learner reads before moving on). Prints the median and the slowest of
``--repeats`` changes of each kind, and what a visitor with an empty cache downloads before
Inside's first number. docs/browser.md keeps the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from pathlib import Path

from benchmarks.app_server import app_url

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
LINES = (
    "Romeo.\nBut soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun!",
    "Juliet.\nO Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name;",
    "Hamlet.\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer",
    "Antony.\nFriends, Romans, countrymen, lend me your ears;\nI come to bury Caesar, not to praise him.",
)
# Each edition's controls: (the text box, a slider's element for the arrow keys, the run button).
CONTROLS = {
    "app": ("#ins-text textarea", "#ins-{name} input[type=range]", "#ins-run"),
    "static": ("textarea#ins-text", "input#ins-{name}", "#ins-run"),
}
OPEN = {"app": "", "static": "?tab=inside"}

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


def drawn(state: tuple[int | None, ...], done: int, tokens: int | None = None) -> str:
    """The view has drawn ``state`` (layer, head, token; None: any) after its ``done``-th drawing,
    its rows there (nothing asked of the host still), with ``tokens`` tokens when given.
    Attributes only: the check runs at every change of the page, and reading text would lay it
    out each time."""
    parts = [f"Number(v.dataset.done) > {done}", "!v.dataset.pending"]
    parts += [f"v.dataset.{name} === '{value}'" for name, value in zip(("layer", "head", "token"), state) if value is not None]
    if tokens is not None:
        parts.append(f"v.dataset.tokens === '{tokens}'")
    return f"(v => Boolean(v) && {' && '.join(parts)})(document.querySelector('.ins-view'))"


def timed(page, cond: str, action: Callable[[], None]) -> tuple[float, float]:
    """Milliseconds from ``action``'s key press or click to the frame painted once ``cond`` holds,
    and of those, the ones the browser spent drawing after its elements held the answer."""
    page.evaluate(ARM, cond)
    action()
    page.wait_for_function("() => window.__drawn !== null", timeout=180_000)
    total, updated = page.evaluate("() => [window.__drawn, window.__updated]")
    return float(total), float(total - updated)


def view_state(page) -> tuple[tuple[int, int, int], int]:
    """(layer, head, token) the view shows, and how many times it has drawn."""
    d = page.evaluate("() => ({...document.querySelector('.ins-view').dataset})")
    return (int(d["layer"]), int(d["head"]), int(d["token"])), int(d["done"])


def throttle(page, rate: int) -> None:
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": rate})


# A learner looks at a state a moment before changing it: the view asks for the next token's rows
# meanwhile (its prefetch), as it would while they read.
LOOK_S = 1.5


def measure(url: str, repeats: int, width: int, edition: str = "app", rate: int = 1,
            look_s: float = LOOK_S) -> dict[str, list[tuple[float, float]]]:
    """Per kind of change, ``repeats`` (click to drawn, of which drawing) pairs in milliseconds,
    each change ``look_s`` seconds after the last was drawn."""
    from playwright.sync_api import sync_playwright

    from model import get_tokenizer

    tok = get_tokenizer()
    text_box, slider, run = CONTROLS[edition]
    times: dict[str, list[tuple[float, float]]] = {"text": [], "layer": [], "head": [], "token": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_context(viewport={"width": width, "height": 900}, device_scale_factor=1).new_page()
        page.set_default_timeout(180_000)
        page.goto(url + OPEN[edition], wait_until="domcontentloaded")
        if edition == "app":
            page.get_by_role("tab", name="Inside the model").click()
        page.wait_for_function("() => Number(document.querySelector('.ins-view')?.dataset.done) > 0")
        if rate != 1:
            throttle(page, rate)
        box = page.locator(text_box).first
        for r in range(repeats):
            # a new text each time (never in a cache): its first line names the repeat
            text = f"{r + 1}. " + LINES[r % len(LINES)]
            box.fill(text)
            (layer, head, _), done = view_state(page)
            n = len(tok.encode(text))
            # the opening token is the page's to choose: any token, once drawn with this text's count
            times["text"].append(timed(page, drawn((layer, head, None), done, n), lambda: page.locator(run).click()))
            for name in ("layer", "head", "token"):
                page.wait_for_timeout(1000 * look_s)
                state, done = view_state(page)
                i = ("layer", "head", "token").index(name)
                # one step, away from 0 where the slider starts there (the tab may open on token 0)
                key = "ArrowRight" if state[i] == 0 else "ArrowLeft"
                wanted = list(state)
                wanted[i] += 1 if key == "ArrowRight" else -1
                control = page.locator(slider.format(name=name))
                times[name].append(timed(page, drawn(tuple(wanted), done), lambda: control.press(key)))
        browser.close()
    return times


def first_number_bytes(url: str, edition: str, width: int) -> tuple[int, float]:
    """Bytes an empty cache downloads from opening the page (the app: and its Inside tab) to the
    view's first drawing, and the seconds it took."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_context(viewport={"width": width, "height": 900}).new_page()
        sizes: list[int] = []
        page.on("requestfinished", lambda r: sizes.append(r.sizes()["responseBodySize"]))
        start = time.perf_counter()
        page.goto(url + OPEN[edition], wait_until="domcontentloaded")
        if edition == "app":
            page.get_by_role("tab", name="Inside the model").click()
        page.wait_for_function("() => Number(document.querySelector('.ins-view')?.dataset.done) > 0", timeout=300_000)
        seconds = time.perf_counter() - start
        got = sum(sizes)
        browser.close()
    return got, seconds


@contextmanager
def static_url(folder: Path | None):
    """The static edition served on a free loopback port: ``folder``, or one written anew."""
    from benchmarks.browser_engine import serve

    with ExitStack() as stack:
        if folder is None:
            from deploy.static import write_static

            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            write_static(folder, progress=lambda text: None)
        server, url = serve(folder)
        stack.callback(server.shutdown)
        yield url


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--edition", nargs="+", choices=("app", "static"), default=["app", "static"])
    ap.add_argument("--rates", type=int, nargs="+", default=[1, 4], help="Chromium's CPU throttling rates")
    ap.add_argument("--url", help="a running app (default: launch python app.py)")
    ap.add_argument("--static", type=Path, help="a static edition's folder (default: written anew)")
    args = ap.parse_args(argv)
    results = []
    for edition in args.edition:
        with (app_url(args.url) if edition == "app" else static_url(args.static)) as url:
            got, seconds = first_number_bytes(url, edition, args.width)
            results.append((edition, None, got, seconds))
            for rate in args.rates:
                results.append((edition, rate, measure(url, args.repeats, args.width, edition, rate), None))
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d')}: Inside the model in headless Chromium at {args.width} px, click (or key) to drawn, "
          f"{args.repeats} changes each (load average {load:.1f} on {os.cpu_count()} cores):")
    for edition, rate, value, seconds in results:
        if rate is None:
            print(f"  {edition}: an empty cache downloads {value / 1e6:.1f} MB before Inside's first number ({seconds:.1f} s)")
            continue
        for name, pairs in value.items():
            total, drawing = [a for a, _ in pairs], [b for _, b in pairs]
            print(f"  {edition:6s} CPU {rate}x {name:5s}: median {statistics.median(total):6.0f} ms   max {max(total):6.0f} ms"
                  f"   (of which the browser's layout and paint: median {statistics.median(drawing):4.0f} ms)")


if __name__ == "__main__":
    main()
