"""fp32 ONNX -> the two 8-bit ONNX files, with standard operators only. Both store every weight
matrix, the tied embedding / output table included, once, as int8 (values in [-63, 63], see
W_MAX) with one float scale per output channel (per token for the table); the weights are
quantized once and written into both. They differ in how a matrix product uses them:

- ``model_quantized.onnx`` (weight-only, :func:`folded_matmul`): ``MatMul(x, Cast(W_q) * W_scale)``
  on constants, which onnxruntime folds into float weights once, when it loads the file. At run
  time it is an fp32 graph on the 8-bit weights: fp32's speed and memory, a 26 % download, and
  native onnxruntime and onnxruntime-web (WebAssembly) give the same greedy ids as often as the
  fp32 file does.
- ``model_int8.onnx`` (integer, :func:`integer_matmul`): activations quantized per row (per token)
  as they arrive, then an integer product with exact int32 sums:

      x_scale = max(|x|, over the row) / 127                       # [..., 1]
      x_q     = uint8(round(x / x_scale) + 128)                    # symmetric, stored with offset 128
      y       = float(MatMulInteger(x_q, W_q, 128)) * W_scale * x_scale

  Faster than fp32 in native onnxruntime, but slower than fp32 in WebAssembly (no 8-bit dot
  product in its baseline SIMD), and rounding activations to 8 bits turns the last-bit differences
  between native and WebAssembly float kernels (LayerNorm, GELU, softmax) into an occasional
  rounding step: the browser's greedy ids part from native's at near ties.

In both, the embedding lookup reads the int8 table, ``Gather(W_q, ids) * Gather(W_scale, ids)``,
and the output head multiplies by ``Transpose(W_q)``, which onnxruntime folds into a constant when
it loads the file, so the file stores the table once.

Why these and not others (docs/export.md has the measurements, ``python -m benchmarks.quant_compare``
repeats them): MatMulNBits (onnxruntime's contrib op, the project's first format) quantizes
activations only natively (``accuracy_level=4``), so the browser gave other ids, and slower than
fp32; weight-only DequantizeLinear + MatMul dequantizes every weight on every call (several times
slower than fp32 natively); per-tensor activation scales (``DynamicQuantizeLinear``) make a row's
result depend on the rows beside it. The integer format multiplies ``* W_scale * x_scale`` in this
order: onnxruntime's MatMulIntegerToFloat fusion matches ``Cast(MatMulInteger) * (x_scale *
W_scale)`` assuming a per-tensor ``x_scale`` and computed wrong logits (error 2.6 instead of 0.16)
with a per-row one (onnxruntime 1.31).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .metadata import set_metadata

# Weights use 7 of int8's 8 bits, [-63, 63]. x86 CPUs without VNNI multiply uint8 by int8 with
# VPMADDUBSW, which adds two products into an int16 and saturates: 2 * 255 * 63 = 32,130 always
# fits, 2 * 255 * 127 does not. So every CPU computes the exact integer sums that WebAssembly and
# VNNI do. The 7-bit range costs no measurable loss (docs/export.md, "The 8-bit files").
W_MAX = 63


def quantize_weights(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one scale per index along ``axis``: w ≈ q * scale, q in [-W_MAX, W_MAX]."""
    other = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.abs(w).max(axis=other, keepdims=True)
    scale = np.where(amax > 0, amax / W_MAX, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -W_MAX, W_MAX).astype(np.int8)
    return q, scale.reshape(-1)


def dequantize_weights(w: np.ndarray, axis: int) -> np.ndarray:
    """``w`` as the 8-bit files store it, back in float32: ``float32(q) * scale``, the product
    the weight-only file computes when it is loaded (bit for bit)."""
    q, scale = quantize_weights(w, axis)
    shape = [1] * w.ndim
    shape[axis] = -1
    return q.astype(np.float32) * scale.reshape(shape)


# (x, W_q, W_scale, out) -> the nodes computing out = x @ W from the int8 weight and its scales.
MatMulBuilder = Callable[[str, str, str, str], list[onnx.NodeProto]]


