"""Headless Chromium on the Watch it learn tab, at 1280 px and at a phone's 390 px:
Start, the chart growing while the model trains, Stop, and no horizontal scroll. Screenshots
docs/screenshots/learn.png and phone-learn.png with PLAYGROUND_SCREENSHOTS=1."""

from __future__ import annotations

import pytest

from test_browser import browser_page, save_screenshot, shots_dir  # noqa: F401 -- fixture reused
from test_browser_page import PHONE, open_tab, page_width

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 900}
# The number of loss points drawn (the chart's last trace is the training loss).
POINTS_JS = "() => { const gd = document.querySelector('#learn-chart .js-plotly-plot'); return gd && gd.data ? gd.data[gd.data.length - 1].x.length : 0; }"


def points(page) -> int:
    return page.evaluate(POINTS_JS)


def start_watch_stop(page, width: int, shot: str, steps_before_shot: int) -> None:
    open_tab(page, "Watch it learn")
    page.locator("#learn-chart .js-plotly-plot").wait_for()
    page.locator("#learn-start").click()
    # It trains: the chart gets points, then more of them (polled, however slow the machine).
    page.wait_for_function(f"() => ({POINTS_JS})() >= 2", timeout=120_000)
    first = points(page)
    page.wait_for_function(f"(n) => ({POINTS_JS})() > n + 10", arg=first, timeout=60_000)
    page.wait_for_function(f"(n) => ({POINTS_JS})() >= n", arg=steps_before_shot, timeout=60_000)
    assert page.locator("#learn-status").inner_text().startswith("At step 0 the loss was")
    cards = page.locator("#learn-stats .pg-card span").all_inner_texts()
    assert cards[:3] == ["steps", "tokens seen", "tokens / s"], cards
    assert page.locator("#learn-samples .gen-sample-title").first.inner_text().startswith("step ")
    assert page_width(page) <= width
    save_screenshot(page, page.shots_dir / f"{shot}.png")
    # Stop: the page says so, and the chart stops growing.
    page.locator("#learn-stop").dispatch_event("click")
    page.wait_for_function("() => document.querySelector('#learn-status').innerText.startsWith('Stopped after')")
    n1 = points(page)
    page.wait_for_timeout(1500)
    assert points(page) == n1
    # The stopped run's model continues a prompt.
    page.locator("#learn-prompt textarea").fill("Romeo.\n")
    page.locator("#learn-try").click()
    page.wait_for_function("() => document.querySelector('#learn-try-out').innerText.startsWith('Romeo.')")
    assert len(page.locator("#learn-try-out").inner_text()) > 100
    assert page_width(page) <= width
    assert not page.errors, page.errors


def set_seconds(page, seconds: int) -> None:
    box = page.locator("#learn-seconds input[type=number]")
    box.fill(str(seconds))
    box.press("Enter")


def test_learn_tab_at_1280(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=DESKTOP) as page:
        # A short proper run to its end, then the skewed start beside it (the previous run in grey).
        open_tab(page, "Watch it learn")
        set_seconds(page, 5)
        page.locator("#learn-start").click()
        page.wait_for_function("() => document.querySelector('#learn-status').innerText.startsWith('Finished')", timeout=120_000)
        assert "held-out plays" in page.locator("#learn-status").inner_text()
        set_seconds(page, 60)
        page.locator("#learn-init").get_by_test_id("skewed-radio-label").click()
        start_watch_stop(page, DESKTOP["width"], "learn", steps_before_shot=400)
        names = page.evaluate("() => document.querySelector('#learn-chart .js-plotly-plot').data.map(t => t.name)")
        assert names[0].startswith("previous run (proper start") and names[-1] == "training loss", names
        assert "above an even guess" in page.locator("#learn-status").inner_text()


def test_learn_tab_on_a_phone(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=PHONE, is_mobile=True, has_touch=True) as page:
        start_watch_stop(page, PHONE["width"], "phone-learn", steps_before_shot=250)
