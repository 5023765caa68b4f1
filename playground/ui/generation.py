"""Text generation tab: prompt and sampling settings in, tokens streamed out (shaded by their
probability), a stop button, speed statistics, and the top candidates of any step.

Also registers the ``/generate`` API endpoint (streaming JSON)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import gradio as gr

from .. import hub_link, limits
from .. import next_token as nt
from ..generation import streaming, views
from ..generation.browser import from_browser, read_result
from ..generation.figures import candidates_figure, step_figure
from ..generation.params import DEFAULT_PRECISION, DEFAULTS, EXAMPLE_PROMPTS, PRECISION_LABELS, PRECISIONS
from ..generation.state import GenerationState, with_history
from ..lessons import LESSONS
from ..memo import Memo
from ..resources import AUTO_PRECISION, Resources, planned_provider
from ..tokens import decode, token_text, visible_whitespace
from ..validation import InputError, validate_int
from . import gradio_internals
from .page_side import page_side_js
from .common import GENERATE, GENERATION_CONCURRENCY, LIGHT, LIGHT_CONCURRENCY, on_input, user_errors
from .serving.browser_files import BrowserFiles
from .serving.sessions import ResultStore, current_visitor
from .widgets import RESULT, SECTION, error_slot, next_tab, note, text_with_examples

LESSON = LESSONS["generation"]

# While tokens stream the page's event has three outputs, the text, the stats and the result key,
# updated at most every UI_EVERY_S. Each update is a round trip through Gradio's worker threads
# and its event loop for every learner at once, and Gradio builds a new component for every
# output an update leaves unchanged (gr.skip()): with the chart, pickers and notes among the
# outputs, each update cost the event loop far more than the text alone. With more than UI_CROWD page generations
# running the interval grows in proportion, up to the API's (API_EVERY_S). The candidates chart,
# the step pickers and the speeds are filled once, when the generation ends, by an event of their
# own (ui_generated). docs/app.md ("Generation under load") has the measurement:
# `python -m benchmarks.page_generate`.
UI_EVERY_S = 0.1
UI_CROWD = 4
# An API client reads the stream through HTTP and JSON, not a chart: 4 updates a second keep it
# live, and each update is a round trip of Gradio's worker threads and event loop, which 16
# streaming clients at 20 a second kept busy enough to slow every other call.
API_EVERY_S = 0.25
STOP_WAIT_S = 5.0  # the most the Stop button waits for the stopped stream to close
STOP_GRACE_S = 1.0  # ... and for a generation clicked just before it to begin


class Stop(threading.Event):
    """A generation's stop signal: set by the page's Stop, and read as set once Gradio has stopped
    the event whose handler made it (cancelled, or its client gone: gradio_internals.event_stopped).
    Gradio stops a generator only when it yields, and one waiting for its turn in the decoding loop
    does not: this way it leaves the loop's line at once, and frees its handler."""

    def __init__(self) -> None:
        super().__init__()
        self._stopped = gradio_internals.event_stopped()

    def is_set(self) -> bool:
        return super().is_set() or (self._stopped is not None and self._stopped())


@dataclasses.dataclass
class Running:
    """A page generation from the moment its handler begins: its stop signal, and its state once
    its settings are checked (None before)."""

    stop: threading.Event = dataclasses.field(default_factory=Stop)
    state: GenerationState | None = None
    ended: threading.Event = dataclasses.field(default_factory=threading.Event)


class RunningGenerations:
    """The page's generations running now, by session: what the Stop button stops, from its first
    moment (a generation waiting for room in the batch has yielded nothing yet, so neither Gradio's
    cancel nor the session's result key reaches it). One entry per running generation, removed
    when it ends: bounded by the generation slots."""

    def __init__(self) -> None:
        self._running: dict[str, Running] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._running)

    def begin(self, session: str | None) -> Running:
        running = Running()
        if session:
            with self._lock:
                self._running[session] = running
        return running

    def end(self, session: str | None, running: Running) -> None:
        running.ended.set()
        with self._lock:
            if session and self._running.get(session) is running:
                del self._running[session]

    def get(self, session: str | None) -> Running | None:
        with self._lock:
            return self._running.get(session) if session else None


