"""Errors raised inside Gradio's own processing of a request (too few arguments, ``null`` for a
slider, a value past a slider's end, an event that runs only in the page) reach the client as
Gradio's own message, and the log as one line (:func:`explain_errors`).

Left alone, Gradio answers most of them ``{"error": null}`` and prints each with its traceback
straight to stderr, past the log's rate limit (playground/ui/serving/connections.py): a flood of malformed
requests grew the log by a traceback each (the soak test of tests/serving/test_abuse.py checks the log
has none). The app's handlers answer with their own ``gr.Error`` (common.user_errors): those pass
as they are. Extra arguments are ignored, as Gradio does.
"""

from __future__ import annotations

import logging

import gradio as gr

from .. import gradio_internals

__all__ = ["gradio_message", "answer", "explain_errors", "UNEXPLAINED"]

log = logging.getLogger("playground")


def gradio_message(err: Exception) -> str:
    """Gradio's message for ``err`` without what says nothing to a client: its closing
    "Original error" (the internal exception) and its advice to the app's developer (with the
    components' Python reprs)."""
    text = str(err).split("\n\nOriginal error:")[0].split("\nCheck if the event handler")[0].strip()
    return text or type(err).__name__


def answer(event: str, err: Exception) -> Exception | None:
    """What the client of ``event`` gets for ``err`` (None: ``err`` as it is)."""
    if isinstance(err, gr.Error):
        if err.print_exception:  # raised by a component (a slider's range): one line, no traceback
            err.print_exception = False
            log.warning("refused a request to %s: %s", event, err.message)
        return None
    message = gradio_message(err)
    log.warning("refused a request to %s: %s", event, message.splitlines()[0])
    return gr.Error(message, title="Invalid request", print_exception=False)


# What an error raised past every handler says (a siege's cut events were sent as ``null``).
UNEXPLAINED = ("The server could not finish this request; try again in a moment (other tabs keep working).", "Error")


def explain_errors(demo: gr.Blocks) -> None:
    """Answer Gradio's own errors with their message (call after ``demo.queue()``), and give any
    other error a message the page can show (``gradio_internals.messages_for_every_error``)."""
    gradio_internals.on_processing_error(demo, answer)
    gradio_internals.messages_for_every_error(*UNEXPLAINED)
