"""Plotly helpers shared by the tabs: one look for every figure, heatmaps with token axes.

Token labels repeat (" the" twice in a prompt), and a categorical plotly axis would merge
repeated labels into one row, so heatmaps use numeric axes with the labels as tick text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

__all__ = ["PALETTE", "TEMPLATE", "base_layout", "heatmap", "line_plot", "bar_plot"]

# Cycling pastel colours for token spans (light enough for dark text), as tiktokenizer does.
PALETTE = (
    "#fde68a", "#bbf7d0", "#bfdbfe", "#fbcfe8", "#ddd6fe", "#fed7aa", "#99f6e4", "#e5e7eb",
)
TEMPLATE = "plotly_white"


def base_layout(fig: go.Figure, title: str, *, height: int | None = None, **axes: str) -> go.Figure:
    """Title, template, margins (and axis titles given as xaxis_title=..., yaxis_title=...)."""
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left"},
        template=TEMPLATE,
        margin={"l": 60, "r": 20, "t": 60, "b": 60},
        **({"height": height} if height else {}),
        **axes,
    )
    return fig


def _ticks(labels: Sequence[str] | None, n: int, max_ticks: int = 64) -> dict:
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
    y_down: bool = True,
    height: int | None = None,
) -> go.Figure:
    """A heatmap of ``z`` [rows, cols] with row 0 at the top (matrix convention) by default."""
    z = np.asarray(z, dtype=np.float64)
    rows, cols = z.shape
    trace = go.Heatmap(
        z=z,
        x=np.arange(cols),
        y=np.arange(rows),
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        hovertemplate=hover,
        customdata=customdata,
        text=text,
        texttemplate="%{text}" if text is not None else None,
    )
    fig = go.Figure(trace)
    base_layout(fig, title, height=height)
    fig.update_xaxes(title_text=x_title, **_ticks(x_labels, cols))
    fig.update_yaxes(title_text=y_title, autorange="reversed" if y_down else True, **_ticks(y_labels, rows))
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
    ticks = _ticks(list(labels), len(labels))
    if horizontal:
        fig.update_yaxes(autorange="reversed", **ticks)
    else:
        fig.update_xaxes(**ticks)
    return fig
