"""Choosing the next token from logits: greedy, temperature, top-k, top-p, and the draw.

:func:`sample` is the rule, written out as the lesson tells it; the server and the browser
(``web/engine/sampling.js``) both follow it, so a seeded generation draws the same tokens from the
same logits in both. Token i of a seeded generation draws with ``runtime.draws.uniform(seed,
draws.SAMPLING, 1, start=i, lane=sample)`` (sample 0 of several is the generation alone).

The rest of this module is the fast path the decoding loop runs (:func:`choose_rows`): it sorts
no more of the vocabulary than the cut and the draw need, and is tested against :func:`sample`
(``tests/runtime/test_sampling.py``) on real logits, ties and near ties, at the top-k and top-p boundaries.
Both work in float64; they may part only where a uniform or p falls within the rounding of a sum
(about 1e-16 of it) from a boundary between two tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


def sample(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None, u: float) -> int:
    """The next token of one row [V] of logits, drawn with the uniform ``u`` in [0, 1) (an array
    of uniforms: a token for each):

    1. temperature 0 is greedy: the most likely token (the lowest id among equal logits);
    2. else the tokens are ranked, most likely first (by logit; equal logits: the lower id first);
    3. top-k keeps the first k, and every later token whose logit equals the k-th's;
    4. each kept token weighs w = exp((logit - the top logit) / temperature), softmax's numerator;
    5. top-p keeps the first tokens while the weight before each is below p of their total;
    6. the token drawn is the first whose running weight exceeds u of the kept tokens' total.
    """
    if temperature == 0:
        return int(np.argmax(logits)) if np.ndim(u) == 0 else np.full(np.shape(u), np.argmax(logits))
    ids, cdf = ranked(logits, temperature, top_k, top_p)
    drawn = ids[np.searchsorted(cdf, np.multiply(u, cdf[-1]), side="right")]
    return int(drawn) if np.ndim(u) == 0 else drawn


def ranked(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Steps 2-5 of :func:`sample`: the ids it may draw, most likely first, and their running weight."""
    order = np.argsort(-logits, kind="stable")  # most likely first; equal logits: the lower id first
    x = logits[order].astype(np.float64)
    if top_k is not None and top_k < len(x):
        x = x[: np.count_nonzero(x >= x[top_k - 1])]  # the k-th's ties stay
    with np.errstate(over="ignore"):  # (a tiny temperature sends the others to -inf: weight 0)
        w = np.exp((x - x[0]) / temperature)
    cdf = np.cumsum(w)
    if top_p is not None and top_p < 1:
        cdf = cdf[: np.searchsorted(cdf, top_p * cdf[-1]) + 1]  # up to the first reaching p of the total
    return order[: len(cdf)], cdf


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (probabilities shown to users should sum to 1)."""
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def sampling_distribution(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The distribution a token is drawn from, [B, V]: softmax(logits / T), then top-k, then top-p.

    top-k keeps the k most likely tokens (ties at the k-th value all stay); top-p keeps the
    smallest set of most likely tokens whose probabilities add up to at least p. Both renormalise.
    """
    probs = np.zeros(logits.shape, dtype=np.float64)
    if temperature == 0:  # the limit T -> 0: all mass on the argmax
        probs[np.arange(len(logits)), logits.argmax(axis=-1)] = 1.0
        return probs
    for out, row in zip(probs, logits):
        ids, p = candidates(row, temperature, top_k, top_p)
        out[ids] = p
    return probs


