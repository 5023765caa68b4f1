"""Continuous batching: one decoding loop serves every running generation, as vLLM and TGI do.

    from runtime.batching import Scheduler
    from runtime.params import SamplingParams
    scheduler = Scheduler(engine, max_rows=16, max_waiting=64)
    for step in scheduler.stream(prompt_ids, SamplingParams(50, temperature=0.8, top_k=40, seed=1)):
        print(step.token_ids[0])            # the same Steps as runtime.generate.stream, request by request

A request is prefilled on its own and joins the batch at the next step; a finished or cancelled
one (its stream closed) leaves it at once. Rows of different lengths share one graph call through
the standard interface: the cache is left-padded to the longest row, ``attention_mask`` gives the
padding no weight and ``position_ids`` count each row from its own first token, so every row
continues exactly as it would alone (up to float rounding in the attention's sums). Settings stay
per request: temperature, top-k, top-p, seed (token i of sample s draws with
``runtime.draws.uniform(seed, SAMPLING, 1, start=i, lane=s)``, alone or in any batch), max tokens,
stop at ``<|endoftext|>``.

:class:`Batch` is the loop's state without threads (``runtime.generate`` runs one request
through it); :class:`Scheduler` runs a Batch on a thread of its own and hands
each request's steps to the thread that reads them. It serves visitors in turn by the tokens each
was given, and a running generation yields its rows after a slice to a waiting visitor given
fewer, its cache kept aside (:meth:`Batch.park`) until it resumes (``runtime/turns.py``). The loop calls the model, draws the tokens
and works out, row by row, the candidates and probabilities the page shows (``top_candidates``).
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import draws
from .engine import Engine
from .params import SamplingParams, check_prompt
from .sampling import choose_rows, top_candidates
from .steps import DecodeStep, Step, to_steps
from .turns import SLICE_TOKENS, Served, first_end_steps, plan, wait_steps

log = logging.getLogger(__name__)

# Tokens whose uniforms a request draws at once (``Request.uniforms``): a call of
# runtime.draws.uniform costs about as much for 64 numbers as for one.
UNIFORM_CHUNK = 64
# Padding that keeps a row's results bit for bit what they are alone. onnxruntime's CPU kernels
# add the attention's terms in SIMD lanes (a padding by a multiple of the lane count gives
# identical logits, any other padding differences in the last bits, which the int8 file's
# 8-bit rounding of activations turns into other tokens now and then). So every row sits
# in the cache as it does alone up to a multiple of CACHE_ALIGN columns: a prompt is padded to
# end on a multiple of it, and a request joins the batch only on a step whose cache length is
# one (it waits at most CACHE_ALIGN - 1 steps). 16 covers 4-, 8- and 16-lane (AVX-512) kernels.
CACHE_ALIGN = 16
# Graph calls of this many tokens or more (a step of 4+ rows, a prompt's prefill) run on the
# Scheduler's ``wide`` engine when it has one. One user's lone row stays on one thread, leaving the
# other cores to Gradio and the light tabs; many users decoding together are the app's main work.
# Measured by ``python -m benchmarks.bench --streams-only`` (docs/export.md, "Continuous batching").
WIDE_MIN_TOKENS = 4
# Prompt tokens read in one graph call (requests admitted together share calls up to this; one
# longer request has a call of its own). The graph returns the logits of every position it
# reads, 201 KB per token, so this bounds a prefill's largest buffer to about 100 MB.
MAX_PREFILL_TOKENS = 512
# How often a stream given a ``stop`` event looks at it while it waits for its next step (a
# request waiting for room in the batch, or for its prefill, has no step to end at).
STOP_POLL_S = 0.05
# How long the loop stays idle before its engines give their arenas' memory back: by then the
# last steps' readers have let go of the logits that still sit in an arena (and pin its region).
RELEASE_IDLE_S = 1.0
# The loop's seconds a step, as an expected wait counts them: a moving average of its recent steps
# (prefills and yields included), each weighing this much.
STEP_WEIGHT = 0.1
# Ends of requests remembered (their streams closed, finished or not) for the rate at which the
# loop lets its handlers go; ends older than ENDS_FOR_S count for nothing.
MAX_ENDS = 32
ENDS_FOR_S = 60.0


class Busy(RuntimeError):
    """The scheduler's waiting line is full: try again in a moment."""


