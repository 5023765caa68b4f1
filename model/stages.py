"""The forward pass of model/gpt.py's GPT spelled out one stage at a time, as the Inside the model
lesson shows it: LayerNorm by hand, Q, K and V per head, the scaled and masked scores, the softmax
weights, the heads concatenated and projected, the residual adds, the FFN with GPT-2's GELU, ln_f
and the logits through the tied embedding E^T, and the logit lens (each layer's stream through the
output head). ``playground/inside.py`` computes the tab's pass with these functions and checks
their last hidden state against the model's own forward; the browser's Inside graphs
(export/inside_graph.py) are these same functions traced, on weights they take as inputs. Modules
and blocks are read by attribute only (``ln_1.weight``, ``attn.c_attn.bias``...), so either works."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.nn import functional as F

__all__ = ["LENS_K", "TOP_K", "layer_norm", "gelu_tanh", "output_head", "block_stages", "head_stages", "position_lens",
           "first_ranks_stages", "ffn_alone"]

LENS_K = 5  # next tokens the logit lens lists per layer
TOP_K = 10  # candidates listed at the output


def layer_norm(x: torch.Tensor, ln: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mean, std, out) of LayerNorm by hand: out = (x - mean) / sqrt(var + eps) * gamma + beta,
    the variance the biased one (divided by d_model), as torch.nn.LayerNorm."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    std = torch.sqrt(var + ln.eps)
    return mean[..., 0], std[..., 0], (x - mean) / std * ln.weight + ln.bias


def gelu_tanh(u: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))."""
    return 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u**3)))


def output_head(x: torch.Tensor, model: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """ln_f, then logits = h @ E^T with the embedding matrix E: (logits [T, V], mean, std, h).
    ``model`` is read by attribute only (``ln_f``, ``wte.weight``), as :func:`block_stages` reads a block."""
    mean, std, h = layer_norm(x, model.ln_f)
    return h @ model.wte.weight.T, mean, std, h


def block_stages(x: torch.Tensor, block: Any, causal: torch.Tensor, H: int, D: int) -> tuple[torch.Tensor, ...]:
    """One block's stages on the stream ``x`` [T, C], in playground.inside's ``LayerTrace`` field order (its
    last, ``x_out``, is the next block's input). ``block`` is read by attribute only (``ln_1``,
    ``attn.c_attn``, ``attn.c_proj``, ``ln_2``, ``mlp.c_fc``, ``mlp.c_proj``: weight, bias, eps), so
    the browser's graph (export/inside_graph.py) runs this same function on weights it takes as inputs."""
    T, C = x.shape[0], H * D
    x_in = x
    m1, s1, ln1 = layer_norm(x, block.ln_1)
    qkv = ln1 @ block.attn.c_attn.weight.T + block.attn.c_attn.bias  # [T, 3C]
    q, k, v = (m.reshape(T, H, D).transpose(0, 1) for m in qkv.split(C, dim=-1))  # [H, T, D] each
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # [H, T, T]
    weights = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    head_out = weights @ v  # [H, T, D]
    concat = head_out.transpose(0, 1).reshape(T, C)  # [T, C]: head h in columns h*D .. h*D+D-1
    attn_out = concat @ block.attn.c_proj.weight.T + block.attn.c_proj.bias
    x_mid = x_in + attn_out
    m2, s2, ln2 = layer_norm(x_mid, block.ln_2)
    fc = ln2 @ block.mlp.c_fc.weight.T + block.mlp.c_fc.bias
    act = gelu_tanh(fc)
    mlp_out = act @ block.mlp.c_proj.weight.T + block.mlp.c_proj.bias
    x_out = x_mid + mlp_out
    return (x_in, m1, s1, ln1, q, k, v, scores, weights, head_out, concat, attn_out, x_mid, m2, s2, ln2, fc, act, mlp_out, x_out)


def head_stages(x: torch.Tensor, model: Any, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The output's stages on the last block's stream ``x`` [T, C] for the tokens ``idx`` [T]:
    (ln_f mean, std, h, top ids, their logits and probabilities, logsumexp, the loss, logit and
    rank of every token that came next). ``model`` read by attribute, as :func:`output_head`."""
    logits, mf, sf, h = output_head(x, model)  # [T, V]
    # log_softmax as the loss of training and of the Compare tab computes it (float32: a
    # logsumexp over 50,257 terms rounds differently by up to 5e-5 nats).
    logp = F.log_softmax(logits, dim=-1)
    lse = logits[:, 0] - logp[:, 0]
    top_logits, top_ids = torch.topk(logits, TOP_K, dim=-1)
    nxt = idx[1:]
    next_logits = logits[:-1].gather(1, nxt[:, None])[:, 0]
    losses = -logp[:-1].gather(1, nxt[:, None])[:, 0]  # -ln p(the token that came next)
    ranks = (logits[:-1] > next_logits[:, None]).sum(-1) + 1
    return mf, sf, h, top_ids, top_logits, logp.gather(1, top_ids).exp(), lse, losses, next_logits, ranks


def position_lens(x: torch.Tensor, model: Any, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The logit lens at one position after every layer, as playground.inside's ``ForwardPass.lens`` and
    ``lens_next`` give it: ``x`` [L, C] the stream there after each layer, through
    ln_f and E^T, then (top LENS_K ids [L, K], their probabilities [L, K], the rank [L] and
    probability [L] of ``target`` [1], the token that came next; any id where none did). The
    browser's lens graph (export/inside_graph.py) is this function, traced."""
    logits = output_head(x, model)[0]  # [L, V]
    probs = F.softmax(logits, dim=-1)
    top_p, top_i = torch.topk(probs, LENS_K, dim=-1)
    score = logits.index_select(1, target)  # [L, 1]
    ranks = (logits > score).sum(-1) + 1  # 1 + the tokens scored strictly higher
    return top_i, top_p, ranks, probs.index_select(1, target)[:, 0]


def first_ranks_stages(x_out: torch.Tensor, model: Any, idx: torch.Tensor) -> torch.Tensor:
    """[T-1] the rank the logit lens after one layer (``x_out`` [T, C], layer 0's for the opening
    token) gives the token that came next, at every position at once: the opening rule's only
    need of the lens beyond one position."""
    logits = output_head(x_out[:-1], model)[0]  # [T-1, V]
    target = logits.gather(1, idx[1:, None])
    return (logits > target).sum(-1) + 1


def ffn_alone(rows: torch.Tensor, block: Any) -> torch.Tensor:
    """[N, C] what ``block``'s feed-forward network writes for ``rows`` [N, C] on their own (ln_2,
    c_fc, GELU, c_proj; no position, no attention): layer 0's on the token embeddings shows how
    much of its large add the token itself decides (playground.inside's ``ffn0_of_token_alone``)."""
    _, _, h = layer_norm(rows, block.ln_2)
    act = gelu_tanh(h @ block.mlp.c_fc.weight.T + block.mlp.c_fc.bias)
    return act @ block.mlp.c_proj.weight.T + block.mlp.c_proj.bias
