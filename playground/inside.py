"""Inside the model: one forward pass of the model shown, stage by stage, on the learner's text.

Every stage is computed by hand from the block's own parameters, in the lessons' terms and shapes
(no module of the model is called): the embedding lookup plus the position rows, LayerNorm with
its mean, standard deviation, gamma and beta, ``c_attn`` split into Q, K and V and reshaped
``(T, d_model) -> (n_head, T, head_dim)``, ``q @ k^T / sqrt(head_dim)``, the causal mask,
softmax, ``@ V``, the heads concatenated, ``c_proj``, the residual adds, the feed-forward network
(``c_fc``, tanh-GELU, ``c_proj``), the final LayerNorm and ``logits = h @ E^T`` with the same
matrix E as the embedding. The logit lens applies that last step after every layer.

The whole pass is computed once per (model, text) and kept in a small LRU cache, so that moving
the layer, head or token control only re-reads it. The model's own forward pass checks it
(``hidden_max_diff``). No Gradio here; the panels are drawn by the web view web/views/inside.js
from :mod:`playground.inside_data`'s object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from model import GPT
from model.stages import LENS_K, TOP_K, block_stages, ffn_alone, first_ranks_stages, gelu_tanh, head_stages, layer_norm, output_head, position_lens

from . import limits
from .memo import Memo
from .resources import shipped_model
from .tokens import encode_prompt, token_labels, token_text
from .validation import validate_int, validate_layer_head

__all__ = [
    "EXAMPLE_TEXTS",
    "LENS_K",
    "TOP_K",
    "LayerTrace",
    "ForwardPass",
    "InsideResult",
    "forward_pass",
    "inside",
    "rising_position",
    "opening_token",
    "ffn0_of_token_alone",
    "layer_norm",
    "block_stages",
    "head_stages",
    "position_lens",
    "first_ranks_stages",
    "ffn_alone",
    "output_head",
    "gelu_tanh",
]

# In the corpus's own style (a speaker alone on its line, the edition's punctuation): text the
# model was trained to read, so its losses show surprise at words, not at an unfamiliar layout.
EXAMPLE_TEXTS = (
    "Romeo.\nBut soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun!",
    "To be, or not to be,--that is the question:--",
    "Friends, Romans, countrymen, lend me your ears;",
)
CACHE_SIZE = 4  # passes kept (about 9 MB each for the shipped model on 64 tokens)


@dataclass(frozen=True)
class LayerTrace:
    """One block's stages for every token; shapes in the names' comments (T tokens, C = d_model,
    H heads of D = head_dim, F = 4 * d_model units)."""

    x_in: np.ndarray  # [T, C] the residual stream entering the block
    ln1_mean: np.ndarray  # [T]
    ln1_std: np.ndarray  # [T] sqrt(var + eps)
    ln1_out: np.ndarray  # [T, C]
    q: np.ndarray  # [H, T, D]
    k: np.ndarray  # [H, T, D]
    v: np.ndarray  # [H, T, D]
    scores: np.ndarray  # [H, T, T] q @ k^T / sqrt(D), before the mask
    weights: np.ndarray  # [H, T, T] softmax of the masked scores: rows sum to 1, zeros above the diagonal
    head_out: np.ndarray  # [H, T, D] weights @ v
    concat: np.ndarray  # [T, C] the heads side by side
    attn_out: np.ndarray  # [T, C] c_proj(concat)
    x_mid: np.ndarray  # [T, C] x_in + attn_out
    ln2_mean: np.ndarray  # [T]
    ln2_std: np.ndarray  # [T]
    ln2_out: np.ndarray  # [T, C]
    fc: np.ndarray  # [T, F] c_fc(ln2_out), before GELU
    gelu: np.ndarray  # [T, F]
    mlp_out: np.ndarray  # [T, C] c_proj(gelu)
    x_out: np.ndarray  # [T, C] x_mid + mlp_out


@dataclass(frozen=True)
class ForwardPass:
    """The whole pass of ``model`` on ``ids``."""

    model: GPT = field(repr=False)
    ids: list[int]
    tokens: list[str]
    tok_emb: np.ndarray = field(repr=False)  # [T, C] rows of E (wte), times sqrt(d_model) with scale_embedding
    pos_emb: np.ndarray = field(repr=False)  # [T, C] rows of the position table
    x0: np.ndarray = field(repr=False)  # [T, C] tok_emb + pos_emb: the first block's input
    layers: list[LayerTrace] = field(repr=False)
    lnf_mean: np.ndarray = field(repr=False)  # [T]
    lnf_std: np.ndarray = field(repr=False)  # [T]
    h: np.ndarray = field(repr=False)  # [T, C] after ln_f: the last hidden state
    top_ids: np.ndarray = field(repr=False)  # [T, TOP_K] most probable next tokens at each position
    top_logits: np.ndarray = field(repr=False)  # [T, TOP_K]
    top_probs: np.ndarray = field(repr=False)  # [T, TOP_K]
    logsumexp: np.ndarray = field(repr=False)  # [T] of the logits: p = exp(logit - logsumexp)
    token_losses: np.ndarray = field(repr=False)  # [T-1] -ln p(ids[i+1] | ids[:i+1]), nats
    next_logits: np.ndarray = field(repr=False)  # [T-1] the logit of the token that came next
    next_ranks: np.ndarray = field(repr=False)  # [T-1] its rank among the vocabulary (1 = top)
    hidden_max_diff: float  # the last hidden state h vs the model's own forward pass
    _lens: dict[int, tuple[list[list[tuple[int, float]]], list[tuple[int, float]] | None]] = field(default_factory=dict, repr=False, compare=False)
    _first_ranks: list[np.ndarray] = field(default_factory=list, repr=False, compare=False)

    @property
    def loss(self) -> float | None:
        """Mean cross-entropy of the text (nats); None for one token (nothing to predict)."""
        return float(self.token_losses.mean()) if len(self.token_losses) else None

    def logits(self) -> np.ndarray:
        """[T, V] logits recomputed from ``h`` and the tied matrix E (not kept: 13 MB each)."""
        with torch.inference_mode():
            return _np(torch.from_numpy(self.h) @ self.model.wte.weight.T)

    def lens(self, position: int) -> list[list[tuple[int, float]]]:
        """The logit lens at ``position``: per layer, the top ``LENS_K`` (id, probability) if the
        model stopped after that layer (ln_f, then @ E^T). Worked out on first use per position
        (one small matmul) and kept: the last layer's is the model's own output."""
        return self._lens_at(position)[0]

    def lens_next(self, position: int) -> list[tuple[int, float]] | None:
        """Per layer, the (rank, probability) the logit lens gives the token that really came
        after ``position`` (rank 1 = the lens's top token, out of the whole vocabulary); None at
        the text's last token, which nothing follows."""
        return self._lens_at(position)[1]

    def first_layer_ranks(self) -> np.ndarray:
        """[T-1] the rank the logit lens after layer 0 gives the token that came next, at every
        position at once (one product with E; :meth:`lens_next`'s first rank, computed for all)."""
        if not self._first_ranks:
            with torch.inference_mode():
                idx = torch.tensor(self.ids, dtype=torch.long)
                ranks = first_ranks_stages(torch.from_numpy(self.layers[0].x_out), self.model, idx)
                self._first_ranks.append(ranks.numpy().copy())
        return self._first_ranks[0]

    def _lens_at(self, position: int) -> tuple[list[list[tuple[int, float]]], list[tuple[int, float]] | None]:
        if position not in self._lens:
            following = position + 1 < len(self.ids)
            with torch.inference_mode():
                x = torch.from_numpy(np.stack([t.x_out[position] for t in self.layers]))  # [n_layer, C]
                target = torch.tensor([self.ids[position + 1] if following else 0], dtype=torch.long)
                top_i, top_p, ranks, probs = position_lens(x, self.model, target)
            nxt = [(int(k), float(p)) for k, p in zip(ranks.tolist(), probs.tolist())] if following else None
            top = [[(int(i), float(p)) for i, p in zip(row_i, row_p)] for row_i, row_p in zip(top_i.tolist(), top_p.tolist())]
            self._lens[position] = (top, nxt)
        return self._lens[position]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().numpy().copy()


@torch.inference_mode()
def forward_pass(model: GPT, ids: list[int]) -> ForwardPass:
    """Every stage of ``model`` on ``ids`` (at most block_size of them), by hand."""
    cfg = model.config
    T, C, H, D = len(ids), cfg.d_model, cfg.n_head, cfg.head_dim
    idx = torch.tensor(ids, dtype=torch.long)
    E = model.wte.weight  # [V, C]: the embedding table, and (transposed) the output head
    tok = E[idx] * (math.sqrt(C) if cfg.scale_embedding else 1.0)  # the paper's sqrt(d_model), when the model uses it
    pos = model.position_table()[:T]
    x = tok + pos
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    layers: list[LayerTrace] = []
    for block in model.blocks:
        stages = block_stages(x, block, causal, H, D)
        x = stages[-1]
        layers.append(LayerTrace(*(_np(t) for t in stages)))
    mf, sf, h, top_ids, top_logits, top_probs, lse, losses, next_logits, ranks = head_stages(x, model, idx)
    # The model's own forward pass (its modules, its fused attention kernel) up to the last
    # hidden state; the output head after it is the same matmul with the same E.
    reference = model(idx[None], head=False).hidden[0]
    return ForwardPass(
        model=model, ids=list(ids), tokens=token_labels(ids), tok_emb=_np(tok), pos_emb=_np(pos), x0=_np(tok + pos),
        layers=layers, lnf_mean=_np(mf), lnf_std=_np(sf), h=_np(h), top_ids=top_ids.numpy().copy(),
        top_logits=_np(top_logits), top_probs=_np(top_probs), logsumexp=_np(lse),
        token_losses=_np(losses).astype(np.float64), next_logits=_np(next_logits), next_ranks=ranks.numpy().copy(),
        hidden_max_diff=float((h - reference).abs().max()),
    )


def rising_position(first_ranks: np.ndarray, last_ranks: np.ndarray, last_probs: np.ndarray, shown: int = LENS_K) -> int:
    """The position whose next token rises most through the layers, from its rank after layer 0
    (``first_ranks``) to its rank at the output (``last_ranks``), in log rank: 500 -> 5 as far as
    100 -> 1. Among the positions whose next token the output lists in its top ``shown`` (so the
    lens's rows show it arrive) when there are any; ties go to the higher output probability, then
    to the earlier position. Arrays of T-1 values: the last token, which nothing follows, is out."""
    first, last, probs = (np.asarray(a, dtype=np.float64) for a in (first_ranks, last_ranks, last_probs))
    if not len(first):
        return 0
    rise = np.log(first) - np.log(last)
    candidates = np.flatnonzero(last <= shown)
    if not len(candidates):
        candidates = np.arange(len(first))
    # lexsort: the last key is the primary one; the earlier position wins what is left
    order = np.lexsort((candidates, -probs[candidates], -rise[candidates]))
    return int(candidates[order[0]])


def opening_token(fp: ForwardPass) -> int:
    """The token the tab opens on: :func:`rising_position` of the pass (its logit lens shows a
    prediction form), the only token of a one-token text."""
    if len(fp.ids) < 2:
        return 0
    return rising_position(fp.first_layer_ranks(), fp.next_ranks, np.exp(-fp.token_losses))


@torch.inference_mode()
def ffn0_of_token_alone(fp: ForwardPass, position: int) -> np.ndarray:
    """[C] what layer 0's feed-forward network writes for the token at ``position`` from its
    embedding row alone (:func:`ffn_alone` of E[id]): set beside what it really writes, it shows
    how much of that the token itself decides."""
    return _np(ffn_alone(torch.from_numpy(fp.tok_emb[position : position + 1]), fp.model.blocks[0])[0])


# --- the cache: one pass per (model, text), the most recent few --------------------------------

# Keyed by the model itself, not its id(): a pass holds its model anyway, and an id reused after
# garbage collection could otherwise find another model's pass.
_passes: Memo[tuple[GPT, tuple[int, ...]], ForwardPass] = Memo(size=CACHE_SIZE)


def cached_pass(model: GPT, ids: list[int]) -> ForwardPass:
    """:func:`forward_pass`, kept for the last ``CACHE_SIZE`` (model, ids) pairs."""
    key = (model, tuple(ids))
    with _passes.lock:
        if key in _passes:
            return _passes.get(key)
    # Computed outside the lock (not Memo.get) so that two learners' texts compute at once.
    result = forward_pass(model, ids)
    _passes.put(key, result)
    return result


# --- one request: a pass and the layer, head and token it shows --------------------------------


@dataclass(frozen=True)
class InsideResult:
    """A forward pass and the layer, head and token position chosen to show."""

    fp: ForwardPass = field(repr=False)
    layer: int
    head: int
    token: int

    @property
    def trace(self) -> LayerTrace:
        return self.fp.layers[self.layer]

    def lens(self, position: int) -> list[list[tuple[str, float]]]:
        """Per layer, the top next tokens (text, probability) at ``position``."""
        return [[(token_text(i), p) for i, p in row] for row in self.fp.lens(position)]

    def lens_next(self, position: int) -> list[tuple[int, float]] | None:
        """Per layer, the rank and probability of the token that came after ``position`` (None at the last)."""
        return self.fp.lens_next(position)

    def to_dict(self, decimals: int = 5) -> dict[str, Any]:
        """JSON-ready: the contract's ``tokens``, ``token_losses``, ``logit_lens`` (at the last
        position), and the numbers the tab shows for the chosen layer, head and token."""
        fp, tr, cfg = self.fp, self.trace, self.fp.model.config
        t, h, r = self.token, self.head, lambda a: np.round(np.asarray(a, dtype=np.float64), decimals).tolist()
        w = tr.weights[h, t, : t + 1]
        fired = tr.gelu[t] > 0
        strongest = np.argsort(-tr.gelu[t])[:5]
        vocab = cfg.vocab_size
        return {
            "tokens": fp.tokens,
            "ids": fp.ids,
            "token_losses": [round(float(x), 6) for x in fp.token_losses],
            "loss": None if fp.loss is None else round(fp.loss, 6),
            "uniform_loss": round(math.log(vocab), 6),
            "logit_lens": [[text for text, _ in row] for row in self.lens(len(fp.ids) - 1)],
            "logit_lens_probabilities": [[round(p, 6) for _, p in row] for row in self.lens(len(fp.ids) - 1)],
            "layer": self.layer,
            "head": h,
            "token": t,
            "config": {"n_layer": cfg.n_layer, "n_head": cfg.n_head, "d_model": cfg.d_model,
                       "head_dim": cfg.head_dim, "d_ff": 4 * cfg.d_model, "vocab_size": vocab},
            "embedding": {"token_first": r(fp.tok_emb[t, :8]), "position_first": r(fp.pos_emb[t, :8]), "sum_first": r(fp.x0[t, :8])},
            "layer_norm": {"mean": round(float(tr.ln1_mean[t]), decimals), "std": round(float(tr.ln1_std[t]), decimals),
                           "out_first": r(tr.ln1_out[t, :8])},
            "attention": {"scores": r(tr.scores[h, t, : t + 1]), "weights": r(w), "head_out_first": r(tr.head_out[h, t, :8])},
            "residual": {
                "norm_in": [round(float(np.linalg.norm(x.x_in[t])), decimals) for x in fp.layers],
                "attention_added": [round(float(np.linalg.norm(x.attn_out[t])), decimals) for x in fp.layers],
                "mlp_added": [round(float(np.linalg.norm(x.mlp_out[t])), decimals) for x in fp.layers],
                "norm_out": [round(float(np.linalg.norm(x.x_out[t])), decimals) for x in fp.layers],
            },
            "ffn": {"units": int(tr.gelu.shape[1]), "fired": int(fired.sum()),
                    "strongest": [{"unit": int(u), "value": round(float(tr.gelu[t, u]), decimals)} for u in strongest]},
            "candidates": [{"id": int(i), "token": token_text(int(i)), "probability": round(float(p), 6)}
                           for i, p in zip(fp.top_ids[t], fp.top_probs[t])],
            "hidden_max_diff": fp.hidden_max_diff,
        }


def inside(text: Any, layer: Any = 0, head: Any = 0, token: Any = None, model: GPT | None = None) -> InsideResult:
    """The pass of the model shown (or ``model``) on ``text``, showing ``layer`` and ``head``
    (0-based) at token position ``token`` (None: the last token)."""
    model = model or shipped_model()
    cfg = model.config
    max_tokens = min(limits.MAX_INSIDE_TOKENS, cfg.block_size)
    ids = encode_prompt(text, name="text", max_chars=limits.MAX_INSIDE_CHARS, max_tokens=max_tokens)
    layer, head = validate_layer_head(layer, head, n_layer=cfg.n_layer, n_head=cfg.n_head)
    # ids is never empty: validate_text refuses empty text, and any other text is 1 token or more
    position = len(ids) - 1 if token is None else validate_int(token, name="token", minimum=0, maximum=len(ids) - 1)
    return InsideResult(cached_pass(model, ids), layer, head, position)
