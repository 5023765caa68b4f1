"""What a generation holds while it streams and after: each sample's steps (the token drawn and
the candidates it was drawn among), its speed, why it stopped, and the "Next token" history."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .params import GenerationParams

__all__ = ["TOP_CANDIDATES", "HISTORY_STEPS", "TokenChoice", "GeneratedStep", "GenerationState", "drawn_rank", "with_history"]

TOP_CANDIDATES = 10  # candidates kept per step (the bar chart shows them all)
HISTORY_STEPS = 20  # "Next token" steps listed under the chart, newest first


@dataclass(frozen=True)
class TokenChoice:
    """A token the model could write next (one of a step's candidates, or the one drawn)."""

    token_id: int
    text: str  # the token decoded alone (a partial UTF-8 character shows as �)
    probability: float  # the model's probability (softmax at temperature 1)
    sample_probability: float | None  # in the distribution actually sampled (temperature, top-k, top-p)


@dataclass(frozen=True)
class GeneratedStep:
    """One generated token of one sample, with what the model hesitated between."""

    index: int  # 0-based position among the generated tokens
    token: TokenChoice  # the token that was drawn
    candidates: list[TokenChoice]  # the most probable next tokens, best first


def drawn_rank(step: GeneratedStep) -> int | None:
    """The drawn token's place among the step's candidates (1: the model's most likely token);
    None when it came from outside them."""
    return next((r for r, c in enumerate(step.candidates, 1) if c.token_id == step.token.token_id), None)


@dataclass
class GenerationState:
    """Everything known about a generation so far; updated in place after every step."""

    params: GenerationParams
    provider: str
    decode: Callable[[list[int]], str]
    model_file: str = ""  # the ONNX file generating, e.g. "model_int8.onnx"
    steps: list[list[GeneratedStep]] = field(default_factory=list)  # [sample][step]
    ttft_s: float | None = None  # from the call to the first new token (prompt processing included)
    elapsed_s: float | None = None
    finished: bool = False
    stop_reasons: list[str] = field(default_factory=list)  # per sample: "length", "end of text", "stopped"
    notices: list[str] = field(default_factory=list)
    # Set once the engine's stream is closed, finished or stopped: no token comes after it.
    stream_closed: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    # Set from another thread (the page's Stop) to end the generation: it ends within
    # runtime.batching.STOP_POLL_S even while it is still waiting for its first token.
    stop_requested: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    # "Next token" steps taken one at a time up to this one, newest first (HISTORY_STEPS at most).
    history: list[GeneratedStep] = field(default_factory=list)

    @property
    def new_tokens(self) -> int:
        return sum(len(s) for s in self.steps)

    def sample_ids(self, sample: int) -> list[int]:
        return [step.token.token_id for step in self.steps[sample]]

    def completions(self) -> list[str]:
        """Each sample's new text, decoded as a whole (so multi-byte characters come out right)."""
        return [self.decode(self.sample_ids(i)) for i in range(len(self.steps))]

    @property
    def tokens_per_s(self) -> float | None:
        """Decoding speed, all samples together: the tokens after each sample's first, over the
        time after the first step (the prompt's processing is in the time to first token)."""
        if self.ttft_s is None or self.elapsed_s is None or self.elapsed_s <= self.ttft_s:
            return None
        later = self.new_tokens - sum(1 for s in self.steps if s)
        return later / (self.elapsed_s - self.ttft_s) if later > 0 else None

    @property
    def stop_reason(self) -> str:
        reasons = sorted(set(self.stop_reasons))
        return ", ".join(reasons)

    def to_api(self) -> dict[str, Any]:
        """The JSON the ``/generate`` endpoint streams: one object per update."""
        completions = self.completions()
        tps = self.tokens_per_s
        return {
            "prompt": self.params.prompt,
            "completion": completions[0] if completions else "",
            "token_ids": self.sample_ids(0) if self.steps else [],
            "new_tokens": self.new_tokens,
            "finished": self.finished,
            "stop_reason": self.stop_reason if self.finished else "",
            "time_to_first_token_s": None if self.ttft_s is None else round(self.ttft_s, 4),
            "tokens_per_s": None if tps is None else round(tps, 1),
            "provider": self.provider,
            "model_file": self.model_file,
            "notice": " ".join(self.notices),
        }


def with_history(state: GenerationState, previous: GenerationState | None, prompt: str) -> GenerationState:
    """``state`` (one "Next token" step on ``prompt``) with the steps taken before it, newest
    first, when ``prompt`` continues the previous step's text (its prompt and its token); a
    prompt typed anew, or a Generate in between, starts the list again."""
    step = state.steps[0][-1] if state.steps and state.steps[0] else None
    earlier: list[GeneratedStep] = []
    if previous is not None and previous.history and prompt == previous.params.prompt + previous.completions()[0]:
        earlier = previous.history
    if step is not None:
        # Numbered on from the newest step kept: the list is cut, so its length stops counting.
        number = earlier[0].index + 1 if earlier else 0
        state.history = [GeneratedStep(number, step.token, step.candidates), *earlier][:HISTORY_STEPS]
    return state
