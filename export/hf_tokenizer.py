"""GPT-2's tokenizer as Hugging Face ``tokenizers`` files, built offline from ``model/gpt2.tiktoken``.

tiktoken stores only each token's bytes and rank; ``tokenizer.json`` needs a vocabulary of
printable strings and the ordered list of merges. Both come from the ranks:

- GPT-2's byte-level alphabet maps every byte to a printable character (``bytes_to_unicode``),
  so a token's vocabulary entry is its bytes in that alphabet, with its rank as id;
- a token of rank r is the merge of the two parts that byte-pair encoding with ranks below r
  leaves of its bytes (as transformers' ``TikTokenConverter`` recovers them), and merges apply
  in rank order.

The result tokenizes exactly as tiktoken does (tests/export/test_hf_tokenizer.py checks long, varied
text). Needs only the standard library and tiktoken: the app's requirements have no transformers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from model.tokenizer import EOT, EOT_ID, RANKS_PATH, RANKS_SHA256

# <|endoftext|> as tokenizers writes an added special token. (The pre-tokenizer needs no pattern
# of ours: ByteLevel's use_regex applies GPT-2's own, the one tiktoken's r50k uses.)
SPECIAL = {"content": EOT, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable unicode characters (openai/gpt-2 encoder.py)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars)))


def _load_ranks() -> dict[bytes, int]:
    from tiktoken.load import load_tiktoken_bpe

    return load_tiktoken_bpe(str(RANKS_PATH), expected_hash=RANKS_SHA256)


def _split(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """Byte-pair encode ``token`` using only merges of rank below ``max_rank``."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while True:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < max_rank and (best_rank is None or rank < best_rank):
                best, best_rank = i, rank
        if best is None:
            return parts
        parts[best : best + 2] = [parts[best] + parts[best + 1]]


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[list[str]]]:
    byte_char = bytes_to_unicode()
    text = lambda b: "".join(byte_char[x] for x in b)  # noqa: E731
    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = _split(ranks, token, rank)
        if len(parts) != 2:
            raise ValueError(f"token {token!r} (rank {rank}) is not one merge of lower-ranked tokens")
        merges.append([text(parts[0]), text(parts[1])])
    return vocab, merges


def tokenizer_json() -> dict:
    """The ``tokenizer.json`` document: byte-level BPE, GPT-2's regex, <|endoftext|> special."""
    vocab, merges = vocab_and_merges(_load_ranks())
    vocab[EOT] = EOT_ID
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": EOT_ID, **SPECIAL}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **byte_level},
        "post_processor": {"type": "ByteLevel", **byte_level, "trim_offsets": False},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def tokenizer_config(model_max_length: int) -> dict:
    """``tokenizer_config.json``: GPT-2's special tokens, left padding for batched generation."""
    return {
        "tokenizer_class": "GPT2Tokenizer",
        "add_bos_token": False,
        "add_prefix_space": False,
        "bos_token": EOT,
        "eos_token": EOT,
        "unk_token": EOT,
        "pad_token": EOT,  # GPT-2 has none; padded positions are masked out anyway
        "padding_side": "left",  # a batch of prompts ends together, so each row continues its own text
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,  # decoding gives back exactly the encoded text
        "added_tokens_decoder": {str(EOT_ID): SPECIAL},
    }


def special_tokens_map() -> dict:
    token = {k: SPECIAL[k] for k in ("content", "single_word", "lstrip", "rstrip", "normalized")}
    return {"bos_token": token, "eos_token": token, "unk_token": token, "pad_token": token}


def write_tokenizer(folder: Path, model_max_length: int) -> list[Path]:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "tokenizer.json": tokenizer_json(),
        "tokenizer_config.json": tokenizer_config(model_max_length),
        "special_tokens_map.json": special_tokens_map(),
    }
    paths = []
    for name, doc in files.items():
        path = folder / name
        path.write_text(json.dumps(doc, indent=2 if name != "tokenizer.json" else None, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
