"""Text generation tab logic (playground/generation/) on the real onnxruntime engine.

Expected values come from definitions: the engine's tokens must decode to the text shown, a
fixed seed repeats, top-k 1 is greedy and agrees with PyTorch's own greedy decoding, and every
bad setting is refused with a message naming it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import wait_for, shipped_resources
from playground import resources
from playground.generation import figures, streaming, views
from playground.generation.params import EXAMPLE_PROMPTS
from playground.generation.state import TOP_CANDIDATES
from playground.tokens import decode, encode, token_text
from playground.validation import InputError

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app


@pytest.fixture(scope="module")
def engine():
    from export import ensure_onnx

    ensure_onnx()
    return RES.engine()


@pytest.fixture(scope="module")
def enc():
    from model import get_tokenizer

    return get_tokenizer()


def run(prompt="ROMEO:", max_new_tokens=8, temperature=0.8, top_k=50, top_p=0.95, seed=1, num_samples=1):
    params = streaming.prepare(RES, prompt, max_new_tokens, temperature, top_k, top_p, seed, num_samples)
    states, final = [], None
    for final in streaming.run(RES, params):  # the same state object, updated in place
        states.append((final.new_tokens, final.finished))
    return params, states, final


def test_stream_yields_once_per_token_then_a_final_state(engine):
    _, states, final = run(max_new_tokens=6)
    counts = [n for n, _ in states]
    assert counts[:-1] == list(range(1, len(counts)))  # one more token per update
    assert states[-1][1] is True and not any(done for _, done in states[:-1])
    assert final.new_tokens <= 6
    assert final.stop_reason in ("length", "end of text")


def test_completion_is_the_decoded_tokens(engine, enc):
    _, _, final = run(max_new_tokens=10)
    ids = final.sample_ids(0)
    assert final.completions()[0] == enc.decode(ids)
    api = final.to_api()
    assert api["completion"] == enc.decode(ids) and api["token_ids"] == ids and api["finished"] is True
    assert api["provider"] == engine.provider


def test_same_seed_same_tokens_different_samples_batch(engine):
    _, _, a = run(seed=5, max_new_tokens=12)
    _, _, b = run(seed=5, max_new_tokens=12)
    assert a.sample_ids(0) == b.sample_ids(0)
    _, _, multi = run(seed=5, max_new_tokens=12, num_samples=3)
    assert len(multi.steps) == 3 and len(multi.completions()) == 3


def test_the_app_generates_with_the_integer_file_on_a_cpu(engine):
    _, _, final = run(max_new_tokens=2)
    if final.provider == "CPUExecutionProvider":
        assert final.model_file == "model_int8.onnx" and "`model_int8.onnx`" in views.stats_markdown(final)


def test_top_k_1_is_greedy_and_matches_pytorch(engine, enc):
    from export import artifact_paths
    from model import load_pretrained

    prompt = "KING HENRY V:\nOnce more unto the breach"
    params = streaming.prepare(RES, prompt, 8, 0.8, 1, 0.95, 123)
    fp32 = resources.open_engine(artifact_paths()["fp32"])  # PyTorch's weights exactly (the app's CPU file is 8-bit)
    for final in streaming.generate(fp32, params, token_text, decode):
        pass
    ids = enc.encode(prompt)
    model = load_pretrained()
    with torch.no_grad():
        ref = model.generate(torch.tensor([ids]), 8, temperature=0.0)[0, len(ids):].tolist()
    got = final.sample_ids(0)
    assert got == ref[: len(got)]  # the same greedy tokens (ours may stop early at <|endoftext|>)
    for step in final.steps[0]:  # greedy: the drawn token is the model's most probable one
        assert step.token.token_id == step.candidates[0].token_id
        assert step.token.sample_probability == pytest.approx(1.0)


def test_temperature_0_is_greedy_and_top_k_0_keeps_every_token(engine):
    """The conventions of transformers, OpenAI's API, llama.cpp and Ollama."""
    _, _, greedy = run(max_new_tokens=10, temperature=0, top_k=0, top_p=1.0, seed=1)
    _, _, other_seed = run(max_new_tokens=10, temperature=0, top_k=0, top_p=1.0, seed=2)
    _, _, top_1 = run(max_new_tokens=10, temperature=0.8, top_k=1, seed=3)
    assert greedy.sample_ids(0) == other_seed.sample_ids(0) == top_1.sample_ids(0)
    for step in greedy.steps[0]:
        assert step.token.token_id == step.candidates[0].token_id
        assert step.token.sample_probability == pytest.approx(1.0)
    # top-k 0 at temperature 1, top-p 1: nothing is cut, the sampled distribution is the model's.
    _, _, uncut = run(max_new_tokens=3, temperature=1.0, top_k=0, top_p=1.0)
    for step in uncut.steps[0]:
        for c in step.candidates:
            assert c.sample_probability == pytest.approx(c.probability, rel=1e-6, abs=1e-9)


