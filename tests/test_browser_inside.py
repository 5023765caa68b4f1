"""Headless Chromium on the launched app's Inside the model tab, at 1280 px and at a phone's
390 px: a text typed and run, the layer, head and token changed with typed numbers and with the
arrow keys on the sliders (each redraws the panels and the map's highlight), the stages numbered
1, 2, 3... in the map and the headings, each heading's small map marking its stage, a strip one
row with its colour range (on the phone too), the head's whole attention matrix with the chosen
query outlined, the rank and probability of the token that came next after every layer, a box of
the map scrolls to its panel, bad input gets its message beside the input, and nothing is wider
than the screen. Screenshots docs/screenshots/inside.png and
phone-inside.png with PLAYGROUND_SCREENSHOTS=1 (tests/test_browser.py's convention)."""

from __future__ import annotations

import time

import pytest

from browser_pages import LAPTOP as DESKTOP
from browser_pages import page as desktop  # noqa: F401 -- fixtures: a fresh page per test
from browser_pages import phone  # noqa: F401
from test_browser import save_screenshot, shots_dir, textbox  # noqa: F401 -- fixture reused
from test_browser_page import PHONE, assert_stale, open_tab, page_width, wait_for_message

import numpy as np
import torch

from playground.inside import inside
from playground.resources import get_model
from playground.inside_view import STAGES

pytestmark = pytest.mark.browser

TEXT = "Juliet.\nO Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name;"


def info(page) -> str:
    return page.locator("#ins-info").inner_text()


def wait_info(page, fragment: str) -> None:
    page.wait_for_function("(f) => document.querySelector('#ins-info').innerText.includes(f)", arg=fragment)


def arrow(page, elem_id: str, key: str) -> None:
    """Focus a slider's handle and press an arrow key, as a keyboard user does."""
    page.locator(f"#{elem_id} input[type=range]").press(key)


def check_stages(page) -> None:
    """The map and the headings number the stages 1, 2, 3... with no gap; each heading's small
    map fills its own stage; the map's text box leads to the first stage."""
    headings = page.locator(".ins-panel h3 > span:first-child").all_inner_texts()
    numbers = [int(h.split(" · ")[0]) for h in headings]
    assert numbers == list(range(1, len(STAGES) + 1)), headings
    boxes = [b.split(" · ")[0] for b in page.locator("#ins-map .ins-box b").all_inner_texts()]
    assert boxes[0] == "text" and [int(b) for b in boxes[1:]] == numbers, boxes
    assert page.locator("#ins-map .ins-box").first.get_attribute("data-goto") == "ins-s-embedding"
    for n, (anchor, _, _) in enumerate(STAGES, start=1):
        assert page.locator(f"#ins-s-{anchor} .ins-here i.ins-on").inner_text() == str(n)
    assert "x + attn(ln_1(x))" in page.locator("#ins-map").inner_text()
    assert "x + mlp(ln_2(x))" in page.locator("#ins-map").inner_text()


def check_strips(page, width: int) -> None:
    """Every strip is one row (one image the width of its row, a cell's height), with its colour
    range beside it; the value under the pointer is shown."""
    rows = page.evaluate("""() => [...document.querySelectorAll('.ins-panel .ins-cells')].filter((c) => c.offsetParent)
        .map((c) => { const img = c.querySelector('img').getBoundingClientRect();
                      const row = c.closest('.ins-strip').getBoundingClientRect();
                      return [img.height, img.width, row.width, c.dataset.v.split(',').length,
                              c.closest('.ins-strip').querySelector('.ins-scale').innerText]; })""")
    assert len(rows) >= 20, rows
    for height, img_width, row_width, n, scale in rows:
        assert height <= 16.5, f"a strip of {n} values wraps: {height} px high"
        assert img_width >= 0.6 * row_width if width > 700 else img_width >= 0.95 * row_width
        assert "−" in scale and "+" in scale, scale  # e.g. "−0.17 … +0.17": the range its colours span
    # The embedding's strips share the range of x = E[id] + P[t], the largest |value| of that sum,
    # worked out here from the model's own tables; x's cells carry its values.
    model = get_model()
    r = inside(page.locator("#ins-text textarea").input_value())
    t = r.token
    times = model.config.d_model**0.5 if model.config.scale_embedding else 1.0
    x = (model.wte.weight[r.fp.ids[t]] * times + model.position_table()[t]).detach().numpy()
    scale = page.locator("#ins-s-embedding .ins-strip .ins-scale").nth(2).inner_text()
    assert f"+{np.abs(x).max():.2f}" in scale, scale
    shown = np.array([float(v) for v in page.locator("#ins-s-embedding .ins-cells").nth(2).get_attribute("data-v").split(",")])
    np.testing.assert_allclose(shown, x, atol=6e-5)


