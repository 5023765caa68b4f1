"""Who a visitor is and each visitor's fair share, as pure functions at their edges (milliseconds):
the visitor behind a trusted proxy is the last X-Forwarded-For entry and, reached directly, the
socket; the per-visitor caps admit n-1 and refuse n with a time to try again; the waiting line
serves visitors in turn; connections make room for new visitors by closing the idlest; a log
flood of one kind is one kind whatever each line's details. The launched-app wiring is in
tests/serving/test_classroom.py."""

from __future__ import annotations

import logging

import pytest

from playground import limits
from playground.ui.serving import connections
from playground.ui.gradio_internals import Arrival
from playground.ui.serving import admission
from playground.ui.serving.admission import Decision, Held, check_arrival, decide, fair_order, give_way
from playground.ui.serving.visitors import Proxies, parse_proxies, trusted_proxies, visitor_of

SPACE = Proxies(every=True)
NONE = Proxies()


def scope(peer: str | None, *forwarded: str) -> dict:
    return {"type": "http", "client": None if peer is None else (peer, 50000),
            "headers": [(b"host", b"x")] + [(b"x-forwarded-for", f.encode()) for f in forwarded]}


# --- who a visitor is ------------------------------------------------------------------------------


def test_reached_directly_the_visitor_is_the_socket_whatever_it_forges():
    assert visitor_of(scope("127.0.0.1"), NONE) == "127.0.0.1"
    for forged in ("1.2.3.4", "5.6.7.8, 9.9.9.9", "garbage"):
        assert visitor_of(scope("127.0.0.1", forged), NONE) == "127.0.0.1"


def test_behind_a_trusted_proxy_the_visitor_is_the_entry_the_proxy_appended():
    assert visitor_of(scope("10.0.0.1", "203.0.113.7"), SPACE) == "203.0.113.7"
    # the visitor's own claims come first; only the last entry is the proxy's
    assert visitor_of(scope("10.0.0.1", "1.1.1.1, 2.2.2.2, 203.0.113.7"), SPACE) == "203.0.113.7"
    assert visitor_of(scope("10.0.0.1", "1.1.1.1", "203.0.113.7"), SPACE) == "203.0.113.7"  # two header lines
    assert visitor_of(scope("10.0.0.1", "203.0.113.7:4711"), SPACE) == "203.0.113.7"  # a port is not a visitor
    assert visitor_of(scope("10.0.0.1", "[2001:db8::1]:443"), SPACE) == "2001:db8::1"


def test_a_trusted_proxy_without_a_usable_entry_is_its_own_visitor():
    assert visitor_of(scope("10.0.0.1"), SPACE) == "10.0.0.1"
    assert visitor_of(scope("10.0.0.1", "not-an-address"), SPACE) == "10.0.0.1"
    assert visitor_of(scope(None, "1.2.3.4"), SPACE) == "?"


def test_only_the_named_proxies_are_trusted():
    proxies = parse_proxies("10.0.0.0/8, 127.0.0.1, nonsense")
    assert visitor_of(scope("10.3.4.5", "203.0.113.7"), proxies) == "203.0.113.7"
    assert visitor_of(scope("127.0.0.1", "203.0.113.7"), proxies) == "203.0.113.7"
    assert visitor_of(scope("127.0.0.2", "203.0.113.7"), proxies) == "127.0.0.2"  # not named: the socket
    assert parse_proxies("*").every


def test_the_setting_and_the_space_decide_which_proxies_are_trusted():
    assert not trusted_proxies({}).any
    assert trusted_proxies({"SPACE_ID": "someone/x"}).every
    named = trusted_proxies({"SPACE_ID": "someone/x", "PLAYGROUND_TRUSTED_PROXIES": "10.0.0.0/8"})
    assert not named.every and named.trusts("10.1.1.1") and not named.trusts("11.1.1.1")