def candidates(row: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The tokens one row [V] of logits can draw, in id order, and their probabilities (summing
    to 1): :func:`sampling_distribution` without the zeros, which cost more than the model's step
    to build, normalise and sum over 50,257 ids at every token."""
    ids, x = None, row
    if top_k is not None and top_k < len(row):
        # Cut on the raw logits: temperature and softmax keep their order, and the k-th value is
        # found on float32s instead of their float64 copies. Ties at the k-th all stay.
        ids = top_k_ids(row, top_k)
        x = row[ids]
    if top_p is not None and top_p < 1 and len(x) >= FAST_NUCLEUS_MIN and temperature >= 1e-6:
        found = nucleus_from_logits(x, temperature, top_p)
        if found is not None:
            kept, z = found
            return (kept if ids is None else ids[kept]), z
    # Shift the row so its largest logit is 0 BEFORE dividing: softmax does not change, and a tiny
    # temperature (1e-308, 5e-324) sends the others to -inf instead of overflowing every logit to
    # +-inf (inf - inf = nan): the distribution tends to the argmax, the exact T -> 0 limit.
    z = np.subtract(x, x.max(), dtype=np.float64)
    if temperature != 1:  # (dividing by 1 changes no bit: a pass over 50,257 float64s saved)
        with np.errstate(over="ignore"):
            z /= temperature
    np.exp(z, out=z)
    z /= z.sum()
    if top_p is not None and top_p < 1:
        kept = np.sort(nucleus(z, top_p))
        z = z[kept] / z[kept].sum()
        ids = kept if ids is None else ids[kept]
    return (np.arange(len(z)) if ids is None else ids), z


def top_k_ids(row: np.ndarray, k: int) -> np.ndarray:
    """The ids of ``row``'s ``k`` largest values, in id order, with every value tied with the k-th
    (exactly ``np.flatnonzero(row >= np.partition(row, -k)[-k])``).

    A partition of all 50,257 logits cost more than the rest of the sampler: every 16th value is
    partitioned instead. The k-th largest of a subset is at most the row's, so the values at or
    above it (a few hundred for k = 50) hold the row's k largest, and the k-th is found among them.
    """
    stride = min(16, len(row) // (4 * k))
    if stride < 2:
        return np.flatnonzero(row >= np.partition(row, -k)[-k])
    sample = row[::stride]
    pool = np.flatnonzero(row >= np.partition(sample, -k)[-k])
    values = row[pool]
    return pool[values >= np.partition(values, -k)[-k]]


# Rows at least this long take the float32 route to their nucleus (a top-k cut leaves a few dozen
# logits, for which the float64 softmax costs nothing).
FAST_NUCLEUS_MIN = 1024
# How close, relative to the total mass, a running sum may come to the cut before the float32
# total can no longer tell which side it is on (its rounding is ~1e-7): then the float64 path decides.
NUCLEUS_SLACK = 1e-5


_scratch = threading.local()


def _buffers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's float32 and boolean scratch rows of length ``n``: a fresh 200 KB array at
    every token cost as much as the subtraction written into it."""
    held = getattr(_scratch, "rows", None)
    if held is None or len(held[0]) != n:
        held = _scratch.rows = (np.empty(n, dtype=np.float32), np.empty(n, dtype=bool))
    return held


def nucleus_from_logits(x: np.ndarray, temperature: float, top_p: float) -> tuple[np.ndarray, np.ndarray] | None:
    """top-p over one row of logits ``x`` [V] without a float64 softmax of the whole row: the
    kept indices in id order and their probabilities (float64, summing to 1), or None when the
    tokens above the first thresholds do not reach p (the caller then takes the float64 path).

    The float64 softmax over 50,257 logits cost most of a sampled step. Only the cut needs the
    normaliser: the exponentials are taken in float32 for it and for the threshold search (as in
    :func:`nucleus`), and in float64 for the few hundred tokens above the threshold alone, which
    are sorted and cut once and give the kept tokens' probabilities too. The kept tokens are renormalised
    among themselves, so their probabilities never see the float32 total. When a running sum
    comes within ``NUCLEUS_SLACK`` of the cut, the float64 total decides, as in the float64 path,
    so the kept set is always the full sort's.
    """
    e, mask = _buffers(len(x))
    m = x.max()
    np.subtract(x, m, out=e)
    if temperature != 1:
        e *= np.float32(1.0 / temperature)
    np.exp(e, out=e)  # the unnormalised probabilities, the largest 1
    total = float(e.sum())
    target, slack = top_p * total, NUCLEUS_SLACK * total
    sub = _above(e, target + slack, top=1.0, out=mask)  # (exp is increasing: the logits' order too)
    if sub is None:
        return None  # the nucleus is about the whole row: no saving to be had
    w_sub = _numerators(x[sub], m, temperature)  # the float64 path's own, in id order
    w = np.sort(w_sub)[::-1]  # most likely first
    before = np.cumsum(w) - w  # the mass of the tokens before each one
    n_keep = int(np.count_nonzero(before < target))
    if target - before[n_keep - 1] <= slack or (n_keep < len(w) and before[n_keep] - target <= slack):
        # Too close to call with the float32 total: take the float64 one.
        target = top_p * float(_numerators(x, m, temperature).sum())
        if before[-1] + w[-1] < target:
            return None
        n_keep = int(np.count_nonzero(before < target))
    keep = _cut(w_sub, w[n_keep - 1], n_keep)  # (ties as the full sort's: of probabilities, not logits)
    p = w_sub[keep]
    return sub[keep], p / p.sum()


def _numerators(x: np.ndarray, m: float, temperature: float) -> np.ndarray:
    """exp((x - m) / T) in float64, as :func:`candidates` works them out."""
    z = np.subtract(x, m, dtype=np.float64)
    if temperature != 1:
        z /= temperature
    return np.exp(z, out=z)


# Rows this short (what a top-k cut leaves) are sorted whole: the threshold search's dozen numpy
# calls cost more than one sort of a few hundred values.
SMALL_ROW = 512


def nucleus(p: np.ndarray, top_p: float) -> np.ndarray:
    """Indices of the smallest set of most likely tokens whose probabilities ``p`` [V] add up to
    at least ``top_p`` (ties in the order of a stable sort: the lower id first).

    Sorting all 50,257 probabilities at every step cost several times the model's own step. The
    set is the most likely tokens, so it lies within those above a threshold whose mass already
    reaches ``top_p``: the threshold starts at a thousandth of the top probability and drops
    until the tokens above it carry that mass (a sum, no sort), and only they are sorted. The
    running sums are the full sort's own first sums, so the set is exactly the full sort's.
    """
    if len(p) <= SMALL_ROW:  # a row left by a top-k cut: one sort costs less than the search
        order = np.argsort(-p, kind="stable")
        values = p[order]
        return order[(np.cumsum(values) - values) < top_p]
    # (A margin for the rounding of the sums, in this order and in the sort's; a top_p within
    # 1e-12 of 1 takes every token.)
    sub = _above(p, top_p + 1e-12)
    if sub is None:
        sub = np.arange(len(p))
    values = np.sort(p[sub])[::-1]
    before = np.cumsum(values) - values  # the mass of the tokens before each one
    n_keep = int(np.count_nonzero(before < top_p))  # keep a token while the mass before it is below p
    return sub[_cut(p[sub], values[n_keep - 1], n_keep)]


def _above(values: np.ndarray, goal: float, top: float | None = None, out: np.ndarray | None = None) -> np.ndarray | None:
    """Indices of the ``values`` at or above the highest threshold whose values add up to more
    than ``goal`` (a sum, no sort): a prefix of their sorted order, ties included. The threshold
    starts at a thousandth of the largest value (``top``, when known) and drops 10x at a time,
    1000x past a billionth. None when even every value falls short. ``out``: a boolean scratch row."""
    top = float(values.max()) if top is None else top
    q = top * 1e-3
    while q > 0:
        mask = np.greater_equal(values, q, out=out) if out is not None else values >= q
        sub = np.flatnonzero(mask)
        if float(values[sub].sum(dtype=np.float64)) > goal:
            return sub
        if len(sub) == len(values):
            return None
        q = q * (0.1 if q > top * 1e-9 else 1e-3) if q > 1e-300 else 0.0
    return None


def _cut(values: np.ndarray, last: float, n_keep: int) -> np.ndarray:
    """Which of ``values`` (in id order) the ``n_keep`` kept are, ``last`` the value at the cut:
    all above it, then those equal to it with the lowest ids (a stable sort's order)."""
    keep = values >= last
    if np.count_nonzero(keep) > n_keep:
        keep = values > last
        keep[np.flatnonzero(values == last)[: n_keep - int(np.count_nonzero(keep))]] = True
    return keep


class Settings(NamedTuple):
    """How one row draws its tokens (see :func:`sample`)."""

    temperature: float
    top_k: int | None
    top_p: float | None


def choose_rows(
    logits: np.ndarray | Sequence[np.ndarray], settings: Sequence[Settings], u: np.ndarray
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray] | None]]:
    """Next token id per row of ``logits`` [N, V] (or N rows [V]), row r drawn with ``settings[r]`` and the
    uniform ``u[r]`` (unused when greedy): the tokens [N] int64, and per row the
    :func:`candidates` it drew from (None when greedy).

    Row by row: a version that made the batch's top-k cuts and small softmaxes together in a
    dozen numpy calls was no faster for 16 rows in the decoding loop (its passes over all 16
    rows at once, 3 MB, left the cache) and slower for one."""
    N = len(logits)
    tokens = np.empty(N, dtype=np.int64)
    kept: list[tuple[np.ndarray, np.ndarray] | None] = [None] * N
    for r, s in enumerate(settings):
        if s.temperature == 0:
            tokens[r] = logits[r].argmax()
            continue
        ids, p = kept[r] = candidates(logits[r], *s)
        tokens[r] = ids[draw(p, u[r])]
    return tokens, kept


