"""GPT-2 tokens as every tab shows them: text to ids, one id to its text, whitespace made visible.

A token is a byte sequence; alone it may hold only part of a character's UTF-8 bytes (emoji,
CJK), which shows as U+FFFD (�). Whitespace is drawn with tiktokenizer's symbols, the same in
every tab: space ⋅, tab →, newline ↵ (carriage return ␍).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from model.tokenizer import EOT

from .resources import get_encoding
from .validation import InputError, validate_text

__all__ = [
    "VISIBLE_WHITESPACE",
    "encode",
    "encode_prompt",
    "decode",
    "token_text",
    "visible_whitespace",
    "visible_token",
    "token_label",
    "token_labels",
]

VISIBLE_WHITESPACE = {" ": "⋅", "\t": "→", "\n": "↵", "\r": "␍"}
_KEEP_BREAKS = {**VISIBLE_WHITESPACE, "\n": "↵\n"}
LABEL_CHARS = 16  # a figure's tick label keeps at most this many characters


def encode(text: str, *, special: bool = True) -> list[int]:
    """GPT-2's ids for ``text``. ``special``: ``<|endoftext|>`` in the text is the one special
    token 50256 (True) or the plain characters it is made of (False)."""
    return get_encoding().encode(text, allowed_special={EOT} if special else set(), disallowed_special=())


def encode_prompt(text: Any, *, name: str, max_chars: int, max_tokens: int) -> list[int]:
    """Validate ``text`` and encode it (``<|endoftext|>`` as the special token) to at most
    ``max_tokens`` ids; longer text raises :class:`InputError` saying how long it was."""
    ids = encode(validate_text(text, name=name, max_chars=max_chars))
    if len(ids) > max_tokens:
        raise InputError(f"{name} is {len(ids)} tokens long; the limit here is {max_tokens} tokens")
    return ids


def decode(ids: list[int]) -> str:
    """The text of a sequence of ids, decoded as a whole (multi-byte characters split across
    tokens come out right; bytes that are still not valid UTF-8 show as �)."""
    return get_encoding().decode(ids, errors="replace")


@lru_cache(maxsize=None)  # at most one entry per id of the vocabulary
def token_text(token_id: int) -> str:
    """The text of one token decoded alone (a partial UTF-8 character shows as �)."""
    return get_encoding().decode_single_token_bytes(token_id).decode("utf-8", errors="replace")


def visible_whitespace(text: str, *, keep_line_breaks: bool = False) -> str:
    """``text`` with spaces, tabs and line breaks drawn as ⋅ → ↵ (␍ for a carriage return).
    ``keep_line_breaks``: a newline stays after its ↵, so a multi-line text keeps its lines."""
    symbols = _KEEP_BREAKS if keep_line_breaks else VISIBLE_WHITESPACE
    return "".join(symbols.get(ch, ch) for ch in text)


def visible_token(token_id: int) -> str:
    """One token's text on one line, its whitespace visible (`` king`` → ``⋅king``)."""
    return visible_whitespace(token_text(token_id))


def token_label(token_id: int) -> str:
    """:func:`visible_token` cut to a short label for a figure's axis."""
    text = visible_token(token_id)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def token_labels(ids: list[int]) -> list[str]:
    return [token_label(i) for i in ids]
