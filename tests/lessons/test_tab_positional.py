"""Positional encoding tab: the lessons' printed tables, the offset property, limits, the model's table."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from model import GPT, GPTConfig
from playground import limits
from playground.positional import FORMULA_LATEX, frequencies, model_position_table, positional_encoding
from playground.validation import InputError


def test_seed_003_table_block4_dim6():
    # The deep-learning notes print pe for block_size=4, emb_dim=6 (and div_term [1.0000, 0.0464, 0.0022]).
    r = positional_encoding(6, 4, 10000)
    expected = [
        [0.0000, 1.0000, 0.0000, 1.0000, 0.0000, 1.0000],
        [0.8415, 0.5403, 0.0464, 0.9989, 0.0022, 1.0000],
        [0.9093, -0.4161, 0.0927, 0.9957, 0.0043, 1.0000],
        [0.1411, -0.9900, 0.1388, 0.9903, 0.0065, 1.0000],
    ]
    np.testing.assert_allclose(r.table, expected, atol=6e-5)
    np.testing.assert_allclose(r.frequencies, [1.0000, 0.0464, 0.0022], atol=6e-5)


def test_seed_001_module_example_block100_dim20():
    # The Transformer tutorial: PositionalEncoding(block_size=100, d_model=20) applied to zeros prints these.
    r = positional_encoding(20, 100, 10000)
    np.testing.assert_allclose(r.table[1, :3], [8.4147e-01, 5.4030e-01, 3.8767e-01], atol=1e-4)
    np.testing.assert_allclose(r.table[1, -3:], [1.0000e00, 2.5119e-04, 1.0000e00], atol=1e-6)
    np.testing.assert_allclose(r.table[99, :3], [-9.9921e-01, 3.9821e-02, 9.8984e-01], atol=1e-4)
    np.testing.assert_allclose(r.table[99, -3:], [9.9805e-01, 2.4865e-02, 9.9969e-01], atol=1e-4)
    assert r.dims == [2, 4, 6, 8]  # the Transformer tutorial's plot of dims 2, 4, 6, 8
    assert [t.name for t in r.lines.data] == ["dim 2", "dim 4", "dim 6", "dim 8"]
    np.testing.assert_allclose(r.lines.data[0].y, r.table[:, 2])


def test_seed_001_large_table_and_frequencies():
    # The Transformer tutorial: block_size=1024, d_model=512; freq[:4] and rows 1 and 1023 as printed.
    r = positional_encoding(512, 1024, 10000)
    np.testing.assert_allclose(r.frequencies[:4], [1.0000, 0.9647, 0.9306, 0.8977], atol=1e-4)
    np.testing.assert_allclose(r.table[1, :3], [8.4147e-01, 5.4030e-01, 8.2186e-01], atol=1e-4)
    np.testing.assert_allclose(r.table[1, -2:], [1.0366e-04, 1.0], atol=1e-6)
    np.testing.assert_allclose(r.table[1023, :3], [-9.1649e-01, 4.0007e-01, 3.7901e-01], atol=2e-4)
    np.testing.assert_allclose(r.table[1023, -3:], [9.9396e-01, 1.0585e-01, 9.9438e-01], atol=1e-4)
    # The positional-encoding walkthrough: for d_model 512 the pair with 2i/d_model = 0.5 divides pos by 10000^0.5 = 100.
    assert 1 / r.frequencies[128] == pytest.approx(100.0)


def test_seed_001_first_50_frequencies():
    # The Transformer tutorial prints freq[:50] for d_model = 512.
    printed = [1.0000, 0.9647, 0.9306, 0.8977, 0.8660, 0.8354, 0.8058, 0.7774, 0.7499, 0.7234, 0.6978,
               0.6732, 0.6494, 0.6264, 0.6043, 0.5829, 0.5623, 0.5425, 0.5233, 0.5048, 0.4870, 0.4698,
               0.4532, 0.4371, 0.4217, 0.4068, 0.3924, 0.3786, 0.3652, 0.3523, 0.3398, 0.3278, 0.3162,
               0.3051, 0.2943, 0.2839, 0.2738, 0.2642, 0.2548, 0.2458, 0.2371, 0.2288, 0.2207, 0.2129,
               0.2054, 0.1981, 0.1911, 0.1843, 0.1778, 0.1715]
    np.testing.assert_allclose(frequencies(512, 10000.0)[:50], printed, atol=6e-5)


def test_formula_by_hand_and_wavelengths():
    r = positional_encoding(8, 10, 500.0)
    for pos in range(10):
        for i in range(4):
            angle = pos / 500.0 ** (2 * i / 8)
            assert r.table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert r.table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    np.testing.assert_allclose(r.wavelengths, 2 * math.pi * 500.0 ** (np.arange(0, 8, 2) / 8))
    assert "\\sin" in FORMULA_LATEX and "\\cos" in FORMULA_LATEX


def test_dot_product_depends_only_on_offset():
    r = positional_encoding(64, 200, 10000)
    assert r.offset_spread < 1e-4
    # and equals sum_i cos(f_i k) (sin a sin b + cos a cos b = cos(a - b))
    k = 7
    assert float(r.table[30] @ r.table[30 + k]) == pytest.approx(float(np.cos(r.frequencies * k).sum()), abs=1e-4)
    gram = np.asarray(r.similarity.data[0].z)
    assert gram.shape == (200, 200)
    assert gram[0, 0] == pytest.approx(32.0, abs=1e-4)  # |PE[p]|^2 = d_model / 2
    assert gram[10, 15] == pytest.approx(gram[50, 55], abs=1e-4)


def test_dims_as_text_and_defaults_for_small_models():
    assert positional_encoding(16, 10, 10000, dims="0, 1, 15").dims == [0, 1, 15]
    assert positional_encoding(4, 10, 10000).dims == [2]


@pytest.mark.parametrize(
    "args, fragment",
    [
        ((7, 10, 10000), "even"),
        ((0, 10, 10000), "d_model"),
        ((limits.MAX_D_MODEL + 2, 10, 10000), "d_model"),
        ((16, 0, 10000), "positions"),
        ((16, limits.MAX_POSITIONS + 1, 10000), "positions"),
        ((16, 10, 1.0), "base"),
        ((16, 10, float("nan")), "base"),
        ((16, 10, float("inf")), "base"),
        ((16, 10, "ten thousand"), "base"),
        ((16.5, 10, 10000), "whole number"),
        ((None, 10, 10000), "d_model"),
        ((10**12, 10, 10000), "d_model"),
    ],
)
def test_refuses_bad_parameters(args, fragment):
    with pytest.raises(InputError, match=fragment):
        positional_encoding(*args)


@pytest.mark.parametrize("dims, fragment", [("16", "from 0 to 15"), ("-1", "from 0 to 15"), ("a", "item 1"), ([], "list"), (list(range(17)), "at most")])
def test_refuses_bad_dims(dims, fragment):
    with pytest.raises(InputError, match=fragment):
        positional_encoding(16, 10, 10000, dims=dims)


def decode_image(trace) -> np.ndarray:
    """The image trace's PNG, decoded to [rows, cols, 3] RGB (what the browser draws)."""
    import base64
    import io

    from PIL import Image

    header, data = trace.source.split(",", 1)
    assert header == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))