# Slack, relative to the total, that a part of the ranking must carry beyond u of the total before
# the draw is looked for in it alone (its sum and the running sums round differently).
DRAW_SLACK = 1e-12


def draw(p: np.ndarray, u: float) -> int:
    """The index, into ``p`` (probabilities in id order), of the token drawn by ``u``: ranked most
    likely first (equal ones: the lower index first), the first whose running sum exceeds u of
    the total (:func:`sample`'s step 6).

    Ranking all 50,257 probabilities at every token (no cut) cost several times the model's step:
    the running sums are only needed up to u of the mass, so the tokens at or above a threshold
    carrying that mass are ranked alone (a prefix of the whole ranking: the same running sums)."""
    if len(p) <= SMALL_ROW:
        order = np.argsort(-p, kind="stable")
        cdf = np.cumsum(p[order])
        return int(order[np.searchsorted(cdf, u * cdf[-1], side="right")])
    total = float(p.sum())
    pool = _above(p, (u + DRAW_SLACK) * total)
    order = np.argsort(-p, kind="stable") if pool is None else pool[np.argsort(-p[pool], kind="stable")]
    cdf = np.cumsum(p[order])
    i = int(np.searchsorted(cdf, u * total, side="right"))
    if i == len(order):  # u within rounding of the whole mass: the last token with any
        i = int(np.searchsorted(cdf, cdf[-1]))
    return int(order[i])


