"""Inside the model's data object in Python: a :class:`playground.inside.ForwardPass` in the shape
web/engine/inside.js gives in the browser (docs/browser.md, "The contract between the editions"),
so that the one view, web/views/inside.js, draws the app's numbers as it draws the static
edition's. The logit lens is the app's own (:meth:`ForwardPass.lens`, :meth:`ForwardPass.lens_next`),
the opening token :func:`opening_token`'s.

The object can be whole (:func:`inside_data` with no positions: the tests, against the browser's)
or a part (:func:`view_answer`: what the app hands its view, bounded): the fields of one row per
token (a vector of each token, the logit lens at a position) are filled at the positions asked for
and None elsewhere, so that the view merges one answer into the last. Arrays stay numpy (float32)
for :mod:`playground.wire` to pack; :func:`playground.wire.plain` turns them into lists.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from .inside import ForwardPass, ffn0_of_token_alone, opening_token
from .tokens import token_text
from .wire import Sparse, Unit

__all__ = ["inside_data", "view_answer", "pass_key", "STAGE_FIELDS", "ROW_FIELDS", "LAYER_ROWS", "HEAD_ROWS", "VIEW_SKIPS"]

STAGE_FIELDS = ("x_in", "ln1_mean", "ln1_std", "ln1_out", "q", "k", "v", "scores", "weights", "head_out", "concat",
                "attn_out", "x_mid", "ln2_mean", "ln2_std", "ln2_out", "fc", "gelu", "mlp_out", "x_out")
# The fields with a row per token [T, ...] (per layer: LAYER_ROWS; per layer and head, [H, T, ...]:
# HEAD_ROWS); every other field is the text's, sent whole.
ROW_FIELDS = ("tok_emb", "pos_emb", "x0", "h", "ffn0_alone")
LAYER_ROWS = ("x_in", "ln1_out", "concat", "attn_out", "x_mid", "ln2_out", "fc", "gelu", "mlp_out", "x_out")
HEAD_ROWS = ("q", "k", "v", "scores", "head_out")
# Rows the view never reads (head_out is concat's, h and ln2_out are drawn by no panel): the app
# does not send them.
VIEW_SKIPS = frozenset({"h", "ln2_out", "head_out"})


def pass_key(fp: ForwardPass) -> str:
    """What tells one pass from another for the view: the model's weights' identity and the ids."""
    return f"{id(fp.model):x}:" + ",".join(map(str, fp.ids))


def _rows(a: np.ndarray, at: Iterable[int] | None) -> Sparse | np.ndarray:
    """``a`` [T, ...] whole (``at`` None) or with rows only at ``at``."""
    if at is None:
        return np.asarray(a)
    return Sparse(len(a), {t: np.asarray(a[t]) for t in at})


def inside_data(fp: ForwardPass, rows: Iterable[int] | None = None, lens: Iterable[int] | None = None,
                whole: bool = True, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The data object of ``fp``. ``rows``/``lens``: the positions whose rows and logit lens are
    filled (None: all); ``whole``: with the text's own fields (else the rows alone, to merge into
    an object that has them); ``skip``: row fields left out."""
    cfg = fp.model.config
    T, L = len(fp.ids), cfg.n_layer
    rows = None if rows is None else sorted(set(rows))
    at = list(range(T)) if lens is None else sorted(set(lens))
    row = lambda a: _rows(a, rows)  # noqa: E731
    layers = []
    for tr, block in zip(fp.layers, fp.model.blocks):
        layer: dict[str, Any] = {name: row(getattr(tr, name)) for name in LAYER_ROWS if name not in skip}
        layer |= {name: [row(m) for m in getattr(tr, name)] for name in HEAD_ROWS if name not in skip}
        if whole:
            layer |= {name: getattr(tr, name) for name in ("ln1_mean", "ln1_std", "ln2_mean", "ln2_std")}
            layer["weights"] = Unit(tr.weights, tril=True)
            layer["ln1_weight"] = block.ln_1.weight.detach().float().numpy()
            layer["ln1_bias"] = block.ln_1.bias.detach().float().numpy()
        layers.append(layer)
    # layer 0's FFN on each token's embedding row alone: one small product a position
    alone = (np.stack([ffn0_of_token_alone(fp, t) for t in range(T)]) if rows is None
             else Sparse(T, {t: ffn0_of_token_alone(fp, t) for t in rows}))
    lens_rows: dict[str, list] = {name: [{} for _ in range(L)] for name in ("top_ids", "top_probs", "top_tokens", "next_ranks", "next_probs")}
    for t in at:
        for layer_i, row_ in enumerate(fp.lens(t)):
            lens_rows["top_ids"][layer_i][t] = [i for i, _ in row_]
            lens_rows["top_probs"][layer_i][t] = [p for _, p in row_]
            lens_rows["top_tokens"][layer_i][t] = [token_text(i) for i, _ in row_]
        for layer_i, (rank, p) in enumerate(fp.lens_next(t) or ()):
            lens_rows["next_ranks"][layer_i][t] = rank
            lens_rows["next_probs"][layer_i][t] = p
    # the lens of the token that came next has a row per position but the last
    lens = {name: [Sparse(T if name.startswith("top") else max(T - 1, 0), rows_) for rows_ in per_layer]
            for name, per_layer in lens_rows.items()}
    data: dict[str, Any] = {name: row(getattr(fp, name)) for name in ROW_FIELDS[:-1] if name not in skip}
    data["ffn0_alone"] = alone
    data["layers"] = layers
    data["lens"] = lens
    if whole:
        data |= {
            "ids": list(fp.ids),
            "tokens": [token_text(i) for i in fp.ids],
            "config": {"n_layer": L, "n_head": cfg.n_head, "d_model": cfg.d_model, "head_dim": cfg.head_dim,
                       "d_ff": 4 * cfg.d_model, "vocab_size": cfg.vocab_size, "block_size": cfg.block_size},
            "lnf_mean": fp.lnf_mean, "lnf_std": fp.lnf_std,
            "top_ids": fp.top_ids, "top_logits": fp.top_logits, "top_probs": fp.top_probs,
            "top_tokens": [[token_text(int(i)) for i in r] for r in fp.top_ids],
            "logsumexp": fp.logsumexp,
            "token_losses": [float(x) for x in fp.token_losses], "next_logits": fp.next_logits, "next_ranks": fp.next_ranks,
            "first_ranks": fp.first_layer_ranks() if T > 1 else np.zeros(0, dtype=np.int64),
            "loss": fp.loss,
            "uniform_loss": math.log(cfg.vocab_size),
            "opening_token": opening_token(fp),
            "hidden_max_diff": fp.hidden_max_diff,
        }
    return data


def view_answer(fp: ForwardPass, token: int, state: dict[str, int] | None = None, whole: bool = True) -> dict[str, Any]:
    """What the app hands Inside's view (playground/ui/inside.py): the pass's key, the rows and the
    logit lens at ``token`` (every layer's, so the view redraws any layer and head there alone),
    with the text's own fields when ``whole`` (a new text), and the ``state`` to show. At most one
    position's rows: about 35,000 numbers for the shipped model, whatever the text's length."""
    answer: dict[str, Any] = {"key": pass_key(fp), "data": inside_data(fp, rows=[token], lens=[token], whole=whole, skip=VIEW_SKIPS)}
    if state is not None:
        answer["state"] = dict(state)
    return answer
