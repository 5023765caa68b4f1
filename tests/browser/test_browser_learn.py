"""Headless Chromium on the Watch it learn tab, at 1280 px and at a phone's 390 px, the run on the
server: the reference lines before Start, Start disabled while a run trains, Stop, a skewed start
whose hockey stick fills a visible part of the log-scale step axis, two runs in the table, the
trained model continuing a prompt, and no horizontal scroll. Screenshots docs/screenshots/learn.png
and phone-learn.png with PLAYGROUND_SCREENSHOTS=1. Then "Run on: this browser", the page's
default: the run trained in the page's Web Worker, its step 0 PyTorch's, Stop, the model
continuing a prompt, the server's CPU untouched (its trainer never sees the run)."""

from __future__ import annotations

import math
import re

import pytest

from test_browser import browser_page, save_screenshot, shots_dir  # noqa: F401 -- fixture reused
from test_browser_page import PHONE, open_tab, page_width

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 900}
GD = "document.querySelector('#learn-chart .js-plotly-plot')"
# The loss points drawn (the chart's last trace is the training loss).
POINTS_JS = f"() => {{ const gd = {GD}; return gd && gd.data ? gd.data[gd.data.length - 1].x.length : 0; }}"


def points(page) -> int:
    return page.evaluate(POINTS_JS)


def start_disabled(page) -> bool:
    return page.locator("#learn-start").is_disabled()


def train_then_stop(page, at_least: int) -> None:
    page.locator("#learn-start").click()
    page.wait_for_function(f"(n) => ({POINTS_JS})() >= n", arg=at_least, timeout=180_000)
    assert start_disabled(page)  # one run at a time from a page
    page.locator("#learn-stop").dispatch_event("click")
    page.wait_for_function("() => document.querySelector('#learn-status').innerText.startsWith('Stopped after')", timeout=30_000)
    n = points(page)
    page.wait_for_timeout(1000)  # a check that no point comes after Stop needs time to pass
    assert points(page) == n
    page.wait_for_function("() => !document.querySelector('#learn-start').disabled")


def the_lesson(page, width: int, shot: str) -> None:
    page.goto(page.url.split("?")[0] + "?tab=learn&run_on=server", wait_until="domcontentloaded")  # the server's runs
    page.wait_for_function("() => !document.body.classList.contains('pg-learn-browser') && document.querySelector('#learn-start')")
    assert page.locator("#learn-run-on input[value=server]").is_checked()
    page.locator("#learn-chart .js-plotly-plot").wait_for()
    # The lines to beat are drawn before Start.
    page.wait_for_function(f"() => {GD}.data.some(t => (t.name || '').startsWith('ln V'))", timeout=60_000)
    train_then_stop(page, at_least=30)
    assert page.locator("#learn-status").inner_text().startswith("Stopped after")
    # The skewed start with the same seed: the hockey stick.
    page.locator("#learn-init").get_by_test_id("skewed-radio-label").click()
    page.locator("#learn-start").click()
    # The new run's curve (the first run's is now the grey one), 15 steps of it.
    page.wait_for_function(
        f"() => ({GD}.data[0].name || '').startsWith('earlier run') && ({POINTS_JS})() >= 15", timeout=180_000
    )
    chart = page.evaluate(
        f"""() => {{ const gd = {GD}, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const loss = gd.data[gd.data.length - 1];
        return {{type: xa.type, xrange: xa.range, yrange: ya.range, width: xa._length, first: loss.y[0], tenth: loss.y[10],
                 refs: Object.fromEntries(gd.data.filter(t => t.y.length === 2).map(t => [t.name, t.y[0]]))}}; }}"""
    )
    ln_v = next(v for k, v in chart["refs"].items() if k.startswith("ln V"))
    assert chart["type"] == "log"
    # Steps 0 to 10 (x = 1 to 11 on the log axis) take at least a quarter of the plot's width...
    lo, hi = chart["xrange"]
    share = (math.log10(11) - lo) / (hi - lo)
    assert share >= 0.25 and share * chart["width"] >= 0.25 * chart["width"] > 40, chart
    # ... and the stick itself is on it: step 0 far above ln V, inside the y range, back near ln V by step 10.
    assert chart["first"] > ln_v + 1 and chart["yrange"][1] >= chart["first"], chart
    assert chart["tenth"] < chart["first"] - 1, chart
    status = page.locator("#learn-status").inner_text()
    assert "above an even guess" in status
    # Seed 0's skewed curve climbs over its first steps: the page says why (learn_view.early_rise_words).
    assert "Its curve first rises" in status and "own batch" in status and "Checked:" in status, status
    samples = page.locator("#learn-samples .gen-sample-title").all_inner_texts()
    assert samples[0] == "step 0: random weights", samples
    cards = page.locator("#learn-stats .pg-card span").all_inner_texts()
    assert cards[:3] == ["steps", "tokens seen", "tokens / s"] and "mean of last 20 steps" in cards[3], cards
    # The time so far, a tenth of a second under 10 s (whole seconds showed 0 for the first steps).
    assert cards[4] == "seconds", cards
    seconds = page.locator("#learn-stats .pg-card b").nth(4).inner_text()
    assert re.fullmatch(r"\d\.\d|\d{2,}", seconds) and float(seconds) > 0, seconds
    assert page_width(page) <= width
    save_screenshot(page, page.shots_dir / f"{shot}.png")
    page.locator("#learn-stop").dispatch_event("click")
    page.wait_for_function("() => document.querySelector('#learn-status').innerText.startsWith('Stopped after')", timeout=30_000)
    # Both runs in the table, newest first, the earlier one in grey on the chart.
    page.wait_for_function("() => document.querySelectorAll('#learn-runs tbody tr').length === 2")
    rows = page.locator("#learn-runs tbody tr").all_inner_texts()
    assert "skewed" in rows[0] and "proper" in rows[1], rows
    assert page.evaluate(f"() => {GD}.data[0].name").startswith("earlier run: proper start")
    # The stopped run's model continues a prompt.
    page.locator("#learn-prompt textarea").fill("Romeo.\n")
    page.locator("#learn-try").click()
    page.wait_for_function("() => document.querySelector('#learn-try-out').innerText.startsWith('Romeo.')")
    assert len(page.locator("#learn-try-out").inner_text()) > 100
    assert page_width(page) <= width
    assert not page.errors, page.errors


