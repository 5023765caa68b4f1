"""The static edition's Embeddings, Positional encoding and Attention tabs in headless Chromium,
against the Python the Gradio app runs: the browser's nearest tokens against
playground.embeddings, its sinusoidal table against the formula, its attention weights (the 8-bit
ONNX file's) against the PyTorch model's, bad input answered beside the input, and each tab
within a 390 px phone."""

from __future__ import annotations

import math
import re
from urllib.parse import quote

import numpy as np
import pytest
import torch

from static_site import PHONE, ready, static_page, static_server, static_site  # noqa: F401 -- fixtures

pytestmark = pytest.mark.browser

EXPRESSIONS = ("king - man + woman", "0.5*king + 0.5*queen", "(king + queen)/2 - man")
# float16 rows in the page, float32 in the app: measured, the cosines agree to 1e-7 (the shipped
# embeddings round to float16 all but exactly); the bound allows a table that does not.
SIMILARITY_TOLERANCE = 2e-3
# The page's weights come from the 8-bit ONNX file (weights and activations quantized), the
# reference from the float32 PyTorch model. Measured over every layer and head of seven texts of
# 7 to 62 tokens (this module's two, the tab's examples, three more): at most 0.018, in the last
# layers (layer 0: 0.003-0.007). Twice that leaves room for another build of the same weights;
# any other head of the model differs from a head by 0.12 or more (median 0.66) on that text.
ATTENTION_TOLERANCE = 0.04
ATTENTION_TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"
SHORT_TEXT = "To be, or not to be"


def url(server, query: str) -> str:
    return f"{server.url}?{query}"


def wait_done(page, selector: str, attribute: str, value: str | None = None) -> None:
    """Wait until ``selector`` carries ``data-<attribute>`` (equal to ``value`` when given)."""
    page.wait_for_function(
        "([sel, attr, value]) => { const n = document.querySelector(sel);"
        " return n && n.dataset[attr] !== undefined && (value === null || n.dataset[attr] === value); }",
        arg=[selector, attribute, value],
    )


def no_page_errors(page) -> None:
    assert not page.errors, page.errors


# -- Embeddings ---------------------------------------------------------------------------------


def test_embeddings_nearest_tokens_are_the_apps(static_server):
    from playground.embeddings import embedding_arithmetic
    from playground.validation import InputError

    with static_page(url(static_server, "tab=embeddings&top_k=5")) as page:
        ready(page)
        wait_done(page, "#emb-table", "expression", "king - man + woman")
        for expr in EXPRESSIONS:
            page.fill("#emb-expr", expr)
            page.click("#emb-run")
            wait_done(page, "#emb-table", "expression", expr)
            shown_ids = [int(x) for x in page.locator("#emb-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")]
            cosines = page.locator("#emb-table tbody tr td:nth-child(4)").all_text_contents()
            exact = page.evaluate("() => window.pgEmbeddings.neighbours.map(n => n.similarity)")
            app = embedding_arithmetic(expr, 5).neighbours
            assert shown_ids == [n.id for n in app], expr
            np.testing.assert_allclose(exact, [n.similarity for n in app], atol=SIMILARITY_TOLERANCE, err_msg=expr)
            assert cosines == [f"{s:.4f}" for s in exact]
            tokens = page.locator("#emb-table tbody tr td:nth-child(2)").all_text_contents()
            assert tokens == [n.token for n in app]  # whitespace visible, ⋅queen
        assert page.locator("#emb-summary b").first.text_content() == "0.5·king + 0.5·queen − man"  # the app's formula
        wait_done(page, "#emb-chart", "drawn")

        # An unknown word: the app's message beside the input, the last result kept but dimmed.
        bad = "king - qwzx"
        with pytest.raises(InputError) as err:
            embedding_arithmetic(bad, 5)
        page.fill("#emb-expr", bad)
        page.press("#emb-expr", "Enter")
        page.wait_for_selector("#emb-error:not([hidden])")
        message = page.locator("#emb-error").text_content()
        assert str(err.value) in message and "unknown to the model" in message
        assert "pg-stale" in page.locator("#emb-results").get_attribute("class")
        assert page.locator("#emb-table").get_attribute("data-expression") == EXPRESSIONS[-1]
        # A grammar error reads as the app's too.
        page.fill("#emb-expr", "king * queen")
        page.click("#emb-run")
        page.wait_for_function("() => document.querySelector('#emb-error').textContent.includes('multiply two word vectors')")
        no_page_errors(page)


