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


def png_bytes(pixels: np.ndarray, palette: np.ndarray | None = None) -> bytes:
    """PNG bytes (8 bits a channel, no filter, zlib level 6) of an ``[height, width, 3]`` uint8 RGB
    array, or, given ``palette`` ([n <= 256, 3] uint8), of an ``[height, width]`` array of indices
    into it: one byte a pixel, a third of the RGB file for a picture drawn through a colour scale."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    indexed = palette is not None
    if pixels.ndim != (2 if indexed else 3) or (not indexed and pixels.shape[2] != 3) or min(pixels.shape[:2]) < 1:
        raise ValueError(f"expected a [height, width{'' if indexed else ', 3'}] array, got shape {pixels.shape}")
    height, width = pixels.shape[:2]
    # each row starts with its filter type, 0 (none)
    rows = pixels.reshape(height, -1)
    raw = np.concatenate([np.zeros((height, 1), dtype=np.uint8), rows], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 8, 3 if indexed else 2, 0, 0, 0)
    chunks = _chunk(b"IHDR", header)
    if indexed:
        palette = np.ascontiguousarray(palette, dtype=np.uint8)
        if palette.ndim != 2 or palette.shape[1] != 3 or not 1 <= len(palette) <= 256:
            raise ValueError(f"expected a [n <= 256, 3] palette, got shape {palette.shape}")
        chunks += _chunk(b"PLTE", palette.tobytes())
    return b"\x89PNG\r\n\x1a\n" + chunks + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def png_data_uri(rgb: np.ndarray) -> str:
    """:func:`png_bytes` as a ``data:image/png;base64,...`` URI for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(rgb)).decode("ascii")
