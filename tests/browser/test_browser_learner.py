"""Headless Chromium on the launched app, as a learner meets it (the positional
table at the Transformer tutorial's 1024 x 512: test_browser_tabs.py): on a 390 px phone every tab
is one tap away, Generate brings its output into view and a tap shows a token's details; token
ids sit beside their tokens; an untrained model's candidates read 0.002 %; the Attention tab
opens on a head that shows something, keeps the selected token in view and folds its checks
away, prints two decimals in the cells of its 12-token opening text, draws the chosen token's box
whole, and names and measures any head the learner picks; and the first page load is at most
600 KB on the wire with ``Accept-Encoding: gzip``."""

from __future__ import annotations

import re

import httpx
import pytest

from browser_pages import page, phone  # noqa: F401 -- fixtures
from test_browser_page import PHONE
from test_browser import open_tab, shots_dir, textbox  # noqa: F401 -- fixture reused

pytestmark = pytest.mark.browser

FIRST_LOAD_MAX_BYTES = 600_000


def plot_data(page, elem_id: str) -> list[dict]:
    """The traces plotly drew in ``#elem_id`` (x, y, text, and a heatmap's first row of z), as
    plotly holds them once decoded (``_fullData``: the sent base64 arrays as numbers)."""
    return page.evaluate(
        f"""() => document.querySelector('#{elem_id} .js-plotly-plot')._fullData.map(t => ({{
            x: t.x && Array.from(t.x), y: t.y && Array.from(t.y), text: t.text && Array.from(t.text),
            z0: t.z && t.z[0] ? Array.from(t.z[0]) : null}}))"""
    )


def test_every_tab_one_tap_away_on_a_phone(phone):
    tabs = phone.get_by_role("tab")
    n = tabs.count()
    assert n >= 7
    assert not phone.get_by_role("button", name="More tabs").is_visible()
    names, rows = [], set()
    for i in range(n):
        box = tabs.nth(i).bounding_box()
        assert box and box["height"] > 0, box
        rows.add(round(box["y"]))
        names.append(tabs.nth(i).inner_text())
    assert len(rows) == 1, rows  # one row, which scrolls sideways: no wall of wrapped rows
    for name in names[1:] + names[:1]:  # one tap each (scrolled to, as a thumb would), the first one last
        tab = phone.get_by_role("tab", name=name)
        tab.scroll_into_view_if_needed()
        tab.tap()
        phone.get_by_role("tab", name=name, selected=True).wait_for()
        box = tab.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (name, box)  # the chosen tab is on screen
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]


def test_generate_brings_the_output_into_view_on_a_phone(phone):
    open_tab(phone, "Text generation")
    phone.evaluate("() => window.scrollTo(0, 0)")
    phone.locator("#gen-max input[type=number]").fill("8")
    phone.locator("#gen-run").tap()
    phone.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('stopped by')", timeout=120_000)
    phone.wait_for_function(
        "() => { const r = document.querySelector('#gen-stats').getBoundingClientRect();"
        " return r.top >= 0 && r.top < window.innerHeight; }"
    )
    # a tap on a generated token shows what a hover shows: its id and probabilities
    token = phone.locator("#gen-output .gen-tok").first
    token.tap()
    tip = token.evaluate("t => getComputedStyle(t, '::after').content")
    assert re.search(r"id \d+ · model p = [\d.]+%", tip), tip


def test_token_ids_beside_their_tokens_without_hover(phone):
    open_tab(phone, "Tokenization")
    textbox(phone, "tok-text").fill("hello everyone")  # tokenized as it is typed
    phone.wait_for_function("() => document.querySelectorAll('#tok-spans .gpt-token').length === 2")
    ids = phone.locator("#tok-spans .gpt-id")
    assert ids.all_inner_texts() == ["31373", "2506"]  # the Transformer tutorial's ids for "hello everyone"
    for i in range(2):
        box = ids.nth(i).bounding_box()
        assert box and box["width"] > 0 and box["y"] < PHONE["height"] * 3
        assert ids.nth(i).is_visible()
    # the id sits with its own token: the token's box holds it
    span = phone.locator("#tok-spans .gpt-token").nth(1).bounding_box()
    id_box = ids.nth(1).bounding_box()
    assert span["x"] <= id_box["x"] and id_box["x"] + id_box["width"] <= span["x"] + span["width"] + 1