def lut_levels(pixels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Each pixel's level in the colour table (the first level of its colour), by exact lookup:
    a distance to every level would take [rows, cols, 256, 3] integers, 6 GB at 1024 x 512."""
    packed = lambda rgb: (rgb[..., 0].astype(np.int64) << 16) | (rgb[..., 1].astype(np.int64) << 8) | rgb[..., 2]
    keys = packed(lut)
    order = np.argsort(keys, kind="stable")
    found = np.searchsorted(keys[order], packed(pixels))
    assert (keys[order][np.minimum(found, len(keys) - 1)] == packed(pixels)).all(), "a pixel of no level's colour"
    return order[found]


def test_large_table_drawn_whole_as_an_image():
    """The Transformer tutorial's 1024 x 512: every position and every dimension its own pixel (nothing averaged
    or skipped), each pixel the RdBu colour of its value, the axes on the cells' indices."""
    from playground import positional
    from playground.image_map import colour_table

    r = positional_encoding(512, 1024, 10000)
    assert r.table.shape == (1024, 512)
    trace = r.heatmap.data[0]
    assert trace.type == "image"
    pixels = decode_image(trace)
    assert pixels.shape == (1024, 512, 3)
    # each pixel: the colour of its value, computed here from the formula itself (numpy)
    pos = np.arange(1024)[:, None]
    dim = np.arange(512)[None, :]
    angle = pos / 10000.0 ** ((dim - dim % 2) / 512)
    expected = np.where(dim % 2 == 0, np.sin(angle), np.cos(angle))
    lut = colour_table("RdBu").astype(int)
    level = lut_levels(pixels, lut)
    np.testing.assert_allclose(level / 255 * 2 - 1, expected, atol=1 / 255 + 1e-3)
    # the fast dimensions keep their stripes: dimension 0 swings from red to blue within 4 positions
    assert level[:8, 0].max() - level[:8, 0].min() > 200
    # cell (row r, column c) sits on y = r, x = c; row 0 at the top; every column in the x range
    assert (trace.x0, trace.dx, trace.y0, trace.dy) == (0, 1, 0, 1)
    assert tuple(r.heatmap.layout.xaxis.range) == (-0.5, 511.5)
    assert tuple(r.heatmap.layout.yaxis.range) == (1023.5, -0.5)
    assert r.heatmap.layout.yaxis.scaleanchor is False  # cells fill the plot, not forced square
    assert r.heatmap.layout.height >= 1024  # a row of pixels per position
    # the hover: position, dimension, and the value the page computes from this formula
    assert "position %{y}" in trace.hovertemplate and "dimension %{x}" in trace.hovertemplate
    assert "%{customdata:.3f}" in trace.hovertemplate
    assert trace.meta == {"sinusoidal": {"base": 10000.0, "d_model": 512, "n_positions": 1024}}
    # a colour bar of the same scale, from -1 to 1
    bar = r.heatmap.data[1].marker
    assert bar.showscale and (bar.cmin, bar.cmax) == (-1.0, 1.0)
    # the figure carries ~0.3 MB, not the 2 MB of half a million values
    assert len(r.heatmap.to_json()) < 400_000
    assert r.heatmap.data[0].source and positional.MAX_HEATMAP_CELLS < r.table.size
    # the lines plot opens on the first positions, not 1024 positions of solid colour
    assert tuple(r.lines.layout.xaxis.range) == (0, positional.LINES_WINDOW - 1)


