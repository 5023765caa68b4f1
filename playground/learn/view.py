"""What the Watch it learn tab shows: the loss chart (the first steps magnified on a log-scale
step axis, the reference lines, the learner's earlier runs in grey), the counters, the samples
(step 0 beside the latest), the table of the learner's runs and the sentences under them."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

import plotly.graph_objects as go

from model.train import lr_at

from .refs import References
from .run import (
    BATCH_SIZE, RECENT_STEPS, SAMPLE_EVERY, SIZES, SKEW, VAL_WINDOWS, LearnSettings, RunState, describe, seconds_text,
    train_config,
)
from ..plots import base_layout

__all__ = [
    "intro_words", "READING_WORDS", "REFERENCE_STYLE", "LOSS_COLOUR", "HISTORY_RUNS", "loss_figure", "stats_cards", "samples_html", "runs_table",
    "status_markdown", "val_sample_words",
]

REFERENCE_STYLE = {  # reference line -> (colour, dash)
    "ln V (even guess)": ("#9ca3af", "dot"),
    "unigram": ("#f59e0b", "dash"),
    "bigram": ("#10b981", "dash"),
    "shipped model": ("#6366f1", "dashdot"),
}
LOSS_COLOUR = "#dc2626"
HISTORY_COLOUR = "#9ca3af"
HISTORY_RUNS = 3  # earlier runs drawn in grey (the table lists more)
STEP_TICKS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


def intro_words(where: str, how_long: str = "") -> str:
    """The tab's first paragraph (Markdown), for a run trained ``where`` ("on this server's CPU",
    "in this browser") in about ``how_long``."""
    d, block = LearnSettings(), SIZES["tiny"].block_size
    return (
        f"Here a GPT starts from random weights and learns Shakespeare while you watch, {where}: {d.steps:,} steps"
        f"{', about ' + how_long if how_long else ''}. Its "
        "vocabulary is the **84 characters** of the training plays, so a model that knows nothing and guesses evenly "
        "scores **ln 84 = 4.43** nats per character (−ln(1/n) for n equally likely characters). Each step draws "
        f"{BATCH_SIZE} windows of {block} characters at random places in the training plays, scores its guess of every next "
        "character with cross-entropy, and nudges every weight downhill (the same step as `python -m model.train`). The "
        "dashed lines are what simpler models score on two plays it never trains on: the unigram model (each "
        "character's frequency), the bigram model (the frequency after the previous character), and the shipped model, "
        "converted from nats per GPT-2 token to nats per character."
    )


READING_WORDS = (
    "Each step's loss (the red curve) is measured on that step's batch before the model updates on it: windows "
    "drawn at random from the training plays. Early on they are text the model has not trained on; a run of a few "
    "hundred steps sees a small part of the plays, but later batches do overlap earlier ones, so the honest score of "
    "new text is the held-out one, measured when the run ends on a sample of windows from the two held-out plays. "
    "The step axis is logarithmic, so the first ten steps take as much room as the next ninety: try the skewed start "
    "with the same seed, and watch it start far above ln V and spend its first steps coming back down to it, the "
    "hockey stick. Your last runs stay on the chart in grey and in the table: change one setting, press Start again, "
    "and compare."
)


def _x(step: int) -> int:
    """Where step ``step`` sits on the log-scale axis: step + 1 (a log axis has no 0), so step 0,
    the untrained model's loss, is the axis's left end and the first steps take a third of its width."""
    return step + 1


def _unit(kind: str) -> str:
    return "character" if kind == "char" else "token"


def loss_figure(
    state: RunState | None,
    history: Sequence[RunState] = (),
    refs: References | None = None,
    steps: int | None = None,
    height: int = 420,
) -> go.Figure:
    """The loss of every step so far on a log-scale step axis (the hockey stick and the fast first
    fall take a third of the width), the reference lines (``refs`` before a run has its own), the
    last :data:`HISTORY_RUNS` of ``history`` in grey. No legend: each line is labelled at its end."""
    fig = go.Figure()
    r = state.refs if state is not None and state.refs is not None else refs
    kind = state.kind if state is not None else "char"
    target = state.settings.steps if state is not None else (steps or LearnSettings().steps)
    earlier = [run for run in history if run is not state and run.losses][-HISTORY_RUNS:]
    x_end = _x(max([target, *(run.losses[-1][0] for run in earlier)]))
    for i, run in enumerate(earlier):
        fig.add_trace(go.Scatter(
            x=[_x(p[0]) for p in run.losses], y=[p[1] for p in run.losses], mode="lines",
            name=f"earlier run: {describe(run.settings)}", line={"color": HISTORY_COLOUR, "width": 1},
            opacity=0.45 + 0.5 * (i + 1) / len(earlier), customdata=[p[0] for p in run.losses],
            hovertemplate=f"earlier run ({html.escape(describe(run.settings))})<br>step %{{customdata}}: loss %{{y:.3f}}<extra></extra>",
        ))
    if r is not None:
        for (name, value), (colour, dash) in zip(r.lines().items(), REFERENCE_STYLE.values()):
            fig.add_trace(go.Scatter(
                x=[1, x_end], y=[value, value], mode="lines", name=f"{name} {value:.2f}",
                line={"color": colour, "dash": dash, "width": 1.5}, hovertemplate=f"{name}: {value:.3f}<extra></extra>",
            ))
            fig.add_annotation(
                x=1, xref="paper", xanchor="right", y=value, yanchor="bottom", text=f"{name.split(' (')[0]} {value:.2f}",
                showarrow=False, font={"size": 11, "color": colour},
            )
    losses = state.losses if state is not None else []
    fig.add_trace(go.Scatter(
        x=[_x(p[0]) for p in losses], y=[p[1] for p in losses], mode="lines", name="training loss",
        line={"color": LOSS_COLOUR, "width": 1.5}, customdata=[p[0] for p in losses],
        hovertemplate="step %{customdata}: loss %{y:.3f} (this step's batch)<extra></extra>",
    ))
    unit = _unit(kind)
    recent = state.recent_loss() if state is not None else None
    if not losses:
        title = "Loss while it learns: the lines to beat" if r is not None else "Loss while it learns"
    else:
        title = (
            f"Loss while it learns: step {state.step:,}, mean of the last {min(RECENT_STEPS, len(losses))} "
            f"steps {recent:.2f} nats/{unit}"
        )
    base_layout(fig, title, height=height, xaxis_title="step (log scale: the first steps magnified)",
                yaxis_title=f"cross-entropy (nats/{unit})")
    top = max([*(p[1] for p in losses[:1]), *(run.losses[0][1] for run in earlier), r.ln_v if r else 5.0]) + 0.4
    fig.update_yaxes(range=[0, top], rangemode="tozero")
    ticks = [t for t in STEP_TICKS if _x(t) <= x_end]
    fig.update_xaxes(
        type="log", range=[0, math.log10(x_end)], tickmode="array", tickvals=[_x(t) for t in ticks],
        ticktext=[f"{t:,}" for t in ticks],
    )
    fig.update_layout(showlegend=False, hovermode="closest")
    return fig


def stats_cards(state: RunState | None) -> list[tuple[str, str]]:
    """(value, label) of the run's counters: step, tokens seen, tokens/s, loss now, time."""
    if state is None or state.status in ("waiting",):
        return [("-", "steps"), ("-", "tokens seen"), ("-", "tokens / s"), ("-", f"loss now (mean of last {RECENT_STEPS} steps)"), ("-", "seconds")]
    recent = state.recent_loss()
    return [
        (f"{state.step:,} / {state.settings.steps:,}", "steps"),
        (f"{state.tokens:,}", "tokens seen"),
        (f"{state.tokens_per_s:,.0f}", "tokens / s"),
        ("-" if recent is None else f"{recent:.2f}", f"loss now (mean of last {RECENT_STEPS} steps)"),
        (seconds_text(state.elapsed_s), "seconds"),
    ]


