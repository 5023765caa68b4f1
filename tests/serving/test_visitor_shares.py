"""Each visitor's share of what the app holds for it, as pure functions at their edges
(milliseconds): the streams held open (per session, per visitor, in all: at a cap the right one
gives way, never the newcomer), heartbeats waiting for their session's first join, the sessions
and results kept (a visitor past its share loses its own oldest; at the bound whoever holds the
most does, so a learner's session and trained model outlive any other visitor's churn), and the
connections (at the total cap, with none idle, the busiest visitor's oldest). The launched-app
wiring is in tests/serving/test_held_streams.py."""

from __future__ import annotations

from collections import Counter

import gradio as gr
import pytest

from playground.ui import gradio_internals
from playground.ui.serving import connections
from playground.ui.serving import sessions, streams
from playground.ui.serving.sessions import ResultStore, VisitorShares, to_drop
from playground.ui.serving.streams import OpenStreams, Stream, may_wait_for_join, stream_to_close


# --- streams held open ------------------------------------------------------------------------------


def held(*pairs: tuple[str, str]) -> list[Stream]:
    """Streams (visitor, session), oldest first."""
    return [Stream(i, visitor, session) for i, (visitor, session) in enumerate(pairs)]


def test_a_sessions_streams_admit_n_minus_1_and_the_nth_closes_its_oldest():
    n = 4
    open_ = held(*[("ann", "s1")] * (n - 1), ("bob", "s2"))
    assert stream_to_close(open_, "ann", "s1", 100, 100, n) is None  # n-1 of s1 open: the n-th fits
    open_ = held(("bob", "s2"), *[("ann", "s1")] * n)
    victim, reason = stream_to_close(open_, "ann", "s1", 100, 100, n)
    assert reason == "session" and victim == open_[1]  # s1's oldest, not bob's older stream


def test_a_visitors_streams_admit_n_minus_1_and_the_nth_closes_its_own_oldest():
    n = 32
    mine = [("abuser", f"s{i}") for i in range(n - 1)]
    assert stream_to_close(held(("ann", "a"), *mine), "abuser", "new", 1000, n, 4) is None
    open_ = held(("ann", "a"), *mine, ("abuser", "s-last"))
    victim, reason = stream_to_close(open_, "abuser", "new", 1000, n, 4)
    assert reason == "visitor" and victim == open_[1]  # its own oldest; the learner's older one stays


def test_at_the_total_the_visitor_holding_the_most_gives_way_not_the_newcomer():
    total = 10
    open_ = held(("ann", "a"), ("bob", "b"), *[("abuser", f"x{i}") for i in range(3)], ("cy", "c"),
                 *[("other", f"o{i}") for i in range(2)], ("dee", "d"))
    assert len(open_) == total - 1 and stream_to_close(open_, "learner", "new", total, 100, 4) is None
    open_ = open_ + held(("eve", "e"))
    victim, reason = stream_to_close(open_, "learner", "new", total, 100, 4)
    assert reason == "total" and victim.visitor == "abuser" and victim.session == "x0"  # the hoarder's oldest
    # equal holders: the one whose stream is oldest; the newcomer's own visitor may be it
    victim, _ = stream_to_close(held(("p", "1"), ("q", "2"), ("q", "3"), ("p", "4")), "q", "5", 4, 100, 4)
    assert victim.session == "1"


def test_open_streams_close_the_one_that_gives_way_and_forget_it_at_once():
    closed: list[tuple[int, str]] = []
    registry = OpenStreams(max_total=3, per_visitor=2, per_session=2)
    a = registry.open("abuser", "s1", lambda why: closed.append((1, why)))
    registry.open("abuser", "s2", lambda why: closed.append((2, why)))
    registry.open("abuser", "s3", lambda why: closed.append((3, why)))  # its third: its first gives way
    assert closed == [(1, "visitor")] and a.id not in registry.streams and len(registry) == 2
    registry.open("ann", "s9", lambda why: closed.append((9, why)))
    registry.open("bob", "s8", lambda why: closed.append((8, why)))  # the total: the abuser's oldest left
    assert closed[-1] == (2, "total") and registry.per("abuser") == 1 and registry.per("ann") == 1
    assert registry.closed_for_room == Counter({"visitor": 1, "total": 1})


