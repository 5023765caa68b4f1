"""python -m playground.assets [--train-bin data/shakespeare/train.bin]: rewrite the shipped counts."""

from __future__ import annotations

import argparse

from model.data import DEFAULT_OUT

from . import TOKEN_COUNTS_PATH, load_token_counts, write_token_counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--train-bin", default=str(DEFAULT_OUT / "train.bin"), help="uint16 token file (python -m model.data)")
    args = parser.parse_args()
    out = write_token_counts(args.train_bin, TOKEN_COUNTS_PATH)
    counts = load_token_counts(out)
    print(f"wrote {out}: {int(counts.sum()):,} tokens, {int((counts > 0).sum()):,} distinct ids")


if __name__ == "__main__":
    main()
