"""The static edition (``python -m deploy.static DIR``) served by ``python -m http.server`` and
run in headless Chromium: the tokenizer's ids, the browser engine's greedy and seeded text
against onnxruntime on the same ONNX file, Stop, links, the page after the server is gone, and
the folder itself (what a static Space needs, nothing fetched from elsewhere)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil

import pytest

from model import get_tokenizer
from plain_onnx import onnxruntime_greedy
from runtime.engine import Engine
from runtime.generate import generate
from runtime.params import SamplingParams
from static_site import HEAVY, LAPTOP, PHONE, first_tab_requests, ready, serve, static_page, static_server, static_site  # noqa: F401

pytestmark = pytest.mark.browser

GREEDY_PROMPT = "ROMEO:"
N_TOKENS = 32


def generated_ids(page) -> list[int]:
    return page.evaluate("() => Array.from(document.querySelectorAll('#gen-completion .gen-tok')).map((t) => Number(t.title.split('id ')[1]))")


def press_generate(page) -> None:
    page.evaluate("() => { const o = document.querySelector('#gen-output'); delete o.dataset.done; }")
    page.click("#gen-run")
    page.wait_for_selector("#gen-output[data-done=true]", timeout=120_000)


def test_a_tokenization_link_shows_the_ids(static_server):
    with static_page(static_server.url + "?tab=tokenization&text=hello everyone", viewport=LAPTOP) as page:
        ready(page)
        page.wait_for_function("document.querySelector('#tok-ids')?.textContent.startsWith('[')")
        assert page.inner_text("#tok-ids") == "[31373, 2506]"
        assert page.get_attribute("#tab-tokenization", "aria-selected") == "true"
        assert "2" in page.inner_text("#tok-counts")
        # ids back to text
        page.fill("#dec-ids", "40, 716, 257")
        page.click("#dec-run")
        assert page.inner_text("#dec-text") == get_tokenizer().decode([40, 716, 257])
        # A text exactly at the limit in characters, as the app counts them (an emoji is one, not
        # two UTF-16 units): taken, and counted so; one more is refused, its length said the same way.
        limit = json.loads((static_server.folder / "data" / "site.json").read_text())["limits"]["MAX_TEXT_CHARS"]
        page.fill("#tok-text", "😀" * limit)
        page.wait_for_function("n => document.querySelector('#tok-counts').innerText.includes(n) || !document.querySelector('#tok-error').hidden",
                               arg=f"{limit:,}")
        assert page.is_hidden("#tok-error"), page.inner_text("#tok-error")
        cards = page.locator("#tok-counts .pg-card").evaluate_all(
            "cards => Object.fromEntries(cards.map(c => [c.querySelector('span').innerText, c.querySelector('b').innerText]))")
        assert cards["characters"] == f"{limit:,}" and cards["UTF-8 bytes"] == f"{4 * limit:,}", cards
        page.fill("#tok-text", "😀" * (limit + 1))
        page.wait_for_selector("#tok-error:not([hidden])")
        assert page.inner_text("#tok-error") == f"text is {limit + 1:,} characters long; the limit is {limit:,} characters"
        assert not page.errors


# Texts that tell two implementations of text handling apart: blank ones, a carriage return, a
# byte-order mark (JavaScript's trim() strips it, Python's strip() does not), right-to-left
# scripts, a combining accent, a ZWJ emoji sequence, the special token's text, a zero-width space,
# the line separator, and what the app refuses: control characters and a lone surrogate.
TEXT_CATALOGUE = ["hello everyone", "", "   \t\n", "a\rb\r\n", "\ufeff", "\ufeffhello", "שלום עולם", "مرحبا بالعالم",
                  "e\u0301 café", "\U0001f469\u200d\U0001f469\u200d\U0001f467 family", "<|endoftext|> and after",
                  "x\u200by", "\u2028line", "tab\there", "\x00null", "\x1c\x85", "\x7f", "lone \ud800 surrogate"]


def test_the_static_tokenization_gives_the_apps_ids_counts_and_messages_on_a_catalogue(static_server):
    """Each text of the catalogue typed into the static edition's Tokenization, in Chromium, gives
    what the app's Tokenization gives for it (playground.tokenization.tokenize, the function behind
    the app's tab and /tokenize): the same ids and counts, or the same message where the app refuses
    the text (a control character, a lone surrogate: the page tokenized them until 2026-12-02)."""
    from playground import tokenization as tok
    from playground.validation import InputError

    with static_page(static_server.url + "?tab=tokenization", viewport=LAPTOP) as page:
        ready(page)
        page.wait_for_function("document.querySelector('#tok-ids')?.textContent.startsWith('[')")
        for text in TEXT_CATALOGUE:
            # (as JSON text: a lone surrogate cannot cross to the page as UTF-8)
            held, *shown = page.evaluate("""(json) => {
              const t = document.querySelector('#tok-text');
              t.value = JSON.parse(json);
              t.dispatchEvent(new Event('input', { bubbles: true }));
              const error = document.querySelector('#tok-error');
              if (!error.hidden) return [JSON.stringify(t.value), 'error', error.textContent];
              const cards = Object.fromEntries([...document.querySelectorAll('#tok-counts .pg-card')]
                .map((c) => [c.querySelector('span').innerText, Number(c.querySelector('b').innerText.replace(/,/g, ''))]));
              return [JSON.stringify(t.value), 'ok', JSON.parse(document.querySelector('#tok-ids').textContent), cards.tokens,
                      cards.characters, cards['UTF-8 bytes']];
            }""", json.dumps(text))
            held = json.loads(held)
            # A text box holds line breaks as \n, whatever was put in it (the app's box too): compared on what it holds.
            assert held == text.replace("\r\n", "\n").replace("\r", "\n"), (text, held)
            try:
                r = tok.tokenize(held, True, False)
                app = ["ok", r.ids, r.n_tokens, r.n_characters, r.n_bytes]
            except InputError as err:
                app = ["error", str(err)]
            assert shown == app, f"{text!r}: the static edition {shown}, the app {app}"
        assert not page.errors


def test_greedy_generation_matches_onnxruntime_and_goes_on_without_the_server(static_site, shipped_onnx):
    """The issue's check, as a teacher would do it: a link, Generate, then the server stopped."""
    served = serve(static_site)
    try:
        url = served.url + f"?tab=generation&text={GREEDY_PROMPT}&max_new_tokens={N_TOKENS}&temperature=0"
        with static_page(url, viewport=LAPTOP) as page:
            ready(page)
            page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
            assert page.input_value("#gen-temperature") == "0"
            press_generate(page)
            ids = generated_ids(page)
            prompt = get_tokenizer().encode(GREEDY_PROMPT)
            assert ids == onnxruntime_greedy(static_site / "model" / "model.onnx", prompt, N_TOKENS)
            # the Hub folder's own 8-bit file, under the server's engine: the same ids
            server = Engine.load(shipped_onnx["quantized"], provider="cpu")
            assert ids == generate(server, prompt, SamplingParams(N_TOKENS, stop_at_eot=False))
            assert page.inner_text("#gen-completion") == get_tokenizer().decode(ids)
            assert "32" in page.inner_text("#gen-stats")

            served.stop()  # the page has all it needs: a new prompt still generates
            page.fill("#gen-prompt", "JULIET.\nO Romeo, Romeo!")
            page.fill("#gen-max_new_tokens", "8")
            press_generate(page)
            assert len(generated_ids(page)) == 8
            assert page.inner_text("#gen-error") == "" or not page.is_visible("#gen-error")
            assert not page.errors
    finally:
        served.stop()


