"""Headless Chromium on the launched app's Compare tab: the trained model beside its untrained
initialisation, for each of the three comparisons, drawn by the view both editions share; screenshots (into docs/screenshots/ with
PLAYGROUND_SCREENSHOTS=1, as tests/browser/test_browser.py)."""

from __future__ import annotations

import numpy as np
import pytest

from playground import compare as cmp
from test_browser import open_tab, page, shot, shots_dir, textbox  # noqa: F401 -- fixtures reused

pytestmark = pytest.mark.browser


def _view_text(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id}").inner_text()


def test_compare_tab_side_by_side(page):
    """The app's tab draws with the static edition's view (web/views/compare.js, mounted three
    times), from the numbers PyTorch computed here (playground/compare_data.py)."""
    open_tab(page, "Compare")
    page.locator("#cmp-loss").wait_for()
    assert page.evaluate("() => ['cmp-next-view', 'cmp-nb-view', 'cmp-att-view'].every((id) => window.pgViews && window.pgViews[id])")
    loss = page.locator("#cmp-loss").inner_text()
    assert "trained model" in loss and "untrained initialisation" in loss and "10.82" in loss
    trained, untrained = cmp.compare_next_token(textbox(page, "cmp-prompt").input_value())
    assert f"untrained initialisation: loss on the prompt {untrained.loss:.2f} nats" in loss
    assert page.eval_on_selector_all("#cmp-next-b li", "li => li.map((x) => Number(x.dataset.id))") == [c.token_id for c in untrained.step.candidates]
    # Attention opens on the trained model's clearest head on the sentence, named over both
    # matrices, on the sliders and in the line that says how sharp each side is.
    opening = cmp.opening_head(page.locator("#cmp-sentence textarea").input_value())
    where = f"layer {opening.layer}, head {opening.head}"
    assert _view_text(page, "cmp-att-a").startswith(f"trained model: {where}")
    assert _view_text(page, "cmp-att-b").startswith(f"{cmp.UNTRAINED}: {where}")
    assert page.locator("#cmp-layer input[type=number]").input_value() == str(opening.layer)
    assert page.locator("#cmp-head input[type=number]").input_value() == str(opening.head)
    assert page.locator("#cmp-att-spread").inner_text().startswith(f"Layer {opening.layer}, head {opening.head}:")
    # One probability axis for both next-token charts (a 0.01 % bar is not drawn as long as a 15 % one)
    ticks = page.evaluate("() => ['a', 'b'].map((s) => [...document.querySelectorAll(`#cmp-next-${s} .cmp-tick`)].map((t) => t.textContent + '@' + t.style.left))")
    assert ticks[0] == ticks[1] and len(ticks[0]) >= 4, ticks
    assert "share one probability axis, on a log scale" in loss
    shot(page, "compare")

    # A new prompt: both charts redraw with its candidates.
    textbox(page, "cmp-prompt").fill("JULIET: O Romeo, Romeo, wherefore art")
    page.locator("#cmp-next-run").click()
    page.wait_for_function("() => document.querySelector('#cmp-next-a').innerText.includes('thou')")
    assert "10.82" in page.locator("#cmp-loss").inner_text()

    # Nearest neighbours: "queen" beside "king" only after training.
    textbox(page, "cmp-word").fill("king")
    page.locator("#cmp-nb-run").click()
    page.wait_for_function("() => document.querySelector('#cmp-nb-a').innerText.includes('queen')")
    assert "queen" not in page.locator("#cmp-nb-b").inner_text()

    # Attention on a new sentence: both matrices show its tokens, with the app's weights.
    textbox(page, "cmp-sentence").fill("to be or not to be")
    page.locator("#cmp-att-run").click()
    page.wait_for_function("() => document.querySelector('#cmp-att-b').innerText.includes('not')")
    assert "not" in _view_text(page, "cmp-att-a")
    (_, r) = cmp.compare_attention("to be or not to be", opening.layer, opening.head)[1]
    cells = page.eval_on_selector_all("#cmp-att-b tbody tr:last-child td", "tds => tds.map((x) => x.textContent)")
    assert np.allclose([float(c) for c in cells], r.weights[opening.layer, opening.head][-1], atol=0.0051)  # two decimals
    shot(page, "compare-edited")
    assert not page.errors, page.errors


def test_compare_tab_at_phone_width(page):
    """At a phone's width (390 px) the two sides stack and nothing of the tab is wider than the
    page's column (the page's own width at 390 px has its own test, in test_browser_page.py)."""
    open_tab(page, "Compare")
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.locator("#cmp-next-a .cmp-bars").first.wait_for()
        too_wide_js = """() => {
                const column = document.querySelector('#cmp-prompt').closest('.tabitem, [role=tabpanel]') || document.body;
                const right = column.getBoundingClientRect().right;
                return [...column.querySelectorAll('[id^=cmp-] *')]
                    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().right > right + 1)
                    .map(e => e.tagName + '.' + (e.className.baseVal ?? e.className)).slice(0, 5);
            }"""
        try:  # the page lays out again at the new width a moment later: wait until it fits, 5 s at most
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
