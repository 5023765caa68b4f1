"""Data the app needs at run time but derives from the corpus, shipped because data/ is not.

``train_token_counts.npz`` holds how often each GPT-2 token id (0..50256) occurs in the training
split (``data/shakespeare/train.bin``). The embeddings tab searches only the ids seen in
training: the others' embeddings were never updated away from their random start.

Regenerate it after re-preparing the corpus with ``python -m playground.assets``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..memo import Memo

ASSETS_DIR = Path(__file__).resolve().parent
TOKEN_COUNTS_PATH = ASSETS_DIR / "train_token_counts.npz"
VOCAB_SIZE = 50257

__all__ = ["TOKEN_COUNTS_PATH", "count_tokens", "write_token_counts", "load_token_counts", "seen_token_ids"]

# The shipped file, and room for one other (a regenerated or a test's file) beside it.
_counts: Memo[Path, np.ndarray] = Memo(size=2)


def count_tokens(train_bin: str | Path, vocab_size: int = VOCAB_SIZE) -> np.ndarray:
    """Occurrences of every id in a uint16 token file, as a [vocab_size] int64 array."""
    ids = np.fromfile(train_bin, dtype=np.uint16)
    if ids.size and int(ids.max()) >= vocab_size:
        raise ValueError(f"{train_bin} holds id {int(ids.max())}, outside the vocabulary of {vocab_size}")
    return np.bincount(ids, minlength=vocab_size).astype(np.int64)


def write_token_counts(train_bin: str | Path, out: str | Path = TOKEN_COUNTS_PATH) -> Path:
    """Count ``train_bin`` and write the compressed counts file; returns its path."""
    counts = count_tokens(train_bin)
    out = Path(out)
    # uint32 is enough for any corpus below 4 billion tokens and compresses to a few kB.
    np.savez_compressed(out, counts=counts.astype(np.uint32))
    _counts.pop(out.resolve())
    return out


def load_token_counts(path: str | Path = TOKEN_COUNTS_PATH) -> np.ndarray:
    """The shipped counts [50257] (cached); raises FileNotFoundError naming the regenerating command."""
    return _counts.get(Path(path).resolve(), _read_counts)


def _read_counts(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: regenerate it with `python -m playground.assets`")
    with np.load(path, allow_pickle=False) as data:
        counts = data["counts"].astype(np.int64)
    if counts.shape != (VOCAB_SIZE,):
        raise ValueError(f"{path} holds {counts.shape} counts, expected ({VOCAB_SIZE},)")
    return counts


def seen_token_ids(path: str | Path = TOKEN_COUNTS_PATH) -> np.ndarray:
    """Sorted ids that occur at least once in the training split."""
    return np.flatnonzero(load_token_counts(path) > 0)