def test_a_seeded_run_repeats_and_draws_what_the_server_draws(static_server, shipped_onnx):
    settings = dict(temperature=0.8, top_k=50, top_p=0.95, seed=7)
    url = static_server.url + "?tab=generation&text=Romeo.%0A&max_new_tokens=24&" + "&".join(f"{k}={v}" for k, v in settings.items())
    with static_page(url, viewport=LAPTOP) as page:
        ready(page)
        page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
        press_generate(page)
        first = generated_ids(page)
        press_generate(page)
        assert generated_ids(page) == first
        # the seed's uniforms (draws.js) and the sampling rule (sampling.js) as the server's: the same draws
        server = Engine.load(shipped_onnx["quantized"], provider="cpu")
        params = SamplingParams(24, temperature=0.8, top_k=50, top_p=0.95, seed=7)
        assert first == generate(server, get_tokenizer().encode("Romeo.\n"), params)[: len(first)]
        page.fill("#gen-seed", "8")
        press_generate(page)
        assert generated_ids(page) != first


def test_stop_ends_a_generation_at_once(static_server):
    url = static_server.url + "?tab=generation&text=Romeo.%0A&max_new_tokens=512&temperature=0.8"
    with static_page(url, viewport=LAPTOP) as page:
        ready(page)
        page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
        page.check("#gen-slow")  # one token every 0.15 s: Stop lands mid-way however fast the machine
        page.click("#gen-run")
        page.wait_for_function("document.querySelectorAll('#gen-completion .gen-tok').length >= 3")
        page.click("#gen-stop")
        page.wait_for_selector("#gen-output[data-done=true]", timeout=30_000)
        assert page.get_attribute("#gen-stats", "data-stop-reason") == "stopped"
        n = len(generated_ids(page))
        assert 3 <= n < 512
        assert "you pressed Stop" in page.inner_text("#gen-notice")
        assert not page.is_disabled("#gen-run")
        page.uncheck("#gen-slow")
        check_next_token(page)  # (on the same page: one model load fewer in the default run)


