"""Components several tabs build the same way: a note in the page's muted style, a text box that
opens on the first of its examples, the slot where a section's input error appears (beside the
input, while the last good result stays, dimmed), and the sentence that leads to the next tab."""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import gradio as gr

__all__ = [
    "STALE",
    "RESULT",
    "SECTION",
    "note",
    "lesson_line",
    "text_with_examples",
    "with_notice",
    "error_slot",
    "error_html",
    "next_tab",
    "neighbours_table",
    "layer_head_sliders",
    "cards_html",
]

# CSS classes (their rules are in common.CSS): a section holds an input, its error slot and its
# results; while the slot shows an error, the section's results are dimmed and marked out of date.
SECTION = "pg-section"
RESULT = "pg-result"
STALE = "pg-error-msg"  # the error slot's message; its presence marks the section's results stale


class _LessonLine:
    def __init__(self, beside: Sequence[Any], below: Sequence[Any]) -> None:
        self.beside, self.below, self.placed = beside, below, False

    def place(self, lesson: Any = None) -> Any:
        """``beside`` in one row after ``lesson`` (built here, a callable), ``below`` under that row."""
        self.placed = True
        with gr.Row(equal_height=False, elem_classes="pg-lesson-line"):
            built = lesson() if lesson is not None else None
            for block in self.beside:
                block.render()
        for block in self.below:
            block.render()
        return built


_lesson_line: ContextVar[_LessonLine | None] = ContextVar("lesson_line", default=None)


@contextmanager
def lesson_line(beside: Sequence[Any] = (), below: Sequence[Any] = ()) -> Iterator[None]:
    """A tab built inside this block has its first :func:`note` (every tab opens on its lesson
    sentence) laid out in one row with ``beside`` (blocks made with ``render=False``) at its right,
    and ``below`` under that row: what is about the tab as a whole (Copy link) comes after the
    lesson, not above it. A tab without a note gets them at its end, where a test notices."""
    line = _LessonLine(beside, below)
    token = _lesson_line.set(line)
    try:
        yield
    finally:
        _lesson_line.reset(token)
    if not line.placed:
        line.place()


def note(text: str = "", *, result: bool = False, **kwargs: Any) -> gr.Markdown:
    """Explanatory or notice text, smaller and muted (the ``pg-note`` class of ``common.CSS``).
    ``result``: the note belongs to a section's result (dimmed with it when an input is refused).
    The first note of a tab built inside :func:`lesson_line` is its lesson sentence."""
    classes = ["pg-note", RESULT] if result else "pg-note"
    line = _lesson_line.get()
    if line is not None and not line.placed and not result:
        return line.place(lambda: gr.Markdown(text, elem_classes=["pg-note", "pg-lesson"], **kwargs))
    return gr.Markdown(text, elem_classes=classes, **kwargs)


def with_notice(text: str, notice: str, sep: str = "\n\n") -> str:
    """``text``, then the result's ``notice`` (what was cut, averaged, assumed) marked ℹ️, if any."""
    return f"{text}{sep}ℹ️ {notice}" if notice else text


def text_with_examples(
    examples: Sequence[str],
    *,
    label: str,
    examples_label: str = "Examples",
    example_labels: Sequence[str] | None = None,
    **textbox: Any,
) -> gr.Textbox:
    """A text box holding ``examples[0]``, the examples listed under it (a click fills the box;
    ``example_labels``: what the buttons say, where the text alone would puzzle)."""
    box = gr.Textbox(value=examples[0], label=label, **textbox)
    gr.Examples(
        examples=[[e] for e in examples], inputs=[box], label=examples_label,
        example_labels=list(example_labels) if example_labels else None,
    )
    return box


