"""Compare in the static edition (``python -m deploy.static DIR`` served by ``python -m http.server``,
headless Chromium): the untrained start the page draws itself is the app's own (the same seed, the
same float32 weights: its candidates, loss, neighbours and attention equal the app's, computed by
playground.compare in PyTorch), and the trained side, run on the page's 8-bit weights, is the app's
within the 8-bit rounding (bounds measured below). One page for the module: it downloads the
trained weights and draws the untrained ones once (tens of seconds on a loaded machine)."""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from playground import compare as cmp
from playground import links
from playground.compare_data import compare_data, neighbours_data
from playground.validation import InputError
from static_site import LAPTOP, PHONE, ready, static_page, static_server, static_site  # noqa: F401

pytestmark = pytest.mark.browser

TEXT = "ROMEO.\nWhat say you"
WORD = "lord"
SETTINGS = {"text": TEXT, "word": WORD, "sentence": cmp.EXAMPLE_SENTENCE}
LN_V = math.log(50257)
# The untrained side: the same float32 weights, run by onnxruntime-web against PyTorch. Measured
# 2026-12-01 over five prompts, five words, three sentences at every layer and head: the loss
# within 1.1e-6, the entropy 5.6e-6, a probability 1.4e-10, a cosine 3.6e-8, an attention weight
# 1.2e-7, and the same ids in the same order everywhere.
SAME = {"loss": 1e-4, "entropy": 1e-4, "probability": 1e-6, "similarity": 1e-5, "attention": 1e-5}
# The trained side: the page's 8-bit weights (one scale per row) against the app's fp32 ones. The
# same measurement: the loss moved by at most 0.011 nats, the entropy 0.015, a probability 0.0061,
# a cosine 0.0011 (one of eight neighbours swapped for the ninth in two of five words), an
# attention weight 0.0071; the top candidates the same ids.
EIGHT_BIT = {"loss": 0.03, "entropy": 0.04, "probability": 0.015, "similarity": 0.003, "attention": 0.02}


@pytest.fixture(scope="module")
def page(static_server):
    """The static page opened on the app's own link to its Compare tab, all three shown."""
    with static_page(static_server.url + links.url("compare", SETTINGS), viewport=LAPTOP) as pg:
        ready(pg)
        for box in ("next", "nb", "att"):
            pg.wait_for_selector(f"#cmp-{box}-view[data-done], #cmp-next-error:not([hidden])", timeout=600_000)
        assert pg.is_hidden("#cmp-next-error"), pg.inner_text("#cmp-next-error")
        yield pg


@pytest.fixture(scope="module")
def app():
    """What the app's Compare computes for the same settings (PyTorch, its untrained start)."""
    return compare_data(TEXT, WORD, cmp.EXAMPLE_SENTENCE)


def shown(page) -> dict:
    return page.evaluate("window.pgCompare")


def test_the_untrained_next_tokens_and_loss_are_the_apps(page, app):
    js, py = shown(page)["next"], app["next"]
    assert js["ids"] == py["ids"]
    (_, a), (_, b) = js["sides"], py["sides"]  # the untrained sides: the page's, the app's
    assert a["model"] == b["model"] == cmp.UNTRAINED
    assert [c["id"] for c in a["candidates"]] == [c["id"] for c in b["candidates"]]
    assert np.allclose([c["probability"] for c in a["candidates"]], [c["probability"] for c in b["candidates"]], rtol=0, atol=SAME["probability"])
    assert abs(a["prompt_loss"] - b["prompt_loss"]) <= SAME["loss"] and abs(a["entropy"] - b["entropy"]) <= SAME["entropy"]
    assert abs(a["prompt_loss"] - LN_V) < 0.6  # about a uniform guess over the vocabulary
    # what the learner reads: both losses, two decimals, against ln 50257
    line = page.inner_text("#cmp-loss")
    assert f"{cmp.UNTRAINED}: loss on the prompt {b['prompt_loss']:.2f} nats" in line and "ln 50,257 = 10.82" in line
    bars = page.eval_on_selector_all("#cmp-next-b li", "li => li.map((x) => Number(x.dataset.id))")
    assert bars == [c["id"] for c in b["candidates"]]