def test_candidates_are_sorted_probabilities(engine):
    _, _, final = run(max_new_tokens=5, temperature=1.0, top_k=50257, top_p=1.0)
    for step in final.steps[0]:
        probs = [c.probability for c in step.candidates]
        assert probs == sorted(probs, reverse=True) and all(0 <= p <= 1 for p in probs)
        assert len(step.candidates) == TOP_CANDIDATES
        # No temperature, top-k or top-p: the sampled distribution is the model's own.
        for c in step.candidates:
            assert c.sample_probability == pytest.approx(c.probability, rel=1e-6, abs=1e-9)


def test_top_p_keeps_only_the_nucleus(engine):
    _, _, final = run(max_new_tokens=5, temperature=1.0, top_k=50257, top_p=0.3)
    for step in final.steps[0]:
        # Top-p's definition: a token is kept while the mass of the more probable ones is < p;
        # the kept ones are renormalised (so they gain probability), the rest get none.
        before = 0.0
        for c in step.candidates:
            if before < 0.3:
                assert c.sample_probability >= c.probability - 1e-9 and c.sample_probability > 0
            else:
                assert c.sample_probability == 0
            before += c.probability
        assert sum(c.sample_probability for c in step.candidates) <= 1 + 1e-6


def test_stats_report_speed_and_provider(engine):
    _, _, final = run(max_new_tokens=10)
    assert final.ttft_s is not None and final.ttft_s > 0
    text = views.stats_markdown(final)
    assert "tokens/s" in text and "time to first token" in text
    assert views.provider_label(engine.provider) in text
    assert views.provider_label("CUDAExecutionProvider") == "CUDA (GPU)"
    assert views.provider_label("CPUExecutionProvider") == "CPU"


def test_closing_the_stream_stops_generation(engine):
    params = streaming.prepare(RES, "ROMEO:", 200, 0.8, 50, 0.95, 1)
    stream = streaming.run(RES, params)
    for state in stream:
        if state.new_tokens >= 3:
            break
    stream.close()  # what Gradio does on the stop button / a disconnected client
    assert state.new_tokens == 3 and not state.finished and state.stream_closed.is_set()


def test_the_stop_button_shows_the_tokens_so_far_and_says_stopped(engine):
    from playground.ui.generation import Generations

    ui_stopped = Generations(RES).ui_stopped
    stream = streaming.run(RES, streaming.prepare(RES, "ROMEO:", 200, 0.8, 50, 0.95, 1))
    for state in stream:
        if state.new_tokens >= 4:
            break
    stream.close()
    html, stats = ui_stopped(state)
    assert html.count('class="gen-tok"') == 4 and "stopped by: stopped" in stats and "**4** new tokens" in stats
    assert not state.finished  # the shared state is left as the stream left it
    for done in streaming.run(RES, streaming.prepare(RES, "ROMEO:", 2, 0.8, 50, 0.95, 1)):
        pass
    assert all(not isinstance(out, str) for out in ui_stopped(done))  # ended by itself: nothing to change
    assert all(not isinstance(out, str) for out in ui_stopped(None))


def test_the_stop_button_answers_after_the_stream_closed(engine):
    """Gradio's cancel closes the stream a moment after the click; the stopped view waits for
    it, so no update of the stream can arrive after the view and overwrite it."""
    import threading

    from playground.ui.generation import Generations

    ui_stopped = Generations(RES).ui_stopped
    stream = streaming.run(RES, streaming.prepare(RES, "ROMEO:", 200, 0.8, 50, 0.95, 1))
    for state in stream:
        if state.new_tokens >= 2:
            break
    cancel = threading.Timer(0.3, stream.close)  # as the page's cancel request would, later
    cancel.start()
    html, stats = ui_stopped(state)
    closed_when_answered = state.stream_closed.is_set()
    cancel.join()
    assert closed_when_answered and "stopped by: stopped" in stats
    assert html.count('class="gen-tok"') == state.new_tokens


