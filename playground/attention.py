"""Attention tab: the model's attention weights for a prompt, and the lessons' step-through.

The weights come from ``model(idx, output_attentions=True).attentions`` (per layer [B, H, T, T]).
The step-through recomputes one head from the block's own weights, stage by stage as the lessons
write it (``q = x W_Q``, ``k = x W_K`` -> ``q @ k^T * head_size**-0.5`` -> ``tril`` ->
``masked_fill(tril == 0, -inf)`` -> ``softmax`` -> ``@ v``), and checks the result against the
model's own computation.
"""

from __future__ import annotations

import functools
import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots
from torch.nn import functional as F

from model import GPT

from . import limits
from .plots import base_layout, heatmap, token_ticks
from .resources import shipped_model
from .tokens import encode_prompt, token_labels
from .validation import validate_int

__all__ = ["EXAMPLE_PROMPTS", "HEAD_KINDS", "Stage", "SalientHead", "salient_head", "describe_head", "head_sentence",
           "AttentionResult", "attention", "attention_weights", "line_view_html"]

# In the corpus's style (see generation.EXAMPLE_PROMPTS), every token a whole word or a mark:
# the first repeats its words, which the heads worth seeing (previous word, earlier occurrence)
# act on.
EXAMPLE_PROMPTS = ("A horse! a horse! my kingdom for a horse!", "To be, or not to be,--that is the question:--")


@dataclass(frozen=True)
class Stage:
    """One step of the weighted aggregation for the chosen head. Its figure is drawn when asked
    for (the page shows one stage at a time: drawing all seven made every layer change slower)."""

    name: str
    code: str  # the lessons' line of PyTorch for this step
    caption: str
    matrix: np.ndarray = field(repr=False)  # [T, T] (or [T, head_dim] for q, k and the output)
    draw: Callable[[], go.Figure] = field(repr=False, compare=False)

    @property
    def figure(self) -> go.Figure:
        return self.draw()


# What each kind of head does, as the page says it: what a token gives its attention to, and why
# the pattern matters.
HEAD_KINDS = {
    "previous-token": ("the token just before it", "word order, read by every later layer"),
    "earlier-occurrence": ("the earlier occurrences of its own token", "it finds where a word was said before"),
    "induction": ("the token that followed its own token's earlier occurrence",
                  "how a model continues a pattern it has already seen"),
}
# A head that gives the first token this much of every row's weight on average is a no-op
# "attention sink" (the least instructive pattern): never the one the page opens on.
FIRST_TOKEN_SINK = 0.5
# A head is named after its pattern only where the pattern's share beats a uniform head's by this
# much (10 points: the opening head's beats it by 29); below, the page says it has no clear one.
CLEAR_EXCESS = 0.10


@dataclass(frozen=True)
class SalientHead:
    """A head and its pattern on a text, measured from the model's weights: the one that most
    exceeds a uniform head's (:func:`salient_head` for the clearest head, :func:`describe_head`
    for any one)."""

    layer: int
    head: int
    kind: str  # a key of HEAD_KINDS
    share: float  # mean weight a token gives the keys of its kind
    uniform: float  # the same mean for a uniform head (n keys / (t + 1) per row): the baseline
    first_token: float = 0.0  # mean weight a token after the first gives the first (a sink: FIRST_TOKEN_SINK)

    @property
    def gives(self) -> str:
        return HEAD_KINDS[self.kind][0]

    @property
    def why(self) -> str:
        return HEAD_KINDS[self.kind][1]

    @property
    def clear(self) -> bool:
        return self.share - self.uniform >= CLEAR_EXCESS

    @property
    def sink(self) -> bool:
        return self.first_token >= FIRST_TOKEN_SINK


def _pattern_keys(ids: list[int] | None, t: int) -> dict[str, list[tuple[int, list[int]]]]:
    """Per kind of head, the (query, its keys) pairs the pattern looks at: the token just before
    it; the earlier tokens equal to it; the tokens that followed an earlier token equal to it."""
    kinds: dict[str, list[tuple[int, list[int]]]] = {"previous-token": [(q, [q - 1]) for q in range(1, t)]}
    if ids is not None:
        kinds["earlier-occurrence"] = [(q, ks) for q in range(1, t) if (ks := [k for k in range(q) if ids[k] == ids[q]])]
        kinds["induction"] = [(q, ks) for q in range(2, t) if (ks := [k for k in range(1, q) if ids[k - 1] == ids[q]])]
    return {kind: pairs for kind, pairs in kinds.items() if len(pairs) >= 2 or kind == "previous-token"}


