"""Text generation on the exported ONNX GPT with onnxruntime, shared by the app and the benchmark.

    from runtime.engine import Engine
    engine = Engine.load()                      # artifacts/hub/onnx/model.onnx, CUDA if usable else CPU
    ids = engine.generate(prompt_ids, 50)       # greedy: list[int] of new token ids
    for step in engine.stream(prompt_ids, 50, temperature=0.8, top_k=40, seed=1):
        print(step.token_ids[0], step.candidates[0][:3], step.tokens_per_s)

``Engine.load(path=None, provider="auto", threads=None, spin=True, arena="shrink-prefill")`` opens
one ``InferenceSession`` (``arena``: how its CPU memory is allocated, :data:`ARENAS`);
``widened()`` the same file on every core (4 at most, extra threads asleep between calls) for the
decoding loop's wide calls, or None on CUDA or one core.
Attributes: ``provider`` (the provider really in use, e.g. "CPUExecutionProvider"),
``block_size`` (context length), ``vocab_size``, ``n_layer``, ``path``, ``metadata`` (the file's
metadata_props), ``threads`` (intra-op threads on CPU).

``generate(prompt_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None, seed=None,
num_samples=1, stop_at_eot=True)`` returns the new token ids: ``list[int]`` when num_samples is 1,
else ``list[list[int]]`` (one list per sample, lengths may differ). temperature 0 is greedy; top_k
keeps the k most likely tokens; top_p keeps the smallest most-likely set with mass >= p; the
same seed repeats a run. A sample stops after emitting ``<|endoftext|>`` (included in its ids)
or after max_new_tokens. Several samples run as one batch.

``stream(...)`` takes the same arguments plus ``n_candidates=10`` and yields one :class:`Step`
per new position, with these fields (lists are indexed by sample):

- ``index``: 0 for the first new token, 1 for the next, ...
- ``token_ids``: ``list[int | None]``, the new token per sample (None once that sample finished)
- ``token_probs``: ``list[float | None]``, the model's probability (softmax at temperature 1) of it
  (None throughout with ``n_candidates=None``: a caller that shows neither probabilities nor
  candidates saves a softmax over the vocabulary per token and sample)
- ``candidates``: ``list[list[Candidate]]``, the ``n_candidates`` most likely tokens, each
  ``Candidate(token_id, prob, sample_prob)``: ``prob`` from the model at temperature 1,
  ``sample_prob`` from the distribution actually sampled (after temperature, top-k, top-p;
  greedy puts 1.0 on the argmax). Empty for a finished sample.
- ``finished``: ``list[bool]``, True from the step where the sample stopped (EOT or max_new_tokens)
- ``ttft_s``: seconds from the call to the first new token (prompt processing included)
- ``elapsed_s``: seconds since the call; ``tokens_per_s``: new positions per second so far,
  ``(index + 1) / elapsed_s``
- ``prompt_tokens_dropped``: how many leading prompt tokens were cut to fit the context
- ``notice``: a sentence for the user, or None: set on the first step when the prompt was cut, and
  on the step where the context filled up (from then on the oldest ``context_shift`` tokens are
  dropped at once and the rest prefilled anew, see ``Engine.__init__``)

Lower level, for batching of your own: ``forward(ids, cache, attention_mask, position_ids)`` is one
graph call returning the last position's logits and the new cache, ``run(...)`` the same with the
logits of every position, ``empty_cache(batch)`` the cache to start from, and
``left_pad(prompts)`` a batch of prompts of different lengths as ``(ids, attention_mask,
position_ids)``: padded positions get no attention weight, so each row continues its own prompt
exactly as it would alone.

Thread safety: one engine may serve many threads at once. ``InferenceSession.run`` is
thread-safe, and every call keeps its cache, RNG and timing in local variables.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnxruntime as ort

from .batching import Batch
from .interface import ATTENTION_MASK, INPUT_IDS, LOGITS, POSITION_IDS, past_names, present_names
from .providers import CUDA, requested_providers
from .sampling import Shown, check_controls

# Measured with `python -m benchmarks.bench` on the project's 2-core EPYC (docs/export.md, "Benchmark"): on an
# idle machine two threads decode int8 1.34x faster but at 68 % of the tokens per CPU-second; on a
# box whose other core is busy a second thread mostly waits (755 tok/s with 1 thread against
# 100-125 with 2 while a training run shared the machine). The app serves several users at once.
DEFAULT_CPU_THREADS = 1
# How a session allocates the CPU memory of a graph call: "on" is onnxruntime's arena (its
# default), which keeps the largest buffers every (batch, length) shape has needed and never
# gives them back; "shrink" keeps the arena but hands its free regions back after every call,
# "shrink-prefill" after the calls that read a prompt (a request's first and largest); "off" allocates and frees each buffer with the system allocator. docs/export.md ("Memory")
# compares them.
ARENAS = ("on", "off", "shrink", "shrink-prefill")
DEFAULT_ARENA = "shrink-prefill"


class Candidate(NamedTuple):
    token_id: int
    prob: float  # the model's probability (softmax at temperature 1)
    sample_prob: float  # probability under the distribution actually sampled from


@dataclass(frozen=True)
class DecodeStep:
    """One new position of the decoding loop, before probabilities and timing are worked out."""

    tokens: np.ndarray  # [N] int64: the token chosen per row (EOT for a finished row)
    live: np.ndarray  # [N] bool: rows whose token counts (a finished row keeps running in the batch)
    finished: np.ndarray  # [N] bool: rows done after this step
    logits: np.ndarray  # [N, V]: what the token was chosen from
    notice: str | None
    t0: float  # perf_counter() at the call
    kept: list | None = None  # per row, the (ids, probabilities) it was drawn from (None: greedy)
    shown: list[Shown | None] | None = None  # per row, its top candidates (sampling.top_candidates) or None


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int = 50256) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prompts of different lengths as one batch: ``ids`` [B, T] left-padded with ``pad_id``,
    ``attention_mask`` [B, T] (0 on padding) and ``position_ids`` [B, T] (each row counts from 0
    where its text starts; padding gets 0, which the mask makes irrelevant)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("left_pad needs at least one prompt, each of at least one token")
    T = max(len(p) for p in prompts)
    ids = np.full((len(prompts), T), pad_id, dtype=np.int64)
    mask = np.zeros((len(prompts), T), dtype=np.int64)
    for row, p in enumerate(prompts):
        ids[row, T - len(p) :] = p
        mask[row, T - len(p) :] = 1
    return ids, mask, np.maximum(mask.cumsum(axis=1) - 1, 0)


@dataclass(frozen=True)
class Step:
    """One new position of :meth:`Engine.stream`; see the module docstring for each field."""

    index: int
    token_ids: list[int | None]
    token_probs: list[float | None]
    candidates: list[list[Candidate]]
    finished: list[bool]
    ttft_s: float
    elapsed_s: float
    tokens_per_s: float
    prompt_tokens_dropped: int
    notice: str | None


class Engine:
    """One onnxruntime session on a GPT exported by ``python -m export``."""

    def __init__(self, session: ort.InferenceSession, path: Path, threads: int, io_binding: bool | None = None) -> None:
        self.session = session
        self.path = path
        self.threads = threads
        self.provider = session.get_providers()[0]
        self.metadata = dict(session.get_modelmeta().custom_metadata_map)
        if "gpt_config" not in self.metadata:
            raise ValueError(f"{path} has no gpt_config metadata: export it with `python -m export`")
        config = json.loads(self.metadata["gpt_config"])
        self.block_size: int = int(config["block_size"])
        self.vocab_size: int = int(config["vocab_size"])
        self.n_layer: int = int(config["n_layer"])
        self.n_head: int = int(config["n_head"])
        self.head_dim: int = int(config["d_model"]) // self.n_head
        self.eot_id: int = int(self.metadata.get("eot_token_id", 50256))  # GPT-2's <|endoftext|>
        self.past_names = past_names(self.n_layer)  # the cache inputs, in graph order
        self._output_names = [LOGITS, *present_names(self.n_layer)]
        # On CUDA the cache stays on the device between steps (I/O binding); CPU needs no copies.
        self._device = "cuda" if self.provider == CUDA else "cpu"
        self.io_binding = self.provider == CUDA if io_binding is None else io_binding
        self.arena: str = "on"  # set by load()
        self._run_options: ort.RunOptions | None = None
        # How many of the oldest tokens leave at once when the context fills. 1 recomputes the
        # whole window at every new token, exactly as PyTorch's GPT.generate (the export's
        # checks use it), at ~block_size times a cached step's cost; a quarter of the context
        # re-prefills the rest once per 64 tokens, so a full context decodes at about the speed
        # of a short one (no position exists past block_size, so the cache cannot simply roll).
        self.context_shift: int = max(1, self.block_size // 4)

    @classmethod
    def load(
        cls, path: str | Path, provider: str = "auto", threads: int | None = None, io_binding: bool | None = None,
        spin: bool = True, arena: str = DEFAULT_ARENA,
    ) -> "Engine":
        """Open the ONNX file ``path`` (``python -m export`` writes them, ``export.artifact_paths()``
        says where). provider: "auto", "cpu" or "cuda".
        ``spin=False``: onnxruntime's extra threads sleep between calls instead of busy-waiting
        for the next one (for a session used now and then beside other work). ``arena``: how
        the CPU memory of a call is allocated, one of :data:`ARENAS`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: build it with `python -m export`")
        providers = requested_providers(provider)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None, not {threads!r}")
        threads = threads or DEFAULT_CPU_THREADS
        if arena not in ARENAS:
            raise ValueError(f"arena must be one of {', '.join(ARENAS)}, not {arena!r}")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # provider fallbacks are reported through `provider`
        if not spin:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.enable_cpu_mem_arena = arena != "off"
        run_options = None
        if arena.startswith("shrink"):
            run_options = ort.RunOptions()
            run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        session = ort.InferenceSession(str(path), sess_options=options, providers=providers)
        engine = cls(session, path, threads, io_binding)
        engine.arena, engine._run_options = arena, run_options
        return engine

    def widened(self, max_threads: int = 4) -> "Engine | None":
        """The same file on every core (``max_threads`` at most), its extra threads asleep between
        calls (spinning ones kept the other cores busy while the loop drew tokens): for the
        decoding loop's wide calls (runtime.batching.WIDE_MIN_TOKENS). None on CUDA or one core."""
        cores = min(os.cpu_count() or 1, max_threads)
        if self.provider == CUDA or cores < 2:
            return None
        return Engine.load(self.path, provider="cpu", threads=cores, spin=False, arena=self.arena)

    def __repr__(self) -> str:
        return f"Engine({self.path.name}, provider={self.provider}, threads={self.threads}, block_size={self.block_size})"

    # -- model calls -------------------------------------------------------------------------

    def empty_cache(self, batch: int) -> list:
        """The cache of past length 0 for ``batch`` rows: numpy arrays on the CPU path,
        device-resident OrtValues with I/O binding."""
        empty = np.zeros((batch, self.n_head, 0, self.head_dim), dtype=np.float32)
        if self.io_binding:
            return [ort.OrtValue.ortvalue_from_numpy(empty, self._device, 0) for _ in self.past_names]
        return [empty] * len(self.past_names)

    @staticmethod
    def cache_length(past: list) -> int:
        """Positions held in a cache (numpy arrays or OrtValues)."""
        first = past[0]
        return int(first.shape[2] if isinstance(first, np.ndarray) else first.shape()[2])

    def run(
        self, ids: np.ndarray, past: list, attention_mask: np.ndarray | None = None, position_ids: np.ndarray | None = None,
        prefill: bool = False,
    ) -> tuple[np.ndarray, list]:
        """One graph call: ids [B, T] and the cache (past length P) -> (logits [B, T, V], new cache).

        ``attention_mask`` [B, P+T] (1 = token, 0 = padding) defaults to all ones, and
        ``position_ids`` [B, T] to P, P+1, ... for every row: give both for a padded batch.
        ``prefill``: the call reads a prompt (the arena "shrink-prefill" shrinks after it).
        """
        run_options = self._run_options if self.arena == "shrink" or (prefill and self.arena == "shrink-prefill") else None
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        B, T = ids.shape
        P = self.cache_length(past)
        if attention_mask is None:
            attention_mask = np.ones((B, P + T), dtype=np.int64)
        if position_ids is None:
            position_ids = np.broadcast_to(np.arange(P, P + T, dtype=np.int64), (B, T))
        feeds = {
            INPUT_IDS: ids,
            ATTENTION_MASK: np.ascontiguousarray(attention_mask, dtype=np.int64),
            POSITION_IDS: np.ascontiguousarray(position_ids, dtype=np.int64),
        }
        if not self.io_binding:
            outputs = self.session.run(self._output_names, {**feeds, **dict(zip(self.past_names, past))}, run_options)
            return outputs[0], outputs[1:]
        binding = self.session.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        for name, value in zip(self.past_names, past):
            binding.bind_ortvalue_input(name, value)
        binding.bind_output(LOGITS, "cpu")
        for name in self._output_names[1:]:
            binding.bind_output(name, self._device)
        self.session.run_with_iobinding(binding, run_options)
        outputs = binding.get_outputs()
        return outputs[0].numpy(), list(outputs[1:])

    def forward(
        self, ids: np.ndarray, past: list, attention_mask: np.ndarray | None = None, position_ids: np.ndarray | None = None,
        prefill: bool = False,
    ) -> tuple[np.ndarray, list]:
        """:meth:`run`, keeping only the last position's logits: (logits [B, V], new cache)."""
        logits, present = self.run(ids, past, attention_mask, position_ids, prefill)
        return logits[:, -1, :], present

    # -- generation --------------------------------------------------------------------------

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        num_samples: int = 1,
        stop_at_eot: bool = True,
    ) -> list[int] | list[list[int]]:
        """New token ids (see the module docstring)."""
        ids = self._check(prompt_ids, max_new_tokens, temperature, top_k, top_p, num_samples)
        out: list[list[int]] = [[] for _ in range(num_samples)]
        for step in self._decode(ids, max_new_tokens, temperature, top_k, top_p, seed, num_samples, stop_at_eot):
            for sample, token, ok in zip(out, step.tokens.tolist(), step.live):
                if ok:
                    sample.append(token)
        return out[0] if num_samples == 1 else out

    def stream(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        num_samples: int = 1,
        stop_at_eot: bool = True,
        n_candidates: int | None = 10,
    ) -> Iterator[Step]:
        """Yield a :class:`Step` per new position (see the module docstring).

        Arguments are checked at the call, before the first step is asked for.
        """
        ids = self._check(prompt_ids, max_new_tokens, temperature, top_k, top_p, num_samples)
        self._check_candidates(n_candidates)
        dropped = max(0, len(ids) - self.block_size)
        steps = self._decode(ids, max_new_tokens, temperature, top_k, top_p, seed, num_samples, stop_at_eot, n_candidates)
        return self._details(steps, dropped)

    def _check(self, prompt_ids, max_new_tokens, temperature, top_k, top_p, num_samples) -> np.ndarray:
        """The prompt as int64 ids, after checking every argument (ValueError with a plain message)."""
        check_controls(max_new_tokens, temperature, top_k, top_p, num_samples, self.vocab_size)
        if isinstance(prompt_ids, (str, bytes)):
            raise ValueError("prompt_ids must be token ids, not text: encode it first (model.get_tokenizer().encode)")
        try:
            ids = np.asarray(list(prompt_ids))
        except TypeError:
            raise ValueError(f"prompt_ids must be a sequence of token ids, not {type(prompt_ids).__name__}") from None
        if ids.size == 0:
            raise ValueError(f"prompt_ids is empty: give at least one token (e.g. {self.eot_id}, <|endoftext|>, to start from nothing)")
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError("prompt_ids must be a flat sequence of integer token ids")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"token ids must be in [0, {self.vocab_size}), got {ids.min()}..{ids.max()}")
        return ids.astype(np.int64)

    def _check_candidates(self, n_candidates: int | None) -> None:
        if n_candidates is None:
            return
        if isinstance(n_candidates, bool) or not isinstance(n_candidates, int) or not 0 <= n_candidates <= self.vocab_size:
            raise ValueError(f"n_candidates must be an integer from 0 to {self.vocab_size} or None, not {n_candidates!r}")

    def _decode(
        self, ids, max_new_tokens, temperature, top_k, top_p, seed, num_samples, stop_at_eot, n_candidates=None
    ) -> Iterator[DecodeStep]:
        """Yield a :class:`DecodeStep` per new position: one request alone in a decoding batch
        (the same loop :class:`runtime.batching.Scheduler` runs for many)."""
        batch = Batch(self)
        request = batch.new_sequence(ids, max_new_tokens, temperature, top_k, top_p, seed, num_samples, stop_at_eot, n_candidates)
        batch.add(request)
        while batch.active:
            for _, step in batch.step():
                yield step

    def _details(self, steps, dropped) -> Iterator[Step]:
        """Turn raw decoding steps into :class:`Step` objects with probabilities and timing."""
        ttft = 0.0
        try:
            for index, step in enumerate(steps):
                tokens, live = step.tokens, step.live
                elapsed = time.perf_counter() - step.t0
                ttft = ttft or elapsed
                token_ids: list[int | None] = [int(t) if ok else None for t, ok in zip(tokens, live)]
                token_probs: list[float | None] = [None] * len(tokens)
                candidates: list[list[Candidate]] = [[] for _ in tokens]
                for r, shown in enumerate(step.shown or ()):
                    if shown is None:
                        continue
                    top, probs, sample, p_token = shown
                    token_probs[r] = p_token
                    candidates[r] = [Candidate(int(t), float(p), float(q)) for t, p, q in zip(top, probs, sample)]
                yield Step(index, token_ids, token_probs, candidates, step.finished.tolist(), ttft, elapsed,
                           (index + 1) / elapsed, dropped, step.notice)
        finally:
            steps.close()  # a stream closed early cancels its request at once
