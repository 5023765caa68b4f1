"""Headless Chromium on the launched app, the Positional encoding and Attention tabs: the Transformer tutorial's
1024 x 512 table drawn whole (every dimension its own column of pixels, every position its own
row, the hover's values those of the formula), its formula within a 390 px phone, and the
Attention tab opening on an instructive head of a whole-word text."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from browser_pages import page, phone  # noqa: F401 -- fixtures
from test_browser_page import PHONE
from test_browser import open_tab, shots_dir, textbox  # noqa: F401 -- fixture reused

pytestmark = pytest.mark.browser


def formula_value(position: int, dimension: int, d_model: int, base: float) -> float:
    """PE[position, dimension] from the paper's formula, written out here."""
    angle = position / base ** ((dimension - dimension % 2) / d_model)
    return math.sin(angle) if dimension % 2 == 0 else math.cos(angle)


def hover_text(page, elem_id: str, x: float, y: float) -> str:
    """The hover label plotly shows with the pointer over data point (x, y) of ``#elem_id``."""
    where = page.evaluate(
        f"""([x, y]) => {{
            const gd = document.querySelector('#{elem_id} .js-plotly-plot');
            const at = () => {{ const r = gd.querySelector('.nsewdrag').getBoundingClientRect();
                return [r.left + gd._fullLayout.xaxis.l2p(x), r.top + gd._fullLayout.yaxis.l2p(y)]; }};
            window.scrollBy(0, at()[1] - window.innerHeight / 2);  // the point into view
            return at(); }}""",
        [x, y],
    )
    page.mouse.move(0, 0)
    page.mouse.move(*where)
    label = page.locator(f"#{elem_id} .hoverlayer .hovertext")
    label.wait_for()
    return label.text_content()


def test_positional_1024_by_512_drawn_whole_every_dimension_its_own_column(page):
    open_tab(page, "Positional")
    page.locator("#pe-dmodel input[type=number]").fill("512")
    page.locator("#pe-npos input[type=number]").fill("1024")
    page.locator("#pe-base input[type=number]").fill("10000")
    t0 = time.perf_counter()
    page.locator("#pe-run").click()
    page.wait_for_function("() => document.querySelector('#pe-summary').innerText.includes('1024 positions × 512')")
    page.wait_for_function(
        "() => { const gd = document.querySelector('#pe-heatmap .js-plotly-plot');"
        " return gd && gd.data && gd.data[0].meta?.sinusoidal?.n_positions === 1024"
        " && document.querySelector('#pe-heatmap image'); }"
    )
    print(f"\nPE 1024 x 512 drawn {time.perf_counter() - t0:.1f} s after the click (timing: benchmarks.browser_positional)")
    # The image the browser decoded: one pixel per cell, 512 columns by 1024 rows.
    size = page.evaluate(
        """() => new Promise((resolve) => {
            const href = document.querySelector('#pe-heatmap image').getAttribute('href');
            const img = new Image(); img.onload = () => resolve([img.naturalWidth, img.naturalHeight]); img.src = href; })"""
    )
    assert size == [512, 1024]
    # On screen: the x axis spans exactly the 512 columns, each at least one pixel wide, and
    # each position has at least a pixel row (nothing the screen would have to skip or blend).
    axes = page.evaluate(
        """() => { const gd = document.querySelector('#pe-heatmap .js-plotly-plot');
                   const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
                   const box = document.querySelector('#pe-heatmap image').getBoundingClientRect();
                   return {x: xa.range, y: ya.range, width: box.width, height: box.height}; }"""
    )
    assert axes["x"] == [-0.5, 511.5] and axes["y"] == [1023.5, -0.5]
    assert axes["width"] >= 512 and axes["height"] >= 1024, axes
    # The drawn pixels are the formula's colours: the left edge of the picture (dimension 0,
    # the fastest) alternates red and blue within a few positions, not a grey average.
    stripes = page.evaluate(
        """() => new Promise((resolve) => {
            const img = new Image();
            img.onload = () => { const c = document.createElement('canvas'); c.width = 512; c.height = 1024;
                const g = c.getContext('2d'); g.drawImage(img, 0, 0);
                resolve(Array.from({length: 8}, (_, p) => Array.from(g.getImageData(0, p, 1, 1).data.slice(0, 3)))); };
            img.src = document.querySelector('#pe-heatmap image').getAttribute('href'); })"""
    )
    # RdBu runs from red (-1) to blue (+1): red minus blue falls as the value rises.
    red_minus_blue = [r - b for r, _, b in stripes]
    expected = [formula_value(p, 0, 512, 10000) for p in range(8)]
    assert np.corrcoef(red_minus_blue, expected)[0, 1] < -0.95, (stripes, expected)
    assert max(red_minus_blue) - min(red_minus_blue) > 200  # full stripes, not a grey average
    # The hover: position, dimension, and the value, for a slow and the fastest dimension.
    for position, dimension in ((37, 7), (700, 0), (1023, 511)):
        text = hover_text(page, "pe-heatmap", dimension, position)
        found = re.search(r"position (\d+).*dimension (\d+).*value (-?[\d.]+)", text)
        assert found, text
        # the cell under the pointer (a row is about one screen pixel: the pointer, at whole
        # pixels, may sit on the neighbour), and the value of the cell it names
        shown_position, shown_dimension = int(found[1]), int(found[2])
        assert abs(shown_position - position) <= 1 and abs(shown_dimension - dimension) <= 1, text
        expected = formula_value(shown_position, shown_dimension, 512, 10000)
        assert float(found[3]) == pytest.approx(expected, abs=1e-3), text
    assert not page.errors, page.errors


