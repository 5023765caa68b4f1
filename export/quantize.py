"""fp32 ONNX -> int8 ONNX: every MatMul weight, the tied head included, as 8-bit MatMulNBits.

Why MatMulNBits (onnxruntime's com.microsoft block-quantized MatMul) with bits=8 rather than
``quantize_dynamic``'s DynamicQuantizeLinear + MatMulInteger: batch-1 decoding is one GEMV per
weight, and measured on the project's EPYC (Zen 4, AVX512-VNNI; CPU time, 1 thread, alternating
runs) the output head alone took 495 us as MatMulInteger (per-channel s8) against 224-244 us as
MatMulNBits 8-bit with accuracy_level 4 (int8 activations, VNNI kernel), and the whole int8 model
decoded 1.7-1.9x faster (523 -> 904-1001 tok per CPU-second). Its error is no larger: relative
head error 1.0e-2 against 1.2e-2 (activations are quantized per block instead of per tensor).
accuracy_level 0 (fp32 compute) is 200x slower on this CPU: never use it here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from .metadata import set_metadata

BITS = 8
# One scale per 256 input features: per output channel for the d_model=256 layers (as the old
# per-channel int8), 4 blocks for the 1024-wide feed-forward projection. Block 128 measured ~10 %
# slower on the head (244 vs 224 us) for a slightly smaller error (9.4e-3 vs 1.0e-2).
BLOCK_SIZE = 256
ACCURACY_LEVEL = 4  # int8 activations: the AVX512-VNNI / AVX2 integer kernels
QUANTIZATION = f"int8: MatMulNBits {BITS}-bit weights (symmetric, blocks of up to {BLOCK_SIZE} inputs, int8 activations), head included"


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
    """Write ``out_path``: every MatMul with a constant weight as an 8-bit MatMulNBits."""
    quantizer_cls = _nbits_quantizer()
    proto = onnx.load(str(fp32_path))
    if not untie_head(proto):
        raise RuntimeError(f"{fp32_path}: no tied output head found to quantize")
    quantizer = quantizer_cls(
        proto, bits=BITS, block_size=block_size(proto), is_symmetric=True, accuracy_level=ACCURACY_LEVEL,
        op_types_to_quantize=("MatMul",),
    )
    quantizer.process()
    result = quantizer.model.model
    result.ir_version = proto.ir_version
    set_metadata(result, metadata)
    onnx.save_model(result, str(out_path))
    return out_path


def block_size(proto: onnx.ModelProto) -> int:
    """BLOCK_SIZE, or less for a model whose narrowest MatMul weight has fewer input rows.

    MatMulNBits pads every column to whole blocks: a 64-wide model at block 256 would store its
    head 4x over. Block sizes are powers of two from 16 on.
    """
    inits = {t.name: t for t in proto.graph.initializer}
    rows = [inits[n.input[1]].dims[0] for n in proto.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    narrowest = min(rows, default=BLOCK_SIZE)
    size = BLOCK_SIZE
    while size > 16 and size > narrowest:
        size //= 2
    return size


def _nbits_quantizer() -> type:
    """onnxruntime's MatMulNBitsQuantizer, imported without its side effects on logging.

    The module calls ``logging.basicConfig(level=INFO)`` on import (the root logger of the whole
    process, the app's included) and logs a line per node: undo the first, silence the second.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.quantization import matmul_nbits_quantizer as module
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    logging.getLogger(module.__name__).setLevel(logging.WARNING)
    return module.MatMulNBitsQuantizer