@dataclass(frozen=True)
class Load:
    """What a decoding loop holds now, and what a request arriving now would wait for its rows
    (:meth:`Scheduler.load`): counted in steps by its turns (:func:`runtime.turns.wait_steps`,
    plus half an alignment while the batch decodes), timed by its own recent steps."""

    running_rows: int  # rows in the batch
    waiting: int  # requests in the loop's line, those standing aside included
    wait_steps: int
    step_s: float | None  # the loop's seconds a step lately (None: it has taken none)
    ends_per_s: float | None  # requests leaving the loop a second lately (None: fewer than two in ENDS_FOR_S)
    first_end_steps: int | None = None  # steps before the first of its requests ends (runtime.turns.first_end_steps)

    @property
    def first_end_s(self) -> float | None:
        """Seconds before the loop lets a request go, at its pace (None: it holds none, or has taken no step)."""
        return None if self.first_end_steps is None or self.step_s is None else self.first_end_steps * self.step_s

    @property
    def idle(self) -> bool:
        return self.running_rows == 0 and self.waiting == 0

    @property
    def expected_wait_s(self) -> float:
        """Seconds before the request's first step: its wait in steps at the loop's pace."""
        return self.wait_steps * (self.step_s or 0.0)


@dataclass(eq=False)
class Request:
    """One request's rows in a :class:`Batch`: its settings, seed and where it has got to."""

    window: np.ndarray  # [N, L]: the tokens its rows see (the last block_size at most)
    params: SamplingParams
    seed: int  # params.seed, or one drawn at random for a request without
    notice: str | None  # for its next step (the prompt was cut, the context filled up)
    dropped: int = 0  # leading prompt tokens cut to fit the context
    t0: float = field(default_factory=time.perf_counter)
    index: int = 0  # new tokens so far
    logits: np.ndarray | None = None  # [N, V]: what its next token is drawn from
    tokens: np.ndarray | None = None  # [N]: its last drawn tokens
    finished: np.ndarray | None = None  # [N] bool
    slid: bool = False  # the context has filled up once
    cancelled: bool = False  # its reader is gone: it leaves at the next step
    sink: queue.SimpleQueue | None = None  # where the Scheduler puts its steps
    visitor: str = ""  # whose it is: the Scheduler serves visitors in turn (runtime.turns)
    arrival: int = 0  # the Scheduler's count of requests when it came (order among equals)
    slice_start: int = 0  # ``index`` when it last entered the batch
    parked: list[np.ndarray] | None = None  # its rows' cache while it has yielded them (Batch.park)
    parked_at: float = 0.0  # perf_counter() when it last yielded them (0: not standing aside)
    drawn: tuple[int, np.ndarray] | None = None  # (first token, [UNIFORM_CHUNK, N]): its uniforms drawn so far

    @classmethod
    def new(cls, ids: np.ndarray, params: SamplingParams, block_size: int) -> "Request":
        """A request's rows (``ids`` checked by ``runtime.params.check_prompt``), not yet in a batch."""
        dropped = max(0, len(ids) - block_size)
        notice = (
            f"The prompt has {len(ids)} tokens but the model sees only the last {block_size}: "
            f"the first {dropped} were dropped." if dropped else None
        )
        window = np.tile(ids[-block_size:], (params.num_samples, 1))
        seed = params.seed if params.seed is not None else secrets.randbits(32)
        request = cls(window, params, seed, notice, dropped, finished=np.zeros(params.num_samples, dtype=bool))
        if not params.greedy:
            request.uniforms()  # the first ones here, on the caller's thread, not in the decoding loop
        return request

    @property
    def n(self) -> int:
        return len(self.window)

    def uniforms(self) -> np.ndarray:
        """[N]: the uniform each sample draws its next token (number ``index``) with."""
        first = self.index - self.index % UNIFORM_CHUNK
        if self.drawn is None or self.drawn[0] != first:
            self.drawn = first, np.stack(
                [draws.uniform(self.seed, draws.SAMPLING, UNIFORM_CHUNK, first, lane) for lane in range(self.n)], axis=1)
        return self.drawn[1][self.index - first]

    @property
    def remaining(self) -> int:
        """Tokens its rows may still decode (fewer if they end at ``<|endoftext|>``)."""
        return self.params.max_new_tokens - self.index

    @property
    def length(self) -> int:
        """Positions of its rows in the cache."""
        return self.window.shape[1]

    @property
    def distinct(self) -> int:
        """Rows a prefill reads: one while its samples see the same tokens (its prompt, its cache
        then repeated), every row once they differ (a full context read anew: each sample's own)."""
        return 1 if self.n == 1 or (self.window == self.window[0]).all() else self.n