def error_html(title: str, message: str) -> str:
    """What an error slot shows: the message (escaped) and that the results below are the last
    ones that worked. Empty title and message: nothing (the slot collapses)."""
    if not message:
        return ""
    first = message.split(" ", 1)[0]
    if first.isalpha():  # "text is ..." reads as a sentence; a name such as d_model stays as written
        message = message[:1].upper() + message[1:]
    if not message.endswith((".", "!", "?")):
        message += "."
    return (
        f'<div class="{STALE}" role="alert"><b>⚠ {html.escape(title)}:</b> {html.escape(message)}'
        '<span class="pg-error-stale">The result below is from the last input that worked.</span></div>'
    )


def error_slot(elem_id: str | None = None) -> gr.HTML:
    """The place beside an input where its section's errors appear (see ``common.inline_errors``);
    empty, it takes no room."""
    return gr.HTML("", elem_id=elem_id, elem_classes="pg-error", js_on_load=None, padding=False)


# Clicking the link opens the next tab (the tab buttons are Gradio's; on a phone the later ones
# sit in the overflow menu, whose buttons carry the same text) and scrolls to the page's top.
_NEXT_TAB_JS = """
element.addEventListener('click', (e) => {
  const link = e.target.closest('[data-next-tab]');
  if (!link) return;
  e.preventDefault();
  const name = link.dataset.nextTab;
  const tab = [...document.querySelectorAll('button[role="tab"], .overflow-dropdown button')]
    .find((b) => b.textContent.trim().endsWith(name));
  if (tab) { tab.click(); window.scrollTo({top: 0, behavior: 'smooth'}); }
});
"""


def next_tab(sentence: str, tab: str) -> gr.HTML:
    """The tab's last line: one sentence that leads on, and a link that opens tab ``tab`` (its
    label without the number, e.g. "Embeddings")."""
    return gr.HTML(
        f'<p class="pg-next">{html.escape(sentence)} <a href="#" data-next-tab="{html.escape(tab, quote=True)}">'
        f"Next: {html.escape(tab)} →</a></p>",
        js_on_load=_NEXT_TAB_JS,
        elem_classes="pg-next-wrap",
    )


NEIGHBOUR_HEADERS = ["rank", "token", "id", "cosine", "count in training"]


def neighbours_table(value: Any, *, label: str, elem_id: str, max_rows: int, **kwargs: Any) -> gr.Dataframe:
    """A table of nearest tokens (Embeddings and Compare tabs): every row shown (a table that
    scrolls inside the page hid rows), columns sized to fit a phone's width."""
    return gr.Dataframe(
        value, headers=NEIGHBOUR_HEADERS, interactive=False, label=label, elem_id=elem_id,
        max_height=40 * max_rows + 60, wrap=True, column_widths=["13%", "29%", "18%", "19%", "21%"], **kwargs,
    )


def layer_head_sliders(n_layer: int, n_head: int, *, prefix: str, layer: int = 0, head: int = 0, **options: Any) -> tuple[gr.Slider, gr.Slider]:
    """A layer and a head slider (0-based, their ranges in their labels) opening on ``layer`` and
    ``head``, ids ``<prefix>-layer`` and ``<prefix>-head``. A model of one layer (or one head) gets
    a slider that cannot move, labelled "Layer 0" (Gradio's slider needs a range of two values).
    ``options``: more arguments of both (``scale``...)."""

    def slider(name: str, count: int, value: int) -> gr.Slider:
        label = f"{name} (0–{count - 1})" if count > 1 else f"{name} 0 (the model's only one)"
        return gr.Slider(0, max(count - 1, 1), value=value, step=1, label=label, elem_id=f"{prefix}-{name.lower()}",
                         interactive=count > 1, **options)

    return slider("Layer", n_layer, layer), slider("Head", n_head, head)


def cards_html(cards: Sequence[tuple[str, str]]) -> str:
    """A row of counters, each a big value over its label (the ``pg-cards`` style of common.CSS)."""
    items = "".join(f'<div class="pg-card"><b>{html.escape(value)}</b><span>{html.escape(label)}</span></div>' for value, label in cards)
    return f'<div class="pg-cards">{items}</div>'
