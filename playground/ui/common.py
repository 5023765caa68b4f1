"""What every tab's wiring shares: turning the logic's errors into ``gr.Error`` messages, the
concurrency groups of the queue, and the page's look (theme and CSS)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

import gradio as gr

from export.batching import Busy

from .. import limits
from ..resources import ResourceError
from ..validation import InputError

__all__ = ["LIGHT", "HEAVY", "GENERATE", "GENERATION_CONCURRENCY", "FORWARD_CONCURRENCY", "LIGHT_CONCURRENCY", "QUEUE_MAX_SIZE", "MAX_WAITING_GENERATIONS", "cap_waiting", "MAX_UPLOAD_BYTES", "user_errors", "THEME", "CSS"]

log = logging.getLogger("playground")

# Concurrency groups of the queue (see app.py): the light tabs answer in milliseconds and must
# never wait behind a generation; model forward passes share a small pool; generations stream
# for seconds and are capped on their own.
LIGHT = "light"  # tokenization, positional encoding, model info
HEAVY = "forward"  # embeddings, attention: one PyTorch forward pass
GENERATE = "generate"  # the ONNX engine, streaming

# Sized for a small Space (2 vCPUs). Generations share one decoding loop (continuous batching,
# export/batching.py): a handler only waits for its tokens, so as many run as the batch has rows.
GENERATION_CONCURRENCY = limits.MAX_BATCH_ROWS
FORWARD_CONCURRENCY = 2
LIGHT_CONCURRENCY = 8
QUEUE_MAX_SIZE = 64  # requests waiting past this are refused at once with "queue is full"
# Generations waiting for a slot past this are refused at once the same way, so that a flood of
# generations can never fill the queue the light tabs share (see cap_waiting).
MAX_WAITING_GENERATIONS = 24
MAX_UPLOAD_BYTES = 0  # no tab takes a file: Gradio's upload route refuses any content (413)


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


def cap_waiting(demo: gr.Blocks, concurrency_id: str, max_waiting: int) -> None:
    """Refuse a new event of ``concurrency_id`` while ``max_waiting`` of them already wait for a
    slot, exactly as Gradio refuses one past the queue's ``max_size`` (HTTP 503: the page shows
    "This application is currently busy. Please try again.", gradio_client raises QueueError
    "Queue is full! Please try again."). Gradio caps only the whole queue, so without this a
    burst of generations would fill it and turn the light tabs away too.

    Call after ``demo.queue()``. Wraps the queue's ``push`` (Gradio 6.31 internals, pinned in
    requirements.txt; tests/test_load.py checks the behaviour).
    """
    queue = demo._queue
    push = queue.push

    async def push_capped(body: Any, request: Any, username: Any):
        fn = demo.fns.get(body.fn_index) if body.fn_index is not None else None
        waiting = queue.event_queue_per_concurrency_id.get(concurrency_id)
        if fn is not None and fn.concurrency_id == concurrency_id and waiting is not None and len(waiting.queue) >= max_waiting:
            return False, f"Busy: {len(waiting.queue)} requests already wait for {concurrency_id}; try again shortly.", "queue_full"
        return await push(body, request, username)

    queue.push = push_capped


THEME = gr.themes.Soft(
    primary_hue="indigo",
    secondary_hue="pink",
    neutral_hue="slate",
    # System fonts only: the app works offline and the page never waits on a font server.
    font=["Inter", "ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "sans-serif"],
    font_mono=["JetBrains Mono", "ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
)

CSS = """
.gradio-container { max-width: 1280px !important; margin: 0 auto; }
#pg-header h1 { margin-bottom: 0.2em; }
#pg-header p { color: var(--body-text-color-subdued); margin-top: 0; }
.pg-note { font-size: 0.92em; color: var(--body-text-color-subdued); }
.gen-output { font-family: var(--font-mono); font-size: 0.95em; line-height: 1.65; white-space: pre-wrap;
  word-break: break-word; padding: 10px 12px; border-radius: 8px; background: var(--background-fill-secondary);
  min-height: 140px; border: 1px solid var(--border-color-primary); }
.gen-empty { color: var(--body-text-color-subdued); font-family: var(--font); }
.gen-sample + .gen-sample { margin-top: 14px; padding-top: 10px; border-top: 1px dashed var(--border-color-primary); }
.gen-sample-title { font-family: var(--font); font-weight: 600; font-size: 0.85em; margin-bottom: 4px;
  color: var(--body-text-color-subdued); }
.gen-prompt { color: var(--body-text-color); font-weight: 600; }
.gen-tok { border-radius: 3px; padding: 0 1px; cursor: pointer; }
.gen-tok:hover { outline: 2px solid #f97316; }
.pg-cards { display: flex; gap: 10px; flex-wrap: wrap; margin-bottom: 6px; }
.pg-card { flex: 1 1 110px; padding: 8px 12px; border-radius: 10px; background: var(--background-fill-secondary);
  border: 1px solid var(--border-color-primary); }
.pg-card b { display: block; font-size: 1.5em; color: var(--color-accent); }
.pg-card span { font-size: 0.85em; color: var(--body-text-color-subdued); }
.tok-span { border-radius: 4px; padding: 1px 2px; margin: 0 1px 0 0; font-family: var(--font-mono);
  white-space: pre-wrap; }
"""

