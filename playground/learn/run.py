"""Watch it learn's run: its settings (validated), the untrained model they give, model.train's
settings for it, its samples, and :class:`RunState`, the run as the page and the API see it.

Same settings and seed, same run, on the server and in the browser (web/engine/learn.js): every
number drawn comes from the generator both share (runtime/draws.py): the initial weights from
(seed, INIT, lane = the parameter), each step's batch from (seed, BATCHES, lane = the step)
(:mod:`.batches`), each sample's characters from (seed, SAMPLES, lane = the step), and a prompt's
continuation from (seed, SAMPLING)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from model.gpt import GPT, GPTConfig
from model.train import TrainConfig
from runtime import draws
from runtime.sampling import Settings, choose_rows

from .corpus import Corpus, load_corpus
from .refs import References
from .. import limits
from ..initial import drawn_gpt
from ..validation import InputError, validate_choice, validate_int, validate_text

__all__ = [
    "SIZES", "LEARNING_RATES", "INITS", "POSITIONS", "LearnSettings", "settings", "model_config", "build_model",
    "train_config", "sample", "draw", "RunState", "describe", "continue_text", "seconds_text",
]

# Model sizes: both train a step in well under the 1 s that Stop may take (docs/training.md).
SIZES: dict[str, GPTConfig] = {
    "tiny": GPTConfig(vocab_size=1, block_size=64, n_layer=2, n_head=2, d_model=64),
    "small": GPTConfig(vocab_size=1, block_size=64, n_layer=4, n_head=4, d_model=128),
}
SIZE_WHY = {
    "tiny": "2 layers, d_model 64: the fastest steps",
    "small": "4 layers, d_model 128: more capacity, each step costs about 3x (a run takes about 3x as long)",
}
LEARNING_RATES: dict[str, float] = {"good": 3e-3, "too high": 1e-1, "too low": 1e-4}
LR_WHY = {
    "good": "3e-3: big steps that still go downhill",
    "too high": "1e-1: each update overshoots: the loss falls fast at first, then stalls near the unigram line",
    "too low": "1e-4: every update is tiny: the loss creeps down and the run ends well above the good one",
}
INITS = ("proper", "skewed")
INIT_WHY = {
    "proper": "small random weights: every character starts about equally likely, so the first loss is ln V",
    "skewed": "the token embedding table (which is also the output head) x10: the untrained model's logits are "
    "large and confidently wrong, the loss starts far above ln V, and the first few dozen steps only undo that "
    "(the hockey stick); with the same steps it ends above the proper start",
}
SKEW = 10.0  # the skewed start multiplies the token embedding (tied to the output head) by this (docs/training.md)
POSITIONS = ("learned", "sinusoidal")
POSITION_WHY = {
    "learned": "a trained table of position vectors (GPT-2)",
    "sinusoidal": "the fixed sine/cosine table of 'Attention Is All You Need': its rows are far longer than the small token "
    "embeddings, so at first the model sees mostly positions and learns more slowly",
}

BATCH_SIZE = 16  # sequences per step (of block_size characters)
WARMUP_STEPS = 50  # 20 gave the good learning rate a spike above ln V near step 15 (docs/training.md)
SAMPLE_EVERY = 50  # steps between samples
SAMPLE_CHARS = 200  # tokens per sample (characters, for the character vocabulary)
# A run is a number of steps (its limits: playground/limits.py); seconds only cap it.
MIN_STEPS, DEFAULT_STEPS, MAX_STEPS = limits.MIN_LEARN_STEPS, 500, limits.MAX_LEARN_STEPS
MIN_SECONDS, DEFAULT_SECONDS, MAX_SECONDS = limits.MIN_LEARN_SECONDS, 300, limits.MAX_LEARN_SECONDS
MAX_SEED = limits.MAX_LEARN_SEED
VAL_WINDOWS = 64  # held-out windows scored at the end of a run (a sample of the held-out plays)
RECENT_STEPS = 20  # the "loss now" mean




@dataclass(frozen=True)
class LearnSettings:
    seconds: int = DEFAULT_SECONDS  # the safety cap
    seed: int = 0
    init: str = "proper"
    learning_rate: str = "good"
    size: str = "tiny"
    positions: str = "learned"
    steps: int = DEFAULT_STEPS


def settings(
    seconds=DEFAULT_SECONDS, seed=0, init="proper", learning_rate="good", size="tiny", positions="learned",
    steps=DEFAULT_STEPS,
) -> LearnSettings:
    """Validated settings (an :class:`InputError` names what is accepted)."""
    return LearnSettings(
        seconds=validate_int(seconds, name="seconds", minimum=MIN_SECONDS, maximum=MAX_SECONDS),
        seed=validate_int(seed, name="seed", minimum=0, maximum=MAX_SEED),
        init=validate_choice(init, INITS, name="init"),
        learning_rate=validate_choice(learning_rate, tuple(LEARNING_RATES), name="learning_rate"),
        size=validate_choice(size, tuple(SIZES), name="size"),
        positions=validate_choice(positions, POSITIONS, name="positions"),
        steps=validate_int(steps, name="steps", minimum=MIN_STEPS, maximum=MAX_STEPS),
    )


def seconds_text(seconds: float) -> str:
    """A run's time as the page writes it: one decimal under 10 s (the first steps take well under
    a second, which whole seconds wrote as 0), whole seconds from there."""
    return f"{seconds:.1f}" if seconds < 9.95 else f"{seconds:.0f}"


def describe(s: LearnSettings) -> str:
    """Settings in a few words, e.g. "skewed start, learning rate good, tiny, learned positions, seed 0"."""
    return f"{s.init} start, learning rate {s.learning_rate}, {s.size}, {s.positions} positions, seed {s.seed}"


def model_config(s: LearnSettings, vocab_size: int) -> GPTConfig:
    """The GPT of settings ``s``: its size and position kind, for a vocabulary of ``vocab_size``."""
    return replace(SIZES[s.size], vocab_size=vocab_size, pos_encoding=s.positions)


def build_model(s: LearnSettings, vocab_size: int) -> GPT:
    """The untrained GPT of settings ``s`` (in training mode): GPT-2's initialisation drawn from
    the shared generator for ``s.seed`` (playground/initial.py; the browser draws the same
    float32 weights, and other threads' random draws change nothing); the skewed start multiplies
    the token embedding, which GPT-2 ties to the output head, by :data:`SKEW` (in float32):
    large, confident logits (a LayerNorm gain x10 gave the same step-0 loss but a better final
    one: docs/training.md)."""
    model = drawn_gpt(model_config(s, vocab_size), s.seed).train()
    if s.init == "skewed":
        with torch.no_grad():
            model.wte.weight.mul_(SKEW)
    return model


def train_config(s: LearnSettings) -> TrainConfig:
    """model.train's settings for a run: a short warmup, then a constant learning rate (the
    seconds cap may end a run before its steps, so a decay over its steps could stop half done)."""
    lr = LEARNING_RATES[s.learning_rate]
    return TrainConfig(
        batch_size=BATCH_SIZE, max_steps=10**9, lr=lr, min_lr=lr, warmup_steps=WARMUP_STEPS, seed=s.seed,
        vocab_subset=False, bf16=False,
    )


def learn_model(size: str, positions: str, vocab_size: int) -> tuple[GPT, TrainConfig]:
    """Watch it learn's untrained model of that size and position kind (seed 0, the proper start),
    and its run's settings: what the browser's step graph is traced from (export/train_step.py)."""
    s = settings(size=size, positions=positions)
    return build_model(s, vocab_size), train_config(s)


TEMPERATURE_1 = Settings(1.0, None, None)  # samples and continuations: the model's own distribution


@torch.no_grad()
def draw(model: GPT, ids: list[int], u: np.ndarray) -> list[int]:
    """``len(u)`` ids written after ``ids``: id i drawn by the uniform ``u[i]`` from the softmax of
    the model's logits for the last ``block_size`` ids (``runtime.sampling.choose_rows`` at
    temperature 1: the first id whose cumulative probability exceeds u). The browser draws the
    same way from the same uniforms (web/engine/learn.js)."""
    T = model.config.block_size
    was_training = model.training
    model.eval()
    ids, new = list(ids), []
    out = model(torch.tensor([ids[-T:]]), use_cache=True)
    try:
        for i, ui in enumerate(u):
            token = int(choose_rows([out.logits[0, -1].numpy()], [TEMPERATURE_1], np.array([ui]))[0][0])
            ids.append(token)
            new.append(token)
            if i + 1 == len(u):
                break
            if out.past_key_values[0][0].size(2) >= T:  # the window is full: slide it and recompute
                out = model(torch.tensor([ids[-T:]]), use_cache=True)
            else:
                out = model(torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
    finally:
        model.train(was_training)
    return new


def sample(model: GPT, corpus: Corpus, seed: int, step: int, n: int = SAMPLE_CHARS) -> str:
    """``n`` tokens drawn at temperature 1 after a line break, from (seed, SAMPLES, lane = step):
    the same for the same seed and step, in the browser too."""
    return corpus.decode(draw(model, [corpus.start_id], draws.uniform(seed, draws.SAMPLES, n, lane=step)))


@dataclass
class RunState:
    """A run as the page and the API see it (updated in place by the training thread)."""

    settings: LearnSettings
    visitor: str | None = None  # who started it (one run per visitor)
    status: str = "waiting"  # waiting, preparing, training, finished, stopped, failed
    message: str = ""
    position: int = 0  # runs ahead of this one (0: its turn)
    kind: str = "char"
    vocab_size: int = 0
    refs: References | None = None
    step: int = 0
    tokens: int = 0
    tokens_per_s: float = 0.0
    elapsed_s: float = 0.0
    losses: list[list] = field(default_factory=list)  # [step, loss]: the model after `step` updates
    samples: list[list] = field(default_factory=list)  # [step, text]
    val_loss: float | None = None  # held-out loss at the end
    stop_reason: str = ""
    error: Exception | None = None
    history: list[RunState] = field(default_factory=list, repr=False)  # the page's earlier runs, oldest first, without their models
    model: GPT | None = field(default=None, repr=False)  # the trained model, once the run has ended

    @property
    def running(self) -> bool:
        return self.status in ("waiting", "preparing", "training")

    @property
    def last_loss(self) -> float | None:
        """The loss of the latest step (one batch's: noisy)."""
        return self.losses[-1][1] if self.losses else None

    def recent_loss(self, n: int = RECENT_STEPS) -> float | None:
        """The mean loss of the last ``n`` steps (one batch's loss is noisy)."""
        tail = [loss for _, loss in self.losses[-n:]]
        return sum(tail) / len(tail) if tail else None

    def summary(self) -> RunState:
        """The run without its model and history: what the page's table and grey curves keep."""
        return replace(self, model=None, history=[], error=None)

    def to_api(self) -> dict:
        r = self.refs
        return {
            "status": self.status,
            "message": self.message,
            "position": self.position,
            "settings": self.settings.__dict__,
            "vocabulary": "characters" if self.kind == "char" else "GPT-2 tokens",
            "vocab_size": self.vocab_size,
            "references": None if r is None else {"ln_vocab_size": r.ln_v, "unigram": r.unigram, "bigram": r.bigram, "shipped_model": r.shipped},
            "step": self.step,
            "steps": self.settings.steps,
            "tokens": self.tokens,
            "tokens_per_s": round(self.tokens_per_s, 1),
            "elapsed_s": round(self.elapsed_s, 2),
            "losses": [list(p) for p in self.losses],
            "samples": [list(p) for p in self.samples],
            "val_loss": self.val_loss,
            "val_windows": VAL_WINDOWS,
            "val_tokens": VAL_WINDOWS * SIZES[self.settings.size].block_size,
            "stop_reason": self.stop_reason,
        }


MAX_PROMPT_CHARS = limits.MAX_LEARN_PROMPT_CHARS
CONTINUE_CHARS = 300


def continue_text(state: RunState | None, prompt, seed=0, n: int = CONTINUE_CHARS) -> str:
    """``n`` characters the run's trained model writes after ``prompt`` (temperature 1, as the
    samples; the same seed, the same text). The prompt may only use the vocabulary's characters."""
    prompt = validate_text(prompt, name="prompt", max_chars=MAX_PROMPT_CHARS)
    seed = validate_int(seed, name="seed", minimum=0, maximum=MAX_SEED)
    if state is not None and state.running:
        raise InputError("your model is still training: try it when the run ends, or press Stop")
    if state is None or state.model is None:
        raise InputError("there is no trained model yet: press Start and let a run finish (or stop it) first")
    corpus = load_corpus(state.kind)
    unknown = sorted({c for c in prompt if c not in corpus.itos})
    if unknown:
        raise InputError(
            f"the model's vocabulary has no {', '.join(repr(c) for c in unknown[:5])}: it knows only the "
            f"{corpus.vocab_size} characters of the training plays (letters, digits, punctuation, space, line break)"
        )
    ids = [corpus.itos.index(c) for c in prompt]
    return corpus.decode(draw(state.model, ids, draws.uniform(seed, draws.SAMPLING, n)))
