"""Tokenization tab: text -> GPT-2 tokens (coloured spans, ids, counts) and ids -> text.

The seeds' example: ``tiktoken.get_encoding("gpt2").encode("hello everyone") == [31373, 2506]``,
pieces ``['hello', ' everyone']``. A token is a byte sequence; one character can span several
tokens (emoji, CJK), so the coloured view groups tokens into spans of whole characters and
lists every id of a span in its label.
"""

from __future__ import annotations

import hashlib
import html
import os
import tempfile
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import tiktoken

from model.tokenizer import EOT, RANKS_PATH, RANKS_SHA256

from . import limits
from .plots import PALETTE
from .resources import get_encoding
from .tokens import encode, token_text, visible_whitespace
from .validation import InputError, parse_int_list, validate_bool, validate_text, validate_token_ids

__all__ = [
    "EXAMPLES",
    "TokenInfo",
    "Span",
    "TokenizationResult",
    "DecodeResult",
    "EncodingComparison",
    "tokenize",
    "decode_ids",
    "compare_encodings",
]

# The seeds' examples (001: tokenization section, embedding layer section).
EXAMPLES = ("hello everyone", "Hi my name is Moussa", "Attention isallyou need")


def _shown(text: str, show_whitespace: bool) -> str:
    """A span as the coloured view draws it: whitespace visible when the switch is on (its
    line breaks kept, so the text keeps its lines)."""
    return visible_whitespace(text, keep_line_breaks=True) if show_whitespace else text


@dataclass(frozen=True)
class TokenInfo:
    """One token: its id, its bytes and those bytes decoded (U+FFFD where not valid UTF-8 alone)."""

    index: int
    id: int
    text: str
    bytes_hex: str
    special: bool

    @property
    def complete(self) -> bool:
        """Whether the token's bytes are whole UTF-8 characters on their own."""
        return "\ufffd" not in self.text


@dataclass(frozen=True)
class Span:
    """A run of the input's characters and the token(s) that encode it."""

    text: str
    ids: tuple[int, ...]
    special: bool

    @property
    def label(self) -> str:
        return " ".join(map(str, self.ids))