def test_untrained_model_reads_0_002_percent(page):
    open_tab(page, "Compare")
    page.locator("#cmp-next-b .cmp-bars li").first.wait_for()
    bars = page.eval_on_selector_all("#cmp-next-b .cmp-bars li", "li => li.map((x) => [x.querySelector('.cmp-bar-value').textContent, Number(x.dataset.probability)])")
    assert len(bars) >= 5, bars
    uniform = 1 / 50257  # 0.00199 %: a uniform guess over the vocabulary
    for label, p in bars:
        # near uniform (the top of an untrained model's candidates: a few times 1/V at most; the
        # largest of 50,257 near-equal ones, 5.4 times 1/V for the shared generator's seed 0) ...
        assert uniform <= p < 10 * uniform, bars
        # ... and printed to two significant digits, not rounded away
        assert label.endswith("%") and abs(float(label[:-1]) - 100 * p) <= 0.05 * 100 * p, bars
    labels = [label for label, _ in bars]
    assert all(t != "0.0%" for t in labels)
    # the bars are drawn, not invisible slivers
    widths = page.locator("#cmp-next-b .cmp-bar").evaluate_all("bs => bs.map(b => b.getBoundingClientRect().width)")
    assert widths and min(widths) > 20, widths


def test_attention_opens_on_a_clear_head_keeps_the_token_in_view_and_folds_the_checks(page):
    from playground.attention import EXAMPLE_PROMPTS, attention, salient_head

    example = attention(EXAMPLE_PROMPTS[0], 0, 0)
    found = salient_head(example.weights, example.ids)
    open_tab(page, "Attention")
    # Drawn when the tab is first opened (out of the first page load).
    page.wait_for_function(f"() => document.querySelector('#att-info').innerText.includes('{found.kind} head')")
    page.locator("#att-head-fig .js-plotly-plot").wait_for()
    assert page.locator("#att-layer input[type=number]").input_value() == str(found.layer)
    assert page.locator("#att-head input[type=number]").input_value() == str(found.head)
    info = page.locator("#att-info")
    assert f"{found.kind} head" in info.inner_text()
    details = info.locator("details")
    assert details.count() == 1 and details.get_attribute("open") is None
    assert "e-0" not in info.locator("p").first.inner_text()  # no 1.5e-08 in the visible text
    details.locator("summary").click()
    assert re.search(r"\d\.\de-\d\d", details.inner_text())

    # a long text: the selected (last) token is in the list's view, and so is one clicked
    textbox(page, "att-text").fill(" ".join(["the king spoke to the queen of the land"] * 6))
    page.locator("#att-run").click()
    page.wait_for_function("() => document.querySelector('#att-info').innerText.startsWith('54 tokens')")

    def chosen_in_view() -> bool:
        return page.evaluate(
            """() => { const s = document.querySelector('#att-lines .att-scroll').getBoundingClientRect();
                       const c = document.querySelector('#att-lines .att-tok.chosen').getBoundingClientRect();
                       return c.top >= s.top - 1 && c.bottom <= s.bottom + 1; }"""
        )

    page.wait_for_function("() => document.querySelector('#att-lines .att-tok.chosen')")
    assert chosen_in_view()
    page.locator("#att-lines .att-k .att-tok").nth(40).click()
    assert chosen_in_view()
    # the step-through starts from the chosen head's queries
    page.locator("#att-stage").get_by_text("1 · q = x W_Q").click()
    page.wait_for_function("() => document.querySelector('#att-stage-md').innerText.includes('W_Q')")
    assert not page.errors, page.errors


