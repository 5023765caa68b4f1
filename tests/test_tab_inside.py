"""Inside the model tab: the stages of one forward pass recompose the model's logits (PyTorch and
the ONNX file), the per-token losses give the Compare tab's loss, the logit lens ends on the
model's own top 5, the cache is bounded, bad input is refused with a message."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from playground import inside as ins
from playground import limits
from playground.compare import next_token
from playground.inside import inside
from playground.inside_view import (ATTENDED, MASKED, NEGATIVE, OPEN_FIRST, POSITIVE, STAGES, first_ffn_note, info_markdown, map_html,
                                    matrix_labels, panels, residual_norms, strip_colours)
from playground.resources import get_model
from playground.validation import InputError

ROOT = Path(__file__).resolve().parent.parent
TEXT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east, and Juliet is the sun."


@pytest.fixture(scope="module")
def result():
    return inside(TEXT, layer=2, head=3)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(a))


@torch.inference_mode()
def recompose_logits(fp: ins.ForwardPass) -> torch.Tensor:
    """The final logits [T, V] rebuilt from the stage tensors alone: each stage is checked to be
    the arithmetic of the ones before it (with the block's parameters where a stage multiplies by
    them), and the stream is carried from the embedding to the output by the stored residual adds."""
    model, cfg = fp.model, fp.model.config
    T, C, H, D = len(fp.ids), cfg.d_model, cfg.n_head, cfg.head_dim
    E = model.wte.weight
    x = _t(fp.tok_emb) + _t(fp.pos_emb)
    scale = math.sqrt(C) if cfg.scale_embedding else 1.0  # "Attention Is All You Need", section 3.4
    torch.testing.assert_close(_t(fp.tok_emb), E[torch.tensor(fp.ids)] * scale, rtol=0, atol=0)
    torch.testing.assert_close(_t(fp.pos_emb), model.position_table()[:T], rtol=0, atol=0)
    for layer, (tr, block) in enumerate(zip(fp.layers, model.blocks)):
        torch.testing.assert_close(_t(tr.x_in), x, rtol=0, atol=1e-6, msg=f"layer {layer}: x_in")
        ln1 = (x - _t(tr.ln1_mean)[:, None]) / _t(tr.ln1_std)[:, None] * block.ln_1.weight + block.ln_1.bias
        torch.testing.assert_close(_t(tr.ln1_out), ln1, rtol=0, atol=1e-5)
        # the heads' outputs: softmax weights (rows sum to 1, zero above the diagonal) @ V
        w = _t(tr.weights)
        assert torch.all(torch.triu(w, diagonal=1) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(H, T), rtol=0, atol=1e-5)
        torch.testing.assert_close(_t(tr.head_out), w @ _t(tr.v), rtol=0, atol=1e-5)
        torch.testing.assert_close(_t(tr.scores), _t(tr.q) @ _t(tr.k).transpose(-2, -1) / math.sqrt(D), rtol=0, atol=1e-5)
        concat = _t(tr.head_out).transpose(0, 1).reshape(T, C)
        torch.testing.assert_close(_t(tr.concat), concat, rtol=0, atol=0)
        attn = concat @ block.attn.c_proj.weight.T + block.attn.c_proj.bias
        x = x + attn
        torch.testing.assert_close(_t(tr.x_mid), x, rtol=0, atol=1e-6)
        mlp = _t(tr.gelu) @ block.mlp.c_proj.weight.T + block.mlp.c_proj.bias
        torch.testing.assert_close(_t(tr.gelu), torch.nn.functional.gelu(_t(tr.fc), approximate="tanh"), rtol=0, atol=1e-5)
        x = x + mlp
    h = (x - _t(fp.lnf_mean)[:, None]) / _t(fp.lnf_std)[:, None] * model.ln_f.weight + model.ln_f.bias
    return h @ E.T  # the output head is the embedding matrix, transposed


def test_stages_recompose_the_models_logits(result):
    fp = result.fp
    logits = recompose_logits(fp)
    with torch.inference_mode():
        reference = get_model()(torch.tensor([fp.ids]))[0][0]
    diff = float((logits - reference).abs().max())
    print(f"recomposed logits vs the model's forward: {diff:.2e}")
    assert diff <= 1e-5
    assert fp.hidden_max_diff <= 1e-5


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "learned"])
def test_a_model_with_scaled_embeddings_recomposes_too(pos_encoding):
    """Token embeddings times sqrt(d_model) (GPTConfig.scale_embedding), whichever the positions."""
    from model import GPT, GPTConfig

    torch.manual_seed(0)
    config = GPTConfig(block_size=64, n_layer=2, n_head=2, d_model=32, pos_encoding=pos_encoding, scale_embedding=True)
    model = GPT(config).eval()
    fp = inside(TEXT, model=model).fp
    with torch.inference_mode():
        reference = model(torch.tensor([fp.ids])).logits[0]
    assert float((recompose_logits(fp) - reference).abs().max()) <= 1e-5


@torch.inference_mode()
def test_every_layer_matches_the_models_own_modules(result):
    """The stream after each block and the attention weights, against the model's modules run as
    they are (Block.forward, output_attentions=True): independent of the by-hand stages."""
    fp, model = result.fp, get_model()
    idx = torch.tensor([fp.ids])
    out = model(idx, output_attentions=True)
    scale = math.sqrt(model.config.d_model) if model.config.scale_embedding else 1.0
    x = model.wte(idx) * scale + model.position_table()[: len(fp.ids)]
    for layer, (tr, block) in enumerate(zip(fp.layers, model.blocks)):
        np.testing.assert_allclose(tr.weights, out.attentions[layer][0].numpy(), atol=1e-5, err_msg=f"layer {layer}")
        np.testing.assert_allclose(tr.ln1_out, block.ln_1(x)[0].numpy(), atol=1e-5)
        np.testing.assert_allclose(tr.attn_out, block.attn(block.ln_1(x))[0][0].numpy(), atol=1e-5)
        x = block(x)[0]
        np.testing.assert_allclose(tr.x_out, x[0].numpy(), atol=2e-5, err_msg=f"layer {layer}")
        np.testing.assert_allclose(tr.gelu, block.mlp.gelu(block.mlp.c_fc(block.ln_2(_t(tr.x_mid)))).numpy(), atol=1e-5)


def test_stages_recompose_the_onnx_files_logits(result):
    ort = pytest.importorskip("onnxruntime")
    path = ROOT / "artifacts" / "hub" / "onnx" / "model.onnx"
    if not path.is_file():
        pytest.skip("artifacts/hub/onnx/model.onnx is not built (python -m export)")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    fp, cfg = result.fp, get_model().config
    T = len(fp.ids)
    feeds = {
        "input_ids": np.array([fp.ids], dtype=np.int64),
        "attention_mask": np.ones((1, T), dtype=np.int64),
        "position_ids": np.arange(T, dtype=np.int64)[None],
    }
    for i in session.get_inputs():
        if i.name.startswith("past_key_values."):
            feeds[i.name] = np.zeros((1, cfg.n_head, 0, cfg.head_dim), dtype=np.float32)
    onnx_logits = session.run(["logits"], feeds)[0][0]
    diff = float(np.abs(recompose_logits(fp).numpy() - onnx_logits).max())
    print(f"recomposed logits vs the ONNX file: {diff:.2e}")
    assert diff <= 1e-4


def test_token_losses_mean_is_the_compare_tabs_loss(result):
    fp = result.fp
    assert len(fp.token_losses) == len(fp.ids) - 1
    compare_loss = next_token(TEXT, get_model(), "trained model").loss
    assert fp.loss == pytest.approx(compare_loss, abs=2e-5)
    # Each value is -ln softmax(logits)[next] of the model's own logits, by definition.
    with torch.inference_mode():
        logp = torch.log_softmax(get_model()(torch.tensor([fp.ids]))[0][0], dim=-1)
    by_definition = -logp[:-1].gather(1, torch.tensor(fp.ids[1:])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(fp.token_losses, by_definition, atol=2e-5)
    assert np.all(fp.next_ranks >= 1)


def test_logit_lens_ends_on_the_models_own_top5(result):
    fp = result.fp
    lens = result.lens(len(fp.ids) - 1)
    assert len(lens) == get_model().config.n_layer and all(len(row) == ins.LENS_K for row in lens)
    with torch.inference_mode():
        p = torch.softmax(get_model()(torch.tensor([fp.ids]))[0][0, -1], dim=-1)
    top_p, top_i = torch.topk(p, ins.LENS_K)
    from playground.tokens import token_text

    assert [t for t, _ in lens[-1]] == [token_text(int(i)) for i in top_i]
    np.testing.assert_allclose([q for _, q in lens[-1]], top_p.numpy(), atol=1e-5)
    # an earlier layer by hand: ln_f of the stream after layer 0, then @ E^T
    with torch.inference_mode():
        model = get_model()
        x0 = torch.from_numpy(fp.layers[0].x_out[-1])
        p0 = torch.softmax(model.lm_head(model.ln_f(x0)), dim=-1)
    assert [t for t, _ in lens[0]] == [token_text(int(i)) for i in torch.topk(p0, ins.LENS_K).indices]


def _rank_and_probability(logits: torch.Tensor, target: int) -> list[tuple[int, float]]:
    """Per row of ``logits`` [L, V]: 1 + the tokens scored above ``target``, and its softmax probability."""
    p = torch.softmax(logits.double(), dim=-1)[:, target]
    return [(int((row > row[target]).sum()) + 1, float(q)) for row, q in zip(logits, p)]


@torch.inference_mode()
def test_logit_lens_ranks_the_token_that_came_next_as_the_models_modules_do(result):
    """After every layer, the rank and probability of the token that really came next: the stream
    after each block run by the model's own modules (Block.forward), then its ln_f and lm_head."""
    fp, model = result.fp, get_model()
    idx = torch.tensor([fp.ids])
    scale = math.sqrt(model.config.d_model) if model.config.scale_embedding else 1.0
    x = model.wte(idx) * scale + model.position_table()[: len(fp.ids)]
    streams = []
    for block in model.blocks:
        x = block(x)[0]
        streams.append(x[0])
    assert result.lens_next(len(fp.ids) - 1) is None  # nothing follows the last token
    outlined_nowhere = 0
    for t in range(0, len(fp.ids) - 1, 3):  # every third position: a lens is a product with all of E
        logits = model.lm_head(model.ln_f(torch.stack([s[t] for s in streams])))  # [n_layer, V]
        target = fp.ids[t + 1]
        shown = result.lens_next(t)
        expected = _rank_and_probability(logits, target)
        assert [k for k, _ in shown] == [k for k, _ in expected], f"position {t}"
        np.testing.assert_allclose([p for _, p in shown], [p for _, p in expected], atol=1e-6, rtol=1e-4)
        # at the output, the same rank as the model's own output head gives
        assert shown[-1][0] == int(fp.next_ranks[t])
        outlined_nowhere += all(k > ins.LENS_K for k, _ in shown)
    # the case the rank column is for: a next token in no layer's top 5 (this text has some)
    assert outlined_nowhere > 0


