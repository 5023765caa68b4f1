"""Plotly helpers shared by the tabs: one look for every figure, heatmaps with token axes.

Token labels repeat (" the" twice in a prompt), and a categorical plotly axis would merge
repeated labels into one row, so heatmaps use numeric axes with the labels as tick text.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

__all__ = ["PERCENT_HOVER", "percent", "PALETTE", "TEMPLATE", "TITLE_CHARS", "wrap_title", "token_ticks", "base_layout", "base_layout_dict", "heatmap", "line_plot", "bar_plot"]

# Cycling pastel colours for token spans (light enough for dark text), as tiktokenizer does.
PALETTE = (
    "#fde68a", "#bbf7d0", "#bfdbfe", "#fbcfe8", "#ddd6fe", "#fed7aa", "#99f6e4", "#e5e7eb",
)
TEMPLATE = "plotly_white"
# Plotly never wraps a title: one longer than the plot is cut off, and on a phone (390 px, about
# 40 characters at the title's size) most were. Titles are wrapped at this many characters.
TITLE_CHARS = 40
TITLE_SIZE = 14
# A probability in a hover: three significant digits, so that an untrained model's 1/50,257
# reads 0.00199 %, not 0.00 % (d3's "p": a percentage to significant digits, "~": no trailing 0).
PERCENT_HOVER = ".3~p"


def percent(p: float) -> str:
    """A probability as a percentage a learner can read at any size: one decimal from 1 %
    (``12.3%``), two significant digits below (``0.12%``, an untrained model's ``0.002%``)."""
    if p >= 0.01 or p <= 0:
        return f"{p:.1%}" if p > 0 else "0%"
    return np.format_float_positional(100 * p, precision=2, fractional=False, trim="-") + "%"


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """``text`` with ``<br>`` between words so that no line is longer than ``width`` characters
    (a longer word keeps its own line)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def base_layout(fig: go.Figure, title: str, *, height: int | None = None, **axes: str) -> go.Figure:
    """Title (wrapped to fit a phone), template, margins, a legend under the plot (a legend
    beside it takes a third of a phone's width), and axis titles given as xaxis_title=...,
    yaxis_title=... . Plotly's own ``autosize`` (Gradio sets it) fits the width to the page."""
    wrapped = wrap_title(title)
    fig.update_layout(
        # Pinned to the top of the figure, the plot area below all of its lines (plotly centres a
        # title in the top margin, so a title of three lines or more ran into the plot).
        title={"text": wrapped, "x": 0.01, "xanchor": "left", "yref": "container", "y": 1, "yanchor": "top",
               "pad": {"t": 10}, "font": {"size": TITLE_SIZE}},
        template=TEMPLATE,
        margin={"l": 56, "r": 16, "t": 24 + 19 * (wrapped.count("<br>") + 1), "b": 56},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0},
        **({"height": height} if height else {}),
        **axes,
    )
    return fig


def base_layout_dict(title: str, *, height: int) -> dict:
    """:func:`base_layout`'s layout as a fresh plain dict, for a figure written as plotly's JSON
    (``go.Figure(..., _validate=False)``): plotly's validating setters, the template's copy
    above all, cost a chart far more than the chart itself, and many learners' charts come at once."""
    wrapped = wrap_title(title)
    layout = json.loads(_base_layout_json(wrapped.count("<br>") + 1))["layout"]
    layout["title"]["text"] = wrapped
    layout["height"] = height
    return layout


@functools.lru_cache(maxsize=8)
def _base_layout_json(lines: int) -> str:
    """:func:`base_layout`'s layout for a title of ``lines`` lines, as JSON, built once per line count."""
    return go.Figure(layout=base_layout(go.Figure(), "<br>".join(["x"] * lines)).layout).to_json()

def token_ticks(labels: Sequence[str] | None, n: int, max_ticks: int = 64) -> dict:
    """Numeric tick positions carrying text labels; at most ``max_ticks`` of them, evenly spread."""
    if labels is None:
        return {}
    step = max(1, -(-n // max_ticks))
    positions = list(range(0, n, step))
    return {"tickmode": "array", "tickvals": positions, "ticktext": [labels[i] for i in positions]}


def heatmap(
    z: np.ndarray,
    title: str,
    *,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    colorscale: str = "Viridis",
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    hover: str = "x %{x}<br>y %{y}<br>value %{z:.4f}<extra></extra>",
    customdata: np.ndarray | None = None,
    text: np.ndarray | None = None,
    cells: str | None = None,
    y_down: bool = True,
    height: int | None = None,
    decimals: int | None = None,
) -> go.Figure:
    """A heatmap of ``z`` [rows, cols] with row 0 at the top (matrix convention) by default.

    Values printed in the cells: ``cells``, a d3 format such as ``".2f"`` (plotly formats the
    value; the JSON keeps full precision for the hover), or ``text``, one string per cell. Leave
    both out where the cells are too small to read (the hover still gives every value).

    ``decimals``: for large maps whose colour shows far less, the values are rounded and sent as
    float32: plotly writes an array as base64, float64 at ~11 characters a cell that gzip barely
    shrinks and far slower to encode; rounded float32 is ~7 that gzip takes to ~3 (a list of
    JSON numbers is smaller still, but plotly validates it number by number, slowly; docs/app.md,
    "Page weight and speed")."""
    z = np.asarray(z, dtype=np.float64)
    rows, cols = z.shape
    trace = go.Heatmap(
        z=z if decimals is None else np.round(z, decimals).astype(np.float32),
        x=np.arange(cols),
        y=np.arange(rows),
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        hovertemplate=hover,
        customdata=customdata,
        text=text,
        texttemplate="%{text}" if text is not None else (f"%{{z:{cells}}}" if cells else None),
        textfont={"size": 11},
        colorbar={"thickness": 12},
    )
    fig = go.Figure(trace)
    base_layout(fig, title, height=height)
    fig.update_xaxes(title_text=x_title, **token_ticks(x_labels, cols))
    fig.update_yaxes(title_text=y_title, autorange="reversed" if y_down else True, **token_ticks(y_labels, rows))
    return fig


def line_plot(
    x: np.ndarray,
    series: dict[str, np.ndarray],
    title: str,
    *,
    x_title: str = "",
    y_title: str = "",
    log_y: bool = False,
    height: int | None = None,
) -> go.Figure:
    """One line per entry of ``series`` (name -> y values) over the shared ``x``."""
    fig = go.Figure([go.Scatter(x=x, y=np.asarray(y), mode="lines", name=name) for name, y in series.items()])
    base_layout(fig, title, height=height, xaxis_title=x_title, yaxis_title=y_title)
    if log_y:
        fig.update_yaxes(type="log")
    return fig


def bar_plot(labels: Sequence[str], values: Sequence[float], title: str, *, x_title: str = "", y_title: str = "",
             hover: str | None = None, horizontal: bool = True, height: int | None = None) -> go.Figure:
    """Bars for labelled values; horizontal bars list the first label at the top."""
    values = np.asarray(values, dtype=np.float64)
    positions = np.arange(len(labels))
    if horizontal:
        trace = go.Bar(x=values, y=positions, orientation="h", hovertemplate=hover)
    else:
        trace = go.Bar(x=positions, y=values, hovertemplate=hover)
    fig = go.Figure(trace)
    base_layout(fig, title, height=height, xaxis_title=x_title, yaxis_title=y_title)
    ticks = token_ticks(list(labels), len(labels))
    if horizontal:
        fig.update_yaxes(autorange="reversed", **ticks)
    else:
        fig.update_xaxes(**ticks)
    return fig
