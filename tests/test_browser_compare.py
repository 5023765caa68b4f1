"""Headless Chromium on the launched app's Compare tab: the trained model beside its untrained
initialisation, for each of the three comparisons; screenshots (into docs/screenshots/ with
PLAYGROUND_SCREENSHOTS=1, as tests/test_browser.py)."""

from __future__ import annotations

import pytest

from playground import compare as cmp
from test_browser import open_tab, page, shot, shots_dir, textbox  # noqa: F401 -- fixtures reused

pytestmark = pytest.mark.browser


def _plot_text(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id}").inner_text()


def test_compare_tab_side_by_side(page):
    open_tab(page, "Compare")
    page.locator("#cmp-loss").wait_for()
    loss = page.locator("#cmp-loss").inner_text()
    assert "trained model" in loss and "untrained initialisation" in loss and "10.82" in loss
    for elem in ("cmp-next-a", "cmp-next-b", "cmp-att-a", "cmp-att-b"):
        page.locator(f"#{elem} .js-plotly-plot").first.wait_for()
    # Attention opens on the trained model's clearest head on the sentence, named in both
    # charts' titles, on the sliders and in the line that says how sharp each side is.
    opening = cmp.opening_head(page.locator("#cmp-sentence textarea").input_value())
    where = f"layer {opening.layer}, head {opening.head}"
    assert f"trained model: {where}" in _plot_text(page, "cmp-att-a")
    assert f"{cmp.UNTRAINED}: {where}" in _plot_text(page, "cmp-att-b")
    assert page.locator("#cmp-layer input[type=number]").input_value() == str(opening.layer)
    assert page.locator("#cmp-head input[type=number]").input_value() == str(opening.head)
    assert page.locator("#cmp-att-spread").inner_text().startswith(f"Layer {opening.layer}, head {opening.head}:")
    # One probability axis for both next-token charts (a 0.01 % bar is not drawn as long as a
    # 15 % one), and the charts and the line above them say so.
    axes = page.evaluate(
        "() => ['a', 'b'].map((s) => { const xa = document.querySelector(`#cmp-next-${s} .js-plotly-plot`)._fullLayout.xaxis;"
        " return {type: xa.type, range: xa.range, title: xa.title.text}; })"
    )
    assert axes[0] == axes[1] and axes[0]["type"] == "log" and axes[0]["title"] == cmp.SHARED_AXIS_TITLE, axes
    assert "share one probability axis, on a log scale" in page.locator("#cmp-loss").inner_text()
    shot(page, "compare")

    # A new prompt: both charts redraw with its candidates.
    textbox(page, "cmp-prompt").fill("JULIET: O Romeo, Romeo, wherefore art")
    page.locator("#cmp-next-run").click()
    page.wait_for_function("() => document.querySelector('#cmp-loss').innerText.includes('10.82') && "
                           "!document.querySelector('#cmp-loss').innerText.includes('pending')")
    page.wait_for_function("() => document.querySelector('#cmp-next-a').innerText.includes('thou')")

    # Nearest neighbours: "queen" beside "king" only after training.
    textbox(page, "cmp-word").fill("king")
    page.locator("#cmp-nb-run").click()
    page.wait_for_function("() => document.querySelector('#cmp-nb-a').innerText.includes('queen')")
    assert "queen" not in page.locator("#cmp-nb-b").inner_text()

    # Attention on a new sentence, another layer: both heatmaps show its tokens.
    textbox(page, "cmp-sentence").fill("to be or not to be")
    page.locator("#cmp-att-run").click()
    page.wait_for_function("() => document.querySelector('#cmp-att-b').innerText.includes('not')")
    assert "not" in _plot_text(page, "cmp-att-a")
    spread = page.locator("#cmp-att-spread").inner_text()
    assert cmp.head_summary(cmp.compare_attention("to be or not to be", opening.layer, opening.head)).replace("**", "") == spread, spread
    shot(page, "compare-edited")
    assert not page.errors, page.errors


def test_compare_tab_at_phone_width(page):
    """At a phone's width (390 px) the two sides stack and nothing of the tab is wider than the
    page's column (the page's own width at 390 px has its own test, in test_browser_page.py)."""
    open_tab(page, "Compare")
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.locator("#cmp-next-a .js-plotly-plot").first.wait_for()
        too_wide_js = """() => {
                const column = document.querySelector('#cmp-prompt').closest('.tabitem, [role=tabpanel]') || document.body;
                const right = column.getBoundingClientRect().right;
                return [...column.querySelectorAll('[id^=cmp-] *')]
                    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > right + 1)
                    .map(e => e.tagName + '.' + (e.className.baseVal ?? e.className)).slice(0, 5);
            }"""
        try:  # plotly redraws at the new width a moment later: wait until it fits, 5 s at most
            page.wait_for_function(f"() => ({too_wide_js})().length === 0", timeout=5_000)
        except Exception:  # noqa: BLE001 -- the assertion below names what stayed too wide
            pass
        too_wide = page.evaluate(too_wide_js)
        assert not too_wide, f"wider than the tab: {too_wide}"
        a, b = page.locator("#cmp-next-a").bounding_box(), page.locator("#cmp-next-b").bounding_box()
        row = page.locator("#cmp-next-a").locator("xpath=../..").bounding_box()
        if row["width"] < 2 * 320:  # no room for two sides of 320 px: they stack
            assert b["y"] >= a["y"] + a["height"] - 1, "squeezed side by side"
        else:  # (the page itself is wider than the phone while another tab overflows it)
            assert b["x"] >= a["x"] + 319
        shot(page, "compare-phone")
    finally:
        page.set_viewport_size({"width": 1360, "height": 900})
