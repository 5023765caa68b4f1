"""What every tab's wiring shares: turning the logic's errors into ``gr.Error`` messages (for the
API) or into a message beside the input (for the page), the concurrency groups of the queue, and
the page's look (theme, CSS and the page's script)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

import gradio as gr

from export.batching import Busy

from .. import limits
from ..resources import ResourceError
from ..validation import InputError
from ..plots import PALETTE
from .widgets import error_html

__all__ = ["LIGHT", "HEAVY", "GENERATE", "GENERATION_CONCURRENCY", "FORWARD_CONCURRENCY", "LIGHT_CONCURRENCY", "QUEUE_MAX_SIZE", "MAX_WAITING_GENERATIONS", "cap_waiting", "MAX_UPLOAD_BYTES", "user_errors", "inline_errors", "on_input", "on_tab_open", "THEME", "CSS", "JS"]

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


def on_tab_open(fn: Any, outputs: Sequence[Any], **event: Any) -> None:
    """Fill ``outputs`` with ``fn()`` the first time the tab being built is opened, not with the
    page: heavy figures out of the first load (Gradio puts every initial value in the page).
    Call inside the tab's ``build()``; ``event``: the event's options (concurrency...)."""
    from gradio.context import get_render_context

    tab = get_render_context()
    while tab is not None and not isinstance(tab, gr.Tab):
        tab = tab.parent
    if tab is None:
        raise RuntimeError("on_tab_open must be called while a gr.Tab is being built")
    loaded = gr.State(False)

    def fill(done: bool):
        if done:
            return (gr.skip(),) * len(outputs) + (True,)
        values = fn()
        return (*(values if len(outputs) > 1 else (values,)), True)

    tab.select(user_errors(fill), [loaded], [*outputs, loaded], api_visibility="private", show_progress="minimal", **event)


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
.gradio-container { max-width: min(1280px, 100%) !important; min-width: 0 !important; width: 100%; margin: 0 auto; }
.gradio-container .main { padding-left: clamp(8px, 3vw, 32px) !important; padding-right: clamp(8px, 3vw, 32px) !important; }
#pg-header h1 { margin-bottom: 0.2em; }
#pg-header p { color: var(--body-text-color-subdued); margin-top: 0; }
.pg-note { font-size: 0.92em; color: var(--body-text-color-subdued); }

/* An input's error, beside it; its section's results stay, dimmed and marked out of date. */
.pg-error:not(:has(.pg-error-msg)) { display: none !important; }
/* A message the page wrote itself (a text too long to send) gives way to the server's. */
.pg-error:has(.pg-error-msg:not(.pg-local *)) .pg-local { display: none; }
.pg-error-msg { border: 1px solid #fca5a5; border-left: 4px solid #dc2626; background: #fef2f2; color: #7f1d1d;
  border-radius: 8px; padding: 8px 12px; font-size: 0.93em; line-height: 1.45; overflow-wrap: anywhere; }
.dark .pg-error-msg { background: #450a0a; color: #fecaca; border-color: #b91c1c; }
.pg-error-stale { display: block; margin-top: 2px; font-size: 0.9em; opacity: 0.8; }
.pg-section:has(.pg-error-msg) .pg-result { opacity: 0.45; filter: grayscale(0.7); transition: opacity 0.2s; }

/* The guided path: each tab's last sentence leads to the next tab. */
.pg-next { margin: 18px 0 4px; padding: 10px 14px; border-radius: 10px; background: var(--background-fill-secondary);
  border: 1px solid var(--border-color-primary); font-size: 0.97em; }
.pg-next a { font-weight: 600; white-space: nowrap; color: var(--color-accent); }

.gen-output { font-family: var(--font-mono); font-size: 0.95em; line-height: 1.65; white-space: pre-wrap;
  overflow-wrap: anywhere; padding: 10px 12px; border-radius: 8px; background: var(--background-fill-secondary);
  min-height: 140px; max-height: 560px; overflow-y: auto; border: 1px solid var(--border-color-primary); }
.gen-empty { color: var(--body-text-color-subdued); font-family: var(--font); }
.gen-sample + .gen-sample { margin-top: 14px; padding-top: 10px; border-top: 1px dashed var(--border-color-primary); }
.gen-sample-title { font-family: var(--font); font-weight: 600; font-size: 0.85em; margin-bottom: 4px;
  color: var(--body-text-color-subdued); }
.gen-prompt { color: var(--body-text-color); font-weight: 600; }
.gen-tok { border-radius: 3px; padding: 0 1px; cursor: pointer; }
.gen-tok:hover { outline: 2px solid #f97316; }
.gen-ws { color: var(--body-text-color-subdued); }
.pg-cards { display: flex; gap: 10px; flex-wrap: wrap; margin-bottom: 6px; }
.pg-card { flex: 1 1 110px; padding: 8px 12px; border-radius: 10px; background: var(--background-fill-secondary);
  border: 1px solid var(--border-color-primary); }
.pg-card b { display: block; font-size: 1.5em; color: var(--color-accent); }
.pg-card span { font-size: 0.85em; color: var(--body-text-color-subdued); }
/* Coloured tokens (playground/tokenization.py writes the spans; data-c 0..7 are plots.PALETTE). */
.gpt-tokens { white-space: pre-wrap; word-break: break-word; font-family: var(--font-mono); line-height: 1.9;
  max-height: 460px; overflow-y: auto; }
.gpt-token { border-radius: 3px; padding: 1px 0; color: #111827; }
.gpt-token:hover { outline: 2px solid var(--color-accent); }
.gpt-token[data-c="s"] { background: #111827; color: #f9fafb; }
.gpt-rest { color: var(--body-text-color-subdued); }
.gpt-id { font-size: 0.62em; color: #4b5563; margin-left: 1px; vertical-align: -0.35em; user-select: none; }
/* The Model tab's architecture picture (playground/model_info.architecture_html). */
.pg-arch { display: flex; flex-direction: column; align-items: stretch; gap: 0; font-size: 0.9em; }
.pg-arch-box { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 6px 10px;
  background: var(--background-fill-secondary); display: flex; flex-wrap: wrap; gap: 2px 10px; align-items: baseline; }
.pg-arch-box.emb { background: #fef3c7; } .pg-arch-box.attn { background: #e0e7ff; } .pg-arch-box.mlp { background: #dcfce7; }
.pg-arch-box.add, .pg-arch-box.io { background: transparent; border-style: dashed; }
.pg-arch-shape { font-family: var(--font-mono); font-size: 0.9em; color: var(--body-text-color-subdued); }
.pg-arch-n { margin-left: auto; font-weight: 600; color: var(--color-accent); }
.pg-arch-arrow { text-align: center; line-height: 1.3; color: var(--body-text-color-subdued); }
.pg-arch-block { border: 2px solid var(--color-accent); border-radius: 10px; padding: 6px; display: flex;
  flex-direction: column; gap: 4px; }
.pg-arch-title { font-weight: 600; color: var(--color-accent); }
/* A tip on hover and on a tap (a tap focuses an element with tabindex): phones have no hover. */
[data-tip] { position: relative; }
[data-tip]:hover::after, [data-tip]:focus::after { content: attr(data-tip); position: absolute; left: 0; top: 100%;
  z-index: 30; background: #111827; color: #f9fafb; font: 12px/1.4 var(--font); padding: 2px 6px; border-radius: 4px;
  white-space: nowrap; pointer-events: none; }
""" + "".join(f'.gpt-token[data-c="{i}"] {{ background: {c}; }}\n' for i, c in enumerate(PALETTE)) + """

/* Nothing may widen the page past the screen: flex items default to their content's width, so
   the tab bar's row of buttons (and the columns around it) could push the page wider on a phone
   before Gradio moved the last tabs into its "more tabs" menu. */
.gradio-container .main, .gradio-container .main > .wrap, .gradio-container main.contain,
.tabs, .tab-wrapper, .tab-container[role="tablist"] { min-width: 0 !important; max-width: 100%; }

/* The attention line view (playground/attention.line_view_html, drawn by ui/attention.LINE_VIEW_JS). */
.att-lines-hint { font-size: 0.9em; color: var(--body-text-color-subdued); margin: 0 0 6px; }
.att-heads { display: flex; flex-wrap: wrap; gap: 4px; margin-bottom: 8px; }
.att-heads button { border: 2px solid var(--c); color: var(--c); background: transparent; border-radius: 999px;
  padding: 0 8px; font-size: 0.8em; cursor: pointer; line-height: 1.6; }
.att-heads button.on { background: var(--c); color: #fff; }
.att-scroll { max-height: 640px; overflow-y: auto; }
.att-grid { display: grid; grid-template-columns: max-content minmax(48px, 1fr) max-content; }
.att-svg { width: 100%; display: block; }
.att-tok { display: flex; align-items: center; gap: 6px; padding: 0 6px; border-radius: 4px; cursor: pointer;
  font-family: var(--font-mono); font-size: 0.85em; white-space: pre; }
.att-q .att-tok { justify-content: flex-end; }
.att-tok:hover { outline: 1px solid var(--color-accent); }
.att-tok.chosen { outline: 2px solid #f97316; }
.att-label { max-width: 11em; overflow: hidden; text-overflow: ellipsis; }
.att-w { font-size: 0.8em; color: var(--body-text-color-subdued); min-width: 2.6em; font-family: var(--font); }
.att-q .att-w { text-align: right; }

/* The Model tab's input/output tables: the type stays whole, long names break anywhere. */
#model-graph table { font-size: 0.88em; }
#model-graph td:nth-child(2) { white-space: nowrap; }
#model-graph td code { word-break: break-all; }

/* Tables wrap their cells rather than widen the page. */
.table-wrap table { table-layout: auto; }
.table-wrap td, .table-wrap th { white-space: normal !important; overflow-wrap: break-word; }

/* Phones: one column, tighter margins, tables and plots within the screen. Gradio scopes the
   rules of a media query to the page's content (it prefixes them with ".gradio-container ...
   .contain"), so they name elements inside it; the page's own margin is a clamp() above. */
@media (max-width: 700px) {
  .row, .form { flex-direction: column !important; flex-wrap: nowrap !important; }
  .row > *, .form > * { width: 100% !important; min-width: 0 !important; flex: 1 1 auto !important; }
  .pg-card { flex: 1 1 40%; padding: 6px 10px; }
  .pg-card b { font-size: 1.25em; }
  #pg-header h1 { font-size: 1.6em; }
  .js-plotly-plot, .plot-container { max-width: 100%; }
  .js-plotly-plot .modebar-container { display: none !important; }  /* it covered the plots' titles */
  .att-tok { font-size: 0.75em; padding: 0 3px; gap: 3px; }
  .att-label { max-width: 8em; }
  #tok-compare td, #tok-compare th, #model-params td, #model-params th { font-size: 0.82em; }
}
"""

