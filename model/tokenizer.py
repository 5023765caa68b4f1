"""GPT-2's byte-pair encoding through tiktoken, built offline from a ranks file in this package."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import tiktoken
from tiktoken.load import load_tiktoken_bpe

RANKS_PATH = Path(__file__).with_name("gpt2.tiktoken")
# The hash tiktoken itself checks for r50k_base/gpt2 (tiktoken_ext/openai_public.py).
RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
# GPT-2's pre-tokenizer: contractions, letters, numbers, other symbols, whitespace.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
EOT = "<|endoftext|>"
EOT_ID = 50256


@lru_cache(maxsize=1)
def get_tokenizer() -> tiktoken.Encoding:
    """tiktoken's ``gpt2`` encoding, with no network access (the ranks file is checked by sha256)."""
    ranks = load_tiktoken_bpe(str(RANKS_PATH), expected_hash=RANKS_SHA256)
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={EOT: EOT_ID},
        explicit_n_vocab=50257,
    )