@pytest.mark.slow
@torch.inference_mode()
def test_logit_lens_ranks_match_transformers(result, tmp_path):
    """The same ranks and probabilities from transformers' GPT2LMHeadModel on the converted
    weights: its hidden state after each block (the last one already through ln_f), then its
    ln_f and lm_head."""
    transformers = pytest.importorskip("transformers")
    from model import WEIGHTS_DIR
    from model.convert import to_hf

    hf = transformers.GPT2LMHeadModel.from_pretrained(to_hf(WEIGHTS_DIR, tmp_path / "hf")).eval()
    fp = result.fp
    out = hf(torch.tensor([fp.ids]), output_hidden_states=True)
    n = len(fp.layers)
    per_layer = [hf.lm_head(hf.transformer.ln_f(out.hidden_states[i + 1][0])) for i in range(n - 1)] + [out.logits[0]]
    for t in range(len(fp.ids) - 1):
        expected = _rank_and_probability(torch.stack([lg[t] for lg in per_layer]), fp.ids[t + 1])
        shown = result.lens_next(t)
        assert [k for k, _ in shown] == [k for k, _ in expected], f"position {t}"
        np.testing.assert_allclose([p for _, p in shown], [p for _, p in expected], atol=1e-5, rtol=1e-3)


def test_lens_panel_shows_the_next_tokens_rank_and_probability(result):
    r = inside(TEXT, 2, 3, token=4)
    lens = panels(r)[5]
    for i, (rank, p) in enumerate(r.lens_next(4)):
        assert f'data-rank="{rank}"' in lens and f"rank <b>{rank:,}</b> <em>{100 * p:.2f}%</em>" in lens, i
    assert "ins-next" not in panels(result)[5]  # the last token: no next token to rank