def test_a_large_models_tables_are_whole_images():
    """A GPT-2-sized model (1024 positions x 768): its learned table an image carrying its values,
    the sinusoidal one beside it computed by the page from the formula."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=300, block_size=1024, n_layer=1, n_head=2, d_model=96, pos_encoding="learned")).eval()
    r = model_position_table(model)
    learned, reference = r.figure.data[0], r.reference_figure.data[0]
    assert learned.type == reference.type == "image"
    assert decode_image(learned).shape == (1024, 96, 3)
    np.testing.assert_array_equal(np.asarray(learned.customdata), r.table.astype(np.float32))
    assert reference.meta == {"sinusoidal": {"base": 10000.0, "d_model": 96, "n_positions": 1024}}


def test_an_image_without_a_formula_carries_its_values():
    from playground.image_map import image_map

    z = np.random.default_rng(0).normal(size=(300, 260)).astype(np.float32)
    fig = image_map(z, "t", x_title="x", y_title="y", x_name="column", y_name="row", zmin=-3, zmax=3)
    np.testing.assert_array_equal(np.asarray(fig.data[0].customdata), z)
    assert decode_image(fig.data[0]).shape == (300, 260, 3)
    assert fig.data[0].meta is None


def test_small_heatmap_drawn_whole():
    r = positional_encoding(20, 100, 10000)
    assert r.heatmap.data[0].type == "heatmap"
    assert "position %{y}" in r.heatmap.data[0].hovertemplate and "dimension %{x}" in r.heatmap.data[0].hovertemplate
    assert np.asarray(r.heatmap.data[0].z).shape == (100, 20)
    np.testing.assert_allclose(np.asarray(r.heatmap.data[0].z), r.table, atol=5e-4)


def test_shipped_model_table():
    from playground.resources import shipped_model

    model = shipped_model()
    r = model_position_table()
    assert r.kind == model.config.pos_encoding == "learned"  # the shipped model learned its table
    np.testing.assert_allclose(r.table, model.position_table().detach().numpy())
    m = r.cosine.shape[0]
    np.testing.assert_allclose(np.diag(r.cosine), 1.0, atol=1e-6)
    np.testing.assert_allclose(r.cosine, r.cosine.T, atol=1e-12)
    assert f"{r.position_norm:.2f}" in r.note and f"{r.token_norm:.2f}" in r.note
    assert r.reference_figure is not None
    # what training taught it: the farther apart two positions, the less alike their vectors
    by_offset = [float(np.mean(np.diag(r.cosine, k))) for k in (1, m // 4, m // 2, 3 * m // 4)]
    assert by_offset == sorted(by_offset, reverse=True) and by_offset[0] - by_offset[2] > 0.3, by_offset
    assert f"{by_offset[0]:.2f}" in r.note and f"{by_offset[2]:.2f}" in r.note


@pytest.fixture
def sinusoidal_model():
    """A small sinusoidal-position GPT (the shipped one is learned)."""
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=48, n_layer=1, n_head=2, d_model=32, pos_encoding="sinusoidal")).eval()


def test_sinusoidal_model_table_is_the_formulas(sinusoidal_model):
    r = model_position_table(sinusoidal_model)
    assert r.kind == "sinusoidal" and r.table.shape == (48, 32)
    expected = positional_encoding(32, 48).table  # the tab's own formula, base 10000
    np.testing.assert_allclose(r.table, expected, atol=1e-6)
    assert r.max_abs_diff < 1e-6 and r.reference_figure is None  # nothing to compare it with
    np.testing.assert_allclose(np.asarray(r.figure.data[0].z), expected, atol=5e-4)  # 48 x 32: whole, sent to 3 decimals
    assert "sinusoidal" in r.figure.layout.title.text and "48 × 32" in r.figure.layout.title.text
    # every sinusoidal row has length sqrt(d_model / 2) = 4, whatever the position
    assert r.position_norm == pytest.approx(4.0, abs=1e-5)
    assert "sinusoidal formula" in r.note and "√(d_model/2) = 4.0" in r.note and f"{r.position_norm:.2f}" in r.note
    # cos(PE[p], PE[q]) depends only on the offset: constant along every diagonal
    for k in (1, 5, 20):
        np.testing.assert_allclose(np.diag(r.cosine, k), np.diag(r.cosine, k)[0], atol=1e-5)


def test_the_tab_shows_a_sinusoidal_models_table(sinusoidal_model):
    """The page built on a sinusoidal model: its note, its table, no learned-vs-formula pair."""
    import gradio as gr

    from playground.resources import Resources
    from playground.ui import positional as ui

    res = Resources(model=sinusoidal_model)
    with gr.Blocks() as demo:
        with gr.Tab("Positional encoding") as tab:
            ui.build(res, tab)
    blocks = demo.blocks  # {id: component}, the ids the events name
    # drawn when the tab opens: the tab's select event fills the note and the plots
    (opened,) = [fn for fn in demo.fns.values() if any(t[1] == "select" for t in fn.targets)]
    outputs = [blocks[o] for o in opened.outputs] if isinstance(opened.outputs[0], int) else list(opened.outputs)
    ids = [getattr(b, "elem_id", None) for b in outputs]
    assert ids[:4] == ["pe-model-note", "pe-model-table", "pe-model-reference", "pe-model-cosine"]
    note, _, _, _ = ui.Handlers(res).ui_model_table()
    assert "sinusoidal formula" in note and "learned" not in note
    reference = next(b for b in outputs if getattr(b, "elem_id", None) == "pe-model-reference")
    assert reference.visible is False  # no learned-vs-formula pair


def test_learned_model_table_beside_sinusoidal():
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, d_model=8, pos_encoding="learned")).eval()
    r = model_position_table(model)
    assert r.kind == "learned" and r.reference_figure is not None
    np.testing.assert_allclose(r.table, model.wpe.weight.detach().numpy())
    assert r.max_abs_diff > 0.1
    from playground.assets import seen_token_ids

    seen = torch.from_numpy(seen_token_ids())
    assert r.token_norm == pytest.approx(float(model.wte.weight.detach()[seen].norm(dim=1).mean()), rel=1e-5)
    assert r.position_norm == pytest.approx(float(model.wpe.weight.detach().norm(dim=1).mean()), rel=1e-5)
    # a vocabulary other than GPT-2's: the mean is over all of its token rows
    other = GPT(GPTConfig(vocab_size=300, block_size=16, n_layer=1, n_head=2, d_model=8, pos_encoding="learned"))
    assert model_position_table(other).token_norm == pytest.approx(float(other.wte.weight.detach().norm(dim=1).mean()), rel=1e-5)


def test_cosine_similarity_of_the_sinusoidal_table_depends_on_offset_only():
    from playground.similarity import cosine_matrix

    c = cosine_matrix(positional_encoding(64, 100).table)
    # every row has the same norm, so the cosine is the dot product's offset-only curve scaled
    np.testing.assert_allclose(np.diag(c, 5)[:-1], np.diag(c, 5)[1:], atol=1e-5)
    assert c[10, 11] > c[10, 60]


def test_the_api_table_is_the_tabs_table_without_its_figures():
    import json

    from playground.positional import positional_table

    d = json.loads(json.dumps(positional_table(6, 4, 10000)))
    assert d["table"][1][0] == pytest.approx(0.841471, abs=1e-6)
    assert d["table_rows"] == 4 and d["n_positions"] == 4 and len(d["frequencies"]) == len(d["wavelengths"]) == 3
    full = positional_encoding(64, 300, 500.0)
    cut = positional_table(64, 300, 500.0, max_values=64 * 299 + 63)  # one value short of the last row
    assert cut["table_rows"] == 299 and len(cut["table"]) == 299
    np.testing.assert_allclose(cut["table"], full.table[:299], atol=5e-7)
    np.testing.assert_allclose(cut["wavelengths"], full.wavelengths, rtol=1e-6)
    assert positional_table(64, 300, 500.0, max_values=64 * 300)["table_rows"] == 300  # exactly the whole table fits
    with pytest.raises(InputError, match="even"):
        positional_table(7, 4, 10000)