def ui_every_s(running: int) -> float:
    """Seconds between two streamed updates of the page while ``running`` page generations run."""
    return min(API_EVERY_S, UI_EVERY_S * max(1.0, running / UI_CROWD))


def _session(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None) if request is not None else None


def _step_choices(state: GenerationState | None) -> tuple[int, int]:
    n = max((len(s) for s in state.steps), default=0) if state else 0
    return n, len(state.steps) if state else 0


def _picker_updates(state: GenerationState, sample: int = 0):
    n_steps, n_samples = _step_choices(state)
    # A slider needs minimum < maximum: one step still gets the range 1..2 (clamped when read).
    slider = gr.update(maximum=max(2, n_steps), value=max(1, n_steps), interactive=n_steps > 1, visible=n_steps > 0)
    radio = gr.update(
        choices=[(f"Sample {i + 1}", i) for i in range(n_samples)], value=min(sample, max(0, n_samples - 1)), visible=n_samples > 1
    )
    return slider, radio


def _chart(state: GenerationState | None, sample: Any, step: Any):
    """The candidates chart and its caption for a step (the last one for 10**9)."""
    try:
        return step_figure(state, sample, step)
    except (TypeError, ValueError):  # a picker value in flight while the state changed
        return gr.skip(), gr.skip()


def ui_pick_token(state: GenerationState | None, evt: gr.EventData):
    """A click on a generated token (the output's click event carries its sample and step)."""
    data = getattr(evt, "_data", None)  # what the page's click handler sent (None: a hand-made request)
    if not isinstance(data, dict) or "step" not in data:
        raise InputError(
            'a token click carries the token\'s sample and step as event data, e.g. {"sample": 0, "step": 3}; '
            "this request had none"
        )
    sample = validate_int(data.get("sample", 0), name="sample", minimum=0, maximum=limits.MAX_SAMPLES - 1)
    step = validate_int(data["step"], name="step", minimum=1, maximum=limits.MAX_NEW_TOKENS)
    if state is None:  # no generation yet in this session: nothing to show
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return gr.update(value=step), gr.update(value=sample), *_chart(state, sample, step)


# Clicking a token span sends its sample and step to the server (Gradio 6's gr.HTML trigger).
TOKEN_CLICK_JS = """
element.addEventListener('click', (e) => {
  const t = e.target.closest('.gen-tok');
  if (t) trigger('click', {sample: Number(t.dataset.sample), step: Number(t.dataset.step)});
});
"""


# On a phone the output is a screen and a half below the Generate button: bring it into view
# (only when it is not already, so a wide page does not move).
SHOW_OUTPUT_JS = """() => {
  const el = document.querySelector('#gen-stats');
  const r = el && el.getBoundingClientRect();
  if (r && (r.top > window.innerHeight * 0.6 || r.bottom < 0)) el.scrollIntoView({behavior: 'smooth', block: 'start'});
}"""


# "Run on: this browser": the page runs the model itself (web/app/run_on.js, which loads
# the engine of web/engine/ and the model from the app, serving/browser_files.py). Its events have
# no Python function: they never reach the server, so they work when the server is busy, which is
# when the page offers them. Which controls show is the body's pg-run-browser class (page.css).
SERVER, BROWSER = "server", "browser"
RUN_ON_CHOICES = [("the server", SERVER), ("this browser", BROWSER)]


