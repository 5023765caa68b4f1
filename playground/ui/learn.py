"""Watch it learn tab: a small GPT trained from random weights, its loss charted live (the first
steps magnified) against the reference lines, a sample of its text every few steps beside step 0's,
the learner's runs in a table, Stop. "Run on: this browser" (the default where the browser can
train) trains it in the learner's own browser (web/app/learn_on.js mounting the view
both editions share, web/views/learn.js); "the server" on the server's CPU.

Also registers the ``/learn`` API endpoint (streaming JSON; the last update is the ended run).
Many learners train at once (playground/learn/scheduler.Trainer), one run per visitor:
:func:`visitor_id` is the one place that decides who the visitor is."""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator

import gradio as gr

from ..learn import view as learn_view
from ..learn.corpus import load_corpus
from ..learn.refs import References, references
from ..learn.run import (
    CONTINUE_CHARS, DEFAULT_SECONDS, DEFAULT_STEPS, INIT_WHY, INITS, LEARNING_RATES, LR_WHY, MAX_SEED, POSITION_WHY,
    POSITIONS, SIZE_WHY, SIZES, LearnSettings, RunState, continue_text, settings,
)
from ..learn.scheduler import TRAINER
from ..limits import MAX_LINE, MAX_RUNNING
from ..memo import Memo
from .page_side import page_side_js
from .common import FORWARD, FORWARD_CONCURRENCY, LIGHT, on_input, user_errors
from .serving.browser_files import BrowserFiles
from .serving.sessions import ResultStore
from .serving.visitors import visitor_of
from .widgets import RESULT, SECTION, cards_html, error_slot, note

LEARN = "learn"  # its own concurrency group: training never takes the light tabs' or generations' slots
# Learners served at once: those training and those in the trainer's line (told their place);
# past this many Gradio's queue holds them (the page shows its own place in the queue).
LEARN_CONCURRENCY = MAX_RUNNING + MAX_LINE
UI_EVERY_S = 0.5  # page updates while a run trains
API_EVERY_S = 1.0
STOP_WAIT_S = 5.0  # the most the Stop view waits for the run to end
MAX_HISTORY = 8  # earlier runs a page keeps (their curves and table rows, not their models)

PROMPT = "Romeo.\n"  # a speaker as the training text writes one: the run has seen this layout


def visitor_id(request: gr.Request | None) -> str | None:
    """Who the visitor is (one run per visitor): the serving layer's visitor, the socket's address
    or, behind a trusted proxy, the address the proxy appended; None when there is no request (no
    limit)."""
    if request is None:
        return None
    return visitor_of(request)


# The chart's reference lines once the background warm-up has them: read without waiting, so a page
# never blocks on the download or the counting.
_refs: Memo[str, References] = Memo(size=1)


def _warm_references() -> None:
    """The character vocabulary's reference lines, computed once in the background (downloading
    the texts first on a fresh clone), so that the chart has them before anyone presses Start."""
    try:
        _refs.put("char", references(load_corpus("char")))
    except Exception:  # noqa: BLE001 -- the first Start says what is wrong
        pass


def empty_figure():
    """The chart before Start: the reference lines when they are ready."""
    return learn_view.loss_figure(None, refs=_refs.peek("char"))


def ui_reference_lines(state: RunState | None):
    """The page's timer, until the reference lines are drawn: the chart with them once they are
    computed, unless a run already shows its own; then the timer stops."""
    if state is not None:
        return gr.skip(), gr.Timer(active=False)
    if "char" not in _refs:
        return gr.skip(), gr.Timer(active=True)
    return empty_figure(), gr.Timer(active=False)


def _history(previous: RunState | None) -> list[RunState]:
    """The page's earlier runs, the one before this one last (a run that never trained left out)."""
    if previous is None:
        return []
    earlier = list(previous.history)
    if previous.losses and not previous.running:
        earlier.append(previous.summary())
    return earlier[-MAX_HISTORY:]