def _decode_png(data_uri: str) -> np.ndarray:
    """A data: URI's PNG as [height, width, 3], decoded by Pillow (a matplotlib dependency)."""
    import base64
    import io

    from PIL import Image

    assert data_uri.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(data_uri.split(",", 1)[1]))) as im:
        return np.asarray(im.convert("RGB"))


def _images(panel: str) -> list[np.ndarray]:
    return [_decode_png(src) for src in re.findall(r'src="(data:image/png;base64,[^"]+)"', panel)]


@torch.inference_mode()
def test_the_attention_matrix_picture_is_the_models_own_attention(result):
    """The attention panel's picture, decoded and its colours turned back into weights, is the
    chosen head's whole matrix as the model's own modules give it (output_attentions); the cells
    above the diagonal are the masked grey; the chosen query's row is outlined where it is."""
    fp = result.fp
    att = panels(result)[2]
    T = len(fp.ids)
    matrix = next(im for im in _images(att) if im.shape[:2] == (T, T))
    reference = get_model()(torch.tensor([fp.ids]), output_attentions=True).attentions[result.layer][0, result.head].numpy()
    masked = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert np.all(matrix[masked] == MASKED)
    # white (0) to indigo (1), linear in each channel: the red channel has the widest span
    weights = (255.0 - matrix[..., 0]) / (255.0 - ATTENDED[0])
    np.testing.assert_allclose(weights[~masked], reference[~masked], atol=0.5 / (255 - ATTENDED[0]) + 1e-6)
    # the table of the query's strongest keys starts with its largest weight, as the model gives it
    strongest = re.search(r'class="ins-table ins-strongest">.*?<tbody><tr><td>(\d+)</td>.*?<em>([\d.]+)</em>', att)
    row = reference[result.token]
    assert int(strongest.group(1)) == int(np.argmax(row)) and float(strongest.group(2)) == pytest.approx(row.max(), abs=5e-4)
    top = f"{100.0 * result.token / T:.4f}%"
    assert f'class="ins-qrow" style="top:{top}' in att
    assert f'data-n="{T}"' in att