def test_long_prompt_keeps_its_last_tokens_and_says_so(engine):
    prompt = "To be, or not to be: " * 100  # far more tokens than the context
    params = streaming.prepare(RES, prompt, 2, 0.8, 50, 0.95, 1)
    assert len(params.prompt_ids) == engine.block_size - 1
    assert params.dropped_prompt_tokens > 0 and "kept" in params.notice
    states = list(streaming.run(RES, params))
    assert states[-1].finished and "kept" in views.stats_markdown(states[-1])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prompt": ""}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": "a\x00b"}, "control character"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 10_000}, "max_new_tokens"),
        ({"max_new_tokens": 2.5}, "max_new_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_k": -1}, "top_k"),
        ({"top_k": 50258}, "top_k"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.01}, "top_p"),
        ({"seed": -1}, "seed"),
        ({"num_samples": 9}, "num_samples"),
    ],
)
def test_bad_settings_are_refused_with_a_message(engine, kwargs, message):
    args = {"prompt": "ROMEO:", "max_new_tokens": 4, "temperature": 0.8, "top_k": 50, "top_p": 0.95, "seed": 1, "num_samples": 1}
    args.update(kwargs)
    with pytest.raises(InputError, match=message):
        streaming.prepare(RES, *args.values())


def test_figure_and_html_show_the_steps(engine):
    _, _, final = run(max_new_tokens=4)
    step = final.steps[0][-1]
    fig = figures.candidates_figure(step)
    ids_in_chart = {int(label.rsplit("#", 1)[1]) for label in fig.data[0].y}
    assert step.token.token_id in ids_in_chart
    assert {c.token_id for c in step.candidates} <= ids_in_chart
    html = views.tokens_html(final)
    assert html.count('class="gen-tok"') == final.new_tokens
    assert "ROMEO:" in html
    assert figures.candidates_figure(None).layout.annotations  # an empty chart says what to do


def test_a_generation_past_its_time_budget_stops_and_says_so(engine):
    params = streaming.prepare(RES, "ROMEO:", 512, 0.8, 50, 0.95, 1, 2)
    final_state = None
    for final_state in streaming.generate(engine, params, token_text, decode, budget_s=0.3):
        pass
    assert final_state.finished and 0 < final_state.new_tokens < 2 * 512  # stopped long before the end
    assert "time limit" in final_state.stop_reason
    assert "time limit of one generation" in views.stats_markdown(final_state)


def test_stop_before_the_first_token_ends_a_generation_waiting_for_room(engine):
    """A generation waiting for room in the batch (every row busy) has no token, so no step to
    end at: its stop request still ends it at once, with no token and "stopped", while the
    batch's other generation goes on."""
    import threading

    from runtime.batching import Scheduler

    scheduler = Scheduler(engine, max_rows=1, max_waiting=1)
    try:
        occupant = streaming.generate(engine, streaming.prepare(RES, "ROMEO:", 512, 0.8, 50, 0.95, 1), token_text, decode, scheduler=scheduler)
        next(occupant)  # its row is the batch's only one
        params = streaming.prepare(RES, "JULIET:", 512, 0.8, 50, 0.95, 2)
        waiting = streaming.new_state(params, engine)
        done = threading.Event()

        def drain():
            for _ in streaming.generate(engine, params, token_text, decode, scheduler=scheduler, state=waiting):
                pass
            done.set()

        threading.Thread(target=drain, daemon=True).start()
        wait_for(lambda: len(scheduler._waiting) == 1, interval=0.01, message="the generation in the scheduler's line, no room yet")
        waiting.stop_requested.set()
        wait_for(done.is_set, 10, 0.01, message="the stopped generation to end")
        assert waiting.finished and waiting.new_tokens == 0 and waiting.stop_reason == "stopped"
        assert waiting.stream_closed.is_set() and "stopped by: stopped" in views.stats_markdown(waiting)
        assert scheduler.running_rows == 1  # the other generation was not touched
        occupant.close()
    finally:
        scheduler.close()


def test_stop_during_a_generation_ends_it_at_the_next_step(engine):
    stream = streaming.run(RES, streaming.prepare(RES, "ROMEO:", 200, 0.8, 50, 0.95, 1))
    for state in stream:
        if state.new_tokens == 3:
            state.stop_requested.set()
    assert state.finished and state.new_tokens == 3 and state.stop_reason == "stopped"


