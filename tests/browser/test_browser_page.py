"""Headless Chromium at a phone's size (390 x 844) on the launched app: the page as a learner
meets it: every tab one tap away, nothing wider than the screen.

- every tab fits the screen (no horizontal scroll), ends with the sentence that leads to the next
  tab, and is photographed (docs/screenshots/phone-<tab>.png with PLAYGROUND_SCREENSHOTS=1);
- bad input shows its message beside the input while the last result stays, marked out of date,
  and no toast piles up; a 30,000-character paste is refused in the browser at once;
- the generation chart's legend and the drawn token's bar, whitespace drawn visibly, one token at
  a time with "Next token", the live distribution under the settings;
- the attention heatmaps' token labels, legible cells, and the line view.

One browser and one page for the module, on the session's app (benchmarks/app_server.py)."""

from __future__ import annotations

import re

import pytest

from test_browser import browser_page, save_screenshot, shots_dir, textbox  # noqa: F401 -- fixture reused

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
# The tabs in order and the tab each one's closing sentence leads to (the guided path).
TABS = [
    ("Tokenization", "tokenization", "Embeddings"),
    ("Embeddings", "embeddings", "Positional encoding"),
    ("Positional encoding", "positional_encoding", "Attention"),
    ("Attention", "attention", "Inside the model"),
    ("Inside the model", "inside", "Text generation"),
    ("Text generation", "text_generation", "Model"),
    ("Model", "model", "Compare"),
    ("Compare", "compare", "Watch it learn"),
    ("Watch it learn", "learn", None),
]
ORANGE = "rgb(249, 115, 22)"  # the drawn token's bar (playground/next_token.DRAWN_COLOUR)


@pytest.fixture(scope="module")
def phone(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=PHONE, is_mobile=True, has_touch=True) as pg:
        yield pg


def open_tab(page, name: str) -> None:
    """Open a tab from the bar or, on a phone, from the "More tabs" menu, which must be on screen."""
    tab = page.get_by_role("tab", name=re.compile(re.escape(name)))
    if tab.is_visible():
        tab.click()
    else:
        more = page.get_by_role("button", name="More tabs")
        box = more.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], f"'More tabs' off screen: {box}"
        more.click()
        # The whole label ("7 · Model"): has_text alone also matched "5 · Inside the model".
        item = page.locator(".overflow-dropdown button", has_text=re.compile(rf"· {re.escape(name)}$"))
        item_box = item.bounding_box()
        assert item_box and item_box["x"] >= 0 and item_box["x"] + item_box["width"] <= PHONE["width"], item_box
        item.click()
    page.get_by_role("tab", name=re.compile(re.escape(name)), selected=True).wait_for()


def panel(page):
    """The open tab's panel."""
    return page.locator('[role="tabpanel"]:visible').first


def page_width(page) -> int:
    return page.evaluate("() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")


def settled_width(page, width: int, timeout_ms: float = 5_000) -> int:
    """The page's width once it fits ``width`` (plotly fits its plots to a newly shown tab's width
    a moment after it shows), or as it is after ``timeout_ms``: for the caller to assert on."""
    try:
        page.wait_for_function(f"() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) <= {width}",
                               timeout=timeout_ms)
    except Exception:  # noqa: BLE001 -- the caller's assertion says how wide it stayed
        pass
    return page_width(page)


def wait_for_message(page, slot: str) -> str:
    message = page.locator(f"#{slot} .pg-error-msg")
    message.wait_for()
    return message.inner_text()


def assert_stale(page, result: str, slot: str) -> None:
    """The result is still on the page, dimmed (marked out of date) while the slot shows a message."""
    js = f"() => Number(getComputedStyle(document.querySelector('#{result}')).opacity)"
    try:
        page.wait_for_function(f"() => ({js})() < 0.8", timeout=3000)  # the dimming fades in
    except Exception as err:
        raise AssertionError(f"#{result} is not marked out of date beside #{slot}'s message (opacity {page.evaluate(js)})") from err


