"""python -m benchmarks.turns MODEL.onnx: turns in the decoding loop (runtime/turns.py), measured on
the loop itself, without HTTP or Gradio.

1. What a yield costs: a row's cache kept aside and put back (``Batch.park`` then ``add``) against
   the same row read anew from its tokens (a prefill of its window), at 64, 128 and 255 positions.
2. A group and learners: ``--group`` visitors each keep ``--each`` generations of 512 tokens in
   the loop (a new one as soon as one ends); ``--learners`` learners arrive ``--head-start``
   seconds in, one a second, each asking 32 tokens. Their first token and their 32nd, median
   and max, with the slice of runtime.turns and with a slice that never ends (the loop before
   turns: first come, first served, a generation never yields).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from playground import limits
from runtime.batching import Batch, Request, Scheduler
from runtime.engine import Engine
from runtime.params import SamplingParams
from runtime.turns import SLICE_TOKENS

NEVER = 10**9  # a slice that never ends


def yield_costs(engine: Engine, repeats: int = 5) -> list[tuple[int, float, float]]:
    """(positions, ms to keep a row aside and put it back, ms to read it anew)."""
    rows = []
    for length in (64, 128, engine.block_size - 1):
        window = np.arange(1000, 1000 + length)
        keep, anew = [], []
        for _ in range(repeats):
            batch = Batch(engine)
            other = Request.new(np.arange(2000, 2010), SamplingParams(4, stop_at_eot=False), engine.block_size)
            seq = Request.new(window, SamplingParams(4, stop_at_eot=False), engine.block_size)
            batch.add(other, seq)
            t = time.perf_counter()
            batch.park([seq])
            batch.add(seq)
            keep.append(time.perf_counter() - t)
            t = time.perf_counter()
            Batch(engine).add(Request.new(window, SamplingParams(4, stop_at_eot=False), engine.block_size))
            anew.append(time.perf_counter() - t)
        rows.append((length, 1000 * statistics.median(keep), 1000 * statistics.median(anew)))
    return rows


def siege(engine: Engine, wide: Engine | None, slice_tokens: int, group: int, each: int, learners: int,
          head_start_s: float) -> tuple[list[float], list[float]]:
    """Learners' (first token s, 32nd token s) beside a group, on a loop of the app's size."""
    scheduler = Scheduler(engine, max_rows=limits.MAX_BATCH_ROWS, max_waiting=limits.MAX_WAITING_REQUESTS, wide=wide,
                          slice_tokens=slice_tokens)
    done = threading.Event()

    def besiege(k: int) -> None:
        while not done.is_set():
            for _ in scheduler.stream([464 + k, 3290], SamplingParams(512, 0.8, seed=k, stop_at_eot=False), visitor=f"group{k // each}"):
                if done.is_set():
                    break

    def learn(k: int) -> tuple[float, float]:
        time.sleep(head_start_s + k)  # (the scenario: learners arrive one a second)
        t0, first = time.perf_counter(), None
        for _ in scheduler.stream([40, 716 + k], SamplingParams(32, 0.8, seed=100 + k, stop_at_eot=False), visitor=f"learner{k}"):
            first = first or time.perf_counter() - t0
        return first, time.perf_counter() - t0

    with ThreadPoolExecutor(group * each + learners) as pool:
        for k in range(group * each):
            pool.submit(besiege, k)
        results = list(pool.map(learn, range(learners)))
        done.set()
    scheduler.close()
    return [r[0] for r in results], [r[1] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="an ONNX file of python -m export (the app's: model_int8.onnx)")
    parser.add_argument("--group", type=int, default=16)
    parser.add_argument("--each", type=int, default=4)
    parser.add_argument("--learners", type=int, default=10)
    parser.add_argument("--head-start", type=float, default=10.0)
    args = parser.parse_args()
    engine = Engine.load(args.model, "cpu")
    wide = engine.widened()
    print("| positions | keep aside and put back (ms) | read anew (ms) |\n|---|---|---|")
    for length, keep, anew in yield_costs(engine):
        print(f"| {length} | {keep:.1f} | {anew:.1f} |")
    print(f"\n| {args.group} x {args.each} generations of 512 tokens | learner's first token (median / max s) "
          "| 32 tokens (median / max s) |\n|---|---|---|")
    for name, slice_tokens in ((f"turns, slice {SLICE_TOKENS}", SLICE_TOKENS), ("no turns", NEVER)):
        first, whole = siege(engine, wide, slice_tokens, args.group, args.each, args.learners, args.head_start)
        print(f"| {name} | {statistics.median(first):.1f} / {max(first):.1f} | {statistics.median(whole):.1f} / {max(whole):.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
