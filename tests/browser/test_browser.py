"""Headless Chromium (Debian's ``chromium``, driven by Playwright) on the launched app: every tab
is opened, its main action run, what appears checked, and a screenshot taken per tab.

The screenshots go to a temporary folder, so a test run leaves the tree clean; with
``PLAYGROUND_SCREENSHOTS=1`` they replace docs/screenshots/<tab>.png (linked from README.md)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
DOCS_SHOTS = ROOT / "docs" / "screenshots"
SCREENSHOTS_ENV = "PLAYGROUND_SCREENSHOTS"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory) -> Path:
    if os.environ.get(SCREENSHOTS_ENV, "").strip() not in ("", "0"):
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        return DOCS_SHOTS
    return tmp_path_factory.mktemp("screenshots")


@contextmanager
def browser_page(app_server, shots_dir: Path, **context: Any) -> Iterator[Any]:
    """Headless Chromium on the launched app, the page open on its first tab; ``context``: the
    browser context's options (viewport, is_mobile...). The page collects its JavaScript errors
    (``page.errors``) and knows where screenshots go (``page.shots_dir``)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_context(device_scale_factor=1, **context).new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(app_server.url, wait_until="domcontentloaded")
        pg.get_by_role("tab", name=re.compile("Tokenization")).wait_for()
        pg.errors = errors
        pg.shots_dir = shots_dir
        try:
            yield pg
        finally:
            browser.close()


@pytest.fixture(scope="module")
def page(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport={"width": 1360, "height": 900}) as pg:
        yield pg


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=re.compile(name)).click()


def shot(page, name: str) -> None:
    page.wait_for_timeout(1000)  # let plotly and the buttons settle
    save_screenshot(page, page.shots_dir / f"{name}.png")


def save_screenshot(page, path: Path) -> None:
    """A full-page screenshot; into docs/ as a 256-colour PNG (a third of the bytes, the same look:
    the page is flat colours and plots). Octree keeps a colour only a few pixels use (a plot's one
    marker), which median cut folds into its nearest common colour."""
    page.screenshot(path=str(path), full_page=True)
    if path.parent == DOCS_SHOTS:
        from PIL import Image

        with Image.open(path) as im:
            small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
        small.save(path, optimize=True)


def textbox(page, elem_id: str):
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first


def test_tokenization_tab(page):
    open_tab(page, "Tokenization")
    textbox(page, "tok-text").fill("Hi my name is Moussa")  # tokenized as it is typed: no button
    assert page.locator("#tok-run").count() == 0
    ids = textbox(page, "tok-ids")
    # The Transformer tutorial's ids for this sentence.
    page.wait_for_function(
        "() => document.querySelector('#tok-ids textarea').value.includes('17250, 616, 1438, 318, 42436, 11400')"
    )
    assert page.locator("#tok-spans .gpt-token").count() == 6
    # The count cards, each value read beside its own caption.
    cards = page.locator("#tok-counts .pg-card").evaluate_all(
        "cards => Object.fromEntries(cards.map(c => [c.querySelector('span').innerText, c.querySelector('b').innerText]))"
    )
    assert cards == {"tokens": "6", "characters": "20", "characters / token": "3.33", "UTF-8 bytes": "20"}
    page.locator("#tok-ws input").check()
    page.wait_for_function("() => document.querySelector('#tok-spans').innerText.includes('⋅my')")
    # ids -> text
    textbox(page, "dec-ids").fill("31373, 2506")
    page.locator("#dec-run").click()
    page.wait_for_function("() => document.querySelector('#dec-text textarea').value === 'hello everyone'")
    assert ids.input_value().startswith("[17250")
    shot(page, "tokenization")


def test_embeddings_tab(page):
    open_tab(page, "Embeddings")
    textbox(page, "emb-expr").fill("king - man + woman")
    page.locator("#emb-run").click()
    page.locator("#emb-summary").get_by_text(re.compile("king")).first.wait_for()
    # Ten ranked rows, each with a cosine similarity (the table's cells, one per line).
    page.wait_for_function(
        "() => (document.querySelector('#emb-table').innerText.match(/^-?[01]\\.\\d+$/gm) || []).length >= 10"
    )
    page.locator("#pca-plot .js-plotly-plot").wait_for()
    assert page.locator("#emb-chart .js-plotly-plot").count() == 1
    shot(page, "embeddings")


def test_positional_encoding_tab(page):
    open_tab(page, "Positional")
    page.locator("#pe-formula .katex").first.wait_for()  # the formula as rendered math
    base = page.locator("#pe-base input[type=number]")
    base.fill("100")
    page.locator("#pe-run").click()
    page.wait_for_function("() => document.querySelector('#pe-summary').innerText.includes('base 100')")
    page.locator("#pe-heatmap .js-plotly-plot").wait_for()
    base.fill("10000")
    page.locator("#pe-run").click()
    page.wait_for_function("() => document.querySelector('#pe-summary').innerText.includes('base 10000')")
    # the model's own table: drawn when the tab opened (not in the first page load)
    page.wait_for_function("() => document.querySelector('#pe-model-note').innerText.trim().length > 0")
    page.locator("#pe-model-cosine .js-plotly-plot").wait_for()  # drawn, in the open accordion
    shot(page, "positional_encoding")


def test_next_token_from_the_default_prompt_adds_a_word(page):
    """The tab opens on a prompt cut mid-sentence: Next token at its settings adds a token that
    is not whitespace, and the stats say what joined the prompt."""
    from playground.generation.params import EXAMPLE_PROMPTS

    open_tab(page, "Text generation")
    box = textbox(page, "gen-prompt")
    assert box.input_value() == EXAMPLE_PROMPTS[0]
    page.locator("#gen-next").click()
    page.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('appended')", timeout=120_000)
    added = box.input_value()[len(EXAMPLE_PROMPTS[0]):]
    assert added.strip(), repr(added)
    assert "Next token appended" in page.locator("#gen-stats").inner_text()


