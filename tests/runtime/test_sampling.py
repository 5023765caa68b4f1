"""The sampler (runtime/sampling.py): its fast path (choose_rows, the decoding loop's) against the
reference rule ``sample()`` and against a full sort of all 50,257 probabilities at every step, on
language-model-like rows, flat and peaked ones, rows of exact ties and of float32 neighbours: the
same kept tokens, the same probabilities, the same token for the same uniform, at the top-k and
top-p boundaries and a hair either side of every step of the draw."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from runtime.sampling import Settings, choose_rows, nucleus, ranked, sample, sampling_distribution, softmax, top_k_ids

V = 50_257


def reference_distribution(logits, temperature, top_k, top_p):
    """The sampler as it was: softmax(logits / T), top-k, then top-p by a stable full sort."""
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    z /= temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
        z[z < kth] = -np.inf
    probs = softmax(z)
    if top_p is not None and top_p < 1:
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(probs, order, axis=-1)
        keep_sorted = (np.cumsum(sorted_p, axis=-1) - sorted_p) < top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(axis=-1, keepdims=True)
    return probs


def many_logits(seed: int) -> np.ndarray:
    """Rows like a language model's (a few likely tokens over a long tail), flat ones (the nucleus
    reaches past the first sorted block), peaked ones, and rounded ones full of exact ties."""
    rng = np.random.default_rng(seed)
    rows = [
        rng.standard_normal(V) * 2.5,  # broad: top-p 0.9 keeps thousands
        rng.standard_normal(V) * 0.1,  # almost flat: the nucleus is most of the vocabulary
        np.concatenate([rng.standard_normal(20) * 3 + 12, rng.standard_normal(V - 20)]),  # peaked
        np.round(rng.standard_normal(V) * 3),  # integers: many ties at every cut
    ]
    return np.stack(rows).astype(np.float32)


@pytest.mark.parametrize("seed", range(3))
def test_the_distribution_equals_the_full_sorts(seed):
    logits = many_logits(seed)
    for temperature, top_k, top_p in itertools.product((0.3, 0.8, 1.5), (None, 1, 40, 5_000), (None, 0.5, 0.9, 0.99)):
        got = sampling_distribution(logits, temperature, top_k, top_p)
        want = reference_distribution(logits, temperature, top_k, top_p)
        assert np.array_equal(got > 0, want > 0), (temperature, top_k, top_p)  # the same kept tokens
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_the_nucleus_is_the_smallest_set_reaching_p():
    p = softmax(many_logits(7)[0][None])[0]
    for top_p in (0.1, 0.9, 0.999):
        kept = nucleus(p, top_p)
        assert p[kept].sum() >= top_p and p[kept].sum() - p[kept].min() < top_p  # one fewer falls short
        assert p[kept].min() >= np.delete(p, kept).max()  # the most likely ones


def test_the_top_k_cut_equals_a_full_partitions():
    """The cut found from every 16th logit keeps exactly what a partition of the whole row does:
    the k largest and every tie with the k-th, for rows full of ties, flat rows and short ones."""
    rng = np.random.default_rng(5)
    rows = [*many_logits(5), np.ones(V, dtype=np.float32), rng.standard_normal(300).astype(np.float32)]
    rows.append(np.where(np.arange(V) % 16 == 0, -50.0, rng.standard_normal(V)).astype(np.float32))  # the sample's worst
    for row in rows:
        for k in (1, 2, 10, 40, 50, 51, 300, 5_000, len(row) // 4, len(row) - 1, len(row)):
            if 1 <= k <= len(row):
                want = np.flatnonzero(row >= np.partition(row, -k)[-k])
                assert np.array_equal(top_k_ids(row, k), want), (len(row), k)


def test_a_batch_of_settings_draws_each_row_from_its_own_distribution():
    """choose_rows with a different temperature, top-k and top-p on every row keeps, for each row,
    the tokens and probabilities of the full-sort reference under that row's settings, and draws
    the token the reference rule gives for the row's uniform (a mix-up of rows, uniforms or
    settings shows)."""

    logits = np.concatenate([many_logits(31), many_logits(32)])
    settings = [Settings(0.8, 50, 0.95), Settings(0.0, None, None), Settings(1.0, None, 0.9), Settings(1.5, 40, None),
                Settings(0.3, None, None), Settings(0.8, 5_000, 0.99), Settings(0.0, 3, 0.5), Settings(1.0, 1, None)]
    for seed in range(5):
        u = np.random.default_rng(seed).random(len(logits))
        tokens, kept = choose_rows(logits, settings, u)
        for r, s in enumerate(settings):
            if s.temperature == 0:
                assert kept[r] is None and tokens[r] == logits[r].argmax(), s
                continue
            want = reference_distribution(logits[r : r + 1], *s)[0]
            ids, probs = kept[r]
            assert np.array_equal(np.sort(ids), np.flatnonzero(want)), s  # the same kept set
            order = np.argsort(ids)
            np.testing.assert_allclose(probs[order], want[np.sort(ids)], rtol=1e-9, atol=1e-15)
            assert tokens[r] == sample(logits[r], *s, u[r]), s  # the reference rule's token for the row's uniform



@pytest.mark.parametrize("seed", range(2))
def test_the_candidates_shown_equal_the_dense_distributions(seed):
    """The chart's top tokens, model and sampling probabilities, worked out from what the draw
    kept, equal the ones read off the full softmax and the full sampling distribution."""
    from runtime.sampling import candidates, top_candidates

    logits = many_logits(seed)
    model = softmax(logits)
    for temperature, top_k, top_p in itertools.product((0.0, 0.8), (None, 5, 40), (None, 0.5, 0.95)):
        sample = sampling_distribution(logits, temperature, top_k, top_p)
        for row, p, q in zip(logits, model, sample):
            kept = None if temperature == 0 else candidates(row, temperature, top_k, top_p)
            token = int(row.argmax())
            top, probs, sampled, p_token, q_token = top_candidates(row, 10, token, kept)
            want = np.lexsort((np.arange(V), -p))[:10]  # by probability, then id
            assert top.tolist() == want.tolist(), (temperature, top_k, top_p)
            # (The model's softmax is normalised by a float64 sum of float32 exponentials: ~1e-8.)
            np.testing.assert_allclose(probs, p[want], rtol=1e-7)
            np.testing.assert_allclose(sampled, q[want], rtol=1e-9, atol=1e-15)
            assert p_token == pytest.approx(p[token], rel=1e-7)
            assert q_token == pytest.approx(q[token], rel=1e-9, abs=1e-15)
            if kept is not None:  # a token drawn from far down the list (outside the top 10, perhaps the cut)
                far = int(np.argsort(-p, kind="stable")[V // 2])
                *_, p_far, q_far = top_candidates(row, 10, far, kept)
                assert p_far == pytest.approx(p[far], rel=1e-6) and q_far == pytest.approx(q[far], rel=1e-9, abs=1e-15)


def test_the_float32_route_keeps_the_full_sorts_set():
    """top-p from float32 exponentials (float64 for the candidates only) keeps exactly the full
    sort's tokens with its probabilities, and is the route taken for a language model's rows."""
    from runtime.sampling import nucleus_from_logits

    rows = [*many_logits(21), *many_logits(22)]
    taken = 0
    for row in rows:
        for temperature, top_p in itertools.product((0.05, 0.8, 1.0, 1.5), (0.5, 0.9, 0.95)):
            found = nucleus_from_logits(row, temperature, top_p)
            if found is None:
                continue
            taken += 1
            ids, p = found
            want = reference_distribution(row[None], temperature, None, top_p)[0]
            assert ids.tolist() == np.flatnonzero(want).tolist(), (temperature, top_p)
            np.testing.assert_allclose(p, want[ids], rtol=1e-12, atol=1e-15)
    assert taken >= 0.75 * len(rows) * 12  # not a fallback that is always taken


def test_a_cut_too_close_for_float32_is_decided_as_the_full_sort_does():
    """p a billionth either side of the mass of the n most likely tokens: far closer than a float32
    total can tell (~1e-7), so the float64 total decides: n tokens kept just below, n + 1 just above."""
    from runtime.sampling import nucleus_from_logits

    row = many_logits(23)[2]  # peaked: a few likely tokens over a long tail
    probs = softmax(row[None])[0]
    order = np.argsort(-probs, kind="stable")
    for n in (1, 3, 7, 15):
        mass = float(np.cumsum(probs[order])[n - 1])
        for p, kept in ((mass - 1e-9, n), (mass + 1e-9, n + 1)):
            want = np.flatnonzero(reference_distribution(row[None], 1.0, None, p)[0])
            found = nucleus_from_logits(row, 1.0, p)
            assert len(want) == kept
            assert found is not None and found[0].tolist() == want.tolist(), (n, p)


@pytest.mark.parametrize("length", [8, 1024], ids=["a row a top-k cut leaves", "a whole row"])
def test_a_nucleus_whose_mass_reaches_p_exactly_stops_there(length):
    """top-p keeps the smallest set whose mass is at least p: when the two most likely tokens
    carry exactly p (binary fractions: the sums are exact), the third stays out. A cut that
    kept tokens while the mass before them was <= p (not < p) would keep it."""
    p = np.full(length, 0.25 / (length - 2))
    p[:2] = 0.5, 0.25
    for top_p, n in ((0.5, 1), (0.75, 2), (0.7500001, 3)):
        assert sorted(nucleus(p, top_p).tolist()) == list(range(n)), top_p


# -- the fast path against the rule ---------------------------------------------------------------

NEAR = 1e-9  # "a hair" below or above a step of the draw, relative to the total: far beyond the sums' rounding (<= 1e-11)
LAST_U = 1 - 2**-53  # the largest uniform: draws the last token kept


def synthetic_rows(V: int) -> list[np.ndarray]:
    """Rows a model rarely gives: exact ties (at the top, at the k-th value, at the top-p cut),
    near ties one float32 step apart, a few tiers of equal values, a flat row, and a short row."""
    rng = np.random.default_rng(5)
    rows = []
    r = np.full(V, -1e4, np.float32)  # ten exact ties, the rest with probability 0
    r[100:110] = 0.0
    rows.append(r)
    r = rng.normal(0, 2, V).astype(np.float32)  # ties at the top and around the 5th and 50th values
    order = np.argsort(-r)
    r[order[:3]] = r[order[0]]
    r[order[3:8]] = r[order[4]]
    r[order[45:60]] = r[order[50]]
    rows.append(r)
    r = rng.normal(0, 1, V).astype(np.float32)  # near ties: each top value followed by its float32 neighbour
    top = np.argsort(-r)[:40]
    r[top[1::2]] = np.nextafter(r[top[0::2]], np.float32(-np.inf))
    rows.append(r)
    r = np.full(V, -3.0, np.float32)  # a few tiers of equal values
    r[rng.choice(V, 12, replace=False)] = 2.0
    r[rng.choice(V, 300, replace=False)] = 0.5
    rows.append(r)
    rows.append(np.zeros(V, np.float32))  # flat: every id tied
    rows.append(rng.normal(0, 3, 300).astype(np.float32))  # short
    return rows


def steps_near(cdf: np.ndarray) -> list[float]:
    """u a hair below and above a few of the draw's steps (``cdf``: ranked()'s running weight; the
    first, a middle one, the last among the kept tokens), where the token drawn changes."""
    us = []
    for i in sorted({0, len(cdf) // 2, len(cdf) - 2}):
        if 0 <= i < len(cdf) - 1 and cdf[i + 1] > cdf[i]:
            at = cdf[i] / cdf[-1]
            us += [at - NEAR, at + NEAR]
    return [u for u in us if 0 <= u < 1]


def clear_of_steps(cdf: np.ndarray, u: float) -> bool:
    """Whether u of the total is clear of every step of the running weight ``cdf`` by more than two
    correct sums may round apart (50,257 additions in another order: up to ~1e-11 of the total);
    else either side is a right answer (e.g. u just under 1 among a tail of weights of 1e-300)."""
    return bool(np.min(np.abs(cdf - u * cdf[-1])) > 1e-10 * cdf[-1])


def top_p_boundaries(row: np.ndarray, t: float) -> list[float]:
    """top-p a hair below and above the mass of the n most likely tokens: n kept, then n + 1."""
    _, cdf = ranked(row, t, None, None)
    out = []
    for n in (1, 3, 10):
        if n < len(cdf) and cdf[n] > cdf[n - 1]:
            mass = float(cdf[n - 1] / cdf[-1])
            out += [mass - 1e-9, mass + 1e-9]
    return [p for p in out if 0 < p < 1]


FAST_SETTINGS = [Settings(0.8, None, None), Settings(1.0, None, 0.9), Settings(1.0, 40, 0.9), Settings(0.05, None, None),
                 Settings(0.7, 5, None), Settings(0.8, 50, 0.95)]


def test_the_fast_path_draws_the_reference_rules_token():
    """choose_rows (the decoding loop's path: top-k from every 16th logit, top-p from float32
    exponentials, the draw ranking only what u reaches) draws the token sample() draws, at u = 0,
    just under 1 (the last token kept: a cut one token off shows), a hair either side of the
    draw's steps, and at random; on broad and integer rows, exact ties and float32 neighbours,
    tiers, flat and short rows; top-p also a hair either side of the mass of the 1, 3 and 10 most
    likely tokens."""
    rng = np.random.default_rng(2)
    broad, _, _, integers = many_logits(41)
    checked = 0
    for r, row in enumerate([broad, integers, *synthetic_rows(V)]):
        for s in FAST_SETTINGS + [Settings(1.0, None, p) for p in top_p_boundaries(row, 1.0)]:
            _, cdf = ranked(row, *s)
            us = [u for u in [0.0, LAST_U, rng.random(), *steps_near(cdf)] if clear_of_steps(cdf, u)]
            for u, want in zip(us, sample(row, *s, np.array(us))):
                assert choose_rows([row], [s], np.array([u]))[0][0] == want, (r, s, u)
                checked += 1
    assert checked > 300


def test_the_rule_breaks_ties_by_the_lower_id_and_cuts_where_it_says():
    """sample() itself, on rows small enough to work out by hand: equal logits rank the lower id
    first (u just under 1/3 of three equal tokens draws the first, just over it the second), top-k
    keeps every tie with the k-th, top-p keeps tokens while the mass before each is below p (two
    of four equal tokens carry exactly 0.5: the third stays out), and u just under 1 draws the last
    token kept."""
    row = np.array([-50.0, 1.0, 1.0, -50.0, 1.0], np.float32)  # ids 1, 2, 4 tied at the top
    assert [sample(row, 1.0, None, None, u) for u in (0.0, 0.333, 0.334, 0.666, 0.667)] == [1, 1, 2, 2, 4]
    assert sample(row, 1.0, 2, None, LAST_U) == 4  # top-k 2 keeps the third tie too
    assert sample(row, 1.0, 1, None, LAST_U) == 4
    assert sample(row, 0.0, None, None, 0.9) == 1  # greedy: the lowest id among the top
    flat = np.zeros(4, np.float32)  # four tokens of 0.25: the masses are exact
    assert [sample(flat, 1.0, None, p, LAST_U) for p in (0.25, 0.5, 0.5000001, 0.75, 1.0)] == [0, 1, 2, 2, 3]
