"""Random numbers that the server and the browser draw alike: Philox4x32-10, a counter-based
generator (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), specified here
and in ``web/engine/draws.js`` line for line.

Draw ``j`` of a stream is a pure function of ``(seed, stream, lane, j)``: no state is carried from
one draw to the next, so the i-th token of a seeded generation, the i-th batch of a training run or
the k-th weight of an initialisation is the same number whichever engine asks, in whatever order.
Both implementations are checked against the generator's published known-answer vectors
(Random123's ``tests/kat_vectors``) and against each other (``tests/runtime/test_draws.py``).

The specification:

- key = (seed mod 2**32, stream); counter of block b in lane l = (b mod 2**32, b div 2**32, l, 0);
  Philox4x32-10 turns (counter, key) into four 32-bit words w0..w3.
- uniform j (in [0, 1), 53 bits) is block j div 2, words (w0, w1) when j is even, (w2, w3) when
  odd: ((wa >> 5) * 2**26 + (wb >> 6)) / 2**53.
- normal j (Box-Muller) = sqrt(-2 ln(1 - u[2j])) * cos(2 pi u[2j + 1]) from the uniforms of the
  same seed, stream and lane. ``log`` and ``cos`` are the platform's: numpy and JavaScript may
  round them an ulp apart (about 1e-16 of the value), which a float32 weight does not keep.
- integer j below n = floor(u[j] * n) (n at most 2**32: the bias is under 2**-21).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SAMPLING", "INIT", "BATCHES", "SAMPLES", "STREAMS", "philox4x32", "uniform", "normal", "integers"]

# The streams: one per use, so two uses of one seed never share numbers. web/engine/draws.js has
# the same table (tests/runtime/test_draws.py holds them equal).
SAMPLING = 1  # the tokens of a seeded generation: uniform i draws token i
INIT = 2  # a model's initial weights: lane = the parameter's index
BATCHES = 3  # a training run's batches: lane = the step
SAMPLES = 4  # a training run's samples: lane = the step
STREAMS = {"sampling": SAMPLING, "init": INIT, "batches": BATCHES, "samples": SAMPLES}

M0, M1 = 0xD2511F53, 0xCD9E8D57  # the round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # the key's increments (the golden ratio, sqrt(3) - 1)
ROUNDS = 10
MASK32 = 0xFFFFFFFF
TWO_53 = float(2**53)
CHUNK = 1 << 14  # blocks per call of philox4x32


def philox4x32(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox4x32-10 of each row of ``counters`` [N, 4] (uint32) under ``key`` (two 32-bit words)."""
    c = np.asarray(counters, dtype=np.uint32).reshape(-1, 4).astype(np.uint64)  # 64 bits hold each product
    c0, c1, c2, c3 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    m0, m1, mask, shift = np.uint64(M0), np.uint64(M1), np.uint64(MASK32), np.uint64(32)
    k0, k1 = key[0] & MASK32, key[1] & MASK32
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        p0, p1 = c0 * m0, c2 * m1
        c0, c1, c2, c3 = (p1 >> shift) ^ c1 ^ np.uint64(k0), p1 & mask, (p0 >> shift) ^ c3 ^ np.uint64(k1), p0 & mask
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def _check(seed: int, stream: int, n: int, start: int, lane: int) -> None:
    for name, value in (("seed", seed), ("stream", stream), ("n", n), ("start", start), ("lane", lane)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
    if stream > MASK32 or lane > MASK32:
        raise ValueError("stream and lane must be below 2**32")
    if start + n > 2**53:
        raise ValueError("at most 2**53 draws per stream and lane")


def uniform(seed: int, stream: int, n: int, start: int = 0, lane: int = 0) -> np.ndarray:
    """Uniforms ``start .. start + n - 1`` of (seed, stream, lane), float64 in [0, 1)."""
    _check(seed, stream, n, start, lane)
    if n == 0:
        return np.zeros(0)
    first, last = start // 2, (start + n - 1) // 2
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    counters = np.zeros((len(blocks), 4), dtype=np.uint32)
    counters[:, 0] = (blocks & np.uint64(MASK32)).astype(np.uint32)
    counters[:, 1] = (blocks >> np.uint64(32)).astype(np.uint32)
    counters[:, 2] = lane
    # Each block's words (w0, w1), (w2, w3) are the pairs of uniforms 2b and 2b + 1, in order
    # (in chunks that stay in the processor's cache: twice as fast for a large table).
    words = np.concatenate([philox4x32(counters[i:i + CHUNK], (seed & MASK32, stream)) for i in range(0, len(counters), CHUNK)])
    pairs = words.reshape(-1, 2)[start - 2 * first:][:n].astype(np.uint64)
    return ((pairs[:, 0] >> np.uint64(5)) << np.uint64(26) | (pairs[:, 1] >> np.uint64(6))).astype(np.float64) / TWO_53


def normal(seed: int, stream: int, n: int, start: int = 0, lane: int = 0) -> np.ndarray:
    """Standard normals ``start .. start + n - 1`` of (seed, stream, lane), float64 (Box-Muller)."""
    _check(seed, stream, n, start, lane)
    u = uniform(seed, stream, 2 * n, 2 * start, lane)
    return np.sqrt(-2.0 * np.log(1.0 - u[0::2])) * np.cos(2.0 * np.pi * u[1::2])


def integers(seed: int, stream: int, n: int, high: int, start: int = 0, lane: int = 0) -> np.ndarray:
    """Whole numbers in [0, high): floor(uniform * high), int64."""
    if not isinstance(high, (int, np.integer)) or not 1 <= high <= 2**32:
        raise ValueError(f"high must be a whole number from 1 to 2**32, not {high!r}")
    return np.floor(uniform(seed, stream, n, start, lane) * high).astype(np.int64)