def folded_matmul(x: str, w_q: str, w_scale: str, out: str) -> list[onnx.NodeProto]:
    """Weight-only: ``x @ (Cast(W_q) * W_scale)``. W_q and W_scale are constants, so onnxruntime
    computes the float weight once when it loads the file; at run time this is fp32's MatMul."""
    return [
        helper.make_node("Cast", [w_q], [f"{out}.w_float"], to=TensorProto.FLOAT, name=f"{out}.w_float"),
        helper.make_node("Mul", [f"{out}.w_float", w_scale], [f"{out}.w"], name=f"{out}.w"),
        helper.make_node("MatMul", [x, f"{out}.w"], [out], name=f"{out}.matmul"),
    ]


def integer_matmul(x: str, w_q: str, w_scale: str, out: str) -> list[onnx.NodeProto]:
    """out = x @ W with int8 weights and activations quantized per row; exact int32 sums."""
    node = lambda op, inputs, name, **kw: helper.make_node(op, inputs, [f"{out}.{name}"], name=f"{out}.{name}", **kw)  # noqa: E731
    return [
        node("Abs", [x], "abs"),
        node("ReduceMax", [f"{out}.abs", "quant.last_axis"], "row_max", keepdims=1),
        node("Max", [f"{out}.row_max", "quant.tiny"], "row_max_pos"),
        node("Mul", [f"{out}.row_max_pos", "quant.inv127"], "x_scale"),
        node("Div", [x, f"{out}.x_scale"], "x_div"),
        node("Round", [f"{out}.x_div"], "x_round"),
        node("Add", [f"{out}.x_round", "quant.offset"], "x_shift"),
        node("Cast", [f"{out}.x_shift"], "x_q", to=TensorProto.UINT8),
        node("MatMulInteger", [f"{out}.x_q", w_q, "quant.zero_point"], "int32"),
        node("Cast", [f"{out}.int32"], "sum", to=TensorProto.FLOAT),
        node("Mul", [f"{out}.sum", w_scale], "w_scaled"),
        helper.make_node("Mul", [f"{out}.w_scaled", f"{out}.x_scale"], [out], name=f"{out}.dequantize"),
    ]


@dataclass(frozen=True)
class Format:
    """One 8-bit file: how its matrix products use the int8 weights, and its ``quantization``
    metadata (shown by the app's Model tab)."""

    matmul: MatMulBuilder
    quantization: str


WEIGHTS_TEXT = "int8 weights (the tied embedding / output table included), symmetric per output channel in [-63, 63]"
# Keys as in export.build.artifact_paths: "quantized" is onnx/model_quantized.onnx, "int8" onnx/model_int8.onnx.
FORMATS: dict[str, Format] = {
    "quantized": Format(
        folded_matmul,
        f"weight-only: {WEIGHTS_TEXT}, turned into float32 once when the file is loaded (Cast * scale on "
        "constants); float32 compute, so native onnxruntime and onnxruntime-web agree as fp32 does",
    ),
    "int8": Format(
        integer_matmul,
        f"integer: {WEIGHTS_TEXT}, activations symmetric per token, MatMulInteger (exact int32 sums); "
        "fastest natively on a CPU, slower than fp32 in WebAssembly",
    ),
}


def quantize_files(fp32_path: Path, outputs: Mapping[Path, tuple[MatMulBuilder, dict[str, str]]]) -> None:
    """Write every ``path: (matmul, metadata)`` of ``outputs``: ``fp32_path`` with every constant
    MatMul weight and the tied embedding / output table in int8, each product built by ``matmul``.
    The fp32 file is read and its weights quantized once for all outputs, so they hold the same
    int8 weights."""
    proto = onnx.load(str(fp32_path))
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    table = _tied_table(graph, inits)
    # name -> axis of its scales: one per token row of the table, one per output column [in, out] of a weight
    axes = {table: 0} | {n.input[1]: 1 for n in graph.node if n.op_type == "MatMul" and n.input[1] in inits}
    added = list(_constants())
    for name, axis in axes.items():
        q, scale = quantize_weights(numpy_helper.to_array(inits[name]), axis)
        added += [numpy_helper.from_array(q, f"{name}.int8"), numpy_helper.from_array(scale, f"{name}.scale")]
    nodes = list(graph.node)
    kept = [t for t in graph.initializer if t.name not in axes]
    graph.ClearField("node")
    graph.ClearField("initializer")  # so each output copies only the graph's frame, not 70 MB of fp32 weights
    for out_path, (matmul, metadata) in outputs.items():
        model = onnx.ModelProto()
        model.CopyFrom(proto)
        model.graph.node.extend(_rewrite(nodes, table, set(axes) - {table}, matmul))
        used = {i for n in model.graph.node for i in n.input}
        model.graph.initializer.extend(t for t in kept + added if t.name in used)
        set_metadata(model, metadata)
        onnx.save_model(model, str(out_path))


