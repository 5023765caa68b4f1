"""Every error event carries a message a page can show (playground/ui/serving/errors.py): an
exception raised past the app's handlers, which Gradio sends as ``{"error": null}`` (a siege's cut
events came out as ``null``), gets the app's words, never the exception's text; a ``gr.Error``
keeps its own."""

from __future__ import annotations

import gradio as gr
import gradio.queueing
import gradio.utils

from playground.ui import gradio_internals
from playground.ui.serving.errors import UNEXPLAINED, explain_errors


def test_an_error_past_the_handlers_is_sent_with_a_message_and_without_its_internals():
    with gr.Blocks() as demo:
        gr.Button().click(lambda: None)
    demo.queue()
    explain_errors(demo)
    for payload in (gradio.queueing.error_payload, gradio.utils.error_payload):  # what the queue and the routes call
        for err in (RuntimeError("/secret/path failed"), None):
            content = payload(err, False)
            assert content["error"] == UNEXPLAINED[0] and content["title"] == UNEXPLAINED[1] and content["visible"]
            assert "secret" not in str(content)
        own = payload(gr.Error("The app is busy: 3 wait.", title="Busy"), False)
        assert (own["error"], own["title"]) == ("The app is busy: 3 wait.", "Busy")
    explain_errors(demo)  # twice: wrapped once, not twice
    assert gradio.utils.error_payload.__wrapped__.__module__ == "gradio.utils"
    assert gradio_internals.moved(demo) == []  # the signature checks still see Gradio's shape