def test_embeddings_similarity_of_two_words(static_server):
    from playground.embeddings import word_similarity

    with static_page(url(static_server, "tab=embeddings")) as page:
        ready(page)
        wait_done(page, "#emb-sim-out", "similarity")
        page.fill("#emb-sim-a", "queen + man - woman")
        page.fill("#emb-sim-b", "king")
        page.click("#emb-sim-run")
        page.wait_for_function("() => document.querySelector('#emb-sim-out').textContent.includes('man')")
        shown = float(page.locator("#emb-sim-out").get_attribute("data-similarity"))
        assert shown == pytest.approx(word_similarity("queen + man - woman", "king").similarity, abs=SIMILARITY_TOLERANCE)
        no_page_errors(page)


# -- Positional encoding ----------------------------------------------------------------------


def formula(n: int, d: int, base: float) -> np.ndarray:
    """PE[pos, dim] from the paper's formula, written out here in float64."""
    pos = np.arange(n)[:, None]
    dim = np.arange(d)[None, :]
    angle = pos / base ** ((dim - dim % 2) / d)
    return np.where(dim % 2 == 0, np.sin(angle), np.cos(angle))


def page_table(page, n: int, d: int, cells: list[tuple[int, int]] | None = None) -> np.ndarray:
    """The page's table (``window.pgPositional.table``), whole or at ``cells``."""
    if cells is None:
        flat = page.evaluate(f"() => Array.from({{length: {n * d}}}, (_, i) => window.pgPositional.table(Math.floor(i / {d}), i % {d}))")
        return np.asarray(flat).reshape(n, d)
    return np.asarray(page.evaluate("cells => cells.map(([p, c]) => window.pgPositional.table(p, c))", cells))


def test_positional_table_is_the_formula(static_server):
    from model import positional_encoding

    with static_page(url(static_server, "tab=positional&d_model=64&n_positions=50&base=100")) as page:
        ready(page)
        wait_done(page, "#pe-table", "drawn", "64x50@100")
        table = page_table(page, 50, 64)
        np.testing.assert_allclose(table, formula(50, 64, 100), atol=1e-6)
        np.testing.assert_allclose(table, positional_encoding(50, 64, 100).numpy(), atol=1e-7)  # the model's own function
        canvas = page.locator("#pe-heatmap-canvas")
        assert canvas.evaluate("c => [c.width, c.height]") == [64, 50]  # a pixel per dimension and position

        # The readout under the pointer: position 7, dimension 9.
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 9.5 / 64, box["y"] + box["height"] * 7.5 / 50)
        readout = page.locator("#pe-heatmap-readout")
        assert readout.get_attribute("data-row") == "7" and readout.get_attribute("data-col") == "9"
        value = float(re.search(r"= (-?[\d.]+)", readout.text_content()).group(1))
        assert value == pytest.approx(formula(50, 64, 100)[7, 9], abs=1e-4)

        # The Transformer tutorial's 1024 x 512 table through the controls, at cells spread over it.
        for name, v in (("d_model", "512"), ("n_positions", "1024"), ("base", "10000")):
            page.fill(f"#pe-{name}", v)
        page.click("#pe-run")
        wait_done(page, "#pe-table", "drawn", "512x1024@10000")
        rng = np.random.default_rng(0)
        cells = [(int(p), int(c)) for p, c in zip(rng.integers(0, 1024, 400), rng.integers(0, 512, 400))] + [(1023, 510), (1023, 511), (0, 0), (1, 0)]
        want = positional_encoding(1024, 512, 10000).numpy()
        np.testing.assert_allclose(page_table(page, 1024, 512, cells), [want[p, c] for p, c in cells], atol=1e-6)
        assert page.evaluate("() => window.pgPositional.wavelengths[255]") == pytest.approx(2 * math.pi * 10000 ** (510 / 512))
        # The slowest dimension's wavelength, 60,611.2 positions: the same whole number under the pointer
        # as in the summary, and as the app's summary writes it (once 4 significant digits: 60,610).
        from playground import positional as pe
        from playground.ui.positional import _summary

        apps = re.search(r"to ([\d,]+) positions", _summary(pe.positional_encoding(512, 1024, 10000))).group(1)
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 511.5 / 512, box["y"] + box["height"] * 300.5 / 1024)  # (below the sticky tabs)
        page.wait_for_function("() => document.querySelector('#pe-heatmap-readout').dataset.col === '511'")
        assert f"(a turn every {apps} positions)" in readout.text_content()
        assert f"to {apps} positions" in page.inner_text("#pe-summary") and apps == "60,611"

        # d_model 20, base 2: a small base, every dimension turning fast.
        for name, v in (("d_model", "20"), ("n_positions", "30"), ("base", "2")):
            page.fill(f"#pe-{name}", v)
        page.click("#pe-run")
        wait_done(page, "#pe-table", "drawn", "20x30@2")
        np.testing.assert_allclose(page_table(page, 30, 20), formula(30, 20, 2), atol=1e-6)

        # An odd d_model: the app's message, the last table kept and dimmed.
        page.fill("#pe-d_model", "21")
        page.click("#pe-run")
        page.wait_for_selector("#pe-error:not([hidden])")
        assert "d_model must be even (each frequency has a sine and a cosine column), not 21" in page.locator("#pe-error").text_content()
        assert "pg-stale" in page.locator("#pe-results").get_attribute("class")
        assert page.locator("#pe-table").get_attribute("data-drawn") == "20x30@2"
        page.fill("#pe-d_model", "20")
        page.fill("#pe-dims", "2, 40")
        page.click("#pe-run")
        page.wait_for_function("() => document.querySelector('#pe-error').textContent.includes('Dimension must be from 0 to 19, not 40')")
        no_page_errors(page)


