"""Plot a training log: train and validation loss against tokens seen.

    python -m model.plot [--log model/weights/training_log.json] [--out model/weights/training_curve.png]

Two reference lines give the curve its meaning: ln(V), the loss of a model that has learned
nothing (every one of the V tokens equally likely), and the project's target of 5.0 nats/token
on the held-out works.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from . import WEIGHTS_DIR  # noqa: E402
from .gpt import GPTConfig  # noqa: E402

TARGET = 5.0  # nats/token on the held-out works: the shipped model's acceptance bar


def load_log(path: Path) -> list[dict]:
    log = json.loads(Path(path).read_text())  # step 0 has no train loss (null; NaN in older logs)
    if not log:
        raise ValueError(f"{path}: the training log is empty")
    return log


def vocab_size_beside(log_path: Path) -> int:
    """V from the config.json next to the log (a run folder or model/weights), else GPT-2's."""
    config = Path(log_path).with_name("config.json")
    return GPTConfig.from_json(config).vocab_size if config.is_file() else GPTConfig().vocab_size


def val_label(log: list[dict]) -> str:
    """Says when the periodic evaluations covered only part of the held-out works."""
    windows = [e.get("val_windows") for e in log]
    if None in windows or len(set(windows)) == 1:
        return "validation loss (held-out works)"
    return f"validation loss (held-out works; {windows[0]} of {max(windows)} windows before the last point)"


def make_figure(log: list[dict], vocab_size: int) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    train = [(e["tokens"], e["train_loss"]) for e in log if e["train_loss"] is not None and not math.isnan(e["train_loss"])]
    val = [(e["tokens"], e["val_loss"]) for e in log]
    if train:
        ax.plot(*zip(*train), label="train loss (mean since the last evaluation)", color="tab:blue")
    ax.plot(*zip(*val), "o-", markersize=3, label=val_label(log), color="tab:orange")
    ax.axhline(math.log(vocab_size), color="gray", linestyle=":", label=f"ln(V) = {math.log(vocab_size):.2f}: uniform guess")
    ax.axhline(TARGET, color="tab:green", linestyle="--", label=f"target {TARGET:.1f}")
    best = min(val, key=lambda p: p[1])
    ax.set_title(f"Training curve: best validation loss {best[1]:.3f} nats/token after {best[0] / 1e6:.2f}M tokens")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1e6:g}M"))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def plot(log_path: Path, out: Path, vocab_size: int | None = None) -> Path:
    fig = make_figure(load_log(log_path), vocab_size or vocab_size_beside(log_path))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=Path, default=WEIGHTS_DIR / "training_log.json")
    ap.add_argument("--out", type=Path, default=WEIGHTS_DIR / "training_curve.png")
    args = ap.parse_args(argv)
    if not args.log.is_file():
        raise SystemExit(f"{args.log} not found: training writes training_log.json into its run folder (runs/<preset>/)")
    print(f"wrote {plot(args.log, args.out)}")


if __name__ == "__main__":
    main()
