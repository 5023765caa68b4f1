"""Positional encoding tab: the lessons' sinusoidal table, its frequencies, and the model's own table.

PE[pos, 2i] = sin(pos / base^(2i/d_model)), PE[pos, 2i+1] = cos(pos / base^(2i/d_model)),
values from ``model.positional_encoding`` (the function the model itself uses). Because
sin(a)sin(b) + cos(a)cos(b) = cos(a - b), the dot product PE[p] · PE[p+k] = sum_i cos(f_i k)
depends only on the offset k, which the similarity figures show.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go

from model import GPT
from model import positional_encoding as model_positional_encoding

from . import limits
from .assets import VOCAB_SIZE, seen_token_ids
from .image_map import image_map
from .plots import base_layout, heatmap, line_plot
from .resources import shipped_model
from .similarity import cosine_matrix
from .validation import InputError, parse_int_list, validate_float, validate_int

__all__ = [
    "FORMULA_LATEX",
    "FORMULA_LINES",
    "PAGE_FORMULA_LINES",
    "TUTORIAL_DIMS",
    "PositionalResult",
    "ModelTableResult",
    "frequencies",
    "wavelength",
    "positional_encoding",
    "model_position_table",
]

# One line each: side by side they were wider than a phone.
FORMULA_LINES = (
    r"PE_{(pos,\,2i)} = \sin\left(\frac{pos}{\text{base}^{2i/d_{model}}}\right)",
    r"PE_{(pos,\,2i+1)} = \cos\left(\frac{pos}{\text{base}^{2i/d_{model}}}\right)",
    r"f_i = \frac{1}{\text{base}^{2i/d_{model}}} = \exp\left(-\frac{2i\,\ln \text{base}}{d_{model}}\right)",
)
FORMULA_LATEX = r", \quad ".join(FORMULA_LINES)
# The page's lines: f_i's two forms one under the other (on one line they are wider than a
# phone's screen).
PAGE_FORMULA_LINES = (
    *FORMULA_LINES[:2],
    r"\begin{aligned} f_i &= \frac{1}{\text{base}^{2i/d_{model}}} \\ &= \exp\left(-\frac{2i\,\ln \text{base}}{d_{model}}\right) \end{aligned}",
)
TUTORIAL_DIMS = (2, 4, 6, 8)  # the Transformer tutorial plots out[0, :, 2:10:2]
# A table of more cells than this is drawn as an image (image_map): as a plotly heatmap the
# browser takes seconds to colour half a million cells. Smaller ones stay heatmaps.
MAX_HEATMAP_CELLS = 256 * 256
LINES_WINDOW = 128  # positions the dimensions-over-positions plot opens on


def frequencies(d_model: int, base: float) -> np.ndarray:
    """f_i = 1 / base^(2i/d_model) for i = 0 .. d_model/2 - 1 (radians per position)."""
    return np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(base) / d_model))


def wavelength(dim: int, d_model: int, base: float) -> float:
    """Positions per full turn of dimension ``dim``: 2π / f_i with 2i = dim rounded down to even."""
    return 2 * math.pi * base ** ((dim - dim % 2) / d_model)


@dataclass(frozen=True)
class PositionalResult:
    d_model: int
    n_positions: int
    base: float
    dims: list[int]
    table: np.ndarray = field(repr=False)  # [n_positions, d_model] float32
    frequencies: np.ndarray = field(repr=False)  # [d_model/2] radians per position
    wavelengths: np.ndarray = field(repr=False)  # [d_model/2] positions per full turn, 2*pi/f_i
    offset_spread: float  # max over p of |PE[p]·PE[p+k] - PE[0]·PE[k]|: ~0, it depends only on k
    heatmap: go.Figure = field(repr=False)
    lines: go.Figure = field(repr=False)
    spectrum: go.Figure = field(repr=False)
    similarity: go.Figure = field(repr=False)
    offsets: go.Figure = field(repr=False)
    formula: str = FORMULA_LATEX


def _table_heatmap(table: np.ndarray, title: str, base: float | None = None) -> go.Figure:
    """The whole table, one cell per position and dimension: a heatmap, or past
    MAX_HEATMAP_CELLS an image of the same cells (1024 x 512: 524,288), never averaged.
    ``base``: the table is the sinusoidal formula's with this base (the page computes the
    image's hover values from it instead of receiving them)."""
    n, d = table.shape
    # Tall enough that every position has a row of pixels: averaged or skipped rows would turn
    # the fast dimensions' stripes grey or into a false slow wave.
    height = max(450, n + 130) if n > 256 else None
    if table.size > MAX_HEATMAP_CELLS:
        lim = float(np.max(np.abs(table))) or 1.0  # centred on 0, as the heatmap's zmid=0
        return image_map(table, title, x_title="dimension", y_title="position", x_name="dimension",
                         y_name="position", colorscale="RdBu", zmin=-lim, zmax=lim, height=height,
                         formula=None if base is None else {"sinusoidal": {"base": base, "d_model": d, "n_positions": n}})
    return heatmap(
        table, title, x_title="dimension", y_title="position", colorscale="RdBu", zmid=0.0, decimals=3,
        hover="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>", height=height,
    )