def _pattern_shares(weights: np.ndarray, ids: list[int] | None) -> dict[str, tuple[np.ndarray, float]]:
    """Per kind of head: every head's mean weight on the pattern's keys [n_layer, n_head], and a
    uniform head's, over the queries the pattern applies to."""
    t = weights.shape[-1]
    return {kind: (np.mean([weights[:, :, q, ks].sum(axis=-1) for q, ks in pairs], axis=0),
                   float(np.mean([len(ks) / (q + 1) for q, ks in pairs])))
            for kind, pairs in _pattern_keys(ids, t).items()}


def _first_token_share(weights: np.ndarray) -> np.ndarray:
    """[n_layer, n_head] the mean weight the tokens after the first give the first."""
    return weights[:, :, 1:, 0].mean(axis=-1)


def salient_head(weights: np.ndarray, ids: list[int] | None = None) -> SalientHead:
    """The head of ``weights`` [n_layer, n_head, T, T] whose pattern most exceeds a uniform
    head's: attending to the token just before (previous-token), to earlier occurrences of the
    same token, or to the token after such an occurrence (induction; these two need ``ids``).
    Excess = mean weight on the pattern's keys minus a uniform head's, over the queries the
    pattern applies to. Heads that sit on the first token (FIRST_TOKEN_SINK) are left out."""
    t = weights.shape[-1]
    if t < 2:
        return SalientHead(0, 0, "previous-token", 1.0, 1.0)
    first = _first_token_share(weights)
    sink = first >= FIRST_TOKEN_SINK  # [n_layer, n_head]
    best: tuple[float, SalientHead] | None = None
    for kind, (share, uniform) in _pattern_shares(weights, ids).items():
        excess = np.where(sink, -np.inf, share - uniform)
        if np.all(sink):
            excess = share - uniform  # every head a sink: the clearest of them all the same
        layer, head = np.unravel_index(int(np.argmax(excess)), excess.shape)
        if best is None or excess[layer, head] > best[0]:
            best = (float(excess[layer, head]), SalientHead(int(layer), int(head), kind, float(share[layer, head]), uniform,
                                                            float(first[layer, head])))
    return best[1]


def describe_head(weights: np.ndarray, ids: list[int] | None, layer: int, head: int) -> SalientHead:
    """Head ``head`` of layer ``layer`` measured as :func:`salient_head` measures the heads it
    chooses from: the pattern whose share most exceeds a uniform head's (the first kind on a tie),
    and the share the first token gets."""
    if weights.shape[-1] < 2:
        return SalientHead(layer, head, "previous-token", 1.0, 1.0, 1.0)
    shares = _pattern_shares(weights, ids)
    kind = max(shares, key=lambda k: shares[k][0][layer, head] - shares[k][1])
    share, uniform = shares[kind]
    return SalientHead(layer, head, kind, float(share[layer, head]), uniform, float(_first_token_share(weights)[layer, head]))


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def head_sentence(h: SalientHead) -> str:
    """What a head does on the text, named and measured, as the Attention tab says it: its pattern
    and the share of attention it gives the pattern's keys beside a uniform head's; a head whose
    best pattern is not clear is said to have none, with that pattern measured all the same; a
    head that sits on the first token is called an attention sink."""
    measured = (f"each token it applies to gives {h.gives} {h.share:.0%} of its attention on average; a uniform head "
                f"would give {h.uniform:.0%}.")
    sink = (f" It gives the first token {h.first_token:.0%} of every later token's attention on average: an attention "
            "sink." if h.sink else "")
    if h.clear:
        return f"{_article(h.kind)} {h.kind} head ({h.why}): {measured}{sink}"
    return f"no clear pattern; its closest is the {h.kind} pattern ({h.why}): {measured}{sink}"


