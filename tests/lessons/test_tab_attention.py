"""Attention tab: the model's weights, the lessons' step-through and its check, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from playground import limits
from playground.attention import attention
from playground.resources import shipped_model
from playground.validation import InputError
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app

PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"


@pytest.fixture(scope="module")
def result():
    return attention(PROMPT, layer=1, head=2)


def test_weights_shape_rows_and_causal_mask(result):
    cfg = shipped_model().config
    t = len(result.ids)
    assert result.weights.shape == (cfg.n_layer, cfg.n_head, t, t)
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(np.triu(result.weights, k=1) == 0.0)  # exactly zero above the diagonal
    np.testing.assert_allclose(result.weights[:, :, 0, 0], 1.0)  # the first token sees only itself
    z = np.asarray(result.head_figure.data[0].z)
    np.testing.assert_allclose(z, result.weights[1, 2], atol=1e-6)
    custom = np.asarray(result.head_figure.data[0].customdata)
    assert "masked" in custom[0, 1, 2] and custom[1, 0, 2] == ""  # hover names the causal mask
    np.testing.assert_allclose(np.asarray(result.mean_figure.data[0].z), result.weights[1].mean(axis=0), atol=1e-6)
    assert len(result.heads_figure.data) == cfg.n_head


def test_tokens_are_the_tokenizer_pieces(result):
    assert result.tokens[:3] == ["ROM", "EO", ":"]
    assert len(result.tokens) == len(result.ids)


def test_step_through_reproduces_the_model(result):
    names = [s.name for s in result.stages]
    assert names == ["1. queries", "2. keys", "3. scores", "4. causal mask", "5. masked fill", "6. softmax", "7. weighted aggregation"]
    assert result.weights_max_diff < 1e-5
    assert result.output_max_diff < 1e-4
    q, k, scores, tril, masked, weights, out = (s.matrix for s in result.stages)
    d = shipped_model().config.d_model // shipped_model().config.n_head
    np.testing.assert_allclose(scores, q @ k.T / np.sqrt(d), atol=1e-4)  # stage 3 from stages 1 and 2
    t = len(result.ids)
    np.testing.assert_array_equal(tril, np.tril(np.ones((t, t))))
    assert np.all(np.isneginf(masked[np.triu_indices(t, 1)]))
    np.testing.assert_allclose(masked[np.tril_indices(t)], scores[np.tril_indices(t)])
    # softmax by hand on the masked scores of the last row
    row = scores[-1]
    np.testing.assert_allclose(weights[-1], np.exp(row - row.max()) / np.exp(row - row.max()).sum(), atol=1e-6)
    assert out.shape == (t, shipped_model().config.d_model // shipped_model().config.n_head)
    assert "masked_fill" in result.stages[4].code and "softmax" in result.stages[5].code
    assert all(s.figure.data for s in result.stages)  # each stage draws its figure when asked


def test_uniform_scores_give_the_tutorials_running_average(small_model):
    # The deep-learning notes: with all scores equal, masked softmax gives rows 1, 1/2 1/2, 1/3 ... and
    # wei @ v is the running mean of v. Zero the query/key projections to make every score 0.
    c = small_model.config.d_model
    d = c // small_model.config.n_head
    with torch.no_grad():
        for block in small_model.blocks:
            block.attn.c_attn.weight[: 2 * c] = 0.0
            block.attn.c_attn.bias[: 2 * c] = 0.0
    captured = {}

    def keep_first(module, inputs, output):  # returns None: the output is left unchanged
        captured.setdefault("ln", output[0].detach().clone())

    hook = small_model.blocks[1].ln_1.register_forward_hook(keep_first)
    try:
        r = attention("one two three four five six seven eight", layer=1, head=0, model=small_model)
    finally:
        hook.remove()
    t = len(r.ids)
    assert t == 8
    notes_rows = [1.0, 0.5, 0.3333, 0.25, 0.2, 0.1667, 0.1429, 0.125]  # printed in the deep-learning notes
    weights = r.stages[5].matrix
    np.testing.assert_allclose(np.diag(weights), notes_rows, atol=1e-4)
    np.testing.assert_allclose(weights[7], [0.125] * 8, atol=1e-4)
    assert r.output_max_diff < 1e-5
    # Head 0's values straight from the block's W_V on its LayerNorm input (captured by a hook);
    # the output must be their running mean (cumulative sum / count).
    attn = small_model.blocks[1].attn.c_attn
    with torch.no_grad():
        v = torch.nn.functional.linear(captured["ln"], attn.weight[2 * c :], attn.bias[2 * c :])[:, :d].numpy()
    np.testing.assert_allclose(r.stages[6].matrix, np.cumsum(v, axis=0) / np.arange(1, t + 1)[:, None], atol=1e-5)


def test_single_token_notice():
    r = attention("Hi", 0, 0)
    assert r.weights.shape[-1] == 1 and "itself" in r.notice


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("", 0, 0), "empty"),
        (("   ", 0, 0), "empty"),
        ((PROMPT, -1, 0), "layer"),
        ((PROMPT, 99, 0), "layer"),
        ((PROMPT, 0, 99), "head"),
        ((PROMPT, 0, float("nan")), "head"),
        ((PROMPT, "1; import os", 0), "layer"),
        ((PROMPT, 0.5, 0), "whole number"),
        (("word " * (limits.MAX_ATTENTION_TOKENS + 1), 0, 0), "tokens long"),
        (("x" * (limits.MAX_ATTENTION_CHARS + 1), 0, 0), "characters"),
        (("bad\x00text", 0, 0), "control character"),
        ((None, 0, 0), "empty"),
    ],
)
def test_refuses_bad_input(args, fragment):
    with pytest.raises(InputError, match=fragment):
        attention(*args)


def test_to_dict(result):
    d = json.loads(json.dumps(result.to_dict()))
    assert d["layer"] == 1 and d["head"] == 2 and len(d["weights"]) == len(result.ids)
    assert d["weights"][0][0] == pytest.approx(1.0)


def test_cells_print_two_decimals_for_short_texts_and_only_hover_for_long_ones():
    """Short texts, up to 16 tokens (the opening example's 12 among them), print every weight with
    two decimals; from 17 tokens on, the hover alone gives them."""
    from playground.attention import EXAMPLE_PROMPTS

    short = attention("the king spoke to the queen", 0, 0)
    heat = short.head_figure.data[0]
    assert heat.texttemplate == "%{z:.2f}" and "%{z:.3f}" in heat.hovertemplate
    opening = attention(EXAMPLE_PROMPTS[0], 5, 2)
    assert len(opening.tokens) == 12 and opening.head_figure.data[0].texttemplate == "%{z:.2f}"
    sixteen = attention(" ".join(["the king spoke to the queen of"] * 2 + ["the land"]), 0, 0)
    assert len(sixteen.tokens) == 16 and sixteen.head_figure.data[0].texttemplate == "%{z:.2f}"
    assert heat.textfont.size == 11 and sixteen.head_figure.data[0].textfont.size is None  # plotly fits it to the cell
    assert sixteen.stages[2].figure.data[0].texttemplate == "%{z:.2f}"  # the scores stage too
    long = attention(" ".join(["the king spoke to the queen of"] * 2 + ["the land", "now"]), 0, 0)
    assert len(long.tokens) == 17 and long.head_figure.data[0].texttemplate is None


def test_every_head_grid_is_two_a_row_with_token_labels():
    r = attention("the king spoke to the queen", 2, 0)
    grid = r.heads_figure
    assert len(grid.data) == 8
    assert grid.layout.yaxis.ticktext == tuple(r.tokens)  # the first column names the queries
    # Two heads a row: heads 0 and 1 side by side, head 2 under head 0.
    assert grid.data[0].xaxis == "x" and grid.data[1].xaxis == "x2" and grid.data[2].yaxis == "y3"
    assert grid.layout.xaxis.domain[1] > 0.45 and grid.layout.xaxis2.domain[0] > 0.5


def test_line_view_carries_the_causal_weights_of_every_head():
    from playground.attention import line_view_html

    r = attention("the king spoke to the queen", 1, 3)
    assert r.lines_html == line_view_html(r.weights[1], r.tokens, 1, 3)
    page = r.lines_html
    import html as html_lib
    import re

    data = json.loads(html_lib.unescape(re.search(r'data-att="([^"]*)"', page).group(1)))
    assert data["tokens"] == r.tokens and data["head"] == 3 and len(data["weights"]) == 8
    for q, row in enumerate(data["weights"][3]):
        assert len(row) == q + 1 and sum(row) == pytest.approx(1.0, abs=3e-3)  # a softmax row, rounded
    np.testing.assert_allclose(data["weights"][3][5], r.weights[1, 3, 5, :6], atol=5e-4)


def test_queries_and_keys_are_the_blocks_own_projections():
    """Stages 1 and 2 against W_Q and W_K applied by hand to the block's LayerNorm output
    (captured from the model's own forward pass by a hook)."""
    model = shipped_model()
    captured = {}

    def keep_first(module, inputs, output):  # returns None: the output is left unchanged
        captured.setdefault("ln", output[0].detach().clone())

    hook = model.blocks[1].ln_1.register_forward_hook(keep_first)
    try:
        r = attention(PROMPT, layer=1, head=2)
    finally:
        hook.remove()
    c = model.config.d_model
    d = c // model.config.n_head
    w, b = model.blocks[1].attn.c_attn.weight.detach(), model.blocks[1].attn.c_attn.bias.detach()
    with torch.no_grad():
        q = torch.nn.functional.linear(captured["ln"], w[:c], b[:c])[:, 2 * d : 3 * d].numpy()
        k = torch.nn.functional.linear(captured["ln"], w[c : 2 * c], b[c : 2 * c])[:, 2 * d : 3 * d].numpy()
    np.testing.assert_allclose(r.stages[0].matrix, q, atol=1e-5)
    np.testing.assert_allclose(r.stages[1].matrix, k, atol=1e-5)
    assert "W_Q" in r.stages[0].code and "W_K" in r.stages[1].code


def test_salient_head_is_found_from_the_weights():
    from playground.attention import salient_head

    t, n_layer, n_head = 12, 3, 4
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    weights = np.broadcast_to(uniform, (n_layer, n_head, t, t)).copy()
    weights[2, 1] = np.eye(t, k=-1) + np.eye(t) * (np.arange(t) == 0)[:, None]  # token t looks at t - 1
    found = salient_head(weights)
    assert (found.layer, found.head, found.kind) == (2, 1, "previous-token") and found.share == 1.0
    assert found.uniform == pytest.approx(np.mean(1 / np.arange(2, t + 1)))
    # a head that sits on the first token (the attention sink) is never chosen, even where it
    # looks at the previous token more than any other head does
    previous = weights[2, 1].copy()
    weights[0, 3] = 0.55 * np.eye(t)[0][None, :] + 0.45 * previous
    weights[0, 3, :2] = previous[:2]
    weights[2, 1] = 0.35 * previous + 0.65 * uniform
    sink_share = np.mean(weights[0, 3, np.arange(1, t), np.arange(t - 1)])
    other_share = np.mean(weights[2, 1, np.arange(1, t), np.arange(t - 1)])
    assert sink_share > other_share  # the sink would win on the pattern alone
    found = salient_head(weights)
    assert (found.layer, found.head, found.kind) == (2, 1, "previous-token")


def test_induction_and_earlier_occurrence_heads_are_found_from_the_ids():
    """ids 5 6 7 5 6 7 ...: an induction head looks, from each repeat, at the token that followed
    its earlier occurrence (from the second 5 at the first 6); an earlier-occurrence head at the
    earlier occurrence itself. Each is found only when its pattern beats the previous-token head's."""
    from playground.attention import salient_head

    ids = [5, 6, 7, 5, 6, 7, 5, 6, 7]
    t = len(ids)
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    weights = np.broadcast_to(uniform, (2, 2, t, t)).copy()
    weights[0, 0] = 0.6 * np.eye(t, k=-1) + 0.4 * uniform  # a weaker previous-token head
    weights[0, 0, 0, 0] = 1.0
    induction = np.zeros((t, t))
    for q in range(t):
        keys = [k for k in range(1, q) if ids[k - 1] == ids[q]]
        induction[q, keys] = 1.0 / len(keys) if keys else 0.0
        if not keys:
            induction[q, : q + 1] = 1.0 / (q + 1)
    weights[1, 1] = induction
    found = salient_head(weights, ids)
    assert (found.layer, found.head, found.kind) == (1, 1, "induction") and found.share == pytest.approx(1.0)
    # without the ids only the previous-token pattern can be measured
    assert salient_head(weights).kind == "previous-token"
    same = np.zeros((t, t))
    for q in range(t):
        keys = [k for k in range(q) if ids[k] == ids[q]] or list(range(q + 1))
        same[q, keys] = 1.0 / len(keys)
    weights[1, 1] = uniform
    weights[1, 0] = same
    found = salient_head(weights, ids)
    assert (found.layer, found.head, found.kind) == (1, 0, "earlier-occurrence")


def test_the_page_opens_on_a_head_that_shows_something():
    """On the example (whole words, repeated), the head found is no attention sink and far from
    uniform, and the example splits into whole words."""
    from playground.attention import EXAMPLE_PROMPTS, FIRST_TOKEN_SINK, salient_head

    r = attention(EXAMPLE_PROMPTS[0], 0, 0)
    assert all(tok.strip("⋅").isalpha() or not any(c.isalpha() for c in tok) for tok in r.tokens), r.tokens
    assert all(tok.strip("⋅").lower() in EXAMPLE_PROMPTS[0].lower().replace("!", " ").split() or not tok.strip("⋅").isalpha()
               for tok in r.tokens), r.tokens  # every word one token: no "R | ome | o"
    found = salient_head(r.weights, r.ids)
    assert found.share > 2 * found.uniform
    assert r.weights[found.layer, found.head, 1:, 0].mean() < FIRST_TOKEN_SINK
    # the found head's share, recomputed here from its weights
    w, ids = r.weights[found.layer, found.head], r.ids
    keys = {
        "previous-token": {q: [q - 1] for q in range(1, len(ids))},
        "earlier-occurrence": {q: [k for k in range(q) if ids[k] == ids[q]] for q in range(1, len(ids))},
        "induction": {q: [k for k in range(1, q) if ids[k - 1] == ids[q]] for q in range(2, len(ids))},
    }[found.kind]
    shares = [w[q, ks].sum() for q, ks in keys.items() if ks]
    assert np.mean(shares) == pytest.approx(found.share, rel=1e-5)


def _hand_made_heads(t: int = 12) -> np.ndarray:
    """[1, 3, t, t]: head 0 looks at the previous token; head 1 is uniform; head 2 gives the first
    token 70% of every row and spreads the rest evenly."""
    uniform = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    previous = np.eye(t, k=-1)
    previous[0, 0] = 1.0
    sink = 0.3 * uniform
    sink[1:, 0] += 0.7
    sink[0, 0] = 1.0
    return np.stack([previous, uniform, sink])[None]


def test_any_head_is_named_and_measured_as_the_opening_head_is():
    """describe_head on hand-made heads: a previous-token head is named with its share against a
    uniform head's; a uniform head has no clear pattern (its closest measured all the same); a head
    on the first token is called an attention sink. head_sentence says each as the page does."""
    from playground.attention import SalientHead, describe_head, head_sentence, salient_head

    t = 12
    weights = _hand_made_heads(t)
    uniform_share = float(np.mean(1 / np.arange(2, t + 1)))  # a uniform row q gives key q - 1 1 / (q + 1)
    previous = describe_head(weights, None, 0, 0)
    assert (previous.layer, previous.head, previous.kind) == (0, 0, "previous-token")
    assert previous.share == pytest.approx(1.0) and previous.uniform == pytest.approx(uniform_share)
    assert previous.clear and not previous.sink
    assert head_sentence(previous).startswith("a previous-token head (word order")
    assert f"the token just before it 100% of its attention on average; a uniform head would give {uniform_share:.0%}" in head_sentence(previous)
    flat = describe_head(weights, None, 0, 1)
    assert flat.share == pytest.approx(flat.uniform) and not flat.clear
    assert head_sentence(flat).startswith("no clear pattern; its closest is the previous-token pattern")
    sink = describe_head(weights, None, 0, 2)
    assert sink.first_token == pytest.approx(0.7 + 0.3 * np.mean(1 / np.arange(2, t + 1))) and sink.sink
    assert "an attention sink" in head_sentence(sink) and "an attention sink" not in head_sentence(previous)
    # the clearest head, as salient_head finds it, is described the same way by describe_head
    found = salient_head(weights)
    assert describe_head(weights, None, found.layer, found.head) == found
    assert head_sentence(SalientHead(0, 0, "induction", 0.45, 0.16)).startswith("an induction head")


def test_the_page_names_and_measures_the_head_the_learner_picks():
    """The Attention tab's note for layer 2, head 3 of the opening text (as a learner picks it)
    names and measures that head's pattern, its share recomputed here from the model's weights."""
    from playground.attention import EXAMPLE_PROMPTS
    from playground.ui.attention import Handlers

    *_, info = Handlers(RES).ui_attention(EXAMPLE_PROMPTS[0], 2, 3)
    r = attention(EXAMPLE_PROMPTS[0], 2, 3)
    w, ids = r.weights[2, 3], r.ids
    t = len(ids)
    keys = {
        "previous-token": {q: [q - 1] for q in range(1, t)},
        "earlier-occurrence": {q: [k for k in range(q) if ids[k] == ids[q]] for q in range(1, t)},
        "induction": {q: [k for k in range(1, q) if ids[k - 1] == ids[q]] for q in range(2, t)},
    }
    excess = {}
    for kind, pairs in keys.items():
        pairs = {q: ks for q, ks in pairs.items() if ks}
        excess[kind] = (np.mean([w[q, ks].sum() for q, ks in pairs.items()]), np.mean([len(ks) / (q + 1) for q, ks in pairs.items()]))
    kind = max(excess, key=lambda k: excess[k][0] - excess[k][1])
    share, uniform = excess[kind]
    assert info.startswith("12 tokens. Layer 2, head 3: ")
    assert f"{kind} " in info and f"{share:.0%} of its attention on average; a uniform head would give {uniform:.0%}" in info
