"""One generation on its own: the decoding loop (``runtime.batching.Batch``) run for a single
request on the caller's thread. The app's generations share one loop instead
(``runtime.batching.Scheduler``): the same steps, the same tokens.

    from runtime.engine import Engine
    from runtime.generate import generate, stream
    from runtime.params import SamplingParams
    engine = Engine.load("artifacts/hub/onnx/model_int8.onnx")
    ids = generate(engine, prompt_ids, SamplingParams(50))          # greedy: list[int] of new token ids
    for step in stream(engine, prompt_ids, SamplingParams(50, temperature=0.8, top_k=40, seed=1)):
        print(step.token_ids[0], step.candidates[0][:3], step.tokens_per_s)

A prompt longer than the context keeps its last ``block_size`` tokens (the first step's notice
says so); a full context drops its oldest ``Engine.context_shift`` tokens at once and reads the
rest anew. Several samples run as rows of one batch. One engine may serve many threads at once:
every call keeps its cache, seed and timing to itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Iterator, Sequence

from .batching import Batch, Request
from .engine import Engine
from .params import SamplingParams, check_prompt
from .steps import DecodeStep, Step, to_steps


def decode(engine: Engine, request: Request) -> Generator[DecodeStep, None, None]:
    """A :class:`~runtime.steps.DecodeStep` per new position of ``request``, alone in a decoding batch."""
    batch = Batch(engine)
    batch.add(request)
    while batch.active:
        for _, step in batch.step():
            yield step


def generate(engine: Engine, prompt_ids: Sequence[int], params: SamplingParams) -> list[int] | list[list[int]]:
    """The new token ids: ``list[int]`` for one sample, else one list per sample (lengths may
    differ). A sample that stops at ``<|endoftext|>`` ends with it."""
    ids = check_prompt(prompt_ids, engine.vocab_size, engine.eot_id)
    # No candidates: nobody reads them here, and they cost a softmax per token and sample.
    request = Request.new(ids, dataclasses.replace(params, n_candidates=None), engine.block_size)
    out: list[list[int]] = [[] for _ in range(params.num_samples)]
    for step in decode(engine, request):
        for sample, token, ok in zip(out, step.tokens.tolist(), step.live):
            if ok:
                sample.append(token)
    return out[0] if params.num_samples == 1 else out


def stream(engine: Engine, prompt_ids: Sequence[int], params: SamplingParams) -> Iterator[Step]:
    """A :class:`~runtime.steps.Step` per new position. The prompt is checked at the call, before
    the first step is asked for; closing the iterator stops the generation."""
    request = Request.new(check_prompt(prompt_ids, engine.vocab_size, engine.eot_id), params, engine.block_size)
    return to_steps(decode(engine, request), request.dropped)
