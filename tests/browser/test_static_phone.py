"""The static edition phone-first, in headless Chromium at a phone's 390×844 and a laptop's
1280×800: every tab reachable without a sideways swipe, Generate and the download's progress on the
first screen, the download's size said before it starts (against the files on disk), and an
attention cell read in the page's own type after a tap (against the weights the page computed)."""

from __future__ import annotations

import re

import pytest

from static_site import HEAVY, first_tab_requests, ready, static_page, static_server, static_site  # noqa: F401 -- fixtures

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
SCREENS = {"phone": dict(viewport=PHONE, is_mobile=True, has_touch=True), "laptop": dict(viewport=LAPTOP)}
# The files the first token needs, as the page names them.
FIRST_TOKEN_FILES = {"the model": "model/model.onnx", "onnxruntime-web": "vendor/ort/ort-wasm-simd-threaded.wasm.gz",
                     "the tokenizer": "model/tokenizer.json"}

# Each tab button's box, and whether a tap at its centre lands on it (not clipped, not covered).
TAB_BOXES_JS = """() => [...document.querySelectorAll('#pg-tabs button[role=tab]')].map((b) => {
  const r = b.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {id: b.id, top: Math.round(r.top), left: r.left, right: r.right, height: r.height, hit: hit === b || b.contains(hit)};
})"""


def screenshots() -> bool:
    """Whether this run writes the screenshots (PLAYGROUND_SCREENSHOTS=1)."""
    import os

    from test_browser import SCREENSHOTS_ENV

    return os.environ.get(SCREENSHOTS_ENV, "").strip() not in ("", "0")


def shot(page, name: str) -> None:
    """A screenshot of the static edition: docs/screenshots/static-<name>.png with
    PLAYGROUND_SCREENSHOTS=1 (as tests/browser/test_browser.py writes the app's), else nowhere."""
    from test_browser import DOCS_SHOTS, save_screenshot

    if screenshots():
        save_screenshot(page, DOCS_SHOTS / f"static-{name}.png")


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


@pytest.mark.parametrize("screen", ["phone", "laptop"])
def test_every_tab_is_on_screen_without_a_sideways_swipe(static_server, screen):
    width = SCREENS[screen]["viewport"]["width"]
    with static_page(static_server.url, **SCREENS[screen]) as page:
        if screen == "phone":  # the first screen is light: no model, WebAssembly or plotly.js for the first tab
            loaded = first_tab_requests(page)
            assert not any(heavy in u for u in loaded for heavy in HEAVY), loaded
        ready(page)
        boxes = page.evaluate(TAB_BOXES_JS)
        assert len(boxes) == 9, boxes
        for b in boxes:
            assert b["left"] >= 0 and b["right"] <= width and b["hit"], f"{screen}: {b['id']} is not on screen: {b}"
        strip = page.evaluate("() => { const n = document.querySelector('#pg-tabs'); return [n.scrollWidth, n.clientWidth]; }")
        assert strip[0] <= strip[1], f"{screen}: the tab strip scrolls sideways ({strip[0]} px in {strip[1]})"
        if screen == "laptop":
            assert len({b["top"] for b in boxes}) == 1, f"the tabs wrap at 1280 px: {boxes}"
        else:
            assert min(b["height"] for b in boxes) >= 32, "a phone's tab is too small to tap"
            assert max(b["top"] + b["height"] for b in boxes) < 844 / 3, "the tabs take more than a third of the first screen"
        # Each tab opens with a tap on it, none of them off screen. (On the phone: at 1280 px the
        # boxes and the hit test above say the same, and each tab opened starts its own work.)
        for b in boxes if screen == "phone" else []:
            page.click(f"#{b['id']}")
            assert page.get_attribute(f"#{b['id']}", "aria-selected") == "true"
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.click("#tab-tokenization")
        page.wait_for_function("document.querySelector('#dec-text')?.textContent.length > 0")
        shot(page, f"{'phone-' if screen == 'phone' else ''}tokenization")
        assert not page.errors, page.errors