@dataclass(frozen=True)
class AttentionResult:
    text: str
    ids: list[int]
    tokens: list[str]
    layer: int
    head: int
    n_layer: int
    n_head: int
    weights: np.ndarray = field(repr=False)  # [n_layer, n_head, T, T], rows sum to 1
    head_figure: go.Figure = field(repr=False)
    stages: list[Stage] = field(repr=False)
    weights_max_diff: float  # step-through weights vs the model's attentions for this head
    output_max_diff: float  # step-through (all heads, then W_O) vs the block's attention output
    notice: str

    # Drawn when first asked for: the Compare tab shows only the chosen head.
    @functools.cached_property
    def mean_figure(self) -> go.Figure:
        return _weights_figure(self.weights[self.layer].mean(axis=0), self.tokens,
                               f"Layer {self.layer}: mean over the {self.n_head} heads")

    @functools.cached_property
    def heads_figure(self) -> go.Figure:
        """Every head of the chosen layer."""
        return _heads_grid(self.weights[self.layer], self.tokens, self.layer)

    @functools.cached_property
    def lines_html(self) -> str:
        """The line view of the chosen layer (BertViz's head view)."""
        return line_view_html(self.weights[self.layer], self.tokens, self.layer, self.head)

    def to_dict(self, decimals: int = 5) -> dict[str, Any]:
        """JSON-ready: tokens, the chosen head's and the layer's mean weights, the checks."""
        return {
            "tokens": self.tokens,
            "ids": self.ids,
            "layer": self.layer,
            "head": self.head,
            "weights": np.round(self.weights[self.layer, self.head], decimals).tolist(),
            "mean_over_heads": np.round(self.weights[self.layer].mean(axis=0), decimals).tolist(),
            "weights_max_diff": self.weights_max_diff,
            "output_max_diff": self.output_max_diff,
            "notice": self.notice,
        }


@torch.inference_mode()
def attention_weights(model: GPT, ids: list[int]) -> np.ndarray:
    """The model's attention weights [n_layer, n_head, T, T] for one sequence."""
    out = model(torch.tensor([ids], dtype=torch.long), output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).float().numpy()


def _pair_customdata(tokens: list[str]) -> np.ndarray:
    """Per cell: query label, key label, and a note on cells the causal mask hides."""
    t = len(tokens)
    q = np.array([f"{i}: {tokens[i]}" for i in range(t)], dtype=object)
    future = np.where(np.triu(np.ones((t, t), dtype=bool), k=1), " (masked: a future token)", "").astype(object)
    return np.stack([np.repeat(q[:, None], t, axis=1), np.repeat(q[None, :], t, axis=0), future], axis=-1)


# Weights are printed in the cells (two decimals) for short texts, up to this many tokens; beyond,
# they are in the hover only, as BertViz shows them (sixty numbers a row would be noise).
CELL_VALUES_MAX_TOKENS = 16
# Past this many tokens the cells' numbers take the size that fits a cell (plotly's own fit, its
# text size left unset), so that "0.00" stays within its cell on a phone, smaller there.
CELL_FONT_FULL_TOKENS = 10


def _cells(t: int, fmt: str = ".2f") -> str | None:
    return fmt if t <= CELL_VALUES_MAX_TOKENS else None


def _cell_font(fig: go.Figure, t: int) -> go.Figure:
    if CELL_FONT_FULL_TOKENS < t <= CELL_VALUES_MAX_TOKENS:
        for trace in fig.data:
            trace.textfont.size = None
    return fig


def _weights_figure(w: np.ndarray, tokens: list[str], title: str) -> go.Figure:
    t = len(tokens)
    return _cell_font(heatmap(
        w, title, x_labels=tokens, y_labels=tokens, x_title="key (attended-to token)", y_title="query (attending token)",
        colorscale="Blues", zmin=0.0, zmax=1.0,
        hover="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.3f}%{customdata[2]}<extra></extra>",
        customdata=_pair_customdata(tokens),
        cells=_cells(t),
        height=max(420, 18 * t + 160),
    ), t)


def _heads_grid(w_layer: np.ndarray, tokens: list[str], layer: int) -> go.Figure:
    """Every head of a layer, as BertViz's model view: the tokens label the rows of the first
    column and the columns of the last row (the others share them); the hover names both."""
    n_head, t = w_layer.shape[0], len(tokens)
    # Two heads a row: four a row left each head 60 px wide on a phone, its labels unreadable.
    cols = min(2, n_head)
    rows = math.ceil(n_head / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {h}" for h in range(n_head)],
                        horizontal_spacing=0.03, vertical_spacing=0.12 / rows, shared_xaxes=True, shared_yaxes=True)
    custom = _pair_customdata(tokens)
    for h in range(n_head):
        fig.add_trace(
            go.Heatmap(z=w_layer[h], zmin=0.0, zmax=1.0, colorscale="Blues", showscale=h == 0, customdata=custom,
                       colorbar={"thickness": 12},
                       hovertemplate=f"head {h}<br>query %{{customdata[0]}}<br>key %{{customdata[1]}}<br>weight %{{z:.3f}}%{{customdata[2]}}<extra></extra>"),
            row=h // cols + 1, col=h % cols + 1,
        )
    ticks = token_ticks(tokens, t, max_ticks=32)
    fig.update_yaxes(autorange="reversed", tickfont={"size": 9}, automargin=True, **ticks)
    fig.update_xaxes(tickfont={"size": 9}, tickangle=-60, automargin=True, **ticks)
    fig.update_yaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=True, col=1)
    fig.update_xaxes(showticklabels=False)
    fig.update_xaxes(showticklabels=True, row=rows)
    fig.update_annotations(font={"size": 12})
    base_layout(fig, f"Layer {layer}: every head (rows: queries, columns: keys)", height=max(220, 7 * t + 150) * rows + 120)
    fig.update_layout(margin={"l": 10, "r": 10})
    return fig