def test_positional_formula_fits_a_phone(phone):
    open_tab(phone, "Positional")
    phone.locator("#pe-formula .katex").first.wait_for()
    widths = phone.locator("#pe-formula .katex").evaluate_all("ks => ks.map(k => k.getBoundingClientRect().right)")
    assert len(widths) == 3 and max(widths) <= PHONE["width"], widths
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    # the f_i line says both forms
    assert "exp" in phone.locator("#pe-formula").inner_text()
    # the lesson's backwards sentence is called so beside the formula
    fix = phone.locator("#pe-lesson-fix").inner_text()
    assert "backwards" in fix
    # ... and its worked example's i for 2i: the exponent 256/512 is dimension 2i = 256, the pair i = 128.
    assert "mixes up i and 2i" in fix and "dimension 2i = 256, the pair i = 128" in fix, fix


def test_attention_opens_on_an_instructive_head_of_a_whole_word_text(page):
    from playground.attention import EXAMPLE_PROMPTS, FIRST_TOKEN_SINK, attention, salient_head

    example = attention(EXAMPLE_PROMPTS[0], 0, 0, step_through=False)
    found = salient_head(example.weights, example.ids)
    open_tab(page, "Attention")
    page.wait_for_function("() => document.querySelector('#att-info').innerText.includes('head (')")
    assert textbox(page, "att-text").input_value() == EXAMPLE_PROMPTS[0]
    info = page.locator("#att-info").inner_text()
    assert f"layer {found.layer}, head {found.head}" in info and f"{found.kind} head" in info, info
    assert f"{found.share:.0%}" in info
    # not a head that sits on the first token
    assert example.weights[found.layer, found.head, 1:, 0].mean() < FIRST_TOKEN_SINK
    # every token of the text a whole word or a mark: the line view lists them
    page.wait_for_function("() => document.querySelectorAll('#att-lines .att-q .att-tok').length > 0")
    labels = page.locator("#att-lines .att-q .att-label").all_inner_texts()
    assert [t.strip("⋅ ") for t in labels] == re.findall(r"\w+|[^\w\s]+", EXAMPLE_PROMPTS[0])
    assert "up to and including itself" in page.get_by_text("Each token's query").first.inner_text()
    assert not page.errors, page.errors
