"""The Text generation tab's settings: their starting values, the example prompts, the precisions a
generation can run in, and the checks every setting passes before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import limits
from ..next_token import SamplingSettings
from ..resources import AUTO_PRECISION, PRECISION_FILES
from ..validation import InputError, validate_choice, validate_float, validate_int, validate_text

__all__ = [
    "DEFAULTS",
    "EXAMPLE_PROMPTS",
    "PRECISIONS",
    "DEFAULT_PRECISION",
    "PRECISION_LABELS",
    "GenerationParams",
    "validate_params",
]

# The sliders' starting values: a little below temperature 1 with nucleus sampling reads best
# for a small Shakespeare model (less gibberish, still varied).
DEFAULTS: dict[str, Any] = {
    "max_new_tokens": 100,
    "temperature": 0.8,
    "top_k": 50,
    "top_p": 0.95,
    "seed": 42,
    "num_samples": 1,
}

# In the corpus's own style (tests/lessons/test_prompts.py checks them against the training text): the
# speaker's name as the edition writes it, a full stop, alone on its line, then the speech. A
# "ROMEO:" the model never saw costs it ~2 nats on the next words and starts it on blank space.
EXAMPLE_PROMPTS: list[str] = [
    # The first is the tab's default, cut mid-sentence: its Next token adds words (" is", " this"),
    # where the whole line's "?" was followed by line breaks, the least instructive first step.
    "Romeo.\nBut soft! what light through yonder window",
    "FIRST CITIZEN.\nBefore we proceed any further, hear me speak.",
    "KING HENRY.\nOnce more unto the breach, dear friends, once more,",
    "Ham.\nTo be, or not to be,--that is the question:--",
    "LADY MACBETH.\n",
]

# The precision a generation runs in: "full" (the fp32 file, as Inside the model and Compare
# compute), "8-bit" (the integer file: 8-bit weights and activations), or "auto" (the app's
# engine: the 8-bit file on a CPU, fp32 on CUDA; what the /generate API always used). The page
# starts on full precision: docs/export.md ("Precision on the page") has the measurement behind it.
PRECISIONS = tuple(PRECISION_FILES)
DEFAULT_PRECISION = "full"
# Each label names its file: a seed's text holds for one engine and one file (docs/browser.md).
PRECISION_LABELS = {"full": f"Full precision (32-bit floats, {PRECISION_FILES['full'].split('/')[-1]})",
                    "8-bit": f"8 bits (int8, {PRECISION_FILES['8-bit'].split('/')[-1]})"}


@dataclass(frozen=True)
class GenerationParams:
    """Validated settings; ``prompt_ids`` already cut to what fits in the context."""

    prompt: str
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int
    num_samples: int
    dropped_prompt_tokens: int = 0  # tokens cut from the start of a prompt longer than the context
    precision: str = AUTO_PRECISION  # one of PRECISIONS, or AUTO_PRECISION

    @property
    def sampling(self) -> SamplingSettings:
        """The temperature, top-k and top-p the generation draws with."""
        return SamplingSettings(self.temperature, self.top_k, self.top_p)

    @property
    def notice(self) -> str:
        if not self.dropped_prompt_tokens:
            return ""
        return (
            f"The prompt was {len(self.prompt_ids) + self.dropped_prompt_tokens} tokens long; only its last "
            f"{len(self.prompt_ids)} were kept ({self.dropped_prompt_tokens} cut from the start)."
        )


def validate_params(
    prompt: Any,
    max_new_tokens: Any = DEFAULTS["max_new_tokens"],
    temperature: Any = DEFAULTS["temperature"],
    top_k: Any = DEFAULTS["top_k"],
    top_p: Any = DEFAULTS["top_p"],
    seed: Any = DEFAULTS["seed"],
    num_samples: Any = 1,
    *,
    encode: Callable[[str], list[int]],
    block_size: int,
    vocab_size: int,
    precision: Any = AUTO_PRECISION,
) -> GenerationParams:
    """Check every setting (raising :class:`InputError` with what is accepted) and tokenize the
    prompt. A prompt longer than the context keeps its last tokens: the engine slides its window
    the same way while generating, so nothing it could use is lost."""
    prompt = validate_text(prompt, name="prompt", max_chars=limits.MAX_PROMPT_CHARS)
    max_new_tokens = validate_int(
        max_new_tokens, name="max_new_tokens", minimum=limits.MIN_NEW_TOKENS, maximum=limits.MAX_NEW_TOKENS
    )
    # 0 means greedy and top-k 0 no cut, as in transformers, OpenAI's API, llama.cpp and Ollama.
    temperature = validate_float(temperature, name="temperature", minimum=limits.MIN_TEMPERATURE, maximum=limits.MAX_TEMPERATURE)
    top_k = validate_int(top_k, name="top_k", minimum=limits.MIN_TOP_K, maximum=vocab_size)
    top_p = validate_float(top_p, name="top_p", minimum=limits.MIN_TOP_P, maximum=limits.MAX_TOP_P, min_inclusive=False)
    seed = validate_int(seed, name="seed", minimum=limits.MIN_SEED, maximum=limits.MAX_SEED)
    num_samples = validate_int(num_samples, name="num_samples", minimum=limits.MIN_SAMPLES, maximum=limits.MAX_SAMPLES)
    precision = validate_choice(AUTO_PRECISION if precision is None else precision, (*PRECISIONS, AUTO_PRECISION), name="precision")
    ids = encode(prompt)
    if not ids:
        raise InputError("prompt: no tokens after tokenization; type some text")
    keep = block_size - 1  # leave room for at least one new token in the context
    dropped = max(0, len(ids) - keep)
    return GenerationParams(prompt, ids[dropped:], max_new_tokens, temperature, top_k, top_p, seed, num_samples, dropped, precision)