def test_a_visitor_may_have_n_minus_1_heartbeats_waiting_for_their_join_and_not_n():
    n = streams.HEARTBEATS_WAITING_PER_VISITOR
    assert may_wait_for_join(n - 1, n) and not may_wait_for_join(n, n)


def test_the_defaults_leave_streams_half_the_connections_and_a_page_its_two():
    assert streams.MAX_STREAMS <= connections.MAX_CONNECTIONS // 2
    assert streams.MAX_STREAMS_PER_SESSION >= 2  # the heartbeat and the result stream of one page
    assert streams.MAX_STREAMS_PER_VISITOR >= 8 * 2  # a visitor with a few tabs open
    assert 1 <= streams.HEARTBEAT_JOIN_WAIT_S <= 10 and streams.HEARTBEATS_WAITING_PER_VISITOR >= 1


# --- sessions and results: one visitor's churn pushes out its own -----------------------------------


def counts_of(order: list[tuple[str, str]]) -> Counter:
    return Counter(owner for _, owner in order)


def test_a_visitor_at_its_share_keeps_all_and_past_it_loses_its_own_oldest():
    share = 3
    order = [("l1", "learner"), ("c1", "churner"), ("c2", "churner"), ("c3", "churner")]
    assert to_drop(order, counts_of(order), "churner", 100, share) is None  # n-1 past its first: kept
    order.append(("c4", "churner"))
    assert to_drop(order, counts_of(order), "churner", 100, share) == "c1"  # its own oldest, not l1


def test_at_the_bound_the_oldest_of_whoever_holds_the_most_goes():
    capacity = 6
    order = [("l1", "ann"), ("c1", "churner"), ("c2", "churner"), ("l2", "bob"), ("c3", "churner"), ("l3", "cy")]
    assert to_drop(order, counts_of(order), "cy", capacity, 100) is None  # n kept: within
    order.append(("l4", "dee"))
    assert to_drop(order, counts_of(order), "dee", capacity, 100) == "c1"
    # with every visitor holding one, the least recently used goes
    order = [(f"k{i}", f"v{i}") for i in range(capacity + 1)]
    assert to_drop(order, counts_of(order), "v6", capacity, 100) == "k0"


def test_a_learners_entry_outlives_any_churn_of_another_visitor():
    shares = VisitorShares(capacity=10, share=4)
    assert shares.add("learner-session", "learner") == []
    dropped = [key for i in range(1_100) for key in shares.add(f"c{i}", "churner")]
    assert "learner-session" in shares and len(dropped) == 1_100 - 4
    assert shares.counts == Counter({"churner": 4, "learner": 1})
    # several churners at once fill the bound: still only churners' entries go
    for i in range(50):
        for churner in ("x", "y", "z"):
            shares.add(f"{churner}{i}", churner)
    assert "learner-session" in shares and len(shares) <= 10


def test_results_are_shared_out_per_visitor():
    store = ResultStore(capacity=8, per_visitor=3)
    mine = store.put("my trained model", owner="learner")
    theirs = [store.put(f"churn {i}", owner="churner") for i in range(100)]
    assert store.get(mine) == "my trained model" and store.owner(mine) == "learner"
    assert [store.get(k) for k in theirs[-3:]] == ["churn 97", "churn 98", "churn 99"] and store.get(theirs[-4]) is None
    assert len(store) == 4


def test_a_result_put_by_a_handler_belongs_to_the_visitor_of_its_request(monkeypatch):
    from starlette.requests import Request

    def request_from(address: str) -> gr.Request:
        return gr.Request(request=Request({"type": "http", "client": (address, 1), "headers": []}))

    store = ResultStore(capacity=4, per_visitor=2)
    monkeypatch.setattr(gradio_internals, "current_request", lambda: request_from("203.0.113.7"))
    state = store.state()
    wired = store.through(lambda text: ("shown", text), inputs=[gr.Textbox(), state], outputs=[gr.Textbox(), state], state=state)
    key = wired.fn("a run", None)[1]
    assert store.owner(key) == "203.0.113.7"
    monkeypatch.setattr(gradio_internals, "current_request", lambda: None)
    assert store.owner(store.put("no request")) == "?"


