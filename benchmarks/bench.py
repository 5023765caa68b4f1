"""python -m benchmarks.bench: greedy tokens/s of our onnxruntime engine against the alternatives.

Same weights, same prompt, batch 1, greedy, up to 256 new tokens (as many as fit the context),
every engine once per repetition in turn (so load from other processes hits them alike), then
medians and ratios. Also: time to first token for a 100-token prompt, the machine's memory copy
bandwidth and the share of the weight-streaming bound each engine reaches, and the int8 model's
validation loss next to fp32's.

Every time is taken twice: wall clock, and the process's CPU time. On a machine shared with
other work (a training run at a higher priority took ~95 % of this 2-core box while these
numbers were taken) the wall clock mostly measures waiting for a core; CPU time measures what
the engine costs while it runs, memory stalls included, and so does the bandwidth it is held to.
On an idle machine the two agree. With 2 threads the CPU time adds both threads' (spinning
included): that row's CPU figures are per CPU-second, not per second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F

from export import ensure_onnx
from export.naming import ROOT
from export.validate import onnx_loss
from playground import limits
from runtime.batching import Scheduler
from runtime.engine import ARENAS, DEFAULT_ARENA, DEFAULT_CPU_THREADS, Engine
from runtime.generate import generate
from runtime.params import SamplingParams

Generate = Callable[[list[int], int], list[int]]  # (prompt ids, new tokens) -> new ids


@dataclass
class Contender:
    name: str
    generate: Generate
    bytes_per_token: int
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    cpu_ttfts: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)


def weight_bytes_per_token(path: Path) -> int:
    """Initializer bytes one decoding step reads: all of them, except that a table read only
    by Gather (an untied embedding) contributes just the one row it looks up."""
    proto = onnx.load(str(path))
    gathered = {n.input[0] for n in proto.graph.node if n.op_type == "Gather"}
    gathered -= {i for n in proto.graph.node if n.op_type != "Gather" for i in n.input}
    total = 0
    for t in proto.graph.initializer:
        size = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize * int(np.prod(t.dims, dtype=np.int64))
        total += size // t.dims[0] if t.name in gathered and t.dims else size
    return total


@dataclass(frozen=True)
class Bandwidth:
    wall: float  # bytes read + written per wall-clock second
    cpu: float  # ... per second of CPU time


def copy_bandwidth(threads: int, mbytes: int = 256, reps: int = 7) -> Bandwidth:
    """Memory traffic of a large tensor copy (bytes read + written per second), median of reps.

    256 MB is well past the 32 MB L3, so this is DRAM bandwidth."""
    torch.set_num_threads(threads)
    src = torch.ones(mbytes * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)  # fault the pages in
    walls, cpus = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        dst.copy_(src)
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - t)
    moved = 2 * src.numel() * 4
    return Bandwidth(moved / statistics.median(walls), moved / max(statistics.median(cpus), 1e-9))


def engine_generate(engine: Engine) -> Generate:
    return lambda prompt, n: generate(engine, prompt, SamplingParams(n, stop_at_eot=False))


def torch_cached(model: torch.nn.Module) -> Generate:
    def run(prompt: list[int], n: int) -> list[int]:
        return model.generate(torch.tensor([prompt]), n, temperature=0.0)[0, len(prompt) :].tolist()

    return run


def torch_recompute(model) -> Generate:
    """nanoGPT's generate: the whole sequence again every step, logits for the last position only."""

    @torch.no_grad()
    def run(prompt: list[int], n: int) -> list[int]:
        idx = torch.tensor([prompt])
        for _ in range(n):
            hidden = model(idx[:, -model.config.block_size :], head=False).hidden
            logits = F.linear(hidden[:, -1, :], model.lm_head.weight)
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
        return idx[0, len(prompt) :].tolist()

    return run