def test_strip_pictures_and_their_colour_ranges(result):
    """A strip's picture is one row of one cell per value, white at 0, full blue at −range and full
    red at +range, its range written beside it; the embedding's x strip is E[id] + P[t]."""
    fp, t = result.fp, result.token
    emb = panels(result)[0]
    model = get_model()
    scale = math.sqrt(model.config.d_model) if model.config.scale_embedding else 1.0
    x = (model.wte.weight[fp.ids[t]] * scale + model.position_table()[t]).detach().numpy()
    pictures = _images(emb)
    assert len(pictures) == 3 and all(p.shape == (1, model.config.d_model, 3) for p in pictures)
    top = float(np.abs(x).max())
    assert emb.count(f"<em>−{top:.2f}</em>") == 3 and emb.count(f"<em>+{top:.2f}</em>") == 3  # one range for the three
    expected = np.where((x < 0)[:, None], NEGATIVE, POSITIVE)
    a = np.abs(x)[:, None] / top
    np.testing.assert_allclose(pictures[2][0], 255 - a * (255 - expected), atol=1.01)
    assert tuple(strip_colours(np.array([0.0, 2.0, -2.0, 5.0]), 2.0)[0]) == (255, 255, 255)
    assert [tuple(c) for c in strip_colours(np.array([2.0, -2.0, 5.0]), 2.0)] == [POSITIVE, NEGATIVE, POSITIVE]
    # the FFN's 1024 units are one picture too, however narrow the screen
    assert any(p.shape == (1, 4 * model.config.d_model, 3) for p in _images(panels(result)[4]))


def test_png_image_is_a_valid_png():
    from playground.png_image import png_bytes, png_data_uri

    rgb = np.arange(2 * 5 * 3, dtype=np.uint8).reshape(2, 5, 3) * 3
    np.testing.assert_array_equal(_decode_png(png_data_uri(rgb)), rgb)
    assert png_bytes(rgb).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="height, width, 3"):
        png_bytes(np.zeros((4, 4)))


