"""Watch it learn tab: a small GPT trained from random weights on the server's CPU, its loss
charted live against the reference lines, a sample of its text every few steps, Stop.

Also registers the ``/learn`` API endpoint (streaming JSON; the last update is the finished run).
One run trains at a time (playground/learn.Trainer): the others wait in line with a message."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator

import gradio as gr

from .. import learn
from .common import FORWARD, FORWARD_CONCURRENCY, LIGHT, on_input, user_errors
from .serving.sessions import ResultStore
from .widgets import RESULT, SECTION, cards_html, error_slot, note

LEARN = "learn"  # its own concurrency group: training never takes the light tabs' or generations' slots
# Learners served at once: one trains, the others wait in the Trainer's line, told their place.
# Past this many Gradio's queue holds them (the page shows its own place in the queue).
LEARN_CONCURRENCY = 4
MAX_WAITING_LEARNERS = 8  # then "busy, try again" (serving.harden's max_waiting in app.py)
UI_EVERY_S = 0.5  # page updates while a run trains
API_EVERY_S = 1.0
STOP_WAIT_S = 5.0  # the most the Stop view waits for the run to end
# The runs the Stop view, the next run's grey curve and "Continue with your model" read back (a run
# holds the model it trained: ~3 MB at the "small" size), the most recent 32.
RESULTS = ResultStore()


PROMPT = "Romeo.\n"  # a speaker as the training text writes one: the run has seen this layout


def _view(state: learn.RunState | None, previous: learn.RunState | None = None):
    return (
        learn.status_markdown(state),
        cards_html(learn.stats_cards(state)),
        learn.loss_figure(state, previous),
        learn.samples_html(state),
    )


def ui_learn(seconds, seed, init, learning_rate, size, positions, previous: learn.RunState | None) -> Iterator[tuple]:
    """A run, shown as it trains; the session's previous run stays on the chart in grey."""
    s = learn.settings(seconds, seed, init, learning_rate, size, positions)
    if previous is not None and (previous.running or not previous.losses):
        previous = previous.previous  # a run that never trained (stopped in line) is not worth a curve
    if previous is not None:
        previous.previous = None  # one run back, no chain of every run of the session
    last = 0.0
    for state in learn.TRAINER.run(s):
        state.previous = previous
        now = time.perf_counter()
        if not state.running or now - last >= UI_EVERY_S:
            last = now
            yield (*_view(state, previous), state)


def ui_stopped(state: learn.RunState | None):
    """The Stop button: the run is cancelled (``cancels``), which stops its thread; then the page
    shows the run as it ended (the cancelled stream sends no last update of its own)."""
    if state is None:
        return (*[gr.skip()] * 4,)
    deadline = time.perf_counter() + STOP_WAIT_S
    while state.running and state.status != "waiting" and time.perf_counter() < deadline:
        time.sleep(0.05)
    if state.status == "waiting":  # it never started: nothing to show but that
        return ("Stopped before your turn came: press **Start** to queue again.", *[gr.skip()] * 3)
    return _view(state, state.previous)


def ui_continue(prompt, seed, state: learn.RunState | None) -> str:
    """The learner's own model, once its run has ended, continuing a prompt."""
    text = learn.continue_text(state, prompt, seed)
    return f'<div class="gen-output"><span class="gen-prompt">{html.escape(prompt)}</span>{html.escape(text)}</div>'


def api_learn(seconds: int, seed: int, init: str) -> Iterator[dict]:
    """Train a small GPT from random weights on the server's CPU for `seconds` (5-120), streamed:
    one JSON object per update with `status` (waiting, preparing, training, finished, stopped),
    `message` (while waiting: the place in line), `vocab_size`, `references` (ln V, unigram,
    bigram, shipped model, in nats per character), `step`, `tokens`, `tokens_per_s`, `losses`
    ([step, loss] for every step, the first at step 0 before any update), `samples` ([step, text]
    every 50 steps) and, at the end, `val_loss` (held-out) and `stop_reason`. `init`: "proper" or
    "skewed" (output logits x10); `seed` 0-2147483647; the other settings at their defaults
    (learning rate "good", size "tiny", learned positions). One run trains at a time: others wait."""
    s = learn.settings(seconds, seed, init)
    last = 0.0
    for state in learn.TRAINER.run(s, poll_s=0.5):
        now = time.perf_counter()
        if not state.running or now - last >= API_EVERY_S:
            last = now
            yield state.to_api()