class Batch:
    """The rows of one decoding loop and their shared cache, left-padded to the longest row.

    Rows are grouped by request, in ``seqs`` order; row r holds its ``length`` real positions at
    the right end of the cache, padding (attention_mask 0) before them."""

    def __init__(self, engine: Engine, align: int = CACHE_ALIGN, wide: Engine | None = None) -> None:
        self.engine = engine
        self.wide = wide  # the same model on more threads, for graph calls of WIDE_MIN_TOKENS or more
        self.align = align
        self.seqs: list[Request] = []  # in the cache, drawing at every step
        self.joining: list[tuple[Request, list]] = []  # prefilled, waiting for an aligned step
        self.past: list | None = None  # per graph cache input: [B, n_head, P, head_dim]

    @property
    def active(self) -> list[Request]:
        """Every request of the batch: in the cache or about to join it."""
        return [*self.seqs, *(seq for seq, _ in self.joining)]

    @property
    def rows(self) -> int:
        return sum(s.n for s in self.active)

    def add(self, *seqs: Request) -> None:
        """Prefill requests, each padded to end on a multiple of ``align`` columns (a shorter
        one by that multiple more: every row keeps its bits, see CACHE_ALIGN); their rows join
        the batch at once if the cache's length is such a multiple too (or the batch is empty),
        else on the first step where it is. They draw from the step after they join.

        A request's samples share one prompt, so one row of it is read and its cache repeated
        (a context read anew after it filled is each sample's own: every row is read);
        requests admitted together are read in as few graph calls as MAX_PREFILL_TOKENS allows
        (read one by one, users who click together keep the batch waiting for each other's
        calls; read all in one call, a 16 x 256-token call's logits alone would take 823 MB,
        which onnxruntime's arena then keeps)."""
        chunk: list[Request] = []
        rows = width = 0  # the chunk's: rows read, longest request
        resumed = [s for s in seqs if s.parked is not None]
        for seq in resumed:  # their own cache, not read anew
            self.joining.append((seq, self.engine.to_device(seq.parked)))
            seq.parked = None
        for seq in [s for s in seqs if s not in resumed]:
            distinct = seq.distinct
            if chunk and (rows + distinct) * self._aligned(max(width, seq.length)) > MAX_PREFILL_TOKENS:
                self._prefill(chunk)
                chunk, rows, width = [], 0, 0
            chunk.append(seq)
            rows, width = rows + distinct, max(width, seq.length)
        if chunk:
            self._prefill(chunk)
        self.join_ready()

    def _aligned(self, length: int) -> int:
        return -(-length // self.align) * self.align

    def _prefill(self, seqs: list[Request]) -> None:
        """One graph call reading each request's :attr:`~Request.distinct` rows; each joins with
        its rows' cache."""
        own = [self._aligned(s.length) for s in seqs]
        width = max(own)
        starts = np.cumsum([0] + [s.distinct for s in seqs])
        ids = np.full((starts[-1], width), self.engine.eot_id, dtype=np.int64)
        mask = np.zeros((starts[-1], width), dtype=np.int64)
        for seq, a, b in zip(seqs, starts, starts[1:]):
            ids[a:b, width - seq.length :] = seq.window[: b - a]
            mask[a:b, width - seq.length :] = 1
        positions = np.maximum(mask.cumsum(axis=1) - 1, 0)
        logits, present = self._forward(ids, self.engine.empty_cache(len(ids)), mask, positions, prefill=True)
        if len(ids) > 1 or seqs[0].n > 1:
            present = self._numpy(present)
        for seq, length, a, b in zip(seqs, own, starts, starts[1:]):
            rows = np.arange(a, b) if b - a == seq.n else np.full(seq.n, a)  # (one row read: repeated)
            seq.logits = logits[rows]
            mine = present if len(ids) == 1 and seq.n == 1 else self.engine.to_device(
                [np.ascontiguousarray(p[rows][:, :, width - length :]) for p in present])
            self.joining.append((seq, mine))

    def park(self, parking: Sequence[Request], keep: Sequence[Request] | None = None) -> None:
        """Take running requests out of the batch; those in ``keep`` (default: all) with their
        rows' cache kept aside (and their next token's logits), so that :meth:`add` later puts
        them back as they were: the same bits, so a seeded generation writes what it writes
        alone. A request keeps its columns down to the multiple of ``align`` below its padding,
        so it rejoins where its padding still has its own remainder (:meth:`join_ready`). The
        others are read anew from their tokens when added back, as a full context is (a
        prefill's logits differ from a step's in their last bits). Kept is the cheaper by far:
        a copy of at most 3 MiB a row against a prefill of its window (docs/space.md, "Turns
        in the decoding loop")."""
        parking = [s for s in parking if s in self.seqs]
        if not parking:
            return
        keep = parking if keep is None else [s for s in parking if s in keep]
        past = self._numpy(self.past)
        P = past[0].shape[2]
        starts = dict(zip(map(id, self.seqs), np.cumsum([0] + [s.n for s in self.seqs])))
        now = time.perf_counter()
        for seq in parking:
            seq.parked_at = now
            if seq in keep:
                a, cut = starts[id(seq)], (P - seq.length) // self.align * self.align
                seq.parked = [np.ascontiguousarray(p[a : a + seq.n, :, cut:]) for p in past]
                seq.logits = np.array(seq.logits)  # its own: not a view pinning the whole step's logits
            else:
                seq.logits = None  # the prefill that reads it anew gives them again
        self.remove(parking)

    def remove(self, leaving: Sequence[Request]) -> None:
        """Take requests out of the batch and drop the padding nobody needs any more."""
        if not leaving:
            return
        self.joining = [(s, p) for s, p in self.joining if s not in leaving]
        keep = [s not in leaving for s in self.seqs]
        if all(keep):
            return
        rows = np.repeat(keep, [s.n for s in self.seqs])
        self.seqs = [s for s, k in zip(self.seqs, keep) if k]
        if not self.seqs:
            self.past = None
            return
        past = self._numpy(self.past)
        P = past[0].shape[2]
        cut = (P - max(s.length for s in self.seqs)) // self.align * self.align  # keeps every row's alignment
        self.past = self.engine.to_device([np.ascontiguousarray(p[rows][:, :, cut:]) for p in past])

    def step(self) -> list[tuple[Request, DecodeStep]]:
        """Draw every request's next tokens, let the finished ones leave, and run the model once
        for the rest (a request whose context is full is read anew on its own instead).

        The candidates shown for the rows that ask for them are worked out here too, not by each
        request's reader: sixteen readers doing it contended with the loop (and each other) for
        the GIL."""
        eot = self.engine.eot_id
        rows = [row for s in self.seqs for row in s.logits]
        settings = [s.params.settings for s in self.seqs for _ in range(s.n)]
        u = [np.zeros(s.n) if s.params.greedy else s.uniforms() for s in self.seqs]
        all_tokens, all_kept = choose_rows(rows, settings, np.concatenate(u))
        starts = np.cumsum([0] + [s.n for s in self.seqs])
        out, leaving = [], []
        for seq, a in zip(self.seqs, starts):
            tokens, kept = all_tokens[a : a + seq.n], all_kept[a : a + seq.n]
            live, params = ~seq.finished, seq.params
            shown = [top_candidates(seq.logits[i], params.n_candidates, int(tokens[i]), kept[i])
                     if params.n_candidates is not None and live[i] else None for i in range(seq.n)]
            tokens[seq.finished] = eot
            if params.stop_at_eot:
                seq.finished = seq.finished | (tokens == eot)
            if seq.index == params.max_new_tokens - 1:
                seq.finished[:] = True
            out.append((seq, DecodeStep(tokens, live, seq.finished.copy(), seq.logits, seq.notice, seq.t0,
                                        None if params.greedy else kept, shown)))
            seq.notice, seq.tokens = None, tokens
            seq.index += 1
            if seq.finished.all():
                leaving.append(seq)
        self.remove(leaving)
        self._advance()
        return out

    # -- the cache -------------------------------------------------------------------------------

    def _advance(self) -> None:
        block_size, shift = self.engine.block_size, self.engine.context_shift
        # No position exists past block_size: the oldest tokens drop out and the rest is read
        # anew from position 0 (context_shift of them at once: see Engine.__init__).
        full = [s for s in self.seqs if s.length >= block_size]
        self.remove(full)
        for seq in [*self.seqs, *full]:
            seq.window = np.concatenate([seq.window, seq.tokens[:, None]], axis=1)
        for seq in full:
            if not seq.slid:
                seq.notice = (
                    f"The context is full ({block_size} tokens): the oldest "
                    + ("token drops out at every new token." if shift == 1 else
                       f"{shift} tokens drop out whenever it fills again, and the rest is read anew.")
                )
                seq.slid = True
            seq.window = seq.window[:, -(block_size - shift + 1):]
        if self.seqs:
            lengths = np.repeat([s.length - 1 for s in self.seqs], [s.n for s in self.seqs])  # before the new token
            P = self.engine.cache_length(self.past)
            # Row r's real positions are the last lengths[r] of the cache, then the new token.
            mask = (np.arange(P + 1)[None, :] >= (P - lengths)[:, None]).astype(np.int64)
            ids = np.concatenate([s.tokens for s in self.seqs])[:, None]
            logits, self.past = self._forward(ids, self.past, mask, lengths[:, None])
            start = 0
            for seq in self.seqs:
                seq.logits, start = logits[start : start + seq.n], start + seq.n
        self.add(*full)
        self.join_ready()

    def _forward(
        self, ids: np.ndarray, past: list, mask: np.ndarray, positions: np.ndarray, prefill: bool = False
    ) -> tuple[np.ndarray, list]:
        """One graph call, on ``wide`` when it has WIDE_MIN_TOKENS tokens or more."""
        engine = self.wide if self.wide is not None and ids.size >= WIDE_MIN_TOKENS else self.engine
        return engine.forward(ids, past, mask, positions, prefill)

    def join_ready(self) -> None:
        """Prefilled requests enter the cache if it is empty or its length is a multiple of
        ``align`` (never in the middle of a step: their first token is drawn at the next one);
        a resumed one (:meth:`park`) where the cache's length and its own differ by such a
        multiple."""
        waiting = []
        for seq, present in self.joining:
            if self.past is None or (self.engine.cache_length(self.past) - self.engine.cache_length(present)) % self.align == 0:
                self._append(seq, present)
            else:
                waiting.append((seq, present))
        self.joining = waiting

    def _append(self, seq: Request, present: list) -> None:
        self.seqs.append(seq)
        if self.past is None or len(self.seqs) == 1:
            self.past = present
            return
        old, new = self._numpy(self.past), self._numpy(present)
        P, L = old[0].shape[2], new[0].shape[2]
        self.past = self.engine.to_device([np.concatenate([_left_pad(o, L - P), _left_pad(n, P - L)]) for o, n in zip(old, new)])

    def _numpy(self, past: list) -> list[np.ndarray]:
        return [p if isinstance(p, np.ndarray) else p.numpy() for p in past]


def _left_pad(cache: np.ndarray, columns: int) -> np.ndarray:
    """``columns`` zero positions before a cache [B, H, P, D] (masked out by attention_mask)."""
    if columns <= 0:
        return cache
    B, H, _, D = cache.shape
    return np.concatenate([np.zeros((B, H, columns, D), dtype=cache.dtype), cache], axis=2)


class Scheduler:
    """A :class:`Batch` on a thread of its own, fed by :meth:`stream` from any number of threads.
    ``max_rows``: samples decoding at once (each holds its cache); ``max_waiting``: requests
    waiting for room, past which a new one raises :class:`Busy`. Whoever runs the loop sizes both
    (the app: playground/limits.py)."""

    def __init__(
        self, engine: Engine, *, max_rows: int, max_waiting: int, wide: Engine | None = None,
        slice_tokens: int = SLICE_TOKENS, max_parked_rows: int | None = None,
    ) -> None:
        self.engine = engine
        self.wide = wide  # the same model on more threads, for wide graph calls (Batch)
        self.max_rows = max_rows
        self.max_waiting = max_waiting
        self.slice_tokens = slice_tokens  # tokens a generation decodes before it yields to a waiting visitor
        # Rows whose cache is kept aside while they have yielded (3 MiB a row at most for the
        # shipped model): past this, a yielding generation's cache is dropped, and it is read
        # anew from its tokens when it comes back.
        self.max_parked_rows = max_rows if max_parked_rows is None else max_parked_rows
        self._waiting: list[Request] = []  # new requests and parked ones
        self._running: list[Request] = []  # the batch's requests after the last step (read under _cond)
        self._served = Served()  # tokens given to each visitor while the loop is busy
        self._arrivals = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.running_rows = 0  # rows in the batch after the last step (for tests and monitoring)
        self.steps = 0  # graph calls of the loop so far
        self.parks = 0  # generations that yielded their rows so far (for tests and monitoring)
        self.step_s: float | None = None  # seconds a step lately (STEP_WEIGHT)
        self._ends: deque[float] = deque(maxlen=MAX_ENDS)  # perf_counter() of the last requests' ends

    @property
    def parked_rows(self) -> int:
        """Rows whose cache is kept aside now (at most ``max_parked_rows``)."""
        with self._cond:
            return sum(s.n for s in self._waiting if s.parked is not None)

    def load(self, visitor: str = "", rows: int = 1) -> Load:
        """The loop now, and the steps a request of ``rows`` rows from ``visitor`` arriving now
        would wait for them (visitors in turn, as :meth:`stream` serves it)."""
        with self._cond:
            running = [s for s in self._running if not s.cancelled and not s.finished.all()]
            waiting = [s for s in self._waiting if not s.cancelled]
            steps = wait_steps(waiting, running, self._served, visitor, self.max_rows, rows, self.slice_tokens)
            in_batch = sum(s.n for s in running)
            now = time.perf_counter()
            ends = [t for t in self._ends if now - t <= ENDS_FOR_S]
            first = first_end_steps([(s.n, s.remaining) for s in (*running, *waiting)], self.max_rows)
        rate = (len(ends) - 1) / max(now - ends[0], 1e-3) if len(ends) >= 2 else None
        if in_batch:  # it joins the cache on an aligned step (CACHE_ALIGN): half of one on average
            steps += CACHE_ALIGN // 2
        return Load(in_batch, len(waiting), steps, self.step_s, rate, first)

    def stream(
        self, prompt_ids: Sequence[int], params: SamplingParams, stop: threading.Event | None = None, visitor: str = "",
    ) -> Iterator[Step]:
        """``runtime.generate.stream``, decoded in the shared batch, visitors in turn
        (``visitor``: whose request it is, :mod:`runtime.turns`). Closing the iterator cancels
        the request: it leaves the batch at the next step; so does setting ``stop`` (from any
        thread), which ends the iterator within :data:`STOP_POLL_S` even before its first step.
        Raises :class:`Busy` when the waiting line is full, ValueError for a bad prompt or more
        samples than rows (both at the call)."""
        engine = self.engine
        ids = check_prompt(prompt_ids, engine.vocab_size, engine.eot_id)
        if params.num_samples > self.max_rows:
            raise ValueError(f"num_samples must be at most {self.max_rows} (the batch's rows), not {params.num_samples}")
        seq = Request.new(ids, params, engine.block_size)
        seq.sink = queue.SimpleQueue()
        with self._cond:
            if self._closed:
                raise RuntimeError("the scheduler is closed")
            # (parked ones count: with the rows, this bounds every request the loop holds)
            if len(self._waiting) >= self.max_waiting:
                raise Busy(f"{len(self._waiting)} generations are already waiting: try again in a moment")
            self._served.arrive(visitor, {s.visitor for s in (*self._running, *self._waiting)})
            seq.visitor, seq.arrival = visitor, self._arrivals
            self._arrivals += 1
            self._waiting.append(seq)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="decode-loop", daemon=True)
                self._thread.start()
            self._cond.notify()
        return to_steps(self._read(seq, stop), seq.dropped)

    def close(self) -> None:
        """Stop the loop (running requests end with an error)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _read(self, seq: Request, stop: threading.Event | None = None) -> Generator[DecodeStep, None, None]:
        try:
            while True:
                try:
                    item = seq.sink.get(timeout=STOP_POLL_S) if stop is not None else seq.sink.get()
                except queue.Empty:
                    item = False
                if stop is not None and stop.is_set():
                    return
                if item is False:
                    continue
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            seq.cancelled = True  # the loop drops it before its next step
            with self._cond:
                self._ends.append(time.perf_counter())

    def _admit(self, batch: Batch, idle_s: float | None = None) -> tuple[list[Request], list[Request]] | None:
        """``(admitted, parking)``: the requests that enter the batch now, visitors in turn, and
        the running ones that yield their rows to them first (:func:`runtime.turns.plan`); waits
        while there is nothing to do, and gives up with None after ``idle_s`` seconds of it
        (None: waits for good)."""
        with self._cond:
            while not self._closed and not batch.active and not self._waiting:
                if not self._cond.wait(idle_s):
                    return None
            if self._closed:
                return [], []
            self._waiting = [s for s in self._waiting if not s.cancelled]
            if not self._waiting:
                return [], []
            running = [s for s in batch.seqs if not s.cancelled and not s.finished.all()]
            admitted, parking = plan(self._waiting, running, self._served, self.max_rows - batch.rows, self.slice_tokens)
            self._waiting = [s for s in self._waiting if s not in admitted]
            # (what load() reads while they are prefilled: they hold their rows from now)
            self._running = [*(s for s in batch.active if s not in parking), *admitted]
            return admitted, parking

    def _enter(self, batch: Batch, admitted: list[Request], parking: list[Request]) -> None:
        """Park ``parking`` (back in the line, their place in it kept; their cache kept aside while
        ``max_parked_rows`` allow) and add ``admitted``."""
        if parking:
            with self._cond:  # (the admitted ones have left the line already: their rows are free)
                room = self.max_parked_rows - sum(s.n for s in self._waiting if s.parked is not None)
            keep = []
            for seq in parking:
                if seq.n <= room:
                    keep.append(seq)
                    room -= seq.n
            batch.park(parking, keep)
            with self._cond:
                self._waiting.extend(parking)
                self.parks += len(parking)
        now = time.perf_counter()
        for seq in admitted:
            seq.slice_start = seq.index
            if seq.parked_at:  # the time it stood aside is not its own: elapsed_s, its budget
                seq.t0 += now - seq.parked_at
                seq.parked_at = 0.0
        batch.add(*admitted)

    def _account(self, batch: Batch, out: list[tuple[Request, DecodeStep]]) -> None:
        """Count each visitor's new tokens; forget them all once nothing runs or waits."""
        with self._cond:
            for seq, step in out:
                self._served.add(seq.visitor, int(np.count_nonzero(step.live)))
            self._running = list(batch.active)
            if not self._running and not self._waiting:
                self._served.clear()

    def release_memory(self) -> None:
        """Called by the loop once it has been idle for :data:`RELEASE_IDLE_S`: its engines'
        arenas give back what the last batch needed (:meth:`Engine.release_memory`), so an idle
        app holds what an idle app needs, whatever the crowd before."""
        for engine in (self.engine, self.wide):
            if engine is not None:
                engine.release_memory()

    def _loop(self) -> None:
        batch = Batch(self.engine, wide=self.wide)
        held = False  # the engines' arenas hold buffers of calls made since the loop last released them
        while True:
            planned = self._admit(batch, RELEASE_IDLE_S if held else None)
            if self._closed:
                break
            if planned is None:
                held = False
                try:
                    self.release_memory()
                except Exception:  # noqa: BLE001 -- memory kept is no reason to stop serving
                    log.exception("the idle decoding loop could not release its arenas' memory")
                continue
            admitted, parking = planned
            t0 = time.perf_counter()
            try:
                self._enter(batch, admitted, parking)
                held = held or bool(admitted)
                batch.remove([s for s in batch.active if s.cancelled])
                batch.join_ready()
                self.running_rows = batch.rows
                if not batch.active:
                    self._account(batch, [])
                    continue
                out = batch.step()
                for seq, step in out:
                    seq.sink.put(step)
                    if step.finished.all():
                        seq.sink.put(None)
                self._account(batch, out)
                self.steps += 1
                self.running_rows = batch.rows
                dt = time.perf_counter() - t0
                self.step_s = dt if self.step_s is None else (1 - STEP_WEIGHT) * self.step_s + STEP_WEIGHT * dt
            except Exception as err:  # noqa: BLE001 -- every running request hears of it; the loop goes on
                for seq in {*batch.active, *admitted, *parking}:
                    seq.sink.put(err)
                batch = Batch(self.engine, wide=self.wide)
                self.running_rows = 0
                with self._cond:
                    self._running = []
        error = RuntimeError("the scheduler was closed")
        for seq in [*batch.active, *self._waiting]:
            seq.sink.put(error)