def check_next_token(page) -> None:
    """Next token draws one token and appends it to the prompt; the chart shows its step."""
    before = page.input_value("#gen-prompt")
    page.evaluate("() => { delete document.querySelector('#gen-output').dataset.done; }")
    page.click("#gen-next")
    page.wait_for_selector("#gen-output[data-done=true]")
    after = page.input_value("#gen-prompt")
    ids = generated_ids(page)
    assert len(ids) == 1
    assert after == before + get_tokenizer().decode(ids)
    page.wait_for_function("document.querySelector('#gen-chart')?.dataset.step === '1'")
    assert "Step 1" in page.inner_text("#gen-chart")


@pytest.mark.slow  # the default run: the same check after Stop, in test_stop_ends_a_generation_at_once
def test_next_token_appends_to_the_prompt(static_server):
    with static_page(static_server.url + "?tab=generation&temperature=0", viewport=LAPTOP) as page:
        ready(page)
        page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
        check_next_token(page)


def test_bad_links_and_inputs_say_what_is_accepted(static_server):
    url = static_server.url + "?tab=generation&temperature=9&top_p=0&colour=red"
    with static_page(url, viewport=LAPTOP) as page:
        ready(page)
        notes = page.inner_text("#pg-link-notes")
        assert "temperature must be a number in [0, 5], not 9" in notes
        assert "top_p must be a number in (0, 1], not 0" in notes
        assert "'colour' is not a setting of the generation tab" in notes
        assert page.input_value("#gen-temperature") == "0.8"  # the default kept
        page.wait_for_selector("#gen-output[data-ready=true]", timeout=120_000)
        page.fill("#gen-prompt", "   ")
        page.click("#gen-run")
        assert "the prompt is empty" in page.inner_text("#gen-error")
        page.fill("#gen-prompt", "Romeo.\n")
        page.fill("#gen-top_k", "-3")
        page.click("#gen-run")
        assert "top_k must be" in page.inner_text("#gen-error")
        # the prompt at its limit in characters (emoji: two UTF-16 units each) and one past it
        limit = json.loads((static_server.folder / "data" / "site.json").read_text())["limits"]["MAX_PROMPT_CHARS"]
        page.fill("#gen-top_k", "50")
        page.fill("#gen-prompt", "😀" * (limit + 1))
        page.click("#gen-run")
        assert f"the prompt is {limit + 1:,} characters long; the limit is {limit:,}" in page.inner_text("#gen-error")
        page.fill("#gen-prompt", "😀" * limit)
        page.fill("#gen-max_new_tokens", "1")
        press_generate(page)
        assert len(generated_ids(page)) == 1 and page.is_hidden("#gen-error")
    with static_page(static_server.url + "?tab=nope", viewport=LAPTOP) as page:
        ready(page)
        assert "tab must be one of" in page.inner_text("#pg-link-notes")
        assert page.get_attribute("#tab-tokenization", "aria-selected") == "true"


def test_copy_link_reopens_the_same_settings(static_server):
    # (On a phone, which loads the model only on Generate: at 1280 px both pages would load it for nothing.)
    with static_page(static_server.url + "?tab=generation", viewport=PHONE, is_mobile=True, has_touch=True) as page:
        ready(page)
        page.fill("#gen-prompt", "KING HENRY.\nOnce more & again")
        page.fill("#gen-temperature", "0")
        page.fill("#gen-seed", "11")
        page.get_by_role("button", name="Copy link").click()
        page.wait_for_selector(".pg-copy input:not([hidden])")
        link = page.input_value(".pg-copy input")
    assert "tab=generation" in link and "temperature=0" in link and "seed=11" in link
    with static_page(link, viewport=PHONE, is_mobile=True, has_touch=True) as page:
        ready(page)
        assert page.input_value("#gen-prompt") == "KING HENRY.\nOnce more & again"
        assert page.input_value("#gen-seed") == "11"
        assert not page.is_visible("#pg-link-notes")