def test_generation_tab_streams_and_stops(page):
    open_tab(page, "Text generation")
    textbox(page, "gen-prompt").fill("ROMEO:\nBut soft, what light")
    page.locator("#gen-run").click()
    page.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('stopped by')", timeout=120_000)
    assert page.locator("#gen-output .gen-tok").count() >= 1
    stats = page.locator("#gen-stats").inner_text()
    assert "tokens/s" in stats and "time to first token" in stats and ("CPU" in stats or "CUDA" in stats)
    # The chart of the last step follows the stream's end by one queued event: poll for it.
    page.wait_for_function("() => document.querySelector('#gen-chart').innerText.includes('Step')")
    assert page.locator("#gen-chart .js-plotly-plot").count() == 1
    # Clicking a generated token shows that step's candidates.
    page.locator("#gen-output .gen-tok").nth(1).click()
    page.wait_for_function("() => document.querySelector('#gen-chart').innerText.includes('Step 2:')")
    shot(page, "text_generation")

    # The stop button: this prompt and seed write all 512 tokens when left alone (no
    # <|endoftext|>), so a generation that ends early with "stopped by: stopped" was stopped.
    page.locator("#gen-stop").scroll_into_view_if_needed()
    slider = page.locator("#gen-max input[type=number]")
    slider.fill("512")
    slider.press("Enter")
    page.locator("#gen-run").click()
    # Streaming: the stats no longer show the first generation's end, and a few tokens are out.
    page.wait_for_function(
        "() => !document.querySelector('#gen-stats').innerText.includes('stopped by')"
        " && document.querySelectorAll('#gen-output .gen-tok').length >= 3",
        timeout=60_000,
    )
    # The click event itself, at once: Playwright's click first waits for the button to look
    # still while the page redraws, which takes seconds on a busy machine (the sample may end).
    page.locator("#gen-stop").dispatch_event("click")
    try:
        page.wait_for_function("() => document.querySelector('#gen-stats').innerText.includes('stopped by: stopped')")
    except Exception as err:  # say what the page showed instead
        stats = page.locator("#gen-stats").inner_text()
        shown = page.locator("#gen-output .gen-tok").count()
        raise AssertionError(f"no 'stopped by: stopped' after Stop; {shown} tokens shown, the stats say: {stats!r}") from err
    n1 = page.locator("#gen-output .gen-tok").count()
    # Slow motion: the tokens shown are hidden and shown again one at a time, with a count.
    page.locator("#gen-replay").click()
    page.wait_for_function("() => document.querySelector('.pg-replay-note')?.textContent.startsWith('Slow motion: token')")
    hidden = page.evaluate("() => [...document.querySelectorAll('#gen-output .gen-tok')].filter(t => t.style.visibility === 'hidden').length")
    assert 0 < hidden < n1
    page.wait_for_function("() => !document.querySelector('.pg-replay-note')", timeout=120_000)
    page.wait_for_timeout(1500)  # a check that nothing more comes needs time to pass
    n2 = page.locator("#gen-output .gen-tok").count()
    assert 3 <= n1 == n2 < 512  # nothing more came after the stop
    stats = page.locator("#gen-stats").inner_text()
    assert re.search(rf"\b{n1} new tokens", stats), stats  # the stats count what the page shows


def test_attention_tab(page):
    open_tab(page, "Attention")
    textbox(page, "att-text").fill("hello everyone, how are you")
    page.locator("#att-run").click()
    page.wait_for_function("() => document.querySelector('#att-info').innerText.includes('tokens')")
    page.locator("#att-head-fig .js-plotly-plot").wait_for()
    page.locator("#att-stage").get_by_text("5 · masked fill").click()
    page.wait_for_function("() => document.querySelector('#att-stage-md').innerText.includes('masked_fill')")
    shot(page, "attention")


def test_model_tab(page):
    open_tab(page, "Model")
    params = page.locator("#model-params")
    params.get_by_text("total").first.wait_for()
    page.locator("#model-curves .js-plotly-plot").wait_for()
    # the training curves named once (a label over the chart repeated its title)
    shown = page.locator('[role="tabpanel"]:visible').first.inner_text()
    assert shown.count("Training curves") == 1, shown.count("Training curves")
    # the picture first, then the training; the downloads lead with the browser-sized folder
    assert "blocks" in page.locator("#model-arch").inner_text()
    assert page.evaluate("() => Boolean(window.pgViews && window.pgViews['model-view'])")  # the static edition's view, web/views/model.js
    downloads = page.locator("#model-downloads button").all_inner_texts()
    assert "gpt-playground-browser.zip" in downloads[0] and all(re.search(r"\(\d+ MB\)", d) for d in downloads), downloads
    page.get_by_role("button", name=re.compile(r"model\.onnx")).wait_for()
    page.get_by_role("button", name=re.compile(r"gpt-playground-hub\.zip")).wait_for()
    # the engineering folded away, there on a click
    page.locator("#model-engineering").get_by_text("The engineering").click()
    assert "input_ids" in page.locator("#model-graph").inner_text()
    assert "InferenceSession" in page.locator("#model-snippet").inner_text()
    with page.expect_download() as download:
        page.get_by_role("button", name=re.compile(r"^⬇ model_quantized\.onnx")).click()
    path = download.value.path()
    assert Path(path).stat().st_size == (ROOT / "artifacts" / "hub" / "onnx" / "model_quantized.onnx").stat().st_size
    shot(page, "model")


def test_no_javascript_errors(page):
    assert page.errors == []
