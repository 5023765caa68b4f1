"""Watch it learn's training step as ONNX against PyTorch's: ``python -m benchmarks.bench_train_step``.

For each size and position kind: the graph's export time and file size, then the time per step of
model.train's ``train_step`` (``torch.optim.AdamW``) and of the exported graph in onnxruntime,
both on one thread (as Watch it learn's workers run), from the same initial weights on the same
batches, repetitions alternating so that a busy machine slows both alike. Prints the median and
the loss after the last step of each (the two runs are the same run: they end level).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from export.train_step import export_step, file_name, step_names
from playground.learn.run import learn_model
from model.train import adamw, get_batch, lr_at, train_step
from playground.learn.run import POSITIONS, SIZES


def bench(size: str, positions: str, vocab_size: int, steps: int, folder: Path) -> dict:
    model, tc = learn_model(size, positions, vocab_size)
    t0 = time.perf_counter()
    path = export_step(model, tc, folder / file_name(size, positions))
    export_s = time.perf_counter() - t0
    data = np.random.default_rng(0).integers(0, vocab_size, 50_000).astype(np.uint16)

    ref, _ = learn_model(size, positions, vocab_size)
    ref.train()
    opt = adamw(ref, tc)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    inputs, outputs = step_names(model)
    feeds = {name: p.detach().numpy().copy() for name, p in model.named_parameters()}
    for name in list(feeds):
        feeds[f"m.{name}"], feeds[f"v.{name}"] = np.zeros_like(feeds[name]), np.zeros_like(feeds[name])
    torch_s, onnx_s, torch_loss, onnx_loss = [], [], 0.0, 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        torch_loss = train_step(ref, ref, opt, data, step, tc).item()
        torch_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        x, y = get_batch(data, step, tc, model.config.block_size, 0, 1)
        feeds.update(idx=x.numpy(), targets=y.numpy(), lr=np.array(lr_at(step, tc), dtype=np.float32),
                     step=np.array(step, dtype=np.int64))
        result = dict(zip(outputs, session.run(outputs, feeds)))
        for name in outputs[2:]:
            feeds[name.removeprefix("new.")] = result[name]
        onnx_s.append(time.perf_counter() - t0)
        onnx_loss = float(result["loss"])
    return {
        "graph": path.name, "MB": path.stat().st_size / 1e6, "export_s": export_s, "inputs": len(inputs),
        "torch_ms": 1000 * statistics.median(torch_s[1:]), "onnx_ms": 1000 * statistics.median(onnx_s[1:]),
        "torch_loss": torch_loss, "onnx_loss": onnx_loss,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_train_step", description=__doc__)
    ap.add_argument("--steps", type=int, default=30, help="steps of each (the first, a warm-up, is not counted)")
    ap.add_argument("--vocab-size", type=int, default=84, help="the character corpus's size (84) by default")
    ap.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    ap.add_argument("--positions", nargs="+", choices=list(POSITIONS), default=list(POSITIONS))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'graph':<34} {'MB':>6} {'export s':>9} {'PyTorch ms':>11} {'onnxruntime ms':>15} {'last loss (PyTorch, ONNX)':>27}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            for positions in args.positions:
                r = bench(size, positions, args.vocab_size, args.steps, Path(tmp))
                print(f"{r['graph']:<34} {r['MB']:6.3f} {r['export_s']:9.1f} {r['torch_ms']:11.1f} {r['onnx_ms']:15.1f} "
                      f"{r['torch_loss']:13.5f} {r['onnx_loss']:.5f}", flush=True)


if __name__ == "__main__":
    main()
