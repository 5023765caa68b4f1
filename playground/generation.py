"""Text generation tab: validate the sampling settings, stream tokens from the ONNX engine, keep
every step's top candidates, and turn them into text, statistics and a bar chart.

No Gradio here: :func:`generate` is a plain generator of :class:`GenerationState` snapshots that
the UI (and the ``/generate`` API endpoint) render; tests call it directly.
"""

from __future__ import annotations

import functools
import html
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from export.naming import FP32_NAME, INT8_NAME
from model.tokenizer import EOT_ID
from runtime.batching import Scheduler
from runtime.engine import Engine
from runtime.generate import stream as runtime_stream
from runtime.params import SamplingParams

from . import limits
from .next_token import (
    DRAWN_COLOUR,
    MODEL_COLOUR,
    SAMPLED_COLOUR,
    SamplingSettings,
    probability_axis,
)
from .plots import PERCENT_HOVER, base_layout, percent, wrap_title
from .resources import PROVIDER_ENV, get_engine, get_scheduler, open_engine
from .tokens import decode, encode, token_text, visible_whitespace
from .validation import InputError, validate_choice, validate_float, validate_int, validate_text

__all__ = [
    "DEFAULTS",
    "EXAMPLE_PROMPTS",
    "GenerationParams",
    "TokenChoice",
    "GeneratedStep",
    "GenerationState",
    "validate_params",
    "prepare",
    "run",
    "generate",
    "candidates_figure",
    "drawn_rank",
    "sampling_settings",
    "step_context",
    "step_caption",
    "step_figure",
    "tokens_html",
    "with_history",
    "history_html",
    "stats_markdown",
    "provider_label",
    "PRECISIONS",
    "DEFAULT_PRECISION",
    "engine_for",
    "precision_of",
    "provider_markdown",
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

# In the corpus's own style (tests/test_prompts.py checks them against the training text): the
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

TOP_CANDIDATES = 10  # candidates kept per step (the bar chart shows them all)

# The precision a generation runs in: "full" (the fp32 file, as Inside the model and Compare
# compute), "8-bit" (the integer file: 8-bit weights and activations), or "auto" (the app's
# engine: the 8-bit file on a CPU, fp32 on CUDA; what the /generate API always used). The page
# starts on full precision: docs/export.md ("Precision on the page") has the measurement behind it.
PRECISIONS = ("full", "8-bit")
AUTO_PRECISION = "auto"
DEFAULT_PRECISION = "full"
PRECISION_LABELS = {"full": "Full precision (32-bit floats)", "8-bit": "8 bits (int8)"}
_PRECISION_FILES = {"full": FP32_NAME, "8-bit": INT8_NAME}
HISTORY_STEPS = 20  # "Next token" steps listed under the chart, newest first
HISTORY_CANDIDATES = 5  # candidates listed per step there


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


def provider_markdown(provider: str, cuda_refused: str | None = None) -> str:
    """Where generation runs, for the page: the provider, and why CUDA is not used when it was
    asked for (``cuda_refused``, from ``resources.planned_provider``)."""
    line = f"Generation runs on **{provider_label(provider)}** (onnxruntime)."
    if cuda_refused:
        line += f"\n\n⚠️ CUDA was requested (`{PROVIDER_ENV}=cuda`) but cannot be used: {cuda_refused}. Generating on the CPU."
    return line


def provider_label(provider: str) -> str:
    """'CUDAExecutionProvider' -> 'CUDA (GPU)', 'CPUExecutionProvider' -> 'CPU'."""
    p = provider.lower()
    if "cuda" in p:
        return "CUDA (GPU)"
    if "cpu" in p:
        return "CPU"
    return provider


# --- On the shared engine and tokenizer (playground.resources) ---------------------------------


def prepare(
    prompt: Any, max_new_tokens: Any, temperature: Any, top_k: Any, top_p: Any, seed: Any, num_samples: Any = 1,
    precision: Any = AUTO_PRECISION,
) -> GenerationParams:
    """:func:`validate_params` with the shared engine's context and GPT-2's tokenizer."""
    engine = get_engine()
    return validate_params(
        prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples,
        encode=encode,
        block_size=engine.block_size,
        vocab_size=engine.vocab_size,
        precision=precision,
    )


_precision_lock = threading.Lock()
_precision_engines: dict[Path, tuple[Engine, Scheduler]] = {}  # the other file than the app's engine's (one entry)


def engine_for(precision: str) -> tuple[Engine, Scheduler]:
    """The engine and decoding loop of ``precision`` (:data:`PRECISIONS`, or "auto": the app's
    own). The file that is not the app's engine's is opened on first use, beside it (its own
    session and loop, the same row limits); a model without such a file is told with a message."""
    engine = get_engine()
    if precision == AUTO_PRECISION:
        return engine, get_scheduler()
    hub = engine.path.parent.parent  # <hub>/onnx/<file>
    path = hub / _PRECISION_FILES[precision]
    if path == engine.path:
        return engine, get_scheduler()
    with _precision_lock:
        if path not in _precision_engines:
            if not path.is_file():
                raise InputError(
                    f"precision: this model has no {precision} file ({_PRECISION_FILES[precision]}); "
                    f"choose {' or '.join(p for p in PRECISIONS if p != precision)}"
                )
            for old_engine, old_scheduler in _precision_engines.values():  # another model's: closed
                old_scheduler.close()
            _precision_engines.clear()
            other = open_engine(path)
            _precision_engines[path] = (other, Scheduler(
                other, max_rows=limits.MAX_BATCH_ROWS, max_waiting=limits.MAX_WAITING_REQUESTS, wide=other.widened()
            ))
        return _precision_engines[path]


def precision_of(engine: Engine) -> str:
    """"full" or "8-bit" for an engine's file (by its name), else "auto"."""
    for precision, name in _PRECISION_FILES.items():
        if engine.path.name == Path(name).name:
            return precision
    return AUTO_PRECISION


def _file_precision(model_file: str) -> str:
    """How an ONNX file's numbers are kept, in words: "full precision", "8 bits", "8-bit weights"."""
    if model_file == Path(FP32_NAME).name:
        return "full precision"
    if model_file == Path(INT8_NAME).name:
        return "8 bits"
    return "8-bit weights" if "quantized" in model_file else "its own precision"


def run(
    params: GenerationParams, n_candidates: int | None = TOP_CANDIDATES, state: GenerationState | None = None
) -> Iterator[GenerationState]:
    """:func:`generate` on the engine of the precision asked for and GPT-2's tokenizer, in its shared decoding batch."""
    engine, scheduler = engine_for(params.precision)
    return generate(engine, params, token_text, decode, scheduler=scheduler, n_candidates=n_candidates, state=state)


def new_state(engine: Engine, params: GenerationParams, decode: Callable[[list[int]], str] = decode) -> GenerationState:
    """The state of a generation not started yet (no token, every sample "stopped" until it ends
    otherwise): what :func:`generate` fills, made beforehand by a caller that may stop it before
    its first token (``state.stop_requested``)."""
    n = params.num_samples
    state = GenerationState(params=params, provider=str(engine.provider), decode=decode, model_file=Path(engine.path).name)
    state.steps = [[] for _ in range(n)]
    state.stop_reasons = ["stopped"] * n
    if params.notice:
        state.notices.append(params.notice)
    return state


def generate(
    engine: Engine,
    params: GenerationParams,
    decode_one: Callable[[int], str],
    decode: Callable[[list[int]], str],
    budget_s: float = limits.GENERATION_BUDGET_S,
    scheduler: Scheduler | None = None,
    n_candidates: int | None = TOP_CANDIDATES,
    state: GenerationState | None = None,
) -> Iterator[GenerationState]:
    """Stream a generation: yields the (same, updated) :class:`GenerationState` after every
    step, and once more at the end with ``finished`` set. With a ``scheduler`` (the engine's) it
    decodes in the batch shared with other generations, else on its own. Closing the generator
    (the stop button, a client that goes away) stops it after the current step. ``n_candidates``:
    the top tokens kept per step for the chart (None for a caller that shows neither them nor the
    tokens' probabilities, e.g. the API: the engine then works out none). ``state``: one made by
    :func:`new_state` to be filled (its ``stop_requested`` ends the generation, first token or not)."""
    n = params.num_samples
    state = state if state is not None else new_state(engine, params, decode)
    sampling = SamplingParams(
        params.max_new_tokens, **sampling_settings(params).engine_args(engine.vocab_size), seed=params.seed,
        num_samples=n, n_candidates=n_candidates,
    )
    stop = state.stop_requested
    stream = (
        scheduler.stream(params.prompt_ids, sampling, stop=stop) if scheduler else runtime_stream(engine, params.prompt_ids, sampling)
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


# --- Rendering ---------------------------------------------------------------------------------


def drawn_rank(step: GeneratedStep) -> int | None:
    """The drawn token's place among the step's candidates (1: the model's most likely token);
    None when it came from outside them."""
    return next((r for r, c in enumerate(step.candidates, 1) if c.token_id == step.token.token_id), None)


def sampling_settings(params: GenerationParams) -> SamplingSettings:
    """The temperature, top-k and top-p a generation drew with."""
    return SamplingSettings(params.temperature, params.top_k, params.top_p)


def step_context(state: GenerationState, sample: int, index: int) -> list[int]:
    """The ids the model saw before step ``index`` (0-based) of ``sample``: the prompt and the
    tokens drawn before it (the engine keeps the last ``block_size`` of them)."""
    return state.params.prompt_ids + state.sample_ids(sample)[:index]


def candidates_figure(
    step: GeneratedStep | None,
    *,
    settings: SamplingSettings | None = None,
    title: str | None = None,
    model_only: bool = False,
) -> go.Figure:
    """Horizontal bars: the top next-token candidates of one step, as the model rates them
    (temperature 1, grey) and in the distribution the token was drawn from (``settings``:
    temperature, top-k, top-p; indigo), the drawn token in orange, with its own legend entry.
    A token drawn from outside the top candidates gets a bar of its own, with the sampling
    probability the engine reported for it.

    ``model_only``: nothing was sampled (the Compare tab's greedy look at the next token): one
    bar per token, the model's probability, its most likely token in orange. ``title`` replaces
    the step's own."""
    fig = go.Figure()
    if step is None:
        fig.add_annotation(text="Generate some text, then pick a step", showarrow=False, font={"size": 15})
        fig.update_layout(xaxis={"visible": False}, yaxis={"visible": False}, height=300, template="plotly_white")
        return fig
    drawn_id = step.token.token_id
    cands = list(step.candidates)
    if model_only:
        return _model_only_figure(step, title)
    drawn_sample_probability = step.token.sample_probability
    if drawn_rank(step) is None:  # a token drawn from outside the top list still shows
        cands.append(step.token)
    cands = cands[::-1]  # plotly draws the first bar at the bottom
    labels = [f"{visible_whitespace(c.text)}  #{c.token_id}" for c in cands]
    others = [(label, c) for label, c in zip(labels, cands) if c.token_id != drawn_id]
    drawn_label = next(label for label, c in zip(labels, cands) if c.token_id == drawn_id)

    def shown(p: float | None) -> str:
        return percent(p) if p is not None else "not reported"

    outside = {"textposition": "outside", "cliponaxis": False, "constraintext": "none", "textfont": {"size": 11}}
    traces = [
        {
            "type": "bar", "x": [c.probability for c in cands], "y": labels, "orientation": "h", "name": "model (temperature 1)",
            "marker": {"color": MODEL_COLOUR}, "offsetgroup": "model",
            "hovertemplate": f"%{{y}}<br>model probability %{{x:{PERCENT_HOVER}}}<extra></extra>",
        },
        # Two traces in one bar slot: the legend keeps one colour per meaning at every step (one
        # trace coloured bar by bar took its legend colour from whichever bar came first).
        {
            "type": "bar", "x": [c.sample_probability for _, c in others], "y": [label for label, _ in others], "orientation": "h",
            "name": "drawn from" + (f" ({settings.label()})" if settings else " (temperature, top-k, top-p)"),
            "marker": {"color": SAMPLED_COLOUR}, "offsetgroup": "sampled", "text": [shown(c.sample_probability) for _, c in others],
            **outside, "hovertemplate": f"%{{y}}<br>probability of being drawn %{{x:{PERCENT_HOVER}}}<extra></extra>",
        },
        {
            "type": "bar", "x": [drawn_sample_probability], "y": [drawn_label], "orientation": "h", "name": "the token drawn",
            "marker": {"color": DRAWN_COLOUR}, "offsetgroup": "sampled", "text": [shown(drawn_sample_probability)],
            **outside, "hovertemplate": f"%{{y}}: the token drawn<br>probability of being drawn %{{x:{PERCENT_HOVER}}}<extra></extra>",
        },
    ]
    peak = max([c.probability for c in cands] + [c.sample_probability or 0.0 for c in cands] + [drawn_sample_probability or 0.0])
    p = f" (p = {percent(drawn_sample_probability)})" if drawn_sample_probability is not None else ""
    title = title or f"Step {step.index + 1}: drew “{visible_whitespace(step.token.text)}”{p}"
    layout = _base_layout_json(title, height=max(320, 34 * len(cands) + 150))
    layout.update(
        barmode="group", bargap=0.22, margin={**layout["margin"], "l": 10, "r": 20},
        xaxis=_expanded_titles(probability_axis(peak)),
        yaxis={"automargin": True, "categoryorder": "array", "categoryarray": labels, "tickfont": {"family": "monospace", "size": 11}},
    )
    # Built as plotly's JSON, not through its validating setters: those took 80 ms a chart (half
    # of it copying the template), which sixteen learners' generations ending together queued
    # behind one another; the same JSON comes out (tests/test_tab_next_token.py compares).
    return go.Figure({"data": traces, "layout": layout}, _validate=False)


def _expanded_titles(axis: dict) -> dict:
    """An axis with its title as plotly writes it (``{"text": ...}``, not the shorthand string)."""
    return {**axis, "title": {"text": axis["title"]}} if isinstance(axis.get("title"), str) else axis


@functools.lru_cache(maxsize=8)
def _base_layout_lines(lines: int) -> str:
    """``plots.base_layout``'s layout (template, margins, legend) for a title of ``lines`` lines,
    as JSON, built once per line count."""
    return go.Figure(layout=base_layout(go.Figure(), "<br>".join(["x"] * lines)).layout).to_json()


def _base_layout_json(title: str, height: int) -> dict:
    """``plots.base_layout(fig, title, height=height)``'s layout as a fresh dict, without plotly's validation."""
    wrapped = wrap_title(title)
    layout = json.loads(_base_layout_lines(wrapped.count("<br>") + 1))["layout"]
    layout["title"]["text"] = wrapped
    layout["height"] = height
    return layout


def _model_only_figure(step: GeneratedStep, title: str | None) -> go.Figure:
    cands = list(step.candidates)[::-1]
    labels = [f"{visible_whitespace(c.text)}  #{c.token_id}" for c in cands]
    top = [i for i, c in enumerate(cands) if c.token_id == step.token.token_id]
    rest = [i for i in range(len(cands)) if i not in top]
    fig = go.Figure()
    for name, colour, idx in (("probability (temperature 1)", SAMPLED_COLOUR, rest), ("the most likely (greedy choice)", DRAWN_COLOUR, top)):
        fig.add_bar(
            x=[cands[i].probability for i in idx], y=[labels[i] for i in idx], orientation="h", name=name,
            marker_color=colour, offsetgroup="model", text=[percent(cands[i].probability) for i in idx],
            textposition="outside", cliponaxis=False, constraintext="none", textfont={"size": 11},
            hovertemplate=f"%{{y}}<br>probability %{{x:{PERCENT_HOVER}}}<extra></extra>",
        )
    base_layout(fig, title or "Next token", height=max(300, 26 * len(cands) + 150))
    fig.update_layout(
        bargap=0.25, margin={"l": 10, "r": 20}, xaxis=probability_axis(max(c.probability for c in cands)),
        yaxis={"automargin": True, "categoryorder": "array", "categoryarray": labels, "tickfont": {"family": "monospace", "size": 11}},
    )
    return fig


def step_caption(step: GeneratedStep, settings: SamplingSettings) -> str:
    """One sentence under the chart: where the drawn token stood among the model's candidates,
    and why a token other than the most likely can come out."""
    rank = drawn_rank(step)
    if rank == 1:
        return "The token drawn is the model's most likely one."
    where = f"the model's number {rank} candidate" if rank else f"from outside the model's top {TOP_CANDIDATES}"
    why = (
        "Sampling draws at random from the distribution, so a less likely token can come out even at a low "
        "temperature; only temperature 0 (greedy) or top-k 1 always take the most likely one."
    )
    return f"The token drawn is {where}. {why}" if not settings.greedy else f"The token drawn is {where}."


def step_figure(state: GenerationState | None, sample: Any, step_number: Any) -> tuple[go.Figure, str]:
    """The candidates chart and its caption for ``step_number`` (1-based) of ``sample``, clamped
    to what exists."""
    if state is None or not state.steps or not any(state.steps):
        return candidates_figure(None), ""
    s = min(max(int(sample or 0), 0), len(state.steps) - 1)
    steps = state.steps[s]
    if not steps:
        return candidates_figure(None), ""
    i = min(max(int(step_number or 1), 1), len(steps)) - 1
    step, settings = steps[i], sampling_settings(state.params)
    return candidates_figure(step, settings=settings), step_caption(step, settings)


def with_history(state: GenerationState, previous: GenerationState | None, prompt: str) -> GenerationState:
    """``state`` (one "Next token" step on ``prompt``) with the steps taken before it, newest
    first, when ``prompt`` continues the previous step's text (its prompt and its token); a
    prompt typed anew, or a Generate in between, starts the list again."""
    step = state.steps[0][-1] if state.steps and state.steps[0] else None
    earlier: list[GeneratedStep] = []
    if previous is not None and previous.history and prompt == previous.params.prompt + previous.completions()[0]:
        earlier = previous.history
    if step is not None:
        state.history = [GeneratedStep(len(earlier), step.token, step.candidates), *earlier][:HISTORY_STEPS]
    return state


def history_html(state: GenerationState | None) -> str:
    """The "Next token" steps so far as a table, newest first: each step's token drawn (with its
    probability) and the model's most likely candidates then. Empty when there are none."""
    if state is None or not state.history:
        return ""
    rows = []
    for step in state.history:
        drawn = step.token
        p = drawn.sample_probability if drawn.sample_probability is not None else drawn.probability
        cands = " ".join(
            f'<span class="gen-hist-cand{" gen-hist-drawn" if c.token_id == drawn.token_id else ""}">'
            f"<code>{html.escape(visible_whitespace(c.text))}</code>&nbsp;{percent(c.probability)}</span>"
            for c in step.candidates[:HISTORY_CANDIDATES]
        )
        rows.append(
            f"<tr><td>{step.index + 1}</td><td><code>{html.escape(visible_whitespace(drawn.text))}</code> ({percent(p)})</td>"
            f"<td>{cands}</td></tr>"
        )
    more = f", the last {HISTORY_STEPS}" if len(state.history) >= HISTORY_STEPS else ""
    return (
        f'<div class="gen-history"><div class="gen-history-title">Steps so far, newest first{more}</div>'
        '<table><thead><tr><th>step</th><th>drawn (p)</th><th>the model\'s most likely then (model p)</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _token_html(text: str) -> str:
    """A generated token's text for the page: a token of whitespace only is drawn with the
    Tokenization tab's symbols (⋅ → ↵), muted, so an all-whitespace sample shows what it is."""
    if text and not text.strip():
        return f'<span class="gen-ws">{html.escape(visible_whitespace(text, keep_line_breaks=True))}</span>'
    return html.escape(text)


def tokens_html(state: GenerationState) -> str:
    """The prompt, then each sample's generated tokens as spans shaded by the probability they
    were drawn with (hover or tap: step, id, probabilities), as Transformer Explainer colours its output."""
    prompt = html.escape(state.params.prompt)
    parts = []
    for sample, steps in enumerate(state.steps):
        spans = []
        for step in steps:
            p = step.token.sample_probability if step.token.sample_probability is not None else step.token.probability
            title = (
                f"step {step.index + 1} · id {step.token.token_id} · model p = {percent(step.token.probability)}"
                + (f" · sampled p = {percent(step.token.sample_probability)}" if step.token.sample_probability is not None else "")
            )
            spans.append(
                f'<span class="gen-tok" data-sample="{sample}" data-step="{step.index + 1}" '
                f'style="background: rgba(99, 102, 241, {0.08 + 0.5 * (1 - p):.2f})" '
                f'tabindex="0" data-tip="{html.escape(title, quote=True)}">{_token_html(step.token.text)}</span>'
            )
        header = f'<div class="gen-sample-title">Sample {sample + 1}</div>' if len(state.steps) > 1 else ""
        parts.append(f'<div class="gen-sample">{header}<span class="gen-prompt">{prompt}</span>{"".join(spans)}</div>')
    return '<div class="gen-output">' + "".join(parts) + "</div>"


def stats_markdown(state: GenerationState) -> str:
    ttft, tps = state.ttft_s, state.tokens_per_s
    bits = [
        f"**{state.new_tokens}** new token{'s' if state.new_tokens != 1 else ''}",
        f"**{tps:.1f}** tokens/s" if tps is not None else "tokens/s –",
        f"time to first token **{ttft * 1000:.0f} ms**" if ttft is not None else "time to first token –",
        f"provider **{provider_label(state.provider)}**"
        + (f" (`{state.model_file}`, {_file_precision(state.model_file)})" if state.model_file else ""),
    ]
    if state.finished:
        bits.append(f"stopped by: {state.stop_reason}")
    line = " · ".join(bits)
    others = sum(1 for steps in state.steps for step in steps if drawn_rank(step) != 1)
    if others and state.finished:
        line += (
            f"\n\n{others} of the {state.new_tokens} tokens {'were' if others != 1 else 'was'} not the model's most "
            "likely: each token is drawn at random from the distribution the settings give (click one to see it)."
        )
    for notice in state.notices:
        line += f"\n\n⚠️ {notice}"
    return line