def test_a_phone_is_told_the_download_and_sees_generate_and_its_progress_on_the_first_screen(static_server, static_site):
    with static_page(static_server.url + "?tab=generation", **SCREENS["phone"]) as page:
        loaded: list[str] = []
        page.on("request", lambda r: loaded.append(r.url))
        ready(page)
        note = page.inner_text("#gen-download")
        sizes = {what: (static_site / name).stat().st_size for what, name in FIRST_TOKEN_FILES.items()}
        assert f"downloads {mb(sum(sizes.values()))}" in note, note
        for what, n in sizes.items():
            assert f"{what} {mb(n)}" in note, note
        assert not any("model.onnx" in u or ".wasm" in u for u in loaded), "the phone downloaded the model before Generate"
        for selector in ("#gen-run", "#gen-download"):
            box = page.query_selector(selector).bounding_box()
            assert box["y"] + box["height"] <= PHONE["height"], f"{selector} is below a phone's first screen: {box}"

        # The lesson folded above them unfolds whole on a tap.
        intro = "#panel-generation .pg-intro"
        folded = page.evaluate(f"() => {{ const n = document.querySelector('{intro}'); return [n.clientHeight, n.scrollHeight]; }}")
        assert folded[0] < folded[1], folded
        page.click("#panel-generation .pg-more")
        page.wait_for_function(f"() => {{ const n = document.querySelector('{intro}'); return n.clientHeight >= n.scrollHeight; }}")
        page.click("#panel-generation .pg-more")
        page.evaluate("() => window.scrollTo(0, 0)")

        # A slow connection (the files then take seconds): the progress shows on the first screen.
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 20, "downloadThroughput": 2_000_000, "uploadThroughput": 1_000_000})
        page.click("#gen-run")
        page.wait_for_selector("#pg-progress:not([hidden])")
        page.wait_for_function("/Downloading/.test(document.querySelector('#pg-progress').innerText)")
        box = page.query_selector("#pg-progress").bounding_box()
        assert page.evaluate("window.scrollY") == 0 and box["y"] + box["height"] <= PHONE["height"], box
        cdp.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        page.wait_for_selector("#gen-output[data-done=true]", timeout=120_000)
        assert page.locator("#gen-completion .gen-tok").count() > 0
        assert "onnxruntime-web" in page.inner_text("#gen-download")
        page.wait_for_function("document.querySelector('#gen-chart')?.dataset.step !== undefined", timeout=120_000)
        assert_candidates_chart_clear(page)  # on this phone's own generation
        page.evaluate("() => window.scrollTo(0, 0)")
        shot(page, "phone-text_generation")
        assert not page.errors, page.errors


def test_a_laptop_has_generate_on_its_first_screen(static_server):
    with static_page(static_server.url + "?tab=generation", **SCREENS["laptop"]) as page:
        ready(page)
        box = page.query_selector("#gen-run").bounding_box()
        assert box["y"] + box["height"] <= LAPTOP["height"], box
        if screenshots():  # (a generation for the picture; that a laptop loads the model as the tab opens: test_static_edition.py)
            page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
            page.click("#gen-run")
            page.wait_for_function("document.querySelector('#gen-chart')?.dataset.step !== undefined", timeout=120_000)
            shot(page, "text_generation")


@pytest.mark.parametrize("screen", ["phone", "laptop"])
def test_a_tapped_attention_cell_is_read_in_the_pages_type(static_server, screen):
    text = "To be, or not to be"
    with static_page(static_server.url + f"?tab=attention&text={text}", **SCREENS[screen]) as page:
        ready(page)
        page.wait_for_selector("#att-results[data-drawn]", state="attached")
        for q, k in ((4, 2), (5, 5)):
            # The cell's centre, from plotly's own axes.
            x, y = page.evaluate("""([q, k]) => { const gd = document.querySelector('#att-head-fig'), L = gd._fullLayout;
              const r = gd.getBoundingClientRect();
              return [r.left + L.xaxis._offset + L.xaxis.l2p(k), r.top + L.yaxis._offset + L.yaxis.l2p(q)]; }""", [q, k])
            page.evaluate("([x, y]) => window.scrollBy(0, y - innerHeight / 2)", [x, y])
            x, y = page.evaluate("""([q, k]) => { const gd = document.querySelector('#att-head-fig'), L = gd._fullLayout;
              const r = gd.getBoundingClientRect();
              return [r.left + L.xaxis._offset + L.xaxis.l2p(k), r.top + L.yaxis._offset + L.yaxis.l2p(q)]; }""", [q, k])
            # Tapped again until the readout names the cell: plotly drops a tap that falls within its
            # double-click delay of the one before, or lands while a figure is still being laid out.
            for attempt in range(5):
                if screen == "phone":
                    page.touchscreen.tap(x, y)
                else:
                    page.mouse.click(x, y)
                try:
                    page.wait_for_function("c => document.querySelector('#att-cell').dataset.cell === c", arg=f"{q}:{k}", timeout=3000)
                    break
                except Exception:
                    assert attempt < 4, f"five taps on cell {q}:{k} and the readout says {page.inner_text('#att-cell')!r}"
            a = page.evaluate("() => { const a = window.pgAttention; return [a.tokens, a.layer, a.head, Array.from(a.attentions[a.layer])]; }")
            tokens, layer, head, flat = a
            t = len(tokens)
            weight = flat[head * t * t + q * t + k]
            shown = page.inner_text("#att-cell")
            assert shown.startswith(f"Query {q}: {tokens[q]} → key {k}: {tokens[k]}: {weight:.3f}"), (shown, weight)
            assert f"layer {layer}, head {head}" in shown
            size = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#att-cell')).fontSize)")
            assert size >= 12, f"the cell's weight is {size} px tall"
        assert "onnxruntime-web" in page.inner_text("#att-source") and "8-bit" in page.inner_text("#att-source")
        shot(page, f"{'phone-' if screen == 'phone' else ''}attention")
        assert not page.errors, page.errors