def test_a_cut_prompt_and_a_full_context_are_both_said(engine):
    """A prompt past the context is cut (this tab's notice), and the context then fills while
    generating (the engine's notice): a learner reads both."""
    params = streaming.prepare(RES, "To be, or not to be: " * 100, 3, 0.8, 50, 0.95, 1)
    final = list(streaming.run(RES, params))[-1]
    stats = views.stats_markdown(final)
    assert "were kept" in stats and "The context is full" in stats
    assert sum("The prompt" in n for n in final.notices) == 1  # the engine's own "prompt cut" is not said twice


class _PageSession:
    """One learner's page on a launched app, from its own loopback address: events joined as the
    page joins them, its session's stream read on a thread of its own (messages kept with the
    time they came)."""

    def __init__(self, url: str, address: str) -> None:
        import threading
        import uuid

        import httpx

        self.url, self.session = url, uuid.uuid4().hex[:11]
        self.http = httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address=address))
        self.messages: list[tuple[float, dict]] = []
        self.closed = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.started = False

    def join(self, fn_index: int, data: list) -> str:
        r = self.http.post(f"{self.url}gradio_api/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": self.session})
        r.raise_for_status()
        if not self.started:
            self.started = True
            self.reader.start()
        return r.json()["event_id"]

    def _read(self) -> None:
        import json
        import time

        try:
            with self.http.stream("GET", f"{self.url}gradio_api/queue/data", params={"session_hash": self.session}) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data: "):
                        self.messages.append((time.monotonic(), json.loads(line[6:])))
                    if self.closed.is_set():
                        return
        except Exception:  # noqa: BLE001 -- the stream closed under us at the end of the test
            pass

    def seen(self, event_id: str, msg: str) -> dict | None:
        return next((m for _, m in self.messages if m.get("event_id") == event_id and m.get("msg") == msg), None)

    def when(self, event_id: str, msg: str) -> float | None:
        return next((t for t, m in self.messages if m.get("event_id") == event_id and m.get("msg") == msg), None)

    def close(self) -> None:
        self.closed.set()
        self.http.close()


def test_stop_before_the_first_token_ends_the_generation_on_a_launched_app(app_server):
    """Every row of the batch busy (four learners' pages, four samples each), a fifth learner's
    Generate waits for room: Stop, pressed before its first token, ends it at once, with no
    token and "stopped" on the page, while the others still generate. The time from the click
    to the end is printed (the page's promise is within 1 s)."""
    import time

    import httpx

    from benchmarks.page_generate import PROMPT, page_event_index

    config = httpx.get(app_server.url + "config", timeout=60).json()
    generate = page_event_index(config)
    stop_button = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "gen-stop")
    stop = next(d["id"] for d in config["dependencies"] if [stop_button, "click"] in [list(t) for t in d["targets"]] and d.get("backend_fn"))
    fillers = [_PageSession(app_server.url, f"127.0.0.{30 + i}") for i in range(4)]
    learner = _PageSession(app_server.url, "127.0.0.40")
    try:
        filler_events = [f.join(generate, [PROMPT, 512, 0.8, 50, 0.95, i, 4, "full", None]) for i, f in enumerate(fillers)]
        wait_for(lambda: all(f.seen(e, "process_generating") for f, e in zip(fillers, filler_events)), 120, 0.01,
                 message="every filler generation to stream")
        event = learner.join(generate, [PROMPT, 512, 0.8, 50, 0.95, 99, 1, "full", None])
        # its handler runs: it waits in the batch's line
        wait_for(lambda: learner.seen(event, "process_starts"), 60, 0.01, message="the learner's generation to start")
        assert not learner.seen(event, "process_generating")
        clicked = time.monotonic()
        stop_event = learner.join(stop, [None])
        wait_for(lambda: learner.seen(event, "process_completed") and learner.seen(stop_event, "process_completed"), 30, 0.01,
                 message=lambda: f"the generation and its Stop to complete; seen: {[str(m)[:300] for _, m in learner.messages]}")
        ended = learner.when(event, "process_completed") - clicked
        print(f"\nStop before the first token: the generation ended {ended:.2f} s after the click")
        assert all(not f.seen(e, "process_completed") for f, e in zip(fillers, filler_events)), "room came first: nothing was tested"
        shown = learner.seen(stop_event, "process_completed")["output"]["data"]
        assert "**0** new tokens" in shown[1] and "stopped by: stopped" in shown[1]
        final = learner.seen(event, "process_completed")["output"]["data"]
        assert "stopped by: stopped" in final[1] and 'class="gen-tok"' not in final[0]
    finally:
        for f in fillers:  # their generations stop too (Stop, then the stream closed)
            f.join(stop, [None])
        for s in (*fillers, learner):
            s.close()