def assert_beside(page, slot: str, input_id: str) -> None:
    """The message is on screen, just under its input (not in a toast, not at the page's end)."""
    msg = page.locator(f"#{slot} .pg-error-msg").bounding_box()
    inp = page.locator(f"#{input_id}").bounding_box()
    assert -2 <= msg["y"] and msg["y"] + msg["height"] <= PHONE["height"] + 2, f"#{slot}'s message is off screen: {msg}"
    assert 0 <= msg["y"] - (inp["y"] + inp["height"]) < 600, f"#{slot}'s message is not beside #{input_id}: {msg} / {inp}"
    assert msg["x"] >= 0 and msg["x"] + msg["width"] <= PHONE["width"]


def no_toasts(page) -> int:
    return page.locator('[data-testid="toast-body"]').count()


def test_every_tab_fits_a_phone_and_leads_to_the_next(phone):
    widths = {}
    for name, slug, next_name in TABS:
        open_tab(phone, name)
        tab = panel(phone)
        # (visible ones: Inside the model folds its stages, their tables there but not shown)
        tab.locator(".js-plotly-plot, .gpt-tokens, .pg-cards, table").filter(visible=True).first.wait_for()
        widths[name] = settled_width(phone, PHONE["width"])
        if next_name:
            link = tab.locator(".pg-next a[data-next-tab]")
            assert link.count() == 1, f"{name}: no closing sentence leading on"
            assert link.get_attribute("data-next-tab") == next_name
            sentence = tab.locator(".pg-next").inner_text()
            assert sentence.count(".") >= 1 and f"Next: {next_name}" in sentence
        save_screenshot(phone, phone.shots_dir / f"phone-{slug}.png")
    assert all(w <= PHONE["width"] for w in widths.values()), f"wider than the phone: {widths}"
    # The closing link opens the next tab, even one in the "More tabs" menu.
    open_tab(phone, "Positional encoding")
    panel(phone).locator(".pg-next a").click()
    phone.get_by_role("tab", name=re.compile("Attention"), selected=True).wait_for()
    assert not phone.errors, phone.errors


def test_error_states_keep_the_last_result_beside_a_message(phone):
    # Tokenization: undecodable ids.
    open_tab(phone, "Tokenization")
    textbox(phone, "dec-ids").fill("31373, 99999999")
    textbox(phone, "dec-ids").press("Enter")
    assert "99999999" in wait_for_message(phone, "dec-error") and "50256" in phone.locator("#dec-error").inner_text()
    assert textbox(phone, "dec-text").input_value() == "hello everyone"  # the last result, kept
    assert_stale(phone, "dec-text", "dec-error")
    assert_beside(phone, "dec-error", "dec-ids")
    textbox(phone, "dec-ids").fill("31373")
    textbox(phone, "dec-ids").press("Enter")
    phone.locator("#dec-error .pg-error-msg").wait_for(state="detached")  # a good input clears it
    phone.wait_for_function("() => document.querySelector('#dec-text textarea').value === 'hello'")

    # Embeddings: a malformed expression, then a word missing from the sentences.
    open_tab(phone, "Embeddings")
    summary = phone.locator("#emb-summary").inner_text()
    textbox(phone, "emb-expr").fill("king - 3x + woman")
    textbox(phone, "emb-expr").press("Enter")
    assert "operator" in wait_for_message(phone, "emb-error")
    assert phone.locator("#emb-summary").inner_text() == summary
    assert phone.locator("#emb-chart .js-plotly-plot").count() == 1  # the chart stays drawn
    assert_stale(phone, "emb-summary", "emb-error")
    assert_beside(phone, "emb-error", "emb-expr")
    textbox(phone, "ctx-word").fill("dragon")
    phone.locator("#ctx-run").click()
    assert "dragon" in wait_for_message(phone, "ctx-error")
    assert phone.locator("#ctx-plot .js-plotly-plot").count() == 1
    assert_stale(phone, "ctx-plot", "ctx-error")
    assert_beside(phone, "ctx-error", "ctx-b")

    # Positional encoding: an odd d_model typed in the slider's box; then one past its end.
    open_tab(phone, "Positional encoding")
    box = phone.locator("#pe-dmodel input[type=number]")
    box.fill("21")
    box.press("Enter")
    assert "must be even" in wait_for_message(phone, "pe-error")
    assert phone.locator("#pe-heatmap .js-plotly-plot").count() == 1
    assert "Error" not in phone.locator("#pe-heatmap").inner_text()  # no red pill over the plot
    assert_stale(phone, "pe-summary", "pe-error")
    assert_beside(phone, "pe-error", "pe-dmodel")
    box.fill("600")  # the slider ends at 512: the box keeps to its range, nothing is refused
    box.press("Enter")
    phone.locator("#pe-error .pg-error-msg").wait_for(state="detached")
    assert box.input_value() == "512"
    phone.wait_for_function("() => document.querySelector('#pe-summary').innerText.includes('512 dimensions')")
    assert no_toasts(phone) == 0, phone.locator('[data-testid="toast-body"]').all_inner_texts()
    assert not phone.errors, phone.errors