# One colour per head in the line view (BertViz colours each head's lines).
HEAD_COLOURS = ("#4f46e5", "#db2777", "#059669", "#d97706", "#0891b2", "#7c3aed", "#dc2626", "#65a30d",
                "#2563eb", "#c026d3", "#0d9488", "#ea580c")


def line_view_html(w_layer: np.ndarray, tokens: list[str], layer: int, head: int) -> str:
    """BertViz's head view as HTML for the page's script (``ui/attention.LINE_VIEW_JS`` draws it):
    the tokens twice, queries on the left and keys on the right; a click on a token draws its
    attention as lines whose strength is the weight, for the heads chosen (``head`` at first).
    The weights go in a data attribute, rounded to 3 decimals, only the causal triangle."""
    n_head, t = w_layer.shape[0], len(tokens)
    data = {
        "layer": layer,
        "head": head,
        "tokens": tokens,
        "colours": [HEAD_COLOURS[h % len(HEAD_COLOURS)] for h in range(n_head)],
        # [head][query][key] for key <= query: row q has q + 1 weights
        "weights": [[[round(float(x), 3) for x in w_layer[h, q, : q + 1]] for q in range(t)] for h in range(n_head)],
    }
    payload = html.escape(json.dumps(data, ensure_ascii=False, separators=(",", ":")), quote=True)
    return (
        f'<div class="att-lines" data-att="{payload}">'
        f'<p class="att-lines-hint">Layer {layer}. Click a token on the left to see what it attends to, one on the '
        f"right to see who attends to it; the thicker the line, the larger the weight. Click a head to add or "
        f"remove its lines.</p></div>"
    )


