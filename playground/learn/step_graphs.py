"""Watch it learn's step graphs on their own (``playground.learn.files`` writes them with the rest of
the browser's files): one ONNX training step per size and position kind (export/train_step.py),
of the models Watch it learn builds.

    python -m playground.learn.step_graphs DIR      # DIR/train_step-tiny-learned.onnx ... (four files)
    python -m playground.learn.step_graphs DIR --vocab-size 65 --sizes tiny --positions learned
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from export.train_step import export_step, file_name

from .corpus import load_corpus
from .run import POSITIONS, SIZES, learn_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m playground.learn.step_graphs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder for the ONNX files")
    ap.add_argument("--vocab-size", type=int, default=0,
                    help="vocabulary size (default: the character corpus's, read from the Shakespeare texts)")
    ap.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    ap.add_argument("--positions", nargs="+", choices=list(POSITIONS), default=list(POSITIONS))
    args = ap.parse_args(argv)
    vocab_size = args.vocab_size or load_corpus("char").vocab_size
    for size in args.sizes:
        for positions in args.positions:
            model, tc = learn_model(size, positions, vocab_size)
            path = export_step(model, tc, args.out / file_name(size, positions))
            print(f"{path}  {path.stat().st_size / 1e6:.2f} MB  ({model.num_parameters():,} parameters, vocabulary {vocab_size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