# Run once when the page loads (``launch(js=JS)``).
JS = """
() => {
  // Enter in a slider's number box commits the typed value, as letting go of the handle does:
  // Gradio sends a slider's "release" on blur and pointer-up only, so Enter recomputed nothing.
  const isSliderBox = (box) => box instanceof HTMLInputElement && box.type === 'number'
    && (box.getAttribute('aria-label') || '').startsWith('number input for');
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && isSliderBox(e.target)) e.target.blur();
  }, true);
  // A number typed past a slider's ends is brought within them before the slider sends it
  // (Gradio sent it as typed, its range check failed on the server, and every output showed
  // "Error"); this runs before the slider's own blur handler.
  document.addEventListener('blur', (e) => {
    const box = e.target;
    if (!isSliderBox(box) || box.value === '') return;
    const v = Number(box.value), lo = Number(box.min), hi = Number(box.max);
    if (!Number.isFinite(v) || (v >= lo && v <= hi)) return;
    box.value = String(Math.min(Math.max(v, lo), hi));
    box.dispatchEvent(new Event('input', {bubbles: true}));
  }, true);
  // Each new action starts without the notices of the previous ones (Gradio keeps its toasts,
  // grouped, until closed, so old messages sat beside new results).
  const closeToasts = () => document.querySelectorAll('[data-testid="toast-close"]').forEach((b) => b.click());
  document.addEventListener('pointerdown', (e) => {
    if (e.target.closest('button, input, textarea') && !e.target.closest('[data-testid="toast-body"]')) closeToasts();
  }, true);
  document.addEventListener('keydown', (e) => { if (e.key === 'Enter') closeToasts(); }, true);
  // An input's error is brought into view (on a phone it can sit below the screen's edge).
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) {
      const msg = n.nodeType === 1 && (n.matches('.pg-error-msg') ? n : n.querySelector('.pg-error-msg'));
      if (msg) { const b = msg.getBoundingClientRect(); if (b.top < 0 || b.bottom > window.innerHeight) msg.scrollIntoView({block: 'nearest'}); }
    }
  }).observe(document.body, {childList: true, subtree: true});
  // A plot drawn while its tab was hidden (a result that came on page load) has the default
  // width: opening a tab tells plotly the page's size, and it fits every plot to its box.
  document.addEventListener('click', (e) => {
    if (e.target.closest('button[role="tab"], .overflow-dropdown button')) {
      setTimeout(() => window.dispatchEvent(new Event('resize')), 60);
    }
  });
}
"""
