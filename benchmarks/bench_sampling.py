"""Sampling against greedy decoding, side by side in one run: ``python -m benchmarks.bench_sampling``.

Each row decodes the same number of tokens from the same prompt with the app's CPU file
(``model_int8.onnx``, one thread), greedy and with the sampling settings people use; the
repetitions alternate between rows so that a busy machine slows them alike. The "float64 softmax"
and "full sort" rows put back the samplers before this one (SAMPLERS) to show what it saves. ``stream`` is what the app calls (with each step's top-10
candidates and their sampled probabilities); ``generate`` is the bare loop.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager

import numpy as np

from export import ensure_onnx
from runtime import sampling
from runtime.engine import Engine
from runtime.generate import generate, stream
from runtime.params import SamplingParams

SETTINGS = [  # (label, temperature, top_k, top_p)
    ("greedy", 0.0, None, None),
    ("temperature 0.8", 0.8, None, None),
    ("top-p 0.9", 1.0, None, 0.9),
    ("top-k 40 + top-p 0.9", 1.0, 40, 0.9),
]


def full_sort_nucleus(p: np.ndarray, top_p: float, first: int = 0) -> np.ndarray:
    """The previous top-p: sort every probability."""
    order = np.argsort(-p, kind="stable")
    sorted_p = p[order]
    return order[(np.cumsum(sorted_p) - sorted_p) < top_p]


# The samplers compared: this one, and the two before it, put back for the run.
SAMPLERS = {
    "": "the sampler: top-p from float32 exponentials, float64 for the candidates only",
    "float64 softmax": "the previous one: a float64 softmax of every row, then a partial sort",
    "full sort": "the first: a float64 softmax and a stable sort of all 50,257 probabilities",
}


@contextmanager
def sampler(name: str):
    """The sampler called ``name`` in SAMPLERS, for the duration of the block."""
    saved = sampling.nucleus, sampling.FAST_NUCLEUS_MIN
    if name:
        sampling.FAST_NUCLEUS_MIN = 1 << 62
    if name == "full sort":
        sampling.nucleus = full_sort_nucleus
    try:
        yield
    finally:
        sampling.nucleus, sampling.FAST_NUCLEUS_MIN = saved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_sampling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    from model import get_tokenizer


    engine = Engine.load(ensure_onnx()["int8"], "cpu", args.threads)
    prompt = get_tokenizer().encode("ROMEO:")
    rows = [(f"{label}, {call}", t, k, p, call, "") for call in ("generate", "stream") for label, t, k, p in SETTINGS]
    rows += [(f"{label}, {call}, {name}", t, k, p, call, name) for name in list(SAMPLERS)[1:]
             for call in ("generate", "stream") for label, t, k, p in SETTINGS if p is not None]

    def run(t, k, p, call, name) -> float:
        with sampler(name):
            cpu = time.process_time()
            params = SamplingParams(args.tokens, t, k, p, seed=1, stop_at_eot=False)
            if call == "generate":
                n = len(generate(engine, prompt, params))
            else:
                n = sum(1 for _ in stream(engine, prompt, params))
            return n / max(time.process_time() - cpu, 1e-9)

    rates: dict[str, list[float]] = {r[0]: [] for r in rows}
    for r in rows:
        run(*r[1:])  # warm-up
    for rep in range(args.reps):
        for r in rows:
            rates[r[0]].append(run(*r[1:]))
        print(f"rep {rep + 1}/{args.reps}", flush=True)
    median = {name: statistics.median(v) for name, v in rates.items()}
    print(f"\n{args.tokens} tokens after 'ROMEO:', model_int8.onnx, {args.threads} thread(s), medians of {args.reps}:\n")
    print("| decoding | tokens per CPU-second | × greedy (same call) |\n|---|---|---|")
    for name, *_ , call, _ in rows:
        print(f"| {name} | {median[name]:.0f} | {median[name] / median[f'greedy, {call}']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
