"""Inside the model's data object in Python: a :class:`playground.inside.ForwardPass` in the shape
web/engine/inside.js gives in the browser (docs/browser.md, "The contract between the editions"),
so the one view (web/static/views/inside.js) can draw the app's numbers as it draws the static
edition's. The logit lens is the app's own, :meth:`ForwardPass.lens` and
:meth:`ForwardPass.lens_next` at every position; the opening token :func:`opening_token`'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .inside import ForwardPass, opening_token
from .tokens import token_text

__all__ = ["inside_data", "STAGE_FIELDS"]

STAGE_FIELDS = ("x_in", "ln1_mean", "ln1_std", "ln1_out", "q", "k", "v", "scores", "weights", "head_out", "concat",
                "attn_out", "x_mid", "ln2_mean", "ln2_std", "ln2_out", "fc", "gelu", "mlp_out", "x_out")


def _list(a: np.ndarray) -> list:
    return np.asarray(a).tolist()


def inside_data(fp: ForwardPass) -> dict[str, Any]:
    """The data object of ``fp``: plain lists and numbers, ready for ``json.dumps``."""
    cfg = fp.model.config
    T, L = len(fp.ids), cfg.n_layer
    lens = [fp.lens(t) for t in range(T)]  # [T][L][K] of (id, probability)
    nxt = [fp.lens_next(t) for t in range(T - 1)]  # [T-1][L] of (rank, probability)
    losses = [float(x) for x in fp.token_losses]
    return {
        "ids": list(fp.ids),
        "tokens": [token_text(i) for i in fp.ids],
        "config": {"n_layer": L, "n_head": cfg.n_head, "d_model": cfg.d_model, "head_dim": cfg.head_dim,
                   "d_ff": 4 * cfg.d_model, "vocab_size": cfg.vocab_size, "block_size": cfg.block_size},
        "tok_emb": _list(fp.tok_emb), "pos_emb": _list(fp.pos_emb), "x0": _list(fp.x0),
        "layers": [{name: _list(getattr(tr, name)) for name in STAGE_FIELDS} for tr in fp.layers],
        "lnf_mean": _list(fp.lnf_mean), "lnf_std": _list(fp.lnf_std), "h": _list(fp.h),
        "top_ids": _list(fp.top_ids), "top_logits": _list(fp.top_logits), "top_probs": _list(fp.top_probs),
        "top_tokens": [[token_text(int(i)) for i in row] for row in fp.top_ids],
        "logsumexp": _list(fp.logsumexp),
        "token_losses": losses, "next_logits": _list(fp.next_logits), "next_ranks": _list(fp.next_ranks),
        "lens": {
            "top_ids": [[[i for i, _ in lens[t][layer]] for t in range(T)] for layer in range(L)],
            "top_probs": [[[p for _, p in lens[t][layer]] for t in range(T)] for layer in range(L)],
            "top_tokens": [[[token_text(i) for i, _ in lens[t][layer]] for t in range(T)] for layer in range(L)],
            "next_ranks": [[nxt[t][layer][0] for t in range(T - 1)] for layer in range(L)],
            "next_probs": [[nxt[t][layer][1] for t in range(T - 1)] for layer in range(L)],
        },
        "loss": fp.loss,
        "uniform_loss": math.log(cfg.vocab_size),
        "opening_token": opening_token(fp),
    }