def test_the_defaults_give_a_visitor_a_share_below_the_bound():
    assert 1 <= sessions.SESSIONS_PER_VISITOR < sessions.MAX_SESSIONS
    assert 1 <= sessions.RESULTS_PER_VISITOR < sessions.MAX_RESULTS


@pytest.fixture(scope="module")
def state_demo() -> gr.Blocks:
    with gr.Blocks() as demo:
        box = gr.Textbox()
        state = RESULTS.state()
        box.submit(lambda text: text, [box], [box])
    demo.state_id = state._id
    return demo


RESULTS = ResultStore(capacity=50, per_visitor=50)


def test_gradios_sessions_are_shared_out_per_visitor_and_a_dropped_ones_results_go(state_demo):
    holder = gradio_internals.LeanStateHolder()
    holder.set_blocks(state_demo)
    holder.capacity = 20
    owners = {"learner": "ann"}
    holder.shares, holder.owner_of = VisitorShares(20, 5), lambda s: owners.get(s, "churner")
    holder["learner"][state_demo.state_id] = mine = RESULTS.put("ann's model", owner="ann")
    kept_keys = []
    for i in range(1_100):
        holder[f"c{i}"][state_demo.state_id] = key = RESULTS.put(f"churn {i}", owner="churner")
        kept_keys.append(key)
    assert "learner" in holder.session_data and list(holder.session_data)[1:] == [f"c{i}" for i in range(1_095, 1_100)]
    assert RESULTS.get(mine) == "ann's model"
    assert RESULTS.get(kept_keys[0]) is None and RESULTS.get(kept_keys[-1]) == "churn 1099"  # dropped with its session
    assert len(RESULTS) == 1 + 5


# --- connections: at the cap with none idle, the busiest visitor's oldest ----------------------------


def test_a_full_table_with_none_idle_closes_the_busiest_visitors_oldest_or_refuses():
    decide = connections.decide
    assert decide(999, 0, 1000, 64, any_idle=False, busiest=20) == "admit"  # n-1: admitted
    assert decide(1000, 0, 1000, 64, any_idle=True, busiest=20) == "evict"  # the idlest first
    assert decide(1000, 0, 1000, 64, any_idle=False, busiest=2) == "make_room"
    assert decide(1000, 0, 1000, 64, any_idle=False, busiest=1) == "refuse"  # one each: nobody hoards


def test_the_busiest_visitors_oldest_connection_is_the_one_named():
    opened = [("c0", "ann"), ("c1", None), ("c2", "abuser"), ("c3", "bob"), ("c4", "abuser"), ("c5", "abuser")]
    counts = Counter(v for _, v in opened if v is not None)
    assert connections.busiest_oldest(opened, counts) == ("c2", 3)
    assert connections.busiest_oldest([("c1", None)], Counter()) == (None, 0)


def test_a_proxys_connections_count_for_the_visitor_of_their_latest_request():
    counts = connections._Counts()
    counts.is_proxy = lambda address: address == "10.0.0.1"
    proxy = [object() for _ in range(5)]
    for conn in proxy:
        counts.enter("10.0.0.1", conn)
    direct = object()
    counts.enter("127.0.0.2", direct)
    assert counts.per_visitor == Counter({"127.0.0.2": 1})  # the proxy's are nobody's until a request
    for conn in proxy[:3]:
        counts.belongs(conn, "203.0.113.66")
    counts.belongs(proxy[3], "203.0.113.7")
    assert counts.busiest() == (proxy[0], 3)
    counts.belongs(proxy[0], "203.0.113.7")  # the proxy reused it for another visitor
    assert counts.per_visitor == Counter({"203.0.113.66": 2, "203.0.113.7": 2, "127.0.0.2": 1})
    counts.disown(proxy[1])  # closing: no longer a candidate
    assert counts.busiest() == (proxy[0], 2)
    counts.leave("10.0.0.1", proxy[1])
    assert counts.total == 5 and counts.per_visitor["203.0.113.66"] == 1
