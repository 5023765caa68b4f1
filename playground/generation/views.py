"""A generation as the page shows it: the text as tokens shaded by their probability, the
"Next token" steps so far, the statistics line, and where generation runs."""

from __future__ import annotations

import html
from pathlib import Path

from export.naming import FP32_NAME, INT8_NAME

from ..plots import percent
from ..resources import PROVIDER_ENV
from ..tokens import visible_whitespace
from .state import GenerationState, drawn_rank

__all__ = ["HISTORY_CANDIDATES", "tokens_html", "history_html", "stats_markdown", "provider_label", "provider_markdown"]

HISTORY_CANDIDATES = 5  # candidates listed per step under the chart


def _token_html(text: str) -> str:
    """A generated token's text for the page: a token of whitespace only is drawn with the
    Tokenization tab's symbols (⋅ → ↵), muted, so an all-whitespace sample shows what it is."""
    if text and not text.strip():
        return f'<span class="gen-ws">{html.escape(visible_whitespace(text, keep_line_breaks=True))}</span>'
    return html.escape(text)


def tokens_html(state: GenerationState) -> str:
    """The prompt, then each sample's generated tokens as spans shaded by the probability they
    were drawn with (hover or tap: step, id, probabilities), as Transformer Explainer colours its output."""
    prompt = html.escape(state.params.prompt)
    parts = []
    for sample, steps in enumerate(state.steps):
        spans = []
        for step in steps:
            p = step.token.sample_probability if step.token.sample_probability is not None else step.token.probability
            title = (
                f"step {step.index + 1} · id {step.token.token_id} · model p = {percent(step.token.probability)}"
                + (f" · sampled p = {percent(step.token.sample_probability)}" if step.token.sample_probability is not None else "")
            )
            spans.append(
                f'<span class="gen-tok" data-sample="{sample}" data-step="{step.index + 1}" data-id="{step.token.token_id}" '
                f'style="background: rgba(99, 102, 241, {0.08 + 0.5 * (1 - p):.2f})" '
                f'tabindex="0" data-tip="{html.escape(title, quote=True)}">{_token_html(step.token.text)}</span>'
            )
        header = f'<div class="gen-sample-title">Sample {sample + 1}</div>' if len(state.steps) > 1 else ""
        parts.append(f'<div class="gen-sample">{header}<span class="gen-prompt">{prompt}</span>{"".join(spans)}</div>')
    # Which file wrote it, and whether it is whole (the page's tests wait for it).
    marks = f' data-file="{html.escape(state.model_file, quote=True)}"' + (' data-done="true"' if state.finished else "")
    return f'<div class="gen-output"{marks}>' + "".join(parts) + "</div>"


def history_html(state: GenerationState | None) -> str:
    """The "Next token" steps so far as a table, newest first: each step's token drawn (with its
    probability) and the model's most likely candidates then. Empty when there are none."""
    if state is None or not state.history:
        return ""
    rows = []
    for step in state.history:
        drawn = step.token
        p = drawn.sample_probability if drawn.sample_probability is not None else drawn.probability
        cands = " ".join(
            f'<span class="gen-hist-cand{" gen-hist-drawn" if c.token_id == drawn.token_id else ""}">'
            f"<code>{html.escape(visible_whitespace(c.text))}</code>&nbsp;{percent(c.probability)}</span>"
            for c in step.candidates[:HISTORY_CANDIDATES]
        )
        rows.append(
            f"<tr><td>{step.index + 1}</td><td><code>{html.escape(visible_whitespace(drawn.text))}</code> ({percent(p)})</td>"
            f"<td>{cands}</td></tr>"
        )
    cut = state.history[-1].index > 0  # the oldest step listed is not the first: earlier ones were dropped
    more = f", the last {len(state.history)}" if cut else ""
    return (
        f'<div class="gen-history"><div class="gen-history-title">Steps so far, newest first{more}</div>'
        '<table><thead><tr><th>step</th><th>drawn (p)</th><th>the model\'s most likely then (model p)</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _file_precision(model_file: str) -> str:
    """How an ONNX file's numbers are kept, in words: "full precision", "8 bits", "8-bit weights"."""
    if model_file == Path(FP32_NAME).name:
        return "full precision"
    if model_file == Path(INT8_NAME).name:
        return "8 bits"
    return "8-bit weights" if "quantized" in model_file else "its own precision"


def stats_markdown(state: GenerationState) -> str:
    """One line of numbers (new tokens, speed, time to first token, provider and file, why it
    stopped), then how many tokens were not the model's most likely and the notices."""
    ttft, tps = state.ttft_s, state.tokens_per_s
    bits = [
        f"**{state.new_tokens}** new token{'s' if state.new_tokens != 1 else ''}",
        f"**{tps:.1f}** tokens/s" if tps is not None else "tokens/s –",
        f"time to first token **{ttft * 1000:.0f} ms**" if ttft is not None else "time to first token –",
        f"provider **{provider_label(state.provider)}**"
        + (f" (`{state.model_file}`, {_file_precision(state.model_file)})" if state.model_file else ""),
    ]
    if state.finished:
        bits.append(f"stopped by: {state.stop_reason}")
    line = " · ".join(bits)
    others = sum(1 for steps in state.steps for step in steps if drawn_rank(step) != 1)
    if others and state.finished:
        line += (
            f"\n\n{others} of the {state.new_tokens} tokens {'were' if others != 1 else 'was'} not the model's most "
            "likely: each token is drawn at random from the distribution the settings give (click one to see it)."
        )
    for notice in state.notices:
        line += f"\n\n⚠️ {notice}"
    return line


def provider_label(provider: str) -> str:
    """'CUDAExecutionProvider' -> 'CUDA (GPU)', 'CPUExecutionProvider' -> 'CPU'."""
    p = provider.lower()
    if "cuda" in p:
        return "CUDA (GPU)"
    if "cpu" in p:
        return "CPU"
    return provider


def provider_markdown(provider: str, cuda_refused: str | None = None) -> str:
    """Where generation runs, for the page: the provider, and why CUDA is not used when it was
    asked for (``cuda_refused``, from ``resources.planned_provider``)."""
    line = f"Generation runs on **{provider_label(provider)}** (onnxruntime)."
    if cuda_refused:
        line += f"\n\n⚠️ CUDA was requested (`{PROVIDER_ENV}=cuda`) but cannot be used: {cuda_refused}. Generating on the CPU."
    return line
