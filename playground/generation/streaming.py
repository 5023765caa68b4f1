"""A generation from settings to tokens: the settings checked against the shared engine, then
the engine's stream turned into :class:`~.state.GenerationState` snapshots, step by step.

No Gradio here: :func:`run` is a plain generator that the page (and the ``/generate`` API
endpoint) render; tests call it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from model.tokenizer import EOT_ID
from runtime.batching import Scheduler
from runtime.engine import Engine
from runtime.generate import stream as runtime_stream
from runtime.params import SamplingParams

from .. import limits
from ..resources import AUTO_PRECISION, Resources
from ..tokens import decode, encode, token_text
from .params import GenerationParams, validate_params
from .state import TOP_CANDIDATES, GeneratedStep, GenerationState, TokenChoice

__all__ = ["prepare", "new_state", "generate", "run"]


def prepare(
    res: Resources, prompt: Any, max_new_tokens: Any, temperature: Any, top_k: Any, top_p: Any, seed: Any, num_samples: Any = 1,
    precision: Any = AUTO_PRECISION,
) -> GenerationParams:
    """:func:`~.params.validate_params` with the context of the engine of ``res`` and GPT-2's tokenizer."""
    engine = res.engine()
    return validate_params(
        prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples,
        encode=encode,
        block_size=engine.block_size,
        vocab_size=engine.vocab_size,
        precision=precision,
    )


def new_state(params: GenerationParams, engine: Engine, decode: Callable[[list[int]], str] = decode) -> GenerationState:
    """The state of a generation not started yet (no token, every sample "stopped" until it ends
    otherwise), on ``engine`` (the one of ``params.precision``): what :func:`generate`
    fills, made beforehand by a caller that may stop it before its first token
    (``state.stop_requested``)."""
    n = params.num_samples
    state = GenerationState(params=params, provider=str(engine.provider), decode=decode, model_file=Path(engine.path).name)
    state.steps = [[] for _ in range(n)]
    state.stop_reasons = ["stopped"] * n
    if params.notice:
        state.notices.append(params.notice)
    return state


def run(
    res: Resources, params: GenerationParams, n_candidates: int | None = TOP_CANDIDATES, state: GenerationState | None = None,
    visitor: str = "",
) -> Iterator[GenerationState]:
    """:func:`generate` on the engine of ``res`` of the precision asked for and GPT-2's tokenizer,
    in its shared decoding batch, where visitors take turns (``visitor``: whose generation it is)."""
    engine, scheduler = res.engine_for(params.precision)
    return generate(engine, params, token_text, decode, scheduler=scheduler, n_candidates=n_candidates, state=state,
                    visitor=visitor)


def generate(
    engine: Engine,
    params: GenerationParams,
    decode_one: Callable[[int], str],
    decode: Callable[[list[int]], str],
    budget_s: float = limits.GENERATION_BUDGET_S,
    scheduler: Scheduler | None = None,
    n_candidates: int | None = TOP_CANDIDATES,
    state: GenerationState | None = None,
    visitor: str = "",
) -> Iterator[GenerationState]:
    """Stream a generation: yields the (same, updated) :class:`GenerationState` after every
    step, and once more at the end with ``finished`` set. With a ``scheduler`` (the engine's) it
    decodes in the batch shared with other generations, else on its own. Closing the generator
    (the stop button, a client that goes away) stops it after the current step. ``n_candidates``:
    the top tokens kept per step for the chart (None for a caller that shows neither them nor the
    tokens' probabilities, e.g. the API: the engine then works out none). ``state``: one made by
    :func:`new_state` to be filled (its ``stop_requested`` ends the generation, first token or not).
    ``visitor``: whose generation it is, for the scheduler's turns (runtime/turns.py)."""
    n = params.num_samples
    state = state if state is not None else new_state(params, engine, decode)
    sampling = SamplingParams(
        params.max_new_tokens, **params.sampling.engine_args(engine.vocab_size), seed=params.seed,
        num_samples=n, n_candidates=n_candidates,
    )
    stop = state.stop_requested
    stream = (
        scheduler.stream(params.prompt_ids, sampling, stop=stop, visitor=visitor) if scheduler else runtime_stream(engine, params.prompt_ids, sampling)
    )
    try:
        for event in stream:
            if stop.is_set():
                break  # every unfinished sample's reason stays "stopped"
            state.ttft_s, state.elapsed_s = event.ttft_s, event.elapsed_s
            # The engine's notices: the prompt was cut (which ours, params.notice, already says in
            # this tab's words, with the counts of the text typed) or the context filled up while
            # generating, which a learner needs to read too, whether the prompt was cut or not.
            if event.notice and event.notice not in state.notices and not (params.notice and event.notice.startswith("The prompt")):
                state.notices.append(event.notice)
            for sample in range(n):
                token_id = event.token_ids[sample]
                if token_id is None:
                    continue
                cands = [TokenChoice(c.token_id, decode_one(c.token_id), c.prob, c.sample_prob) for c in event.candidates[sample]]
                chosen = next((c for c in cands if c.token_id == token_id), None)
                if chosen is None:  # drawn from outside the top candidates
                    chosen = TokenChoice(
                        token_id, decode_one(token_id), float(event.token_probs[sample] or 0.0), event.token_sample_probs[sample]
                    )
                steps = state.steps[sample]
                steps.append(GeneratedStep(len(steps), chosen, cands))
                if event.finished[sample]:
                    state.stop_reasons[sample] = "end of text" if token_id == EOT_ID else "length"
            if not all(event.finished) and event.elapsed_s > budget_s:
                state.stop_reasons = ["time limit" if r == "stopped" else r for r in state.stop_reasons]
                state.notices.append(
                    f"Stopped after {budget_s:g} s, the time limit of one generation: ask for fewer tokens or samples."
                )
                break  # the final state below says it
            yield state
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        state.stream_closed.set()
    state.finished = True
    yield state
