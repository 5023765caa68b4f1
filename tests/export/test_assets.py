"""The shipped corpus-derived asset matches the corpus it was derived from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from playground import assets


def test_shipped_counts_match_training_split(data_dir):
    shipped = assets.load_token_counts()
    ids = np.fromfile(data_dir / "train.bin", dtype=np.uint16)
    expected = np.zeros(assets.VOCAB_SIZE, dtype=np.int64)
    np.add.at(expected, ids.astype(np.int64), 1)  # counted here independently of bincount
    assert np.array_equal(shipped, expected), "stale: run `python -m playground.assets`"
    meta = json.loads((data_dir / "meta.json").read_text())
    assert int(shipped.sum()) == meta["train_tokens"]


def test_counts_of_a_small_file(tmp_path):
    path = tmp_path / "t.bin"
    np.array([5, 5, 50256, 0], dtype=np.uint16).tofile(path)
    counts = assets.count_tokens(path)
    assert counts.shape == (50257,) and counts[5] == 2 and counts[50256] == 1 and counts[0] == 1 and counts.sum() == 4
    out = assets.write_token_counts(path, tmp_path / "c.npz")
    assert list(assets.seen_token_ids(out)) == [0, 5, 50256]


def test_missing_asset_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m playground.assets"):
        assets.load_token_counts(tmp_path / "nope.npz")


def test_seen_ids_are_a_small_part_of_the_vocabulary():
    seen = assets.seen_token_ids()
    # Shakespeare uses a fraction of GPT-2's 50257 tokens; common English words are in it.
    from model import get_tokenizer

    enc = get_tokenizer()
    for word in (" king", " queen", " the", "ROM"):
        assert enc.encode(word)[0] in set(seen.tolist())
    assert 1_000 < seen.size < 50257