Shown = tuple[np.ndarray, np.ndarray, np.ndarray, float, float]  # top ids, model and sampling probabilities, p(token), q(token)


def top_candidates(row: np.ndarray, n: int, token: int, kept: tuple[np.ndarray, np.ndarray] | None) -> Shown:
    """The ``n`` most likely ids of one row [V] of logits (best first, the lower id first among
    equals), their model probabilities (softmax at temperature 1) and sampling probabilities
    (from ``kept``, the row's :func:`candidates`; None: greedy, all mass on ``token``), and the
    model and sampling probabilities of ``token`` (drawn from inside the top ``n`` or not). Only
    the top ``n`` are normalised: the rest of the softmax is one sum, not 50,257 divisions.

    The sum is of float32 exponentials, in float64: within ~1e-8 of the float64 softmax's (the
    float32 logits themselves are ~1e-6 from PyTorch's), at a third of its cost."""
    V = len(row)
    e, _ = _buffers(V)
    m = row.max()
    np.subtract(row, m, out=e)
    np.exp(e, out=e)
    total = float(e.sum(dtype=np.float64))
    # A top-k or top-p cut kept the most likely tokens (ties by lower id, as here): when it kept at
    # least n, the n best are among them, found without another pass over the vocabulary; else
    # top_k_ids finds them (a partition of the whole row costs several times more).
    if kept is not None and n <= len(kept[0]) < V:
        pool = kept[0]
    else:
        pool = top_k_ids(row, n) if 0 < n and 8 * n <= V else np.arange(V)
    top = _best(row[pool], n)
    top = pool[top[np.lexsort((top, -row[pool][top]))]]
    probs = np.exp(np.subtract(row[top], m, dtype=np.float64)) / total
    if kept is None:
        sample, q_token = (top == token).astype(np.float64), 1.0
    else:
        ids, p = kept
        wanted = np.append(top, token)
        at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
        q = np.where(ids[at] == wanted, p[at], 0.0)
        sample, q_token = q[:-1], float(q[-1])
    return top, probs, sample, float(np.exp(float(row[token]) - float(m)) / total), q_token


def _best(values: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` largest ``values``, the lowest indices among equal values at the cut
    (a partition alone takes any of them)."""
    if n >= len(values):
        return np.arange(len(values))
    if n <= 0:
        return np.arange(0)
    last = values[np.argpartition(-values, n - 1)[n - 1]]
    better = np.flatnonzero(values > last)
    return np.concatenate([better, np.flatnonzero(values == last)[: n - len(better)]])
