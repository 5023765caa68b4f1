"""playground/ui/gradio_internals.py, the one place the app reaches into Gradio: every name and
signature it uses still has the shape it had in the tested Gradio (this fails when one moves), the
start-up check refuses to start on a moved one and names it, and warns on another version whose
shapes match."""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path

import gradio as gr
import pytest
from gradio.queueing import Queue
from gradio.state_holder import SessionState

from playground.ui import gradio_internals

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo() -> gr.Blocks:
    return gradio_internals.probe_app()


def test_nothing_moved_in_the_installed_gradio(demo):
    assert gradio_internals.moved(demo) == []
    assert gradio_internals.moved() == []  # on a probe app of its own


def test_the_tested_version_is_the_one_pinned_and_installed():
    """requirements.txt and the Space's sdk_version install what the internals were tested with."""
    pinned = re.search(r"^gradio==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    space = re.search(r"^sdk_version: (\S+)$", (ROOT / "README.md").read_text(), re.M).group(1)
    assert gradio_internals.TESTED_GRADIO == pinned == space == gr.__version__


def test_a_changed_signature_is_named(demo, monkeypatch):
    async def push(self, body, request):  # username gone
        return True, "id", "success"

    monkeypatch.setattr(Queue, "push", push)
    moved = gradio_internals.moved(demo)
    assert len(moved) == 1 and moved[0].startswith("gradio.queueing.Queue.push(self, body, request)"), moved


def test_a_new_attribute_of_a_session_is_named(demo, monkeypatch):
    """The lean session builds no copy of Gradio's: an attribute Gradio adds would be missing
    from it, and fail in the middle of a request."""
    original = SessionState.__init__

    @functools.wraps(original)  # same signature: only the attributes differ
    def init(self, blocks):
        original(self, blocks)
        self.render_cache = {}

    monkeypatch.setattr(SessionState, "__init__", init)
    moved = gradio_internals.moved(demo)
    assert len(moved) == 1 and "SessionState attributes ['render_cache']" in moved[0], moved


def test_a_missing_queue_attribute_and_a_moved_route_are_named(demo, monkeypatch):
    monkeypatch.delattr(demo._queue, "pending_messages_per_session")
    monkeypatch.setattr(gradio_internals, "ROUTE_SAMPLES", (*gradio_internals.ROUTE_SAMPLES, ("GET", "/gradio_api/queue/gone")))
    assert gradio_internals.moved(demo) == [
        "gradio.queueing.Queue.pending_messages_per_session: missing",
        "route GET /gradio_api/queue/gone: no longer one of Gradio's",
    ]


def test_start_up_refuses_naming_what_moved_and_the_tested_version(demo, monkeypatch):
    monkeypatch.delattr(demo._queue, "event_ids_to_events")
    with pytest.raises(RuntimeError) as info:
        gradio_internals.check(demo)
    text = str(info.value)
    assert f"Gradio {gradio_internals.TESTED_GRADIO}" in text and "event_ids_to_events" in text
    assert f"gradio=={gradio_internals.TESTED_GRADIO}" in text


def test_start_up_warns_on_another_version_whose_shapes_match(demo, monkeypatch, caplog):
    monkeypatch.setattr(gradio_internals, "TESTED_GRADIO", "6.0.0")
    with caplog.at_level(logging.WARNING, logger="playground"):
        gradio_internals.check(demo)
    assert any("6.0.0" in r.getMessage() and gr.__version__ in r.getMessage() for r in caplog.records), caplog.text


def test_start_up_is_silent_on_the_tested_version(demo, caplog):
    with caplog.at_level(logging.WARNING, logger="playground"):
        gradio_internals.check(demo)
    assert not caplog.records


def test_gradios_private_names_are_used_only_here():
    """The rest of the app goes through this module: no other file imports Gradio's internal
    modules or reaches the queue, the session store or the functions' table."""
    private = re.compile(r"from gradio\.(?!themes)\w+|import gradio\.\w+|\._queue\b|\.state_holder\b|\.fns\b|process_api")
    offenders = []
    for path in sorted((ROOT / "playground").rglob("*.py")) + [ROOT / "app.py"]:
        if path.name == "gradio_internals.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if private.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_a_short_argument_list_gets_the_handlers_trailing_defaults():
    """Gradio refuses a list shorter than the endpoint's inputs: the missing trailing parameters
    take the handler's defaults, and only where every missing one has a default."""
    from types import SimpleNamespace

    from playground.ui.gradio_internals import with_trailing_defaults

    def handler(prompt, n=4, precision="auto", request=None):
        return prompt

    fn = SimpleNamespace(fn=handler, inputs=[object()] * 3, api_visibility="public")
    assert with_trailing_defaults(fn, ["a"]) == ["a", 4, "auto"]
    assert with_trailing_defaults(fn, ["a", 7]) == ["a", 7, "auto"]
    assert with_trailing_defaults(fn, ["a", 7, "full"]) == ["a", 7, "full"]
    assert with_trailing_defaults(fn, []) == []  # the prompt has no default: Gradio's message says so
    private = SimpleNamespace(fn=handler, inputs=[object()] * 3, api_visibility="private")
    assert with_trailing_defaults(private, ["a"]) == ["a"]  # the page's events send their whole list


def test_a_waiting_event_is_failed_from_gradios_own_queue():
    """fail_waiting on Gradio's own queue, events and messages (not stand-ins): the event leaves
    the group's line and the queue's events, its reader gets a failed completion it can read."""
    import asyncio

    from gradio.queueing import Event

    demo = gradio_internals.probe_app()
    queue = demo._queue
    fn = next(iter(demo.fns.values()))
    queue.create_event_queue_for_fn(fn)
    events = [Event(f"s{i}", fn, None, None) for i in range(3)]
    for event in events:
        queue.event_queue_per_concurrency_id[fn.concurrency_id].queue.append(event)
        queue.event_ids_to_events[event._id] = event
        queue.pending_event_ids_session[event.session_hash] = {event._id}
    queue.pending_messages_per_session["s1"] = messages = asyncio.Queue()
    victim = events[1]
    assert gradio_internals.fail_waiting(demo, fn.concurrency_id, victim._id, "Busy: try again.", "Busy", retry_after=10)
    assert [e._id for e in gradio_internals.waiting_events(demo, fn.concurrency_id)] == [events[0]._id, events[2]._id]
    assert not gradio_internals.live(demo, victim._id) and not victim.alive
    assert victim._id in queue.pending_event_ids_session["s1"]  # until its reader takes the message
    message = messages.get_nowait()
    assert message.msg == "process_completed" and message.event_id == victim._id and message.success is False
    assert message.output["error"] == "Busy: try again." and message.output["retry_after"] == 10


def test_a_groups_pass_seconds_are_gradios_own_timings_of_its_functions_only():
    """group_pass_s, what /expected-wait?tab=inside times a heavy pass by: the mean of the group's
    functions' runs as Gradio's queue times them (ProcessTime.add, called when an event ends),
    weighted by runs; another group's functions not counted; None before any ran."""
    import gradio as gr

    with gr.Blocks(analytics_enabled=False) as demo:
        box = gr.Textbox()
        box.submit(lambda t: t, box, box, concurrency_id="heavy")
        box.change(lambda t: t, box, box, concurrency_id="heavy")
        box.blur(lambda t: t, box, box, concurrency_id="light")
    demo.queue()
    queue = demo._queue
    heavy = [fn for fn in demo.fns.values() if fn.concurrency_id == "heavy"]
    light = next(fn for fn in demo.fns.values() if fn.concurrency_id == "light")
    assert gradio_internals.group_pass_s(demo, "heavy") is None
    queue.process_time_per_fn[heavy[0]].add(1.0)
    queue.process_time_per_fn[heavy[0]].add(2.0)
    queue.process_time_per_fn[heavy[1]].add(6.0)
    queue.process_time_per_fn[light].add(100.0)
    assert gradio_internals.group_pass_s(demo, "heavy") == pytest.approx(3.0)
    assert gradio_internals.group_pass_s(demo, "light") == pytest.approx(100.0)


def test_a_handlers_request_is_read_from_gradios_context():
    from gradio.context import LocalContext

    assert gradio_internals.current_request() is None  # outside a handler
    token = LocalContext.request.set("the request")
    try:
        assert gradio_internals.current_request() == "the request"
    finally:
        LocalContext.request.reset(token)


def test_a_session_is_known_once_it_joined_or_has_state(demo):
    assert not gradio_internals.session_known(demo, "made-up")
    demo._queue.pending_event_ids_session["joined"] = set()
    try:
        assert gradio_internals.session_known(demo, "joined")
    finally:
        del demo._queue.pending_event_ids_session["joined"]


def test_launchs_look_at_its_own_address_asks_again_until_it_answers(monkeypatch):
    """Gradio's launch refuses to start on the first timeout of its HEAD to its own page; on a busy
    machine the first page takes longer (the launched app died at load 25): the served apps ask
    again until an answer or SELF_CHECK_WAIT_S."""
    from gradio import networking

    answers = iter([False, False, True])
    asked: list[str] = []
    monkeypatch.setattr(networking, "url_ok", lambda url: asked.append(url) or next(answers))
    gradio_internals.patient_self_check(wait_s=30)
    assert networking.url_ok("http://127.0.0.1:1/") is True and len(asked) == 3
    monkeypatch.setattr(networking, "url_ok", lambda url: False)
    gradio_internals.patient_self_check(wait_s=0.6)
    assert networking.url_ok("http://127.0.0.1:1/") is False  # gives up after its wait, as Gradio then says why


def test_the_served_apps_launch_options_install_the_patient_look(monkeypatch):
    from gradio import networking

    from playground.ui import serving

    once = networking.url_ok
    monkeypatch.setattr(networking, "url_ok", once)  # (put back after the test)
    with gr.Blocks(analytics_enabled=False) as demo:
        gr.Textbox()
    serving.launch_options(demo)
    assert networking.url_ok is not once and networking.url_ok.__wrapped__ is getattr(once, "__wrapped__", once)


def test_the_served_apps_expected_wait_reads_the_order_its_admission_serves(monkeypatch):
    """A hardened app's /expected-wait (launch_options' ExpectedWait) asks the app's own admission
    where a visitor stands in a heavy passes' line; without harden it has none to ask."""
    from gradio import networking

    from playground.ui import serving
    from playground.ui.serving.wait import ExpectedWait

    monkeypatch.setattr(networking, "url_ok", networking.url_ok)  # (put back after the test)
    demo = gradio_internals.probe_app()
    wait = lambda: next(m for m in serving.launch_options(demo)["app_kwargs"]["middleware"] if m.cls is ExpectedWait)  # noqa: E731
    assert wait().kwargs["ahead"] is None
    serving.harden(demo)
    ahead = wait().kwargs["ahead"]
    fn = next(iter(demo.fns.values()))
    demo.pg_admission.note("someone", fn.concurrency_id)
    assert ahead(fn.concurrency_id, "learner") == 0 and wait().kwargs["pass_group"] == "forward"


def test_the_served_apps_expected_wait_reads_the_loops_of_its_own_resources(monkeypatch):
    """/expected-wait reads the load of the decoding loops of the resources the app was built on
    (``python app.py --model DIR``: that model's), none before they open, and none without them."""
    from gradio import networking

    from playground.resources import Resources
    from playground.ui import serving
    from playground.ui.serving.wait import ExpectedWait

    monkeypatch.setattr(networking, "url_ok", networking.url_ok)  # (put back after the test)
    demo, res = gradio_internals.probe_app(), Resources()

    def wait(**options):
        return next(m for m in serving.launch_options(demo, **options)["app_kwargs"]["middleware"] if m.cls is ExpectedWait)

    assert wait().kwargs["loop_of"]("auto") is None and wait().kwargs["loops"]() == []
    mine = wait(res=res).kwargs
    assert mine["loop_of"] == res.open_loop and mine["loops"] == res.open_loops and mine["loops"]() == []


def test_gradios_walk_of_an_answer_takes_a_flat_list_whole_and_still_finds_files(monkeypatch):
    """The big answers (a 1024 x 512 table) are walked by Gradio for files on the event loop: with
    the patch its file test runs per row, not per value, and a file in the answer is still given
    its URL, as Gradio's own walk gives it."""
    import asyncio
    import copy

    from gradio import processing_utils
    from gradio_client import utils as client_utils

    monkeypatch.setattr(client_utils, "traverse", client_utils.traverse)  # (put back after the test)
    monkeypatch.setattr(client_utils, "async_traverse", client_utils.async_traverse)
    file = {"path": "x.png", "url": "/gradio_api/file=x.png", "meta": {"_type": "gradio.FileData"}}
    answer = {"table": [[0.5, -1.0, 2] * 100 for _ in range(50)], "pieces": ["a", "b", None], "files": [[file]],
              "n": 3}
    before = processing_utils.add_root_url(copy.deepcopy(answer), "https://space.example", None)
    gradio_internals.flat_lists_unwalked()
    gradio_internals.flat_lists_unwalked()  # installed twice: still one layer over Gradio's walk
    asked = []
    real = client_utils.is_file_obj_with_url
    monkeypatch.setattr(client_utils, "is_file_obj_with_url", lambda obj: asked.append(obj) or real(obj))
    after = processing_utils.add_root_url(copy.deepcopy(answer), "https://space.example", None)
    assert after == before and after["files"][0][0]["url"] == "https://space.example/gradio_api/file=x.png"
    assert len(asked) < 60, f"Gradio's walk asked {len(asked)} nodes whether they are files: the flat lists were walked"
    mine = copy.deepcopy(answer)
    again = processing_utils.add_root_url(mine, "https://space.example", None)
    assert again["table"] is not mine["table"] and again["table"][0] is not mine["table"][0]  # copies, as Gradio's

    walked = []
    real_meta = client_utils.is_file_obj_with_meta
    monkeypatch.setattr(client_utils, "is_file_obj_with_meta", lambda obj: walked.append(obj) or real_meta(obj))

    class Block:
        proxy_url = None

        async def async_move_resource_to_block_cache(self, path):
            return f"/cache/{path}"

    moved = asyncio.run(processing_utils.async_move_files_to_cache(copy.deepcopy(answer), Block(), postprocess=True))
    assert moved["table"] == answer["table"] and moved["pieces"] == answer["pieces"]
    assert moved["files"][0][0]["path"] == "/cache/x.png", moved["files"]  # the file still found and moved
    assert len(walked) < 60, f"Gradio's move to its cache asked {len(walked)} nodes: the flat lists were walked"
