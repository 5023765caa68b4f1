"""Training-step speed of the recipes the CPU preset chooses between, measured side by side.

    python -m model.bench_train [--steps 4] [--batch_size 8]

The output head (d_model x 50,257) dominates a small GPT's step on a CPU. This times one
optimizer step (forward, backward, AdamW) for: float32 with the full softmax (the plain
recipe), bfloat16 autocast with the full softmax, and bfloat16 with the softmax over the
tokens the training data contains (``--vocab-subset``, the cpu preset). Repetitions alternate
between the variants so that a busy machine slows them alike; medians and ratios are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from .gpt import GPT
from .train import DEFAULT_DATA, PRESETS, lm_loss, param_groups


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant (after one warm-up)")
    ap.add_argument("--batch_size", type=int, default=8)
    args = ap.parse_args(argv)

    config = replace(PRESETS["cpu"][0], dropout=0.0)
    T = config.block_size
    train = np.fromfile(DEFAULT_DATA / "train.bin", dtype=np.uint16) if (DEFAULT_DATA / "train.bin").exists() else None
    vocab = torch.from_numpy(np.unique(train).astype(np.int64)) if train is not None else torch.arange(19219)
    remap = torch.full((config.vocab_size,), -1, dtype=torch.long)
    remap[vocab] = torch.arange(len(vocab))
    g = torch.Generator().manual_seed(0)
    x = vocab[torch.randint(len(vocab), (args.batch_size, T), generator=g)]
    y = vocab[torch.randint(len(vocab), (args.batch_size, T), generator=g)]

    variants = {
        "float32, full softmax": (False, False),
        "bfloat16, full softmax": (True, False),
        f"bfloat16, softmax over {len(vocab):,} seen tokens": (True, True),
    }
    models = {}
    for name in variants:
        torch.manual_seed(0)
        m = GPT(config).train()
        models[name] = (m, torch.optim.AdamW(param_groups(m, 0.1), lr=1e-3))

    def step(name: str) -> float:
        bf16, subset = variants[name]
        m, opt = models[name]
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, _ = lm_loss(m, m, x, y, vocab if subset else None, remap)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    times: dict[str, list[float]] = {name: [] for name in variants}
    for name in variants:
        step(name)  # warm-up: allocations, oneDNN kernel selection
    for _ in range(args.steps):
        for name in variants:
            times[name].append(step(name))

    base = statistics.median(times["float32, full softmax"])
    tokens = args.batch_size * T
    print(f"{config.n_layer} layers, d_model {config.d_model}, batch {args.batch_size} x {T}, {torch.get_num_threads()} threads")
    print(f"{'variant':48s} {'s/step':>8s} {'tokens/s':>9s} {'speed-up':>9s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:48s} {med:8.3f} {tokens / med:9.0f} {base / med:8.2f}x")


if __name__ == "__main__":
    main()