def run_on_js(browser: BrowserFiles) -> dict[str, str]:
    """The page's JavaScript of each browser event: ``mount`` (the panel's ``js_on_load``),
    ``mode`` (the Run on radio's change), ``generate``, ``next`` and ``stop``. Where a model repository is
    published, the model comes from the Hub, the Space's copy when the Hub cannot give it."""
    repo = hub_link.published_repo()
    hub_model = hub_link.model_address(repo, hub_link.hub_url()) if repo else None
    js = page_side_js(browser.page_config()["runOn"], {**browser.page_config(hub_model), "limits": limits.for_browser()},
                      "pg-run-browser", "Run on this browser")
    module, config = js["module"], js["config"]
    return {
        "mount": js["mount"],
        "mode": js["mode"],
        "generate": "async (prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples) => "
                    f"(await {module}).generate({{prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples}}, {config})",
        "next": "async (prompt, temperature, top_k, top_p, seed) => "
                f"(await {module}).next({{prompt, temperature, top_k, top_p, seed}}, {config})",
        "stop": f"() => {{ {module}.then((m) => m.stop()); }}",
    }


# What the precision choice becomes while this browser runs the model (the choice stays in place, off).
BROWSER_PRECISION = (
    "**Precision in this browser**: 8 bits, the Hub folder's `model_quantized.onnx` on onnxruntime-web (its weights "
    "in 8 bits, its activations in float32). Full precision (`model.onnx`) and the server's 8 bits (`model_int8.onnx`) "
    "run on the server: choose *Run on: the server* for them. A seed writes one text per file: the browser's and "
    "the server's 8 bits are two quantizations."
)


def run_on_info(browser: BrowserFiles) -> str:
    if not browser.available:
        return browser.problem or ""
    return (
        f"This browser: the model's 8-bit file ({browser.model_mb:.1f} MB, downloaded once, then kept by the browser) runs "
        "on this device with onnxruntime-web, whatever the server's load: Generate, Next token, several samples and "
        "every step's candidates (the server only draws the chart from the browser's numbers). Full precision is the server's."
    )


# Slow motion, in the page alone: the model writes a hundred tokens in a fraction of a second, too
# fast to see the text grow token by token, so the tokens already shown are hidden and shown again
# one every REPLAY_MS, with a running count; nothing is asked of the server.
REPLAY_MS = 90
REPLAY_JS = f"""() => {{
  const out = document.querySelector('#gen-output');
  const toks = out ? [...out.querySelectorAll('.gen-tok')] : [];
  if (!toks.length || out.dataset.replaying) return;
  out.dataset.replaying = 'true';
  const note = document.createElement('div');
  note.className = 'pg-replay-note';
  out.before(note);
  toks.forEach((t) => (t.style.visibility = 'hidden'));
  let i = 0;
  const tick = () => {{
    if (i < toks.length && toks[i].isConnected) {{
      toks[i++].style.visibility = '';
      note.textContent = `Slow motion: token ${{i}} of ${{toks.length}}, one every {REPLAY_MS} ms (the model wrote them far faster: see tokens/s)`;
      setTimeout(tick, {REPLAY_MS});
    }} else {{
      toks.forEach((t) => (t.style.visibility = ''));
      note.remove();
      delete out.dataset.replaying;
    }}
  }};
  tick();
}}"""


def step_seed(seed: int, prompt_tokens: int) -> int:
    """The seed of one "Next token" draw: the seed plus the prompt's length in tokens, so the
    same prompt and seed repeat the same token and each new step draws afresh (one seed for
    every step would use the same random number each time, always the same rank of the CDF)."""
    return (seed + prompt_tokens) % (limits.MAX_SEED + 1)


def _precision(value: Any) -> Any:
    """The page's precision radio: None (a hand-made request without it) is the page's default."""
    return DEFAULT_PRECISION if value is None else value


class Speeds:
    """The decoding speed of the last page generation in each precision on this server, for the
    note beside the choice (two numbers, kept in place)."""

    def __init__(self) -> None:
        self._tps: dict[str, float] = {}

    def record(self, precision: str, state: GenerationState) -> None:
        if precision in PRECISIONS and state.tokens_per_s is not None:
            self._tps[precision] = state.tokens_per_s

    def markdown(self) -> str:
        def one(p: str) -> str:
            tps, label = self._tps.get(p), PRECISION_LABELS[p].split(" (")[0].lower()
            return f"{label} **{tps:.0f}** tokens/s" if tps else f"{label}: not run yet"

        return (
            "Speed on this server, the last generation in each: " + " · ".join(one(p) for p in PRECISIONS)
            + " (shared by everyone generating at the moment)."
        )