# -- the small items ----------------------------------------------------------------------------


def test_a_link_opens_ids_to_text_on_its_own_text_and_the_header_needs_no_emoji_font(static_server):
    from urllib.parse import quote

    from model import get_tokenizer

    text = "To be, or not to be"
    with static_page(static_server.url + f"?tab=tokenization&text={quote(text)}", **SCREENS["phone"]) as page:
        ready(page)
        page.wait_for_function("document.querySelector('#dec-text')?.textContent.length > 0")
        ids = get_tokenizer().encode(text)
        assert page.input_value("#dec-ids") == ", ".join(map(str, ids))
        assert page.inner_text("#dec-text") == text
        title = page.inner_text("#pg-header h1")
        assert title == "GPT Playground", title  # an emoji is a box where the system has no emoji font


def assert_candidates_chart_clear(page) -> None:
    """The candidates chart's tick labels, axis title and legend one below the other, apart."""
    boxes = page.evaluate("""() => ['.xtitle', '.legend', '.xtick'].map((s) => {
      const rs = [...document.querySelectorAll('#gen-chart ' + s)].map((n) => n.getBoundingClientRect());
      return {top: Math.min(...rs.map((r) => r.top)), bottom: Math.max(...rs.map((r) => r.bottom))}; })""")
    title, legend, ticks = boxes
    assert ticks["bottom"] <= title["top"] + 1 and title["bottom"] <= legend["top"] + 1, boxes


@pytest.mark.slow  # the default run checks the same chart after the phone's generation in the download test above
def test_the_candidates_chart_keeps_its_axis_title_clear_of_its_legend_on_a_phone(static_server):
    with static_page(static_server.url + "?tab=generation&max_new_tokens=4&temperature=0", **SCREENS["phone"]) as page:
        ready(page)
        page.click("#gen-run")
        page.wait_for_function("document.querySelector('#gen-chart')?.dataset.step === '4'", timeout=120_000)
        assert_candidates_chart_clear(page)
        assert not page.errors, page.errors


# -- painting -----------------------------------------------------------------------------------

# When the page added generated tokens to the text: one time a mutation callback adds any.
COUNT_PAINTS_JS = """() => { window.pgPaints = [];
  new MutationObserver((records) => {
    if (records.some((r) => [...r.addedNodes].some((n) => n.classList?.contains('gen-tok')))) window.pgPaints.push(performance.now());
  }).observe(document.querySelector('#gen-output'), { childList: true, subtree: true }); }"""


def test_the_page_adds_the_generated_tokens_a_few_times_a_second_not_one_by_one(static_server):
    """A paint costs more than a token: the page adds the tokens drawn since its last paint in one
    piece, at most every 100 ms (web/static/tabs/generation.js's PAINT_MS; the last, when the
    generation ends, may come sooner), and still shows every token, in order."""
    from model import get_tokenizer

    tokens = 160
    with static_page(static_server.url + f"?tab=generation&text=ROMEO:&max_new_tokens={tokens}&temperature=0", **SCREENS["laptop"]) as page:
        ready(page)
        page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
        page.evaluate(COUNT_PAINTS_JS)
        page.click("#gen-run")
        page.wait_for_selector("#gen-output[data-done=true]", timeout=120_000)
        times = page.evaluate("() => window.pgPaints")
        shown = page.evaluate("() => Array.from(document.querySelectorAll('#gen-completion .gen-tok')).map((t) => Number(t.title.split('id ')[1]))")
        assert len(shown) == tokens and page.inner_text("#gen-completion") == get_tokenizer().decode(shown)
        gaps = [b - a for a, b in zip(times[:-2], times[1:-1])]  # the last paint, at the end, may come sooner
        assert len(times) < tokens and min(gaps, default=100) >= 95, f"{len(times)} paints for {tokens} tokens, gaps {gaps[:10]} ms"
        page.click("#gen-completion .gen-tok >> nth=5")  # a token still opens its step's candidates
        page.wait_for_function("document.querySelector('#gen-chart')?.dataset.step === '6'")
