"""Inside the model tab: the stages of one forward pass recompose the model's logits (PyTorch and
the ONNX file), the per-token losses give the Compare tab's loss, the logit lens ends on the
model's own top 5, the cache is bounded, bad input is refused with a message; what the app hands
its view (playground/inside_data.py's answers, packed by playground/wire.py and unpacked by the
page's own web/views/wire.js under Node.js) is the model's own numbers, one token's rows at a
time, bounded. What the view draws from them: tests/browser/test_browser_inside.py, in Chromium."""

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
from playground.inside_data import inside_data, view_answer
from playground.resources import shipped_model
from playground.wire import UNIT_STEPS, plain
from playground.validation import InputError
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app

ROOT = Path(__file__).resolve().parents[2]
WEB_TESTS = ROOT / "tests" / "web"
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
        reference = shipped_model()(torch.tensor([fp.ids]))[0][0]
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
    fp, model = result.fp, shipped_model()
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
    fp, cfg = result.fp, shipped_model().config
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
    compare_loss = next_token(TEXT, shipped_model(), "trained model").loss
    assert fp.loss == pytest.approx(compare_loss, abs=2e-5)
    # Each value is -ln softmax(logits)[next] of the model's own logits, by definition.
    with torch.inference_mode():
        logp = torch.log_softmax(shipped_model()(torch.tensor([fp.ids]))[0][0], dim=-1)
    by_definition = -logp[:-1].gather(1, torch.tensor(fp.ids[1:])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(fp.token_losses, by_definition, atol=2e-5)
    assert np.all(fp.next_ranks >= 1)


def test_logit_lens_ends_on_the_models_own_top5(result):
    fp = result.fp
    lens = result.lens(len(fp.ids) - 1)
    assert len(lens) == shipped_model().config.n_layer and all(len(row) == ins.LENS_K for row in lens)
    with torch.inference_mode():
        p = torch.softmax(shipped_model()(torch.tensor([fp.ids]))[0][0, -1], dim=-1)
    top_p, top_i = torch.topk(p, ins.LENS_K)
    from playground.tokens import token_text

    assert [t for t, _ in lens[-1]] == [token_text(int(i)) for i in top_i]
    np.testing.assert_allclose([q for _, q in lens[-1]], top_p.numpy(), atol=1e-5)
    # an earlier layer by hand: ln_f of the stream after layer 0, then @ E^T
    with torch.inference_mode():
        model = shipped_model()
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
    fp, model = result.fp, shipped_model()
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


def unpacked(*texts: str) -> list:
    """Values packed by the app (wire.pack), as the page's own wire.js gives them to the view."""
    import subprocess

    out = []
    for text in texts:
        proc = subprocess.run(["node", str(WEB_TESTS / "wire_decode.mjs")], input=text, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        out.append(json.loads(proc.stdout))
    return out


def _png_decoder(data_uri: str) -> np.ndarray:
    """A data: URI's PNG as [height, width, 3], decoded by Pillow (a matplotlib dependency)."""
    import base64
    import io

    from PIL import Image

    assert data_uri.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(data_uri.split(",", 1)[1]))) as im:
        return np.asarray(im.convert("RGB"))


@torch.inference_mode()
def test_what_the_view_is_handed_is_the_models_own_attention_and_the_lens_at_the_token(result):
    """A new text's answer, unpacked by the page's code: every head's whole causal matrix equal to
    the model's own modules' (output_attentions) within a 16-bit step, zeros above the diagonal;
    the rows at the token the view shows, every layer's; the logit lens there, the rank and
    probability of the token that came next as ForwardPass.lens_next gives them."""
    r = inside(TEXT, 2, 3, token=4)
    fp, T = r.fp, len(r.fp.ids)
    from playground.ui.inside import _answer

    (got,) = unpacked(_answer(r))
    assert got["state"] == {"layer": 2, "head": 3, "token": 4} and got["key"]
    data = got["data"]
    reference = shipped_model()(torch.tensor([fp.ids]), output_attentions=True).attentions
    for layer, layer_data in enumerate(data["layers"]):
        w = np.array(layer_data["weights"])
        assert w.shape == (shipped_model().config.n_head, T, T)
        np.testing.assert_allclose(w, reference[layer][0].numpy(), atol=0.5 / UNIT_STEPS + 2e-6)
        assert np.all(w[:, np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0)
        # a row per token: at the token shown, None elsewhere
        assert [i for i, row in enumerate(layer_data["x_out"]) if row is not None] == [4]
        np.testing.assert_array_equal(layer_data["x_out"][4], fp.layers[layer].x_out[4])  # float32, bit for bit
    lens = data["lens"]
    for layer, (rank, p) in enumerate(r.lens_next(4)):
        assert lens["next_ranks"][layer][4] == rank and lens["next_probs"][layer][4] == pytest.approx(p, abs=1e-12)
        assert [i for i, row in enumerate(lens["top_ids"][layer]) if row is not None] == [4]
    assert data["opening_token"] == ins.opening_token(fp) and data["first_ranks"] == fp.first_layer_ranks().tolist()


def test_a_tokens_answer_is_its_rows_alone_and_bounded_whatever_the_texts_length():
    """Another token's answer holds that token's rows (no text fields, no matrices), and a 64-token
    text's answers stay within a bound (the whole pass would be about 1.5 M numbers)."""
    from playground.ui.inside import Handlers, _answer

    long = "word" + " word" * (limits.MAX_INSIDE_TOKENS - 1)
    r = inside(long)
    assert len(r.fp.ids) == limits.MAX_INSIDE_TOKENS  # the longest text the tab takes

    class Asked:
        _data = {"token": 10}

    first = _answer(ins.InsideResult(r.fp, 0, 0, 3))
    rows = Handlers(RES).ui_rows(long, Asked())
    print(f"\n64 tokens: a new text's answer {len(first) / 1e3:.0f} kB, a token's {len(rows) / 1e3:.0f} kB")
    assert len(first) < 600_000 and len(rows) < 250_000
    (got,) = unpacked(rows)
    assert "state" not in got and "ids" not in got["data"] and "weights" not in got["data"]["layers"][0]
    assert [i for i, row in enumerate(got["data"]["x0"]) if row is not None] == [10]
    assert all("head_out" not in layer and "ln2_out" not in layer for layer in got["data"]["layers"])  # not drawn: not sent


def test_ffn0_alone_is_layer_0s_network_on_the_tokens_embedding_row(result):
    """What the view's note on layer 0's feed-forward add reads: the model's own modules (ln_2,
    mlp) on the token's embedding row alone."""
    model = shipped_model()
    data = inside_data(result.fp, rows=[25], lens=[])
    with torch.inference_mode():
        block = model.blocks[0]
        alone = block.mlp(block.ln_2(model.wte.weight[result.fp.ids[25]])).numpy()
    np.testing.assert_allclose(data["ffn0_alone"].items[25], alone, atol=2e-5)


def test_png_image_is_a_valid_png():
    from playground.png_image import png_bytes, png_data_uri

    rgb = np.arange(2 * 5 * 3, dtype=np.uint8).reshape(2, 5, 3) * 3
    np.testing.assert_array_equal(_png_decoder(png_data_uri(rgb)), rgb)
    assert png_bytes(rgb).startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="height, width, 3"):
        png_bytes(np.zeros((4, 4)))