def _view(state: RunState | None, running: bool = False):
    history = state.history if state is not None else []
    return (
        learn_view.status_markdown(state),
        cards_html(learn_view.stats_cards(state)),
        learn_view.loss_figure(state, history, refs=_refs.peek("char")),
        learn_view.samples_html(state),
        learn_view.runs_table([*history, state] if state is not None else []),
        gr.update(interactive=not running),
    )


def ui_learn(seed, init, learning_rate, size, positions, previous: RunState | None, request: gr.Request = None) -> Iterator[tuple]:
    """A run, shown as it trains; Start is disabled until it ends. The session's earlier runs
    stay in the table and, the last few, on the chart in grey."""
    s = settings(DEFAULT_SECONDS, seed, init, learning_rate, size, positions, DEFAULT_STEPS)
    history = _history(previous)
    runs = TRAINER.run(s, visitor=visitor_id(request))
    last = 0.0
    try:
        for state in runs:
            state.history = history
            now = time.perf_counter()
            if not state.running or now - last >= UI_EVERY_S:
                last = now
                yield (*_view(state, running=state.running), state)
    except Exception:
        # The run failed after it started: Start comes back with the error message.
        yield (*[gr.skip()] * 5, gr.update(interactive=True), gr.skip())
        raise
    finally:
        runs.close()


def ui_stopped(state: RunState | None):
    """The Stop button: the run is cancelled (``cancels``), which stops it; then the page shows
    the run as it ended (the cancelled stream sends no last update of its own) and Start again."""
    if state is None:
        return (*[gr.skip()] * 5, gr.update(interactive=True))
    deadline = time.perf_counter() + STOP_WAIT_S
    while state.running and state.status != "waiting" and time.perf_counter() < deadline:
        time.sleep(0.05)
    if state.status in ("waiting",) or (state.stop_reason == "stopped" and not state.losses):
        return ("Stopped before your turn came: press **Start** to queue again.", *[gr.skip()] * 4, gr.update(interactive=True))
    return _view(state, running=False)


def ui_continue(prompt, seed, state: RunState | None) -> str:
    """The learner's own model, once its run has ended, continuing a prompt."""
    text = continue_text(state, prompt, seed)
    return f'<div class="gen-output"><span class="gen-prompt">{html.escape(prompt)}</span>{html.escape(text)}</div>'


def api_learn(seconds: int, seed: int, init: str, steps: int = DEFAULT_STEPS, request: gr.Request = None) -> Iterator[dict]:
    """Train a small GPT from random weights on the server's CPU for `steps` steps (1-5000,
    default 500), or until `seconds` (5-300) have passed, streamed: one JSON object per update
    with `status` (waiting, preparing, training, finished, stopped), `message` (while waiting: the
    place in line), `vocab_size`, `references` (ln V, unigram, bigram, shipped model, in nats per
    character), `step`, `steps`, `tokens`, `tokens_per_s`, `losses` ([step, loss] for every step,
    the first at step 0 before any update), `samples` ([step, text] every 50 steps and the last),
    and, at the end, `val_loss` (on `val_windows` windows, `val_tokens` characters, of the held-out
    plays) and `stop_reason` (steps, time budget, stopped, diverged, or others waiting: ended at its fair
    share to give the learners in line a turn, said in `message`). `init`: "proper" or "skewed"
    (the token embedding, tied to the output head, x10: confidently wrong logits); `seed` 0-2147483647; the other settings at their defaults (learning rate
    "good", size "tiny", learned positions). Many runs train at once; one run per visitor."""
    s = settings(seconds, seed, init, steps=steps)
    last = 0.0
    for state in TRAINER.run(s, visitor=visitor_id(request), poll_s=0.5):
        now = time.perf_counter()
        if not state.running or now - last >= API_EVERY_S:
            last = now
            yield state.to_api()


# "Run on": where the run trains. Its events in the browser have no Python function (learn_on.js),
# so a run there costs the server nothing but the files; which controls show is the body's
# pg-learn-browser class (page.css).
SERVER, BROWSER = "server", "browser"
RUN_ON_CHOICES = [("this browser", BROWSER), ("the server", SERVER)]


