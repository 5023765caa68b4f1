"""fp32 ONNX -> int8 ONNX: dynamic quantization of every MatMul weight, the tied head included."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from .metadata import set_metadata


def untie_head(proto: onnx.ModelProto) -> int:
    """Replace ``MatMul(x, Transpose(W))`` on an initializer W by ``MatMul(x, W^T)``.

    The tied output head reads the embedding through a Transpose, which the quantizer does not
    look through; without this the head (most of the bytes read per token) would stay fp32.
    The embedding's Gather keeps the fp32 table. Returns how many MatMuls were rewritten.
    """
    inits = {t.name: t for t in proto.graph.initializer}
    producers = {o: n for n in proto.graph.node for o in n.output}
    rewritten = 0
    for node in proto.graph.node:
        if node.op_type != "MatMul":
            continue
        src = producers.get(node.input[1])
        if src is None or src.op_type != "Transpose" or src.input[0] not in inits:
            continue
        perm = [list(a.ints) for a in src.attribute if a.name == "perm"]
        if perm and perm[0] != [1, 0]:
            continue
        weight = numpy_helper.to_array(inits[src.input[0]])
        name = f"{src.input[0]}.T"
        proto.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(weight.T), name))
        node.input[1] = name
        rewritten += 1
    used = {i for n in proto.graph.node for i in n.input}
    dead = [n for n in proto.graph.node if n.op_type == "Transpose" and not set(n.output) & used]
    for n in dead:
        proto.graph.node.remove(n)
    return rewritten


def quantize_int8(fp32_path: Path, out_path: Path, metadata: dict[str, str]) -> Path:
    """Write ``out_path``: int8 weights (per output channel), fp32 activations quantized on the fly."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    proto = onnx.load(str(fp32_path))
    if not untie_head(proto):
        raise RuntimeError(f"{fp32_path}: no tied output head found to quantize")
    with tempfile.TemporaryDirectory() as tmp:
        untied, quantized = Path(tmp) / "untied.onnx", Path(tmp) / "int8.onnx"
        onnx.save_model(proto, str(untied))
        quantize_dynamic(
            untied,
            quantized,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
        result = onnx.load(str(quantized))
    result.ir_version = proto.ir_version
    set_metadata(result, metadata)
    onnx.save_model(result, str(out_path))
    return out_path
