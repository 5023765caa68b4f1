"""Headless Chromium on the launched app's Inside the model tab, at 1280 px and at a phone's
390 px: a text typed and run, the layer, head and token changed (each redraws the panels and the
map's highlight), a box of the map scrolls to its panel, bad input gets its message beside the
input, and nothing is wider than the screen. Screenshots docs/screenshots/inside.png and
phone-inside.png with PLAYGROUND_SCREENSHOTS=1 (tests/test_browser.py's convention)."""

from __future__ import annotations

import time

import pytest

from test_browser import browser_page, save_screenshot, shots_dir, textbox  # noqa: F401 -- fixture reused
from test_browser_page import PHONE, assert_stale, open_tab, page_width, wait_for_message

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 900}
TEXT = "Juliet.\nO Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name;"


def info(page) -> str:
    return page.locator("#ins-info").inner_text()


def wait_info(page, fragment: str) -> None:
    page.wait_for_function("(f) => document.querySelector('#ins-info').innerText.includes(f)", arg=fragment)


def set_slider(page, elem_id: str, value: int) -> None:
    """Type a value into a slider's number box and confirm it with Enter (the page's script turns
    that into the slider's release, as letting go of the handle)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def drive(page, width: int) -> int:
    """Run the text, change layer, head and token; returns the number of tokens."""
    open_tab(page, "Inside the model")
    # The example's pass is drawn when the tab first opens (it is not in the page's first load).
    from playground.inside import EXAMPLE_TEXTS, inside

    example = inside(EXAMPLE_TEXTS[0])
    wait_info(page, f"{len(example.fp.ids)} tokens; showing layer 0, head 0")
    page.locator("#ins-map a.ins-box").first.wait_for()
    textbox(page, "ins-text").fill(TEXT)
    page.locator("#ins-run").click()
    page.wait_for_function(
        "() => /^\\d+ tokens; showing layer 0, head 0, token (\\d+)/.test(document.querySelector('#ins-info').innerText)"
        " && document.querySelector('#ins-output').innerText.includes('wherefore')"
    )
    n = int(info(page).split(" ", 1)[0])
    assert f"token {n - 1}" in info(page)  # the last token by default
    assert page.locator("#ins-token input[type=number]").input_value() == str(n - 1)
    # every stage's panel, and the loss of every token coloured in the text
    for anchor in ("embedding", "layernorm", "attention", "residual", "ffn", "lens", "output"):
        assert page.locator(f"#ins-s-{anchor}").count() == 1
    assert page.locator("#ins-output .ins-lt").count() == n
    assert page.locator("#ins-residual-fig .js-plotly-plot").count() == 1

    t0 = time.perf_counter()
    set_slider(page, "ins-layer", 3)
    wait_info(page, "showing layer 3, head 0")
    print(f"\n{width} px: layer change redrawn in the browser in {(time.perf_counter() - t0) * 1000:.0f} ms")
    assert page.locator("#ins-map .ins-chip.ins-on").all_inner_texts() == ["3", "0"]
    assert "Layer 3, token" in page.locator("#ins-s-layernorm").inner_text()
    set_slider(page, "ins-head", 5)
    wait_info(page, "showing layer 3, head 5")
    assert "Layer 3, head 5" in page.locator("#ins-s-attention").inner_text()
    assert page.locator("#ins-map .ins-chip.ins-on").all_inner_texts() == ["3", "5"]
    set_slider(page, "ins-token", 4)
    wait_info(page, "head 5, token 4")
    # token 4 attends to keys 0..4; the later ones are one masked row
    rows = page.locator("#ins-s-attention tbody tr")
    assert rows.count() == 6 and "masked" in rows.nth(5).inner_text()
    assert page.locator("#ins-output .ins-lt.ins-on").count() == 1  # token 5, predicted from 0..4, outlined
    # A click on a token of the loss text shows the position that predicted it.
    page.locator("#ins-output .ins-lt").nth(8).click()
    wait_info(page, "head 5, token 7")
    assert page.locator("#ins-token input[type=number]").input_value() == "7"
    assert page.locator("#ins-output .ins-lt").nth(8).get_attribute("class") == "ins-lt ins-on"
    assert page_width(page) <= width, f"wider than the screen: {page_width(page)} px"
    return n


# One browser at a time (Playwright's sync API runs one per thread): each test opens its own.
@pytest.fixture
def desktop(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=DESKTOP) as pg:
        yield pg


@pytest.fixture
def phone(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=PHONE, is_mobile=True, has_touch=True) as pg:
        yield pg


def test_inside_the_model_at_1280(desktop):
    drive(desktop, DESKTOP["width"])
    # A box of the map scrolls to its panel.
    desktop.locator('#ins-map [data-goto="ins-s-ffn"]').click()
    desktop.wait_for_function("() => Math.abs(document.querySelector('#ins-s-ffn').getBoundingClientRect().top) < 40")
    # the map marks the stage in view; the panel's "↑ map" goes back
    desktop.locator('#ins-map .ins-box.ins-current[data-goto="ins-s-ffn"]').wait_for(state="attached")
    desktop.locator("#ins-s-ffn .ins-up").click()
    desktop.wait_for_function("() => Math.abs(document.querySelector('#ins-map').getBoundingClientRect().top) < 40")
    desktop.evaluate("() => window.scrollTo(0, 0)")
    desktop.wait_for_timeout(300)
    save_screenshot(desktop, desktop.shots_dir / "inside.png")
    assert not desktop.errors, desktop.errors


def test_inside_the_model_at_390(phone):
    drive(phone, PHONE["width"])
    # Bad input: its message beside the text, the last result kept and dimmed.
    before = info(phone)
    textbox(phone, "ins-text").fill("   ")
    phone.locator("#ins-run").click()
    assert "empty" in wait_for_message(phone, "ins-error")
    assert info(phone) == before
    assert_stale(phone, "ins-info", "ins-error")
    textbox(phone, "ins-text").fill(TEXT)
    phone.locator("#ins-run").click()
    phone.locator("#ins-error .pg-error-msg").wait_for(state="detached")
    wait_info(phone, "showing layer 3, head 5")
    phone.evaluate("() => window.scrollTo(0, 0)")
    phone.wait_for_timeout(300)
    assert page_width(phone) <= PHONE["width"]
    save_screenshot(phone, phone.shots_dir / "phone-inside.png")
    assert not phone.errors, phone.errors