def transformers_generate(weights_dir: Path, tmp: Path) -> Generate | None:
    """GPT2LMHeadModel.generate on the converted weights, or None without transformers."""
    try:
        from transformers import GPT2LMHeadModel
        from transformers.utils import logging as hf_logging
    except ImportError:
        return None
    from model import EOT_ID
    from model.convert import to_hf

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    hf = GPT2LMHeadModel.from_pretrained(to_hf(weights_dir, tmp / "hf")).eval()

    @torch.no_grad()
    def run(prompt: list[int], n: int) -> list[int]:
        ids = torch.tensor([prompt])
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, pad_token_id=EOT_ID)
        return out[0, len(prompt) :].tolist()

    return run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", type=Path, default=None, help="model folder (default: model/weights)")
    ap.add_argument("--artifacts", type=Path, default=None, help="artifacts folder (default artifacts/; its hub/onnx/ files are built if stale)")
    ap.add_argument("--tokens", type=int, default=256, help="new tokens per run (capped to the context)")
    ap.add_argument("--reps", type=int, default=3, help="alternating repetitions (medians are reported)")
    ap.add_argument("--threads", type=int, default=DEFAULT_CPU_THREADS, help="threads for every engine")
    ap.add_argument("--val", type=Path, default=ROOT / "data" / "shakespeare" / "val.bin")
    ap.add_argument("--loss-windows", type=int, default=16, help="validation windows for the int8 loss, spread over the split (0: skip)")
    ap.add_argument("--skip-recompute", action="store_true", help="leave out the (slow) full-recompute loop")
    ap.add_argument("--streams", type=int, nargs="*", default=[1, 4, 16],
                    help="concurrent streams for the batched-decoding table (int8 engine, runtime.batching.Scheduler)")
    ap.add_argument("--streams-only", action="store_true", help="print only the concurrent-streams table")
    ap.add_argument("--arenas", nargs="*", choices=ARENAS, default=[],
                    help="onnxruntime CPU arenas to set beside the default in the streams table (Engine.load's arena)")
    ap.add_argument("--memory", action="store_true",
                    help="print only the memory table: RSS of the app's loop under 16 long generations, per arena "
                         "(the default and --arenas), each in a process of its own")
    ap.add_argument("--context-only", action="store_true",
                    help="print only the full-context table (decoding after a full context against a short prompt)")
    args = ap.parse_args(argv)
    for name in ("tokens", "reps", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if any(n < 1 for n in args.streams):
        ap.error("--streams must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from model import WEIGHTS_DIR, get_tokenizer, load_pretrained


    weights_dir = args.weights or WEIGHTS_DIR
    try:
        paths = ensure_onnx(weights_dir=weights_dir, out_dir=args.artifacts)
        model = load_pretrained(weights_dir)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    block = model.config.block_size
    enc = get_tokenizer()
    prompt = enc.encode("ROMEO:")
    n_new = min(args.tokens, block - len(prompt) + 1)  # the last new token needs no position
    long_prompt = (enc.encode(Path(ROOT / "README.md").read_text()) * 10)[:min(100, block)]

    arenas = list(dict.fromkeys([DEFAULT_ARENA, *args.arenas]))
    if args.memory:
        print(memory_table(paths["int8"], arenas, args.threads), flush=True)
        return 0
    int8 = Engine.load(paths["int8"], "cpu", args.threads)
    wide = int8.widened()
    if not args.context_only and args.streams:
        print(steps_table(int8, wide, sorted({1, *args.streams})), flush=True)
        print(streams_table(int8, prompt, args.streams, args.reps, wide, arenas[1:]), flush=True)
    if not args.streams_only:
        print(context_table(int8, prompt, block, args.reps, wide), flush=True)
    if args.streams_only or args.context_only:
        return 0

    fp32_bytes, int8_bytes = weight_bytes_per_token(paths["fp32"]), weight_bytes_per_token(paths["int8"])
    engines = {
        f"onnx engine int8 ({args.threads} thr)": (Engine.load(paths["int8"], "cpu", args.threads), int8_bytes),
        f"onnx engine fp32 ({args.threads} thr)": (Engine.load(paths["fp32"], "cpu", args.threads), fp32_bytes),
    }
    # The other thread count for the int8 engine, to show the default was chosen by measurement.
    other = 2 if args.threads == 1 else 1
    engines[f"onnx engine int8 ({other} thr)"] = (Engine.load(paths["int8"], "cpu", other), int8_bytes)
    contenders = [Contender(name, engine_generate(e), b) for name, (e, b) in engines.items()]
    contenders.append(Contender("pytorch, kv cache", torch_cached(model), fp32_bytes))
    with tempfile.TemporaryDirectory() as tmp:
        hf = transformers_generate(weights_dir, Path(tmp))
    if hf is not None:
        contenders.append(Contender("transformers generate", hf, fp32_bytes))
    if not args.skip_recompute:
        contenders.append(Contender("pytorch, full recompute", torch_recompute(model), fp32_bytes))

    print(f"{len(prompt)}-token prompt, {n_new} new tokens, greedy, batch 1, {args.reps} reps, "
          f"{args.threads} thread(s); warming up...", flush=True)
    for c in contenders:
        c.generate(prompt, 4)
    for rep in range(args.reps):
        for c in contenders:
            t, cpu = time.perf_counter(), time.process_time()
            c.tokens = c.generate(prompt, n_new)
            c.cpu_times.append(time.process_time() - cpu)
            c.times.append(time.perf_counter() - t)
            t, cpu = time.perf_counter(), time.process_time()
            c.generate(long_prompt, 1)
            c.cpu_ttfts.append(time.process_time() - cpu)
            c.ttfts.append(time.perf_counter() - t)
        print(f"  rep {rep + 1}/{args.reps} (tok/s wall, per CPU-s): "
              + ", ".join(f"{c.name} {n_new / c.times[-1]:.0f}, {n_new / max(c.cpu_times[-1], 1e-9):.0f}" for c in contenders), flush=True)
    torch.set_num_threads(args.threads)
    bandwidth = copy_bandwidth(args.threads)

    print(report_table(contenders, n_new, bandwidth, len(long_prompt)))
    print(f"\nmemory copy bandwidth (256 MB, read + write, {args.threads} thread(s)): {bandwidth.wall / 1e9:.1f} GB/s wall, "
          f"{bandwidth.cpu / 1e9:.1f} GB/s of CPU time; bound = bandwidth / weight bytes read per token: "
          f"fp32 {bandwidth.wall / fp32_bytes:.0f} tok/s ({bandwidth.cpu / fp32_bytes:.0f} per CPU-s), "
          f"int8 {bandwidth.wall / int8_bytes:.0f} tok/s ({bandwidth.cpu / int8_bytes:.0f} per CPU-s)")
    if args.loss_windows and args.val.is_file():
        val = np.fromfile(args.val, dtype=np.uint16)
        a = onnx_loss(engines[f"onnx engine fp32 ({args.threads} thr)"][0], val, args.loss_windows)
        b = onnx_loss(engines[f"onnx engine int8 ({args.threads} thr)"][0], val, args.loss_windows)
        print(f"validation loss ({args.loss_windows} windows of {block}, spread over the split): fp32 {a:.4f}, int8 {b:.4f} ({b - a:+.4f} nats)")
    return 0


STREAM_TOKENS = 64  # new tokens per stream in the concurrent-streams table
STREAM_SAMPLING = {"temperature": 0.8, "top_k": 50, "top_p": 0.95, "stop_at_eot": False}  # the app's defaults, every token


def steps_table(engine: Engine, wide: Engine | None, rows: list[int], cache: int = 64, reps: int = 30) -> str:
    """The model's decoding step alone for 1, 4, 16, ... rows (a cache of ``cache`` positions), on
    ``engine`` and on ``wide``: why the decoding loop sends calls of WIDE_MIN_TOKENS tokens or
    more to every core and leaves a lone row on one. Medians of ``reps`` steps."""
    cache = min(cache, engine.block_size - 1)  # the step's token needs a position too
    engines = {f"{engine.threads} thread": engine} | ({f"{wide.threads} threads": wide} if wide is not None else {})
    times: dict[tuple[str, int], list[float]] = {(name, n): [] for name in engines for n in rows}
    for n in rows:
        _, past = engine.forward(np.full((n, cache), 464, dtype=np.int64), engine.empty_cache(n))
        step = (np.full((n, 1), 11, dtype=np.int64), past, np.ones((n, cache + 1), dtype=np.int64), np.full((n, 1), cache))
        for rep in range(reps + 3):  # alternating; the first 3 warm up
            for name, e in engines.items():
                t = time.perf_counter()
                e.forward(*step)
                if rep >= 3:
                    times[name, n].append(time.perf_counter() - t)
    ms = {key: 1000 * statistics.median(t) for key, t in times.items()}
    lines = [f"\none decoding step ({engine.path.name}, {cache} cached positions; median of {reps}):",
             "| rows | " + " | ".join(f"{name}: ms" for name in engines) + " |", "|---|" + "---|" * len(engines)]
    lines += [f"| {n} | " + " | ".join(f"{ms[name, n]:.2f}" for name in engines) + " |" for n in rows]
    return "\n".join(lines)


def streams_table(
    engine: Engine, prompt: list[int], streams: list[int], reps: int, wide: Engine | None = None, arenas: Sequence[str] = ()
) -> str:
    """Aggregate tokens/s of ``n`` concurrent streams in one continuous batch, for each n in
    ``streams``: each stream samples STREAM_TOKENS tokens with the app's settings and reads the
    candidates as the app does; repetitions alternate the stream counts (and, with ``wide``, the
    loop on ``engine`` alone and the app's loop, whose wide calls run on ``wide``; with
    ``arenas``, the app's loop on sessions with each of those CPU arenas), medians are reported."""
    from concurrent.futures import ThreadPoolExecutor

    loops = {f"{engine.threads} thread": Scheduler(engine, max_rows=max(streams), max_waiting=limits.MAX_WAITING_REQUESTS)}
    if wide is not None:
        loops[f"the app's: {wide.threads} threads from 4 tokens a call"] = Scheduler(engine, max_rows=max(streams), max_waiting=limits.MAX_WAITING_REQUESTS, wide=wide)
    for arena in arenas:
        other = Engine.load(engine.path, "cpu", engine.threads, arena=arena)
        loops[f"the app's, arena {arena}"] = Scheduler(other, max_rows=max(streams), max_waiting=limits.MAX_WAITING_REQUESTS, wide=other.widened())

    def one(scheduler: Scheduler, seed: int) -> int:
        return sum(1 for _ in scheduler.stream(prompt, SamplingParams(STREAM_TOKENS, seed=seed, **STREAM_SAMPLING)))

    times: dict[tuple[str, int], list[float]] = {(name, n): [] for name in loops for n in streams}
    try:
        for scheduler in loops.values():
            one(scheduler, 0)  # warm-up
        for _ in range(reps):
            for n in streams:
                for name, scheduler in loops.items():
                    t = time.perf_counter()
                    with ThreadPoolExecutor(n) as pool:
                        assert sum(pool.map(lambda seed: one(scheduler, seed), range(n))) == n * STREAM_TOKENS
                    times[name, n].append(time.perf_counter() - t)
    finally:
        for scheduler in loops.values():
            scheduler.close()
    rate = {key: key[1] * STREAM_TOKENS / statistics.median(t) for key, t in times.items()}
    base = rate[next(iter(loops)), streams[0]]
    lines = [f"\nbatched decoding ({engine.path.name}, {STREAM_TOKENS} sampled tokens per stream, temperature 0.8, "
             f"top-k 50, top-p 0.95, candidates as the app reads them; median of {reps}, ratios to one stream on "
             f"{next(iter(loops))}):",
             "| decoding loop | concurrent streams | tokens/s in all | × 1 stream | tokens/s per stream |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {n} | {rate[name, n]:.0f} | {rate[name, n] / base:.2f} | {rate[name, n] / n:.0f} |"
              for name in loops for n in streams]
    return "\n".join(lines)


MEMORY_ROWS, MEMORY_PROMPT, MEMORY_TOKENS, MEMORY_ROUNDS = 16, 300, 512, 3  # the public-Space memory reproduction: 16 users' long generations


def _rss_mb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def memory_rounds(path: Path, arena: str, threads: int) -> list[int]:
    """RSS (MB) of a fresh process running the app's loop on ``path`` with ``arena``: after one
    short warm-up generation, then after each of MEMORY_ROUNDS rounds of MEMORY_ROWS concurrent
    MEMORY_TOKENS-token generations from MEMORY_PROMPT-token prompts (past the context: every
    request is cut, then re-read a quarter at a time), glibc's free memory handed back each time."""
    import ctypes
    from concurrent.futures import ThreadPoolExecutor

    trim = ctypes.CDLL("libc.so.6").malloc_trim
    engine = Engine.load(path, "cpu", threads, arena=arena)
    scheduler = Scheduler(engine, max_rows=MEMORY_ROWS, max_waiting=limits.MAX_WAITING_REQUESTS, wide=engine.widened())
    rng = np.random.default_rng(0)

    def one(seed: int) -> int:
        prompt = rng.integers(0, engine.vocab_size - 1, MEMORY_PROMPT).tolist()
        return sum(1 for _ in scheduler.stream(prompt, SamplingParams(MEMORY_TOKENS, seed=seed, **STREAM_SAMPLING)))

    one(0)
    trim(0)
    rss = [_rss_mb()]
    for _ in range(MEMORY_ROUNDS):
        with ThreadPoolExecutor(MEMORY_ROWS) as pool:
            assert sum(pool.map(one, range(MEMORY_ROWS))) == MEMORY_ROWS * MEMORY_TOKENS
        trim(0)
        rss.append(_rss_mb())
    scheduler.close()
    return rss


def memory_table(path: Path, arenas: Sequence[str], threads: int) -> str:
    """:func:`memory_rounds` for each arena, each in a fresh process (Linux: /proc, glibc)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    lines = [f"\nmemory of the app's loop ({path.name}; {MEMORY_ROWS} concurrent generations of {MEMORY_TOKENS} tokens "
             f"from {MEMORY_PROMPT}-token prompts, {MEMORY_ROUNDS} rounds; RSS in MB, a fresh process per arena):",
             "| arena | after warm-up | " + " | ".join(f"round {i + 1}" for i in range(MEMORY_ROUNDS)) + " | growth | seconds |",
             "|---|---|" + "---|" * MEMORY_ROUNDS + "---|---|"]
    for arena in arenas:
        t = time.perf_counter()
        with context.Pool(1) as pool:
            rss = pool.apply(memory_rounds, (path, arena, threads))
        lines.append(f"| {arena} | " + " | ".join(f"{r:,}" for r in rss) + f" | {rss[-1] - rss[0]:+,} | {time.perf_counter() - t:.0f} |")
    return "\n".join(lines)


def context_table(engine: Engine, prompt: list[int], block_size: int, reps: int, wide: Engine | None = None) -> str:
    """Tokens/s of the same decoding after a short prompt and with the context full from the start
    (a prompt of block_size - 1 tokens): a full context drops its oldest quarter at once and is
    read anew once per quarter, instead of at every token. On ``engine`` alone and, with
    ``wide``, in the app's loop (a Scheduler whose prefills run on ``wide``); repetitions
    alternate, medians are reported."""
    n_new = block_size * 3 // 4  # after a short prompt this never fills the context
    full = (prompt * block_size)[: block_size - 1]
    scheduler = Scheduler(engine, max_rows=limits.MAX_BATCH_ROWS, max_waiting=limits.MAX_WAITING_REQUESTS, wide=wide) if wide is not None else None
    loops = {f"{engine.path.name}, {engine.threads} thread": lambda ids, seed: len(
        generate(engine, ids, SamplingParams(n_new, seed=seed, **STREAM_SAMPLING)))}
    if scheduler is not None:
        loops[f"the app's loop (prefills on {wide.threads} threads)"] = lambda ids, seed: sum(
            1 for _ in scheduler.stream(ids, SamplingParams(n_new, seed=seed, n_candidates=None, **STREAM_SAMPLING)))
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for rep in range(reps + 1):  # the first is a warm-up
            for name, run in loops.items():
                for label, ids in (("short", prompt), ("full", full)):
                    t = time.perf_counter()
                    assert run(ids, rep) == n_new
                    if rep:
                        times.setdefault((name, label), []).append(time.perf_counter() - t)
    finally:
        if scheduler is not None:
            scheduler.close()
    rate = {key: n_new / statistics.median(t) for key, t in times.items()}
    lines = [f"\ndecoding {n_new} sampled tokens (temperature 0.8, top-k 50, top-p 0.95) after a {len(prompt)}-token prompt "
             f"and with the {block_size}-token context full from the start; median of {reps}:",
             "| decoding | short prompt: tokens/s | full context: tokens/s | full / short |", "|---|---|---|---|"]
    lines += [f"| {name} | {rate[name, 'short']:.0f} | {rate[name, 'full']:.0f} | {rate[name, 'full'] / rate[name, 'short']:.2f} |"
              for name in loops]
    return "\n".join(lines)


def report_table(contenders: list[Contender], n_new: int, bandwidth: Bandwidth, ttft_len: int) -> str:
    """A Markdown table: medians, ratios to transformers and to full recompute, bound share,
    each by wall clock and by CPU time (see the module docstring)."""
    rate = {c.name: n_new / statistics.median(c.times) for c in contenders}
    cpu_rate = {c.name: n_new / max(statistics.median(c.cpu_times), 1e-9) for c in contenders}
    hf = rate.get("transformers generate")
    full = rate.get("pytorch, full recompute")
    reference = next((c.tokens for c in contenders if c.name.startswith("pytorch, kv")), None)
    header = ["engine", "tok/s", "tok per CPU-s", "× transformers: wall (CPU)", "× full recompute: wall (CPU)", "MB/token",
              "% of bound", "% of bound (CPU)", f"TTFT {ttft_len} tok", "TTFT (CPU)", "same tokens as PyTorch"]
    hf_cpu, full_cpu = cpu_rate.get("transformers generate"), cpu_rate.get("pytorch, full recompute")
    rows = []
    for c in sorted(contenders, key=lambda c: -cpu_rate[c.name]):
        r, rc = rate[c.name], cpu_rate[c.name]
        rows.append([
            c.name, f"{r:.0f}", f"{rc:.0f}",
            f"{r / hf:.2f} ({rc / hf_cpu:.2f})" if hf else "n/a",
            f"{r / full:.2f} ({rc / full_cpu:.2f})" if full else "n/a",
            f"{c.bytes_per_token / 1e6:.1f}",
            f"{100 * r * c.bytes_per_token / bandwidth.wall:.0f} %", f"{100 * rc * c.bytes_per_token / bandwidth.cpu:.0f} %",
            f"{1000 * statistics.median(c.ttfts):.1f} ms", f"{1000 * statistics.median(c.cpu_ttfts):.1f} ms",
            "yes" if c.tokens == reference else "no",
        ])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
