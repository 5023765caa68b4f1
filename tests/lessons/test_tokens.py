"""The token helpers every tab shares (playground/tokens.py): one id to its text, whitespace
made visible with one set of symbols, prompts encoded within a limit; and every tab showing
whitespace the same way."""

from __future__ import annotations

import pytest

from playground import tokens
from playground.tokens import (
    decode,
    encode,
    encode_prompt,
    token_label,
    token_labels,
    token_text,
    visible_token,
    visible_whitespace,
)
from playground.validation import InputError


def test_one_id_to_its_text():
    assert [token_text(i) for i in (31373, 2506)] == ["hello", " everyone"]  # the Transformer tutorial
    assert token_text(50256) == "<|endoftext|>"
    assert token_text(198) == "\n"


def test_a_partial_character_shows_as_the_replacement_character():
    ids = encode("🎭")
    assert len(ids) > 1  # one emoji, several byte-level tokens
    assert all(token_text(i) == "\ufffd" for i in ids)  # none is a whole character alone
    assert decode(ids) == "🎭"  # decoded together they are


def test_token_text_is_cached():
    token_text.cache_clear()
    token_text(31373)
    token_text(31373)
    info = token_text.cache_info()
    assert (info.hits, info.misses) == (1, 1)


def test_visible_whitespace_uses_tiktokenizers_symbols():
    assert tokens.VISIBLE_WHITESPACE == {" ": "⋅", "\t": "→", "\n": "↵", "\r": "␍"}
    assert visible_whitespace("a b\tc\r\nd") == "a⋅b→c␍↵d"
    assert visible_whitespace("a b\nc", keep_line_breaks=True) == "a⋅b↵\nc"
    assert visible_whitespace("already ↵ here") == "already⋅↵⋅here"  # a typed ↵ is not a line break


def test_visible_token_and_labels():
    assert visible_token(2506) == "⋅everyone"
    assert token_labels([31373, 2506, 198]) == ["hello", "⋅everyone", "↵"]
    long_id = next(i for i in range(50000) if len(visible_token(i)) > 16)
    assert len(token_label(long_id)) == 16 and token_label(long_id).endswith("…")


def test_encode_special_switch():
    assert encode("<|endoftext|>") == [50256]
    assert 50256 not in encode("<|endoftext|>", special=False)
    assert decode(encode("<|endoftext|>", special=False)) == "<|endoftext|>"


def test_encode_prompt_limit():
    assert encode_prompt("hello everyone", name="prompt", max_chars=100, max_tokens=2) == [31373, 2506]
    with pytest.raises(InputError, match="prompt is 3 tokens long; the limit here is 2"):
        encode_prompt("hello everyone hi", name="prompt", max_chars=100, max_tokens=2)
    with pytest.raises(InputError, match="prompt is empty"):
        encode_prompt("  ", name="prompt", max_chars=100, max_tokens=2)


# --- every tab shows whitespace the same way -----------------------------------------------------

TEXT = "to be\tor\nnot"  # " be", "\t", "\n": a space, a tab and a newline in the tokens


def test_tokenization_tab_symbols():
    from playground.tokenization import tokenize

    html = tokenize(TEXT, show_whitespace=True).html
    assert "⋅be" in html and "→" in html and "↵" in html


def test_embeddings_tab_symbols():
    from playground.embeddings import embedding_arithmetic, word_vector

    assert word_vector("king").pieces == ["⋅king"]
    r = embedding_arithmetic("queen", top_k=3, exclude_inputs=False)
    assert r.neighbours[0].token == "⋅queen"


def test_attention_tab_symbols():
    from playground.attention import attention

    r = attention(TEXT, 0, 0)
    assert r.tokens == [visible_token(i) for i in r.ids]
    assert "⋅be" in r.tokens and "↵" in "".join(r.tokens) and "→" in "".join(r.tokens)


def test_generation_tab_symbols():
    from playground.generation.figures import candidates_figure
    from playground.generation.state import GeneratedStep, TokenChoice

    be, newline = encode(" be")[0], 198
    chosen = TokenChoice(be, token_text(be), 0.6, 0.7)
    step = GeneratedStep(0, chosen, [chosen, TokenChoice(newline, token_text(newline), 0.3, 0.3)])
    fig = candidates_figure(step)
    assert set(fig.data[0].y) == {f"⋅be  #{be}", f"↵  #{newline}"}
    assert "“⋅be”" in fig.layout.title.text