def build() -> dict[str, gr.components.Component]:
    """The tab's components and events (call inside ``gr.Tab``)."""
    note(
        "Here a GPT starts from random weights and learns Shakespeare while you watch, on this "
        "server's CPU, in about a minute. Its vocabulary is the **84 characters** of the training plays, so "
        "a model that knows nothing and guesses evenly scores **ln 84 = 4.43** nats per character "
        "(−ln(1/n) for n equally likely characters). Each step shows it 16 new windows of 64 characters, scores its guess of every "
        "next character with cross-entropy, and nudges every weight downhill (the same step as `python -m model.train`). "
        "The dashed lines are what simpler models score on two plays it never sees: the unigram model (each "
        "character's frequency), the bigram model (the frequency after the previous character), and the shipped "
        "model, converted from nats per GPT-2 token to nats per character."
    )
    d = learn.LearnSettings()
    with gr.Row(equal_height=False, elem_classes=SECTION):
        with gr.Column(scale=2, min_width=300):
            init = gr.Radio(
                list(learn.INITS), value=d.init, label="Initialisation", elem_id="learn-init",
                info=f"proper: {learn.INIT_WHY['proper']}; skewed: {learn.INIT_WHY['skewed']}.",
            )
            lr = gr.Radio(
                list(learn.LEARNING_RATES), value=d.learning_rate, label="Learning rate", elem_id="learn-lr",
                info="; ".join(f"{k}: {v}" for k, v in learn.LR_WHY.items()) + ".",
            )
            size = gr.Radio(
                list(learn.SIZES), value=d.size, label="Model size", elem_id="learn-size",
                info="; ".join(f"{k}: {v}" for k, v in learn.SIZE_WHY.items()) + ".",
            )
            positions = gr.Radio(
                list(learn.POSITIONS), value=d.positions, label="Positions", elem_id="learn-positions",
                info="; ".join(f"{k}: {v}" for k, v in learn.POSITION_WHY.items()) + ".",
            )
            with gr.Row():
                seed = gr.Number(
                    value=d.seed, precision=0, minimum=0, maximum=learn.MAX_SEED, label="Seed", elem_id="learn-seed",
                    info="the initial weights and the batches: same seed, same curve", min_width=120,
                )
                seconds = gr.Slider(
                    learn.MIN_SECONDS, learn.MAX_SECONDS, value=d.seconds, step=5, label="Seconds of training",
                    elem_id="learn-seconds",
                )
            with gr.Row():
                start = gr.Button("Start", variant="primary", elem_id="learn-start", min_width=100)
                stop = gr.Button("Stop", variant="stop", elem_id="learn-stop", min_width=80)
            error = error_slot("learn-error")
        with gr.Column(scale=3, min_width=300):
            status = gr.Markdown(learn.status_markdown(None), elem_id="learn-status", elem_classes=RESULT)
            stats = gr.HTML(cards_html(learn.stats_cards(None)), elem_id="learn-stats", elem_classes=RESULT)
            chart = gr.Plot(learn.loss_figure(None), show_label=False, elem_id="learn-chart", elem_classes=RESULT)
            samples = gr.HTML(learn.samples_html(None), elem_id="learn-samples", elem_classes=RESULT)
            with gr.Column(elem_classes=SECTION):
                prompt = gr.Textbox(
                    PROMPT, label="Try your model: a prompt", lines=2, max_lines=6, elem_id="learn-prompt",
                    info=f"when a run has ended, the model it trained writes {learn.CONTINUE_CHARS} characters after it",
                )
                try_button = gr.Button("Continue with your model", elem_id="learn-try")
                try_error = error_slot("learn-try-error")
                try_output = gr.HTML("", elem_id="learn-try-out", elem_classes=RESULT)
    note(
        "Each step's loss is measured on a batch the model has not trained on yet (a minute covers less than one "
        "pass over the plays), so the red curve is an honest score of new text; the number under it at the end is the "
        "held-out plays'. Try the skewed start with the same seed: the curve starts far above ln V and spends its "
        "first steps coming back down to it, the hockey stick. Your previous run stays on the chart in grey: change one "
        "setting, press Start again, and compare."
    )
    state = RESULTS.state()
    event = on_input(
        start.click, RESULTS.through(ui_learn, read=6, write=4, key=6), [seconds, seed, init, lr, size, positions, state],
        [status, stats, chart, samples, state],
        error=error, concurrency_id=LEARN, concurrency_limit=LEARN_CONCURRENCY, show_progress="hidden",
    )
    # As in Text generation: the cancel first, then the view of the run as it stopped.
    stop.click(None, cancels=[event], api_visibility="private")
    stop.click(
        user_errors(RESULTS.through(ui_stopped, read=0)), inputs=[state], outputs=[status, stats, chart, samples], api_visibility="private",
        concurrency_id=LIGHT, show_progress="hidden",
    )
    on_input(
        try_button.click, RESULTS.through(ui_continue, read=2), [prompt, seed, state], [try_output], error=try_error,
        concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY, show_progress="minimal",
    )
    gr.api(user_errors(api_learn), api_name="learn", concurrency_id=LEARN, concurrency_limit=LEARN_CONCURRENCY)
    return {"seconds": seconds, "seed": seed, "init": init, "learning_rate": lr, "size": size, "positions": positions, "text": prompt}  # its controls, by the names of a link's parameters (playground/links.py)