# --- precision ---------------------------------------------------------------------------------


def test_each_precision_generates_with_its_own_file_and_the_same_ids_as_that_file_alone(engine):
    """Full precision is the fp32 file (what Inside and Compare compute with), 8 bits the integer
    file: each gives exactly the greedy ids of its file run alone by the runtime."""
    from export import ensure_onnx
    from runtime.engine import Engine
    from runtime.generate import generate
    from runtime.params import SamplingParams

    files = ensure_onnx()
    prompt = EXAMPLE_PROMPTS[0]
    for precision, key in (("full", "fp32"), ("8-bit", "int8")):
        params = streaming.prepare(RES, prompt, 24, 0.0, 0, 1.0, 1, 1, precision)
        final = list(streaming.run(RES, params))[-1]
        alone = generate(Engine.load(files[key], provider="cpu"), encode(prompt), SamplingParams(24))
        assert final.model_file == files[key].name and final.sample_ids(0) == alone[: final.new_tokens]
    assert "full precision" in views.stats_markdown(list(streaming.run(RES, streaming.prepare(RES, prompt, 2, 0.0, 0, 1.0, 1, 1, "full")))[-1])


def test_the_precision_radio_names_the_file_each_choice_runs_and_the_lesson_ties_a_seed_to_its_file(engine):
    """A seed's text holds for one engine and file: the radio names the file a generation in each
    precision actually ran (its state's model_file), and the lesson names all three files."""
    from deploy.static import QUANTIZED_NAME
    from playground.generation.params import PRECISION_LABELS, PRECISIONS
    from playground.lessons import LESSONS

    for precision in PRECISIONS:
        final = list(streaming.run(RES, streaming.prepare(RES, "ROMEO:", 1, 0.8, 0, 1.0, 42, 1, precision)))[-1]
        assert final.model_file in PRECISION_LABELS[precision], (precision, final.model_file)
    intro = LESSONS["generation"].intro
    for name in ("model.onnx", "model_int8.onnx", QUANTIZED_NAME.split("/")[-1]):
        assert f"`{name}`" in intro
    assert "same text, on one engine and file" in intro


def test_the_api_keeps_its_file_unless_asked_and_refuses_an_unknown_precision(engine):
    from playground.ui.generation import Generations

    api_generate = Generations(RES).api_generate

    default = list(api_generate("ROMEO:", 3, 0.0, 0, 1.0, 1))[-1]
    assert default["model_file"] == engine.path.name  # as before the parameter existed
    full = list(api_generate("ROMEO:", 3, 0.0, 0, 1.0, 1, "full"))[-1]
    assert full["model_file"] == "model.onnx"
    with pytest.raises(InputError, match="precision must be one of 'full', '8-bit', 'auto', not '16-bit'"):
        list(api_generate("ROMEO:", 3, 0.0, 0, 1.0, 1, "16-bit"))


def test_the_live_chart_and_a_picked_step_use_the_precision_chosen(engine):
    """The next-token distribution the page shows comes from the file the learner chose."""
    from export import ensure_onnx
    from playground import next_token as nt
    from playground.ui.generation import Generations
    from runtime.engine import Engine

    _distribution = Generations(RES).distribution

    ids = encode("ROMEO:\nBut soft,")
    fp32 = Engine.load(ensure_onnx()["fp32"], provider="cpu")
    logits = fp32.forward(np.asarray([ids]), fp32.empty_cache(1))[0][0].astype(np.float64)
    expected = np.exp(logits - logits.max())
    expected /= expected.sum()
    shown = _distribution(tuple(ids), "full").probabilities()
    assert np.abs(shown - expected).max() < 1e-6
    assert np.abs(_distribution(tuple(ids), "8-bit").probabilities() - expected).max() > 1e-6  # another file: other numbers
    assert isinstance(nt.next_token_distribution(ids, RES.engine_for("full")[0]), nt.NextTokenDistribution)