def test_behind_n_proxies_the_nth_entry_from_the_end_is_the_visitor():
    two = trusted_proxies({"SPACE_ID": "someone/x", "PLAYGROUND_PROXY_HOPS": "2"})
    assert two.hops == 2 and two.every
    header = "6.6.6.6, 203.0.113.7, 10.9.9.9"  # forged, the visitor (appended by the CDN), the CDN (by the balancer)
    assert visitor_of(scope("10.0.0.1", header), two) == "203.0.113.7"
    assert visitor_of(scope("10.0.0.1", header), SPACE) == "10.9.9.9"
    assert visitor_of(scope("10.0.0.1", "10.9.9.9"), two) == "10.0.0.1"  # fewer entries than hops: the proxy
    assert trusted_proxies({"PLAYGROUND_PROXY_HOPS": "0"}).hops == 1  # out of range: the default


def test_a_request_object_is_read_through_its_scope():
    class Request:
        def __init__(self, scope):
            self.scope = scope

    assert visitor_of(Request(scope("10.0.0.1", "203.0.113.7")), SPACE) == "203.0.113.7"


def test_a_handlers_gr_request_is_read_through_the_request_it_wraps():
    import gradio as gr
    from starlette.requests import Request

    wrapped = gr.Request(request=Request(scope("10.0.0.1", "6.6.6.6, 203.0.113.7")))
    assert visitor_of(wrapped, SPACE) == "203.0.113.7"
    assert visitor_of(wrapped, NONE) == "10.0.0.1"
    assert visitor_of(gr.Request(), SPACE) == "?"  # made without a server request


def test_uvicorn_is_told_to_trust_no_forwarded_header():
    from playground.ui.serving.visitors import distrust_forwarded_headers
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    env = {"FORWARDED_ALLOW_IPS": "*"}
    distrust_forwarded_headers(env)
    seen = {}

    async def app(scope, receive, send):
        seen.update(scope)

    import asyncio

    asyncio.run(ProxyHeadersMiddleware(app, trusted_hosts=env["FORWARDED_ALLOW_IPS"])(
        scope("127.0.0.1", "6.6.6.6"), None, None))
    assert seen["client"][0] == "127.0.0.1"


# --- a fair share --------------------------------------------------------------------------------


def arrival(group: str | None = "generate", session: str | None = None) -> Arrival:
    return Arrival(session, group, "203.0.113.7")


SHARES = {"generate": 4, "forward": 3}
WAITING = {"generate": 40}


@pytest.mark.parametrize("group", ["generate", "forward"])
def test_a_visitors_share_of_a_group_admits_n_minus_1_and_refuses_n(group):
    n = SHARES[group]
    assert check_arrival(arrival(group), n - 1, n - 1, 0, SHARES, WAITING) is None
    message, kind, retry = check_arrival(arrival(group), n, n, 0, SHARES, WAITING)
    assert kind == "too_many" and retry > 0
    assert f"at most {n} per visitor" in message and "try again" in message and f"{retry:g} s" in message


def test_a_group_without_a_share_is_not_capped_per_visitor():
    assert check_arrival(arrival("light"), 5, 500, 0, SHARES, WAITING) is None


def test_a_visitors_requests_in_all_admit_n_minus_1_and_refuse_n():
    n = admission.MAX_EVENTS_PER_ADDRESS
    assert check_arrival(arrival("light"), n - 1, 0, 0, SHARES, WAITING) is None
    message, kind, _ = check_arrival(arrival("light"), n, 0, 0, SHARES, WAITING)
    assert kind == "too_many" and f"at most {n}" in message


def test_a_full_waiting_line_is_busy_with_a_time_to_try_again():
    n = WAITING["generate"]
    assert check_arrival(arrival(), 0, 0, n - 1, SHARES, WAITING) is None
    message, kind, retry = check_arrival(arrival(), 0, 0, n, SHARES, WAITING)
    assert kind == "queue_full" and message.startswith("Busy") and "try again" in message and retry > 0


def test_a_full_queue_is_busy_with_a_time_to_try_again():
    assert check_arrival(arrival("light"), 0, 0, 0, SHARES, WAITING, queued=95, max_queued=96) is None
    message, kind, retry = check_arrival(arrival("light"), 0, 0, 0, SHARES, WAITING, queued=96, max_queued=96)
    assert kind == "queue_full" and "at most 96" in message and retry > 0


def test_a_bad_session_id_is_an_error_before_any_cap():
    message, kind = check_arrival(arrival(session="x" * 10_000), 0, 0, 0, SHARES, WAITING)
    assert kind == "error"