def _masked_display(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """-inf cannot be drawn: shown as empty cells labelled −inf."""
    shown = np.where(np.isneginf(m), np.nan, m)
    text = np.where(np.isneginf(m), "−inf", np.char.mod("%.2f", np.nan_to_num(m, neginf=0.0))).astype(object)
    return shown, text


@torch.inference_mode()
def _step_through(model: GPT, ids: list[int], layer: int, head: int, tokens: list[str], model_weights: np.ndarray):
    """Recompute layer ``layer``'s attention from its weights; returns (stages, weights diff, output diff)."""
    idx = torch.tensor([ids], dtype=torch.long)
    x = model.embed(idx, torch.arange(len(ids)))
    for block in model.blocks[:layer]:
        x = block(x)[0]
    block = model.blocks[layer]
    ln = block.ln_1(x)[0]  # [T, C]
    t, c = ln.shape
    n_head, d = block.attn.n_head, block.attn.head_dim
    q, k, v = block.attn.c_attn(ln).split(c, dim=-1)
    q, k, v = (m.view(t, n_head, d).transpose(0, 1) for m in (q, k, v))  # [H, T, D]

    # The lessons' stages, for every head at once (the chosen one is shown).
    wei = q @ k.transpose(-2, -1) * d**-0.5
    tril = torch.tril(torch.ones(t, t))
    masked = wei.masked_fill(tril == 0, float("-inf"))
    weights = F.softmax(masked, dim=-1)
    out = weights @ v  # [H, T, D]

    recombined = block.attn.c_proj(out.transpose(0, 1).reshape(t, c))
    reference = block.attn(block.ln_1(x))[0][0]  # the model's own path (fused kernel)
    output_diff = float((recombined - reference).abs().max())
    weights_diff = float(np.max(np.abs(weights[head].numpy() - model_weights[layer, head])))

    h = head
    q_np, k_np, scores_np, masked_np, weights_np, out_np = (m[h].numpy() for m in (q, k, wei, masked, weights, out))
    small = t <= CELL_VALUES_MAX_TOKENS
    masked_z, masked_text = _masked_display(masked_np)
    c0 = h * d  # the head's columns of W_Q, W_K (c_attn holds W_Q | W_K | W_V, each [C, C])
    stages = [
        Stage("1. queries", f"q = x @ W_Q[:, {c0}:{c0 + d}]",
              f"Each token's query: its vector x (after the block's LayerNorm, {c} numbers) times this head's "
              f"columns of W_Q, {d} numbers saying what the token looks for.",
              q_np,
              lambda: heatmap(q_np, f"q = x W_Q, head {h} ({t} tokens × head_dim {d})", y_labels=tokens,
                              x_title="head dimension", y_title="token", colorscale="RdBu", zmid=0.0)),
        Stage("2. keys", f"k = x @ W_K[:, {c0}:{c0 + d}]",
              f"Each token's key: the same x times this head's columns of W_K, {d} numbers saying what the token offers.",
              k_np,
              lambda: heatmap(k_np, f"k = x W_K, head {h} ({t} tokens × head_dim {d})", y_labels=tokens,
                              x_title="head dimension", y_title="token", colorscale="RdBu", zmid=0.0)),
        Stage("3. scores", "wei = q @ k.transpose(-2, -1) * head_size**-0.5",
              f"Each query's dot product with every key, scaled by 1/√{d} (head_size = {d}).",
              scores_np,
              lambda: _cell_font(heatmap(scores_np, "Scores q·k / √d (future tokens not yet hidden)", x_labels=tokens,
                                         y_labels=tokens, x_title="key", y_title="query", colorscale="RdBu", zmid=0.0,
                                         cells=_cells(t)), t)),
        Stage("4. causal mask", "tril = torch.tril(torch.ones(T, T))",
              "Lower-triangular ones: query t may look at keys 0..t only (a decoder never sees the future).",
              tril.numpy(),
              lambda: _cell_font(heatmap(tril.numpy(), "tril: 1 = allowed, 0 = future", x_labels=tokens, y_labels=tokens,
                                         x_title="key", y_title="query", colorscale="Greys", zmin=0.0, zmax=1.0,
                                         cells=_cells(t, ".0f")), t)),
        Stage("5. masked fill", "wei = wei.masked_fill(tril == 0, float('-inf'))",
              "Scores above the diagonal become −inf, so softmax gives them exactly zero weight.",
              masked_np,
              lambda: _cell_font(heatmap(masked_z, "Masked scores (blank = −inf)", x_labels=tokens, y_labels=tokens,
                                         x_title="key", y_title="query", colorscale="RdBu", zmid=0.0,
                                         text=masked_text if small else None), t)),
        Stage("6. softmax", "wei = F.softmax(wei, dim=-1)",
              "Each row becomes weights that sum to 1; zeros above the diagonal.",
              weights_np, lambda: _weights_figure(weights_np, tokens, "Attention weights (each row sums to 1)")),
        Stage("7. weighted aggregation", "out = wei @ v",
              f"Each output row is the weighted average of the value vectors (head_dim = {d}) of the tokens it attends to.",
              out_np,
              lambda: heatmap(out_np, "Output: weights @ values", y_labels=tokens, x_title="head dimension",
                              y_title="query", colorscale="RdBu", zmid=0.0)),
    ]
    return stages, weights_diff, output_diff


def attention(text: Any, layer: Any = 0, head: Any = 0, model: GPT | None = None, step_through: bool = True) -> AttentionResult:
    """Attention of the loaded model on ``text``: layer ``layer`` and head ``head`` (0-based).
    ``step_through=False``: no step-through (no stages, its checks NaN), for a page that shows
    only the weights (Compare)."""
    model = model or shipped_model()
    cfg = model.config
    max_tokens = min(limits.MAX_ATTENTION_TOKENS, cfg.block_size)
    ids = encode_prompt(text, name="text", max_chars=limits.MAX_ATTENTION_CHARS, max_tokens=max_tokens)
    layer = validate_int(layer, name="layer", minimum=0, maximum=cfg.n_layer - 1)
    head = validate_int(head, name="head", minimum=0, maximum=cfg.n_head - 1)
    tokens = token_labels(ids)
    weights = attention_weights(model, ids)
    if step_through:
        stages, weights_diff, output_diff = _step_through(model, ids, layer, head, tokens, weights)
    else:
        stages, weights_diff, output_diff = [], math.nan, math.nan
    notice = "" if len(ids) > 1 else "One token attends only to itself: type a longer text to see attention spread."
    return AttentionResult(
        text=text, ids=ids, tokens=tokens, layer=layer, head=head, n_layer=cfg.n_layer, n_head=cfg.n_head,
        weights=weights,
        head_figure=_weights_figure(weights[layer, head], tokens, f"Layer {layer}, head {head}: attention weights (zeros above the diagonal: causal mask)"),
        stages=stages, weights_max_diff=weights_diff, output_max_diff=output_diff, notice=notice,
    )