def _parse_dims(dims: Any, d_model: int) -> list[int]:
    if dims is None:
        return [d for d in TUTORIAL_DIMS if d < d_model] or [0]
    if isinstance(dims, str):
        dims = parse_int_list(dims, name="dimensions", max_chars=200, max_count=limits.MAX_PLOT_DIMS)
    if isinstance(dims, (int, float)) or not isinstance(dims, Sequence) or not dims:
        raise InputError(f"dimensions must be a list of 1 to {limits.MAX_PLOT_DIMS} indices, e.g. 2, 4, 6, 8")
    if len(dims) > limits.MAX_PLOT_DIMS:
        raise InputError(f"dimensions: {len(dims)} given; at most {limits.MAX_PLOT_DIMS} are drawn at once")
    out = [validate_int(d, name="dimension", minimum=0, maximum=d_model - 1) for d in dims]
    return list(dict.fromkeys(out))  # drop repeats, keep order


def _offset_similarity(table: np.ndarray, max_offset: int) -> tuple[go.Figure, float]:
    """PE[p] · PE[p+k] against k for a few starting positions p; the curves coincide."""
    n = table.shape[0]
    t = table.astype(np.float64)
    starts = sorted({0, n // 4, n // 2}) if n > 2 else [0]
    k = np.arange(0, min(max_offset, n - max(starts)))
    series = {f"from position {p}": np.einsum("d,kd->k", t[p], t[p + k]) for p in starts}
    reference = series[f"from position {starts[0]}"]
    spread = max(float(np.max(np.abs(s - reference))) for s in series.values())
    fig = line_plot(k, series, "Dot product PE[p] · PE[p + k]: the same curve from every start p",
                    x_title="offset k", y_title="dot product")
    return fig, spread


def _validated(d_model: Any, n_positions: Any, base: Any) -> tuple[int, int, float]:
    d_model = validate_int(d_model, name="d_model", minimum=limits.MIN_D_MODEL, maximum=limits.MAX_D_MODEL)
    if d_model % 2:
        raise InputError(f"d_model must be even (each frequency has a sine and a cosine column), not {d_model}")
    n_positions = validate_int(n_positions, name="number of positions", minimum=limits.MIN_POSITIONS, maximum=limits.MAX_POSITIONS)
    base = validate_float(base, name="base", minimum=limits.MIN_BASE, maximum=limits.MAX_BASE)
    return d_model, n_positions, base


def positional_table(d_model: Any, n_positions: Any, base: Any, max_values: int | None = None,
                     decimals: int = 6) -> dict[str, Any]:
    """The table alone, JSON-ready (the API's answer): its first
    ``table_rows`` positions (all, or as many as ``max_values`` hold), without the tab's figures:
    an API answer draws none, and building them was half of a 1024 x 1024 answer's time."""
    d_model, n_positions, base = _validated(d_model, n_positions, base)
    rows = n_positions if max_values is None else min(n_positions, max_values // d_model)
    freqs = frequencies(d_model, base)
    return {
        "d_model": d_model,
        "n_positions": n_positions,
        "base": base,
        "table": np.round(model_positional_encoding(rows, d_model, base).numpy().astype(np.float64), decimals).tolist(),
        "frequencies": np.round(freqs, 10).tolist(),
        "wavelengths": np.round(2 * math.pi / freqs, 6).tolist(),
        "formula": FORMULA_LATEX,
        "table_rows": rows,
    }


def positional_encoding(d_model: Any = 20, n_positions: Any = 100, base: Any = 10000.0, dims: Any = None) -> PositionalResult:
    """The sinusoidal table [n_positions, d_model] for the given base, with its figures.

    ``dims``: dimensions drawn over positions (indices, or text such as ``"2, 4, 6, 8"``);
    default the Transformer tutorial's 2, 4, 6, 8. d_model must be even (a sine and a cosine per frequency).
    Defaults are the Transformer tutorial's module example (block_size 100, d_model 20).
    """
    d_model, n_positions, base = _validated(d_model, n_positions, base)
    dims = _parse_dims(dims, d_model)

    table = model_positional_encoding(n_positions, d_model, base).numpy()
    freqs = frequencies(d_model, base)
    wavelengths = 2 * math.pi / freqs
    positions = np.arange(n_positions)

    title = f"PE over positions, dimensions {', '.join(map(str, dims))}"
    if n_positions > LINES_WINDOW:  # past this the fast dimensions fill the plot as a solid block
        title += f" (positions 0–{LINES_WINDOW - 1} shown: drag to pan, zoom out for all {n_positions})"
    lines = line_plot(positions, {f"dim {d}": table[:, d] for d in dims}, title,
                      x_title="position", y_title="value")
    lines.update_xaxes(range=[0, min(n_positions, LINES_WINDOW) - 1])
    spectrum = go.Figure([
        go.Scatter(x=np.arange(0, d_model, 2), y=wavelengths, mode="lines+markers", name="wavelength 2π/f_i (positions)"),
        go.Scatter(x=np.arange(0, d_model, 2), y=freqs, mode="lines+markers", name="frequency f_i (radians/position)"),
    ])
    base_layout(spectrum, f"Frequency and wavelength per dimension pair (2i, 2i+1), base {base:g}",
                xaxis_title="dimension 2i", yaxis_title="log scale")
    spectrum.update_yaxes(type="log")

    m = min(n_positions, limits.MAX_SIMILARITY_POSITIONS)
    gram = table[:m].astype(np.float64) @ table[:m].astype(np.float64).T
    similarity = heatmap(gram, f"Dot product PE[p] · PE[q], first {m} positions (constant along diagonals)",
                         x_title="position q", y_title="position p", colorscale="Viridis", decimals=2,
                         hover="p %{y}, q %{x}<br>PE[p]·PE[q] = %{z:.2f}<extra></extra>")
    offsets, spread = _offset_similarity(table, max_offset=limits.MAX_SIMILARITY_POSITIONS)
    return PositionalResult(
        d_model=d_model, n_positions=n_positions, base=base, dims=dims, table=table,
        frequencies=freqs, wavelengths=wavelengths, offset_spread=spread,
        heatmap=_table_heatmap(table, f"Sinusoidal positional encoding: {n_positions} positions × {d_model} dimensions, base {base:g}", base),
        lines=lines, spectrum=spectrum, similarity=similarity, offsets=offsets,
    )


@dataclass(frozen=True)
class ModelTableResult:
    kind: str  # "sinusoidal" or "learned"
    table: np.ndarray = field(repr=False)  # the model's [block_size, d_model] table
    reference: np.ndarray = field(repr=False)  # the sinusoidal table of the same shape
    max_abs_diff: float  # between the two: ~0 for a sinusoidal model
    position_norm: float  # mean L2 norm of the table's rows
    token_norm: float  # mean L2 norm of the token-embedding rows of the tokens seen in training
    note: str
    figure: go.Figure = field(repr=False)
    reference_figure: go.Figure | None = field(repr=False)  # beside a learned table only
    cosine: np.ndarray = field(repr=False)  # [m, m] cosine similarity between the first m rows
    cosine_figure: go.Figure = field(repr=False)


def model_position_table(model: GPT | None = None) -> ModelTableResult:
    """The table the loaded model adds to its token embeddings (``model.position_table()``);
    for a learned-position model also the sinusoidal table of the same shape to compare.

    The row norms are compared with the token embeddings' because the two are added: whichever
    is larger dominates what the first layer sees."""
    model = model or shipped_model()
    cfg = model.config
    table = model.position_table().detach().float().cpu().numpy()
    reference = model_positional_encoding(cfg.block_size, cfg.d_model).numpy()
    diff = float(np.max(np.abs(table - reference)))
    wte = model.wte.weight.detach().float().cpu().numpy()
    seen = _seen_token_ids(len(wte))
    # What is added to the positions: the rows of E, times sqrt(d_model) for a model that scales them.
    token_norm = float(np.linalg.norm(wte[seen], axis=1).mean()) * (math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0)
    position_norm = float(np.linalg.norm(table, axis=1).mean())
    norms = (f"Its rows have a mean length of **{position_norm:.2f}**; the token embeddings it is added to, "
             f"**{token_norm:.2f}**.")
    if cfg.pos_encoding == "sinusoidal":
        scaled = (f" The model multiplies its token embeddings by √d_model = {math.sqrt(cfg.d_model):.1f} before adding "
                  f"the table, as “Attention Is All You Need” does (the token length above includes it).") if cfg.scale_embedding else ""
        note = (f"This model uses the sinusoidal formula (a fixed buffer, not trained): its table equals "
                f"the formula's with base 10000 (largest difference {diff:.1e}). {norms} Every sinusoidal "
                f"row has length √(d_model/2) = {math.sqrt(cfg.d_model / 2):.1f}, whatever the position.{scaled}")
        figure = _table_heatmap(table, f"The model's positional encoding buffer ({cfg.block_size} × {cfg.d_model}, sinusoidal)", 10000.0)
        ref_fig = None
    else:
        note = (f"This model learned its position table (GPT-2 style, an nn.Embedding trained with the rest), "
                f"shown beside the sinusoidal table of the same shape. {norms} A sinusoidal row would have "
                f"length √(d_model/2) = {math.sqrt(cfg.d_model / 2):.1f}: added to token embeddings this small "
                f"it would drown out which token is where. Even with the token embeddings multiplied by "
                f"√d_model, as “Attention Is All You Need” does, the sinusoidal table trained to a validation "
                f"loss 0.17 nats worse than learned positions in a same-budget run, which is why this model "
                f"learned its positions (docs/training.md).")
        figure = _table_heatmap(table, f"The model's learned position table ({cfg.block_size} × {cfg.d_model})")
        ref_fig = _table_heatmap(reference, f"Sinusoidal table of the same shape ({cfg.block_size} × {cfg.d_model})", 10000.0)
    m = min(len(table), limits.MAX_SIMILARITY_POSITIONS)
    cosine = cosine_matrix(table[:m])
    if cfg.pos_encoding == "learned" and m > 2:
        far = m // 2
        note += (f" The similarity map shows what it learned about distance: neighbouring positions have a mean "
                 f"cosine similarity of {np.mean(np.diag(cosine, 1)):.2f}, positions {far} apart "
                 f"{np.mean(np.diag(cosine, far)):.2f}.")
    cosine_figure = heatmap(
        cosine, f"Cosine similarity between the model's position vectors, first {m} positions",
        x_title="position q", y_title="position p", colorscale="RdBu", zmin=-1.0, zmax=1.0, zmid=0.0, decimals=3,
        hover="p %{y}, q %{x}<br>cos = %{z:.3f}<extra></extra>",
    )
    return ModelTableResult(cfg.pos_encoding, table, reference, diff, position_norm, token_norm, note, figure,
                            ref_fig, cosine, cosine_figure)


def _seen_token_ids(vocab_size: int) -> np.ndarray:
    """Ids that occur in the training works (the others keep their initial size); all ids for a
    model with another vocabulary."""
    ids = seen_token_ids()
    return ids if vocab_size == VOCAB_SIZE else np.arange(vocab_size)
