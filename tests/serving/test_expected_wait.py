"""The expected wait a page is told (playground/ui/serving/wait.py): Gradio's line for a handler at
the rate the loops let requests go, then the decoding loop's turns; the browser offered past
OFFER_AFTER_S and not at it. (The loop's own count of steps is checked against the steps a
newcomer then waits in tests/runtime/test_batching.py; the answer of a launched app whose every handler is
taken, in tests/serving/test_load.py; the page's offer, in tests/browser/test_browser_run_on.py.)"""

from __future__ import annotations

import pytest

from playground.ui.serving.wait import OFFER_AFTER_S, answer, expected, words
from runtime.batching import Load


def loop(steps: int, step_s: float = 0.1, waiting: int = 20, ends: float | None = None) -> Load:
    return Load(running_rows=16, waiting=waiting, wait_steps=steps, step_s=step_s, ends_per_s=ends)


def test_with_a_handler_free_the_wait_is_the_loops_turn():
    e = expected(loop(30), (40, 116, 0), [loop(30)])
    assert not e.handlers_busy and e.line_s == 0.0 and e.seconds == pytest.approx(3.0)
    assert "About 3.0 s before the first token" in words(e) and "20 generations take turns" in words(e)
    assert "handlers" not in words(e)


def test_every_handler_busy_adds_the_line_at_the_rate_the_loops_let_requests_go():
    # 3 wait for a handler, this one the 4th; two loops free 1.5 and 0.5 requests a second
    e = expected(loop(30, ends=1.5), (116, 116, 3), [loop(30, ends=1.5), loop(0, ends=0.5)])
    assert e.handlers_busy and e.line_s == pytest.approx(2.0) and e.seconds == pytest.approx(5.0)
    assert "all 116 of its generation handlers are busy and 3 more wait for one" in words(e)
    # none let go lately: not known, and long
    stuck = expected(loop(30), (116, 116, 3), [loop(30)])
    assert stuck.seconds is None and stuck.offer_browser and "not moving lately" in words(stuck)


@pytest.mark.parametrize("seconds, offered", [(OFFER_AFTER_S, False), (OFFER_AFTER_S + 0.01, True), (0.0, False)])
def test_the_browser_is_offered_past_the_limit_and_not_at_it(seconds, offered):
    e = expected(loop(100, step_s=seconds / 100), (10, 116, 0), [])
    assert e.seconds == pytest.approx(seconds) and e.offer_browser is offered
    assert answer(e, "full", 16)["offer_browser"] is offered


def test_a_loop_not_open_yet_has_nothing_waiting_and_the_answer_says_so():
    body = answer(expected(None, (0, None, 0), []), "8-bit", 0)
    assert body["loop"] is None and body["expected_wait_s"] == 0.0 and body["offer_browser"] is False
    assert body["words"].startswith("Under a second")
    assert set(body) >= {"precision", "expected_wait_s", "offer_browser", "offer_after_s", "words", "line", "loop"}


def test_a_heavy_pass_waits_for_those_served_before_it_a_handlers_turn_at_a_time():
    """/expected-wait?tab=inside: with a handler free the pass alone; every handler busy, a turn of
    the running ones, those served before this visitor's (``ahead``) taken ``handlers`` at a time, then
    its own; nothing measured with every handler busy: not known, offered."""
    from playground.ui.serving.wait import ExpectedPass, pass_answer

    free = ExpectedPass(handlers=2, running=1, line=0, ahead=0, pass_s=0.4)
    assert free.seconds == pytest.approx(0.4) and not free.offer_browser
    assert pass_answer(free)["words"].startswith("Under a second")
    busy = ExpectedPass(handlers=2, running=2, line=9, ahead=5, pass_s=1.0)
    assert busy.seconds == pytest.approx((5 // 2 + 2) * 1.0) and not busy.offer_browser  # 4 s: at the limit, not past it
    later = ExpectedPass(handlers=2, running=2, line=9, ahead=6, pass_s=1.0)
    assert later.seconds == pytest.approx(5.0) and not later.offer_browser
    past = ExpectedPass(handlers=2, running=2, line=9, ahead=8, pass_s=1.0)
    assert past.seconds == pytest.approx(6.0) and past.offer_browser
    body = pass_answer(past)
    assert body["expected_wait_s"] == 6.0 and body["offer_browser"] and body["until"] == "the pass is drawn"
    assert "all 2 of its handlers for heavy passes are busy, and 8 of the 9 passes waiting go before yours" in body["words"]
    first = ExpectedPass(handlers=2, running=2, line=40, ahead=0, pass_s=1.0)  # a learner's first, ahead of a group's
    assert first.seconds == pytest.approx(2.0) and not first.offer_browser
    unknown = ExpectedPass(handlers=2, running=2, line=3, ahead=3, pass_s=None)
    assert unknown.seconds is None and unknown.offer_browser and pass_answer(unknown)["expected_wait_s"] is None


def test_every_handler_busy_waits_at_least_until_the_first_generation_can_end():
    """116 long generations taking turns for 16 rows end late and together: the last minute's ends
    (a burst, 2 a second) said 2 s for a line of 3, where the first of them needs 200 more tokens at
    116/16 of the steps (a siege of 120 addresses measured 207 s, told 8.9 s). The wait is the
    later of the two, and the words say why; with the rate the later, the rate's."""
    from runtime.turns import first_end_steps

    steps = first_end_steps([(1, 200)] * 100 + [(1, 512)] * 16, 16)
    assert steps == 1450  # 200 tokens x 116/16
    long = Load(running_rows=16, waiting=100, wait_steps=0, step_s=0.03, ends_per_s=2.0, first_end_steps=steps)
    e = expected(long, (116, 116, 3), [long])
    assert e.line_s == pytest.approx(43.5) and e.offer_browser
    assert "the first of the generations they run ends in about 44 s" in words(e)
    assert answer(e, "full", 16)["line"]["first_end_s"] == 43.5
    soon = Load(running_rows=16, waiting=0, wait_steps=0, step_s=0.03, ends_per_s=0.5, first_end_steps=10)
    e = expected(soon, (116, 116, 3), [soon])
    assert e.line_s == pytest.approx(8.0) and "ends in about" not in words(e)
    assert first_end_steps([], 16) is None and first_end_steps([(4, 30)], 16) == 30  # room for all: its own tokens


def test_inside_s_files_are_served_at_start_only_when_written_after_the_models_weights(tmp_path):
    """startup._current: the app serves Inside's files it wrote before at once (and writes none),
    unless the model's weights or the code the files are made from changed since (a retrained
    model, an edited exporter: its child writes them again first); a file written in the same
    instant counts as after."""
    import os

    from playground.ui.startup import INSIDE_SOURCES, _current

    weights, folder, code = tmp_path / "model", tmp_path / "inside", tmp_path / "inside_graph.py"
    weights.mkdir(), folder.mkdir()
    code.write_text("")
    assert not _current(folder, weights, (code,))  # nothing written
    (weights / "model.safetensors").write_bytes(b"w")
    (folder / "weights.json").write_text("{}")
    for index_at, weights_at, code_at, current in ((100, 100, 90, True), (101, 100, 90, True), (100, 101, 90, False),
                                                  (100, 90, 100, True), (100, 90, 101, False)):
        os.utime(folder / "weights.json", (index_at, index_at))
        os.utime(weights / "model.safetensors", (weights_at, weights_at))
        os.utime(code, (code_at, code_at))
        assert _current(folder, weights, (code,)) is current, (index_at, weights_at, code_at)
    assert all(path.is_file() for path in INSIDE_SOURCES)  # the app's own list names files that exist
