"""What every tab's wiring shares: turning the logic's errors into ``gr.Error`` messages (for the
API) or into a message beside the input (for the page), the concurrency groups of the queue, and
the page's look (theme, CSS and the page's script)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from runtime.batching import Busy

from ..limits import EXPENSIVE_CONCURRENCY, FORWARD_CONCURRENCY, GENERATION_CONCURRENCY, LIGHT_CONCURRENCY
from ..resources import ResourceError
from ..validation import InputError
from ..plots import PALETTE
from .widgets import error_html

__all__ = ["LIGHT", "FORWARD", "GENERATE", "EXPENSIVE", "EXPENSIVE_CONCURRENCY", "GENERATION_CONCURRENCY", "FORWARD_CONCURRENCY", "LIGHT_CONCURRENCY", "user_errors", "inline_errors", "on_input", "on_tab_open", "THEME", "CSS", "JS"]

log = logging.getLogger("playground")

# Concurrency groups of the queue (see app.py): the light tabs answer in milliseconds and must
# never wait behind a generation; model forward passes share a small pool; generations stream
# for seconds and are capped on their own.
LIGHT = "light"  # tokenization, positional encoding, model info
# PyTorch on the server's cores (a forward pass of Embeddings, Attention, Inside, Compare; a Watch it
# learn run): every event of the group passes FORWARD_CONCURRENCY as its concurrency_limit.
FORWARD = "forward"
GENERATE = "generate"  # the ONNX engine, streaming
# Big answers: building and sending megabytes of JSON holds the interpreter for most of a second,
# so a few of them at once would starve every other tab; one at a time, each under a cost cap.
EXPENSIVE = "expensive"  # /positional_encoding's table (limits.MAX_TABLE_VALUES)
# Each group's slots (imported above, for the tabs' events), its waiting places and the queue's size:
# playground/limits.py.


def _to_gr_error(err: Exception) -> gr.Error:
    if isinstance(err, gr.Error):
        return err
    if isinstance(err, InputError):
        return gr.Error(str(err), title="Invalid input", print_exception=False)
    if isinstance(err, Busy):  # more generations waiting than the batch's line holds
        return gr.Error(f"The app is busy: {err}.", title="Busy", print_exception=False)
    if isinstance(err, ResourceError):  # a missing or broken file: its message names the fix
        log.error("%s", err)
        return gr.Error(f"The model is not available: {err}", title="Model unavailable", print_exception=False)
    # Anything else is our fault: log it for the operator, tell the user without internals.
    log.exception("unexpected error in a playground handler")
    return gr.Error(
        "Something went wrong on our side while answering this request; please try again "
        "(other inputs and tabs keep working).",
        title="Internal error",
        print_exception=False,
    )


def user_errors(fn: Callable) -> Callable:
    """Wrap a handler (plain function or generator) so that an :class:`InputError` reaches the
    user as a ``gr.Error`` with its message, and no other exception shows a stack trace.
    The wrapper keeps ``fn``'s signature and type hints (``gr.api`` derives its schema from them)."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args: Any, **kwargs: Any):
            try:
                yield from fn(*args, **kwargs)
            except GeneratorExit:
                raise
            except Exception as err:  # noqa: BLE001 -- every error becomes a message
                raise _to_gr_error(err) from None

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001
            raise _to_gr_error(err) from None

    return wrapper


def inline_errors(fn: Callable, n_outputs: int) -> Callable:
    """Wrap a page handler (plain function or generator) whose ``n_outputs`` outputs are followed
    by its section's error slot (``widgets.error_slot``). A result fills the outputs and empties
    the slot; an error leaves every output as it was (``gr.skip()``: the last good result stays,
    dimmed by the CSS while the slot shows a message) and puts the message in the slot, beside
    the input, instead of a toast. The message is the one ``user_errors`` would raise (an
    unexpected error is logged and told without internals)."""

    def done(result: Any) -> tuple:
        values = (result,) if n_outputs == 1 else tuple(result)
        return (*values, "")

    def failed(err: Exception) -> tuple:
        message = _to_gr_error(err)
        return (*[gr.skip()] * n_outputs, error_html(message.title, message.message))

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def gen_wrapper(*args: Any, **kwargs: Any):
            try:
                for result in fn(*args, **kwargs):
                    yield done(result)
            except GeneratorExit:
                raise
            except Exception as err:  # noqa: BLE001 -- every error becomes a message
                yield failed(err)

        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        try:
            result = fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001
            return failed(err)
        return done(result)

    return wrapper


def on_input(triggers: Any, fn: Callable, inputs: list, outputs: list, *, error: gr.HTML, **kwargs: Any) -> Any:
    """``gr.on(triggers, fn, inputs, outputs)`` for a page handler (not an API endpoint), its
    errors shown in the slot ``error`` beside its input (:func:`inline_errors`)."""
    return gr.on(
        triggers, inline_errors(fn, len(outputs)), inputs, [*outputs, error], api_visibility="private", **kwargs
    )


def on_tab_open(tab: gr.Tab, fn: Any, outputs: Sequence[Any], **event: Any) -> None:
    """Fill ``outputs`` with ``fn()`` the first time ``tab`` is opened, not with the page: heavy
    figures out of the first load (Gradio puts every initial value in the page).
    ``event``: the event's options (concurrency...)."""
    loaded = gr.State(False)

    def fill(done: bool):
        if done:
            return (gr.skip(),) * len(outputs) + (True,)
        values = fn()
        return (*(values if len(outputs) > 1 else (values,)), True)

    tab.select(user_errors(fill), [loaded], [*outputs, loaded], api_visibility="private", show_progress="minimal", **event)


THEME = gr.themes.Soft(
    primary_hue="indigo",
    secondary_hue="pink",
    neutral_hue="slate",
    # System fonts only: the app works offline and the page never waits on a font server.
    font=["Inter", "ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "sans-serif"],
    font_mono=["JetBrains Mono", "ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)

STATIC = Path(__file__).resolve().parents[2] / "web" / "app"  # the app's page side, beside the other JavaScript


def static_text(name: str) -> str:
    """A file of web/app/: the page's CSS and JavaScript live in files of their own kind, so that
    editors, linters and diffs read them as CSS and JavaScript."""
    return (STATIC / name).read_text(encoding="utf-8")


CSS = static_text("page.css").replace(
    "/* @palette: one rule per token colour, written from playground.plots.PALETTE */\n",
    "".join(f'.gpt-token[data-c="{i}"] {{ background: {c}; }}\n' for i, c in enumerate(PALETTE)),
)

# Run once when the page loads (``launch(js=JS)``).
JS = static_text("page.js")