def chosen_box_inside_the_list(page) -> dict:
    """The chosen token's box (its outline: the token's box grown by the outline's width plus its
    offset) against the list that scrolls, which clips what overflows it."""
    return page.evaluate(
        """() => { const s = document.querySelector('#att-lines .att-scroll');
                   const c = document.querySelector('#att-lines .att-tok.chosen');
                   const st = getComputedStyle(c), grow = parseFloat(st.outlineWidth) + parseFloat(st.outlineOffset);
                   const sr = s.getBoundingClientRect(), cr = c.getBoundingClientRect();
                   const clip = {left: sr.left + s.clientLeft, top: sr.top + s.clientTop};
                   clip.right = clip.left + s.clientWidth; clip.bottom = clip.top + s.clientHeight;
                   const box = {left: cr.left - grow, top: cr.top - grow, right: cr.right + grow, bottom: cr.bottom + grow};
                   return {box, clip, inside: box.left >= clip.left - 0.5 && box.top >= clip.top - 0.5
                                              && box.right <= clip.right + 0.5 && box.bottom <= clip.bottom + 0.5}; }"""
    )


def test_attention_cells_the_chosen_tokens_box_and_any_heads_pattern(page):
    """The opening text (12 tokens) prints every weight in its cells with two decimals; the line
    view's box around the chosen token is whole (the last query, flush with the list's left and
    bottom edges, then the first); layer 2, head 3 chosen with the sliders gets its pattern named
    and measured, as the opening head does, from the same function on the same weights."""
    from playground.attention import EXAMPLE_PROMPTS, attention, describe_head, head_sentence

    open_tab(page, "Attention")
    page.wait_for_function("() => document.querySelector('#att-info').innerText.includes('12 tokens.')")
    page.wait_for_function("() => document.querySelectorAll('#att-head-fig .heatmap-label').length === 144")
    cells = page.locator("#att-head-fig .heatmap-label").all_text_contents()
    assert all(re.fullmatch(r"[01]\.\d\d", c) for c in cells), cells

    page.wait_for_function("() => document.querySelector('#att-lines .att-tok.chosen')")
    page.locator("#att-lines .att-scroll").scroll_into_view_if_needed()
    where = chosen_box_inside_the_list(page)
    assert where["inside"], where
    page.locator("#att-lines .att-q .att-tok").first.click()
    page.wait_for_function("() => document.querySelector('#att-lines .att-q .att-tok.chosen').dataset.i === '0'")
    where = chosen_box_inside_the_list(page)
    assert where["inside"], where

    for elem, value in (("att-layer", 2), ("att-head", 3)):
        box = page.locator(f"#{elem} input[type=number]")
        box.fill(str(value))
        box.press("Enter")
    page.wait_for_function("() => document.querySelector('#att-info').innerText.startsWith('12 tokens. Layer 2, head 3: ')")
    r = attention(EXAMPLE_PROMPTS[0], 2, 3, step_through=False)
    described = describe_head(r.weights, r.ids, 2, 3)
    text = page.locator("#att-info p").first.inner_text()
    assert text == f"12 tokens. Layer 2, head 3: {head_sentence(described)}", text
    assert f"{described.share:.0%} of its attention on average; a uniform head would give {described.uniform:.0%}" in text
    assert not page.errors, page.errors


def test_first_load_at_most_600_kb_gzipped(app_server):
    """Every request the page makes to open (as Chromium records it), fetched again with
    ``Accept-Encoding: gzip`` only; the bytes on the wire summed."""
    from playwright.sync_api import sync_playwright

    from test_browser import ARGS, CHROMIUM

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1280, "height": 900})
        urls: list[str] = []
        pg.on("requestfinished", lambda r: urls.append(r.url) if r.method == "GET" else None)
        pg.goto(app_server.url, wait_until="load")
        pg.get_by_role("tab", name=re.compile("Tokenization"), selected=True).wait_for()
        pg.wait_for_load_state("load")
        browser.close()
    assert app_server.url in urls
    static = [u for u in urls if "/heartbeat" not in u and "/queue/data" not in u]
    total, sizes = 0, {}
    with httpx.Client(headers={"Accept-Encoding": "gzip"}, timeout=30) as client:
        for url in static:
            with client.stream("GET", url) as r:
                for _ in r.iter_raw():
                    pass
                sizes[url] = r.num_bytes_downloaded
                if url == app_server.url:
                    assert r.headers.get("content-encoding") == "gzip"
            total += sizes[url]
    print(f"\nfirst load: {len(static)} requests, {total / 1000:.0f} kB on the wire (gzip); the page itself {sizes[app_server.url] / 1000:.0f} kB")
    assert total <= FIRST_LOAD_MAX_BYTES, sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