BREAK_RUN = 3  # line breaks in a row from which a sample shows them as a count


def visible_sample(text: str) -> str:
    """A sample as HTML, its runs of line breaks made visible: a confidently wrong model (the
    skewed start) writes nothing but line breaks, which would show as an empty box; a run of
    :data:`BREAK_RUN` or more becomes one marked "↵ ×N" and one line break."""
    parts = re.split(f"(\n{{{BREAK_RUN},}})", text)
    return "".join(
        f'<span class="learn-breaks" title="{len(part)} line breaks in a row">↵ ×{len(part)}</span>\n' if i % 2 else html.escape(part)
        for i, part in enumerate(parts)
    )


ONE_CHARACTER = "nothing but line breaks: the model is sure of one character, and wrong"


def _sample(step: int, text: str, label: str) -> str:
    why = f' <span class="learn-breaks-why">({ONE_CHARACTER})</span>' if text and set(text) == {"\n"} else ""
    return f'<div class="gen-sample"><div class="gen-sample-title">{label}</div>{visible_sample(text).rstrip()}{why}</div>'


def samples_html(state: RunState | None, max_older: int = 4) -> str:
    """Step 0's sample (random weights) beside the latest one, then the ones between, newest first."""
    if state is None or not state.samples:
        return f'<div class="gen-output gen-empty">Samples of the model\'s text appear here: step 0\'s beside the latest (one every {SAMPLE_EVERY} steps).</div>'
    first, latest = state.samples[0], state.samples[-1]
    pair = [_sample(*first, "step 0: random weights")]
    if latest is not first:
        pair.append(_sample(*latest, f"step {latest[0]:,}: the latest"))
    older = [p for p in state.samples[1:-1]][::-1][:max_older]
    rest = "".join(_sample(step, text, f"step {step:,}") for step, text in older)
    return (
        '<div class="gen-output learn-samples">'
        '<div class="learn-sample-pair" style="display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:12px">'
        f'{"".join(pair)}</div>{rest}</div>'
    )


def val_sample_words(size: str) -> str:
    """The held-out score's sample, in words: 64 windows of 64 characters."""
    block = SIZES[size].block_size
    return f"{VAL_WINDOWS} windows of {block} characters ({VAL_WINDOWS * block:,}) from the held-out plays"


