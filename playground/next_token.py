"""The next-token distribution and what the sampling settings do to it (the Text generation tab).

The model gives one probability per token of the vocabulary; temperature T reshapes it to
softmax(logits / T) (T = 0: all of it on the most likely token, greedy), top-k keeps the k most
likely tokens, top-p the smallest set whose probabilities add up to p. The distribution is
computed once per context with the app's own onnxruntime engine, then reshaped for any setting
with the engine's own sampling code (``runtime.sampling``), so what the page shows is what the
engine draws from. No Gradio here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from runtime.batching import Batch, Request
from runtime.params import SamplingParams, check_prompt
from runtime.sampling import sampling_distribution

from . import limits
from .plots import PERCENT_HOVER, base_layout, percent
from .tokens import token_text, visible_whitespace
from .validation import validate_float, validate_int

__all__ = [
    "SHOWN",
    "SamplingSettings",
    "NextTokenDistribution",
    "validate_sampling",
    "next_token_distribution",
    "distribution_figure",
    "probability_axis",
]

SHOWN = 12  # tokens drawn in the live chart

# Colours shared with the candidates chart (generation/figures.py).
MODEL_COLOUR = "rgba(148, 163, 184, 0.6)"
SAMPLED_COLOUR = "#6366f1"
DRAWN_COLOUR = "#f97316"


@dataclass(frozen=True)
class SamplingSettings:
    """Validated temperature, top-k and top-p, with the conventions of transformers, OpenAI's
    API, llama.cpp and Ollama: temperature 0 is greedy, top-k 0 and top-p 1 cut nothing."""

    temperature: float
    top_k: int
    top_p: float

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def engine_args(self, vocab_size: int) -> dict[str, Any]:
        """The engine's arguments: None where nothing is cut."""
        return {
            "temperature": self.temperature,
            "top_k": None if self.top_k == 0 or self.top_k >= vocab_size else self.top_k,
            "top_p": None if self.top_p >= 1.0 else self.top_p,
        }

    def label(self) -> str:
        if self.greedy:
            return "temperature 0 (greedy)"
        cuts = [f"top-k {self.top_k}" if self.top_k else "", f"top-p {self.top_p:g}" if self.top_p < 1 else ""]
        return ", ".join([f"temperature {self.temperature:g}", *[c for c in cuts if c]])


def validate_sampling(temperature: Any, top_k: Any, top_p: Any, *, vocab_size: int) -> SamplingSettings:
    """Check the three settings (raising ``InputError`` with what is accepted)."""
    return SamplingSettings(
        validate_float(temperature, name="temperature", minimum=limits.MIN_TEMPERATURE, maximum=limits.MAX_TEMPERATURE),
        validate_int(top_k, name="top_k", minimum=limits.MIN_TOP_K, maximum=vocab_size),
        validate_float(top_p, name="top_p", minimum=limits.MIN_TOP_P, maximum=limits.MAX_TOP_P, min_inclusive=False),
    )


@dataclass(frozen=True)
class NextTokenDistribution:
    """What the model predicts after ``context_ids``: a log-probability per token (temperature 1)."""

    context_ids: list[int]
    log_probs: np.ndarray = field(repr=False)  # [V] float64

    @property
    def vocab_size(self) -> int:
        return len(self.log_probs)

    def probabilities(self, settings: SamplingSettings | None = None) -> np.ndarray:
        """[V]: the model's probabilities, or the distribution the engine draws from with
        ``settings`` (temperature, then top-k, then top-p, as ``runtime.sampling`` does)."""
        if settings is None:
            return np.exp(self.log_probs)
        args = settings.engine_args(self.vocab_size)
        # softmax(log p / T) = softmax(logits / T): the log-softmax differs from the logits by a constant.
        return sampling_distribution(self.log_probs[None, :], args["temperature"], args["top_k"], args["top_p"])[0]


def next_token_distribution(context_ids: list[int], engine: Any) -> NextTokenDistribution:
    """One forward pass of the engine on ``context_ids`` (the last ``block_size`` of them, as the
    engine reads a longer context): the full next-token distribution, read in exactly as a
    generation reads its prompt (``runtime.batching.Batch``: the same padding, the same bits),
    as a log-softmax in float64. (Asking a stream for every candidate would make 50,257 objects
    in Python, where this takes one graph call.)"""
    ids = check_prompt(list(context_ids), engine.vocab_size, engine.eot_id)
    request = Request.new(ids, SamplingParams(1, n_candidates=None), engine.block_size)
    Batch(engine).add(request)
    logits = request.logits[0].astype(np.float64)
    shifted = logits - logits.max()
    log_probs = shifted - np.log(np.exp(shifted).sum())
    return NextTokenDistribution(list(context_ids[-engine.block_size :]), log_probs)


def distribution_figure(dist: NextTokenDistribution, settings: SamplingSettings, *, shown: int = SHOWN) -> go.Figure:
    """The live chart under the sampling settings: the ``shown`` most likely next tokens, their
    probability from the model (grey) and in the distribution the settings give (indigo), with
    how many tokens can be drawn at all and the chance of a token other than the most likely."""
    model_p = dist.probabilities()
    sampled_p = dist.probabilities(settings)
    top = np.argsort(-model_p, kind="stable")[:shown][::-1]  # plotly draws the first bar at the bottom
    labels = [f"{visible_whitespace(token_text(int(t)))}  #{int(t)}" for t in top]
    fig = go.Figure()
    fig.add_bar(
        x=model_p[top], y=labels, orientation="h", name="model (temperature 1)", marker_color=MODEL_COLOUR,
        hovertemplate=f"%{{y}}<br>model probability %{{x:{PERCENT_HOVER}}}<extra></extra>",
    )
    fig.add_bar(
        x=sampled_p[top], y=labels, orientation="h", name="drawn from, with these settings", marker_color=SAMPLED_COLOUR,
        text=[percent(p) if p > 0 else "cut" for p in sampled_p[top]], textposition="outside", cliponaxis=False,
        constraintext="none", textfont={"size": 11},
        hovertemplate=f"%{{y}}<br>probability with these settings %{{x:{PERCENT_HOVER}}}<extra></extra>",
    )
    n_possible = int(np.count_nonzero(sampled_p))
    other = float(1.0 - sampled_p[int(top[-1])])
    title = f"Next token, {settings.label()}: {n_possible:,} token{'s' if n_possible != 1 else ''} can be drawn"
    if settings.greedy or n_possible == 1:
        title += "; always the most likely"
    else:
        title += f"; {percent(other)} of draws pick another than the most likely"
    base_layout(fig, title, height=max(300, 26 * len(top) + 150))
    peak = float(max(model_p[top].max(), sampled_p[top].max()))
    fig.update_layout(
        barmode="group", bargap=0.2, margin={"l": 10, "r": 20},
        xaxis=probability_axis(peak), yaxis={"automargin": True, "tickfont": {"family": "monospace", "size": 11}},
    )
    return fig


def probability_axis(peak: float) -> dict:
    """An x axis of probabilities with room right of the longest bar for its label (a bar near
    100 % had its label cut off)."""
    if peak > 0.8:
        return {"range": [0, 1.22], "tickvals": [0, 0.25, 0.5, 0.75, 1.0], "tickformat": ".0%", "title": "probability"}
    # Scaled to the peak, however small: an untrained model's bars (1/50,257 = 0.002 % each) fill
    # the axis, equal, with ticks that say how small they are.
    return {"range": [0, peak * 1.35], "tickformat": ".2~p", "title": "probability"}