def test_the_defaults_give_each_visitor_a_few_generations_and_room_for_a_class():
    assert 2 <= limits.GENERATIONS_PER_VISITOR <= 4 and 2 <= limits.HEAVY_PER_VISITOR <= 4
    # 40 learners asking at once beside a visitor holding its whole share all get a place
    assert limits.GENERATION_CONCURRENCY + limits.MAX_WAITING_GENERATIONS >= 40 + limits.GENERATIONS_PER_VISITOR


def test_waiting_requests_are_served_visitors_in_turn():
    # the abuser's backlog came first; each learner's one request goes before the abuser's second
    waiting = [("a1", "abuser"), ("a2", "abuser"), ("a3", "abuser"), ("l1", "ann"), ("l2", "bob")]
    assert fair_order(waiting, {}) == ["a1", "l1", "l2", "a2", "a3"]
    # with two of the abuser's running, even its first waiting one goes after every learner's first
    assert fair_order(waiting, {"abuser": 2}) == ["l1", "l2", "a1", "a2", "a3"]
    # equal turns keep their arrival order
    assert fair_order([("x", "ann"), ("y", "bob"), ("z", "cy")], {}) == ["x", "y", "z"]


def test_one_backlog_delays_another_visitor_by_at_most_its_turn():
    backlog = [(f"a{i}", "abuser") for i in range(30)]
    order = fair_order([*backlog, ("me", "learner")], {"abuser": 0})
    assert order.index("me") == 1  # behind the abuser's first only


# --- shares that shrink as the places fill (max-min) -----------------------------------------------


def held(running: int, waiting: int, who: str) -> Held:
    return Held(running, tuple(f"{who}{i}" for i in range(waiting)))


def siege(addresses: int, running: int, waiting: int) -> dict[str, Held]:
    """``addresses`` visitors each holding ``running`` running and ``waiting`` waiting requests."""
    return {f"10.6.6.{i}": held(running, waiting, f"s{i}-") for i in range(addresses)}


def test_a_newcomer_takes_the_newest_waiting_request_of_the_visitor_holding_the_most():
    holdings = {"ann": held(1, 1, "ann"), "big": held(2, 3, "big"), "bob": held(0, 2, "bob")}
    assert give_way(holdings, "me") == ("big", "big2")  # its newest waiting, not its oldest
    # a visitor holding nothing waiting cannot give way, however much it runs
    assert give_way({"runner": Held(4, ()), "ann": held(0, 2, "ann")}, "me") == ("ann", "ann1")
    assert give_way({"runner": Held(4, ())}, "me") is None


def test_giving_way_takes_two_more_than_the_newcomer_holds():
    # n = the newcomer's holding + 2 gives way, n - 1 does not (a swap that only moves the excess)
    for mine in range(4):
        n = mine + 2
        me = {"me": held(mine, 0, "me")} if mine else {}
        assert give_way({**me, "v": held(0, n, "v")}, "me") == ("v", f"v{n - 1}")
        assert give_way({**me, "v": held(0, n - 1, "v")}, "me") is None
    # so a visitor with nothing is admitted before anyone's second request, never before a first
    assert give_way({"v": held(1, 1, "v")}, "me") == ("v", "v0")
    assert give_way({"v": held(0, 1, "v")}, "me") is None


def test_among_equals_the_visitor_with_more_waiting_gives_way_then_by_name():
    assert give_way({"a": held(3, 1, "a"), "b": held(2, 2, "b")}, "me") == ("b", "b1")
    assert give_way({"b": held(2, 2, "b"), "a": held(2, 2, "a")}, "me") == ("a", "a1")
    assert give_way({"me": held(0, 3, "me")}, "me") is None  # never one's own


GROUP_PLACES = {"generate": 16 + 40}


def test_a_full_group_admits_by_eviction_and_a_not_full_one_without():
    caps = {"generate": 40}
    holdings = siege(14, 0, 4)  # 56 waiting of 40: full
    holdings = {v: h for v, h in list(holdings.items())[:10]}  # 40 waiting: exactly full
    decision = decide(arrival(), holdings, 0, SHARES, caps)
    assert decision.refusal is None and decision.evict == ("10.6.6.0", "s0-3")
    fewer = {v: (held(0, 3, v) if i == 0 else h) for i, (v, h) in enumerate(holdings.items())}  # 39 waiting
    assert decide(arrival(), fewer, 0, SHARES, caps) == Decision(None, None)


