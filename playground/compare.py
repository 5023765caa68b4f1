"""Compare two models side by side: the same prompt's next-token candidates, the same word's
nearest neighbours, the same sentence's attention.

The model shown (the shipped one, or ``python app.py --model DIR``) is set beside a second one:
``--compare DIR``, or by default the untrained initialisation of the same architecture, which
always exists. "Before and after training" is the deep-learning notes' own lesson: at initialisation every
next token is about equally likely, so the loss is about ln 50257 ≈ 10.8 nats; training brings
it down and gives the embeddings and the attention their structure.

The plain functions of the other tabs do the work (``embedding_arithmetic``, ``attention``),
each called with ``model=`` for one side; playground/compare_data.py turns the results into the
data objects the view both editions share draws (web/views/compare.js), which also says what
the numbers mean (the losses against ln V, one log-scale probability axis, how sharp each head is).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model import GPT

from . import limits
from .attention import AttentionResult, SalientHead, attention, salient_head
from .embeddings import ArithmeticResult, embedding_arithmetic
from .generation.state import GeneratedStep, TokenChoice
from .initial import drawn_gpt
from .memo import Memo
from .resources import shipped_model
from .tokens import encode_prompt, token_text
from .validation import InputError, validate_int

__all__ = [
    "TRAINED",
    "UNTRAINED",
    "INIT_SEED",
    "TOP_K",
    "NEIGHBOURS_K",
    "EXAMPLE_PROMPT",
    "EXAMPLE_WORD",
    "EXAMPLE_SENTENCE",
    "Comparison",
    "untrained_like",
    "NextToken",
    "next_token",
    "compare_next_token",
    "compare_neighbours",
    "compare_attention",
    "opening_head",
    "compare_all",
]

TRAINED, UNTRAINED = "trained model", "untrained initialisation"  # the two sides' names by default
INIT_SEED = 0  # the untrained model is the same every start, in every test and in the static edition
TOP_K = 10
NEIGHBOURS_K = 8  # nearest tokens listed per side
# What the tab opens on, in both editions.
EXAMPLE_PROMPT = "Romeo.\nWhat say you to"  # in the corpus's style (see generation.EXAMPLE_PROMPTS)
EXAMPLE_WORD = "king"
EXAMPLE_SENTENCE = "The king is dead, long live the king"

# The untrained start of the model shown, drawn once: a pure function of (config, seed), kept apart
# from each comparison's second side (a folder may have been rewritten between two comparisons).
_untrained: Memo[tuple[tuple[tuple[str, Any], ...], int], GPT] = Memo(size=1)


def untrained_like(model: GPT, seed: int = INIT_SEED) -> GPT:
    """The untrained initialisation of ``model``'s architecture: GPT-2's rule filled from the
    generator the browser shares (:func:`playground.initial.drawn_gpt`), so the static edition
    draws the same weights for the same seed. Drawn once per (config, seed) and kept; the caller
    must not change it."""
    config = model.config
    return _untrained.get((tuple(asdict(config).items()), seed), lambda key: drawn_gpt(config, seed))


class Comparison:
    """The two sides the Compare tab sets beside each other: the model shown (the app's shared
    model), named ``shown_label``, and the model folder ``weights_dir`` (config.json +
    model.safetensors), named ``label`` (default: the folder's name); None: the untrained
    initialisation of the model shown. ``shown``: the model shown (default: the shipped one,
    :func:`~.resources.shipped_model`). The app makes one (``--compare DIR``) and hands it to the
    tab; the second side is read from its folder once, on first use, and kept while the
    comparison lives (a new Comparison reads the folder again: its files may have been rewritten)."""

    def __init__(self, weights_dir: str | Path | None = None, label: str | None = None, shown_label: str | None = None,
                 shown: GPT | None = None):
        self._shown = shown
        self.weights_dir = None if weights_dir is None else Path(weights_dir)
        self.label = label
        self.shown_label = shown_label or TRAINED
        self._other: Memo[Path | None, tuple[str, GPT]] = Memo(size=1)

    def _load_other(self, folder: Path | None) -> tuple[str, GPT]:
        if folder is None:
            return UNTRAINED, untrained_like(self.shown())
        from model import load_pretrained

        return self.label or folder.name, load_pretrained(folder)

    def shown(self) -> GPT:
        """The model shown."""
        return self._shown if self._shown is not None else shipped_model()

    def vocab_size(self) -> int:
        """The shown model's vocabulary: the uniform guess's loss is its logarithm."""
        return self.shown().config.vocab_size

    def other(self) -> tuple[str, GPT]:
        """(label, model) of the second side, loaded once."""
        return self._other.get(self.weights_dir, self._load_other)

    def sides(self) -> list[tuple[str, GPT]]:
        """(label, model) of the model shown, then of the second side."""
        return [(self.shown_label, self.shown()), self.other()]

    def labels(self) -> tuple[str, str]:
        """The names of the two sides, as the page shows them."""
        return self.shown_label, self.other()[0]


def _sides(comparison: Comparison | None) -> list[tuple[str, GPT]]:
    """The sides of ``comparison``; None: the model shown beside its untrained initialisation
    (drawn once for every such comparison, so a fresh one costs nothing)."""
    return (comparison or Comparison()).sides()


# --- next-token candidates ---------------------------------------------------------------------


@dataclass(frozen=True)
class NextToken:
    """One model's next-token distribution after a prompt, and its loss on the prompt itself."""

    label: str
    ids: list[int]
    step: GeneratedStep  # the top candidates (the greedy choice as "drawn")
    loss: float | None  # mean cross-entropy (nats) of each prompt token given those before it
    entropy: float  # of the next-token distribution, nats (ln V when uniform)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.label,
            "candidates": [{"id": c.token_id, "token": c.text, "probability": round(c.probability, 6)} for c in self.step.candidates],
            "prompt_loss": None if self.loss is None else round(self.loss, 4),
            "entropy": round(self.entropy, 4),
        }


