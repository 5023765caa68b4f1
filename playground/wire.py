"""Numbers for a web view (web/views/), packed for the page: what a handler hands a view through
playground/ui/web_view.py, and what web/views/wire.js unpacks into the plain nested arrays the
view draws from.

JSON would write a float32 as up to 17 digits; a view's payload is mostly float32 vectors, so
they travel as their own bytes, base64 (5.3 bytes a number, exactly the numbers PyTorch computed):

- ``{"$f32": base64 of little-endian float32, "shape": [...]}``: any float array;
- ``{"$u16": base64 of little-endian uint16, "shape": [...], "tril": bool}``: values in [0, 1]
  (attention weights) as round(value * 65535), 2.7 bytes a number, within 7.7e-6; with ``tril``
  only each trailing square matrix's lower triangle (the diagonal included) travels, the rest is 0.

Everything else (ints, strings, None, dicts, lists) goes as JSON. No Gradio here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Unit", "encode", "plain", "UNIT_STEPS"]

UNIT_STEPS = 65535  # a $u16 value is k / UNIT_STEPS


@dataclass(frozen=True)
class Unit:
    """An array of values in [0, 1] (softmax weights) to pack as ``$u16``; ``tril``: each trailing
    square matrix is causal (zero above its diagonal), so only its lower triangle is sent."""

    values: np.ndarray
    tril: bool = False


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


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON lists and numbers (what wire.js gives the view, here for the tests and
    the API): arrays as nested lists, a :class:`Unit` as its values."""
    if isinstance(obj, Unit):
        return np.asarray(obj.values, dtype=np.float64).tolist()
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