def test_the_trained_next_tokens_and_loss_are_the_apps_within_8_bits(page, app):
    (a, _), (b, _) = shown(page)["next"]["sides"], app["next"]["sides"]  # the trained sides: the page's, the app's
    assert a["model"] == b["model"] == cmp.TRAINED
    assert [c["id"] for c in a["candidates"][:3]] == [c["id"] for c in b["candidates"][:3]]
    want = {c["id"]: c["probability"] for c in b["candidates"]}
    for c in a["candidates"]:
        if c["id"] in want:
            assert abs(c["probability"] - want[c["id"]]) <= EIGHT_BIT["probability"], c
    assert abs(a["prompt_loss"] - b["prompt_loss"]) <= EIGHT_BIT["loss"]
    assert abs(a["entropy"] - b["entropy"]) <= EIGHT_BIT["entropy"]
    assert f"{cmp.TRAINED}: loss on the prompt {a['prompt_loss']:.2f} nats" in page.inner_text("#cmp-loss")


def test_the_neighbours_are_the_apps(page, app):
    js, py = shown(page)["neighbours"], app["neighbours"]
    (ta, ua), (tb, ub) = js["sides"], py["sides"]
    assert [n["id"] for n in ua["neighbours"]] == [n["id"] for n in ub["neighbours"]]  # untrained: the same search
    assert np.allclose([n["similarity"] for n in ua["neighbours"]], [n["similarity"] for n in ub["neighbours"]], atol=SAME["similarity"])
    assert [n["count"] for n in ua["neighbours"]] == [n["count"] for n in ub["neighbours"]]
    # trained: the same tokens but where 8 bits reorder near-equal cosines at the list's end
    got, want = {n["id"]: n["similarity"] for n in ta["neighbours"]}, {n["id"]: n["similarity"] for n in tb["neighbours"]}
    assert ta["neighbours"][0]["id"] == tb["neighbours"][0]["id"] and len(got.keys() & want.keys()) >= len(want) - 2
    assert all(abs(got[i] - want[i]) <= EIGHT_BIT["similarity"] for i in got.keys() & want.keys())
    last = tb["neighbours"][-1]["similarity"]
    assert all(abs(got[i] - last) <= EIGHT_BIT["similarity"] for i in got.keys() - want.keys())
    rows = page.eval_on_selector_all("#cmp-nb-b tbody tr", "rows => rows.map((r) => [...r.cells].map((c) => c.textContent))")
    assert [r[1] for r in rows] == [n["token"] for n in ub["neighbours"]] and [r[3] for r in rows] == [f"{n['similarity']:.4f}" for n in ub["neighbours"]]


def test_the_attention_opens_on_the_apps_head_with_the_apps_weights(page, app):
    js, py = shown(page)["attention"], app["attention"]
    opening = cmp.opening_head(cmp.EXAMPLE_SENTENCE)
    assert (js["layer"], js["head"]) == (py["layer"], py["head"]) == (opening.layer, opening.head)
    assert js["tokens"] == py["tokens"]
    (ta, ua), (tb, ub) = js["sides"], py["sides"]
    assert np.abs(np.array(ua["weights"]) - np.array(ub["weights"])).max() <= SAME["attention"]
    assert np.abs(np.array(ta["weights"]) - np.array(tb["weights"])).max() <= EIGHT_BIT["attention"]
    where = f"layer {opening.layer}, head {opening.head}"
    assert page.inner_text("#cmp-att-a h4") == f"{cmp.TRAINED}: {where}" and page.inner_text("#cmp-att-b h4") == f"{cmp.UNTRAINED}: {where}"
    # how sharp each side's rows are (the rows' mean entropy, the weight on the token before) on
    # the app's weights: the untrained side to the digit, the trained one within 8 bits
    def spread(w):
        w = np.array(w)
        return float(-(w * np.log(np.clip(w, 1e-12, 1))).sum(-1).mean()), 100 * float(np.mean(np.diagonal(w, -1)))

    line = page.inner_text("#cmp-att-spread")
    entropy, previous = spread(ub["weights"])
    assert f"; {cmp.UNTRAINED} {entropy:.2f} nats, {previous:.0f} %;" in line
    trained = re.search(rf"{cmp.TRAINED} ([0-9.]+) nats, ([0-9]+) %", line)
    assert abs(float(trained[1]) - spread(tb["weights"])[0]) <= 0.01 and abs(float(trained[2]) - spread(tb["weights"])[1]) <= 1


