"""A decoder-only transformer (GPT) in one file, laid out like GPT-2.

References: "Attention Is All You Need" (Vaswani et al., 2017), GPT-2 (Radford et al., 2019),
nanoGPT. The ideas follow the project's four lessons (docs/lessons.md): token embedding + sinusoidal positional
encoding, masked multi-head self-attention (tril -> masked_fill -> softmax -> @ V; the fill is the most
negative finite float rather than -inf, so a fully padded row stays finite),
a position-wise feed-forward network and cross-entropy on the next token.

Shapes: B = batch, T = new positions, P = cached (past) positions, C = d_model,
H = n_head, D = head_dim = d_model / n_head, V = vocab_size.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn as nn
from torch.nn import functional as F

# One (key, value) pair per layer, each [B, H, P, D].
KVCache = tuple[tuple[torch.Tensor, torch.Tensor], ...]


@dataclass
class GPTConfig:
    vocab_size: int = 50257  # GPT-2's BPE vocabulary, <|endoftext|> included
    block_size: int = 256  # longest context the model is trained on (and can be run on)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    dropout: float = 0.0
    pos_encoding: str = "sinusoidal"  # "sinusoidal" (the lessons' formula) or "learned" (GPT-2)
    # Multiply the token embeddings by sqrt(d_model) before the positions are added, as "Attention
    # Is All You Need" (section 3.4) does: with GPT-2's N(0, 0.02) init the rows would otherwise be
    # ~40 times shorter than the sinusoidal table's sqrt(d_model / 2).
    scale_embedding: bool = False
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")
        if self.pos_encoding not in ("sinusoidal", "learned"):
            raise ValueError(f"pos_encoding must be 'sinusoidal' or 'learned', not {self.pos_encoding!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def from_json(cls, path: str | Path) -> "GPTConfig":
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def positional_encoding(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal table [n_positions, d_model] of "Attention Is All You Need".

    PE[pos, 2i] = sin(pos / base^(2i/d_model)),  PE[pos, 2i+1] = cos(pos / base^(2i/d_model)).
    An odd d_model gets its last (sine) column with no cosine partner.
    """
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # [N, 1]
    # exp(-2i * ln(base) / d_model) == 1 / base^(2i/d_model), computed in float64 for exact tables
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return pe.float()


def causal_mask(T: int, S: int, attention_mask: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """Which keys each query may attend to: [B or 1, 1, T, S] bool, S = P + T.

    Query t sits at position P + t of the sequence and sees keys 0..P+t (the shifted tril).
    ``attention_mask`` [B, S] (1 = token, 0 = padding, Hugging Face's convention) also hides
    padded keys, so a left-padded row attends exactly as it would alone.
    """
    mask = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)[None, None]
    if attention_mask is not None:
        mask = mask & attention_mask.bool()[:, None, None, :]
    return mask


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention with an optional key/value cache."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.head_dim = config.head_dim
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)  # W_Q, W_K, W_V in one matmul
        self.c_proj = nn.Linear(config.d_model, config.d_model)  # W_O
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.dropout = config.dropout

    def forward(
        self,
        x: torch.Tensor,  # [B, T, C]
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
        mask: torch.Tensor | None = None,  # [B or 1, 1, T, P+T] bool, True where a query may look
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], torch.Tensor | None]:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # [B, T, C] -> [B, H, T, D]: each head attends in its own D-dimensional subspace
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)  # [B, H, P+T, D]
            v = torch.cat([past[1], v], dim=2)
        present = (k, v)

        weights = None
        if mask is None and not output_attentions:
            # Fast path for training: the fused kernel computes exactly the masked softmax below.
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
            )
        else:
            if mask is None:
                mask = causal_mask(T, k.size(2), None, x.device)
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))  # [B, H, T, S]
            # The most negative finite float rather than -inf: exp() of it is exactly 0 next to any
            # visible key, and a row with nothing visible (a padding query) stays finite.
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            weights = F.softmax(scores, dim=-1)  # rows sum to 1, zeros where masked
            y = self.attn_dropout(weights) @ v  # [B, H, T, D]
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # concatenate the heads
        return self.resid_dropout(self.c_proj(y)), present, (weights if output_attentions else None)


