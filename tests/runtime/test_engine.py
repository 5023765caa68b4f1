"""The onnxruntime generation engine: providers, sampling controls, streaming, errors, threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import TINY
from model import EOT_ID, load_pretrained
from runtime import providers
from runtime.batching import Request
from runtime.engine import Engine, left_pad
from runtime.generate import decode, generate, stream
from runtime.params import SamplingParams
from runtime.sampling import sample, sampling_distribution
from runtime.steps import Candidate, DecodeStep

PROMPT = [464, 3290, 286, 262, 995]


@pytest.fixture(scope="module")
def engine(tiny_export) -> Engine:
    return Engine.load(tiny_export.paths["fp32"], provider="cpu")


@pytest.fixture(scope="module")
def torch_model(tiny_export):
    return load_pretrained(tiny_export.weights)


# -- providers -------------------------------------------------------------------------------


def test_provider_selection(monkeypatch):
    assert providers.requested_providers("cpu") == [providers.CPU]
    monkeypatch.setattr(providers, "cuda_usable", lambda: False)
    assert providers.requested_providers("auto") == [providers.CPU]
    with pytest.raises(RuntimeError, match="provider='cuda' requested"):
        providers.requested_providers("cuda")
    monkeypatch.setattr(providers, "cuda_usable", lambda: True)
    assert providers.requested_providers("auto") == [providers.CUDA, providers.CPU]
    assert providers.requested_providers("cuda") == [providers.CUDA, providers.CPU]
    with pytest.raises(ValueError, match="provider must be one of auto, cpu, cuda"):
        providers.requested_providers("tpu")


def test_engine_reports_the_provider_really_in_use(engine, tiny_export):
    auto = Engine.load(tiny_export.paths["fp32"])  # no GPU here: auto must land on the CPU, quietly
    expected = providers.CUDA if providers.cuda_usable() else providers.CPU
    assert auto.provider == expected == auto.session.get_providers()[0]
    assert (engine.block_size, engine.vocab_size) == (TINY.block_size, TINY.vocab_size)


# -- generation ------------------------------------------------------------------------------


def test_greedy_matches_pytorch(engine, torch_model):
    ours = generate(engine, PROMPT, SamplingParams(20, stop_at_eot=False))
    ref = torch_model.generate(torch.tensor([PROMPT]), 20, temperature=0.0)[0, len(PROMPT) :].tolist()
    assert ours == ref


def test_seeded_sampling_repeats_and_seeds_differ(engine):
    a = generate(engine, PROMPT, SamplingParams(12, temperature=1.0, seed=7, stop_at_eot=False))
    b = generate(engine, PROMPT, SamplingParams(12, temperature=1.0, seed=7, stop_at_eot=False))
    c = generate(engine, PROMPT, SamplingParams(12, temperature=1.0, seed=8, stop_at_eot=False))
    assert a == b and a != c


def test_top_k_1_and_tiny_temperature_are_greedy(engine):
    greedy = generate(engine, PROMPT, SamplingParams(10, stop_at_eot=False))
    assert generate(engine, PROMPT, SamplingParams(10, temperature=1.5, top_k=1, seed=3, stop_at_eot=False)) == greedy
    assert generate(engine, PROMPT, SamplingParams(10, temperature=1e-6, seed=3, stop_at_eot=False)) == greedy


def test_several_samples_run_as_one_batch(engine):
    samples = generate(engine, PROMPT, SamplingParams(8, temperature=1.0, seed=5, num_samples=3, stop_at_eot=False))
    assert len(samples) == 3 and all(len(s) == 8 for s in samples)
    assert len({tuple(s) for s in samples}) > 1  # independent draws, not one sample copied
    assert generate(engine, PROMPT, SamplingParams(8, temperature=1.0, seed=5, num_samples=3, stop_at_eot=False)) == samples
    # Greedy samples are all the greedy continuation.
    assert generate(engine, PROMPT, SamplingParams(5, num_samples=2, stop_at_eot=False)) == [generate(engine, PROMPT, SamplingParams(5, stop_at_eot=False))] * 2


def test_top_p_keeps_the_smallest_set_above_p():
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda p: set(np.flatnonzero(sampling_distribution(logits, 1.0, None, p)[0]))  # noqa: E731
    assert kept(0.45) == {0}
    assert kept(0.75) == {0, 1}
    assert kept(0.85) == {0, 1, 2}
    assert kept(1.0) == {0, 1, 2, 3}
    probs = sampling_distribution(logits, 1.0, None, 0.75)[0]
    np.testing.assert_allclose(probs[:2], [0.5 / 0.8, 0.3 / 0.8])
    drawn = set(sample(logits[0], 1.0, None, 0.75, np.random.default_rng(0).random(200)).tolist())
    assert drawn == {0, 1}


def test_top_k_and_temperature_shape_the_distribution():
    logits = np.log(np.array([[0.4, 0.3, 0.2, 0.1]]))
    assert set(np.flatnonzero(sampling_distribution(logits, 1.0, 2, None)[0])) == {0, 1}
    hot, cold = sampling_distribution(logits, 2.0, None, None)[0], sampling_distribution(logits, 0.5, None, None)[0]
    assert hot[0] < 0.4 < cold[0]


def test_stream_yields_tokens_candidates_and_timing(engine):
    steps = list(stream(engine, PROMPT, SamplingParams(6, temperature=0.8, top_k=5, seed=1, n_candidates=5, stop_at_eot=False)))
    assert [s.index for s in steps] == list(range(6))
    assert steps[-1].finished == [True] and not any(s.finished[0] for s in steps[:-1])
    for s in steps:
        (token,), (cands,) = s.token_ids, s.candidates
        assert len(cands) == 5 and all(isinstance(c, Candidate) for c in cands)
        probs = [c.prob for c in cands]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-9
        assert token in {c.token_id for c in cands}  # top-k 5: only the 5 most likely can be drawn
        assert abs(sum(c.sample_prob for c in cands) - 1) < 1e-9
        assert s.token_probs[0] == pytest.approx(next(c.prob for c in cands if c.token_id == token))
        assert s.ttft_s == steps[0].ttft_s > 0 and s.tokens_per_s > 0 and s.notice is None
    assert [s.token_ids[0] for s in steps] == generate(engine, PROMPT, SamplingParams(6, temperature=0.8, top_k=5, seed=1, stop_at_eot=False))


def test_a_stream_without_candidates_skips_the_probabilities_not_the_tokens(engine):
    args = dict(temperature=0.8, top_k=5, seed=1, stop_at_eot=False)
    bare = list(stream(engine, PROMPT, SamplingParams(6, n_candidates=None, **args)))
    assert [s.token_ids for s in bare] == [s.token_ids for s in stream(engine, PROMPT, SamplingParams(6, n_candidates=5, **args))]
    assert all(s.token_probs == [None] and s.candidates == [[]] for s in bare)
    with pytest.raises(ValueError, match="or None"):
        stream(engine, PROMPT, SamplingParams(6, n_candidates=-1))


def test_stops_at_end_of_text(engine, monkeypatch):
    # Make the real graph's output favour <|endoftext|> for the second sample from step 2 on.
    forward, calls = engine.forward, []

    def eot_later(ids, past, *mask_and_positions):
        logits, present = forward(ids, past, *mask_and_positions)
        calls.append(1)
        if len(calls) >= 3:
            logits = logits.copy()
            logits[1, EOT_ID] += 1000.0
        return logits, present

    monkeypatch.setattr(engine, "forward", eot_later)
    a, b = generate(engine, PROMPT, SamplingParams(10, num_samples=2))
    assert len(a) == 10 and b[-1] == EOT_ID and len(b) == 3
    calls.clear()
    steps = list(stream(engine, PROMPT, SamplingParams(10, num_samples=2)))
    assert steps[2].finished == [False, True] and steps[3].token_ids[1] is None and steps[3].candidates[1] == []


def test_long_prompt_keeps_the_last_tokens_and_says_so(engine, torch_model):
    prompt = list(range(100, 100 + TINY.block_size + 8))
    shift, engine.context_shift = engine.context_shift, 1  # one token at a time, as PyTorch slides
    try:
        steps = list(stream(engine, prompt, SamplingParams(3, stop_at_eot=False)))
    finally:
        engine.context_shift = shift
    assert steps[0].prompt_tokens_dropped == 8 and "8 were dropped" in steps[0].notice
    ref = torch_model.generate(torch.tensor([prompt]), 3, temperature=0.0)[0, -3:].tolist()
    assert [s.token_ids[0] for s in steps] == ref


def test_a_full_context_drops_a_quarter_at_once_then_decodes_with_the_cache(engine, torch_model):
    """Past the context, the oldest context_shift tokens leave together and the rest is read
    again from position 0: each token is what PyTorch predicts from that same window."""
    block, shift = TINY.block_size, engine.context_shift
    assert 1 < shift < block
    prompt = [int(t) for t in np.random.default_rng(0).integers(100, 5000, block)]
    n = 2 * shift + 3  # fills and shifts twice
    steps = list(stream(engine, prompt, SamplingParams(n, stop_at_eot=False)))
    seq, start, ref = list(prompt), 0, []
    for _ in range(n):
        if len(seq) - start > block:
            start = len(seq) - (block - shift + 1)
        with torch.no_grad():
            logits = torch_model(torch.tensor([seq[start:]])).logits
        ref.append(int(logits[0, -1].argmax()))
        seq.append(ref[-1])
    assert [s.token_ids[0] for s in steps] == ref
    assert f"{shift} tokens drop out" in steps[1].notice


def test_bad_arguments_are_rejected_with_clear_messages(engine, tmp_path):
    for prompt_ids, message in (([], "prompt_ids is empty"), ("hello", "not text"), ([TINY.vocab_size], "token ids must be in")):
        with pytest.raises(ValueError, match=message):
            generate(engine, prompt_ids, SamplingParams(3))
        with pytest.raises(ValueError, match=message):
            stream(engine, prompt_ids, SamplingParams(3))  # checked at the call, not at the first step
    cases = [
        (dict(max_new_tokens=0), "max_new_tokens must be a positive integer"),
        (dict(max_new_tokens=3, temperature=-0.1), "temperature must be"),
        (dict(max_new_tokens=3, temperature=float("nan")), "temperature must be"),
        (dict(max_new_tokens=3, top_k=0), "top_k must be"),
        (dict(max_new_tokens=3, top_p=1.5), "top_p must be"),
        (dict(max_new_tokens=3, num_samples=0), "num_samples must be"),
        (dict(max_new_tokens=3, n_candidates=-1), "n_candidates"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            SamplingParams(**kwargs)  # checked once, where the settings are made
    with pytest.raises(FileNotFoundError, match="python -m export"):
        Engine.load(tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="threads"):
        Engine.load(engine.path, threads=0)


def test_every_setting_and_id_at_its_legal_end_is_taken_and_one_past_it_refused():
    """The runtime's bounds at their edges (the playground's own are narrower): each end taken,
    one step past it refused."""
    from runtime.params import MAX_SAMPLES, check_prompt

    taken = [dict(max_new_tokens=1), dict(max_new_tokens=3, num_samples=MAX_SAMPLES), dict(max_new_tokens=3, num_samples=1),
             dict(max_new_tokens=3, top_p=1.0), dict(max_new_tokens=3, top_p=1e-9), dict(max_new_tokens=3, top_k=1),
             dict(max_new_tokens=3, temperature=0.0), dict(max_new_tokens=3, n_candidates=0)]
    for kwargs in taken:
        SamplingParams(**kwargs)
    refused = [dict(max_new_tokens=3, num_samples=MAX_SAMPLES + 1), dict(max_new_tokens=3, top_p=0.0),
               dict(max_new_tokens=3, top_p=1.0 + 1e-9), dict(max_new_tokens=3, temperature=-1e-9)]
    for kwargs in refused:
        with pytest.raises(ValueError):
            SamplingParams(**kwargs)
    assert check_prompt([0, TINY.vocab_size - 1], TINY.vocab_size, EOT_ID).tolist() == [0, TINY.vocab_size - 1]
    for ids in ([TINY.vocab_size], [-1]):
        with pytest.raises(ValueError, match="token ids must be in"):
            check_prompt(ids, TINY.vocab_size, EOT_ID)


def test_one_engine_serves_many_threads(engine):
    seeds = list(range(6))
    expected = [generate(engine, PROMPT, SamplingParams(8, temperature=1.0, seed=s, stop_at_eot=False)) for s in seeds]
    with ThreadPoolExecutor(max_workers=3) as pool:
        got = list(pool.map(lambda s: generate(engine, PROMPT, SamplingParams(8, temperature=1.0, seed=s, stop_at_eot=False)), seeds))
    assert got == expected


def test_io_binding_path_gives_the_same_tokens(engine):
    bound = Engine.load(engine.path, provider="cpu", io_binding=True)
    assert generate(bound, PROMPT, SamplingParams(10, stop_at_eot=False)) == generate(engine, PROMPT, SamplingParams(10, stop_at_eot=False))


# -- batches of different lengths (the interface batching builds on) ---------------------------


def test_left_pad_builds_mask_and_positions():
    ids, mask, positions = left_pad([[5, 6, 7], [8]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert positions.tolist() == [[0, 1, 2], [0, 0, 0]]
    with pytest.raises(ValueError, match="at least one token"):
        left_pad([[1], []])


def test_forward_with_rows_of_different_lengths_matches_each_row_alone(engine, torch_model):
    """Left padding + attention_mask + position_ids through Engine.forward: every row generates
    the greedy continuation it generates alone (and PyTorch's)."""
    prompts = [PROMPT, [262], PROMPT[:2] + PROMPT]
    ids, mask, positions = left_pad(prompts)
    logits, past = engine.forward(ids, engine.empty_cache(len(prompts)), mask, positions)
    assert engine.cache_length(past) == ids.shape[1]
    rows: list[list[int]] = [[] for _ in prompts]
    for t in range(8):
        nxt = logits.argmax(-1)
        for row, token in zip(rows, nxt.tolist()):
            row.append(token)
        mask = np.concatenate([mask, np.ones((len(prompts), 1), np.int64)], axis=1)
        logits, past = engine.forward(nxt[:, None], past, mask, positions[:, -1:] + t + 1)
    for prompt, row in zip(prompts, rows):
        assert row == generate(engine, prompt, SamplingParams(8, stop_at_eot=False))
        assert row == torch_model.generate(torch.tensor([prompt]), 8, temperature=0.0)[0, len(prompt) :].tolist()


def test_run_gives_every_positions_logits(engine):
    ids = np.array([PROMPT], dtype=np.int64)
    logits, past = engine.run(ids, engine.empty_cache(1))
    assert logits.shape == (1, len(PROMPT), TINY.vocab_size) and len(past) == len(engine.past_names) == 2 * TINY.n_layer
    last, _ = engine.forward(ids, engine.empty_cache(1))
    np.testing.assert_array_equal(last, logits[:, -1])


def test_decode_steps_are_named_fields(engine):
    request = Request.new(np.array(PROMPT), SamplingParams(3, num_samples=2, stop_at_eot=False), engine.block_size)
    steps = list(decode(engine, request))
    assert all(isinstance(s, DecodeStep) for s in steps) and len(steps) == 3
    assert steps[0].tokens.shape == (2,) and steps[0].logits.shape == (2, TINY.vocab_size)
    assert steps[-1].finished.all() and steps[0].live.all() and steps[0].notice is None


@pytest.mark.parametrize("name", ["fp32", "int8"])
def test_more_threads_give_the_shipped_files_the_same_bits(name):
    """The app's decoding loop runs wide calls (many rows, a prompt) on every core and lone rows on
    one: a seeded text is the same only if both give the same logits and cache, bit for bit."""
    from export import ensure_onnx

    narrow = Engine.load(ensure_onnx()[name], provider="cpu", threads=1)
    wide = Engine.load(narrow.path, provider="cpu", threads=2, spin=False)
    rng = np.random.default_rng(0)
    for rows, new in ((1, 16), (16, 1), (4, 7), (2, 200)):
        ids = rng.integers(0, narrow.vocab_size, (rows, 32))
        a_logits, a_past = narrow.forward(ids, narrow.empty_cache(rows))
        b_logits, b_past = wide.forward(ids, wide.empty_cache(rows))
        assert np.array_equal(a_logits, b_logits) and all(np.array_equal(x, y) for x, y in zip(a_past, b_past))
        step = rng.integers(0, narrow.vocab_size, (rows, new))
        assert np.array_equal(narrow.forward(step, a_past)[0], wide.forward(step, a_past)[0]), (rows, new)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process's memory from /proc")
def test_release_memory_gives_back_what_the_arena_kept_after_a_step(tiny_export):
    """A call that is not a prompt's leaves its buffers in the arena ("shrink-prefill": a decoding
    step's are reused by the next); release_memory hands them back. 32 rows x 32 positions of
    logits are 206 MB."""
    import ctypes

    trim = ctypes.CDLL("libc.so.6").malloc_trim
    engine = Engine.load(tiny_export.paths["fp32"], provider="cpu")
    assert engine.arena == "shrink-prefill"
    engine.release_memory()  # the session's first-call buffers exist before the measurement
    trim(0)
    before = _rss_mb()
    logits, present = engine.run(np.zeros((32, 32), dtype=np.int64), engine.empty_cache(32))
    assert logits.shape == (32, 32, 50257)
    del logits, present
    trim(0)
    held = _rss_mb()
    engine.release_memory()
    trim(0)
    after = _rss_mb()
    assert held - before > 150, (before, held)  # kept by the arena after the call
    assert held - after > 150, (before, held, after)  # given back