# --- the page's own events, through the wiring the page uses ------------------------------------


def test_the_page_streams_text_and_stats_only_then_fills_the_chart_once(wired):
    """Generate's streamed updates carry the text, the stats and the result key (written once),
    nothing else; the event the page runs after it draws the chart of the last step and the
    pickers from that key."""
    from playground.ui.generation import Generations

    updates = list(wired[Generations.ui_generate]("ROMEO:", 12, 0.8, 50, 0.95, 3, 1, "full", None, None))
    assert all(len(u) == 4 and u[-1] == "" for u in updates)  # text, stats, key, the error slot (empty)
    keys = [u[2] for u in updates]
    assert isinstance(keys[0], int) and all(k == keys[0] or k == {"__type__": "update"} for k in keys[1:])
    final_html, final_stats = updates[-1][:2]
    assert "**12** new tokens" in final_stats and final_html.count('class="gen-tok"') == 12
    slider, radio, chart, caption, history, speeds = wired[Generations.ui_generated](keys[0])
    assert chart.layout.title.text.startswith("Step 12:") and slider["value"] == 12 and history == ""
    assert "full precision **" in speeds  # the speed of the generation just run


def test_streamed_updates_come_less_often_as_more_learners_generate():
    from playground.ui.generation import API_EVERY_S, UI_EVERY_S, ui_every_s

    assert ui_every_s(0) == ui_every_s(4) == UI_EVERY_S
    assert UI_EVERY_S < ui_every_s(8) < API_EVERY_S == ui_every_s(16) == ui_every_s(40)


def test_a_generate_walks_down_the_layers_entering_each_module_at_most_twice(engine):
    """The call stacks of a Generate, from the tab's handler to the decoding loop: along each, every
    module of the project is entered at most twice (a callback may come back once), none bounced
    between layers again and again."""
    import sys
    from pathlib import Path

    from playground.ui.generation import Generations

    root = Path(__file__).resolve().parents[2]

    def module(frame) -> str | None:
        path = Path(frame.f_code.co_filename)
        if root not in path.parents or "tests" in path.relative_to(root).parts or "venv" in path.parts:
            return None
        return ".".join(path.relative_to(root).with_suffix("").parts)

    stack: list[str | None] = []
    worst: dict[str, list[str]] = {}

    def walk(frame, event, arg):
        if event == "call":
            stack.append(module(frame))
            path = [m for m in stack if m]
            runs = [m for i, m in enumerate(path) if i == 0 or path[i - 1] != m]  # a module entered, left, entered again
            for m in set(runs):
                if runs.count(m) > worst.get(m, []).count(m):
                    worst[m] = runs  # the stack where it was entered the most times
        elif event == "return" and stack:
            stack.pop()

    gen = Generations(RES)
    list(gen.api_generate("ROMEO:", 2, 0.0, 0, 1.0, 1))  # the engine opened before the walk
    sys.setprofile(walk)
    try:
        out = list(gen.api_generate("ROMEO:", 3, 0.0, 0, 1.0, 1))
    finally:
        sys.setprofile(None)
    assert out[-1]["new_tokens"] == 3
    assert {"playground.ui.generation", "playground.generation.streaming", "runtime.batching"} <= set(worst)
    entered = {m: runs.count(m) for m, runs in worst.items()}
    assert max(entered.values()) <= 2, {m: " > ".join(worst[m]) for m, n in entered.items() if n > 2}


def test_the_open_loops_are_those_of_the_precisions_used_and_nothing_opens_by_asking(engine):
    """What /expected-wait reads: a precision's loop once that precision generated, the app's own
    for "auto" and for the precision of its own file, each loop listed once; asking opens nothing."""
    from playground.resources import Resources

    fresh = Resources()
    assert fresh.open_loop("auto") is None and fresh.open_loop("full") is None and fresh.open_loops() == []
    assert fresh._engine is None  # asking opened no engine
    own = "8-bit" if RES.engine().path.name == "model_int8.onnx" else "full"
    other = "full" if own == "8-bit" else "8-bit"
    loop = RES.scheduler()  # the app's own, opened
    assert RES.open_loop("auto") is loop and RES.open_loop(own) is loop
    other_engine, other_loop = RES.engine_for(other)
    assert other_engine.path.name != RES.engine().path.name and other_loop is not loop
    assert RES.open_loop(other) is other_loop
    assert RES.open_loops() == [loop, other_loop]
