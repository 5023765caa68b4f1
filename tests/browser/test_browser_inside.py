"""Headless Chromium on the launched app's Inside the model tab, at 1280 px and at a phone's
390 px: the tab draws with the view both editions share (web/views/inside.js, served by the app),
opens on a token inside the text whose prediction forms through the layers, the map (with every
stage's numbers) fits the screen, and the page is a fraction of its former length; every stage
opened from the map fits one screen with the map at 1280x800 and 390x844; a text typed and run,
the layer and head chosen with the map's chips (a click, or Enter on a focused chip), typed numbers
and the arrow keys on the sliders (each redraws the panels and the map's highlight), the stages
numbered 1, 2, 3... in the map and the headings, each folded until opened from the map or its
heading (and kept open across redraws), each open heading's small map marking its stage, a strip
one row with its colour range (on the phone too), the head's whole attention matrix with the
chosen query outlined and both axes named by the tokens, the rank and probability of the token
that came next after every layer, every number shown against PyTorch stage by stage
(tests/inside_pages.py), layer 0's large FFN add explained, bad input gets its message beside the
input, and nothing is wider than the screen. Screenshots docs/screenshots/inside.png and
phone-inside.png with PLAYGROUND_SCREENSHOTS=1 (tests/browser/test_browser.py's convention)."""

from __future__ import annotations

import time

import pytest

from browser_pages import LAPTOP as DESKTOP
from browser_pages import page as desktop  # noqa: F401 -- fixtures: a fresh page per test
from browser_pages import phone  # noqa: F401
from test_browser import save_screenshot, shots_dir, textbox  # noqa: F401 -- fixture reused
from test_browser_page import PHONE, assert_stale, open_tab, page_width, settled_width, wait_for_message

import numpy as np
import torch

from inside_pages import STAGES, Tolerance, check_against, check_one_screen, shown
from playground.inside import EXAMPLE_TEXTS, ffn0_of_token_alone, inside, opening_token
from playground.resources import shipped_model

OPEN_FIRST = "lens"  # the stage a new text opens (web/views/inside.js)
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
# The app's page against the app's own PyTorch: the same numbers, as the page rounds them (a strip's
# cells to 4 decimals, the matrix and the map to 3).
SAME = Tolerance(value=1e-3, loss=1e-3)

pytestmark = pytest.mark.browser

TEXT = "Juliet.\nO Romeo, Romeo! wherefore art thou Romeo?\nDeny thy father and refuse thy name;"
# The page's height with the map and the stage it opens (measured 2026-11-27 in Chromium: 1,7xx px at
# 1280, 2,9xx at 390; every stage laid out one under the other it was 4,491 and 7,319).
MAX_HEIGHT = {1280: 2100, 390: 3400}
ONE_SCREEN = {1280: {"width": 1280, "height": 800}, 390: {"width": 390, "height": 844}}


def info(page) -> str:
    return page.locator("#ins-info").inner_text()


def wait_info(page, fragment: str) -> None:
    page.wait_for_function("(f) => (document.querySelector('#ins-info')?.innerText ?? '').includes(f)", arg=fragment)  # (drawn by the view once it has loaded)


def arrow(page, elem_id: str, key: str) -> None:
    """Focus a slider's handle and press an arrow key, as a keyboard user does."""
    page.locator(f"#{elem_id} input[type=range]").press(key)


def open_stages(page) -> list[str]:
    """Open every folded stage with its heading (a click on the button, as a learner does); the
    open ones show their body and say so (aria-expanded). Returns the stages that were open."""
    before = [a for a in STAGES if page.locator(f"#ins-s-{a} .ins-toggle").get_attribute("aria-expanded") == "true"]
    for anchor in STAGES:
        toggle = page.locator(f"#ins-s-{anchor} .ins-toggle")
        if toggle.get_attribute("aria-expanded") != "true":
            toggle.click()
            page.wait_for_function(
                f"() => document.querySelector('#ins-s-{anchor} .ins-toggle').getAttribute('aria-expanded') === 'true'")
        page.locator(f"#ins-b-{anchor}").wait_for(state="visible")
    return before