def learn_on_js(browser: BrowserFiles) -> dict[str, str]:
    """The page's JavaScript of each browser event: ``mount`` (the panel's ``js_on_load``),
    ``mode`` (the Run on radio's change), ``start``, ``stop``, ``prepare`` (a size or position kind
    chosen) and ``continue``."""
    js = page_side_js(browser.learn_config()["module"], browser.learn_config(), "pg-learn-browser", "Watch it learn in this browser")
    module = js["module"]
    return {
        "mount": js["mount"],
        "mode": js["mode"],
        "start": f"(seed, init, learning_rate, size, positions) => {{ {module}.then((m) => m.start({{seed, init, learning_rate, size, positions}})); }}",
        "stop": f"() => {{ {module}.then((m) => m.stop()); }}",
        "prepare": f"(size, positions) => {{ {module}.then((m) => m.prepare(size, positions)); }}",
        "continue": f"(prompt, seed) => {{ {module}.then((m) => m.continueText(prompt, seed)); }}",
    }


def run_on_info(browser: BrowserFiles | None) -> str:
    if browser is None or not browser.available or not browser.learn_code:
        return (browser.problem or browser.learn_problem) if browser is not None else "Run on this browser is not set up in this app."
    return (
        "This browser: the same run (the same initial weights, batches and samples for a seed) trained on this device "
        "by the step graph of model/gpt.py and model/train.py, exported to ONNX, in onnxruntime-web; about 3 MB to "
        "download besides onnxruntime-web. It needs WebAssembly with SIMD and module Web Workers (Chrome 91+, Firefox 114+, "
        "Safari 16.4+); elsewhere the server trains it. The server: its CPU, shared with the class, one run per learner "
        "(also the /learn API)."
    )