# -- Attention ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_model():
    from model import load_pretrained

    return load_pretrained().eval()


def torch_weights(model, ids: list[int]) -> np.ndarray:
    """[n_layer, n_head, T, T] from the PyTorch model's output_attentions, as the app's tab gets them."""
    with torch.inference_mode():
        out = model(torch.tensor([ids]), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).float().numpy()


def page_weights(page) -> tuple[list[int], np.ndarray, int, int]:
    got = page.evaluate("() => { const a = window.pgAttention;"
                        " return [a.ids, a.attentions.map(x => Array.from(x)), a.layer, a.head]; }")
    ids, flat, layer, head = got
    t = len(ids)
    return ids, np.asarray(flat).reshape(len(flat), -1, t, t), layer, head


def test_attention_weights_are_the_models(static_server, torch_model):
    from playground.attention import attention
    from playground.attention import CELL_VALUES_MAX_TOKENS
    from playground.tokens import decode, encode, token_labels
    from playground.validation import InputError

    query = f"tab=attention&text={quote(ATTENTION_TEXT)}&layer=1&head=2"
    with static_page(url(static_server, query)) as page:
        ready(page)
        ids = encode(ATTENTION_TEXT)
        wait_done(page, "#att-head-fig", "drawn", f"1:2:{','.join(map(str, ids))}")
        got_ids, weights, layer, head = page_weights(page)
        assert got_ids == ids and (layer, head) == (1, 2)
        want = torch_weights(torch_model, ids)
        assert weights.shape == want.shape
        diff = float(np.max(np.abs(weights - want)))
        print(f"\nattention, 8-bit ONNX in the browser vs PyTorch float32: max |diff| {diff:.4f}")
        assert diff <= ATTENTION_TOLERANCE
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
        assert np.all(np.triu(weights, k=1) == 0.0)  # the future: exactly zero
        # The chosen head's figure is that head's weights, its axes the tokens, both ways.
        fig = page.evaluate("() => { const gd = document.querySelector('#att-head-fig');"
                            " return [gd.data[0].z, gd.layout.xaxis.ticktext, gd.layout.yaxis.ticktext]; }")
        np.testing.assert_allclose(np.asarray(fig[0]), weights[1, 2], atol=1e-7)
        assert fig[1] == fig[2] == token_labels(ids)
        shown = page.locator("#att-head-fig .xtick text").all_text_contents()
        assert shown == token_labels(ids)
        assert len(ids) <= CELL_VALUES_MAX_TOKENS and page.evaluate("() => document.querySelector('#att-head-fig').data[0].texttemplate")

        # Another layer from the picker: that layer's head, no second forward needed.
        page.select_option("#att-layer", "4")
        wait_done(page, "#att-head-fig", "drawn", f"4:2:{','.join(map(str, ids))}")
        z = np.asarray(page.evaluate("() => document.querySelector('#att-head-fig').data[0].z"))
        np.testing.assert_allclose(z, want[4, 2], atol=ATTENTION_TOLERANCE)
        mean = np.asarray(page.evaluate("() => document.querySelector('#att-mean-fig').data[0].z"))
        np.testing.assert_allclose(mean, want[4].mean(axis=0), atol=ATTENTION_TOLERANCE)

        # A short text: two decimals in every cell, as the app prints them (up to its CELL_VALUES_MAX_TOKENS).
        page.fill("#att-text", SHORT_TEXT)
        page.click("#att-run")
        short = encode(SHORT_TEXT)
        page.wait_for_function("t => document.querySelector('#att-head-fig').dataset.drawn.endsWith(':' + t)", arg=",".join(map(str, short)))
        _, weights, layer, head = page_weights(page)
        np.testing.assert_allclose(weights, torch_weights(torch_model, short), atol=ATTENTION_TOLERANCE)
        assert page.evaluate("() => document.querySelector('#att-head-fig').data[0].texttemplate") == "%{z:.2f}"
        for n, shown in ((CELL_VALUES_MAX_TOKENS, "%{z:.2f}"), (CELL_VALUES_MAX_TOKENS + 1, None)):
            text = decode(encode("the king and the queen " * 8)[:n])
            page.fill("#att-text", text)
            page.click("#att-run")
            page.wait_for_function("t => document.querySelector('#att-head-fig').dataset.drawn.endsWith(':' + t)",
                                   arg=",".join(map(str, encode(text))))
            assert page.evaluate("() => document.querySelector('#att-head-fig').data[0].texttemplate ?? null") == shown, n

        # Too many tokens: the app's message, the last result kept and dimmed.
        long_text = "horse " * 70
        with pytest.raises(InputError) as err:
            attention(long_text)
        page.fill("#att-text", long_text)
        page.click("#att-run")
        page.wait_for_selector("#att-error:not([hidden])")
        message = str(err.value)
        assert message[0].upper() + message[1:] in page.locator("#att-error").text_content()  # "Text is 71 tokens long; …"
        assert "pg-stale" in page.locator("#att-results").get_attribute("class")
        no_page_errors(page)