def test_the_old_attack_of_fourteen_addresses_no_longer_keeps_a_learner_out():
    # 14 addresses, each within its share of 4: 16 running, 40 waiting, every place taken
    holdings = {f"10.6.6.{i}": held(4 if i < 4 else 0, 0 if i < 4 else 4, f"s{i}-") for i in range(14)}
    assert sum(h.total for h in holdings.values()) == GROUP_PLACES["generate"]
    decision = decide(arrival(), holdings, 0, SHARES, {"generate": 40})
    assert decision.refusal is None and decision.evict is not None
    # the attacker that gave way, trying again with 3 held, finds nobody holding 5: refused
    victim, _ = decision.evict
    again = {**holdings, victim: held(0, 3, "again"), arrival().address: held(0, 1, "me")}
    message, kind, retry = decide(Arrival(None, "generate", victim), again, 3, SHARES, {"generate": 40}).refusal
    assert kind == "queue_full" and retry > 0


def test_addresses_holding_one_each_fill_the_places_and_a_newcomer_is_busy():
    holdings = {**siege(16, 1, 0), **{f"10.7.7.{i}": held(0, 1, f"w{i}-") for i in range(40)}}
    assert sum(h.total for h in holdings.values()) == GROUP_PLACES["generate"]
    message, kind, retry = decide(arrival(), holdings, 0, SHARES, {"generate": 40}).refusal
    assert kind == "queue_full" and "try again" in message and retry > 0


def test_the_own_cap_stays_an_upper_bound_when_places_are_free_or_full():
    n = SHARES["generate"]
    mine = {arrival().address: held(1, n - 1, "me")}
    message, kind, _ = decide(arrival(), mine, n, SHARES, {"generate": 40}).refusal
    assert kind == "too_many" and f"at most {n} per visitor" in message
    full = {**siege(10, 0, 4), arrival().address: held(0, n - 1, "me")}  # 43 waiting: full
    assert decide(arrival(), full, n - 1, SHARES, {"generate": 40}).evict is None  # 3 held, nobody holds 5


def test_a_full_whole_queue_with_the_group_not_full_is_a_refusal():
    refusal = decide(arrival("forward"), siege(2, 0, 4), 0, SHARES, {"forward": 40}, queued=128, max_queued=128).refusal
    assert refusal is not None and refusal[1] == "queue_full" and "at most 128" in refusal[0]


