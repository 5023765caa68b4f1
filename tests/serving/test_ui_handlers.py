"""The UI's own event handlers (not the API endpoints) meet bad input too: a field typed into,
a slider sent out of range by a hand-made request. Each answers with a message saying what was
wrong, called through the very wrapper the page wires it with (the inline error slot or a toast)."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest

from playground.ui import attention, embeddings, generation, learn, positional, tokenization

CASES = [
    (tokenization.ui_tokenize, ("bad\x00", True, False), "control character"),
    (tokenization.ui_tokenize, ("fine", "yes", False), "true or false"),
    (tokenization.ui_decode, ("31373, two",), "not a whole number"),
    (tokenization.ui_decode, ("99999999",), "vocabulary has ids 0 to 50256"),
    (embeddings.Handlers.ui_arithmetic, ("king)", 5, True, True), "unbalanced"),
    (embeddings.Handlers.ui_arithmetic, ("__import__('os')", 5, True, True), "calls are not supported"),
    (embeddings.Handlers.ui_similarity, ("", "queen", True), "empty"),
    (embeddings.Handlers.ui_similarity, ("two words", "queen", True), "more than one word"),
    (embeddings.Handlers.ui_projection, ("king, queen", "king", "2D", True), "give 3 to 60"),
    (embeddings.Handlers.ui_projection, ("king, queen, man", "king", "4D", True), "must be one of"),
    (embeddings.Handlers.ui_context, ("king", "", "The queen spoke."), "empty"),
    (positional.ui_positional, (21, 10, 10000, "2, 4"), "even"),
    (positional.ui_positional, (20, 10, 10000, "2, x"), "not a whole number"),
    (positional.ui_positional, (20, 10, float("nan"), "2"), "base"),
    (generation.Generations.ui_generate, ("ROMEO:", 10, -1.0, 50, 0.95, 1, 1), "temperature"),
    (generation.Generations.ui_generate, ("ROMEO:", 10, 0.8, 50, 0.95, 1, 9), "num_samples must be from 1 to 4"),
    (generation.Generations.ui_generate, ("", 10, 0.8, 50, 0.95, 1, 1), "prompt is empty"),
    (attention.Handlers.ui_attention, ("hello", 99, 0), "layer must be from 0 to 5"),
    (attention.Handlers.ui_attention, ("hello", 0, 0.5), "whole number"),
    (learn.ui_learn, (-1, "proper", "good", "tiny", "learned", None), "seed must be"),
    (learn.ui_learn, (0, "hot", "good", "tiny", "learned", None), "init must be one of"),
    (learn.ui_continue, ("ROMEO:", 0, None), "no trained model yet"),
]


def _message(fn, args) -> str:
    """What the user sees: the inline slot's message (the last output, the others left as they
    were), or the text of the gr.Error a toast shows."""
    # The page also sends the session's result key where the handler keeps a result (None: none yet).
    args = (*args, *[None] * (len(inspect.signature(fn).parameters) - len(args)))
    try:
        out = fn(*args)
        if inspect.isgenerator(out):
            out = next(out)
    except gr.Error as err:
        return str(err)
    *kept, slot = out
    assert all(isinstance(v, type(gr.skip())) for v in kept), "an error must leave the last result on the page"
    return slot


@pytest.mark.parametrize("handler, args, says", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_ui_handler_answers_bad_input_with_a_message(wired, handler, args, says):
    assert handler in wired, f"{handler.__name__} is not wired to any event of the page"
    shown = _message(wired[handler], args)
    assert says.casefold() in shown.casefold(), shown
    assert "Traceback" not in shown


def test_every_ui_event_goes_through_user_errors(built_app):
    """So no handler can show a stack trace: each event's function is a ``user_errors`` wrapper
    (functools.wraps leaves ``__wrapped__``), except Gradio's own (gr.Examples filling a box) and
    the Model tab's lookup in a fixed dict."""
    unwrapped = [
        fn.name for fn in built_app.fns.values()
        if fn.fn is not None and not hasattr(fn.fn, "__wrapped__") and fn.fn.__module__.split(".")[0] != "gradio" and fn.fn.__module__ != "playground.ui.model"
    ]
    assert not unwrapped, unwrapped