class Generations:
    """The page's generations in one app, on the engines of its :class:`~playground.resources.Resources`:
    those running now, by session (what its Stop reaches), the last speed in each precision (the
    note beside the choice) and the live chart's distributions. Made by :func:`build`, one per page
    built: nothing of it is the module's."""

    def __init__(self, res: Resources) -> None:
        self.res = res
        self.running = RunningGenerations()
        self.speeds = Speeds()
        # One forward pass per prompt and precision, the last 64: moving a slider only reshapes it.
        self.distributions: Memo[tuple[tuple[int, ...], str], nt.NextTokenDistribution] = Memo(size=64)

    def ui_next_token(self, prompt, temperature, top_k, top_p, seed, precision=DEFAULT_PRECISION, previous: GenerationState | None = None):
        """One token, Transformer Explainer's "generate next token": drawn with the settings, shown
        with its candidates, and appended to the prompt (whose new distribution the live chart then
        shows); the steps taken before it stay listed under the chart (``previous``: the session's
        last result)."""
        params = streaming.prepare(self.res, prompt, 1, temperature, top_k, top_p, seed, 1, _precision(precision))
        params = dataclasses.replace(params, seed=step_seed(params.seed, len(params.prompt_ids)))
        state = None
        for state in streaming.run(self.res, params, visitor=current_visitor()):
            pass
        state = with_history(state, previous, prompt)
        slider, radio = _picker_updates(state)
        appended = state.completions()[0]
        new_prompt = prompt + appended
        # The prompt box changes under the learner's eyes: say what joined it (a line break would not show).
        said = f"**Next token** appended “{visible_whitespace(appended)}” to the prompt.\n\n" if appended else ""
        return (
            new_prompt, views.tokens_html(state), said + views.stats_markdown(state), state, slider, radio, *_chart(state, 0, 1),
            views.history_html(state), gr.skip(),
        )


    def ui_live(self, prompt, temperature, top_k, top_p, precision=DEFAULT_PRECISION):
        """The live chart under the settings: the distribution after the prompt (computed once per
        prompt) reshaped by the settings as they move. An empty box (while typing) changes nothing."""
        if not isinstance(prompt, str) or not prompt.strip():
            return gr.skip()
        engine = self.res.engine()
        settings = nt.validate_sampling(temperature, top_k, top_p, vocab_size=engine.vocab_size)
        params = streaming.prepare(self.res, prompt, 1, settings.temperature, settings.top_k, settings.top_p, 0, 1, _precision(precision))
        return nt.distribution_figure(self.distribution(tuple(params.prompt_ids), params.precision), settings)


    def distribution(self, prompt_ids: tuple[int, ...], precision: str) -> nt.NextTokenDistribution:
        key = (prompt_ids, precision)
        with self.distributions.lock:
            if key in self.distributions:
                return self.distributions.get(key)
        # Computed outside the lock (not Memo.get): one learner's pass need not wait for another's.
        distribution = nt.next_token_distribution(list(prompt_ids), self.res.engine_for(precision)[0])
        self.distributions.put(key, distribution)
        return distribution

    def browser_state(self, result: Any) -> GenerationState | None:
        """The browser's generation (run_on.js's JSON text) as a state, its settings checked as the
        server checks its own; None when the page ran nothing."""
        data = read_result(result)
        if data is None:
            return None
        s = data.get("settings")
        if not isinstance(s, dict):
            raise InputError("a browser generation's result must carry its settings")
        params = streaming.prepare(self.res, s.get("prompt"), s.get("max_new_tokens"), s.get("temperature"), s.get("top_k"), s.get("top_p"),
                                   s.get("seed"), s.get("num_samples"))
        return from_browser(data, params, vocab_size=self.res.engine().vocab_size, decode=decode, decode_one=token_text)


    def ui_browser_generated(self, result: Any):
        """After a Generate in this browser: the text, the step pickers and the chart of the last
        step, drawn by the views the server's generations use from what the browser drew."""
        state = self.browser_state(result)
        if state is None:
            return (gr.skip(),) * 7
        slider, radio = _picker_updates(state)
        return views.tokens_html(state), state, slider, radio, *_chart(state, 0, 10**9), ""


    def ui_browser_next(self, result: Any, previous: GenerationState | None = None):
        """After a Next token in this browser: the prompt with the token appended, its text, chart and
        the steps taken before it (``previous``: the session's last result), as ui_next_token's."""
        state = self.browser_state(result)
        if state is None:
            return (gr.skip(),) * 8
        prompt = state.params.prompt
        state = with_history(state, previous, prompt)
        slider, radio = _picker_updates(state)
        return (prompt + state.completions()[0], views.tokens_html(state), state, slider, radio, *_chart(state, 0, 1),
                views.history_html(state))

    def ui_generate(
        self, prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples, precision, request: gr.Request | None = None,
    ):
        """The Generate button: the text and the stats streamed (at most every UI_EVERY_S), then,
        once, the chart of the last step and the pickers. The session's result key is written with
        the first update (the state is then filled in place)."""
        session = _session(request)
        running = self.running.begin(session)  # first: a Stop from here on reaches it
        skip = gr.skip()
        try:
            params = streaming.prepare(self.res, prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples, _precision(precision))
            state = streaming.new_state(params, self.res.engine_for(params.precision)[0])
            state.stop_requested = running.stop
            running.state = state
            last_ui, first = 0.0, True
            for state in streaming.run(self.res, params, state=state, visitor=current_visitor()):
                now = time.perf_counter()
                if state.finished:
                    self.speeds.record(params.precision, state)
                    yield views.tokens_html(state), views.stats_markdown(state), state
                elif first or now - last_ui >= ui_every_s(len(self.running)):
                    last_ui = now
                    yield views.tokens_html(state), views.stats_markdown(state), state if first else skip
                    first = False
        finally:
            self.running.end(session, running)


    def ui_generated(self, state: GenerationState | None):
        """After a generation (the Generate event's own follow-up): the step pickers, the chart of
        its last step, no "Next token" history, and the speeds note, built once."""
        if state is None or not state.finished:
            return (gr.skip(),) * 6
        slider, radio = _picker_updates(state)
        return slider, radio, *_chart(state, 0, 10**9), "", self.speeds.markdown()

    def ui_stopped(self, state: GenerationState | None, request: gr.Request | None = None):
        """The Stop button: the session's running generation is told to stop (it ends within
        runtime.batching.STOP_POLL_S, even before its first token), then the page shows every token
        generated up to there and that the user stopped it. A generation that already ended keeps
        its own stop reason.

        A Stop clicked a moment after Generate can arrive before the generation's handler began:
        it waits up to STOP_GRACE_S for one to begin. It then waits for the stream to close: updates
        the stream sent before that could otherwise reach the page after this answer and overwrite it."""
        session = _session(request)
        running = self.running.get(session)
        if running is None and session:
            deadline = time.monotonic() + STOP_GRACE_S
            while running is None and time.monotonic() < deadline:
                time.sleep(0.02)
                running = self.running.get(session)
        if running is not None:
            running.stop.set()  # before its state exists, too: the state takes this very signal
            deadline = time.monotonic() + STOP_WAIT_S
            while running.state is None and not running.ended.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)  # its settings are being checked: a moment
            state = running.state
        # A generation that ended by itself says so in its own final update (a stopped one ends only
        # after its stream closed, which the wait below covers).
        if state is None or (state.finished and not state.stop_requested.is_set()):
            return gr.skip(), gr.skip()
        state.stop_requested.set()
        state.stream_closed.wait(timeout=STOP_WAIT_S)
        # A snapshot: the stream may still be appending its last step, and the text and the stats
        # must count the same tokens. Unfinished samples' reason is "stopped"; a sample that ended by
        # itself meanwhile keeps its own (Gradio's cancel may have kept the stream's final update off
        # the page, so this answer is the one the page shows).
        steps, reasons = [list(s) for s in state.steps], list(state.stop_reasons)
        stopped = dataclasses.replace(state, steps=steps, stop_reasons=reasons, notices=list(state.notices), finished=True)
        return views.tokens_html(stopped), views.stats_markdown(stopped)

    def api_generate(
        self, prompt: str, max_new_tokens: int, temperature: float, top_k: int, top_p: float, seed: int, precision: str = AUTO_PRECISION,
    ) -> Iterator[dict]:
        """Generate text from a prompt, streamed: one JSON object per update with `completion` (the
        new text so far), `token_ids`, `new_tokens`, `finished`, `stop_reason`,
        `time_to_first_token_s`, `tokens_per_s`, `provider` (CPU or CUDA execution provider) and
        `model_file` (the ONNX file generating: `model_int8.onnx` on a CPU, `model.onnx` on CUDA).
        As in transformers, OpenAI's API, llama.cpp and Ollama, temperature 0 is greedy (always the
        most likely token; seed, top_k and top_p then change nothing) and top_k 0 keeps every token.
        Limits: prompt 1-4000 characters (longer than the context keeps its last tokens),
        max_new_tokens 1-512, temperature 0-5, top_k 0-50257, top_p in (0, 1], seed 0-4294967295.
        precision (optional, last): "auto" (the default: the server's file, as above), "full"
        (`model.onnx`, as the page's default and the Inside and Compare tabs) or "8-bit" (`model_int8.onnx`)."""
        last = 0.0
        params = streaming.prepare(self.res, prompt, max_new_tokens, temperature, top_k, top_p, seed, 1, precision)
        state = streaming.new_state(params, self.res.engine_for(params.precision)[0])
        state.stop_requested = Stop()
        for state in streaming.run(self.res, params, n_candidates=None, state=state, visitor=current_visitor()):  # no chart, no probabilities
            now = time.perf_counter()
            if state.finished or state.new_tokens == 1 or now - last >= API_EVERY_S:
                last = now
                yield state.to_api()


