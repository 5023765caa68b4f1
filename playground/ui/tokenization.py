"""Tokenization tab: text -> coloured tokens, ids and counts (live, as you type), other
encodings side by side, and ids -> text. Registers the ``/tokenize`` API endpoint."""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

from .. import tokenization as tok
from .common import LIGHT, LIGHT_CONCURRENCY, user_errors
from .widgets import note, text_with_examples, with_notice


def _counts(r: tok.TokenizationResult) -> str:
    return (
        f'<div class="pg-cards">'
        f'<div class="pg-card"><b>{r.n_tokens:,}</b><span>tokens</span></div>'
        f'<div class="pg-card"><b>{r.n_characters:,}</b><span>characters</span></div>'
        f'<div class="pg-card"><b>{r.chars_per_token:g}</b><span>characters / token</span></div>'
        f'<div class="pg-card"><b>{r.n_bytes:,}</b><span>UTF-8 bytes</span></div>'
        f"</div>"
    )


# Splits drawn for texts up to this long (five coloured copies of 20,000 characters would be
# megabytes of HTML per keystroke); longer texts get the counts only.
SPLITS_MAX_CHARS = 2_000


def _encodings_html(comparisons: list[tok.EncodingComparison], text_chars: int = 0) -> str:
    """Each encoding's split of the text as coloured spans, one block per encoding."""
    if text_chars > SPLITS_MAX_CHARS:
        return (
            f'<div id="tok-enc-splits"><i>The splits are drawn for texts up to {SPLITS_MAX_CHARS:,} characters '
            f"(this one has {text_chars:,}); the table above counts every encoding's tokens.</i></div>"
        )
    rows = []
    for c in comparisons:
        body = c.html if c.available else f"<i>{html.escape(c.note)}</i>"
        count = f"{c.n_tokens:,} tokens" if c.available else "–"
        rows.append(
            f'<div class="pg-enc" data-encoding="{c.name}" style="margin:6px 0">'
            f"<b>{c.name}</b> · {count} · <small>{html.escape(c.used_by)}</small>{body}</div>"
        )
    return '<div id="tok-enc-splits">' + "".join(rows) + "</div>"


def ui_tokenize(text, special_as_token, show_whitespace):
    r = tok.tokenize(text, special_as_token, show_whitespace)
    draw = r.n_characters <= SPLITS_MAX_CHARS
    comparisons = tok.compare_encodings(text, special_as_token, include_gpt2=True, with_html=draw)
    comparison = [[c.name, c.used_by, f"{c.n_tokens:,}" if c.available else "–", c.note] for c in comparisons]
    return _counts(r), r.html, str(r.ids), with_notice("", r.notice, sep=""), comparison, _encodings_html(comparisons, r.n_characters)


def ui_decode(ids_text):
    r = tok.decode_ids(ids_text)
    return r.text, with_notice("", r.notice, sep="")


def api_tokenize(text: str) -> dict:
    """Tokenize text with GPT-2's tokenizer (`<|endoftext|>` counts as the one special token
    50256). Returns `ids`, `tokens` (id, text, UTF-8 bytes in hex, special), `n_tokens`,
    `n_characters`, `n_bytes`, `chars_per_token` and a `notice`. Text: up to 20,000 characters."""
    return tok.tokenize(text).to_dict()


def api_tokenize_encodings(text: str) -> dict:
    """Tokenize text with GPT-2's tokenizer and OpenAI's other tiktoken encodings (r50k_base,
    p50k_base, cl100k_base, o200k_base; ranks files shipped with the app, checked by sha256).
    Returns `encodings`: one entry per encoding with `encoding`, `used_by`, `n_tokens`, `ids`,
    `pieces` (the text of each token) and a `note`. Text: up to 20,000 characters."""
    return {"encodings": [c.to_dict() for c in tok.compare_encodings(text, True, include_gpt2=True)]}


def build() -> None:
    note(
        "A GPT never sees letters: text is cut into **tokens** by byte-pair encoding (GPT-2's 50,257 "
        "tokens), and each token becomes an **id**. Common words are one token, often with their "
        "leading space (` everyone`); rare words split into pieces.",
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320):
            text = text_with_examples(
                tok.EXAMPLES, label="Text", examples_label="Examples from the seeds", lines=6, max_lines=20, elem_id="tok-text"
            )
            with gr.Row():
                show_ws = gr.Checkbox(label="Show whitespace (⋅ → ↵)", value=False, elem_id="tok-ws")
                special = gr.Checkbox(label="<|endoftext|> is one special token", value=True, elem_id="tok-special")
            run = gr.Button("Tokenize", variant="primary", elem_id="tok-run")
        first = ui_tokenize(tok.EXAMPLES[0], True, False)  # the page opens already tokenized
        with gr.Column(scale=1, min_width=320):
            counts = gr.HTML(first[0], elem_id="tok-counts")
            spans = gr.HTML(first[1], label="Tokens", elem_id="tok-spans")
            ids = gr.Textbox(first[2], label="Token ids", interactive=False, buttons=["copy"], elem_id="tok-ids", lines=2)
            notice = note(first[3])
    compare = gr.Dataframe(
        first[4],
        headers=["encoding", "used by", "tokens", "ranks file"],
        label="The same text in other tiktoken encodings: newer, larger vocabularies need fewer tokens",
        interactive=False,
        wrap=True,
        elem_id="tok-compare",
    )
    with gr.Accordion("How each encoding splits the text", open=False):
        enc_splits = gr.HTML(first[5], elem_id="tok-enc-splits-box")
    with gr.Accordion("Ids → text", open=True):
        with gr.Row(equal_height=False):
            with gr.Column(scale=1):
                ids_in = gr.Textbox(label="Token ids (commas or spaces)", value="31373, 2506", elem_id="dec-ids")
                decode = gr.Button("Decode", elem_id="dec-run")
            with gr.Column(scale=1):
                decoded = gr.Textbox(label="Decoded text", interactive=False, elem_id="dec-text")
                decode_notice = note()

    inputs, outputs = [text, special, show_ws], [counts, spans, ids, notice, compare]
    common: dict[str, Any] = dict(
        api_visibility="private", concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY, show_progress="hidden"
    )
    for trigger in (run.click, text.change, special.change, show_ws.change):
        trigger(user_errors(ui_tokenize), inputs, outputs, trigger_mode="always_last", **common)
    gr.on([decode.click, ids_in.submit], user_errors(ui_decode), [ids_in], [decoded, decode_notice], **common)
    gr.api(user_errors(api_tokenize), api_name="tokenize", concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY)
    gr.api(
        user_errors(api_tokenize_encodings),
        api_name="tokenize_encodings",
        concurrency_id=LIGHT,
        concurrency_limit=LIGHT_CONCURRENCY,
    )