def _unscored(run: RunState) -> str:
    """The held-out cell of a run without a score: why (a stopped run frees the CPU at once)."""
    if run.running:
        return "at the end"
    return "not scored: stopped" if run.stop_reason == "stopped" else "-"


def runs_table(runs: Sequence[RunState]) -> str:
    """The learner's runs, newest first: settings, steps, the final training loss (mean of the
    last steps) and the held-out loss (on a sample of the held-out plays)."""
    ended = [run for run in runs if run.losses]
    if not ended:
        return '<div class="gen-output gen-empty">Your runs will be listed here, to compare their settings.</div>'
    rows = []
    for i, run in reversed(list(enumerate(ended, start=1))):
        s = run.settings
        recent = run.recent_loss()
        held = f"{run.val_loss:.3f}" if run.val_loss is not None else _unscored(run)
        status = run.status if run.running else (run.stop_reason or run.status)
        what = f"{s.init} start, learning rate {s.learning_rate}, {s.size}, {s.positions} positions, seed {s.seed}"
        rows.append(
            f"<tr><td>{i}</td><td>{html.escape(what)}</td><td>{run.step:,} / {s.steps:,} ({html.escape(status)})</td>"
            f"<td>{run.losses[0][1]:.3f}</td><td>{recent:.3f}</td><td>{held}</td></tr>"
        )
    block = SIZES[ended[-1].settings.size].block_size
    return (
        '<div class="learn-runs" style="overflow-x:auto"><table class="learn-runs-table">'
        "<thead><tr><th>run</th><th>settings</th><th>steps</th><th>loss at step 0</th>"
        f"<th>training loss (mean of last {RECENT_STEPS} steps)</th>"
        f"<th>held-out loss ({VAL_WINDOWS} windows, {VAL_WINDOWS * block:,} characters)</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


EARLY_STEPS = 5  # the first steps after step 0 where a rise of the curve is explained


def early_rise(state: RunState) -> tuple[int, float] | None:
    """(step, loss) of the highest of the first :data:`EARLY_STEPS` steps after step 0, if it is
    above step 0's loss; else None."""
    early = state.losses[1 : EARLY_STEPS + 1]
    if not state.losses or not early:
        return None
    step, loss = max(early, key=lambda p: p[1])
    return (step, loss) if loss > state.losses[0][1] else None


def early_rise_words(state: RunState, step: int, loss: float) -> str:
    """Why the skewed curve climbs over its first steps before its fall: the points are each
    step's own batch, and the warmup's Adam steps barely move the x10 table yet. Measured, not
    assumed: on one fixed set the same models' loss falls at every step (docs/training.md; the
    test ``test_the_skewed_starts_early_rise_is_its_batches_not_its_updates``)."""
    s = state.settings
    lr0 = f"{lr_at(0, train_config(s)):.6f}".rstrip("0")
    block = SIZES[s.size].block_size
    return (
        f"Its curve first rises, to **{loss:.2f}** at step {step}, before its fall: each point is the loss on that "
        f"step's own batch ({BATCH_SIZE} × {block} characters), not on the same text. This model predicts the very "
        "character it reads, so some batches cost it more than others (fewer doubled characters); and Adam moves each weight by "
        f"only about the learning rate a step ({lr0} at step 0, growing through the warmup) "
        f"against table entries of about {SKEW * 0.02:g} (GPT-2's 0.02, ×{SKEW:g}), so the model has hardly changed "
        "yet. Checked: scored on one fixed set of text instead, the same models' loss falls at every one of these steps."
    )


def status_markdown(state: RunState | None) -> str:
    """One or two sentences: where the run is, and what the curve shows."""
    if state is None:
        return "Press **Start**: a GPT with random weights starts learning Shakespeare, one character at a time."
    if state.status in ("waiting", "preparing"):
        return state.message
    r = state.refs
    first = state.losses[0][1] if state.losses else None
    lines = [state.message] if state.status != "training" else []
    if first is not None and r is not None:
        gap = first - r.ln_v
        lines.append(
            f"At step 0 the loss was **{first:.2f}**, ln V = {r.ln_v:.2f}: "
            + ("random weights guess every character about evenly." if abs(gap) < 0.15 else
               f"{gap:+.2f} above an even guess: the skewed start is confidently wrong, and its first steps only bring it back to ln V: training spent undoing a bad start.")
        )
        if gap >= 0.15 and (rise := early_rise(state)) is not None:
            lines.append(early_rise_words(state, *rise))
    recent = state.recent_loss()
    if recent is not None and r is not None and state.step >= RECENT_STEPS:
        beaten = [name for name, value in (("unigram", r.unigram), ("bigram", r.bigram)) if recent < value]
        lines.append(
            f"Mean of the last {RECENT_STEPS} steps **{recent:.2f}**"
            + (f": below the {' and '.join(beaten)} model{'s' if len(beaten) > 1 else ''}." if beaten else ".")
        )
    if state.val_loss is not None:
        lines.append(f"On {val_sample_words(state.settings.size)}, never trained on, it scores **{state.val_loss:.2f}**.")
    return " ".join(lines)
