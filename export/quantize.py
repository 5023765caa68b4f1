"""fp32 ONNX -> 8-bit ONNX with standard operators only: every weight matrix, the tied
embedding / output table included, stored once as int8 (values in [-63, 63], see W_MAX) with one
float scale per output channel.

Each ``MatMul(x, W)`` on a constant W becomes an integer matrix product on activations quantized
per row (per token) as they arrive:

    x_scale = max(|x|, over the row) / 127                       # [..., 1]
    x_q     = uint8(round(x / x_scale) + 128)                    # symmetric, stored with offset 128
    y       = float(MatMulInteger(x_q, W_q, 128)) * W_scale * x_scale   # exact int32 sums

and the embedding lookup reads the same int8 table: ``Gather(W_q, ids) * Gather(W_scale, ids)``.
The output head multiplies by ``Transpose(W_q)``, which onnxruntime folds into a constant when it
loads the file, so the file stores the table once.

Why this format (docs/export.md has the measurements):
- integer sums are exact, so onnxruntime-web (WebAssembly) and native onnxruntime compute the
  same logits and the same greedy ids; MatMulNBits (onnxruntime's contrib op, the previous
  format) quantizes activations only natively (``accuracy_level=4``), so the browser gave other
  ids, 4x slower than fp32 there; weight-only DequantizeLinear + MatMul dequantizes every weight
  on every call (5x slower than fp32 natively);
- per row, not per tensor as ``DynamicQuantizeLinear`` does: a token's result does not depend on
  the other rows of its batch, so a padded or shared batch gives each row what it gives alone
  (up to a rounding step where fp32 attention sums in another order);
- ``* W_scale * x_scale`` in this order: onnxruntime's MatMulIntegerToFloat fusion matches
  ``Cast(MatMulInteger) * (x_scale * W_scale)`` assuming a per-tensor ``x_scale`` and computed
  wrong logits (error 2.6 instead of 0.16) with a per-row one (onnxruntime 1.31).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .metadata import set_metadata

QUANTIZATION = (
    "int8: weights (the tied embedding / output table included) symmetric per output channel in "
    "[-63, 63], activations symmetric per token (MatMulInteger, standard ops)"
)


# Weights use 7 of int8's 8 bits, [-63, 63]. x86 CPUs without VNNI multiply uint8 by int8 with
# VPMADDUBSW, which adds two products into an int16 and saturates: 2 * 255 * 63 = 32,130 always
# fits, 2 * 255 * 127 does not. So every CPU computes the exact integer sums that WebAssembly and
# VNNI do. Measured on 64 validation windows, the 7-bit range costs nothing (4.44262 against
# 4.44265 with [-127, 127]; fp32 4.44164).
W_MAX = 63


def quantize_weights(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one scale per index along ``axis``: w ≈ q * scale, q in [-W_MAX, W_MAX]."""
    other = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.abs(w).max(axis=other, keepdims=True)
    scale = np.where(amax > 0, amax / W_MAX, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale), -W_MAX, W_MAX).astype(np.int8)
    return q, scale.reshape(-1)


# (x, W_q, W_scale, out) -> the nodes computing out = x @ W from the int8 weight and its scales.
MatMulBuilder = Callable[[str, str, str, str], list[onnx.NodeProto]]


def quantize_int8(fp32_path: Path, out_path: Path, metadata: dict[str, str], matmul: MatMulBuilder | None = None) -> Path:
    """Write ``out_path``: ``fp32_path`` with every constant MatMul weight and the embedding in int8.

    ``matmul`` builds each product (default :func:`integer_matmul`; ``python -m export.quant_compare``
    measures the alternatives)."""
    matmul = matmul or integer_matmul
    proto = onnx.load(str(fp32_path))
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    table = _tied_table(graph, inits)
    table_q, table_scale = quantize_weights(numpy_helper.to_array(inits[table]), axis=0)  # one scale per token row
    q_name, scale_name = f"{table}.int8", f"{table}.scale"
    added = [numpy_helper.from_array(table_q, q_name), numpy_helper.from_array(table_scale, scale_name), *_constants()]
    # The table's Transpose (the head's weight) now transposes the int8 table.
    head_inputs: dict[str, str] = {}
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] == table:
            nodes += _dequantized_rows(q_name, scale_name, node.input[1], node.output[0])
        elif node.op_type == "Transpose" and node.input[0] == table:
            nodes.append(helper.make_node("Transpose", [q_name], [f"{node.output[0]}.int8"], perm=[1, 0], name=f"{node.name}.int8"))
            head_inputs[node.output[0]] = scale_name
        elif node.op_type == "MatMul" and node.input[1] in head_inputs:
            x, w = node.input
            nodes += matmul(x, f"{w}.int8", head_inputs[w], node.output[0])
        elif node.op_type == "MatMul" and node.input[1] in inits:
            x, w = node.input
            w_q, w_scale = quantize_weights(numpy_helper.to_array(inits[w]), axis=1)  # [in, out]: per output column
            added += [numpy_helper.from_array(w_q, f"{w}.int8"), numpy_helper.from_array(w_scale, f"{w}.scale")]
            nodes += matmul(x, f"{w}.int8", f"{w}.scale", node.output[0])
        else:
            nodes.append(node)
    graph.ClearField("node")
    graph.node.extend(nodes)
    used = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in used]
    graph.ClearField("initializer")
    graph.initializer.extend(kept + [t for t in added if t.name in used])
    set_metadata(proto, metadata)
    onnx.save_model(proto, str(out_path))
    return out_path


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
    return [
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "quant.last_axis"),
        numpy_helper.from_array(np.array(1e-30, dtype=np.float32), "quant.tiny"),  # an all-zero row: scale > 0
        numpy_helper.from_array(np.array(1 / 127, dtype=np.float32), "quant.inv127"),
        numpy_helper.from_array(np.array(128, dtype=np.float32), "quant.offset"),
        numpy_helper.from_array(np.array(128, dtype=np.uint8), "quant.zero_point"),
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