def test_a_long_paste_is_refused_in_the_browser_at_once(phone):
    open_tab(phone, "Tokenization")
    textbox(phone, "tok-text").fill("hello everyone")
    phone.wait_for_function("() => document.querySelector('#tok-ids textarea').value === '[31373, 2506]'")
    # From the paste to the first message on the page, timed by the page itself: the page's own
    # (.pg-local), before any answer from the server.
    elapsed_ms, local = phone.evaluate(
        """(n) => new Promise((resolve) => {
            const slot = document.querySelector('#tok-error');
            const box = document.querySelector('#tok-text textarea');
            const t0 = performance.now();
            new MutationObserver((_, obs) => {
                const msg = slot.querySelector('.pg-error-msg');
                if (msg) { obs.disconnect(); resolve([performance.now() - t0, msg.closest('.pg-local') !== null]); }
            }).observe(slot, {childList: true, subtree: true});
            box.value = 'x'.repeat(n);
            box.dispatchEvent(new Event('input', {bubbles: true}));
        })""",
        30_000,
    )
    # The server's message (the same words) then takes the place of the page's own: one shows.
    phone.wait_for_function("() => document.querySelector('#tok-error .pg-error-msg:not(.pg-local *)')")
    messages = phone.locator("#tok-error .pg-error-msg:visible")
    assert messages.count() == 1
    message = messages.inner_text()
    assert "30,000 characters" in message and "20,000" in message
    assert local, "the first message came from the server, not the page's own check"
    print(f"30,000-character paste refused in {elapsed_ms:.0f} ms")  # (printed: the page's check, not a bound, is the point)
    assert textbox(phone, "tok-ids").input_value() == "[31373, 2506]"  # the last result, kept
    assert_stale(phone, "tok-spans", "tok-error")
    textbox(phone, "tok-text").fill("hello")
    phone.locator("#tok-error .pg-error-msg").wait_for(state="detached")


def _legend(page, elem_id: str) -> dict[str, str]:
    """{legend entry: its swatch colour} of a plot."""
    return page.evaluate(
        f"""() => Object.fromEntries([...document.querySelectorAll('#{elem_id} .legend .traces')].map(t => [
            t.querySelector('.legendtext').textContent,
            (t.querySelector('.legendpoints path') || {{style: {{}}}}).style.fill]))"""
    )


def _bars(page, elem_id: str) -> list[tuple[str, str]]:
    """[(bar colour, label text)] of a bar chart's bars."""
    return page.evaluate(
        f"""() => [...document.querySelectorAll('#{elem_id} .bars .point')].map(p => [
            p.querySelector('path').style.fill, (p.querySelector('text') || {{textContent: ''}}).textContent])"""
    )