class FeedForward(nn.Module):
    """Position-wise feed-forward network: d_model -> 4*d_model -> d_model with tanh-GELU."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's "gelu_new"
        self.c_proj = nn.Linear(4 * config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + ffn(ln(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = FeedForward(config)

    def forward(self, x, past=None, mask=None, output_attentions=False):
        a, present, weights = self.attn(self.ln_1(x), past, mask, output_attentions)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, present, weights


class GPTOutput(NamedTuple):
    """What :meth:`GPT.forward` returns, whatever its flags (the fields a flag did not ask for are None)."""

    logits: torch.Tensor | None  # [B, T, V]; None with head=False
    loss: torch.Tensor | None  # cross-entropy with the targets, when given
    past_key_values: KVCache | None  # use_cache: per layer (key, value), each [B, H, P+T, D]
    attentions: tuple[torch.Tensor, ...] | None  # output_attentions: per layer [B, H, T, P+T]
    hidden: torch.Tensor | None = None  # [B, T, C]: the last hidden state (after ln_f), the head's input


def init_rule(name: str, config: GPTConfig) -> tuple[str, float]:
    """How parameter ``name`` of a fresh GPT starts (GPT-2's initialisation): ``("normal", std)``,
    ``("zeros", 0.0)`` or ``("ones", 0.0)``. Weights and embeddings N(0, 0.02); the projections
    that write into the residual stream (``c_proj``) N(0, 0.02 / sqrt(2 n_layer)), so the stream's
    variance does not grow with depth; biases 0; LayerNorm's gain 1 and shift 0. One rule for
    torch's draws here and for the draws the browser repeats (playground/initial.py)."""
    leaf = name.rsplit(".", 1)[-1]
    if name.startswith("ln_f.") or ".ln_" in name:
        return ("ones", 0.0) if leaf == "weight" else ("zeros", 0.0)
    if leaf == "bias":
        return ("zeros", 0.0)
    if name.endswith("c_proj.weight"):
        return ("normal", 0.02 / math.sqrt(2 * config.n_layer))
    return ("normal", 0.02)


class GPT(nn.Module):
    def __init__(self, config: GPTConfig, generator: torch.Generator | None = None) -> None:
        """``generator``: where the initial weights are drawn from (default: torch's global random
        state); a private one makes the initialisation independent of other threads' draws."""
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        if config.pos_encoding == "learned":
            self.wpe = nn.Embedding(config.block_size, config.d_model)
        else:
            # A buffer, not a parameter: the table is fixed by the formula. Not saved with the
            # weights (persistent=False) because it is recomputed from the config.
            self.register_buffer("pe", positional_encoding(config.block_size, config.d_model), persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as GPT-2
        for name, p in self.named_parameters():  # the tied head once, as the table it shares
            kind, std = init_rule(name, config)
            if kind == "normal":
                nn.init.normal_(p, mean=0.0, std=std, generator=generator)
            else:
                nn.init.zeros_(p) if kind == "zeros" else nn.init.ones_(p)

    def num_parameters(self, non_embedding: bool = False) -> int:
        n = sum(p.numel() for p in self.parameters())  # the tied head is counted once
        if non_embedding:
            n -= self.wte.weight.numel()
            if self.config.pos_encoding == "learned":
                n -= self.wpe.weight.numel()
        return n

    def position_table(self) -> torch.Tensor:
        """The [block_size, d_model] table added to the token embeddings."""
        return self.wpe.weight if self.config.pos_encoding == "learned" else self.pe

    def embed(self, idx: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """Where the residual stream starts: token embedding (times sqrt(d_model) with
        ``scale_embedding``) plus the position's row of :meth:`position_table`. [B, T, C]"""
        tok = self.wte(idx)
        if self.config.scale_embedding:
            tok = tok * math.sqrt(self.config.d_model)
        return tok + self.position_table()[position_ids]

    def forward(
        self,
        idx: torch.Tensor,  # [B, T] token ids
        targets: torch.Tensor | None = None,  # [B, T] next-token ids
        past_key_values: KVCache | None = None,
        attention_mask: torch.Tensor | None = None,  # [B, P+T]: 1 = token, 0 = padding
        position_ids: torch.Tensor | None = None,  # [B, T] position of each new token
        use_cache: bool = False,
        output_attentions: bool = False,
        head: bool = True,
    ) -> GPTOutput:
        """One :class:`GPTOutput` (logits, loss, cache, attention weights, last hidden state);
        ``use_cache`` and ``output_attentions`` fill their fields, as in transformers.

        ``head=False`` skips the output head (``logits`` is None) and leaves ``hidden``, so that
        training can score a vocabulary subset through ``forward``, the one call
        DistributedDataParallel synchronises gradients for.

        ``attention_mask`` and ``position_ids`` follow Hugging Face: with neither, positions
        continue after the cache (P, P+1, ...); with only a mask, each row counts its own tokens
        (a left-padded row starts at 0 where its text starts), as ``generate`` in transformers does.
        """
        B, T = idx.shape
        past_len = 0 if past_key_values is None else past_key_values[0][0].size(2)
        if position_ids is None and attention_mask is None:
            position_ids = torch.arange(past_len, past_len + T, device=idx.device).unsqueeze(0)  # [1, T]
            n_positions = past_len + T
        else:
            if position_ids is None:
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]
            n_positions = None  # read from the tensor below, only when sizes are concrete
        # Checked only when sizes are concrete, so that a traced export keeps them symbolic.
        if not torch.jit.is_tracing() and not torch.compiler.is_compiling():
            if n_positions is None:
                n_positions = int(position_ids.max()) + 1 if position_ids.numel() else 0
            if n_positions > self.config.block_size:
                raise ValueError(
                    f"sequence of {n_positions} positions exceeds block_size={self.config.block_size}"
                )
        x = self.embed(idx, position_ids)  # [B, T, C]
        x = self.drop(x)

        # The fused causal kernel (mask None) serves a plain pass; a cache, padding or the weights
        # need the explicit mask.
        mask = None
        if past_key_values is not None or attention_mask is not None or output_attentions:
            mask = causal_mask(T, past_len + T, attention_mask, idx.device)
        presents, attentions = [], []
        for i, block in enumerate(self.blocks):
            past = None if past_key_values is None else past_key_values[i]
            x, present, weights = block(x, past, mask, output_attentions)
            presents.append(present)
            attentions.append(weights)
        x = self.ln_f(x)  # [B, T, C]: the last hidden state
        logits = self.lm_head(x) if head else None  # [B, T, V]

        loss = None
        if targets is not None:
            if logits is None:
                raise ValueError("targets need the output head: call forward with head=True")
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return GPTOutput(
            logits,
            loss,
            tuple(presents) if use_cache else None,
            tuple(attentions) if output_attentions else None,
            x,
        )

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Reference sampler with the key/value cache; temperature 0 means greedy."""
        idx = idx[:, -self.config.block_size :]
        out = self(idx, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1, :]
        for _ in range(max_new_tokens):
            if temperature == 0:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
                nxt = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
            if past[0][0].size(2) >= self.config.block_size:
                # Context full: slide the window and recompute (rare for a demo's lengths).
                out = self(idx[:, -self.config.block_size :], use_cache=True)
            else:
                out = self(nxt, past_key_values=past, use_cache=True)
            past, logits = out.past_key_values, out.logits[:, -1, :]
        return idx