def test_no_tab_needs_a_server_and_the_footer_links_to_the_app(static_server):
    """Every tab is computed in the browser (Watch it learn trains there: tests/browser/test_static_learn.py);
    the footer still links to the full app on its Space."""
    with static_page(static_server.url + "?tab=learn", viewport=PHONE, is_mobile=True) as page:
        ready(page)
        box = page.inner_text("#panel-learn")
        assert "needs a server" not in box and "learns Shakespeare" in box
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert page.eval_on_selector_all("#pg-tabs button.server", "bs => bs.map((b) => b.id)") == []
        assert page.get_attribute("#pg-footer-app a", "href") == "https://huggingface.co/spaces/teacher/gpt-playground"


@pytest.mark.slow  # the default run: test_static_phone.py (the first tab's downloads, the tab rows, Generate's)
def test_the_phone_opens_generation_and_the_first_screen_is_light(static_server):
    """On a 390 px phone the tabs sit in rows within the screen and nothing is wider than it;
    opening the first tab does not download the model, nor does opening Text generation: its
    Generate does, after the page has said how much it is (tests/browser/test_static_phone.py)."""
    with static_page(static_server.url, viewport=PHONE, is_mobile=True, has_touch=True) as page:
        loaded = first_tab_requests(page)
        assert not any(heavy in u for u in loaded for heavy in HEAVY), loaded
        tabs = page.query_selector("#pg-tabs").bounding_box()
        assert tabs["height"] < 160 and tabs["width"] <= PHONE["width"]  # three rows of three
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.click("#tab-generation")
        page.wait_for_selector("#gen-download")
        assert not any("model.onnx" in u for u in loaded), loaded
        page.click("#gen-run")
        page.wait_for_selector("#gen-output[data-done=true]", timeout=120_000)
        assert any("model.onnx" in u for u in loaded)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_folder_is_a_static_space_with_nothing_fetched_from_elsewhere(static_site):
    readme = (static_site / "README.md").read_text()
    front = readme.split("---")[1]
    assert re.search(r"^sdk: static$", front, re.M) and re.search(r"^app_file: index.html$", front, re.M)
    for path in static_site.rglob("*"):
        if path.suffix in (".html", ".js", ".css") and "vendor" not in path.parts:
            text = path.read_text()
            assert not re.search(r"""(src|href|import)\s*[=(]?\s*["']https?://""", text), f"{path.name} loads from the network"
    site = json.loads((static_site / "data" / "site.json").read_text())
    for name, versioned in site["files"].items():  # the address names the file's content: a new file, a new address
        assert versioned == f"{name}?v={hashlib.sha256((static_site / name).read_bytes()).hexdigest()[:16]}"
    assert not [p for p in static_site.rglob("*") if p.name == "test" or p.name.endswith(".test.mjs")]  # node --test's
    assert site["app_space"] == "teacher/gpt-playground"
    lessons = json.loads((static_site / "data" / "lessons.json").read_text())
    for tab in site["browser_tabs"]:  # (Watch it learn's words come with its own files: learn.json)
        assert tab == "learn" or lessons[tab]["intro"].strip()


def test_a_file_the_page_loads_left_out_of_the_folder_is_named(static_site, tmp_path):
    """A build that leaves out a file the page loads (a library of web/vendor/, a module an import
    names, a tab's module, a file site.json lists) fails naming it (deploy.static.missing_files,
    which write_static runs last), where the page would only never get ready."""
    from deploy.static import missing_files

    assert missing_files(static_site) == []
    folder = tmp_path / "site"
    shutil.copytree(static_site, folder, copy_function=os.link)  # (hard links: no copy of 54 MB)
    for name in ("vendor/ort/ort-wasm-simd-threaded.mjs", "vendor/plotly/plotly.min.js.gz", "engine/sampling.js",
                 "tabs/inside.js", "views/inside.js", "checks.js", "style.css", "inside/weights.bin"):
        (folder / name).rename(folder / (name + ".away"))
        assert missing_files(folder) == [name]
        (folder / (name + ".away")).rename(folder / name)


def test_a_page_missing_a_module_fails_at_once_naming_it(static_site, tmp_path):
    """In Chromium, a folder without one of the page's modules: the tests' wait for the page
    (static_site.ready) fails as soon as the 404 comes, naming the file, not after its timeout."""
    folder = tmp_path / "site"
    shutil.copytree(static_site, folder, copy_function=os.link)
    (folder / "engine" / "tokenizer.js").unlink()
    served = serve(folder)
    try:
        with static_page(served.url, viewport=LAPTOP) as page:
            with pytest.raises(AssertionError, match=r"could not load http://\S+/engine/tokenizer\.js \(404\)"):
                ready(page)
    finally:
        served.stop()