def test_bad_input_gets_the_apps_message_and_keeps_the_last_result(page):
    for box, field, value, run in (("next", "#cmp-prompt", "   ", lambda v: cmp.compare_next_token(v)),
                                   ("nb", "#cmp-word", "blockchain", lambda v: cmp.compare_neighbours(v))):
        with pytest.raises(InputError) as err:
            run(value)
        page.fill(field, value)
        page.click(f"#cmp-{box}-run")
        page.wait_for_selector(f"#cmp-{box}-error:not([hidden])")
        message = page.inner_text(f"#cmp-{box}-error")
        assert str(err.value)[1:] in message and "last input that worked" in message
        assert "pg-stale" in page.get_attribute(f"#cmp-{box}-view", "class")
    page.fill("#cmp-prompt", TEXT)
    page.fill("#cmp-word", WORD)


def test_a_new_word_and_head_redraw_as_the_app_computes_them(page):
    """An expression's neighbours (no pass), another head of the same sentence (from the passes
    held: no new one). A new prompt runs the opening's own function (the app's tab test types one)."""
    word = "king - man + woman"
    page.fill("#cmp-word", word)
    page.press("#cmp-word", "Enter")
    page.wait_for_function(f"window.pgCompare.neighbours.word === {word!r}")
    nb = neighbours_data(word, cmp.compare_neighbours(word))
    assert [n["id"] for n in shown(page)["neighbours"]["sides"][1]["neighbours"]] == [n["id"] for n in nb["sides"][1]["neighbours"]]
    page.select_option("#cmp-layer", "1")
    page.select_option("#cmp-head", "2")
    page.wait_for_function("window.pgCompare.attention.layer === 1 && window.pgCompare.attention.head === 2")
    (_, r) = cmp.compare_attention(cmp.EXAMPLE_SENTENCE, 1, 2)[1]
    assert np.abs(np.array(shown(page)["attention"]["sides"][1]["weights"]) - r.weights[1, 2]).max() <= SAME["attention"]
    assert not page.errors


def test_copy_link_opens_the_same_state_in_the_app(page):
    """The link the page copies is read by the app's own parser as the settings the page shows,
    and the page was opened from the app's own writer (playground.links.url): a round trip."""
    page.fill("#cmp-prompt", TEXT)
    page.fill("#cmp-word", "king - man + woman")
    page.fill("#cmp-sentence", "to be or not to be")
    page.select_option("#cmp-layer", "1")
    page.select_option("#cmp-head", "2")
    page.get_by_role("button", name="Copy link").click()
    page.wait_for_selector(".pg-copy input:not([hidden])")
    link = links.parse_query(dict(parse_qsl(urlsplit(page.input_value(".pg-copy input")).query, keep_blank_values=True)))
    assert link.tab == "compare" and not link.messages
    assert link.settings == {"text": TEXT, "word": "king - man + woman", "sentence": "to be or not to be", "layer": 1, "head": 2}


# Draws a neighbours object in the tab's box with the view itself, as the tab does.
RENDER_NEIGHBOURS = """async (data) => {
  const { renderNeighbours } = await import('./views/compare.js');
  const el = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    node.append(...children);
    return node;
  };
  renderNeighbours(document.querySelector('#cmp-nb-view'), data, { el });
}"""


def test_the_tab_fits_a_phone(page):
    """Side by side on a laptop, stacked at 390 px, and nothing wider than the screen, even a
    neighbour that is one of the vocabulary's longest tokens (an untrained model's neighbours are
    any tokens)."""
    from playground.tokens import visible_token

    longest = max(range(50257), key=lambda i: len(visible_token(i)))
    shown_now = shown(page)["neighbours"]
    long = {**shown_now, "sides": [{**s, "neighbours": [{**s["neighbours"][0], "id": longest, "token": visible_token(longest)}, *s["neighbours"][1:]]}
                                   for s in shown_now["sides"]]}
    page.set_viewport_size(PHONE)
    try:
        page.evaluate(RENDER_NEIGHBOURS, long)
        assert len(page.inner_text("#cmp-nb-a tbody tr td:nth-child(2)")) >= 40
        page.wait_for_function(f"document.documentElement.scrollWidth <= {PHONE['width']}")
        side = page.query_selector("#cmp-next-a").bounding_box()
        assert side["width"] <= PHONE["width"]  # the two sides stack
    finally:
        page.evaluate(RENDER_NEIGHBOURS, shown_now)
        page.set_viewport_size(LAPTOP)
    assert page.query_selector("#cmp-next-b").bounding_box()["y"] == page.query_selector("#cmp-next-a").bounding_box()["y"]
    assert not page.errors
