"""A small RGB image as a PNG ``data:`` URI, with no imaging library: for pictures of a few
thousand numbers (a vector's colour strip, an attention matrix) that the browser draws as one
element rather than one element per number."""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

__all__ = ["png_bytes", "png_data_uri"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(rgb: np.ndarray) -> bytes:
    """An ``[height, width, 3]`` uint8 array as PNG bytes (8-bit RGB, no filter, zlib level 6)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] < 1 or rgb.shape[1] < 1:
        raise ValueError(f"expected a [height, width, 3] array, got shape {rgb.shape}")
    height, width = rgb.shape[:2]
    # each row starts with its filter type, 0 (none)
    raw = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rgb.reshape(height, width * 3)], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def png_data_uri(rgb: np.ndarray) -> str:
    """:func:`png_bytes` as a ``data:image/png;base64,...`` URI for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode("ascii")