def test_layernorm_ffn_and_attention_numbers(result):
    tr, t = result.trace, result.token
    ln = shipped_model().blocks[2].ln_1
    x = tr.x_in[t]
    assert tr.ln1_mean[t] == pytest.approx(x.mean(), abs=1e-5)
    assert tr.ln1_std[t] == pytest.approx(math.sqrt(x.var() + ln.eps), rel=1e-5)  # biased variance, as LayerNorm
    normalised = (tr.ln1_out[t] - ln.bias.detach().numpy()) / ln.weight.detach().numpy()
    assert normalised.mean() == pytest.approx(0.0, abs=1e-4) and normalised.std() == pytest.approx(1.0, abs=1e-3)
    d = result.to_dict()
    assert d["ffn"]["fired"] == int((tr.gelu[t] > 0).sum()) and d["ffn"]["units"] == 4 * shipped_model().config.d_model
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
    assert len(r.to_dict()["logit_lens"]) == shipped_model().config.n_layer
    data = plain(view_answer(r.fp, 0)["data"])  # the view's answer for a single token
    assert data["loss"] is None and data["token_losses"] == [] and data["lens"]["next_ranks"][0] == []


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
    from playground.ui.inside import Handlers

    r = inside(ins.EXAMPLE_TEXTS[0])
    fp = r.fp
    t = ins.opening_token(fp)
    assert t < len(fp.ids) - 1
    model = shipped_model()
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
    # the page opens there: the token slider and the state the view is handed (the view says why: test_browser_inside)
    shown_text, slider, answer = Handlers(RES).ui_run(ins.EXAMPLE_TEXTS[0], 0, 0)
    assert slider.value == t
    (got,) = unpacked(answer)
    assert got["state"]["token"] == t and got["data"]["opening_token"] == t
    assert got["data"]["first_ranks"][t] == ranks[t][0] and got["data"]["next_ranks"][t] == ranks[t][1]
    assert ins.opening_token(inside("Hi").fp) == 0


def test_untrained_model_loss_is_about_ln_v():
    from playground.compare import untrained_like

    r = inside(TEXT, model=untrained_like(shipped_model()))
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


def test_the_layer_head_and_token_sliders_redraw_in_the_page_alone_and_a_new_text_on_the_server():
    """A slider's input has no Python function (the view redraws from what it holds); the run and
    the view's request for a token's rows are the server's, queued as a heavy pass, each request
    run (under "always_last" Gradio's page sends the one that ran again in place of later ones)."""
    import gradio as gr

    from playground.ui import inside as tab
    from playground.ui.common import FORWARD

    with gr.Blocks() as demo:
        with gr.Tab("Inside") as t:
            tab.build(RES, t)
    controls = {i for i, b in demo.blocks.items() if getattr(b, "elem_id", None) in ("ins-layer", "ins-head", "ins-token")}
    assert len(controls) == 3
    asks = 0
    for fn in demo.fns.values():
        ids = {target[0] for target in fn.targets}
        if ids & controls:
            assert fn.fn is None and "pgViews" in (fn.js or ""), fn.targets
        elif any(target[1] == "rows" for target in fn.targets):
            asks += 1
            assert fn.fn is not None and fn.concurrency_id == FORWARD and fn.trigger_mode == "multiple"
    assert asks == 1
    with pytest.raises(InputError, match="token must be a number"):

        class Asked:
            _data = {"token": "x"}

        tab.Handlers(RES).ui_rows(TEXT, Asked())