def test_layernorm_ffn_and_attention_numbers(result):
    tr, t = result.trace, result.token
    ln = get_model().blocks[2].ln_1
    x = tr.x_in[t]
    assert tr.ln1_mean[t] == pytest.approx(x.mean(), abs=1e-5)
    assert tr.ln1_std[t] == pytest.approx(math.sqrt(x.var() + ln.eps), rel=1e-5)  # biased variance, as LayerNorm
    normalised = (tr.ln1_out[t] - ln.bias.detach().numpy()) / ln.weight.detach().numpy()
    assert normalised.mean() == pytest.approx(0.0, abs=1e-4) and normalised.std() == pytest.approx(1.0, abs=1e-3)
    d = result.to_dict()
    assert d["ffn"]["fired"] == int((tr.gelu[t] > 0).sum()) and d["ffn"]["units"] == 4 * get_model().config.d_model
    assert d["ffn"]["strongest"][0]["value"] == pytest.approx(float(tr.gelu[t].max()), abs=1e-5)
    assert len(d["attention"]["weights"]) == t + 1 and sum(d["attention"]["weights"]) == pytest.approx(1.0, abs=1e-4)
    assert d["residual"]["norm_out"][-1] == pytest.approx(float(np.linalg.norm(result.fp.layers[-1].x_out[t])), abs=1e-4)


def test_to_dict_contract(result):
    d = json.loads(json.dumps(result.to_dict()))
    assert d["tokens"] == result.fp.tokens and len(d["token_losses"]) == len(d["tokens"]) - 1
    assert all(isinstance(x, float) and x >= 0 for x in d["token_losses"])
    assert d["loss"] == pytest.approx(float(np.mean(d["token_losses"])), abs=1e-5)
    assert d["uniform_loss"] == pytest.approx(math.log(50257), abs=1e-6)
    assert len(d["logit_lens"]) == 6 and all(len(row) == 5 and all(isinstance(s, str) for s in row) for row in d["logit_lens"])
    assert d["logit_lens"][-1] == [c["token"] for c in d["candidates"][:5]]
    assert (d["layer"], d["head"], d["token"]) == (2, 3, len(d["tokens"]) - 1)


def test_layer_head_and_token_changes_reuse_the_pass(result):
    again = inside(TEXT, 5, 7, token=3)
    assert again.fp is result.fp and (again.layer, again.head, again.token) == (5, 7, 3)
    for i in range(ins.CACHE_SIZE + 2):
        inside(f"{TEXT} {i}")
    assert len(ins._passes) == ins.CACHE_SIZE  # bounded: the oldest passes are dropped
    assert inside(TEXT).fp is not result.fp


def test_one_token_has_no_loss():
    r = inside("Hi")
    assert len(r.fp.ids) == 1 and r.fp.loss is None and r.to_dict()["token_losses"] == []
    assert len(r.to_dict()["logit_lens"]) == get_model().config.n_layer
    panels(r)  # every panel draws for a single token


def test_panels_show_the_chosen_numbers(result):
    emb, ln, att, res, ffn, lens, out = panels(result)
    fp, tr, t = result.fp, result.trace, result.token
    assert all(f'id="ins-s-{anchor}"' in html for (anchor, _, _), html in zip(STAGES, panels(result)))
    assert f"{tr.ln1_mean[t]:.3f}".replace("-", "−") in ln
    assert f"{int((tr.gelu[t] > 0).sum())} of 1024" in ffn
    assert "(8, " in att and ", 32)" in att  # the reshape (T, d_model) -> (n_head, T, head_dim)
    assert f"{fp.loss:.3f}" in out and "10.825" in out  # the loss beside ln V
    assert out.count('class="ins-lt') == len(fp.ids)  # every token of the text, coloured by its loss
    assert "after layer 5 = the output" in lens
    np.testing.assert_allclose(residual_norms(result)["attention"], [np.linalg.norm(x.attn_out[t]) for x in fp.layers], rtol=1e-6)
    # the chart's bars say those norms in their tooltips
    for layer, x in enumerate(fp.layers):
        assert f"layer {layer}: ‖attention added‖ = {np.linalg.norm(x.attn_out[t]):.3f}" in res
        assert f"layer {layer}: ‖FFN added‖ = {np.linalg.norm(x.mlp_out[t]):.3f}" in res
    page_map = map_html(result)
    for anchor, _, _ in STAGES:
        assert f'data-goto="ins-s-{anchor}"' in page_map
    assert page_map.count("ins-chip ins-on") == 2  # the chosen layer and head