def check_stages(page) -> None:
    """The map and the headings number the stages 1, 2, 3... with no gap; each heading's small
    map fills its own stage; the map's text box leads to the first stage; the map writes the
    blocks' adds as they compute them (on a phone its boxes give their numbers alone, to share the
    screen with a stage, and the residual stage's first line writes them)."""
    headings = page.locator(".ins-panel h3 .ins-toggle > span").all_inner_texts()
    numbers = [int(h.split(" · ")[0]) for h in headings]
    assert numbers == list(range(1, len(STAGES) + 1)), headings
    boxes = [b.split(" · ")[0] for b in page.locator("#ins-map .ins-box .ins-open b").all_inner_texts()]
    assert boxes[0] == "text" and [int(b) for b in boxes[1:]] == numbers, boxes
    assert page.locator("#ins-map .ins-box").first.get_attribute("data-goto") == "ins-s-embedding"
    for n, anchor in enumerate(STAGES, start=1):
        assert page.locator(f"#ins-s-{anchor} .ins-here i.ins-on").inner_text() == str(n)
    written = page.locator("#ins-map" if page.viewport_size["width"] > 700 else "#ins-b-residual .ins-code").first.inner_text()
    assert "x + attn(ln_1(x))" in written and "x + mlp(ln_2(x))" in written, written


def check_strips(page, width: int) -> None:
    """Every strip is one row (one canvas the width of its row, a cell's height), with its colour
    range beside it; its cells are its values' colours (white at 0, blue below, red above, full
    at the range); the value under the pointer is shown."""
    rows = page.evaluate("""() => [...document.querySelectorAll('.ins-panel .ins-cells')].filter((c) => c.offsetParent)
        .map((c) => { const img = c.querySelector('canvas').getBoundingClientRect();
                      const row = c.closest('.ins-strip').getBoundingClientRect();
                      return [img.height, img.width, row.width, c.dataset.v.split(',').length,
                              c.closest('.ins-strip').querySelector('.ins-scale').innerText]; })""")
    assert len(rows) >= 20, rows
    for height, img_width, row_width, n, scale in rows:
        assert height <= 16.5, f"a strip of {n} values wraps: {height} px high"
        assert img_width >= 0.6 * row_width if width > 700 else img_width >= 0.95 * row_width
        assert "−" in scale and "+" in scale, scale  # e.g. "−0.17 … +0.17": the range its colours span
    # The embedding's strips share the range of x = E[id] + P[t], the largest |value| of that sum,
    # worked out here from the model's own tables; x's cells carry its values and its colours.
    model = shipped_model()
    r = inside(page.locator("#ins-text textarea").input_value())
    t = int(page.locator(".ins-view").get_attribute("data-token"))
    times = model.config.d_model**0.5 if model.config.scale_embedding else 1.0
    x = (model.wte.weight[r.fp.ids[t]] * times + model.position_table()[t]).detach().numpy()
    scale = page.locator("#ins-s-embedding .ins-strip .ins-scale").nth(2).inner_text()
    top = float(np.abs(x).max())
    assert f"+{top:.2f}" in scale, scale
    cells = page.locator("#ins-s-embedding .ins-cells").nth(2)
    shown_values = np.array([float(v) for v in cells.get_attribute("data-v").split(",")])
    np.testing.assert_allclose(shown_values, x, atol=6e-5)
    pixels = np.array(cells.locator("canvas").evaluate("(c) => Array.from(c.getContext('2d').getImageData(0, 0, c.width, 1).data)"))
    rgb = pixels.reshape(-1, 4)[:, :3]
    end = np.where((x < 0)[:, None], (37, 99, 235), (220, 38, 38))  # blue, red
    a = np.minimum(np.abs(x) / top, 1)[:, None]
    np.testing.assert_allclose(rgb, 255 - a * (255 - end), atol=1.01)


def check_attention_matrix(page, n: int, layer: int, head: int, token: int) -> None:
    """The chosen head's whole matrix (n × n), the chosen query's row outlined where it is; the
    hover over that row's first key gives the model's own weight (its modules' output_attentions),
    read from the drawn state, not an earlier one."""
    m = page.locator("#ins-s-attention .ins-matrix")
    assert int(m.get_attribute("data-n")) == n
    assert len(m.get_attribute("data-w").split(",")) == n * (n + 1) // 2  # every causal (query, key) pair
    box, row = m.locator("canvas").bounding_box(), m.locator(".ins-qrow").bounding_box()
    assert abs(row["y"] - (box["y"] + box["height"] * token / n)) <= 2, (row, box)
    m.scroll_into_view_if_needed()
    box = m.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + 1, box["y"] + box["height"] * (token + 0.5) / n)
    tip = page.locator("#ins-tip").inner_text()
    ids = inside(page.locator("#ins-text textarea").input_value()).fp.ids
    with torch.inference_mode():
        weights = shipped_model()(torch.tensor([ids]), output_attentions=True).attentions[layer][0, head]
    assert tip.startswith(f"query {token} ") and tip.endswith(f"weight {float(weights[token, 0]):.3f}"), tip