@torch.inference_mode()
def next_token(prompt: Any, model: GPT, label: str, top_k: int = TOP_K) -> NextToken:
    """The ``top_k`` most probable next tokens of ``model`` after ``prompt`` (temperature 1)."""
    ids = encode_prompt(prompt, name="prompt", max_chars=limits.MAX_ATTENTION_CHARS, max_tokens=model.config.block_size)
    logits = model(torch.tensor([ids], dtype=torch.long)).logits[0].float()  # [T, V]
    logp = torch.log_softmax(logits, dim=-1)
    loss = float(-logp[:-1].gather(1, torch.tensor(ids[1:])[:, None]).mean()) if len(ids) > 1 else None
    p_next = logp[-1].exp()
    entropy = float(-(p_next * logp[-1]).sum())
    probs, top = torch.topk(p_next, top_k)
    cands = [TokenChoice(int(i), token_text(int(i)), float(p), float(p)) for p, i in zip(probs, top)]
    step = GeneratedStep(0, cands[0], cands)  # nothing is sampled: the model's probabilities (temperature 1)
    return NextToken(label, ids, step, loss, entropy)


def compare_next_token(prompt: Any, top_k: Any = TOP_K, comparison: Comparison | None = None) -> list[NextToken]:
    """Both models' next-token candidates (web/views/compare.js charts them on one log-scale axis);
    ``comparison``: which two (None: the model shown beside its untrained initialisation), as below."""
    top_k = validate_int(top_k, name="top_k", minimum=1, maximum=limits.MAX_NEIGHBOURS)
    return [next_token(prompt, model, label, top_k) for label, model in _sides(comparison)]


# --- nearest neighbours and attention, through the other tabs' functions -----------------------


def compare_neighbours(word: Any, top_k: Any = NEIGHBOURS_K, comparison: Comparison | None = None) -> list[tuple[str, ArithmeticResult]]:
    """The nearest tokens of ``word`` (or any expression of the Embeddings tab) in each model's
    embedding table."""
    return [(label, embedding_arithmetic(word, top_k, model=model)) for label, model in _sides(comparison)]


def compare_attention(text: Any, layer: Any = 0, head: Any = 0, comparison: Comparison | None = None) -> list[tuple[str, AttentionResult]]:
    """Each model's attention on ``text`` at ``layer``/``head``, clamped to each model's size (a
    compared model may have fewer layers or heads)."""
    out = []
    for label, model in _sides(comparison):
        cfg = model.config
        lay = validate_int(layer, name="layer", minimum=0, maximum=limits.MAX_COMPARE_INDEX)
        hd = validate_int(head, name="head", minimum=0, maximum=limits.MAX_COMPARE_INDEX)
        r = attention(text, min(lay, cfg.n_layer - 1), min(hd, cfg.n_head - 1), model=model, step_through=False)
        out.append((label, r))
    return out


def opening_head(text: Any, comparison: Comparison | None = None) -> SalientHead:
    """The shown model's clearest head on ``text`` (:func:`.attention.salient_head`): where the
    page opens, so that the first view shows a pattern training made (layer 0, head 0 of a
    trained model is a blur much like the untrained one's)."""
    r = attention(text, 0, 0, model=_sides(comparison)[0][1], step_through=False)
    return salient_head(r.weights, r.ids)


def compare_all(prompt: Any, word: Any, sentence: Any, comparison: Comparison | None = None) -> dict[str, Any]:
    """The three comparisons as JSON (the ``/compare`` endpoint): for each model, the prompt's
    top next tokens and loss, the word's nearest tokens, the sentence's attention (layer 0, head
    0, and the mean over layer 0's heads)."""
    comparison = comparison or Comparison()
    tokens = compare_next_token(prompt, comparison=comparison)
    try:
        neighbours = compare_neighbours(word, comparison=comparison)
    except InputError as err:
        raise InputError(f"word: {err}") from None
    atts = compare_attention(sentence, comparison=comparison)
    models = []
    for t, (_, n), (_, a) in zip(tokens, neighbours, atts):
        models.append(
            {
                **t.to_dict(),
                "neighbours": [{"token": x.token, "id": x.id, "similarity": round(x.similarity, 4)} for x in n.neighbours],
                "attention_tokens": a.tokens,
                "attention_layer0_head0": np.round(a.weights[0, 0], 4).tolist(),
                "attention_entropy": round(_mean_row_entropy(a.weights[0]), 4),
            }
        )
    return {"models": models, "uniform_loss": round(math.log(comparison.vocab_size()), 4)}


def _mean_row_entropy(w: np.ndarray) -> float:
    """Mean entropy (nats) of the attention rows of a layer [H, T, T]: how spread out the
    weights are (causal rows: a row t can spread over t+1 tokens at most)."""
    p = np.clip(w, 1e-12, 1.0)
    return float(-(w * np.log(p)).sum(axis=-1).mean())
