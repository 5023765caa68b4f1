"""Tokenization tab: text -> GPT-2 tokens (coloured spans, ids, counts) and ids -> text.

The Transformer tutorial's example: ``tiktoken.get_encoding("gpt2").encode("hello everyone") == [31373, 2506]``,
pieces ``['hello', ' everyone']``. A token is a byte sequence; one character can span several
tokens (emoji, CJK), so the coloured view groups tokens into spans of whole characters and
lists every id of a span in its label.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
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
    "EXAMPLE_LABELS",
    "MAX_COLOURED_TOKENS",
    "TokenInfo",
    "Span",
    "TokenizationResult",
    "DecodeResult",
    "EncodingComparison",
    "tokenize",
    "decode_ids",
    "compare_encodings",
    "OTHER_ENCODINGS",
]

# The Transformer tutorial's examples (its tokenization and embedding layer sections); the third is
# its example of words glued together, which splitting on spaces would get wrong.
EXAMPLES = ("hello everyone", "Hi my name is Moussa", "Attention isallyou need")
EXAMPLE_LABELS = ("hello everyone", "Hi my name is Moussa", "glued words: “Attention isallyou need”")
# The coloured view colours this many tokens and shows the rest of a long text plain (the counts
# and ids always cover the whole text): past a few thousand spans the page only gets slower.
MAX_COLOURED_TOKENS = 4_000


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


def _tokens_by_span(tokens: list[TokenInfo], spans: list[Span]) -> list[list[TokenInfo]]:
    """The tokens of each span, in order (spans partition the token list)."""
    out, i = [], 0
    for span in spans:
        out.append(tokens[i : i + len(span.ids)])
        i += len(span.ids)
    return out


def _html(spans: list[Span], tokens_by_span: list[list[TokenInfo]], show_whitespace: bool) -> str:
    """Coloured spans as HTML, each with its id under it; every user character is escaped.

    Kept light, because a long text has tens of thousands of spans and the page's time goes into
    the HTML's size: colours are set by the page's CSS from ``data-c`` (0..7, ``s`` special), the
    hover gives the id, and a token's bytes only where they are not whole characters. Past
    ``MAX_COLOURED_TOKENS`` the rest of the text is shown uncoloured."""
    parts, n_tokens = [], 0
    for k, (span, toks) in enumerate(zip(spans, tokens_by_span)):
        if n_tokens >= MAX_COLOURED_TOKENS:
            rest = "".join(s.text for s in spans[k:])
            parts.append(f'<span class="gpt-rest">{html.escape(_shown(rest, show_whitespace))}</span>')
            break
        n_tokens += len(toks)
        shown = html.escape(_shown(span.text, show_whitespace))
        ids = " ".join(str(t.id) for t in toks)
        title = f"id {ids}" if len(toks) == 1 else f"ids {ids}"
        if any(not t.complete for t in toks):
            title += " · bytes " + " | ".join(t.bytes_hex for t in toks)
        colour = "s" if span.special else k % len(PALETTE)
        # The id written under its token (as tiktokenizer pairs them); the tip (hover, or a tap,
        # which focuses the span) repeats it with the bytes of a token that is not whole characters.
        parts.append(f'<span class="gpt-token" data-c="{colour}" tabindex="0" data-tip="{html.escape(title, quote=True)}">'
                     f'{shown}<sub class="gpt-id">{ids}</sub></span>')
    return '<div class="gpt-tokens">' + "".join(parts) + "</div>"


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
    by_span = _tokens_by_span(tokens, spans)

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
            f"{EOT} appears {n_eot}× and is encoded as the single special token {enc.eot_token}."
            if special_as_token
            else f"{EOT} appears {n_eot}× and is encoded as plain text (ordinary tokens for <, |, endoftext...), not as the special token {enc.eot_token}."
        )
    if any(not t.complete for t in tokens):
        notes.append("Some tokens hold only part of a character's UTF-8 bytes; they share one coloured span.")
    if len(ids) > MAX_COLOURED_TOKENS:
        notes.append(
            f"The first {MAX_COLOURED_TOKENS:,} tokens are coloured, the rest of the text is shown plain; "
            "the counts and ids cover all of it."
        )
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


# --- Other tiktoken encodings, side by side (vendored ranks files, model/encodings.py) -----------

# The order of the comparison: GPT-2's family first, then the newer, larger vocabularies.
OTHER_ENCODINGS = ("r50k_base", "p50k_base", "cl100k_base", "o200k_base")


@dataclass(frozen=True)
class EncodingComparison:
    """``text`` under one tiktoken encoding: its ids, the text of each token, coloured spans."""

    name: str
    used_by: str
    available: bool
    ids: list[int]
    n_tokens: int | None
    pieces: list[str]
    note: str
    html: str = field(default="", repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "encoding": self.name,
            "used_by": self.used_by,
            "n_tokens": self.n_tokens,
            "ids": self.ids,
            "pieces": self.pieces,
            "note": self.note,
        }


def _generic_token_infos(enc: tiktoken.Encoding, ids: list[int]) -> list[TokenInfo]:
    special = set(enc.special_tokens_set)
    out = []
    for i, tid in enumerate(ids):
        raw = enc.decode_single_token_bytes(tid)
        out.append(TokenInfo(i, tid, raw.decode("utf-8", errors="replace"), raw.hex(" "), raw.decode("utf-8", "replace") in special))
    return out


def _comparison(
    name: str, enc: tiktoken.Encoding, text: str, special_as_token: bool, used_by: str, note: str, with_html: bool
) -> EncodingComparison:
    eot = {EOT} & set(enc.special_tokens_set)
    ids = enc.encode(text, allowed_special=eot if special_as_token else set(), disallowed_special=())
    if not with_html:  # the API's answer: the pieces alone, in one call of tiktoken's
        pieces = [raw.decode("utf-8", errors="replace") for raw in enc.decode_tokens_bytes(ids)]
        return EncodingComparison(name, used_by, True, ids, len(ids), pieces, note)
    tokens = _generic_token_infos(enc, ids)
    spans = _spans(enc, ids) if ids else []
    shown = _html(spans, _tokens_by_span(tokens, spans), show_whitespace=True)
    return EncodingComparison(name, used_by, True, ids, len(ids), [t.text for t in tokens], note, shown)


def compare_encodings(
    text: Any, special_as_token: Any = True, include_gpt2: bool = False, with_html: bool = True
) -> list[EncodingComparison]:
    """``text`` under OpenAI's other tiktoken encodings (r50k, p50k, cl100k, o200k), each from its
    ranks file vendored in model/ranks/ (sha256 checked at load, never the network): token counts,
    ids, the text of every token and coloured spans. ``include_gpt2`` puts this model's own
    encoding first; ``with_html=False`` leaves out the coloured spans. A file that is missing or corrupt is listed as unavailable with a note naming
    the command that restores it; the others are still compared."""
    from model.encodings import ENCODINGS, get_encoding as get_other_encoding

    text = validate_text(text, name="text", max_chars=limits.MAX_TEXT_CHARS, allow_empty=True)
    special_as_token = validate_bool(special_as_token, name="special tokens switch")
    out = []
    if include_gpt2:
        out.append(_comparison("gpt2", get_encoding(), text, special_as_token, "this playground's model, GPT-2", f"model/{RANKS_PATH.name}", with_html))
    for name in OTHER_ENCODINGS:
        spec = ENCODINGS[name]
        try:
            enc = get_other_encoding(name)
        except FileNotFoundError:
            note = f"not available: model/ranks/{spec.path.name} is missing; restore it with `git checkout model/ranks` or `python -m model.encodings`"
            out.append(EncodingComparison(name, spec.used_by, False, [], None, [], note))
            continue
        except (OSError, ValueError):  # tiktoken's sha256 check failed: a corrupt or truncated file
            note = f"not available: model/ranks/{spec.path.name} is corrupt (sha256 is not tiktoken's); restore it with `git checkout model/ranks` or `python -m model.encodings`"
            out.append(EncodingComparison(name, spec.used_by, False, [], None, [], note))
            continue
        note = f"same ranks file as gpt2 ({RANKS_PATH.name}), so the same tokens" if spec.sha256 == RANKS_SHA256 else f"model/ranks/{spec.path.name}"
        out.append(_comparison(name, enc, text, special_as_token, spec.used_by, note, with_html))
    return out
