"""Copy a training run's best checkpoint into model/weights/, the model the app and export use.

    python -m model.ship [--run runs/cpu] [--dtype float16]

Writes model.safetensors (float16 by default: half the bytes in git history, and a
difference in held-out loss far below the reported precision), config.json,
training_log.json and training_curve.png.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from . import WEIGHTS_DIR
from .plot import plot
from .train import ROOT

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def ship(run: Path, out: Path = WEIGHTS_DIR, dtype: str = "float16") -> Path:
    for name in ("model.safetensors", "config.json", "training_log.json"):
        if not (run / name).is_file():
            raise SystemExit(f"{run / name} not found: is {run} a finished training run?")
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.to(DTYPES[dtype]).contiguous() for k, v in load_file(str(run / "model.safetensors")).items()}
    save_file(tensors, str(out / "model.safetensors"))
    shutil.copyfile(run / "config.json", out / "config.json")
    log = json.loads((run / "training_log.json").read_text())
    for entry in log:  # strict JSON for other readers: no NaN
        entry.update({k: None for k, v in entry.items() if isinstance(v, float) and math.isnan(v)})
    (out / "training_log.json").write_text(json.dumps(log, indent=1) + "\n")
    plot(out / "training_log.json", out / "training_curve.png")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, default=ROOT / "runs" / "cpu")
    ap.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float16")
    args = ap.parse_args(argv)
    out = ship(args.run, args.out, args.dtype)
    size = (out / "model.safetensors").stat().st_size / 1e6
    print(f"shipped {args.run} -> {out} ({size:.1f} MB, {args.dtype})")


if __name__ == "__main__":
    main()
