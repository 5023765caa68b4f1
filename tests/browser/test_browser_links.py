"""Headless Chromium on the launched app opened from links: for every tab, a link with its
parameters opens that tab showing that text and those settings, drawn by the tab itself (the
figures' and notes' own words say which layer, head, token...); a bad value keeps the default with
a message; Copy link gives the address that reopens what the page shows; and the page's plain
address, kept by the page cache, carries nothing of a link opened before."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from playground import links as L
from test_browser import browser_page, shots_dir, textbox  # noqa: F401 -- fixture reused
from test_browser_inside import set_slider, wait_info

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(app_server, shots_dir):  # noqa: F811 -- the fixture imported above
    with browser_page(app_server, shots_dir, viewport={"width": 1280, "height": 900}) as pg:
        pg.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_server.url.rstrip("/"))
        pg.base = app_server.url
        yield pg


@pytest.fixture(scope="module")
def enc():
    from model import get_tokenizer

    return get_tokenizer()


def goto(page, address: str) -> None:
    """A new page load (once more if Chromium aborts it: it did on a loaded machine, the page
    before still loading); the callers then wait for what the page shows."""
    from playwright.sync_api import Error

    try:
        page.goto(address, wait_until="commit")
    except Error as err:
        if "ERR_ABORTED" not in str(err):
            raise
        page.goto(address, wait_until="commit")
    page.get_by_role("tab", name=re.compile("Tokenization")).wait_for()


def open_link(page, tab: str, **settings) -> None:
    """The page at the address Copy link would give for ``settings`` (playground/links.py's url)."""
    goto(page, page.base + L.url(tab, settings))
    wait_selected(page, tab)


def wait_selected(page, tab: str) -> None:
    label = {"tokenization": "1 ·", "embeddings": "2 ·", "positional": "3 ·", "attention": "4 ·", "inside": "5 ·",
             "generation": "6 ·", "model": "7 ·", "compare": "8 ·", "learn": "9 ·"}[tab]
    page.wait_for_function(
        "(l) => [...document.querySelectorAll('button[role=tab][aria-selected=true]')].some((b) => b.innerText.startsWith(l))",
        arg=label,
    )


def number(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} input[type=number]").input_value()


def wait_number(page, elem_id: str, value) -> None:
    page.wait_for_function(
        "([id, v]) => { const b = document.querySelector('#' + id + ' input[type=number]'); return b && b.value === v; }",
        arg=[elem_id, str(value)],
    )


def wait_text(page, selector: str, fragment: str) -> None:
    page.wait_for_function(
        "([s, f]) => [...document.querySelectorAll(s)].some((e) => e.textContent.includes(f))", arg=[selector, fragment]
    )


def checked(page, selector: str) -> bool:
    return page.locator(selector).is_checked()


def note(page) -> str:
    return page.locator("#pg-link-note").inner_text().strip()


def test_inside_opens_at_the_links_layer_head_and_token(page, enc):
    text = "To be, or not to be, that is the question"
    n = len(enc.encode(text))
    open_link(page, "inside", text=text, layer=2, head=3, token=4)
    wait_info(page, f"{n} tokens; showing layer 2, head 3, token 4")
    assert textbox(page, "ins-text").input_value() == text
    assert (number(page, "ins-layer"), number(page, "ins-head"), number(page, "ins-token")) == ("2", "3", "4")
    assert "head 3: most to" in page.locator('#ins-map .ins-box[data-goto="ins-s-attention"]').inner_text()
    assert page.locator("#ins-map .ins-chip.ins-on").all_inner_texts() == ["2", "3"]
    page.locator("#ins-s-attention .ins-toggle").click()  # a folded stage opens with its heading
    assert "Layer 2, head 3" in page.locator("#ins-b-attention").inner_text()
    page.locator("#ins-s-output .ins-toggle").click()
    assert "question" in page.locator("#ins-b-output .ins-loss-text").inner_text()
    assert note(page) == "" and page.errors == []


def test_inside_without_a_token_opens_where_a_new_text_opens(page, enc):
    from playground.inside import inside, opening_token

    text = "Friends, Romans, countrymen"
    n = len(enc.encode(text))
    open_link(page, "inside", text=text, layer=5, head=7)
    wait_info(page, f"{n} tokens; showing layer 5, head 7, token {opening_token(inside(text).fp)} ")


def test_attention_opens_on_the_links_head(page, enc):
    text = "The king is dead, long live the king"
    open_link(page, "attention", text=text, layer=3, head=5)
    wait_text(page, "#att-head-fig .gtitle", "Layer 3, head 5")
    wait_text(page, "#att-info", f"{len(enc.encode(text))} tokens.")
    assert textbox(page, "att-text").input_value() == text
    assert (number(page, "att-layer"), number(page, "att-head")) == ("3", "5")
    # the line view is the link's text's, and the step-through follows the same head: its
    # columns of W_Q are head 5's (head_dim 256 / 8 = 32)
    assert page.locator("#att-lines .att-q .att-tok").count() == len(enc.encode(text))
    wait_text(page, "#att-stage-md", "W_Q[:, 160:192]")


def test_tokenization_opens_with_the_links_text_and_switches(page, enc):
    text = "Links  to what you see\n"
    open_link(page, "tokenization", text=text, whitespace=True, special=False)
    ids = str(enc.encode(text))
    page.wait_for_function("(ids) => document.querySelector('#tok-ids textarea').value === ids", arg=ids)
    assert checked(page, "#tok-ws input") and not checked(page, "#tok-special input")
    assert "↵" in page.locator("#tok-spans").inner_text()  # whitespace shown


def test_embeddings_opens_on_the_links_expression(page):
    open_link(page, "embeddings", text="queen - woman + man", top_k=5, exclude_inputs=False)
    wait_text(page, "#emb-summary", "queen − woman + man")  # the formula as the tab writes it
    # five rows, each with its cosine
    page.wait_for_function("() => (document.querySelector('#emb-table').innerText.match(/^-?[01]\\.\\d+$/gm) || []).length === 5")
    # the input words are not left out: queen itself is among its nearest tokens
    assert "queen" in page.locator("#emb-table").inner_text()


def test_positional_opens_on_the_links_table(page):
    open_link(page, "positional", d_model=64, n_positions=200, base=500, dims="1, 3")
    wait_text(page, "#pe-summary", "200 positions × 64 dimensions, base 500")
    wait_text(page, "#pe-lines .gtitle", "dimensions 1, 3")
    assert (number(page, "pe-dmodel"), number(page, "pe-npos"), number(page, "pe-base")) == ("64", "200", "500")
    assert textbox(page, "pe-dims").input_value() == "1, 3"


def test_generation_opens_with_the_links_prompt_and_settings(page):
    prompt = "KING HENRY.\nOnce more"
    open_link(page, "generation", text=prompt, max_new_tokens=20, temperature=0.25, top_k=7, top_p=0.5, seed=3, samples=2)
    page.wait_for_function("(p) => document.querySelector('#gen-prompt textarea').value === p", arg=prompt)
    wait_number(page, "gen-temp", "0.25")
    assert (number(page, "gen-max"), number(page, "gen-topk"), number(page, "gen-topp")) == ("20", "7", "0.5")
    # the live chart is drawn for these settings (its title wraps: one line each)
    wait_text(page, "#gen-live .gtitle", "temperature 0.25, top-k 7,")
    wait_text(page, "#gen-live .gtitle", "top-p 0.5:")


def test_model_and_learn_open_on_their_tab(page):
    open_link(page, "model")
    page.locator("#model-curves").wait_for()
    open_link(page, "learn", seed=7, init="skewed", learning_rate="too high", size="small",
              positions="sinusoidal", text="KING.\n")
    wait_number(page, "learn-seed", 7)
    for elem_id, value in (("learn-init", "skewed"), ("learn-lr", "too high"), ("learn-size", "small"), ("learn-positions", "sinusoidal")):
        assert page.locator(f"#{elem_id} input[type=radio]:checked").input_value() == value
    assert textbox(page, "learn-prompt").input_value() == "KING.\n"


def test_compare_opens_on_the_links_prompt_word_and_head(page):
    open_link(page, "compare", text="Juliet.\nAy me", word="queen", sentence="O Romeo, Romeo", layer=5, head=7)
    wait_text(page, "#cmp-att-a h4", "layer 5, head 7")
    wait_text(page, "#cmp-att-b h4", "layer 5, head 7")
    assert textbox(page, "cmp-word").input_value() == "queen"
    assert textbox(page, "cmp-prompt").input_value() == "Juliet.\nAy me"


def test_a_bad_value_keeps_the_default_with_a_message(page):
    goto(page, page.base + "?tab=attention&layer=9&head=x&colour=red")
    wait_selected(page, "attention")
    wait_text(page, "#pg-link-note", "This link could not be followed in full")
    shown = note(page)
    assert "layer must be from 0 to 5, not 9, so the tab keeps its default (" in shown
    assert "head must be a number, not 'x', so the tab keeps its default (" in shown
    assert "'colour' is not a setting of the attention tab" in shown
    default_layer = shown.split("layer must be from 0 to 5, not 9, so the tab keeps its default (", 1)[1].split(")")[0]
    assert number(page, "att-layer") == default_layer
    goto(page, page.base + "?tab=nowhere")
    wait_text(page, "#pg-link-note", "tab must be one of tokenization")
    wait_selected(page, "tokenization")


def copied(page, tab: str) -> str:
    page.locator(f"#{tab}-copy-link").click()
    wait_text(page, f"#{tab}-link .pg-link-status", "Copied")
    link = page.locator(f"#{tab}-link input.pg-link-url").input_value()
    assert page.evaluate("navigator.clipboard.readText()") == link
    return link


def test_copy_link_reopens_what_the_page_shows(page, enc):
    text = "O Romeo, Romeo! wherefore art thou Romeo?"
    n = len(enc.encode(text))
    open_link(page, "inside", text=text, layer=2, head=3, token=4)
    wait_info(page, "showing layer 2, head 3, token 4")
    set_slider(page, "ins-head", 6)  # the learner moves on: the link says where they are now
    wait_info(page, "showing layer 2, head 6, token 4")
    link = copied(page, "inside")
    assert link.startswith(page.base + "?")
    assert dict(parse_qsl(urlsplit(link).query)) == {"tab": "inside", "text": text, "layer": "2", "head": "6", "token": "4"}
    goto(page, page.base)  # elsewhere first: the plain page, its first tab
    wait_selected(page, "tokenization")
    goto(page, link)
    wait_selected(page, "inside")
    wait_info(page, f"{n} tokens; showing layer 2, head 6, token 4")


def test_copy_link_of_the_generation_tab_reads_back_the_same(page):
    open_link(page, "generation", text="Romeo.\n", temperature=0.8, top_p=0.95, seed=4294967295)
    wait_number(page, "gen-temp", "0.8")
    query = dict(parse_qsl(urlsplit(copied(page, "generation")).query))
    settings, messages = L.parse("generation", query)
    assert messages == []
    assert settings["text"] == "Romeo.\n" and settings["temperature"] == 0.8 and settings["top_p"] == 0.95
    assert settings["seed"] == 4294967295


def test_the_plain_page_carries_nothing_of_a_link(page):
    """The page cache keeps one page for every visitor: a link is applied after it loads, so the
    plain address still opens on the first tab and its example."""
    open_link(page, "tokenization", text="something else entirely")
    page.wait_for_function("() => document.querySelector('#tok-text textarea').value === 'something else entirely'")
    goto(page, page.base)
    wait_selected(page, "tokenization")
    from playground.tokenization import EXAMPLES

    # The load event's progress timer may show in the note for a moment: wait for it to settle.
    page.wait_for_function("() => document.querySelector('#pg-link-note').innerText.trim() === ''")
    assert textbox(page, "tok-text").input_value() == EXAMPLES[0] and note(page) == ""