def test_generation_chart_legend_drawn_bar_and_next_token(phone):
    open_tab(phone, "Text generation")
    # The live distribution under the settings: greedy at temperature 0, reshaped without generating.
    phone.locator("#gen-live .js-plotly-plot").wait_for()
    temperature = phone.locator("#gen-temp input[type=number]")
    temperature.fill("0")
    temperature.press("Enter")
    phone.wait_for_function("() => document.querySelector('#gen-live').textContent.includes('greedy')")
    temperature.fill("1.5")
    temperature.press("Enter")
    phone.wait_for_function("() => document.querySelector('#gen-live').textContent.includes('temperature 1.5')")

    textbox(phone, "gen-prompt").fill("HAMLET:\n")
    steps = phone.locator("#gen-max input[type=number]")
    steps.fill("24")
    steps.press("Enter")
    phone.locator("#gen-run").click()
    phone.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('stopped by')", timeout=120_000)
    tokens = phone.locator("#gen-output .gen-tok")
    assert tokens.count() == 24
    # Whitespace is drawn (⋅ → ↵), so no token is an empty band.
    shown = tokens.evaluate_all("ts => ts.map(t => t.textContent)")
    assert all(s.strip() for s in shown), shown
    # The last step's chart follows the stream by one queued event; wait for it before clicking
    # so that it cannot land on top of a clicked step's chart.
    phone.wait_for_function("() => document.querySelector('#gen-chart').textContent.includes('Step 24:')")

    legends, drawn = [], []
    for step in (1, 2, 3, 4):
        tokens.nth(step - 1).click()
        phone.wait_for_function(f"() => document.querySelector('#gen-chart').textContent.includes('Step {step}:')")
        legends.append(_legend(phone, "gen-chart"))
        bars = _bars(phone, "gen-chart")
        orange = [label for colour, label in bars if colour == ORANGE]
        assert len(orange) == 1 and re.fullmatch(r"\d+\.\d%", orange[0]), bars  # one drawn bar, with its p
        drawn.append(orange[0])
        title = phone.locator("#gen-chart .gtitle").text_content()
        assert f"(p = {orange[0]})" in title.replace("\u00a0", " "), title
    entries = legends[0]
    assert list(entries) == ["model (temperature 1)", "drawn from (temperature 1.5, top-k 50, top-p 0.95)", "the token drawn"]
    assert entries["the token drawn"] == ORANGE
    assert all(legend == entries for legend in legends), legends  # the same colours at every step
    caption = phone.locator("#gen-caption").inner_text()
    assert caption.startswith("The token drawn is")

    # One token at a time: the prompt grows by the token drawn, its candidates charted.
    before = textbox(phone, "gen-prompt").input_value()
    phone.locator("#gen-next").click()
    phone.wait_for_function(
        "(before) => { const v = document.querySelector('#gen-prompt textarea').value;"
        " return v.length > before.length && v.startsWith(before); }",
        arg=before,
    )
    phone.wait_for_function("() => document.querySelector('#gen-chart').textContent.includes('Step 1:')")
    phone.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('1 new token')")
    assert page_width(phone) <= PHONE["width"]
    assert not phone.errors, phone.errors


def test_attention_labels_cells_and_line_view(phone):
    open_tab(phone, "Attention")
    textbox(phone, "att-text").fill("the king spoke to the queen")
    phone.locator("#att-run").click()
    phone.wait_for_function("() => document.querySelector('#att-info').innerText.startsWith('6 tokens')")
    # Short texts print each weight with two decimals in its cell (hover for more).
    phone.wait_for_function("() => document.querySelectorAll('#att-head-fig .heatmap-label').length === 36")
    cells = phone.locator("#att-head-fig .heatmap-label").all_text_contents()
    assert all(re.fullmatch(r"[01]\.\d\d", c) for c in cells), cells
    # Every head's grid is labelled with the tokens (rows: queries; columns: keys).
    grid_labels = phone.locator("#att-heads-fig .ytick text").all_text_contents()
    assert {"\u22c5king", "\u22c5queen"} <= set(grid_labels), grid_labels
    # The line view: a click on a query token draws lines to the tokens before it.
    view = phone.locator("#att-lines")
    view.locator(".att-q .att-tok").nth(5).click()
    assert view.locator("svg line").count() >= 1
    assert view.locator(".att-k .att-w").nth(0).inner_text().endswith("%")
    assert page_width(phone) <= PHONE["width"]
    # A layer typed in the slider's box and confirmed with Enter recomputes.
    layer = phone.locator("#att-layer input[type=number]")
    layer.fill("2")
    layer.press("Enter")
    phone.wait_for_function("() => document.querySelector('#att-head-fig .gtitle').textContent.startsWith('Layer 2, head ')")

    # A long text: the cells are left to the hover (sixty numbers would be noise).
    textbox(phone, "att-text").fill(" ".join(["the king spoke to the queen"] * 4))
    phone.locator("#att-run").click()
    phone.wait_for_function("() => document.querySelectorAll('#att-head-fig .ytick').length === 24")
    assert phone.locator("#att-head-fig .heatmap-label").count() == 0
    assert not phone.errors, phone.errors