def quantize_int8(fp32_path: Path, out_path: Path, metadata: dict[str, str], matmul: MatMulBuilder | None = None) -> Path:
    """One 8-bit file (default: the integer format); ``python -m benchmarks.quant_compare`` passes
    other ``matmul`` builders to measure the alternatives."""
    quantize_files(fp32_path, {out_path: (matmul or integer_matmul, metadata)})
    return out_path


def _rewrite(nodes: list[onnx.NodeProto], table: str, weights: set[str], matmul: MatMulBuilder) -> list[onnx.NodeProto]:
    """The fp32 nodes with each read of ``table`` or of a weight in ``weights`` going through its
    int8 form (``{name}.int8``, ``{name}.scale``)."""
    q_name, scale_name = f"{table}.int8", f"{table}.scale"
    head_inputs: dict[str, str] = {}  # the table's Transpose (the head's weight) now transposes the int8 table
    out: list[onnx.NodeProto] = []
    for node in nodes:
        if node.op_type == "Gather" and node.input[0] == table:
            out += _dequantized_rows(q_name, scale_name, node.input[1], node.output[0])
        elif node.op_type == "Transpose" and node.input[0] == table:
            out.append(helper.make_node("Transpose", [q_name], [f"{node.output[0]}.int8"], perm=[1, 0], name=f"{node.name}.int8"))
            head_inputs[node.output[0]] = scale_name
        elif node.op_type == "MatMul" and node.input[1] in head_inputs:
            x, w = node.input
            out += matmul(x, f"{w}.int8", head_inputs[w], node.output[0])
        elif node.op_type == "MatMul" and node.input[1] in weights:
            x, w = node.input
            out += matmul(x, f"{w}.int8", f"{w}.scale", node.output[0])
        else:
            out.append(node)
    return out


def _tied_table(graph: onnx.GraphProto, inits: dict[str, onnx.TensorProto]) -> str:
    """The initializer that both the embedding's Gather and the head's Transpose read."""
    gathered = {n.input[0] for n in graph.node if n.op_type == "Gather" and n.input[0] in inits}
    transposed = {n.input[0] for n in graph.node if n.op_type == "Transpose" and n.input[0] in inits}
    tied = sorted(gathered & transposed)
    if len(tied) != 1:
        raise RuntimeError(f"expected one tied embedding / output table, found {tied or 'none'}")
    return tied[0]


def _dequantized_rows(q_name: str, scale_name: str, ids: str, out: str) -> list[onnx.NodeProto]:
    """embedding = Gather(table_q, ids) * Gather(scale, ids)[..., None]: only the looked-up rows."""
    return [
        helper.make_node("Gather", [q_name, ids], [f"{out}.int8"], axis=0, name=f"{out}.gather_q"),
        helper.make_node("Cast", [f"{out}.int8"], [f"{out}.float"], to=TensorProto.FLOAT, name=f"{out}.cast"),
        helper.make_node("Gather", [scale_name, ids], [f"{out}.row_scale"], axis=0, name=f"{out}.gather_scale"),
        helper.make_node("Unsqueeze", [f"{out}.row_scale", "quant.last_axis"], [f"{out}.scale"], name=f"{out}.unsqueeze"),
        helper.make_node("Mul", [f"{out}.float", f"{out}.scale"], [out], name=f"{out}.dequantize"),
    ]


def _constants() -> list[onnx.TensorProto]:
    """Constants of the embedding lookup and the integer format (a file keeps those its nodes read)."""
    return [
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "quant.last_axis"),
        numpy_helper.from_array(np.array(1e-30, dtype=np.float32), "quant.tiny"),  # an all-zero row: scale > 0
        numpy_helper.from_array(np.array(1 / 127, dtype=np.float32), "quant.inv127"),
        numpy_helper.from_array(np.array(128, dtype=np.float32), "quant.offset"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "quant.zero_point"),
    ]
