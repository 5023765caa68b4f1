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
