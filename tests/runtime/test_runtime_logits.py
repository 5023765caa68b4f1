"""The runtime's logits at every decode step against PyTorch with its key/value cache (model/gpt.py).

On the shipped model's fp32 file: a trained model whose every part shapes its logits (a random
tiny model's argmax hardly depends on attention or positions, so a hidden token, a position off by
one or a wrong attention scale passed the greedy-id tests). Each row of the runtime is followed by
a :class:`Reference`: PyTorch fed the same tokens, one at a time through its cache, seeing the
window the runtime promises (the last ``block_size`` tokens; when a new token overflows it, the
oldest ``context_shift`` leave and the rest is read anew). The logits must agree at every step,
for one request alone (``runtime.generate``), for a left-padded batch through ``Engine.forward``,
and for the decoding loop with rows joining and leaving at different positions and sliding
(``runtime.batching.Batch``). docs/testing.md lists the bugs each test exists to catch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model import load_pretrained
from runtime.batching import Batch, Request
from runtime.engine import Engine, left_pad
from runtime.generate import decode
from runtime.params import SamplingParams

# Max |logit difference| between onnxruntime's fp32 graph and PyTorch at one step. Float rounding
# leaves ~1e-5 on the shipped model; each bug docs/testing.md lists moves them by far more.
TOL = 1e-3


@pytest.fixture(scope="module")
def engine(shipped_onnx) -> Engine:
    return Engine.load(shipped_onnx["fp32"], provider="cpu")


@pytest.fixture(scope="module")
def model():
    """The shipped weights in PyTorch, on one thread: its steps are ~10 ms, and a second thread
    on a busy 2-core machine made each ~20 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_pretrained()
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def text(val_tokens):
    """``text(n, seed)``: ``n`` tokens of real text (the validation plays), from a place chosen by ``seed``."""

    def cut(n: int, seed: int) -> list[int]:
        start = np.random.default_rng(seed).integers(0, len(val_tokens) - n)
        return val_tokens[start : start + n].astype(int).tolist()

    return cut


class Reference:
    """One row followed in PyTorch through its key/value cache."""

    def __init__(self, model, prompt: list[int], shift: int) -> None:
        self.model, self.shift, self.block = model, shift, model.config.block_size
        self.window = list(prompt[-self.block :])
        self.logits = self._read()

    @torch.no_grad()
    def _read(self) -> np.ndarray:
        out = self.model(torch.tensor([self.window]), use_cache=True)
        self.past = out.past_key_values
        return out.logits[0, -1].numpy()

    @torch.no_grad()
    def push(self, token: int) -> np.ndarray:
        """The logits after ``token``: through the cache, or the window read anew once it overflows."""
        self.window.append(token)
        if len(self.window) > self.block:
            self.window = self.window[self.shift :]
            self.logits = self._read()
        else:
            out = self.model(torch.tensor([[token]]), past_key_values=self.past, use_cache=True)
            self.past, self.logits = out.past_key_values, out.logits[0, -1].numpy()
        return self.logits


def worst(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max())


def test_one_generation_matches_pytorch_at_every_step_across_two_context_shifts(engine, model, text):
    """A prompt near the context's end: the window slides after 6 tokens, and again 64 later."""
    prompt = text(engine.block_size - 5, seed=1)
    request = Request.new(np.array(prompt), SamplingParams(80, 0.9, seed=4, stop_at_eot=False), engine.block_size)
    ref = Reference(model, prompt, engine.context_shift)
    diffs, slides = [], 0
    for step in decode(engine, request):
        diffs.append(worst(step.logits[0], ref.logits))
        slides += bool(step.notice)
        ref.push(int(step.tokens[0]))
    assert len(diffs) == 80 and slides == 1  # the notice comes once, at the first slide
    assert len(ref.window) < engine.block_size - engine.context_shift + 20  # it slid twice
    assert max(diffs) <= TOL, f"step {int(np.argmax(diffs))} differs by {max(diffs):.3g}"


