"""What is inside an ONNX file: its inputs/outputs and operator counts (the app's Model tab)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TypedDict

import onnx


class TensorInfo(TypedDict):
    name: str
    dtype: str  # numpy name, e.g. "int64", "float32"
    shape: list[int | str]  # ints for fixed sizes, names (e.g. "batch_size") for dynamic ones


class GraphInfo(TypedDict):
    path: str
    size_mb: float
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    op_counts: dict[str, int]  # most frequent first
    n_nodes: int
    n_initializers: int
    n_weights: int  # elements in all initializers
    opset: int
    ir_version: int
    metadata: dict[str, str]


def _tensor(value: onnx.ValueInfoProto) -> TensorInfo:
    t = value.type.tensor_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
    shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
    return {"name": value.name, "dtype": dtype, "shape": shape}


def inspect_onnx(path: str | Path) -> GraphInfo:
    """Read ``path`` and describe its graph (no onnxruntime session needed)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: build it with `python -m export`")
    proto = onnx.load(str(path))
    ops = Counter(node.op_type for node in proto.graph.node)
    default_opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    return {
        "path": str(path),
        "size_mb": path.stat().st_size / 1e6,
        "inputs": [_tensor(v) for v in proto.graph.input],
        "outputs": [_tensor(v) for v in proto.graph.output],
        "op_counts": dict(ops.most_common()),
        "n_nodes": len(proto.graph.node),
        "n_initializers": len(proto.graph.initializer),
        "n_weights": sum(int(_numel(t.dims)) for t in proto.graph.initializer),
        "opset": default_opset,
        "ir_version": proto.ir_version,
        "metadata": {p.key: p.value for p in proto.metadata_props},
    }


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n
