"""Held-out loss: which windows of the validation split an evaluation scores, and the score.

One windowing for every evaluation in the project (training's periodic ones, the shipped model's
acceptance test, the ONNX export's checks), so their numbers are comparable.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from .gpt import GPT


def window_rows(n_tokens: int, block_size: int, max_windows: int = 0) -> np.ndarray:
    """Which non-overlapping windows of ``block_size`` an evaluation scores: all of them, or
    ``max_windows`` spread evenly over the split, so that a sampled evaluation covers every
    held-out work and estimates the same loss as a full one (the first N windows would all
    come from the first work)."""
    n = (n_tokens - 1) // block_size
    if not max_windows or max_windows >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_windows).round().astype(np.int64))


def val_windows(n_tokens: int, block_size: int, max_windows: int = 0) -> int:
    """How many windows an evaluation covers (0: all of them)."""
    return len(window_rows(n_tokens, block_size, max_windows))


def window_batches(data: np.ndarray, block_size: int, max_windows: int = 0, batch_size: int = 16):
    """Yield (inputs, next-token targets), int64 arrays [b, block_size], over :func:`window_rows`."""
    T = block_size
    rows = window_rows(len(data), T, max_windows)
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        x = np.stack([data[r * T : r * T + T] for r in chunk]).astype(np.int64)
        y = np.stack([data[r * T + 1 : r * T + T + 1] for r in chunk]).astype(np.int64)
        yield x, y


@torch.no_grad()
def evaluate_loss(model: GPT, data: np.ndarray, max_windows: int = 0, batch_size: int = 16, chunk_rows: int = 2) -> float:
    """Mean cross-entropy (nats/token, full vocabulary, float32) over :func:`window_rows`.

    The output head runs ``chunk_rows`` windows at a time on the batch's last hidden states, so
    at most ``chunk_rows * block_size`` rows of float32 logits exist at once (a batch's 16 x 256 x
    50,257 would be 823 MB)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for x, y in window_batches(data, model.config.block_size, max_windows, batch_size):
        hidden = model(torch.from_numpy(x).to(device), head=False).hidden  # [b, T, C]
        targets = torch.from_numpy(y).to(device)
        for i in range(0, len(hidden), chunk_rows):
            logits = model.lm_head(hidden[i : i + chunk_rows]).float()  # [chunk, T, V]
            total += F.cross_entropy(logits.flatten(0, 1), targets[i : i + chunk_rows].flatten(), reduction="sum").item()
        count += y.size
    model.train(was_training)
    return total / count


def main(argv: list[str] | None = None) -> float:
    """``python -m model.evaluate --split test|val``: a model's loss on one held-out split.

    The last line ends with the loss in nats per token (other tools read that number)."""
    import argparse
    import json
    import math
    from pathlib import Path

    from . import WEIGHTS_DIR, load_pretrained
    from .data import DEFAULT_OUT, load_split

    ap = argparse.ArgumentParser(description=main.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("test", "val"), default="test", help="held-out split (default: %(default)s)")
    ap.add_argument("--model", type=Path, default=WEIGHTS_DIR, help="model folder (default: the shipped one)")
    ap.add_argument("--data", type=Path, default=DEFAULT_OUT, help="prepared corpus (python -m model.data)")
    ap.add_argument("--max-windows", type=int, default=0, help="score this many windows, spread evenly (0: all)")
    args = ap.parse_args(argv)
    try:
        data = load_split(args.split, args.data)
    except FileNotFoundError as e:
        raise SystemExit(str(e)) from None
    if data.size <= 1:
        raise SystemExit(f"the {args.split} split of {args.data} is empty: its corpus holds too few works")
    model = load_pretrained(args.model).float()
    meta_path = args.data / "meta.json"
    works = json.loads(meta_path.read_text()).get(f"{args.split}_works", []) if meta_path.is_file() else []
    windows = val_windows(len(data), model.config.block_size, args.max_windows)
    loss = evaluate_loss(model, data, args.max_windows)
    print(f"{args.model}: {args.split} split {', '.join(works) or args.data}, {windows} windows of {model.config.block_size} tokens")
    print(f"perplexity {math.exp(loss):.2f}")
    print(f"{args.split} loss (nats/token): {loss:.4f}")
    return loss


if __name__ == "__main__":
    main()