@pytest.mark.parametrize("group", ["generate", "forward", "learn"])
def test_each_heavy_group_has_a_share_and_places_that_shrink(group):
    from playground.ui import common, learn

    assert group in admission.DEFAULT_PER_VISITOR
    caps = {common.GENERATE: limits.MAX_WAITING_GENERATIONS, common.FORWARD: limits.MAX_WAITING_FORWARD,
            learn.LEARN: limits.MAX_WAITING_LEARNERS}
    cap = caps[group]
    share = admission.DEFAULT_PER_VISITOR[group]
    holdings = {f"10.6.6.{i}": held(0, share, f"s{i}-") for i in range(-(-cap // share))}
    decision = decide(Arrival(None, group, "203.0.113.7"), holdings, 0, admission.DEFAULT_PER_VISITOR, caps)
    if share >= 2:
        assert decision.refusal is None and decision.evict is not None
    message, retry = admission.gave_way_message(group, share)
    assert message.startswith("Busy") and "try again" in message and retry == admission.RETRY_AFTER_S[group]
    # the heavy groups' waiting places leave the light tabs room in the whole queue
    assert sum(caps.values()) < limits.QUEUE_MAX_SIZE


# --- room for new learners ----------------------------------------------------------------------


def test_the_idle_timeout_shortens_as_the_total_fills():
    limit = 1000
    assert connections.idle_timeout_s(0, limit) == connections.HEADER_TIMEOUT_S
    assert connections.idle_timeout_s(limit // 2, limit) == connections.HEADER_TIMEOUT_S
    assert connections.idle_timeout_s(limit // 2 + 1, limit) < connections.HEADER_TIMEOUT_S
    assert connections.idle_timeout_s(limit, limit) == connections.MIN_IDLE_TIMEOUT_S
    values = [connections.idle_timeout_s(t, limit) for t in range(0, limit + 1, 50)]
    assert values == sorted(values, reverse=True)


def test_a_new_connection_at_the_total_cap_closes_the_idlest_or_is_refused_when_none_is_idle():
    decide = connections.decide
    assert decide(999, 0, 1000, 64, any_idle=False) == "admit"  # n-1 open: admitted
    assert decide(1000, 0, 1000, 64, any_idle=True) == "evict"  # n open: the idlest makes room
    assert decide(1000, 0, 1000, 64, any_idle=False) == "refuse"


def test_an_address_is_capped_at_n_but_a_trusted_proxy_is_not():
    decide = connections.decide
    assert decide(10, 63, 1000, 64, any_idle=True) == "admit"
    assert decide(10, 64, 1000, 64, any_idle=True) == "refuse"
    assert decide(10, 640, 1000, None, any_idle=True) == "admit"  # a proxy: no per-address cap


def test_the_idlest_connection_is_the_one_closed_first():
    counts = connections._Counts()
    a, b, c = object(), object(), object()
    for conn in (a, b, c):
        counts.waits(conn)
    counts.busy(a)  # a request came in on a: no longer idle
    assert counts.idlest() is b
    counts.waits(b)  # b finished a response and waits anew: now the least idle
    assert counts.idlest() is c


def test_the_counts_use_the_proxy_rule_they_are_given():
    counts = connections._Counts()
    counts.is_proxy = lambda address: address == "10.0.0.1"
    for _ in range(connections.MAX_CONNECTIONS_PER_ADDRESS):
        counts.enter("10.0.0.1")
        counts.enter("10.0.0.2")
    assert counts.decide("10.0.0.1") == "admit"
    assert counts.decide("10.0.0.2") == "refuse"


# --- the log -------------------------------------------------------------------------------------


def record(msg: str) -> logging.LogRecord:
    return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, None, None)


def test_never_retrieved_task_exceptions_are_one_kind_whatever_task_they_name():
    limiter = connections.RateLimitedLog(burst=3)
    passed = [limiter.filter(record(f"Task exception was never retrieved\nfuture: <Task finished name='Task-{i}'>"))
              for i in range(10)]
    assert passed == [True] * 3 + [False] * 7
    assert limiter.filter(record("another kind"))


def test_an_abandoned_result_stream_is_counted_not_logged_and_other_loop_errors_pass():
    import asyncio

    errors = connections.LoopErrors()
    passed = []

    class Loop:
        def default_exception_handler(self, context):
            passed.append(context)

    abandoned = {"message": "Task exception was never retrieved",
                 "exception": RuntimeError("async generator ignored GeneratorExit")}
    for _ in range(5):
        errors(Loop(), abandoned)
    other = {"message": "Task exception was never retrieved", "exception": RuntimeError("something else")}
    errors(Loop(), other)
    assert errors.abandoned == 5 and passed == [other]
    assert not connections.is_abandoned_stream({"message": "x"})


def test_the_loop_handler_is_installed_on_the_running_loop():
    import asyncio

    async def main():
        handler = connections.quiet_abandoned_streams()
        return asyncio.get_running_loop().get_exception_handler() is handler

    assert asyncio.run(main())


def test_the_groups_waiting_line_is_put_in_the_order_given():
    from types import SimpleNamespace

    from gradio.queueing import EventQueue

    from playground.ui import gradio_internals

    group = EventQueue("generate", 16)
    group.queue = [SimpleNamespace(_id=i) for i in ("a1", "a2", "l1", "x")]
    demo = SimpleNamespace(_queue=SimpleNamespace(event_queue_per_concurrency_id={"generate": group}))
    gradio_internals.reorder_waiting(demo, "generate", ["l1", "a1", "a2"])
    assert [e._id for e in group.queue] == ["l1", "a1", "a2", "x"]  # an id not named keeps its place after
    assert [e._id for e in gradio_internals.waiting_events(demo, "generate")] == ["l1", "a1", "a2", "x"]
    gradio_internals.reorder_waiting(demo, "absent", ["x"])  # no such group: nothing to do


def test_a_waiting_request_is_failed_from_the_line_with_its_reader_told_when_to_try_again():
    import asyncio
    from types import SimpleNamespace

    from gradio.queueing import EventQueue

    from playground.ui import gradio_internals

    group = EventQueue("generate", 16)
    group.queue = [SimpleNamespace(_id=i, session_hash=f"s-{i}", alive=True) for i in ("a1", "a2", "l1")]
    messages = asyncio.Queue()
    queue = SimpleNamespace(event_queue_per_concurrency_id={"generate": group},
                            event_ids_to_events={e._id: e for e in group.queue}, pending_messages_per_session={"s-a2": messages})
    demo = SimpleNamespace(_queue=queue)
    victim = group.queue[1]
    assert gradio_internals.fail_waiting(demo, "generate", "a2", "Busy: try again in about 10 s.", "Busy", retry_after=10)
    assert [e._id for e in group.queue] == ["a1", "l1"] and "a2" not in queue.event_ids_to_events and not victim.alive
    message = messages.get_nowait()
    assert message.event_id == "a2" and not message.success
    assert message.output == {"error": "Busy: try again in about 10 s.", "title": "Busy", "visible": True, "retry_after": 10}
    assert not gradio_internals.fail_waiting(demo, "generate", "a2", "x", "Busy")  # no longer waits
    assert not gradio_internals.fail_waiting(demo, "absent", "a1", "x", "Busy")


def test_a_learners_first_pass_goes_ahead_of_a_group_addresss_next_ones_served_lately():
    """Heavy passes in turn by what each visitor was served lately, not only what it runs now:
    an address that had 4 passes in the last minute (all done) and sends a fifth waits behind a
    learner's first, though the learner came later; past RECENT_S they count no more; what is
    remembered stays bounded."""
    from collections import Counter

    from playground.ui.serving import admission
    from playground.ui.serving.admission import RECENT_PER_VISITOR, RECENT_S, VisitorEvents

    clock = [0.0]
    events = VisitorEvents(lambda e: False, clock=lambda: clock[0])
    for _ in range(5):
        events.note("group", "forward")
        clock[0] += 1
    events.note("learner", "forward")
    waiting = Counter({"group": 1, "learner": 1})
    served = events.served_recently("forward", waiting)
    assert served == {"group": 4}
    assert fair_order([("g5", "group"), ("l1", "learner")], served) == ["l1", "g5"]
    clock[0] += RECENT_S + 1
    assert events.served_recently("forward", Counter()) == {}
    for _ in range(3 * RECENT_PER_VISITOR):
        events.note("group", "forward")
    assert len(events.recent["forward"]["group"]) == RECENT_PER_VISITOR
    old = admission.RECENT_VISITORS
    admission.RECENT_VISITORS = 3
    try:
        for i in range(10):
            events.note(f"v{i}", "forward")
        assert len(events.recent["forward"]) == 3 and "v9" in events.recent["forward"]
    finally:
        admission.RECENT_VISITORS = old


def test_the_line_is_ordered_by_what_each_visitor_ran_lately_and_runs_now():
    """admit's order of a group's waiting events (admission.waiting_order): an address whose 4
    passes ran and ended in the last minute waits behind a learner who came after its fifth; one
    with 2 running waits behind one that ran 1 lately."""
    from playground.ui.serving.admission import VisitorEvents, waiting_order

    live = {"g5", "l1", "r1", "r2", "r3", "s2"}
    clock = [0.0]
    events = VisitorEvents(lambda e: e in live, clock=lambda: clock[0])
    for i in range(1, 6):
        events.add("group", f"g{i}", "forward")
        events.note("group", "forward")
        clock[0] += 1
    events.add("learner", "l1", "forward")
    events.note("learner", "forward")
    assert waiting_order(events, "forward", [("g5", "group"), ("l1", "learner")]) == ["l1", "g5"]
    for e in ("r1", "r2", "r3"):  # two running and one waiting
        events.add("runner", e, "forward")
        events.note("runner", "forward")
    events.add("slow", "s1", "forward")  # ran lately, done
    events.note("slow", "forward")
    events.add("slow", "s2", "forward")
    events.note("slow", "forward")
    assert waiting_order(events, "forward", [("r3", "runner"), ("s2", "slow")]) == ["s2", "r3"]


def test_an_address_served_lately_gives_its_waiting_place_to_a_learner_served_none():
    """Addresses each holding one waiting place, one pass after another: counted by places alone
    none holds two more than a learner, so the learner was refused; counted with what each ran in
    the last minute, the most served gives its newest waiting request, and one served once lately
    (1 + 1 waiting = 2 against the learner's 0) does too, where one served never does not."""
    holdings = {"g1": Held(0, ("a",)), "g2": Held(0, ("b",))}
    assert give_way(holdings, "learner") is None
    assert give_way(holdings, "learner", {"g1": 3, "g2": 5}) == ("g2", "b")
    assert give_way(holdings, "learner", {"g1": 1}) == ("g1", "a")
    assert give_way(holdings, "learner", {"g1": 0}) is None
    assert give_way({**holdings, "learner": Held(0, ())}, "learner", {"g1": 2, "learner": 2}) is None  # 2 + 1 < 2 + 2


def test_a_newcomers_place_in_the_line_is_the_one_it_will_be_served_in():
    """admission.ahead_of, what /expected-wait tells a page: a learner who has run nothing goes before
    every pass of addresses that ran lately (0 ahead), one that ran two lately goes behind those that
    ran fewer, and with nobody's history every waiting pass goes first (arrival order)."""
    from playground.ui.serving.admission import VisitorEvents, ahead_of, waiting_order

    live = {"g5", "h3", "w1"}
    clock = [0.0]
    events = VisitorEvents(lambda e: e in live, clock=lambda: clock[0])
    for visitor, n in (("group", 5), ("herd", 3)):
        for i in range(1, n + 1):
            events.add(visitor, f"{visitor[0]}{i}", "forward")
            events.note(visitor, "forward")
            clock[0] += 1
    pairs = [("g5", "group"), ("h3", "herd")]
    assert ahead_of(events, "forward", pairs, "learner") == 0
    assert ahead_of(events, "forward", pairs, "herd") == 1  # its 3rd waits; behind it (turn 2), before group's 5th (turn 4)
    assert waiting_order(events, "forward", pairs) == ["h3", "g5"]
    fresh = VisitorEvents(lambda e: e in live)
    assert ahead_of(fresh, "forward", [("w1", "a"), ("w2", "b")], "learner") == 2
    assert ahead_of(fresh, "forward", [], "learner") == 0


def test_the_apps_line_is_read_from_gradios_own_queue_for_the_wait_a_page_is_told():
    """admission.ahead_in on Gradio's own queue and events (not stand-ins): three passes of an
    address served twice lately wait; a learner who ran none is told none go before it, the
    address itself that all three do; ExpectedWait's answer for the learner says so, every
    handler of the group busy."""
    from gradio.queueing import Event

    from playground.ui import gradio_internals
    from playground.ui.serving.admission import VisitorEvents, ahead_in
    from playground.ui.serving.wait import ExpectedWait

    demo = gradio_internals.probe_app()
    queue = demo._queue
    fn = next(iter(demo.fns.values()))
    group = fn.concurrency_id
    queue.create_event_queue_for_fn(fn)
    events = VisitorEvents(lambda e: e in queue.event_ids_to_events)
    for _ in range(2):
        events.note("group", group)
    for i in range(3):
        event = Event(f"s{i}", fn, None, None)
        queue.event_queue_per_concurrency_id[group].queue.append(event)
        queue.event_ids_to_events[event._id] = event
        events.add("group", event._id, group)
        events.note("group", group)
    ahead = ahead_in(demo, events)
    assert ahead(group, "learner") == 0 and ahead(group, "group") == 3
    waiting = queue.event_queue_per_concurrency_id[group]
    waiting.concurrency_limit, waiting.current_concurrency = 2, 2
    told = ExpectedWait(None, demo, lambda p: None, lambda: [], "generate", pass_group=group, ahead=ahead)
    assert told.expected_pass("learner").ahead == 0 and told.expected_pass("group").ahead == 3
    assert told.expected_pass("learner").handlers_busy
