"""python -m export: write artifacts/gpt.onnx and gpt.int8.onnx from the shipped weights, then
validate both (onnx.checker, parity with PyTorch, cached decoding, greedy text, int8 loss)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .naming import ROOT

DEFAULT_VAL = ROOT / "data" / "shakespeare" / "val.bin"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m export", description=__doc__)
    ap.add_argument("--weights", type=Path, default=None, help="model folder (default: model/weights)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: artifacts/)")
    ap.add_argument("--greedy-tokens", type=int, default=200, help="greedy tokens compared with PyTorch")
    ap.add_argument("--val", type=Path, default=DEFAULT_VAL, help="validation tokens for the int8 loss check")
    ap.add_argument("--loss-windows", type=int, default=32, help="context windows for the int8 loss check")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from model import load_pretrained

    from .build import build
    from .validate import format_table, run_checks

    bar = tqdm(total=1000, unit="‰", bar_format="{l_bar}{bar}| {elapsed}", dynamic_ncols=True)

    def progress(offset: float, share: float):
        def report(fraction: float, text: str) -> None:
            bar.n = int(1000 * (offset + share * fraction))
            bar.set_description(text)
            bar.refresh()

        return report

    try:
        paths = build(args.weights, args.out, progress(0.0, 0.6))
        val = np.fromfile(args.val, dtype=np.uint16) if args.val.is_file() else None
        results = run_checks(
            paths, load_pretrained(args.weights), greedy_tokens=args.greedy_tokens, val_tokens=val,
            loss_windows=args.loss_windows, progress=progress(0.6, 0.4),
        )
    except (FileNotFoundError, ValueError) as e:
        bar.close()
        print(f"error: {e}", file=sys.stderr)
        return 2
    bar.close()
    for key, path in paths.items():
        print(f"{key:>5}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if val is None:
        print(f"(int8 loss check skipped: {args.val} not found; run `python -m model.data`)")
    print(format_table(results))
    failed = [c for c in results if not c.ok]
    print("all checks passed" if not failed else f"{len(failed)} check(s) FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
