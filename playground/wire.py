"""Numbers for a web view (web/views/), packed for the page: what a handler hands a view through
playground/ui/web_view.py, and what web/views/wire.js unpacks into the plain nested arrays the
view draws from.

JSON would write a float32 as up to 17 digits; a view's payload is mostly float32 vectors, so
they travel as their own bytes, base64 (5.3 bytes a number, exactly the numbers PyTorch computed):

- ``{"$f32": base64 of little-endian float32, "shape": [...]}``: any float array;
- ``{"$u16": base64 of little-endian uint16, "shape": [...], "tril": bool}``: values in [0, 1]
  (attention weights) as round(value * 65535), 2.7 bytes a number, within 7.7e-6; with ``tril``
  only each trailing square matrix's lower triangle (the diagonal included) travels, the rest is 0;
- ``{"$at": {"index": value, ...}, "length": n}``: a list of ``n`` with values at a few indices
  only (a token's rows), None elsewhere.

Everything else (ints, strings, None, dicts, lists) goes as JSON. The whole value travels as one
JSON string (:func:`pack`): Gradio's page makes every node of a component's value reactive, which
for a view's tens of thousands of nodes took seconds; a string is one.
No Gradio here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Unit", "Sparse", "encode", "pack", "plain", "UNIT_STEPS"]

UNIT_STEPS = 65535  # a $u16 value is k / UNIT_STEPS


@dataclass(frozen=True)
class Unit:
    """An array of values in [0, 1] (softmax weights) to pack as ``$u16``; ``tril``: each trailing
    square matrix is causal (zero above its diagonal), so only its lower triangle is sent."""

    values: np.ndarray
    tril: bool = False


@dataclass(frozen=True)
class Sparse:
    """A list of ``length`` holding ``items`` (index -> value) and None elsewhere."""

    length: int
    items: Mapping[int, Any] = field(default_factory=dict)

    def values(self) -> list:
        out: list = [None] * self.length
        for i, v in self.items.items():
            out[i] = v
        return out


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def _unit(u: Unit) -> dict[str, Any]:
    a = np.asarray(u.values, dtype=np.float64)
    if u.tril:
        n = a.shape[-1]
        assert a.shape[-2] == n, f"tril needs square trailing matrices, not {a.shape}"
        rows, cols = np.tril_indices(n)
        a = a[..., rows, cols]
    q = np.rint(np.clip(a, 0.0, 1.0) * UNIT_STEPS).astype("<u2")
    return {"$u16": _b64(q), "shape": list(np.shape(u.values)), "tril": u.tril}


def encode(obj: Any) -> Any:
    """``obj`` with every float ndarray as ``$f32`` and every :class:`Unit` as ``$u16``; integer
    arrays and numpy scalars become plain JSON numbers."""
    if isinstance(obj, Unit):
        return _unit(obj)
    if isinstance(obj, Sparse):
        return {"$at": {str(i): encode(v) for i, v in sorted(obj.items.items())}, "length": obj.length}
    if isinstance(obj, np.ndarray):
        if np.issubdtype(obj.dtype, np.floating):
            return {"$f32": _b64(obj.astype("<f4")), "shape": list(obj.shape)}
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    return obj


def pack(obj: Any) -> str:
    """``obj`` encoded, as one compact JSON string: what a web view's component is given."""
    return json.dumps(encode(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON lists and numbers (what wire.js gives the view, here for the tests and
    the API): arrays as nested lists, a :class:`Unit` as its values."""
    if isinstance(obj, Unit):
        return np.asarray(obj.values, dtype=np.float64).tolist()
    if isinstance(obj, Sparse):
        return plain(obj.values())
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