def build(res: Resources, browser: BrowserFiles | None = None) -> dict[str, gr.components.Component]:
    """The tab's components and events (call inside ``gr.Tab``), generating with the engines of
    ``res``; ``browser``: the files "Run on:
    this browser" loads (without them the choice is off and says why)."""
    d = DEFAULTS
    browser = browser if browser is not None else BrowserFiles(problem="Run on this browser is not set up in this app.")
    gen = Generations(res)
    # The generations the token and step pickers read back (~5 MB for 4 x 512 tokens), the most recent 32.
    results = ResultStore()
    js = run_on_js(browser) if browser.available else None
    note(LESSON.intro)
    with gr.Row(equal_height=False, elem_classes=SECTION):
        with gr.Column(scale=2, min_width=320):
            prompt = text_with_examples(
                EXAMPLE_PROMPTS, label="Prompt", examples_label="Prompts in the corpus's style", lines=4, max_lines=12,
                elem_id="gen-prompt",
            )
            run_on = gr.Radio(
                RUN_ON_CHOICES, value=SERVER, label="Run on", elem_id="gen-run-on", info=run_on_info(browser),
                interactive=browser.available,
            )
            # Each button beside its twin of the other mode (page.css shows one of the two): the
            # same buttons in the same order whichever runs the model.
            with gr.Row():
                run = gr.Button("Generate", variant="primary", elem_id="gen-run", min_width=100)
                if js:
                    run_here = gr.Button("Generate", variant="primary", elem_id="gen-run-browser", min_width=100)
                step_btn = gr.Button("Next token", elem_id="gen-next", min_width=100)
                if js:
                    step_here = gr.Button("Next token", elem_id="gen-next-browser", min_width=100)
                stop = gr.Button("Stop", variant="stop", elem_id="gen-stop", min_width=80)
                if js:
                    stop_here = gr.Button("Stop", variant="stop", elem_id="gen-stop-browser", min_width=80)
                replay = gr.Button("Replay slowly", elem_id="gen-replay", min_width=100)
            error = error_slot("gen-error")
            max_new = gr.Slider(
                limits.MIN_NEW_TOKENS, limits.MAX_NEW_TOKENS, value=d["max_new_tokens"], step=1, label="Max new tokens",
                elem_id="gen-max",
            )
            temperature = gr.Slider(
                limits.MIN_TEMPERATURE, limits.MAX_TEMPERATURE, value=d["temperature"], step=0.05, label="Temperature",
                info="0 = greedy: always the most likely token", elem_id="gen-temp",
            )
            with gr.Row():
                top_k = gr.Number(
                    value=d["top_k"], precision=0, minimum=limits.MIN_TOP_K, maximum=limits.MAX_TOP_K, label="Top-k",
                    info="0 = no cut; 1 = only the most likely", elem_id="gen-topk", min_width=120,
                )
                top_p = gr.Slider(
                    limits.MIN_TOP_P, limits.MAX_TOP_P, value=d["top_p"], step=0.01, label="Top-p",
                    info="any p in (0, 1]; 1 = no cut", elem_id="gen-topp",
                )
            with gr.Row():
                seed = gr.Number(
                    value=d["seed"], precision=0, minimum=limits.MIN_SEED, maximum=limits.MAX_SEED, label="Seed", min_width=120,
                    elem_id="gen-seed",
                )
                samples = gr.Slider(limits.MIN_SAMPLES, limits.MAX_SAMPLES, value=1, step=1, label="Samples", elem_id="gen-samples")
            precision = gr.Radio(
                [(PRECISION_LABELS[p], p) for p in PRECISIONS], value=DEFAULT_PRECISION, label="Precision",
                elem_id="gen-precision",
            )
            if js:  # in place of the choice while this browser runs the model (page.css)
                note(BROWSER_PRECISION, elem_id="gen-precision-browser")
            speeds = note(gen.speeds.markdown(), elem_id="gen-speeds", result=True)
            note(LESSON.notes["precision"], elem_id="gen-precision-info")
            live_error = error_slot("gen-live-error")
            live = gr.Plot(label="Next token at these settings", show_label=False, elem_id="gen-live", elem_classes=RESULT)
            note(LESSON.notes["live_chart"])
        with gr.Column(scale=3, min_width=320):
            stats = gr.Markdown("Press **Generate**, or **Next token** to go one token at a time.", elem_id="gen-stats", elem_classes=RESULT)
            if js:  # the browser's progress line and stats, written by the page only (run_on.js)
                gr.HTML(
                    '<div class="pg-browser-panel"><div class="pg-browser-stats">Press <b>Generate</b>: the model '
                    "runs in this browser.</div></div>",
                    elem_id="gen-browser", js_on_load=js["mount"], padding=False,
                )
            note(views.provider_markdown(*planned_provider()), elem_id="gen-provider")
            output = gr.HTML(
                '<div class="gen-output gen-empty">The generated text appears here, token by token.</div>',
                label="Output",
                elem_id="gen-output",
                js_on_load=TOKEN_CLICK_JS,
                elem_classes=RESULT,
            )
            note(LESSON.notes["shading"])
            with gr.Row():
                sample_pick = gr.Radio(choices=[("Sample 1", 0)], value=0, label="Sample", visible=False, scale=1, elem_id="gen-sample-pick")
                step_pick = gr.Slider(1, 2, value=1, step=1, label="Step", visible=False, scale=3, elem_id="gen-step")
            chart = gr.Plot(
                value=candidates_figure(None), label="Top next-token candidates", show_label=False, elem_id="gen-chart",
                elem_classes=RESULT,
            )
            caption = note(elem_id="gen-caption", result=True)
            history = gr.HTML("", elem_id="gen-history", elem_classes=RESULT)
    next_tab(LESSON.next_sentence, LESSON.next_tab)
    state = results.state()

    # What Generate streams (few outputs: each update is cheap, see UI_EVERY_S), and what is
    # filled once a generation has ended; Next token fills both at once.
    streamed = [output, stats, state]
    ended = [step_pick, sample_pick, chart, caption, history, speeds]
    event = on_input(
        run.click,
        *results.through(
            gen.ui_generate, inputs=[prompt, max_new, temperature, top_k, top_p, seed, samples, precision, state],
            outputs=streamed, state=state,
        ),
        error=error,
        concurrency_id=GENERATE,
        concurrency_limit=GENERATION_CONCURRENCY,
        show_progress="minimal",
    )
    event.then(
        *results.through(user_errors(gen.ui_generated), inputs=[state], outputs=ended, state=state, read="state"),
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    on_input(
        step_btn.click,
        *results.through(
            gen.ui_next_token, inputs=[prompt, temperature, top_k, top_p, seed, precision, state], outputs=[prompt, *streamed, *ended],
            state=state, read="previous",
        ),
        error=error, concurrency_id=GENERATE, concurrency_limit=GENERATION_CONCURRENCY, show_progress="minimal",
    )
    for trigger in (run.click, step_btn.click):
        trigger(None, js=SHOW_OUTPUT_JS, api_visibility="private", queue=False)
    # No triggers: on page load and whenever one of its inputs changes (a slider while it moves).
    on_input(
        None, gen.ui_live, [prompt, temperature, top_k, top_p, precision], [live], error=live_error,
        concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY, trigger_mode="always_last", show_progress="hidden",
    )
    # Two listeners, in this order: the page sends the cancel first, then asks for the stopped
    # view, which waits for the stream to close (the page dispatches a click's listeners one
    # after the other, so the cancel and the view in one listener would wait for each other).
    replay.click(None, None, None, js=REPLAY_JS)
    stop.click(None, cancels=[event], api_visibility="private")
    stop.click(
        *results.through(user_errors(gen.ui_stopped), inputs=[state], outputs=[output, stats], state=state, read="state"),
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    for trigger in (step_pick.release, sample_pick.change):
        trigger(
            *results.through(
                user_errors(_chart), inputs=[state, sample_pick, step_pick], outputs=[chart, caption], state=state, read="state",
            ),
            api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
        )
    output.click(
        *results.through(
            user_errors(ui_pick_token), inputs=[state], outputs=[step_pick, sample_pick, chart, caption], state=state, read="state",
        ),
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    if js:
        # The browser's events: the page generates, then hands what it drew (JSON, through a hidden
        # box) to the server's views, which draw the text, the chart, the pickers and the steps.
        drawn = gr.Textbox(visible=False, elem_id="gen-browser-result")
        run_on.change(None, inputs=[run_on], js=js["mode"], api_visibility="private", queue=False)
        run_here.click(
            None, inputs=[prompt, max_new, temperature, top_k, top_p, seed, samples], outputs=[drawn], js=js["generate"],
            api_visibility="private", queue=False, show_progress="hidden",
        ).then(
            *results.through(user_errors(gen.ui_browser_generated), inputs=[drawn, state],
                             outputs=[output, state, step_pick, sample_pick, chart, caption, history], state=state),
            api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
        )
        step_here.click(
            None, inputs=[prompt, temperature, top_k, top_p, seed], outputs=[drawn], js=js["next"],
            api_visibility="private", queue=False, show_progress="hidden",
        ).then(
            *results.through(user_errors(gen.ui_browser_next), inputs=[drawn, state],
                             outputs=[prompt, output, state, step_pick, sample_pick, chart, caption, history], state=state,
                             read="previous"),
            api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
        )
        stop_here.click(None, js=js["stop"], api_visibility="private", queue=False)
    gr.api(
        user_errors(gen.api_generate),
        api_name="generate",
        concurrency_id=GENERATE,
        concurrency_limit=GENERATION_CONCURRENCY,
    )
    return {"text": prompt, "max_new_tokens": max_new, "temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed, "samples": samples}  # its controls, by the names of a link's parameters (playground/links.py)