def test_attention_opens_on_the_apps_clearest_head(static_server, torch_model):
    from playground.attention import EXAMPLE_PROMPTS, salient_head
    from playground.tokens import encode

    with static_page(url(static_server, "tab=attention")) as page:
        ready(page)
        wait_done(page, "#att-results", "drawn")
        ids = encode(EXAMPLE_PROMPTS[0])
        opening = salient_head(torch_weights(torch_model, ids), ids)
        assert page.input_value("#att-layer") == str(opening.layer)
        assert page.input_value("#att-head") == str(opening.head)
        assert f"{opening.kind} head" in page.locator("#att-info").text_content()
        no_page_errors(page)


# -- A phone --------------------------------------------------------------------------------


def test_each_tab_fits_a_phone(static_server):
    with static_page(url(static_server, "tab=positional&d_model=512&n_positions=1024"), viewport=PHONE, is_mobile=True, has_touch=True) as page:
        for tab, done in (("positional", "#pe-lines[data-drawn]"), ("embeddings", "#emb-chart[data-drawn]"), ("attention", "#att-results[data-drawn]")):
            if tab != "positional":
                page.click(f"#tab-{tab}")
            else:
                ready(page)
            page.wait_for_selector(done, state="attached")
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{tab}: the page is {width} px wide on a {PHONE['width']} px phone"
        no_page_errors(page)
