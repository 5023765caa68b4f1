"""Components several tabs build the same way: a note in the page's muted style, and a text box
that opens on the first of its examples, with every example one click away under it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gradio as gr

__all__ = ["note", "text_with_examples", "with_notice"]


def note(text: str = "", **kwargs: Any) -> gr.Markdown:
    """Explanatory or notice text, smaller and muted (the ``pg-note`` class of ``common.CSS``)."""
    return gr.Markdown(text, elem_classes="pg-note", **kwargs)


def with_notice(text: str, notice: str, sep: str = "\n\n") -> str:
    """``text``, then the result's ``notice`` (what was cut, averaged, assumed) marked ℹ️, if any."""
    return f"{text}{sep}ℹ️ {notice}" if notice else text


def text_with_examples(examples: Sequence[str], *, label: str, examples_label: str = "Examples", **textbox: Any) -> gr.Textbox:
    """A text box holding ``examples[0]``, the examples listed under it (a click fills the box)."""
    box = gr.Textbox(value=examples[0], label=label, **textbox)
    gr.Examples(examples=[[e] for e in examples], inputs=[box], label=examples_label)
    return box
