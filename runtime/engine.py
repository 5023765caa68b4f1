"""One onnxruntime session on the exported ONNX GPT: graph calls and their cache. Generation is
built on it (``runtime.generate``, ``runtime.batching``); this module knows nothing of sampling.

    from runtime.engine import Engine, left_pad
    engine = Engine.load("artifacts/hub/onnx/model_int8.onnx")   # CUDA if usable, else the CPU
    ids, mask, positions = left_pad([prompt_a, prompt_b])
    logits, cache = engine.forward(ids, engine.empty_cache(2), mask, positions)  # last position's logits

``Engine.load(path, provider="auto", threads=None, spin=True, arena="shrink-prefill")`` opens
one ``InferenceSession`` (``arena``: how its CPU memory is allocated, :data:`ARENAS`);
``widened()`` the same file on every core (4 at most, extra threads asleep between calls) for the
decoding loop's wide calls, or None on CUDA or one core.
Attributes: ``provider`` (the provider really in use, e.g. "CPUExecutionProvider"),
``block_size`` (context length), ``vocab_size``, ``n_layer``, ``eot_id``, ``path``, ``metadata``
(the file's metadata_props), ``threads`` (intra-op threads on CPU), ``context_shift`` (how a full
context slides, see ``Engine.__init__``).

``forward(ids, cache, attention_mask, position_ids)`` is one graph call returning the last
position's logits and the new cache, ``run(...)`` the same with the logits of every position,
``empty_cache(batch)`` the cache to start from, ``to_device(arrays)`` a cache built in numpy where
the session keeps it, and ``left_pad(prompts)`` a batch of prompts of different lengths as
``(ids, attention_mask, position_ids)``: padded positions get no attention weight, so each row
continues its own prompt exactly as it would alone.

Thread safety: one engine may serve many threads at once. ``InferenceSession.run`` is
thread-safe, and every call keeps its cache in local variables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .interface import ATTENTION_MASK, INPUT_IDS, LOGITS, POSITION_IDS, past_names, present_names
from .providers import CUDA, requested_providers

# One thread per graph call: the app serves several users at once, and a second thread buys less
# than it costs in CPU-seconds, nothing at all on a busy machine (docs/export.md, "Benchmark";
# `python -m benchmarks.bench` measures it).
DEFAULT_CPU_THREADS = 1
# How a session allocates the CPU memory of a graph call: "on" is onnxruntime's arena (its
# default), which keeps the largest buffers every (batch, length) shape has needed and never
# gives them back; "shrink" keeps the arena but hands its free regions back after every call,
# "shrink-prefill" after the calls that read a prompt (a request's first and largest); "off" allocates and frees each buffer with the system allocator. docs/export.md ("Memory")
# compares them.
ARENAS = ("on", "off", "shrink", "shrink-prefill")
DEFAULT_ARENA = "shrink-prefill"


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
        return self.to_device([np.zeros((batch, self.n_head, 0, self.head_dim), dtype=np.float32)] * len(self.past_names))

    def to_device(self, cache: list[np.ndarray]) -> list:
        """A cache built in numpy (a batch's rows put together) where this engine keeps it between
        calls: as it is on the CPU path, device-resident OrtValues with I/O binding."""
        if not self.io_binding:
            return cache
        return [ort.OrtValue.ortvalue_from_numpy(p, self._device, 0) for p in cache]

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

    def release_memory(self) -> None:
        """Hand the arena's free regions back to the system, with "shrink-prefill": the decoding
        loop's steps do not shrink it, so without this it keeps the largest batch's buffers
        until the next prompt is read, however long the app then stays idle. The arena shrinks
        only at the end of a call, so this is one call of one token (about a millisecond). The
        arena "shrink" already shrinks after every call; "on" keeps its memory by choice, "off"
        has none."""
        if self.arena == "shrink-prefill":
            self.run(np.array([[self.eot_id]], dtype=np.int64), self.empty_cache(1), prefill=True)

    def forward(
        self, ids: np.ndarray, past: list, attention_mask: np.ndarray | None = None, position_ids: np.ndarray | None = None,
        prefill: bool = False,
    ) -> tuple[np.ndarray, list]:
        """:meth:`run`, keeping only the last position's logits: (logits [B, V], new cache)."""
        logits, present = self.run(ids, past, attention_mask, position_ids, prefill)
        return logits[:, -1, :], present