def test_the_maps_chips_choose_a_layer_and_a_head_and_its_boxes_give_the_stages_numbers(result):
    """The map's layer and head chips are buttons naming what they choose, the chosen one pressed;
    each box carries its stage's numbers at the chosen layer, head and token."""
    page_map = map_html(result)
    cfg, fp, tr, t = get_model().config, result.fp, result.trace, result.token
    for kind, n, chosen in (("layer", cfg.n_layer, 2), ("head", cfg.n_head, 3)):
        chips = re.findall(rf'<button type="button" class="ins-chip( ins-on)?" data-{kind}="(\d+)" aria-pressed="(\w+)"', page_map)
        assert [int(i) for _, i, _ in chips] == list(range(n))
        assert [int(i) for on, i, pressed in chips if on and pressed == "true"] == [chosen]
        assert all(pressed == "false" for on, _, pressed in chips if not on)
    live = dict(re.findall(r'data-goto="ins-s-(\w+)" aria-controls="[^"]+"><b>[^<]+</b><span>.*?</span><em class="ins-live">(.*?)</em>', page_map)[1:])
    assert f"μ {tr.ln1_mean[t]:.3f}".replace("-", "−") in live["layernorm"]
    assert f"{int((tr.gelu[t] > 0).sum())} of 1024 fire" in live["ffn"]
    assert f"‖x‖ = {np.linalg.norm(fp.x0[t]):.2f}" in live["embedding"]
    assert "top: " in live["lens"] and "top: " in live["output"]  # the last token: nothing came next
    r = inside(TEXT, 2, 3, token=4)
    page_map = map_html(r)
    ranks = [k for k, _ in r.lens_next(4)]
    assert f"rank {ranks[0]:,} → {ranks[-1]:,}" in page_map
    assert f"−ln p = {r.fp.token_losses[4]:.2f}" in page_map


def test_the_attention_matrix_names_its_axes_with_the_tokens(result):
    """Keys across and queries down, each token's label (whitespace visible, cut short) centred on
    its column and row; every other one past 32 tokens; the chosen query's marked."""
    fp, t = result.fp, result.token
    T = len(fp.ids)
    att = panels(result)[2]
    keys = re.findall(r'<span style="left:([\d.]+)%" title="key (\d+)">(.*?)</span>', att)
    queries = re.findall(r'<span(?: class="ins-on")? style="top:([\d.]+)%" title="query (\d+)">(.*?)</span>', att)
    import html as html_lib

    for labels in (keys, queries):
        assert [html_lib.unescape(text) for _, _, text in labels] == fp.tokens  # ≤ 32 tokens: every one
        assert [int(i) for _, i, _ in labels] == list(range(T))
        assert all(float(at) == pytest.approx((i + 0.5) * 100 / T, abs=1e-4) for i, (at, _, _) in enumerate(labels))
    assert f'<span class="ins-on" style="top:{(t + 0.5) * 100 / T:.4f}%" title="query {t}">' in att
    assert "⋅" in "".join(text for _, _, text in keys)  # a space drawn as ⋅, as the other figures' axes
    long = [f"tok{i}" for i in range(40)]
    across, down = matrix_labels(long, 3)
    assert re.findall(r'title="key (\d+)"', across) == [str(i) for i in range(0, 40, 2)]
    assert re.findall(r'title="query (\d+)"', down) == [str(i) for i in range(0, 40, 2)]


