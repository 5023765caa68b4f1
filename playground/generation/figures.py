"""The candidates chart: the top next tokens of one generated step as horizontal bars, the
model's probability beside the one the token was drawn with, and the sentence under it."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from ..next_token import DRAWN_COLOUR, MODEL_COLOUR, SAMPLED_COLOUR, SamplingSettings, probability_axis
from ..plots import PERCENT_HOVER, base_layout_dict, percent
from ..tokens import visible_whitespace
from .state import TOP_CANDIDATES, GeneratedStep, GenerationState, drawn_rank

__all__ = ["candidates_figure", "step_caption", "step_figure"]

_OUTSIDE_TEXT = {"textposition": "outside", "cliponaxis": False, "constraintext": "none", "textfont": {"size": 11}}
_TOKEN_AXIS = {"automargin": True, "categoryorder": "array", "tickfont": {"family": "monospace", "size": 11}}


def _label(token_id: int, text: str) -> str:
    return f"{visible_whitespace(text)}  #{token_id}"


def _empty_figure() -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text="Generate some text, then pick a step", showarrow=False, font={"size": 15})
    fig.update_layout(xaxis={"visible": False}, yaxis={"visible": False}, height=300, template="plotly_white")
    return fig


def candidates_figure(step: GeneratedStep | None, *, settings: SamplingSettings | None = None, title: str | None = None) -> go.Figure:
    """Horizontal bars: the top next-token candidates of one step, as the model rates them
    (temperature 1, grey) and in the distribution the token was drawn from (``settings``:
    temperature, top-k, top-p; indigo), the drawn token in orange, with its own legend entry.
    A token drawn from outside the top candidates gets a bar of its own, with the sampling
    probability the engine reported for it. ``title`` replaces the step's own; no step: an
    empty chart that says what to do."""
    if step is None:
        return _empty_figure()
    drawn_id = step.token.token_id
    drawn_p = step.token.sample_probability
    cands = list(step.candidates)
    if drawn_rank(step) is None:  # a token drawn from outside the top list still shows
        cands.append(step.token)
    cands = cands[::-1]  # plotly draws the first bar at the bottom
    labels = [_label(c.token_id, c.text) for c in cands]
    others = [(label, c) for label, c in zip(labels, cands) if c.token_id != drawn_id]
    drawn_label = next(label for label, c in zip(labels, cands) if c.token_id == drawn_id)

    def shown(p: float | None) -> str:
        return percent(p) if p is not None else "not reported"

    traces = [
        {
            "type": "bar", "x": [c.probability for c in cands], "y": labels, "orientation": "h", "name": "model (temperature 1)",
            "marker": {"color": MODEL_COLOUR}, "offsetgroup": "model",
            "hovertemplate": f"%{{y}}<br>model probability %{{x:{PERCENT_HOVER}}}<extra></extra>",
        },
        # Two traces in one bar slot: the legend keeps one colour per meaning at every step (one
        # trace coloured bar by bar took its legend colour from whichever bar came first).
        {
            "type": "bar", "x": [c.sample_probability for _, c in others], "y": [label for label, _ in others], "orientation": "h",
            "name": "drawn from" + (f" ({settings.label()})" if settings else " (temperature, top-k, top-p)"),
            "marker": {"color": SAMPLED_COLOUR}, "offsetgroup": "sampled", "text": [shown(c.sample_probability) for _, c in others],
            **_OUTSIDE_TEXT, "hovertemplate": f"%{{y}}<br>probability of being drawn %{{x:{PERCENT_HOVER}}}<extra></extra>",
        },
        {
            "type": "bar", "x": [drawn_p], "y": [drawn_label], "orientation": "h", "name": "the token drawn",
            "marker": {"color": DRAWN_COLOUR}, "offsetgroup": "sampled", "text": [shown(drawn_p)],
            **_OUTSIDE_TEXT, "hovertemplate": f"%{{y}}: the token drawn<br>probability of being drawn %{{x:{PERCENT_HOVER}}}<extra></extra>",
        },
    ]
    peak = max([c.probability for c in cands] + [c.sample_probability or 0.0 for c in cands] + [drawn_p or 0.0])
    p = f" (p = {percent(drawn_p)})" if drawn_p is not None else ""
    layout = base_layout_dict(
        title or f"Step {step.index + 1}: drew “{visible_whitespace(step.token.text)}”{p}", height=max(320, 34 * len(cands) + 150)
    )
    axis = probability_axis(peak)
    layout.update(
        barmode="group", bargap=0.22, margin={**layout["margin"], "l": 10, "r": 20},
        xaxis={**axis, "title": {"text": axis["title"]}},  # the title as plotly writes it, not its shorthand
        yaxis={**_TOKEN_AXIS, "categoryarray": labels},
    )
    # Plotly's JSON as plotly itself writes it (tests/lessons/test_tab_next_token.py compares), without
    # its validating setters: many learners' generations end together, each drawing this chart.
    return go.Figure({"data": traces, "layout": layout}, _validate=False)


def step_caption(step: GeneratedStep, settings: SamplingSettings) -> str:
    """One sentence under the chart: where the drawn token stood among the model's candidates,
    and why a token other than the most likely can come out."""
    rank = drawn_rank(step)
    if rank == 1:
        return "The token drawn is the model's most likely one."
    where = f"the model's number {rank} candidate" if rank else f"from outside the model's top {TOP_CANDIDATES}"
    why = (
        "Sampling draws at random from the distribution, so a less likely token can come out even at a low "
        "temperature; only temperature 0 (greedy) or top-k 1 always take the most likely one."
    )
    return f"The token drawn is {where}. {why}" if not settings.greedy else f"The token drawn is {where}."


def step_figure(state: GenerationState | None, sample: Any, step_number: Any) -> tuple[go.Figure, str]:
    """The candidates chart and its caption for ``step_number`` (1-based) of ``sample``, clamped
    to what exists."""
    if state is None or not state.steps or not any(state.steps):
        return _empty_figure(), ""
    s = min(max(int(sample or 0), 0), len(state.steps) - 1)
    steps = state.steps[s]
    if not steps:
        return _empty_figure(), ""
    i = min(max(int(step_number or 1), 1), len(steps)) - 1
    step, settings = steps[i], state.params.sampling
    return candidates_figure(step, settings=settings), step_caption(step, settings)