def test_a_prompt_longer_than_the_context_keeps_its_last_tokens(engine, model, text):
    prompt = text(engine.block_size + 30, seed=2)
    request = Request.new(np.array(prompt), SamplingParams(4, stop_at_eot=False), engine.block_size)
    ref = Reference(model, prompt, engine.context_shift)
    for step in decode(engine, request):
        assert worst(step.logits[0], ref.logits) <= TOL
        ref.push(int(step.tokens[0]))


def test_a_left_padded_batch_decodes_each_row_as_pytorch_alone(engine, model, text):
    """Engine.forward on rows of 3, 17 and 9 tokens, then 12 steps through the cache."""
    prompts = [text(n, seed=10 + n) for n in (3, 17, 9)]
    ids, mask, positions = left_pad(prompts)
    logits, past = engine.forward(ids, engine.empty_cache(len(prompts)), mask, positions)
    refs = [Reference(model, p, engine.context_shift) for p in prompts]
    rng = np.random.default_rng(0)
    for t in range(12):
        for r, ref in enumerate(refs):
            assert worst(logits[r], ref.logits) <= TOL, f"row {r} (length {len(prompts[r])}) at step {t}"
        tokens = np.array([int(rng.choice(np.argsort(row)[-5:])) for row in logits])
        for ref, token in zip(refs, tokens):
            ref.push(int(token))
        mask = np.concatenate([mask, np.ones((len(prompts), 1), np.int64)], axis=1)
        positions = positions[:, -1:] + 1
        logits, past = engine.forward(tokens[:, None], past, mask, positions)


# (join before step, prompt length, SamplingParams): rows join at different steps and positions,
# finish at different steps (the cache then drops padding), one has two samples, and the longest
# fills the context while its neighbours go on through their cache.
JOINS = [
    (0, 5, SamplingParams(30, 0.8, 40, None, 1, 1, stop_at_eot=False)),
    (0, 250, SamplingParams(40, 1.0, None, 0.9, 2, 1, stop_at_eot=False)),
    (3, 1, SamplingParams(12, 0.7, None, None, 3, 2, stop_at_eot=False)),
    (9, 40, SamplingParams(20, 0.0, stop_at_eot=False)),
    (17, 23, SamplingParams(25, 1.2, 20, 0.95, 5, 1, stop_at_eot=False)),
]


def test_rows_joining_leaving_and_sliding_in_the_loop_match_pytorch_at_every_step(engine, model, text):
    batch = Batch(engine)
    refs: dict[int, list[Reference]] = {}
    seqs: dict[int, Request] = {}
    steps_of: dict[int, int] = {}
    diffs: list[tuple[float, int, int]] = []  # (difference, request, step)
    step, padded, shared, slid = 0, False, 0, False
    while step <= max(j for j, _, _ in JOINS) or batch.active:
        for i, (at, n, params) in enumerate(JOINS):
            if at == step:
                prompt = text(n, seed=100 + i)
                seqs[i] = Request.new(np.array(prompt), params, engine.block_size)
                refs[i] = [Reference(model, prompt, engine.context_shift) for _ in range(params.num_samples)]
                steps_of[i] = 0
                batch.add(seqs[i])
        padded |= len({s.length for s in batch.seqs}) > 1
        shared = max(shared, len(batch.seqs))
        for seq, decoded in batch.step():
            i = next(k for k, s in seqs.items() if s is seq)
            slid |= bool(decoded.notice and "context is full" in decoded.notice)
            for row, ref in enumerate(refs[i]):
                diffs.append((worst(decoded.logits[row], ref.logits), i, steps_of[i]))
                ref.push(int(decoded.tokens[row]))
            steps_of[i] += 1
            if decoded.finished.all():
                assert steps_of[i] == seq.params.max_new_tokens  # it leaves after its last token, not before or after
        step += 1
    assert padded and shared >= 3 and slid  # rows really shared padded steps, and one slid among them
    assert steps_of == {i: params.max_new_tokens for i, (_, _, params) in enumerate(JOINS)}
    assert batch.past is None and batch.rows == 0
    diff, i, at = max(diffs)
    assert diff <= TOL, f"request {i} differs from PyTorch by {diff:.3g} at its step {at}"
