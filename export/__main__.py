"""python -m export: write artifacts/hub/ from the shipped weights (ONNX fp32 and 8-bit, config,
tokenizer, safetensors, model card), then validate both ONNX files (onnx.checker, parity with
PyTorch, a left-padded batch, cached decoding, greedy text) and measure their held-out loss on
the whole validation split, which goes into the model card.

    python -m export --publish USER/NAME   # the same, then the folder is uploaded as that model repository"""

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
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: artifacts/; the files go to OUT/hub/)")
    ap.add_argument("--greedy-tokens", type=int, default=200, help="greedy tokens compared with PyTorch")
    ap.add_argument("--val", type=Path, default=DEFAULT_VAL, help="validation tokens for the loss check")
    ap.add_argument("--loss-windows", type=int, default=0,
                    help="validation windows for the loss check, spread over the split (0, the default: all)")
    ap.add_argument("--publish", metavar="USER/NAME",
                    help="then, if every check passed, upload the Hub folder as the model repository USER/NAME "
                         "(huggingface_hub's token: `hf auth login` or HF_TOKEN)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from model import WEIGHTS_DIR, load_pretrained

    from .publish import check_repo_id, publish_model, upload_failed

    if args.publish:
        try:
            check_repo_id(args.publish)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2

    from .build import build
    from .inside_graph import built_graphs
    from .hub import write_model_card
    from .naming import hub_dir
    from .validate import format_table, run_checks

    bar = tqdm(total=1000, unit="‰", bar_format="{l_bar}{bar}| {elapsed}", dynamic_ncols=True)

    def progress(offset: float, share: float):
        def report(fraction: float, text: str) -> None:
            bar.n = int(1000 * (offset + share * fraction))
            bar.set_description(text)
            bar.refresh()

        return report

    losses: dict[str, float] = {}
    try:
        paths = build(args.weights, args.out, progress(0.0, 0.4))
        model = load_pretrained(args.weights)
        bar.set_description("the Inside tab's graphs for the browser (export/inside_graph.py)")
        bar.refresh()
        built_graphs(model, args.out)
        val = np.fromfile(args.val, dtype=np.uint16) if args.val.is_file() else None
        results = run_checks(
            paths, model, greedy_tokens=args.greedy_tokens, val_tokens=val,
            loss_windows=args.loss_windows, progress=progress(0.4, 0.6), losses=losses,
        )
    except (FileNotFoundError, ValueError) as e:
        bar.close()
        print(f"error: {e}", file=sys.stderr)
        return 2
    bar.close()
    folder = hub_dir(args.out)
    if losses and not args.loss_windows:  # the card states whole-split losses only
        write_model_card(folder, model.config, model.num_parameters(), Path(args.weights or WEIGHTS_DIR), losses)
    print(f"{folder}:")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        print(f"  {str(path.relative_to(folder)):<28} {path.stat().st_size / 1e6:8.2f} MB")
    if val is None:
        print(f"(loss check skipped: {args.val} not found; run `python -m model.data`)")
    print(format_table(results))
    failed = [c for c in results if not c.ok]
    print("all checks passed" if not failed else f"{len(failed)} check(s) FAILED")
    if failed:
        return 1
    if args.publish:
        try:
            print(f"published: {publish_model(folder, args.publish)}")
        except Exception as err:  # noqa: BLE001 -- no token, no network, no right to the name: say it, no traceback
            print(upload_failed(args.publish, err), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
