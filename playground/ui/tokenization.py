"""Tokenization tab: text -> coloured tokens, ids and counts (live, as you type), other
encodings side by side, and ids -> text. Registers the ``/tokenize`` API endpoint."""

from __future__ import annotations

import html
import json
from typing import Any

import gradio as gr

from .. import limits
from ..lessons import LESSONS
from .. import tokenization as tok
from ..validation import InputError
from .common import LIGHT, LIGHT_CONCURRENCY, on_input, user_errors
from .widgets import RESULT, SECTION, cards_html, error_html, error_slot, next_tab, note, text_with_examples, with_notice

LESSON = LESSONS["tokenization"]


def _counts(r: tok.TokenizationResult) -> str:
    return cards_html([
        (f"{r.n_tokens:,}", "tokens"),
        (f"{r.n_characters:,}", "characters"),
        (f"{round(r.chars_per_token, 2):g}", "characters / token"),  # two decimals, as the static edition shows it
        (f"{r.n_bytes:,}", "UTF-8 bytes"),
    ])


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
            f'<div class="pg-enc" data-encoding="{c.name}">'
            f"<b>{c.name}</b> · {count} · <small>{html.escape(c.used_by)}</small>{body}</div>"
        )
    return '<div id="tok-enc-splits">' + "".join(rows) + "</div>"


def ui_tokenize(text, special_as_token, show_whitespace, typed_length=None):
    """``typed_length``: the text's length as the browser measured it. Past the limit the page
    sends an empty text and only that length (LENGTH_CHECK_JS), so a long paste is refused at
    once instead of travelling to the server and back."""
    if isinstance(typed_length, (int, float)) and typed_length > limits.MAX_TEXT_CHARS:
        raise InputError(_too_long(f"{int(typed_length):,}"))
    r = tok.tokenize(text, special_as_token, show_whitespace)
    draw = r.n_characters <= SPLITS_MAX_CHARS
    comparisons = tok.compare_encodings(text, special_as_token, include_gpt2=True, with_html=draw)
    comparison = [[c.name, c.used_by, f"{c.n_tokens:,}" if c.available else "–", c.note] for c in comparisons]
    return _counts(r), r.html, str(r.ids), with_notice("", r.notice, sep=""), comparison, _encodings_html(comparisons, r.n_characters)


def _too_long(n_chars: int | str) -> str:
    return f"text is {n_chars} characters long; the limit is {limits.MAX_TEXT_CHARS:,} characters"


# Runs in the browser before each request: a text over the limit is not sent, only its length,
# and the message shows at once (the server's, the same words, takes its place when it comes:
# the CSS hides the page's own while the slot holds the server's).
LENGTH_CHECK_JS = f"""
(text, special, whitespace, typed) => {{
  const n = (text || '').length, over = n > {limits.MAX_TEXT_CHARS};
  const slot = document.querySelector('#tok-error');
  if (slot) {{
    slot.querySelectorAll('.pg-local').forEach((e) => e.remove());
    if (over) {{
      const local = document.createElement('div');
      local.className = 'pg-local';
      local.innerHTML = {json.dumps(error_html("Invalid input", _too_long("{N}")))}.replace('{{N}}', n.toLocaleString('en-US'));
      slot.append(local);
    }}
  }}
  return over ? ['', special, whitespace, n] : [text, special, whitespace, n];
}}
"""


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
    return {"encodings": [c.to_dict() for c in tok.compare_encodings(text, True, include_gpt2=True, with_html=False)]}


def build() -> dict[str, gr.components.Component]:
    note(LESSON.intro)
    light: dict[str, Any] = dict(concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY, show_progress="hidden")
    first = ui_tokenize(tok.EXAMPLES[0], True, False)  # the page opens already tokenized
    with gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=320):
                # A fixed height (lines = max_lines): Gradio then skips its grow-as-you-type
                # resizing, two forced layouts of the whole text on every input event.
                text = text_with_examples(
                    tok.EXAMPLES, label="Text", examples_label="Examples from the lesson", lines=8, max_lines=8,
                    elem_id="tok-text", example_labels=list(tok.EXAMPLE_LABELS),
                    info=f"Up to {limits.MAX_TEXT_CHARS:,} characters; tokenized as you type.",
                )
                error = error_slot("tok-error")
                typed_length = gr.Number(None, visible=False)
                with gr.Row():
                    show_ws = gr.Checkbox(label="Show whitespace (⋅ → ↵)", value=False, elem_id="tok-ws")
                    special = gr.Checkbox(label="<|endoftext|> is one special token", value=True, elem_id="tok-special")
                # No Tokenize button: the text is tokenized as you type (a button beside that only
                # asked a learner whether typing was enough).
            with gr.Column(scale=1, min_width=320):
                counts = gr.HTML(first[0], elem_id="tok-counts", elem_classes=RESULT)
                spans = gr.HTML(first[1], label="Tokens", elem_id="tok-spans", elem_classes=RESULT)
                ids = gr.Textbox(
                    first[2], label="Token ids", interactive=False, buttons=["copy"], elem_id="tok-ids", lines=3, max_lines=3,
                    elem_classes=RESULT,
                )
                notice = note(first[3], result=True)
        compare = gr.Dataframe(
            first[4],
            headers=["encoding", "used by", "tokens", "ranks file"],
            label=LESSON.captions["compare"],
            interactive=False,
            wrap=True,
            column_widths=["27%", "28%", "14%", "31%"],
            max_height=2000,  # every encoding's row shown
            elem_id="tok-compare",
            elem_classes=RESULT,
        )
        with gr.Accordion(LESSON.captions["splits"], open=False):
            enc_splits = gr.HTML(first[5], elem_id="tok-enc-splits-box", elem_classes=RESULT)
    with gr.Accordion(LESSON.captions["decode"], open=True), gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            with gr.Column(scale=1):
                ids_in = gr.Textbox(label="Token ids (commas or spaces)", value="31373, 2506", elem_id="dec-ids")
                decode_error = error_slot("dec-error")
                decode = gr.Button("Decode", elem_id="dec-run")
            with gr.Column(scale=1):
                first_decoded = ui_decode("31373, 2506")  # the page opens on the Transformer tutorial's ids, decoded
                decoded = gr.Textbox(first_decoded[0], label="Decoded text", interactive=False, elem_id="dec-text", elem_classes=RESULT)
                decode_notice = note(first_decoded[1], result=True)
    next_tab(LESSON.next_sentence, LESSON.next_tab)

    on_input(
        [text.change, special.change, show_ws.change], ui_tokenize, [text, special, show_ws, typed_length],
        [counts, spans, ids, notice, compare, enc_splits], error=error, js=LENGTH_CHECK_JS, trigger_mode="always_last", **light,
    )
    on_input([decode.click, ids_in.submit], ui_decode, [ids_in], [decoded, decode_notice], error=decode_error, **light)
    gr.api(user_errors(api_tokenize), api_name="tokenize", concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY)
    gr.api(
        user_errors(api_tokenize_encodings),
        api_name="tokenize_encodings",
        concurrency_id=LIGHT,
        concurrency_limit=LIGHT_CONCURRENCY,
    )
    return {"text": text, "whitespace": show_ws, "special": special}  # its controls, by the names of a link's parameters (playground/links.py)