def test_the_opening_token_is_the_one_whose_next_token_climbs_most():
    """rising_position on hand-made ranks: the largest climb in log rank among the positions whose
    next token ends in the output's top 5, ties to the higher probability then the earlier position."""
    pick = ins.rising_position
    # position 1 climbs 100 -> 1, position 2 climbs 1000 -> 20 (further, but never shown in a top 5)
    assert pick([5, 100, 1000], [1, 1, 20], [0.5, 0.3, 0.01]) == 1
    assert pick([50, 500], [1, 10], [0.9, 0.1]) == 0  # 500 -> 10 climbs as far as 50 -> 1, out of the top 5
    assert pick([10, 10, 10], [2, 2, 1], [0.2, 0.3, 0.6]) == 2  # 10 -> 1 climbs furthest
    assert pick([10, 10, 20], [2, 2, 4], [0.2, 0.3, 0.1]) == 1  # a tie in climb: the higher probability
    assert pick([10, 10], [2, 2], [0.3, 0.3]) == 0  # a full tie: the earlier position
    assert pick([1000, 100], [5, 1], [0.05, 0.5]) == 0  # 5th at the output is in the top 5
    assert pick([8, 900], [40, 300], [0.01, 0.001]) == 1  # none in a top 5: the largest climb of all
    assert pick([], [], []) == 0


def test_the_tab_opens_on_a_token_of_the_text_whose_prediction_forms_through_the_layers():
    """On the example, the token the tab opens on is not the last, its next token ends in the
    output's top 5 having climbed from layer 0's rank, and no other such token climbs further: each
    rank read from the lens at that position (the model's own ln_f and head on each layer's stream)."""
    from playground.ui.inside import OUTPUTS, ui_run

    r = inside(ins.EXAMPLE_TEXTS[0])
    fp = r.fp
    t = ins.opening_token(fp)
    assert t < len(fp.ids) - 1
    model = get_model()
    with torch.inference_mode():
        scale = math.sqrt(model.config.d_model) if model.config.scale_embedding else 1.0
        x = model.wte(torch.tensor([fp.ids])) * scale + model.position_table()[: len(fp.ids)]
        streams = []
        for block in model.blocks:  # the model's own modules (Block.forward)
            x = block(x)[0]
            streams.append(x[0])
        ranks = []  # [after layer 0, at the output] for each position
        for pos in range(len(fp.ids) - 1):
            logits = model.lm_head(model.ln_f(torch.stack([streams[0][pos], streams[-1][pos]])))
            target = fp.ids[pos + 1]
            ranks.append([int((row > row[target]).sum()) + 1 for row in logits])
    shown = [pos for pos, (_, last) in enumerate(ranks) if last <= ins.LENS_K]
    climb = {pos: math.log(ranks[pos][0]) - math.log(ranks[pos][1]) for pos in shown}
    assert t in shown and climb[t] == max(climb.values()) and climb[t] > 0, (t, ranks)
    # the page opens there, says why, and the stage it opens shows the lens at that token
    shown_text, slider, *outs = ui_run(ins.EXAMPLE_TEXTS[0], 0, 0)
    assert slider.value == t
    drawn = dict(zip(OUTPUTS, outs))
    assert f"token {t} ({fp.tokens[t]})" in drawn["info"] and "climbs most through the logit lens" in drawn["info"]
    assert f"rank {ranks[t][0]:,} after layer 0 → {ranks[t][1]:,} at the output" in drawn["info"]
    assert OPEN_FIRST == "lens" and 'class="ins-panel ins-open-first" id="ins-s-lens"' in drawn["lens"]
    assert "climbs most" not in info_markdown(ins.InsideResult(fp, 0, 0, t - 1))  # said only at that token
    assert ins.opening_token(inside("Hi").fp) == 0


def test_layer_0s_feed_forward_add_is_explained_by_the_token_alone(result):
    """Where layer 0's feed-forward add dwarfs the stream, the residual panel says it is mostly
    the token's own: its cosine to what the network writes from the token's embedding row alone,
    worked out here with the model's own modules (ln_2, mlp)."""
    model = get_model()
    r = inside(ins.EXAMPLE_TEXTS[0], 0, 0, token=25)
    fp, t = r.fp, r.token
    with torch.inference_mode():
        block = model.blocks[0]
        alone = block.mlp(block.ln_2(model.wte.weight[fp.ids[t]])).numpy()
    added = fp.layers[0].mlp_out[t]
    cosine = float(alone @ added / np.linalg.norm(alone) / np.linalg.norm(added))
    assert np.linalg.norm(added) > 5 * np.linalg.norm(fp.layers[0].x_in[t]) and cosine > 0.5
    note = first_ffn_note(r)
    assert note in panels(r)[3]
    assert f"cosine <b>{cosine:.2f}</b>" in note
    assert f"‖{np.linalg.norm(added):.2f}‖ on ‖{np.linalg.norm(fp.layers[0].x_in[t]):.2f}‖" in note
    # an untrained model's first add is no second embedding: nothing to explain
    from playground.compare import untrained_like

    assert first_ffn_note(inside(TEXT, model=untrained_like(model))) == ""