def build(browser: BrowserFiles | None = None) -> dict[str, gr.components.Component]:
    """The tab's components and events (call inside ``gr.Tab``); ``browser``: the files "Run on: this
    browser" loads (without them the server trains and the choice says why)."""
    threading.Thread(target=_warm_references, name="learn-references", daemon=True).start()
    d = LearnSettings()
    # The runs the Stop view, the table, the grey curves and "Continue with your model" read back (a
    # run holds the model it trained: ~3 MB at the "small" size), the most recent 32.
    results = ResultStore()
    js = learn_on_js(browser) if browser is not None and browser.available and browser.learn_code else None
    note(learn_view.intro_words("in this browser or on this server's CPU", "half a minute on the server"))
    with gr.Row(equal_height=False, elem_classes=SECTION):
        with gr.Column(scale=2, min_width=300):
            run_on = gr.Radio(
                RUN_ON_CHOICES, value=BROWSER if js else SERVER, label="Run on", elem_id="learn-run-on",
                info=run_on_info(browser), interactive=js is not None,
            )
            gr.HTML("", elem_id="learn-run-on-why", padding=False)
            init = gr.Radio(
                list(INITS), value=d.init, label="Initialisation", elem_id="learn-init",
                info=f"proper: {INIT_WHY['proper']}; skewed: {INIT_WHY['skewed']}.",
            )
            lr = gr.Radio(
                list(LEARNING_RATES), value=d.learning_rate, label="Learning rate", elem_id="learn-lr",
                info="; ".join(f"{k}: {v}" for k, v in LR_WHY.items()) + ".",
            )
            size = gr.Radio(
                list(SIZES), value=d.size, label="Model size", elem_id="learn-size",
                info="; ".join(f"{k}: {v}" for k, v in SIZE_WHY.items()) + ".",
            )
            positions = gr.Radio(
                list(POSITIONS), value=d.positions, label="Positions", elem_id="learn-positions",
                info="; ".join(f"{k}: {v}" for k, v in POSITION_WHY.items()) + ".",
            )
            seed = gr.Number(
                value=d.seed, precision=0, minimum=0, maximum=MAX_SEED, label="Seed", elem_id="learn-seed",
                info="the initial weights and the batches: same seed and settings, same curve, however busy the server",
                min_width=120,
            )
            with gr.Row():
                start = gr.Button(f"Start ({d.steps:,} steps)", variant="primary", elem_id="learn-start", min_width=100)
                stop = gr.Button("Stop", variant="stop", elem_id="learn-stop", min_width=80)
                if js:
                    start_here = gr.Button(f"Start ({d.steps:,} steps)", variant="primary", elem_id="learn-start-browser",
                                           min_width=100, interactive=False)
                    stop_here = gr.Button("Stop", variant="stop", elem_id="learn-stop-browser", min_width=80, interactive=False)
            error = error_slot("learn-error")
        with gr.Column(scale=3, min_width=300):
            if js:  # the browser's run: its outputs written by the page only (learn_on.js, web/views/learn.js)
                gr.HTML('<div class="pg-browser-panel"></div>', elem_id="learn-browser", js_on_load=js["mount"], padding=False)
            status = gr.Markdown(learn_view.status_markdown(None), elem_id="learn-status", elem_classes=RESULT)
            stats = gr.HTML(cards_html(learn_view.stats_cards(None)), elem_id="learn-stats", elem_classes=RESULT)
            chart = gr.Plot(empty_figure(), show_label=False, elem_id="learn-chart", elem_classes=RESULT)
            samples = gr.HTML(learn_view.samples_html(None), elem_id="learn-samples", elem_classes=RESULT)
            runs = gr.HTML(learn_view.runs_table([]), elem_id="learn-runs", elem_classes=RESULT)
            with gr.Column(elem_classes=SECTION):
                prompt = gr.Textbox(
                    PROMPT, label="Try your model: a prompt", lines=2, max_lines=6, elem_id="learn-prompt",
                    info=f"when a run has ended, the model it trained writes {CONTINUE_CHARS} characters after it",
                )
                try_button = gr.Button("Continue with your model", elem_id="learn-try")
                if js:
                    try_here = gr.Button("Continue with your model", elem_id="learn-try-browser", interactive=False)
                try_error = error_slot("learn-try-error")
                try_output = gr.HTML("", elem_id="learn-try-out", elem_classes=RESULT)
    note(learn_view.READING_WORDS)
    state = results.state()
    # The reference lines, drawn before Start once computed (a second or two after the app starts).
    lines_timer = gr.Timer(0.5)
    lines_timer.tick(
        *results.through(user_errors(ui_reference_lines), inputs=[state], outputs=[chart, lines_timer], state=state, read="state"),
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    event = on_input(
        start.click,
        *results.through(
            ui_learn, inputs=[seed, init, lr, size, positions, state], outputs=[status, stats, chart, samples, runs, start, state],
            state=state, read="previous",
        ),
        error=error, concurrency_id=LEARN, concurrency_limit=LEARN_CONCURRENCY, show_progress="hidden",
    )
    # As in Text generation: the cancel first, then the view of the run as it stopped.
    stop.click(None, cancels=[event], api_visibility="private")
    stop.click(
        *results.through(
            user_errors(ui_stopped), inputs=[state], outputs=[status, stats, chart, samples, runs, start], state=state, read="state",
        ),
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    on_input(
        try_button.click, *results.through(ui_continue, inputs=[prompt, seed, state], outputs=[try_output], state=state, read="state"),
        error=try_error,
        concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY, show_progress="minimal",
    )
    if js:  # the browser's events: no Python function, no queue (they never reach the server)
        run_on.change(None, inputs=[run_on], js=js["mode"], api_visibility="private", queue=False)
        start_here.click(None, inputs=[seed, init, lr, size, positions], js=js["start"], api_visibility="private", queue=False)
        stop_here.click(None, js=js["stop"], api_visibility="private", queue=False)
        for choice in (size, positions):
            choice.change(None, inputs=[size, positions], js=js["prepare"], api_visibility="private", queue=False)
        try_here.click(None, inputs=[prompt, seed], js=js["continue"], api_visibility="private", queue=False)
    gr.api(user_errors(api_learn), api_name="learn", concurrency_id=LEARN, concurrency_limit=LEARN_CONCURRENCY)
    return {"seed": seed, "init": init, "learning_rate": lr, "size": size, "positions": positions, "text": prompt, "run_on": run_on}  # its controls, by the names of a link's parameters (playground/links.py)
