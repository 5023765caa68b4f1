"""A generation that ran in the learner's browser ("Run on: this browser"), as the page sends it
back once it ends: read and checked into the :class:`~.state.GenerationState` the tab's views draw
from (the text, the candidates chart and its pickers, the "Next token" steps), so that both modes
show one view. Every token and probability in it is the browser engine's (onnxruntime-web on the
Hub folder's 8-bit ``model_quantized.onnx``); the server only draws them.

What the page sends (``web/app/run_on.js``), one JSON object::

    {"settings": {"prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "num_samples"},
     "samples": [{"steps": [[token, p, q, id_1, p_1, q_1, ..., id_10, p_10, q_10], ...],
                  "stop": "eot" | "max_new_tokens" | "stopped"}],
     "ttft_s", "elapsed_s", "notices": [str]}

``p`` is the model's probability (softmax at temperature 1) and ``q`` the probability in the
distribution the token was drawn from; a step lists the drawn token's two, then its candidates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from .. import limits
from ..validation import InputError
from .params import GenerationParams
from .state import TOP_CANDIDATES, GeneratedStep, GenerationState, TokenChoice

__all__ = ["BROWSER_FILE", "BROWSER_PROVIDER", "MAX_BROWSER_CHARS", "read_result", "from_browser"]

BROWSER_FILE = "model_quantized.onnx"
BROWSER_PROVIDER = "this browser (onnxruntime-web)"
# The engine's stop reasons as the tab's stats word them (GenerationState.stop_reasons).
STOP_REASONS = {"eot": "end of text", "max_new_tokens": "length", "stopped": "stopped"}
# The longest result a page may send: 4 samples of 512 steps of 11 tokens with 4-digit probabilities
# are about 0.5 MB (the request's own bound is limits.MAX_REQUEST_BYTES).
MAX_BROWSER_CHARS = limits.MAX_REQUEST_BYTES
STEP_NUMBERS = 3  # the token (or candidate) id, p, q


def read_result(text: Any) -> dict | None:
    """The page's JSON text as an object; None for an empty one (the page ran nothing: a refused
    setting, a model that did not load), InputError for anything else that is not one."""
    if text is None or text == "":
        return None
    if not isinstance(text, str) or len(text) > MAX_BROWSER_CHARS:
        raise InputError(f"a browser generation's result must be JSON text of at most {MAX_BROWSER_CHARS:,} characters")
    try:
        data = json.loads(text)
    except ValueError:
        raise InputError("a browser generation's result must be JSON text (the page writes it)") from None
    if not isinstance(data, dict):
        raise InputError("a browser generation's result must be a JSON object with its settings and samples")
    return data if data.get("samples") is not None else None


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise InputError(f"{where} must be a probability from 0 to 1, not {value!r}")
    return float(value)


def _token(value: Any, vocab_size: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        raise InputError(f"{where} must be a token id from 0 to {vocab_size - 1}, not {value!r}")
    return value


def _step(raw: Any, index: int, vocab_size: int, decode_one: Callable[[int], str], where: str) -> GeneratedStep:
    if not isinstance(raw, list) or len(raw) % STEP_NUMBERS or not STEP_NUMBERS <= len(raw) <= STEP_NUMBERS * (TOP_CANDIDATES + 1):
        raise InputError(f"{where} must list the token, its two probabilities and up to {TOP_CANDIDATES} candidates'")
    choices = []
    for at in range(0, len(raw), STEP_NUMBERS):
        token = _token(raw[at], vocab_size, f"{where}'s token ids")
        p, q = (_probability(v, f"{where}'s probabilities") for v in raw[at + 1 : at + 3])
        choices.append(TokenChoice(token, decode_one(token), p, q))
    drawn, *candidates = choices
    return GeneratedStep(index, drawn, candidates)


def from_browser(
    data: dict, params: GenerationParams, *, vocab_size: int, decode: Callable[[list[int]], str], decode_one: Callable[[int], str],
) -> GenerationState:
    """The state of the browser's generation ``data`` (read_result's) that ran with ``params``
    (its settings, checked as the server checks its own): each sample's steps, stop reasons,
    timing and notices. InputError names what does not fit."""
    samples = data.get("samples")
    if not isinstance(samples, list) or len(samples) != params.num_samples:
        raise InputError(f"a browser generation's samples must be a list of {params.num_samples} (its num_samples)")
    state = GenerationState(params=params, provider=BROWSER_PROVIDER, decode=decode, model_file=BROWSER_FILE, finished=True)
    for s, sample in enumerate(samples):
        where = f"sample {s + 1}"
        if not isinstance(sample, dict) or not isinstance(sample.get("steps"), list):
            raise InputError(f"{where} must be an object with its steps")
        steps = sample["steps"]
        if len(steps) > params.max_new_tokens:
            raise InputError(f"{where} has {len(steps)} steps, more than its max_new_tokens ({params.max_new_tokens})")
        if sample.get("stop") not in STOP_REASONS:
            raise InputError(f"{where}'s stop must be one of {sorted(STOP_REASONS)}, not {sample.get('stop')!r}")
        state.steps.append([_step(raw, i, vocab_size, decode_one, f"{where}, step {i + 1}") for i, raw in enumerate(steps)])
        state.stop_reasons.append(STOP_REASONS[sample["stop"]])
    for name in ("ttft_s", "elapsed_s"):
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6):
            raise InputError(f"{name} must be seconds (a number >= 0) or null, not {value!r}")
        setattr(state, name, value)
    notices = data.get("notices") or []
    if not isinstance(notices, list) or not all(isinstance(n, str) and len(n) <= 500 for n in notices) or len(notices) > 8:
        raise InputError("notices must be a list of at most 8 sentences")
    state.notices = ([params.notice] if params.notice else []) + [n for n in notices if n != params.notice]
    return state