def test_learn_tab_at_1280(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=DESKTOP) as page:
        the_lesson(page, DESKTOP["width"], "learn")


def test_learn_tab_on_a_phone(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=PHONE, is_mobile=True, has_touch=True) as page:
        the_lesson(page, PHONE["width"], "phone-learn")


BROWSER_GD = "document.querySelector('#lrn-chart')"
BROWSER_LOSSES = f"() => {{ const gd = {BROWSER_GD}; return gd && gd.data ? gd.data[gd.data.length - 1].y.slice() : []; }}"


def test_this_browser_trains_by_default_and_the_server_does_nothing(app_server, shots_dir, data_dir):
    """The page's default where it can train: the app's own controls (seed 3, skewed) drive the
    view both editions share; its step 0 is PyTorch's for those settings; Stop; the model continues
    a prompt; and the server's trainer never had the run."""
    from playground.learn import run as learn_run
    from playground.learn.batches import batch
    from playground.learn.corpus import load_corpus

    corpus = load_corpus("char")
    s = learn_run.settings(seed=3, init="skewed")
    x, y = batch(corpus.train, s.seed, 0, 64, learn_run.BATCH_SIZE)
    step0 = learn_run.build_model(s, corpus.vocab_size)(x, y).loss.item()
    with browser_page(app_server, shots_dir, viewport=DESKTOP) as page:
        open_tab(page, "Watch it learn")
        page.wait_for_function("() => document.body.classList.contains('pg-learn-browser')")  # the default
        assert page.locator("#learn-run-on input[value=browser]").is_checked()
        assert not page.locator("#learn-start").is_visible() and page.locator("#learn-start-browser").is_visible()
        page.locator("#learn-init").get_by_test_id("skewed-radio-label").click()
        page.locator("#learn-seed input").fill("3")
        page.wait_for_selector("#learn-browser [data-ready=true]", timeout=300_000)
        asked: list[str] = []  # what the page asks the server from Start to the end (Gradio's events, the API)
        page.on("request", lambda r: asked.append(r.url) if "/gradio_api/" in r.url and "heartbeat" not in r.url else None)
        page.locator("#learn-start-browser").click()
        page.wait_for_function(f"() => ({BROWSER_LOSSES})().length >= 3", timeout=300_000)
        assert page.evaluate(BROWSER_LOSSES)[0] == pytest.approx(step0, abs=1e-3)
        assert page.locator("#learn-start-browser").is_disabled()
        page.locator("#learn-stop-browser").click()
        page.wait_for_function("() => document.querySelector('#lrn-status').textContent.startsWith('Stopped after')", timeout=60_000)
        assert "seed 3" in page.locator("#lrn-runs").inner_text()
        assert asked == [], asked  # the run cost the server nothing
        page.locator("#learn-prompt textarea").fill("Romeo.\n")
        page.wait_for_function("() => !document.querySelector('#learn-try-browser').disabled")
        page.locator("#learn-try-browser").click()
        page.wait_for_function("() => document.querySelector('#lrn-try-out').dataset.done === 'true'", timeout=60_000)
        assert page.locator("#lrn-try-out").inner_text().startswith("Romeo.")
        assert page_width(page) <= DESKTOP["width"]
        assert not page.errors, page.errors