def check_matrix_axes(page, tokens: list[str], token: int) -> None:
    """Both axes of the attention matrix name the tokens, each label centred on its own column (keys)
    or row (queries) of the drawn picture; the chosen query's label marked."""
    m = page.locator("#ins-s-attention .ins-matrix-axes")
    img = m.locator(".ins-matrix canvas").bounding_box()
    n = len(tokens)
    for kind, axis in (("key", ".ins-xlabels"), ("query", ".ins-ylabels")):
        labels = m.locator(f"{axis} span")
        assert labels.count() == n  # a label per token (at most 32 tokens)
        assert labels.all_text_contents() == tokens
        for i in (0, n // 2, n - 1):
            box = labels.nth(i).bounding_box()
            if kind == "key":  # centred on column i, above the picture
                assert abs(box["x"] + box["width"] / 2 - (img["x"] + img["width"] * (i + 0.5) / n)) <= 2, (i, box, img)
                assert box["y"] + box["height"] <= img["y"] + 1
            else:  # centred on row i, left of the picture
                assert abs(box["y"] + box["height"] / 2 - (img["y"] + img["height"] * (i + 0.5) / n)) <= 2, (i, box, img)
                assert box["x"] + box["width"] <= img["x"] + 1
    assert m.locator(".ins-ylabels span.ins-on").text_content() == tokens[token]


def check_next_token_rank(page, r) -> None:
    """The lens gives the rank and probability of the token that came next after every layer."""
    cells = page.locator("#ins-s-lens td.ins-next")
    expected = r.lens_next(r.token)
    assert cells.count() == len(expected)
    for i, (rank, p) in enumerate(expected):
        assert int(cells.nth(i).get_attribute("data-rank")) == rank
        assert f"rank {rank:,}" in cells.nth(i).inner_text() and f"{100 * p:.2f}%" in cells.nth(i).inner_text()


def check_overview(page, width: int, example, opening: int) -> None:
    """As the tab opens: on a token inside the text, not its last, said why; the map gives every
    stage's numbers there and fits one screen; the stage it opens is the logit lens at that token,
    and the page (header, controls, map, folded stages, the open one) is far shorter than every
    stage laid out. At that token of the example, layer 0's feed-forward add dwarfs the stream and
    the residual stage says why, with the cosine of what the token alone makes layer 0's network write."""
    assert opening < len(example.fp.ids) - 1
    assert "climbs most through the logit lens" in info(page)
    assert page.locator("#ins-token input[type=number]").input_value() == str(opening)
    live = page.locator("#ins-map .ins-live").all_inner_texts()
    assert len(live) == 1 + len(STAGES) and all(text.strip() for text in live), live
    nxt = example.lens_next(opening)
    assert f"rank {nxt[0][0]:,} → {nxt[-1][0]:,}" in page.locator('#ins-map .ins-box[data-goto="ins-s-lens"]').inner_text()
    viewport = page.viewport_size["height"]
    assert page.locator("#ins-map").bounding_box()["height"] < viewport  # the overview: one screen
    page.locator(f"#ins-b-{OPEN_FIRST}").wait_for(state="visible")
    height = page.evaluate("() => document.documentElement.scrollHeight")
    print(f"\n{width} px: the page is {height} px high with the map and the open stage")
    assert height <= MAX_HEIGHT[width], f"{height} px high at {width} px"
    assert [page.locator(f"#ins-b-{a}").is_visible() for a in STAGES] == [a == OPEN_FIRST for a in STAGES]
    assert page.locator("#ins-s-lens td.ins-next").count() == len(example.fp.layers)  # the next token's rank, layer by layer
    fp = example.fp
    added, stream = fp.layers[0].mlp_out[opening], fp.layers[0].x_in[opening]
    alone = ffn0_of_token_alone(fp, opening)
    cosine = float(alone @ added / np.linalg.norm(alone) / np.linalg.norm(added))
    assert np.linalg.norm(added) > 5 * np.linalg.norm(stream) and cosine > 0.5  # the case the sentence is for
    page.locator("#ins-s-residual .ins-toggle").click()
    note = page.locator("#ins-b-residual .ins-first-ffn").inner_text()
    assert f"cosine {cosine:.2f} " in note and f"‖{np.linalg.norm(added):.2f}‖ on ‖{np.linalg.norm(stream):.2f}‖" in note, note
    page.locator("#ins-s-residual .ins-toggle").click()  # folded again, as the page opened


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
    example = inside(EXAMPLE_TEXTS[0])
    opening = opening_token(example.fp)
    wait_info(page, f"{len(example.fp.ids)} tokens; showing layer 0, head 0, token {opening} ")
    page.locator("#ins-map .ins-box").first.wait_for()
    check_overview(page, width, example, opening)
    textbox(page, "ins-text").fill(TEXT)
    page.locator("#ins-run").click()
    n = len(inside(TEXT).fp.ids)
    page.wait_for_function(f"() => (document.querySelector('#ins-info')?.innerText ?? '').startsWith('{n} tokens; showing layer 0, head 0, token ')")
    first = opening_token(inside(TEXT).fp)
    assert f"token {first} " in info(page) and first != n - 1  # where the prediction forms, not the last token
    assert page.locator("#ins-token input[type=number]").input_value() == str(first)
    # every stage's panel, folded but the one the page opens; a heading opens each
    for anchor in ("embedding", "layernorm", "attention", "residual", "ffn", "lens", "output"):
        assert page.locator(f"#ins-s-{anchor}").count() == 1
    assert open_stages(page) == [OPEN_FIRST]
    set_slider(page, "ins-token", n - 1)
    wait_info(page, f"token {n - 1} ")
    assert page.locator("#ins-s-output .ins-lt").count() == n
    assert "wherefore" in page.locator("#ins-s-output .ins-loss-text").inner_text()
    assert page.locator("#ins-s-residual svg.ins-chart rect.ins-c-att title").count() == 6  # a bar per layer
    check_stages(page)
    check_strips(page, width)
    check_attention_matrix(page, n, 0, 0, n - 1)
    check_matrix_axes(page, inside(TEXT).fp.tokens, n - 1)
    assert page.locator("#ins-s-lens td.ins-next").count() == 0  # the last token: nothing came next

    # The map's layer chip "3" chooses layer 3, as the layer slider does: the slider, the panels
    # and the map's pressed chip follow; the stages stay open across the redraw.
    t0 = time.perf_counter()
    page.locator('#ins-map .ins-chip[data-layer="3"]').click()
    wait_info(page, "showing layer 3, head 0")
    print(f"\n{width} px: layer change redrawn in the browser in {(time.perf_counter() - t0) * 1000:.0f} ms")
    assert page.locator("#ins-layer input[type=number]").input_value() == "3"
    assert page.locator("#ins-map .ins-chip.ins-on").all_inner_texts() == ["3", "0"]
    assert page.locator("#ins-map .ins-chip[aria-pressed=true]").all_inner_texts() == ["3", "0"]
    assert "Layer 3, token" in page.locator("#ins-s-layernorm").inner_text()
    assert "layer 3: μ" in page.locator('#ins-map .ins-box[data-goto="ins-s-layernorm"]').inner_text()
    assert page.locator("#ins-b-ffn").is_visible()
    # A head chip from the keyboard: focused, then Enter, as a button.
    page.locator('#ins-map .ins-chip[data-head="5"]').focus()
    page.keyboard.press("Enter")
    wait_info(page, "showing layer 3, head 5")
    assert page.locator("#ins-head input[type=number]").input_value() == "5"
    assert "Layer 3, head 5" in page.locator("#ins-s-attention").inner_text()
    assert page.locator("#ins-map .ins-chip.ins-on").all_inner_texts() == ["3", "5"]
    set_slider(page, "ins-token", 4)
    wait_info(page, "head 5, token 4")
    # token 4 attends to keys 0..4; the later ones are one masked row
    rows = page.locator("#ins-s-attention details tbody tr")
    assert rows.count() == 6 and "masked" in rows.nth(5).text_content()
    assert page.locator("#ins-s-output .ins-lt.ins-on").count() == 1  # token 5, predicted from 0..4, outlined
    check_attention_matrix(page, n, 3, 5, 4)
    check_next_token_rank(page, inside(TEXT, 3, 5, token=4))
    check_against(shown(page), inside(TEXT).fp, SAME)  # every number of every stage, against PyTorch
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
    page.locator("#ins-s-output .ins-lt").nth(8).click()
    wait_info(page, "head 5, token 7")
    assert page.locator("#ins-token input[type=number]").input_value() == "7"
    assert page.locator("#ins-s-output .ins-lt").nth(8).get_attribute("class") == "ins-lt ins-on"
    assert page_width(page) <= width, f"wider than the screen: {page_width(page)} px"
    return n


def check_stages_fit(page, width: int) -> None:
    """At 1280x800 or 390x844: each stage opened from the map fits one screen with the map."""
    size = page.viewport_size
    page.set_viewport_size(ONE_SCREEN[width])
    try:
        check_one_screen(page)
    finally:
        page.set_viewport_size(size)


def test_inside_the_model_at_1280(desktop):
    served: list[str] = []
    desktop.on("response", lambda r: "/browser/views/" in r.url and served.append(r.url))
    n = drive(desktop, DESKTOP["width"])
    # The tab is the shared view: its module came from the app's /browser/views/, the very file of
    # web/views/ the static edition copies, and it mounted there.
    assert any(u.split("?")[0].endswith("/browser/views/inside.js") for u in served), served
    module = desktop.evaluate("() => fetch('browser/views/inside.js').then((r) => r.text())")
    assert module == (ROOT / "web" / "views" / "inside.js").read_text(encoding="utf-8")
    assert desktop.evaluate("() => Boolean(window.pgViews && window.pgViews['ins-view'] && document.querySelector('#ins-view .ins-view #ins-map'))")
    # A click on a row of the attention matrix chooses that query's token.
    img = desktop.locator("#ins-s-attention .ins-matrix canvas")
    img.scroll_into_view_if_needed()
    box = img.bounding_box()
    desktop.mouse.click(box["x"] + box["width"] * 0.02, box["y"] + box["height"] * 2.5 / n)
    wait_info(desktop, "head 5, token 2 ")
    assert desktop.locator("#ins-token input[type=number]").input_value() == "2"
    check_attention_matrix(desktop, n, 3, 5, 2)
    # A box of the map opens its stage alone, the map kept on screen above it.
    desktop.locator('#ins-map .ins-open[data-goto="ins-s-ffn"]').click()
    assert [desktop.locator(f"#ins-b-{a}").is_visible() for a in STAGES] == [a == "ffn" for a in STAGES]
    assert -1 <= desktop.locator("#ins-map").bounding_box()["y"] < 40
    # the map marks the open stage; the panel's "↑ map" goes back
    desktop.locator('#ins-map .ins-box.ins-current[data-goto="ins-s-ffn"]').wait_for(state="attached")
    assert desktop.locator("#ins-map .ins-box.ins-current").count() == 1
    desktop.evaluate("() => window.scrollTo(0, document.documentElement.scrollHeight)")
    desktop.locator("#ins-s-ffn .ins-up").click()
    desktop.wait_for_function("() => Math.abs(document.querySelector('#ins-map').getBoundingClientRect().top) < 40")
    check_stages_fit(desktop, DESKTOP["width"])
    desktop.locator('#ins-map .ins-open[data-goto="ins-s-attention"]').click()
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
    assert_stale(phone, "ins-view", "ins-error")
    textbox(phone, "ins-text").fill(TEXT)
    phone.locator("#ins-run").click()
    phone.locator("#ins-error .pg-error-msg").wait_for(state="detached")
    wait_info(phone, "showing layer 3, head 5")
    check_stages_fit(phone, PHONE["width"])
    # The map's lens box (a tap) opens that stage alone, as the page opens.
    phone.locator('#ins-map .ins-open[data-goto="ins-s-lens"]').click()
    phone.wait_for_function("() => document.querySelector('#ins-stages').dataset.open === 'lens'")
    assert [phone.locator(f"#ins-b-{a}").is_visible() for a in STAGES] == [a == "lens" for a in STAGES]
    phone.evaluate("() => window.scrollTo(0, 0)")
    phone.mouse.move(0, 0)  # the tap's hover stays where it was: on the map's first box once scrolled up
    assert settled_width(phone, PHONE["width"]) <= PHONE["width"]
    save_screenshot(phone, phone.shots_dir / "phone-inside.png")
    assert not phone.errors, phone.errors


@pytest.mark.slow  # 27 s: the benchmark itself
def test_the_click_to_drawn_benchmark_reads_todays_page(app_server):
    """benchmarks.browser_inside waits on the page's own elements; when the tab's layout moves they
    must move with it, or the benchmark waits two minutes and fails. A change of each kind, each
    seen drawn (a positive time, the browser's share within it), on three texts: the third opens on
    token 0, whose slider can only move right."""
    from benchmarks.browser_inside import measure

    times = measure(app_server.url, repeats=3, width=DESKTOP["width"])
    assert list(times) == ["text", "layer", "head", "token"]
    for kind, pairs in times.items():
        assert len(pairs) == 3, kind
        for drawn, drawing in pairs:
            assert 0 < drawing <= drawn, (kind, drawn, drawing)
