"""Whose turn it is in the decoding loop (runtime/turns.py): the edges of the slice, the order by
tokens given, the bound on rows kept aside and on visitors remembered, as pure functions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runtime.turns import Served, line, plan, wait_steps


@dataclass(eq=False)
class R:
    visitor: str
    arrival: int
    n: int = 1
    index: int = 0
    slice_start: int = 0


def served(**tokens: int) -> Served:
    s = Served()
    s.tokens.update(tokens)
    return s


@pytest.mark.parametrize("decoded, yields", [(7, False), (8, True)])
def test_a_running_request_yields_after_a_whole_slice_and_not_before(decoded, yields):
    running = R("a", 0, index=20 + decoded, slice_start=20)
    waiting = R("b", 1)
    admitted, parked = plan([waiting], [running], served(a=30, b=2), room=0, slice_tokens=8)
    assert (admitted, parked) == (([waiting], [running]) if yields else ([], []))


def test_the_waiting_visitor_given_the_fewest_tokens_goes_first_not_the_first_to_arrive():
    a2, c = R("a", 1), R("c", 2)
    running = R("a", 0, index=40)
    admitted, parked = plan([a2, c], [running], served(a=40, c=3), room=0, slice_tokens=8)
    assert admitted == [c] and parked == [running]
    # with a free row, c is still first; equal tokens go in arrival order
    assert plan([a2, c], [], served(a=40, c=3), room=1)[0] == [c]
    d = R("d", 3)
    assert plan([d, c], [], served(c=5, d=5), room=1)[0] == [c]


def test_a_visitor_never_parks_its_own_nor_one_given_fewer_tokens():
    running = R("a", 0, index=40)
    assert plan([R("a", 1)], [running], served(a=40), room=0) == ([], [])
    assert plan([R("b", 1)], [running], served(a=10, b=10), room=0) == ([], [])
    assert plan([R("b", 1)], [running], served(a=10, b=11), room=0) == ([], [])


def test_the_most_served_yields_first_and_only_as_many_rows_as_needed():
    x, y, z = R("x", 0, index=50), R("y", 1, index=50), R("z", 2, n=2, index=50)
    admitted, parked = plan([R("b", 3, n=2)], [x, y, z], served(x=90, y=60, z=80, b=0), room=0, slice_tokens=8)
    assert parked == [x, z]  # x (90) gives 1 row, z (80) the second: y (60) keeps its row
    admitted, parked = plan([R("b", 3)], [x, y, z], served(x=90, y=60, z=80, b=0), room=0, slice_tokens=8)
    assert parked == [x]


def test_the_first_request_that_cannot_get_rows_stops_the_line():
    big, small = R("b", 1, n=3), R("c", 2)
    assert plan([big, small], [], served(b=0, c=1), room=2) == ([], [])


def test_a_newcomer_starts_at_the_fewest_tokens_of_the_busy_and_a_returning_one_keeps_its_own():
    s = served(a=100, b=40)
    s.arrive("c", {"a", "b"})
    assert s["c"] == 40
    s.tokens["c"] = 90
    s.arrive("c", {"a", "b"})  # came back: 90, not 40
    assert s["c"] == 90
    s.arrive("d", set())
    assert s["d"] == 0


def test_visitors_remembered_stay_within_the_bound_the_busy_kept():
    s = Served(capacity=3)
    s.arrive("a", set())
    s.arrive("b", {"a"})
    for v in "cdef":
        s.arrive(v, {"a", "b"})
        assert len(s.tokens) <= 3
    assert {"a", "b", "f"} == set(s.tokens)  # the busy kept, the newest kept, the older gone


def test_visitors_remembered_fill_their_bound_exactly_before_one_is_forgotten():
    s = Served(capacity=3)
    for v in "abc":
        s.arrive(v, set())
    assert list(s.tokens) == ["a", "b", "c"]  # exactly the bound: all three kept
    s.arrive("d", set())
    assert list(s.tokens) == ["b", "c", "d"]  # one past it: the longest forgotten goes


def test_the_pages_and_the_apis_generations_reach_the_loop_as_their_visitors():
    """The Generate tab's, the API's and Next token's handlers name the visitor whose request
    they serve (the socket's address here) to the decoding loop, which takes turns by it."""
    import gradio as gr
    from gradio.context import LocalContext
    from starlette.requests import Request as HttpRequest

    from playground.ui import generation

    seen: list[str] = []

    class Loop:
        def stream(self, prompt_ids, sampling, stop=None, visitor=""):
            seen.append(visitor)
            return iter(())

    class Model:
        vocab_size, block_size, provider, path = 50257, 256, "CPUExecutionProvider", "model.onnx"

    class Res:  # the app's resources, as the handlers use them
        def engine(self):
            return Model()

        def engine_for(self, precision):
            return Model(), Loop()

    scope = {"type": "http", "client": ("10.1.2.3", 5000), "headers": [], "method": "POST", "path": "/", "query_string": b""}
    token = LocalContext.request.set(gr.Request(request=HttpRequest(scope)))
    try:
        list(generation.Generations(Res()).api_generate("Hello", 4, 0.8, 40, 0.9, 1))
        list(generation.Generations(Res()).ui_generate("Hello", 4, 0.8, 40, 0.9, 1, 1, "full"))
    finally:
        LocalContext.request.reset(token)
    assert seen == ["10.1.2.3", "10.1.2.3"]


def test_more_generations_run_than_rows_and_each_has_a_thread_and_a_place_in_the_loops_line():
    """Turns happen in the loop's line, so more generation handlers run than the batch has rows;
    the loop's line holds them all (none is refused "busy" by it), and Gradio has a worker thread
    for each beside every other group's."""
    import gradio as gr

    from playground import limits
    from playground.ui import serving

    assert limits.GENERATION_CONCURRENCY > limits.MAX_BATCH_ROWS
    assert limits.GENERATION_CONCURRENCY - limits.MAX_BATCH_ROWS <= limits.MAX_WAITING_REQUESTS
    with gr.Blocks() as demo:
        pass
    groups = (limits.GENERATION_CONCURRENCY + limits.FORWARD_CONCURRENCY + limits.LIGHT_CONCURRENCY
              + limits.EXPENSIVE_CONCURRENCY + limits.MAX_RUNNING + limits.MAX_LINE)
    assert serving.launch_options(demo)["max_threads"] > groups


@dataclass(eq=False)
class W(R):
    remaining: int = 100


@pytest.mark.parametrize("decoded, steps", [(0, 8), (5, 3), (7, 1), (8, 0)])
def test_a_newcomer_waits_the_rest_of_the_running_slice_and_not_a_step_more(decoded, steps):
    """a, given 90 tokens, has decoded ``decoded`` of its slice; b, given 10 (the newcomer's turn
    begins there), has just entered: the newcomer takes a's row at the end of a's slice."""
    running = [W("a", 0, index=40 + decoded, slice_start=40), W("b", 1, index=5, slice_start=5)]
    assert wait_steps([], running, served(a=90, b=10), "c", max_rows=2, slice_tokens=8) == steps


def test_a_running_visitor_given_as_many_as_the_newcomer_decodes_until_it_has_more():
    running = W("a", 0, index=48, slice_start=40)  # a whole slice decoded, but a's 90 is the newcomer's turn too
    assert wait_steps([], [running], served(a=90), "c", max_rows=1, slice_tokens=8) == 1
    two_rows = W("a", 0, n=2, index=48, slice_start=40)
    assert wait_steps([], [two_rows], served(a=90, c=95), "c", max_rows=2, slice_tokens=8) == 3  # 90 + 2 x 3 > 95


def test_free_rows_mean_no_wait_and_a_visitor_given_fewer_keeps_its_row_to_its_end():
    running = W("a", 0, index=50, slice_start=10, remaining=30)
    assert wait_steps([], [running], served(a=90), "c", max_rows=2) == 0
    # the newcomer runs a generation already and has been given more than a: a runs to its end
    # (30 tokens: 90 + 30 is no more than 120), and the newcomer's own never yields to it
    mine = W("c", 1, index=8, slice_start=0, remaining=200)
    assert wait_steps([], [running, mine], served(a=90, c=120), "c", max_rows=2, slice_tokens=8) == 30


def test_those_given_no_more_wait_ahead_and_each_freed_row_frees_again_a_slice_later():
    running = [W("x", 0, index=20, slice_start=17), W("y", 1, index=20, slice_start=15)]  # 5 and 3 left of a slice of 8
    s = served(x=60, y=60, p=10, q=10, r=10, z=70)
    ahead = [W("p", 2), W("q", 3), W("r", 4)]  # at the newcomer's turn (10, the fewest busy): ahead of it
    behind = [W("z", 5)]  # given more: behind it
    assert wait_steps([], running, s, "new", max_rows=2, slice_tokens=8) == 3
    assert wait_steps(ahead[:1], running, s, "new", max_rows=2, slice_tokens=8) == 5
    assert wait_steps([*ahead[:1], *behind], running, s, "new", max_rows=2, slice_tokens=8) == 5
    # four rows needed, two run: the 3rd and 4th come when the first two taken end their slice
    assert wait_steps(ahead, running, s, "new", max_rows=2, slice_tokens=8) == 5 + 8
    assert wait_steps(ahead, running, s, "new", max_rows=2, rows=2, slice_tokens=8) == 3 + 16


def test_rows_free_now_are_taken_by_those_ahead_and_free_again_a_slice_later():
    """Three rows free, one running (10 steps to its slice's end), six visitors ahead: the free rows
    go to the first three, the running row to the fourth; the newcomer, seventh, gets a row when
    the first of those ends its slice (the loop was prefilling them when it asked)."""
    running = W("a", 0, index=20, slice_start=18)
    ahead = [W(f"p{i}", 1 + i) for i in range(6)]
    s = served(a=50, **{f"p{i}": 0 for i in range(6)})
    assert wait_steps(ahead[:2], [running], s, "new", max_rows=4, slice_tokens=12) == 0
    assert wait_steps(ahead[:3], [running], s, "new", max_rows=4, slice_tokens=12) == 10
    assert wait_steps(ahead, [running], s, "new", max_rows=4, slice_tokens=12) == 12


def test_among_visitors_given_as_many_a_visitors_second_request_waits_behind_anothers_first():
    """A group that sent several at once, none served yet, and a learner after them, all at 0
    tokens: the learner goes after each visitor's first, before their second."""
    a1, a2, a3, b1, b2, c = R("a", 0), R("a", 1), R("a", 2), R("b", 3), R("b", 4), R("c", 5)
    assert line([a1, a2, a3, b1, b2, c], served()) == [a1, b1, c, a2, b2, a3]
    assert plan([a1, a2, a3, b1, b2, c], [], served(), room=3)[0] == [a1, b1, c]
    # the wait it is told: two ahead (a's first, b's first), not five
    waiting = [W(r.visitor, r.arrival) for r in (a1, a2, a3, b1, b2)]
    rows_busy = [W("x", 9, index=4, slice_start=0), W("y", 10, index=0, slice_start=0)]  # 4 and 8 left of their slices
    assert wait_steps(waiting, rows_busy, served(x=40, y=40), "c", max_rows=2, slice_tokens=8) == 4 + 8