def check_attention_matrix(page, n: int, layer: int, head: int, token: int) -> None:
    """The chosen head's whole matrix (n × n), the chosen query's row outlined where it is; the
    hover over that row's first key gives the model's own weight (its modules' output_attentions),
    read from the drawn state, not an earlier one."""
    m = page.locator("#ins-s-attention .ins-matrix")
    assert int(m.get_attribute("data-n")) == n
    assert len(m.get_attribute("data-w").split(",")) == n * (n + 1) // 2  # every causal (query, key) pair
    box, row = m.locator("img").bounding_box(), m.locator(".ins-qrow").bounding_box()
    assert abs(row["y"] - (box["y"] + box["height"] * token / n)) <= 2, (row, box)
    m.scroll_into_view_if_needed()
    box = m.locator("img").bounding_box()
    page.mouse.move(box["x"] + 1, box["y"] + box["height"] * (token + 0.5) / n)
    tip = page.locator("#ins-tip").inner_text()
    ids = inside(page.locator("#ins-text textarea").input_value()).fp.ids
    with torch.inference_mode():
        weights = get_model()(torch.tensor([ids]), output_attentions=True).attentions[layer][0, head]
    assert tip.startswith(f"query {token} ") and tip.endswith(f"weight {float(weights[token, 0]):.3f}"), tip


def check_next_token_rank(page, r) -> None:
    """The lens gives the rank and probability of the token that came next after every layer."""
    cells = page.locator("#ins-s-lens td.ins-next")
    expected = r.lens_next(r.token)
    assert cells.count() == len(expected)
    for i, (rank, p) in enumerate(expected):
        assert int(cells.nth(i).get_attribute("data-rank")) == rank
        assert f"rank {rank:,}" in cells.nth(i).inner_text() and f"{100 * p:.2f}%" in cells.nth(i).inner_text()


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
    from playground.inside import EXAMPLE_TEXTS

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
    assert page.locator("#ins-s-residual svg.ins-chart rect.ins-c-att title").count() == 6  # a bar per layer
    check_stages(page)
    check_strips(page, width)
    check_attention_matrix(page, n, 0, 0, n - 1)
    assert page.locator("#ins-s-lens td.ins-next").count() == 0  # the last token: nothing came next

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
    rows = page.locator("#ins-s-attention details tbody tr")
    assert rows.count() == 6 and "masked" in rows.nth(5).text_content()
    assert page.locator("#ins-output .ins-lt.ins-on").count() == 1  # token 5, predicted from 0..4, outlined
    check_attention_matrix(page, n, 3, 5, 4)
    check_next_token_rank(page, inside(TEXT, 3, 5, token=4))
    # The arrow keys on a slider redraw, as a drag does: the page shows what the slider says.
    arrow(page, "ins-layer", "ArrowRight")
    wait_info(page, "showing layer 4, head 5, token 4 ")
    assert page.locator("#ins-layer input[type=number]").input_value() == "4"
    assert "Layer 4, token 4" in page.locator("#ins-s-layernorm").inner_text()
    arrow(page, "ins-head", "ArrowLeft")
    wait_info(page, "showing layer 4, head 4, token 4 ")
    assert "Layer 4, head 4" in page.locator("#ins-s-attention").inner_text()
    assert page.locator("#ins-map .ins-chip.ins-on").all_inner_texts() == ["4", "4"]
    arrow(page, "ins-token", "ArrowRight")
    wait_info(page, "showing layer 4, head 4, token 5 ")
    check_next_token_rank(page, inside(TEXT, 4, 4, token=5))
    arrow(page, "ins-layer", "ArrowLeft")
    wait_info(page, "showing layer 3, head 4, token 5 ")
    arrow(page, "ins-head", "ArrowRight")
    wait_info(page, "showing layer 3, head 5, token 5 ")
    arrow(page, "ins-token", "ArrowLeft")
    wait_info(page, "showing layer 3, head 5, token 4 ")
    # A click on a token of the loss text shows the position that predicted it.
    page.locator("#ins-output .ins-lt").nth(8).click()
    wait_info(page, "head 5, token 7")
    assert page.locator("#ins-token input[type=number]").input_value() == "7"
    assert page.locator("#ins-output .ins-lt").nth(8).get_attribute("class") == "ins-lt ins-on"
    assert page_width(page) <= width, f"wider than the screen: {page_width(page)} px"
    return n


def test_inside_the_model_at_1280(desktop):
    n = drive(desktop, DESKTOP["width"])
    # A click on a row of the attention matrix chooses that query's token.
    img = desktop.locator("#ins-s-attention .ins-matrix img")
    img.scroll_into_view_if_needed()
    box = img.bounding_box()
    desktop.mouse.click(box["x"] + box["width"] * 0.02, box["y"] + box["height"] * 2.5 / n)
    wait_info(desktop, "head 5, token 2 ")
    assert desktop.locator("#ins-token input[type=number]").input_value() == "2"
    check_attention_matrix(desktop, n, 3, 5, 2)
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
