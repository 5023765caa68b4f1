"""Positional encoding tab: the lessons' sinusoidal table for any d_model / positions / base, its
frequencies, the offset-only similarity, and the model's own table. Registers
``/positional_encoding``."""

from __future__ import annotations

import html

import gradio as gr

from .. import limits
from .. import positional as pe
from ..lessons import LESSONS
from .common import EXPENSIVE, EXPENSIVE_CONCURRENCY, LIGHT, LIGHT_CONCURRENCY, on_input, on_tab_open, user_errors
from ..resources import Resources
from .widgets import RESULT, SECTION, error_slot, next_tab, note

LESSON = LESSONS["positional"]

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


class Handlers:
    """The handlers that read the model of the app's :class:`~playground.resources.Resources`."""

    def __init__(self, res: Resources):
        self.res = res

    def ui_model_table(self):
        t = pe.model_position_table(self.res.model())
        return t.note, t.figure, t.reference_figure, t.cosine_figure


def api_positional_encoding(d_model: int, n_positions: int, base: float) -> dict:
    """The sinusoidal table PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] =
    cos(pos / base^(2i/d_model)). Returns `table` ([rows][d_model], 6 decimals: every position
    up to 524,288 values, the Transformer tutorial's whole 1024 x 512 table; past that its first positions),
    `table_rows` (how many), `frequencies`, `wavelengths`, `formula`, and `note` when the table
    was cut. Limits: d_model even, 2-1024; n_positions 1-1024; base 2-1,000,000 (the paper's is
    10000)."""
    out = pe.positional_table(d_model, n_positions, base, max_values=limits.MAX_TABLE_VALUES)
    rows, n_positions = out["table_rows"], out["n_positions"]
    if rows < n_positions:
        out["note"] = (
            f"The table holds the first {rows} of {n_positions} positions: an answer carries at most "
            f"{limits.MAX_TABLE_VALUES:,} values (the formula above gives any row)."
        )
    return out


# The table's image carries no numbers (ui: image_map's ``formula``): when the pointer first
# reaches a figure whose trace says it is the sinusoidal table, its hover values are computed
# here from the formula, in float64 as model.positional_encoding computes them, and handed to
# plotly as the trace's customdata. A capture listener on the document runs before plotly's own
# hover handler, so the first hover already has them; a new figure (new trace) is filled anew.
# The trace arrives with an empty customdata row (image_map), which these rows replace.
HOVER_VALUES_JS = """
if (!window.pgSinusoidalHover) {
  window.pgSinusoidalHover = true;
  const fill = (gd) => {
    const t = gd.data && gd.data[0];
    const f = t && t.meta && t.meta.sinusoidal;
    if (!f || (t.customdata && t.customdata.length === f.n_positions)) return;
    const d = f.d_model, n = f.n_positions, lnBase = Math.log(f.base);
    const freq = Array.from({length: d}, (_, c) => Math.exp(-(c - (c % 2)) * lnBase / d));
    const rows = new Array(n);
    for (let p = 0; p < n; p++) {
      const r = new Float32Array(d);
      for (let c = 0; c < d; c++) r[c] = c % 2 ? Math.cos(p * freq[c]) : Math.sin(p * freq[c]);
      rows[p] = r;
    }
    t.customdata = rows;
    if (gd._fullData && gd._fullData[0]) gd._fullData[0].customdata = rows;
  };
  const reach = (e) => {
    const gd = e.target instanceof Element && e.target.closest('.js-plotly-plot');
    if (gd) fill(gd);
  };
  document.addEventListener('pointermove', reach, true);
  document.addEventListener('pointerdown', reach, true);
  document.addEventListener('mousemove', reach, true);
}
"""
TABLE_HINT = f'<p class="pe-table-hint">{html.escape(LESSON.captions["table_hint"])}</p>'


def build(res: Resources, tab: gr.Tab) -> dict[str, gr.components.Component]:
    """The tab's content, built inside ``tab`` (whose first opening draws the own table of the
    model of ``res``)."""
    h = Handlers(res)
    note(LESSON.intro)
    gr.Markdown("\n\n".join(f"$$ {line} $$" for line in pe.PAGE_FORMULA_LINES), latex_delimiters=LATEX, elem_id="pe-formula")
    note(LESSON.notes["lesson_fix"], elem_id="pe-lesson-fix")
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
        # The table the whole width: 512 dimensions need 512 columns of pixels.
        heat = gr.Plot(first[1], label="Table", elem_id="pe-heatmap", **plot)
        gr.HTML(TABLE_HINT, elem_id="pe-table-hint", js_on_load=HOVER_VALUES_JS)
        with gr.Row(equal_height=False):
            lines = gr.Plot(first[2], label="Dimensions over positions", elem_id="pe-lines", **plot)
            spectrum = gr.Plot(first[3], label="Frequency / wavelength", elem_id="pe-spectrum", **plot)
        with gr.Row(equal_height=False):
            similarity = gr.Plot(first[4], label="Similarity between positions", elem_id="pe-similarity", **plot)
            offsets = gr.Plot(first[5], label="Similarity against offset", elem_id="pe-offsets", **plot)

    with gr.Accordion(LESSON.captions["model_table"], open=True):
        # Drawn when the tab opens (three 256 x 256 maps: most of the page's weight otherwise).
        model_note = gr.Markdown(elem_id="pe-model-note")
        with gr.Row(equal_height=False):
            model_fig = gr.Plot(label="Model", show_label=False, elem_id="pe-model-table")
            reference_fig = gr.Plot(label="Sinusoidal, same shape", show_label=False, elem_id="pe-model-reference",
                                    visible=res.model().config.pos_encoding == "learned")
        cosine_fig = gr.Plot(label="Which positions the model treats as alike", show_label=False, elem_id="pe-model-cosine")
    on_tab_open(tab, h.ui_model_table, [model_note, model_fig, reference_fig, cosine_fig],
                concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY)
    next_tab(LESSON.next_sentence, LESSON.next_tab)

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
