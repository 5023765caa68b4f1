"""Inside the model in the static edition (``python -m export.static DIR`` served by
``python -m http.server``, headless Chromium): what the tab shows for a link against
playground.inside.forward_pass in PyTorch on the weights the folder ships (its 8-bit file read back
by numpy: rounding only, bound 1e-3) and on the fp32 model (the 8-bit rounding: bound measured,
tests/test_web_inside.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from export.inside_graph import dequantized_model, read_weights
from export.static import INSIDE_INDEX, INSIDE_WEIGHTS
from model import get_tokenizer, load_pretrained
from playground import inside as ins
from static_site import LAPTOP, PHONE, ready, static_page, static_server, static_site  # noqa: F401
from test_web_inside import FP32_LOSS, SAME_WEIGHTS, near_ties

pytestmark = pytest.mark.browser

TEXT = "ROMEO.\nWhat say you"
LINK = "?tab=inside&text=ROMEO.%0AWhat%20say%20you"


@pytest.fixture(scope="module")
def model():
    return load_pretrained()


@pytest.fixture(scope="module")
def shipped(model, static_site):
    """PyTorch's pass of TEXT on the folder's own weights, and on the fp32 model."""
    ids = get_tokenizer().encode(TEXT)
    same = dequantized_model(model, read_weights(static_site / INSIDE_WEIGHTS, static_site / INSIDE_INDEX))
    return ins.forward_pass(same, ids), ins.forward_pass(model, ids)


def shown(page) -> None:
    page.wait_for_selector("#ins-view[data-done]", timeout=120_000)


def lens_ranks(page) -> list[int]:
    return [int(r) for r in page.eval_on_selector_all("#ins-lens tbody tr", "rows => rows.map((r) => r.dataset.rank)")]


def lens_logits(fp: ins.ForwardPass, t: int) -> np.ndarray:
    with torch.inference_mode():
        x = torch.from_numpy(np.stack([layer.x_out[t] for layer in fp.layers]))
        return ins.output_head(x, fp.model)[0].numpy()


def test_a_link_shows_the_loss_and_the_logit_lens_rank_pytorch_gives(static_server, shipped):
    """The issue's check: the mean loss of the text and the logit-lens rank of the next token."""
    same, fp32 = shipped
    with static_page(static_server.url + LINK, viewport=LAPTOP) as page:
        ready(page)
        shown(page)
        loss = float(page.get_attribute("#ins-loss", "data-loss"))
        assert abs(loss - same.loss) <= SAME_WEIGHTS
        assert abs(loss - fp32.loss) <= FP32_LOSS
        assert f"Mean loss: {same.loss:.3f}" in page.inner_text("#ins-loss") or f"Mean loss: {loss:.3f}" in page.inner_text("#ins-loss")
        t = int(page.get_attribute("#ins-view", "data-token"))
        assert t == ins.opening_token(same)  # it opens where a prediction forms, as the app does
        ranks = lens_ranks(page)
        logits = lens_logits(same, t)
        nxt = get_tokenizer().encode(TEXT)[t + 1]
        for layer, (got, (want, _)) in enumerate(zip(ranks, same.lens_next(t))):
            assert abs(got - want) <= near_ties(logits[layer], nxt), f"layer {layer}: {got} vs {want}"
        # the candidates at the output: PyTorch's top 10 at that token
        listed = [int(i) for i in page.eval_on_selector_all("#ins-candidates li", "li => li.map((x) => x.dataset.id)")]
        assert listed[:3] == same.top_ids[t][:3].tolist()
        assert not page.errors


def test_a_links_layer_head_and_token_show_that_heads_attention(static_server, shipped):
    same, _ = shipped
    with static_page(static_server.url + LINK + "&layer=2&head=3&token=4", viewport=LAPTOP) as page:
        ready(page)
        shown(page)
        assert page.input_value("#ins-layer") == "2" and page.input_value("#ins-head") == "3" and page.input_value("#ins-token") == "4"
        T = len(same.ids)
        titles = page.eval_on_selector_all("#ins-attn tbody tr:nth-child(5) td", "tds => tds.map((x) => x.title)")
        assert len(titles) == T
        got = [float(re.search(r": ([0-9.]+)$", x).group(1)) for x in titles[:5]]
        assert np.allclose(got, same.layers[2].weights[3, 4, :5], atol=1e-3)  # written with 3 decimals
        assert all("masked" in x for x in titles[5:])
        # the residual norms of token 4 per layer, two decimals
        rows = page.eval_on_selector_all("#ins-residual tbody tr", "rows => rows.map((r) => [...r.cells].map((c) => c.textContent))")
        for layer, row in enumerate(rows):
            assert abs(float(row[4]) - np.linalg.norm(same.layers[layer].x_out[4])) <= 0.006
        # moving the layer redraws from the same pass
        page.select_option("#ins-layer", "0")
        page.wait_for_function("document.querySelector('#ins-view').dataset.layer === '0'")
        assert "Layer 0, head 3" in page.inner_text("#ins-view")
        # Copy link writes the same settings back
        page.get_by_role("button", name="Copy link").click()
        page.wait_for_selector(".pg-copy input:not([hidden])")
        link = page.input_value(".pg-copy input")
        assert "tab=inside" in link and "layer=0" in link and "head=3" in link and "token=4" in link
        assert not page.errors


def test_the_phone_fits_the_tab_and_downloads_its_files_when_it_opens(static_server):
    with static_page(static_server.url, viewport=PHONE, is_mobile=True, has_touch=True) as page:
        loaded: list[str] = []
        page.on("request", lambda r: loaded.append(r.url))
        page.reload(wait_until="domcontentloaded")
        ready(page)
        assert not any("inside/" in u for u in loaded), loaded
        page.click("#tab-inside")
        shown(page)
        assert any("inside/weights.bin" in u for u in loaded) and any("inside/graph.onnx" in u for u in loaded)
        assert not any("model/model.onnx" in u for u in loaded)  # the decoder is not needed here
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert not page.errors