def test_stages_are_numbered_without_a_gap(result):
    """The map's boxes and the panels' headings count 1, 2, 3... in the order of the pass; the map's
    text box leads to the first stage; each heading's small map fills its own number; the map
    writes the residual adds as the blocks compute them."""
    page_map = map_html(result)
    boxes = re.findall(r'data-goto="ins-s-(\w+)" aria-controls="ins-b-\1"><b>([^<]+)</b>', page_map)
    assert boxes[0] == ("embedding", "text")
    numbers = [int(title.split(" · ")[0]) for _, title in boxes[1:]]
    assert numbers == list(range(1, len(STAGES) + 1)) == [n for _, n, _ in STAGES]
    assert [anchor for anchor, _ in boxes[1:]] == [anchor for anchor, _, _ in STAGES]
    for n, html in enumerate(panels(result), start=1):
        assert re.search(rf'<h3><button type="button" class="ins-toggle"[^>]*><span>{n} · ', html), html[:300]
        assert re.findall(r'<i class="ins-on">(\d+)</i>', html) == [str(n)]
    assert "x + attn(ln_1(x))" in page_map and "x + mlp(ln_2(x))" in page_map and "attention(x)" not in page_map


def test_untrained_model_loss_is_about_ln_v():
    from playground.compare import untrained_like

    r = inside(TEXT, model=untrained_like(get_model()))
    assert abs(r.fp.loss - math.log(50257)) < 0.6


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("", 0, 0), "empty"),
        (("   ", 0, 0), "empty"),
        ((None, 0, 0), "empty"),
        ((123, 0, 0), "must be text"),
        ((TEXT, -1, 0), "layer"),
        ((TEXT, 6, 0), "layer must be from 0 to 5"),
        ((TEXT, 0, 8), "head must be from 0 to 7"),
        ((TEXT, 0, float("nan")), "head"),
        ((TEXT, "1; import os", 0), "layer must be a number"),
        ((TEXT, 0.5, 0), "whole number"),
        ((TEXT, [1], 0), "layer must be a number"),
        (("word " * (limits.MAX_INSIDE_TOKENS + 1), 0, 0), "tokens long"),
        (("x" * (limits.MAX_INSIDE_CHARS + 1), 0, 0), "characters"),
        (("bad\x00text", 0, 0), "control character"),
    ],
)
def test_refuses_bad_input(args, fragment):
    with pytest.raises(InputError, match=fragment):
        inside(*args)


def test_refuses_a_token_past_the_text():
    with pytest.raises(InputError, match="token must be from 0 to 1"):
        inside("hello everyone", 0, 0, token=2)


def test_page_handlers_redraw_only_what_a_control_changes():
    import gradio as gr

    from playground.ui.inside import OUTPUTS, ui_head, ui_layer, ui_run, ui_token

    shown, slider, *outs = ui_run(TEXT, 0, 0)
    n = len(inside(TEXT).fp.ids)
    assert shown == TEXT and slider.maximum == n - 1 and slider.value == ins.opening_token(inside(TEXT).fp)
    assert len(outs) == len(OUTPUTS) and gr.skip() not in outs

    def redrawn(result) -> set[str]:
        return {name for name, value in zip(OUTPUTS, result) if value != gr.skip()}

    assert redrawn(ui_head(TEXT, 0, 4, n - 1)) == {"map", "info", "attention"}
    assert "embedding" not in redrawn(ui_layer(TEXT, 2, 4, n - 1))
    by_token = dict(zip(OUTPUTS, ui_token(TEXT, 2, 4, 999)))  # past the end: the last token
    assert redrawn(by_token.values()) == set(OUTPUTS) and f"token {n - 1} " in by_token["info"]  # the map's numbers too
    with pytest.raises(InputError, match="token must be a number"):
        ui_token(TEXT, 2, 4, "x")