@dataclass(frozen=True)
class TokenizationResult:
    text: str
    ids: list[int]
    tokens: list[TokenInfo]
    spans: list[Span]
    n_tokens: int
    n_characters: int
    n_bytes: int
    chars_per_token: float
    special_as_token: bool
    show_whitespace: bool
    notice: str
    highlighted: list[tuple[str, str]] = field(repr=False)  # (span text, label) for gr.HighlightedText
    html: str = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the API answer)."""
        return {
            "ids": self.ids,
            "tokens": [{"id": t.id, "text": t.text, "bytes": t.bytes_hex, "special": t.special} for t in self.tokens],
            "n_tokens": self.n_tokens,
            "n_characters": self.n_characters,
            "n_bytes": self.n_bytes,
            "chars_per_token": self.chars_per_token,
            "special_tokens": "one token" if self.special_as_token else "plain text",
            "notice": self.notice,
        }


def _token_infos(enc: tiktoken.Encoding, ids: list[int]) -> list[TokenInfo]:
    special_ids = {enc.eot_token}
    out = []
    for i, tid in enumerate(ids):
        out.append(TokenInfo(i, tid, token_text(tid), enc.decode_single_token_bytes(tid).hex(" "), tid in special_ids))
    return out


def _spans(enc: tiktoken.Encoding, ids: list[int]) -> list[Span]:
    """Group tokens into spans of whole characters (tokens splitting a character share one span)."""
    text, offsets = enc.decode_with_offsets(ids)
    groups: list[list[int]] = []
    for i, off in enumerate(offsets):
        if groups and offsets[groups[-1][0]] == off:
            groups[-1].append(i)
        else:
            groups.append([i])
    spans = []
    for g, members in enumerate(groups):
        start = offsets[members[0]]
        end = offsets[groups[g + 1][0]] if g + 1 < len(groups) else len(text)
        tids = tuple(ids[i] for i in members)
        spans.append(Span(text[start:end], tids, any(t == enc.eot_token for t in tids)))
    return spans


def _html(spans: list[Span], tokens_by_span: list[list[TokenInfo]], show_whitespace: bool) -> str:
    """Coloured spans as HTML; every user character is escaped, the id is in the hover title."""
    parts = []
    for k, (span, toks) in enumerate(zip(spans, tokens_by_span)):
        shown = _shown(span.text, show_whitespace)
        title = "; ".join(f"id {t.id} · bytes {t.bytes_hex}" for t in toks)
        style = "background:#111827;color:#f9fafb" if span.special else f"background:{PALETTE[k % len(PALETTE)]};color:#111827"
        parts.append(
            f'<span class="gpt-token" data-ids="{span.label}" title="{html.escape(title, quote=True)}" '
            f'style="{style};border-radius:3px;padding:1px 0">{html.escape(shown)}</span>'
        )
    return (
        '<div class="gpt-tokens" style="white-space:pre-wrap;word-break:break-word;'
        'font-family:ui-monospace,monospace;line-height:1.9">' + "".join(parts) + "</div>"
    )


def tokenize(text: Any, special_as_token: Any = True, show_whitespace: Any = False) -> TokenizationResult:
    """Encode ``text`` with GPT-2's tokenizer.

    ``special_as_token``: ``<|endoftext|>`` in the text becomes the one special token 50256
    (True) or is tokenized as the plain characters it is made of (False).
    ``show_whitespace``: spaces/tabs/newlines drawn as ⋅ → ↵ in the coloured view.
    Empty text gives zero tokens and a notice (not an error: the box may be cleared).
    """
    text = validate_text(text, name="text", max_chars=limits.MAX_TEXT_CHARS, allow_empty=True)
    special_as_token = validate_bool(special_as_token, name="special tokens switch")
    show_whitespace = validate_bool(show_whitespace, name="show whitespace switch")
    enc = get_encoding()
    ids = encode(text, special=special_as_token)
    tokens = _token_infos(enc, ids)
    spans = _spans(enc, ids) if ids else []
    by_span, i = [], 0
    for span in spans:
        by_span.append(tokens[i : i + len(span.ids)])
        i += len(span.ids)

    notes = []
    if not text:
        notes.append("Empty text: nothing to tokenize.")
    elif not text.strip():  # legal (whitespace has tokens), but easy to send by mistake
        notes.append(
            f"The text is only whitespace: its {len(ids)} token{'s' if len(ids) != 1 else ''} are spaces, "
            "tabs or newlines (switch on visible whitespace to see them)."
        )
    n_eot = text.count(EOT)
    if n_eot:
        notes.append(
            f"{EOT} appears {n_eot}× and is encoded as the single special token {enc.eot_token}"
            if special_as_token
            else f"{EOT} appears {n_eot}× and is encoded as plain text (ordinary tokens for <, |, endoftext...), not as the special token {enc.eot_token}"
        )
    if any(not t.complete for t in tokens):
        notes.append("Some tokens hold only part of a character's UTF-8 bytes; they share one coloured span.")
    return TokenizationResult(
        text=text,
        ids=ids,
        tokens=tokens,
        spans=spans,
        n_tokens=len(ids),
        n_characters=len(text),
        n_bytes=len(text.encode("utf-8")),
        chars_per_token=round(len(text) / len(ids), 3) if ids else 0.0,
        special_as_token=special_as_token,
        show_whitespace=show_whitespace,
        notice=" ".join(notes),
        highlighted=[(_shown(s.text, show_whitespace), s.label) for s in spans],
        html=_html(spans, by_span, show_whitespace),
    )


@dataclass(frozen=True)
class DecodeResult:
    ids: list[int]
    text: str
    tokens: list[TokenInfo]
    notice: str

    def to_dict(self) -> dict[str, Any]:
        return {"ids": self.ids, "text": self.text, "tokens": [asdict(t) for t in self.tokens], "notice": self.notice}


def decode_ids(ids: Any) -> DecodeResult:
    """Decode token ids, given as a list of ints or typed text such as ``"31373, 2506"``.

    Ids must be whole numbers in [0, 50256]; anything else raises :class:`InputError` naming the
    offending item. Bytes that are not valid UTF-8 on their own (a sequence cut mid-character)
    decode to U+FFFD, and the notice says so.
    """
    enc = get_encoding()
    if isinstance(ids, str):
        ids = parse_int_list(ids, name="token ids", max_chars=limits.MAX_IDS_TEXT_CHARS, max_count=limits.MAX_IDS)
    ids = validate_token_ids(ids, vocab_size=enc.n_vocab, max_count=limits.MAX_IDS)
    if not ids:
        raise InputError("token ids: the list is empty; type ids separated by commas, e.g. 31373, 2506")
    raw = enc.decode_bytes(ids)
    notes = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        notes.append("These ids do not form valid UTF-8 (a character is cut); the broken bytes are shown as �.")
    if enc.eot_token in ids:
        notes.append(f"{enc.eot_token} is the special token {EOT} (end of a document in training).")
    return DecodeResult(ids, text, _token_infos(enc, ids), " ".join(notes))


# --- Other tiktoken encodings, only where their files are on this machine -----------------------

# name -> (ranks file URL tiktoken fetches, its sha256), from tiktoken_ext/openai_public.py.
_OTHER_ENCODINGS = {
    "r50k_base": ("https://openaipublic.blob.core.windows.net/encodings/r50k_base.tiktoken", RANKS_SHA256),
    "p50k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
        "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


@dataclass(frozen=True)
class EncodingComparison:
    name: str
    available: bool
    ids: list[int]
    n_tokens: int | None
    note: str


# Why this reads tiktoken's cache rule rather than a public API: every public loader
# (``tiktoken.get_encoding``, ``tiktoken.load.load_tiktoken_bpe(url)``) downloads a ranks file that
# is not cached, and a cached file whose hash is wrong is deleted and downloaded again; tiktoken has
# no offline-only mode and no function that says whether a file is cached. The app must never reach
# the network, so it looks for the file where tiktoken keeps it (tiktoken/load.py,
# ``read_file_cached``: $TIKTOKEN_CACHE_DIR or $DATA_GYM_CACHE_DIR or <tmp>/data-gym-cache, named by
# the SHA-1 of the URL), checks its hash, and only then lets ``tiktoken.get_encoding`` load it.
def _tiktoken_cache_file(url: str) -> Path | None:
    """Where tiktoken caches ``url``, or None if its caching is off."""
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir == "":
        return None
    cache_dir = cache_dir or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()


@lru_cache(maxsize=None)
def _offline_encoding(name: str) -> tuple[tiktoken.Encoding | None, str]:
    """The encoding if its ranks file is already on disk with the right hash; never downloads."""
    url, sha256 = _OTHER_ENCODINGS[name]
    if sha256 == RANKS_SHA256:
        # r50k_base is GPT-2's encoding under another name (tiktoken_ext/openai_public.py gives
        # both the same ranks file, pattern and <|endoftext|>): the one we ship gives its tokens.
        return get_encoding(), f"same ranks file as gpt2 ({RANKS_PATH.name}), so the same tokens"
    path = _tiktoken_cache_file(url)
    if path is None or not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        return None, "not available offline: its ranks file is not on this machine (tiktoken would download it)"
    return tiktoken.get_encoding(name), "from tiktoken's local cache"


def compare_encodings(text: Any, special_as_token: Any = True) -> list[EncodingComparison]:
    """Token counts of ``text`` under other tiktoken encodings, for those available offline;
    the others are listed with a plain note that they are not available."""
    text = validate_text(text, name="text", max_chars=limits.MAX_TEXT_CHARS, allow_empty=True)
    special_as_token = validate_bool(special_as_token, name="special tokens switch")
    out = []
    for name in _OTHER_ENCODINGS:
        enc, note = _offline_encoding(name)
        if enc is None:
            out.append(EncodingComparison(name, False, [], None, note))
            continue
        ids = enc.encode(text, allowed_special={EOT} if special_as_token else set(), disallowed_special=())
        out.append(EncodingComparison(name, True, ids, len(ids), note))
    return out
