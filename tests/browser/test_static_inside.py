"""Inside the model in the static edition (``python -m deploy.static DIR`` served by
``python -m http.server``, headless Chromium): what the tab shows for a link against
playground.inside.forward_pass in PyTorch on the weights the folder ships (its 8-bit file read back
by numpy: rounding only, bound 1e-3), every number of every stage (tests/inside_pages.py), and on
the fp32 model (the 8-bit rounding: bound measured, tests/browser/test_web_inside.py); every stage opened
from the map fits one screen with the map at 1280x800 and 390x844; the benchmark reads the page."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from export.inside_graph import dequantized_model, read_weights
from deploy.static import INSIDE_INDEX, INSIDE_WEIGHTS
from model import get_tokenizer, load_pretrained
from playground import inside as ins
from inside_pages import Tolerance, check_against, check_one_screen, shown as shown_numbers
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


ONE_SCREEN = ({"width": 1280, "height": 800}, {"width": 390, "height": 844})


def shown(page) -> None:
    page.wait_for_selector("#ins-view[data-done]", timeout=120_000)
    page.wait_for_function("() => !document.querySelector('#ins-view').dataset.pending")


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
        t = int(page.get_attribute("#ins-view", "data-token"))
        assert t == ins.opening_token(same)  # it opens where a prediction forms, as the app does
        numbers = shown_numbers(page)
        assert abs(numbers["loss"] - same.loss) <= SAME_WEIGHTS
        assert abs(numbers["loss"] - fp32.loss) <= FP32_LOSS
        assert f"{same.loss:.3f}" == page.inner_text("#ins-loss")
        logits = lens_logits(same, t)
        nxt = get_tokenizer().encode(TEXT)[t + 1]
        for layer, (row, (want, _)) in enumerate(zip(numbers["lens"], same.lens_next(t))):
            assert abs(row["rank"] - want) <= near_ties(logits[layer], nxt), f"layer {layer}: {row['rank']} vs {want}"
        # the candidates at the output: PyTorch's top 10 at that token
        assert [c[0] for c in numbers["candidates"]][:3] == same.top_ids[t][:3].tolist()
        assert "8-bit weights, onnxruntime-web" in page.inner_text("#ins-info")  # which engine and file
        assert not page.errors


def test_a_links_layer_head_and_token_show_every_stage_as_pytorch_computes_it(static_server, shipped):
    same, _ = shipped
    with static_page(static_server.url + LINK + "&layer=2&head=3&token=4", viewport=LAPTOP) as page:
        ready(page)
        shown(page)
        assert page.input_value("#ins-layer") == "2" and page.input_value("#ins-head") == "3" and page.input_value("#ins-token") == "4"
        check_against(shown_numbers(page), same, Tolerance(value=SAME_WEIGHTS, loss=SAME_WEIGHTS))
        # moving the layer (the slider, as a drag does) redraws from the same pass
        page.locator("#ins-layer").fill("0")
        page.wait_for_function("document.querySelector('#ins-view').dataset.layer === '0'")
        assert "Layer 0, head 3" in page.inner_text("#ins-b-attention")
        check_against(shown_numbers(page), same, Tolerance(value=SAME_WEIGHTS, loss=SAME_WEIGHTS))
        # the arrow keys on the token slider: another token, its lens computed in the page
        page.locator("#ins-token").press("ArrowRight")
        page.wait_for_function("() => { const v = document.querySelector('#ins-view'); return v.dataset.token === '5' && !v.dataset.pending; }")
        check_against(shown_numbers(page), same, Tolerance(value=SAME_WEIGHTS, loss=SAME_WEIGHTS))
        # Copy link writes the same settings back
        page.get_by_role("button", name="Copy link").click()
        page.wait_for_selector(".pg-copy input:not([hidden])")
        link = page.input_value(".pg-copy input")
        assert "tab=inside" in link and "layer=0" in link and "head=3" in link and "token=5" in link
        # every stage opened from the map, the map on the screen above it, at 1280x800
        page.set_viewport_size(ONE_SCREEN[0])
        check_one_screen(page)
        assert not page.errors


@pytest.mark.slow
def test_the_click_to_drawn_benchmark_reads_the_static_page(static_server):
    """benchmarks.browser_inside waits on the view's own state: a change of each kind seen drawn."""
    from benchmarks.browser_inside import measure

    times = measure(static_server.url, repeats=1, width=1280, edition="static", look_s=0.2)
    assert list(times) == ["text", "layer", "head", "token"]
    for kind, pairs in times.items():
        assert len(pairs) == 1 and all(0 < drawing <= total for total, drawing in pairs), (kind, pairs)


def test_the_phone_fits_the_tab_and_downloads_its_files_when_it_opens(static_server):
    with static_page(static_server.url, viewport=PHONE, is_mobile=True, has_touch=True) as page:
        loaded: list[str] = []
        page.on("request", lambda r: loaded.append(r.url))
        page.reload(wait_until="domcontentloaded")
        ready(page)
        assert not any("inside/" in u for u in loaded), loaded
        page.click("#tab-inside")
        shown(page)
        assert all(any(f"inside/{name}" in u for u in loaded) for name in ("weights.bin", "graph.onnx", "lens.onnx"))
        assert not any("model/model.onnx" in u for u in loaded)  # the decoder is not needed here
        assert PHONE == ONE_SCREEN[1]
        check_one_screen(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert not page.errors
