"""A large matrix drawn as one image: a PNG rendered here through a plotly colour scale, shown
in a plotly figure (``go.Image``) with the matrix's own axes, a colour bar, and a hover that
gives row, column and the exact value.

A plotly heatmap of half a million cells makes the browser colour every cell itself (seconds in
a software-rendered Chromium); a PNG of the same cells is decoded by the browser's image code.
The figure keeps one pixel per cell: the browser scales it without smoothing (plotly's image
trace draws ``image-rendering: pixelated``), so zooming shows every cell, and nothing is averaged.
"""

from __future__ import annotations

import base64

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale, sample_colorscale

from .plots import base_layout
from .png_image import png_bytes

__all__ = ["LEVELS", "colour_table", "png_rgb", "image_map"]

LEVELS = 256  # colours in the lookup table: finer than the eye tells apart


def colour_table(colorscale: str, levels: int = LEVELS) -> np.ndarray:
    """[levels, 3] uint8: the named plotly colour scale sampled evenly from its low end to its high end."""
    rgb = sample_colorscale(get_colorscale(colorscale), np.linspace(0.0, 1.0, levels), colortype="tuple")
    return np.clip(np.round(np.asarray(rgb) * 255), 0, 255).astype(np.uint8)


def png_rgb(z: np.ndarray, colorscale: str, zmin: float, zmax: float) -> bytes:
    """``z`` [rows, cols] as a PNG of rows x cols pixels, ``zmin`` .. ``zmax`` across the colour
    scale (values outside it take its ends; NaN takes the middle). A palette PNG (one byte a
    pixel, the colour scale as its palette): a third of an RGB one's size."""
    lut = colour_table(colorscale)
    scaled = (np.nan_to_num(np.asarray(z, dtype=np.float64), nan=(zmin + zmax) / 2) - zmin) / (zmax - zmin)
    index = np.clip(np.round(scaled * (len(lut) - 1)), 0, len(lut) - 1).astype(np.uint8)
    return png_bytes(index, palette=lut)


def image_map(
    z: np.ndarray,
    title: str,
    *,
    x_title: str,
    y_title: str,
    x_name: str,
    y_name: str,
    colorscale: str = "RdBu",
    zmin: float = -1.0,
    zmax: float = 1.0,
    height: int | None = None,
    formula: dict | None = None,
) -> go.Figure:
    """``z`` [rows, cols] as an image: row 0 at the top, column c centred on x = c, row r on
    y = r. The hover reads "``y_name`` r, ``x_name`` c, value v", v from the trace's
    ``customdata``: ``z`` as float32 (4 bytes a cell on the wire), or, given ``formula`` (the
    sinusoidal table's ``{"sinusoidal": {"base", "d_model", "n_positions"}}``), none: the trace
    carries it as ``meta`` and the page computes the values when the pointer first reaches the
    figure (``ui/positional.HOVER_VALUES_JS``), as 2 MB fewer to send and parse at 1024 x 512."""
    z = np.asarray(z, dtype=np.float32)
    rows, cols = z.shape
    source = "data:image/png;base64," + base64.b64encode(png_rgb(z, colorscale, zmin, zmax)).decode("ascii")
    image = go.Image(
        source=source, x0=0, dx=1, y0=0, dy=1,
        # With a formula, an empty row stands for the values: plotly's hover reads only the
        # array attributes a trace had when drawn, so customdata must be an array from the start.
        customdata=[[]] if formula else z, meta=formula,
        hovertemplate=f"{y_name} %{{y}}<br>{x_name} %{{x}}<br>value %{{customdata:.3f}}<extra></extra>",
    )
    # An image trace has no colour bar: an empty scatter carries the same scale's.
    scale = go.Scatter(
        x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
        marker={"colorscale": colorscale, "cmin": zmin, "cmax": zmax, "color": [zmin], "showscale": True,
                "colorbar": {"thickness": 12}},
    )
    fig = go.Figure([image, scale])
    base_layout(fig, title, height=height)
    # Cells need not be square (an image trace makes them so by default): the table fills the plot.
    fig.update_xaxes(title_text=x_title, range=[-0.5, cols - 0.5], constrain=None, showgrid=False, zeroline=False)
    fig.update_yaxes(title_text=y_title, range=[rows - 0.5, -0.5], scaleanchor=False, showgrid=False, zeroline=False)
    return fig
