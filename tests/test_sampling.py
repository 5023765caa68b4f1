"""The sampler (runtime/sampling.py) against the reference it replaced: a full sort of all 50,257
probabilities at every step. Same distribution on many logits, same draws for the same seed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from runtime.sampling import choose, nucleus, sampling_distribution, softmax, top_k_ids

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
    the token an inverse-CDF draw of the reference gives for the row's uniform (the reference is
    independent of the sampler: a mix-up of rows, uniforms or settings shows)."""
    from runtime.sampling import Settings, choose_rows

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
            cdf = np.cumsum(want[ids])  # in the sampler's candidate order
            assert tokens[r] == ids[min(np.searchsorted(cdf, u[r] * cdf[-1], side="right"), len(ids) - 1)], s



def test_the_same_seed_draws_the_same_tokens_as_the_reference():
    logits = many_logits(11)
    for top_k, top_p in ((None, 0.9), (40, 0.9), (None, None)):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        for _ in range(50):
            got = choose(logits, 0.8, top_k, top_p, a)
            probs = reference_distribution(logits, 0.8, top_k, top_p)
            cdf = np.cumsum(probs, axis=-1)
            want = (cdf <= b.random((len(probs), 1)) * cdf[:, -1:]).sum(axis=-1)
            assert got.tolist() == want.tolist()


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
