"""Positional encoding tab: the lessons' sinusoidal table for any d_model / positions / base, its
frequencies, the offset-only similarity, and the model's own table. Registers
``/positional_encoding``."""

from __future__ import annotations

import gradio as gr

from .. import limits
from .. import positional as pe
from .common import EXPENSIVE, EXPENSIVE_CONCURRENCY, LIGHT, LIGHT_CONCURRENCY, on_input, on_tab_open, user_errors
from ..resources import get_model
from .widgets import RESULT, SECTION, error_slot, next_tab, note

LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]


def _summary(r: pe.PositionalResult) -> str:
    return (
        f"**{r.n_positions} positions × {r.d_model} dimensions**, base {r.base:g}: wavelengths from "
        f"{r.wavelengths[0]:.2f} to {r.wavelengths[-1]:,.0f} positions. "
        f"PE[p]·PE[p+k] depends only on the offset k: across all p it varies by at most "
        f"{r.offset_spread:.1e} for any k."
    )


def ui_positional(d_model, n_positions, base, dims):
    r = pe.positional_encoding(d_model, n_positions, base, dims)
    return _summary(r), r.heatmap, r.lines, r.spectrum, r.similarity, r.offsets


def ui_model_table():
    t = pe.model_position_table()
    return t.note, t.figure, t.reference_figure, t.cosine_figure


def api_positional_encoding(d_model: int, n_positions: int, base: float) -> dict:
    """The sinusoidal table PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] =
    cos(pos / base^(2i/d_model)). Returns `table` ([rows][d_model], 6 decimals: every position
    up to 524,288 values, the Transformer tutorial's whole 1024 x 512 table; past that its first positions),
    `table_rows` (how many), `frequencies`, `wavelengths`, `formula`, and `note` when the table
    was cut. Limits: d_model even, 2-1024; n_positions 1-1024; base 2-1,000,000 (the paper's is
    10000)."""
    result = pe.positional_encoding(d_model, n_positions, base)
    rows = min(result.n_positions, limits.MAX_TABLE_VALUES // result.d_model)
    out = result.to_dict(max_rows=rows)
    out["table_rows"] = rows
    if rows < result.n_positions:
        out["note"] = (
            f"The table holds the first {rows} of {result.n_positions} positions: an answer carries at most "
            f"{limits.MAX_TABLE_VALUES:,} values (the formula above gives any row)."
        )
    return out


def build(tab: gr.Tab) -> dict[str, gr.components.Component]:
    """The tab's content, built inside ``tab`` (whose first opening draws the model's own table)."""
    note(
        "Attention by itself ignores word order, so each position gets a vector added to its token "
        "embedding. The lesson's formula (from *Attention Is All You Need*) uses sines and cosines of "
        "decreasing frequency:",
    )
    gr.Markdown("\n\n".join(f"$$ {line} $$" for line in pe.FORMULA_LINES), latex_delimiters=LATEX, elem_id="pe-formula")
    first = ui_positional(20, 100, 10000, "2, 4, 6, 8")
    with gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            d_model = gr.Slider(limits.MIN_D_MODEL, 512, value=20, step=2, label="d_model (even)", elem_id="pe-dmodel")
            n_pos = gr.Slider(limits.MIN_POSITIONS, limits.MAX_POSITIONS, value=100, step=1, label="Positions", elem_id="pe-npos")
            # The API takes any base up to MAX_BASE; the slider covers the interesting range.
            base = gr.Slider(limits.MIN_BASE, 20_000, value=10000, step=1, label="Base (the paper: 10000)", elem_id="pe-base")
            dims = gr.Textbox(value="2, 4, 6, 8", label="Dimensions to plot (the lesson's: 2, 4, 6, 8)", elem_id="pe-dims")
        error = error_slot("pe-error")
        run = gr.Button("Compute", variant="primary", elem_id="pe-run")
        summary = gr.Markdown(first[0], elem_id="pe-summary", elem_classes=RESULT)
        plot = dict(show_label=False, elem_classes=RESULT)
        with gr.Row(equal_height=False):
            heat = gr.Plot(first[1], label="Table", elem_id="pe-heatmap", **plot)
            lines = gr.Plot(first[2], label="Dimensions over positions", elem_id="pe-lines", **plot)
        with gr.Row(equal_height=False):
            spectrum = gr.Plot(first[3], label="Frequency / wavelength", elem_id="pe-spectrum", **plot)
            similarity = gr.Plot(first[4], label="Similarity between positions", elem_id="pe-similarity", **plot)
        offsets = gr.Plot(first[5], label="Similarity against offset", elem_id="pe-offsets", **plot)

    with gr.Accordion("The model's own table", open=True):
        # Drawn when the tab opens (three 256 x 256 maps: most of the page's weight otherwise).
        model_note = gr.Markdown(elem_id="pe-model-note")
        with gr.Row(equal_height=False):
            model_fig = gr.Plot(label="Model", show_label=False, elem_id="pe-model-table")
            reference_fig = gr.Plot(label="Sinusoidal, same shape", show_label=False, elem_id="pe-model-reference",
                                    visible=get_model().config.pos_encoding == "learned")
        cosine_fig = gr.Plot(label="Which positions the model treats as alike", show_label=False, elem_id="pe-model-cosine")
    on_tab_open(tab, ui_model_table, [model_note, model_fig, reference_fig, cosine_fig],
                concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY)
    next_tab(
        "Token vector plus position vector is what each layer reads: there, every token gathers "
        "information from the tokens before it, weighted by attention.",
        "Attention",
    )

    # A slider recomputes when let go, or when a number typed in its box is confirmed with Enter
    # (common.JS turns that Enter into the same "release").
    on_input(
        [run.click, d_model.release, n_pos.release, base.release, dims.submit],
        ui_positional,
        [d_model, n_pos, base, dims],
        [summary, heat, lines, spectrum, similarity, offsets],
        error=error,
        concurrency_id=LIGHT,
        concurrency_limit=LIGHT_CONCURRENCY,
        trigger_mode="always_last",
        show_progress="minimal",
    )
    gr.api(
        user_errors(api_positional_encoding), api_name="positional_encoding",
        concurrency_id=EXPENSIVE, concurrency_limit=EXPENSIVE_CONCURRENCY,
    )
    return {"d_model": d_model, "n_positions": n_pos, "base": base, "dims": dims}  # its controls, by the names of a link's parameters (playground/links.py)
