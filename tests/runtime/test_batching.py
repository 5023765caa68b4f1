"""Continuous batching (runtime/batching.py): requests that join and leave a shared decoding loop
get the tokens, and the logits, of each request decoded on its own by plain onnxruntime (no cache,
no padding, no batch: tests/plain_onnx.py) with the reference sampling rule (runtime.sampling.sample) applied to those
logits; settings and seeds stay per request, cancelled requests leave at once, and the batch's
bounds hold. (Not against ``runtime.generate``: a one-row batch of the same loop agrees with any
bug the loop has.)"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conftest import TINY, wait_for
from plain_onnx import plain_decode, session
from playground.limits import MAX_BATCH_ROWS, MAX_WAITING_REQUESTS
from runtime.batching import Batch, Busy, Request, Scheduler
from runtime.engine import Engine
from runtime.params import SamplingParams
from runtime import draws
from runtime.sampling import sample, softmax
from runtime.steps import DecodeStep

# (prompt, SamplingParams(max_new_tokens, temperature, top_k, top_p, seed, num_samples)): different
# lengths (one longer than the tiny model's 32-token context, so it is cut and slides inside the
# batch), every sampling control, several samples.
REQUESTS = [
    ([464, 3290, 286, 262, 995], SamplingParams(40, 0.0, None, None, None, 1, stop_at_eot=False)),
    ([40, 716], SamplingParams(25, 0.8, 40, None, 7, 1, stop_at_eot=False)),
    (list(range(1000, 1040)), SamplingParams(30, 1.0, None, 0.9, 3, 2, stop_at_eot=False)),
    ([50256], SamplingParams(12, 1.3, 5, 0.95, 11, 3, stop_at_eot=False)),
    ([318, 257, 1332, 286, 262, 1842, 1080, 13, 632, 318], SamplingParams(50, 0.7, None, None, 5, 1, stop_at_eot=False)),
]


# Max |logit difference| from plain onnxruntime at one step: the batch pads and caches, the plain
# loop reads each window whole, so float rounding differs (~1e-6 on the tiny fp32 model); a hidden
# or misplaced token moves them by far more.
TOL = 1e-4


@pytest.fixture(scope="module")
def engine(tiny_export) -> Engine:
    return Engine.load(tiny_export.paths["fp32"], provider="cpu")


class Alone:
    """Each request on its own in plain onnxruntime: every row's window read whole at every step
    (the last block_size tokens; the oldest context_shift leave when a token overflows it), its
    tokens drawn by the reference rule (runtime.sampling.sample, not the loop's fast path) with the
    request's settings, token i of sample s with the seed's uniform i in lane s
    (runtime.draws.uniform(seed, SAMPLING, 1, i, s)). Worked out once per request."""

    def __init__(self, path, block_size: int, shift: int) -> None:
        self.sess, self.block_size, self.shift = session(path), block_size, shift
        self.done: dict[tuple, tuple[list[list[int]], list[list[np.ndarray]]]] = {}

    def __call__(self, prompt: list[int], params: SamplingParams) -> tuple[list[list[int]], list[list[np.ndarray]]]:
        """Each row's tokens (ending with <|endoftext|> where it stopped there) and the logits each
        was drawn from."""
        key = (tuple(prompt), params)
        if key not in self.done:
            n, index = params.num_samples, iter(range(params.max_new_tokens))

            def choose(logits: np.ndarray) -> np.ndarray:
                i = next(index)  # token i of sample s: the seed's uniform i in lane s
                u = [0.0 if params.greedy else draws.uniform(params.seed, draws.SAMPLING, 1, i, s)[0] for s in range(n)]
                return np.array([sample(row, *params.settings, u[s]) for s, row in enumerate(logits)])

            self.done[key] = plain_decode(self.sess, prompt, n, params.max_new_tokens, block_size=self.block_size,
                                          shift=self.shift, choose=choose, eot=50256 if params.stop_at_eot else None)
        return self.done[key]

    def tokens(self, prompt: list[int], params: SamplingParams) -> list[list[int]]:
        return self(prompt, params)[0]


@pytest.fixture(scope="module")
def alone(tiny_export, engine) -> Alone:
    return Alone(tiny_export.paths["fp32"], TINY.block_size, engine.context_shift)


def worst(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max())


@pytest.mark.parametrize("wide", [False, True], ids=["one engine", "wide calls on two threads"])
def test_requests_that_join_and_leave_a_batch_decode_as_they_would_alone(engine, tiny_export, wide, monkeypatch, alone):
    """Alone is each request in plain onnxruntime (:class:`Alone`); in the batch, with a ``wide``
    engine (the app's on more than one core), prefills and steps of 4 rows or more run on two
    threads: the same tokens, and the same logits at every step."""
    calls = {"narrow": 0, "wide": 0}
    wide_engine = Engine.load(tiny_export.paths["fp32"], provider="cpu", threads=2, spin=False) if wide else None
    for name, eng in (("narrow", engine), ("wide", wide_engine)):
        if eng is not None:
            forward = eng.forward
            monkeypatch.setattr(eng, "forward", lambda *a, _f=forward, _n=name: calls.__setitem__(_n, calls[_n] + 1) or _f(*a))
    batch = Batch(engine, wide=wide_engine)
    # step -> requests joining before it (prefilled together: 2, 5 and 40 tokens in one call)
    joins = {0: [0, 1, 2], 7: [3], 20: [4]}
    got: dict[int, list[list[int]]] = {}
    logits: dict[int, list[list[np.ndarray]]] = {}
    seqs: dict[int, object] = {}
    step, rows_seen, padded = 0, [], False
    while step <= max(joins) or batch.active:
        for i in joins.get(step, []):
            prompt, params = REQUESTS[i]
            seqs[i] = Request.new(np.array(prompt), params, engine.block_size)
            got[i] = [[] for _ in range(params.num_samples)]
            logits[i] = [[] for _ in range(params.num_samples)]
        batch.add(*(seqs[i] for i in joins.get(step, [])))
        rows_seen.append(batch.rows)
        padded |= len({s.length for s in batch.seqs}) > 1
        for seq, decoded in batch.step():
            i = next(k for k, s in seqs.items() if s is seq)
            for row, (token, live) in enumerate(zip(decoded.tokens.tolist(), decoded.live)):
                if live:
                    got[i][row].append(token)
                    logits[i][row].append(decoded.logits[row])
        step += 1
    assert padded and max(rows_seen) >= 6  # they really shared padded steps
    assert batch.past is None and batch.rows == 0  # everyone left, the cache with them
    if wide:  # prefills and steps of many rows went wide, lone rows' steps did not
        assert calls["wide"] >= len(joins) and calls["narrow"] > 0
    for i, request in enumerate(REQUESTS):
        tokens, expected = alone(*request)
        for row in range(request[1].num_samples):
            diffs = [worst(a, b) for a, b in zip(logits[i][row], expected[row])]
            assert max(diffs) <= TOL, f"request {i} row {row}: step {int(np.argmax(diffs))} differs by {max(diffs):.3g}"
        assert got[i] == tokens, f"request {i} changed in the batch"


def test_requests_admitted_together_are_read_in_as_few_calls_as_the_prefill_bound_allows(engine, alone, monkeypatch):
    """Eight requests clicked together, under a bound of 64 prefill tokens: each graph call that
    reads prompts stays within it (a request alone may exceed it), no two neighbouring calls could
    have been one, a request with several samples reads its one prompt once, and every request
    then decodes as it would alone."""
    import runtime.batching as batching

    monkeypatch.setattr(batching, "MAX_PREFILL_TOKENS", 64)
    prompts = [[464, 3290], [40, 716, 318], list(range(1000, 1020)), [50256], [318, 257, 1332], [13] * 17, [11, 12], [7]]
    samples = [1, 1, 1, 3, 1, 1, 2, 1]
    params = [SamplingParams(6, 0.9, None, None, 10 + i, n, stop_at_eot=False) for i, n in enumerate(samples)]
    calls: list[tuple[int, int]] = []  # (rows, columns) of every prefill
    forward = engine.forward

    def spy(ids, past, mask=None, positions=None, prefill=False):
        if engine.cache_length(past) == 0:
            calls.append(ids.shape)
        return forward(ids, past, mask, positions, prefill)

    monkeypatch.setattr(engine, "forward", spy)
    batch = Batch(engine)
    seqs = [Request.new(np.array(p), q, engine.block_size) for p, q in zip(prompts, params)]
    batch.add(*seqs)
    assert sum(rows for rows, _ in calls) == len(prompts)  # one row per request: the samples share it
    aligned = [-(-len(p) // batching.CACHE_ALIGN) * batching.CACHE_ALIGN for p in prompts]
    first = np.cumsum([0] + [rows for rows, _ in calls])
    for k, (rows, columns) in enumerate(calls):
        assert rows == 1 or rows * columns <= 64, calls
        assert columns == max(aligned[first[k]:first[k + 1]])
        if k + 1 < len(calls):  # the next call's first request would not have fitted in this one
            assert (rows + 1) * max(columns, aligned[first[k + 1]]) > 64, calls
    assert len(calls) > 1
    got = {id(s): [[] for _ in range(s.n)] for s in seqs}
    while batch.active:
        for seq, step in batch.step():
            for row, (token, live) in enumerate(zip(step.tokens.tolist(), step.live)):
                if live:
                    got[id(seq)][row].append(token)
    for seq, prompt, q in zip(seqs, prompts, params):
        assert got[id(seq)] == alone.tokens(prompt, q), prompt


def test_a_full_context_slides_inside_the_batch_as_alone(engine, alone):
    """A row whose context fills is read anew on its own while its neighbours keep their cache."""
    long, short = list(range(2000, 2000 + TINY.block_size - 2)), [464, 3290]
    batch = Batch(engine)
    greedy, sampled = SamplingParams(20, stop_at_eot=False), SamplingParams(20, 0.9, seed=1, stop_at_eot=False)
    a = Request.new(np.array(long), greedy, engine.block_size)
    b = Request.new(np.array(short), sampled, engine.block_size)
    batch.add(a)
    batch.add(b)
    tokens, logits = {id(a): [], id(b): []}, {id(a): [], id(b): []}
    notices = []
    while batch.active:
        for seq, step in batch.step():
            tokens[id(seq)].append(int(step.tokens[0]))
            logits[id(seq)].append(step.logits[0])
            notices.append(step.notice)
    assert any(n and "context is full" in n for n in notices)
    for seq, prompt, params in ((a, long, greedy), (b, short, sampled)):
        expected_tokens, expected_logits = alone(prompt, params)
        assert max(worst(x, y) for x, y in zip(logits[id(seq)], expected_logits[0])) <= TOL
        assert [tokens[id(seq)]] == expected_tokens


def test_concurrent_streams_share_the_loop_and_match_alone(engine, alone):
    """Ten streams on their own threads: each gets its request's tokens, and at every step the
    10 candidates the page shows are the 10 most likely of plain onnxruntime's logits, with their
    probabilities (softmax at temperature 1) and the drawn token's."""
    scheduler = Scheduler(engine, max_rows=16, max_waiting=MAX_WAITING_REQUESTS)
    try:
        def run(request):
            prompt, params = request
            out = [[] for _ in range(params.num_samples)]
            shown = [[] for _ in range(params.num_samples)]
            for step in scheduler.stream(prompt, params):
                for row, token in enumerate(step.token_ids):
                    if token is not None:
                        out[row].append(token)
                        shown[row].append((step.candidates[row], step.token_probs[row]))
            return out, shown

        with ThreadPoolExecutor(len(REQUESTS)) as pool:
            results = list(pool.map(run, REQUESTS * 2))
        for request, (result, shown) in zip(REQUESTS * 2, results):
            tokens, logits = alone(*request)
            assert result == tokens
            for row in range(len(tokens)):
                for token, (candidates, p_token), row_logits in zip(tokens[row], shown[row], logits[row]):
                    p = softmax(row_logits[None])[0]
                    pool = np.argpartition(-p, 20)[:20]  # the 10 most likely, the lower id first among equals
                    best = pool[np.lexsort((pool, -p[pool]))][:10]
                    assert [c.token_id for c in candidates] == best.tolist()
                    np.testing.assert_allclose([c.prob for c in candidates], p[best], atol=1e-6)
                    assert p_token == pytest.approx(p[token], abs=1e-6)
        tokens = sum(params.max_new_tokens for _, params in REQUESTS) * 2
        assert scheduler.steps < tokens  # many requests' tokens came out of one graph call
    finally:
        scheduler.close()


def test_a_closed_stream_leaves_the_batch_at_the_next_step(engine, monkeypatch):
    scheduler = Scheduler(engine, max_rows=MAX_BATCH_ROWS, max_waiting=MAX_WAITING_REQUESTS)
    forward = engine.forward
    # (each graph call paced to 5 ms: the request is still decoding when its stream closes)
    monkeypatch.setattr(engine, "forward", lambda *a: (time.sleep(0.005), forward(*a))[1])
    try:
        stream = scheduler.stream([464, 3290], SamplingParams(500, 0.8, seed=1, num_samples=2, stop_at_eot=False))
        next(stream), next(stream)
        assert scheduler.running_rows == 2
        stream.close()
        wait_for(lambda: scheduler.running_rows == 0, 5, 0.01, message="the closed stream's rows to leave the batch")
        steps = scheduler.steps
        assert steps < 500  # it left long before its 500 tokens
        # Nothing left to decode: the loop waits for work. (A check that nothing happens needs time
        # to pass: 0.1 s is 20 of the paced steps.)
        time.sleep(0.1)
        assert scheduler.steps == steps
    finally:
        scheduler.close()


def test_the_cache_is_cut_to_the_longest_row_left_when_a_long_row_leaves(engine, monkeypatch, alone):
    """A long request and a short one decode together in the app's loop; once the long one has
    finished, the short one's steps read a cache cut down to its own length: in every decode call
    the padding before the longest row is under CACHE_ALIGN columns. (Kept long, the results stay
    right, the padding being masked, but each step reads and writes the long row's columns for
    nothing.)"""
    from runtime.batching import CACHE_ALIGN

    scheduler = Scheduler(engine, max_rows=MAX_BATCH_ROWS, max_waiting=MAX_WAITING_REQUESTS)
    forward, decodes = engine.forward, []  # (rows, cache columns, the longest row's cached positions)

    def spy(ids, past, mask=None, positions=None, prefill=False):
        if engine.cache_length(past):
            decodes.append((len(ids), engine.cache_length(past), int(positions.max())))
        time.sleep(0.002)  # (paced: the short request joins while the long one runs)
        return forward(ids, past, mask, positions, prefill)

    monkeypatch.setattr(engine, "forward", spy)
    long_prompt, short_prompt = list(range(1000, 1020)), [464]
    long_params = SamplingParams(10, 0.8, seed=2, stop_at_eot=False)
    short_params = SamplingParams(14, 0.8, seed=5, stop_at_eot=False)
    try:
        long, short = scheduler.stream(long_prompt, long_params), scheduler.stream(short_prompt, short_params)
        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(lambda stream: [step.token_ids[0] for step in stream], (long, short)))
    finally:
        scheduler.close()
    together = [i for i, (rows, _, _) in enumerate(decodes) if rows == 2]
    assert together and together[-1] < len(decodes) - 2, decodes  # the short one went on alone for a few steps
    assert max(cached for _, _, cached in decodes) >= len(long_prompt)
    padding = [columns - cached for _, columns, cached in decodes]
    assert max(padding) < CACHE_ALIGN, decodes
    assert got == [alone.tokens(long_prompt, long_params)[0], alone.tokens(short_prompt, short_params)[0]]


def test_the_batch_stays_within_its_rows_and_the_waiting_line_is_bounded(engine, monkeypatch, alone):
    scheduler = Scheduler(engine, max_rows=3, max_waiting=1)
    forward, widest = engine.forward, []

    def slow(ids, *rest):  # (paced to 2 ms a call: the first request still runs when the others arrive)
        widest.append(len(ids))
        time.sleep(0.002)
        return forward(ids, *rest)

    monkeypatch.setattr(engine, "forward", slow)
    try:
        with pytest.raises(ValueError, match="num_samples must be at most 3"):
            scheduler.stream([464], SamplingParams(5, num_samples=4))
        first = scheduler.stream([464], SamplingParams(400, stop_at_eot=False, num_samples=2))
        next(first)  # two rows running: a 2-sample request must wait for room
        second = scheduler.stream([40, 716], SamplingParams(10, 0.7, seed=3, num_samples=2))
        with pytest.raises(Busy, match="try again"):
            scheduler.stream([40], SamplingParams(10))  # the one waiting place is taken
        first.close()
        got = [s.token_ids for s in second]
        assert max(widest) <= 3
        expected = alone.tokens([40, 716], SamplingParams(10, 0.7, seed=3, num_samples=2))
        assert len(got) == max(map(len, expected))
        for row, tokens in enumerate(expected):
            assert [t[row] for t in got if t[row] is not None] == tokens
    finally:
        scheduler.close()


def test_a_request_of_as_many_samples_as_the_batch_has_rows_fills_it_and_decodes_as_alone(engine, alone):
    """The batch's bound at its maximum: a request of exactly ``max_rows`` samples is taken, runs
    them all in one step, and writes what it writes alone; one more sample is refused at the call."""
    scheduler = Scheduler(engine, max_rows=3, max_waiting=1)
    params = SamplingParams(6, 0.9, seed=4, num_samples=3, stop_at_eot=False)
    try:
        with pytest.raises(ValueError, match="num_samples must be at most 3"):
            scheduler.stream([464], SamplingParams(6, num_samples=4))
        got = [step.token_ids for step in scheduler.stream([464, 3290], params)]
    finally:
        scheduler.close()
    assert [[t[row] for t in got] for row in range(3)] == alone.tokens([464, 3290], params)


def test_bad_arguments_are_refused_at_the_call(engine):
    scheduler = Scheduler(engine, max_rows=MAX_BATCH_ROWS, max_waiting=MAX_WAITING_REQUESTS)
    try:
        with pytest.raises(ValueError, match="prompt_ids is empty"):
            scheduler.stream([], SamplingParams(5))
        with pytest.raises(ValueError, match="token ids must be in"):
            scheduler.stream([-1], SamplingParams(5))
        assert [len(s.token_ids) for s in scheduler.stream([464], SamplingParams(3))] == [1, 1, 1]  # still serving
    finally:
        scheduler.close()


def test_an_engine_error_reaches_every_running_request_and_the_loop_goes_on(engine, monkeypatch):
    scheduler = Scheduler(engine, max_rows=MAX_BATCH_ROWS, max_waiting=MAX_WAITING_REQUESTS)
    forward = engine.forward
    broken = threading.Event()
    broken.set()

    def flaky(*args):
        if broken.is_set() and args[0].shape[1] == 1:
            raise RuntimeError("graph failed")
        return forward(*args)

    monkeypatch.setattr(engine, "forward", flaky)
    try:
        with pytest.raises(RuntimeError, match="graph failed"):
            list(scheduler.stream([464, 3290], SamplingParams(10)))
        broken.clear()
        assert len(list(scheduler.stream([464, 3290], SamplingParams(4)))) == 4
    finally:
        scheduler.close()


def test_the_loop_hands_its_arenas_memory_back_each_time_it_goes_idle(tiny_export, monkeypatch):
    """Steps do not shrink the arena ("shrink-prefill"): once the last request has left (it
    finished or its stream closed) and the loop has been idle for RELEASE_IDLE_S, it calls
    release_memory on its engine and its wide engine, once per idle spell, never while decoding."""
    engine = Engine.load(tiny_export.paths["fp32"], provider="cpu")
    wide = Engine.load(tiny_export.paths["fp32"], provider="cpu", threads=2, spin=False)
    released: list[str] = []
    monkeypatch.setattr(engine, "release_memory", lambda: released.append("engine"))
    monkeypatch.setattr(wide, "release_memory", lambda: released.append("wide"))
    scheduler = Scheduler(engine, max_rows=MAX_BATCH_ROWS, max_waiting=MAX_WAITING_REQUESTS, wide=wide)
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda s: list(scheduler.stream([464, 3290], SamplingParams(20, 0.8, seed=s, stop_at_eot=False))), range(3)))
        wait_for(lambda: released == ["engine", "wide"], 5, 0.01, message="the idle loop to release both arenas")
        assert scheduler.steps >= 20
        stream = scheduler.stream([40, 716], SamplingParams(500, 0.8, seed=1, stop_at_eot=False))
        next(stream)
        assert released == ["engine", "wide"]  # busy again: nothing released while it decodes
        stream.close()
        wait_for(lambda: released == ["engine", "wide"] * 2, 5, 0.01, message="a closed stream's idle loop to release again")
    finally:
        scheduler.close()


# -- turns: visitors served in turn, a running generation yielding its rows ----------------------

class _Log:
    """Every step the loop hands out, in the loop's own order (readers' threads would reorder
    them): ``batching.queue.SimpleQueue`` replaced by queues that note each put, named in the
    order the streams were opened."""

    def __init__(self) -> None:
        self.names: list[str] = []  # the next streams' names, in the order they will be opened
        self.events: list[tuple[str, int]] = []  # (stream, its step) as the loop put them
        outer = self

        class Noting(queue.SimpleQueue):
            def __init__(self) -> None:
                super().__init__()
                self.name, self.count = outer.names.pop(0), 0

            def put(self, item, *a, **k) -> None:
                if isinstance(item, DecodeStep):
                    outer.events.append((self.name, self.count))
                    self.count += 1
                super().put(item, *a, **k)

        self.SimpleQueue = Noting

    def first(self, name: str) -> int:
        return next(i for i, (n, _) in enumerate(self.events) if n == name)

    def last(self, name: str) -> int:
        return max(i for i, (n, _) in enumerate(self.events) if n == name)

    def before(self, name: str, other: str) -> int:
        """``other``'s steps before ``name``'s first."""
        return sum(1 for n, _ in self.events[: self.first(name)] if n == other)


def _read(stream) -> list[list[int]]:
    out: list[list[int]] = []
    for step in stream:
        out = out or [[] for _ in step.token_ids]
        for row, token in enumerate(step.token_ids):
            if token is not None:
                out[row].append(token)
    return out


def test_a_running_generation_yields_its_row_to_a_waiting_visitor_and_writes_what_it_writes_alone(engine, alone, monkeypatch):
    """One row, a slice of 8 tokens. Visitor a's long generation runs; a's second request comes,
    then visitor b's: b is served before a's second (visitors in turn by tokens, not arrival),
    within one slice of a's running one (it yields its row rather than finish its 60 tokens),
    and every text, the yielded one's too, is the one plain onnxruntime gives alone."""
    import runtime.batching as batching

    log = _Log()
    monkeypatch.setattr(batching, "queue", log)
    forward = engine.forward
    # (each graph call paced to 2 ms: a's generation is still decoding when the others arrive)
    monkeypatch.setattr(engine, "forward", lambda *a: (time.sleep(0.002), forward(*a))[1])
    requests = {"a1": ([464, 3290], SamplingParams(60, 0.8, seed=1, stop_at_eot=False)),
                "a2": ([40, 716], SamplingParams(20, 0.9, seed=2, stop_at_eot=False)),
                "b": ([318, 257, 1332], SamplingParams(20, 0.7, top_k=40, seed=3, stop_at_eot=False))}
    scheduler = Scheduler(engine, max_rows=1, max_waiting=MAX_WAITING_REQUESTS, slice_tokens=8)
    try:
        with ThreadPoolExecutor(3) as pool:
            log.names.append("a1")
            a1 = pool.submit(_read, scheduler.stream(*requests["a1"], visitor="a"))
            wait_for(lambda: len(log.events) >= 2, 10, 0.005, message="a's first tokens")
            log.names += ["a2", "b"]
            a2 = pool.submit(_read, scheduler.stream(*requests["a2"], visitor="a"))
            b = pool.submit(_read, scheduler.stream(*requests["b"], visitor="b"))
            got = {"a1": a1.result(30), "a2": a2.result(30), "b": b.result(30)}
        assert log.first("b") < log.first("a2"), "a's second request was served before b's first"
        assert log.first("b") < log.last("a1"), "a's generation never yielded its row"
        # b waited for the rest of a's slice at most (a had decoded 2 or more when b came)
        assert log.before("b", "a1") <= 2 + 8 + 8, log.events[: log.first("b") + 1]
        assert scheduler.parks >= 1
        for name, request in requests.items():
            assert got[name] == alone.tokens(*request), f"{name} changed by yielding its row"
    finally:
        scheduler.close()


def test_a_parked_request_rejoins_a_batch_of_another_length_and_decodes_as_alone(engine, alone):
    """Batch.park keeps a request's cache aside while others go on; added back after 5 steps
    (the cache's length then differs from its own by no multiple of CACHE_ALIGN, so it waits for
    a step where it does), it draws the tokens, and sees the logits, that it does alone. (The
    sampled request draws from its two likeliest tokens: the tiny model's logits are nearly all
    alike, and with top-p over thousands of them a difference of 1e-7 between two CPUs' kernels
    reordered near-ties and moved the draw; between two candidates it would take a tie.)"""
    requests = [([464, 3290, 286, 262, 995], SamplingParams(40, 0.0, stop_at_eot=False)),
                (list(range(1000, 1020)), SamplingParams(30, 1.0, top_k=2, seed=3, num_samples=2, stop_at_eot=False))]
    batch = Batch(engine)
    seqs = [Request.new(np.array(p), q, engine.block_size) for p, q in requests]
    batch.add(*seqs)
    got = {id(s): ([[] for _ in range(s.n)], [[] for _ in range(s.n)]) for s in seqs}
    step, parked_during = 0, 0
    while batch.active or seqs[1].parked is not None:
        if step == 6:
            batch.park([seqs[1]])
            assert seqs[1].parked is not None and seqs[1] not in batch.active
        if step == 11:
            batch.add(seqs[1])
        parked_during += seqs[1].parked is not None
        for seq, decoded in batch.step() if batch.active else []:
            for row, (token, live) in enumerate(zip(decoded.tokens.tolist(), decoded.live)):
                if live:
                    got[id(seq)][0][row].append(token)
                    got[id(seq)][1][row].append(decoded.logits[row])
        step += 1
    assert parked_during == 5
    for seq, request in zip(seqs, requests):
        tokens, logits = alone(*request)
        assert got[id(seq)][0] == tokens
        for row in range(seq.n):
            assert max(worst(a, b) for a, b in zip(got[id(seq)][1][row], logits[row])) <= TOL


def test_visitors_take_turns_with_the_rows_kept_aside_within_their_bound(engine, alone, monkeypatch):
    """Five visitors on two rows, a slice of 4 tokens, at most 2 rows kept aside: generations
    yield and resume in turn, never more than 2 rows aside at once, and each writes its own text
    (a 2-sample one too); with no room to keep rows aside, they yield all the same, and are read
    anew from their tokens when they resume."""
    forward = engine.forward
    monkeypatch.setattr(engine, "forward", lambda *a: (time.sleep(0.002), forward(*a))[1])  # (paced: they overlap)
    requests = [([464 + i, 3290], SamplingParams(30, 0.8, seed=i, num_samples=1 + (i == 2), stop_at_eot=False))
                for i in range(5)]
    for max_parked in (2, 0):
        scheduler = Scheduler(engine, max_rows=2, max_waiting=MAX_WAITING_REQUESTS, slice_tokens=4,
                              max_parked_rows=max_parked)
        aside, done = [], threading.Event()

        def watch():
            while not done.is_set():
                aside.append(scheduler.parked_rows)
                time.sleep(0.001)  # (the scenario: a sampler beside the loop)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            # (all sent before any is read: a loaded machine starting the readers' threads late
            # would otherwise let the first ones finish before the last arrive)
            streams = [scheduler.stream(*requests[i], visitor=f"v{i}") for i in range(5)]
            with ThreadPoolExecutor(5) as pool:
                got = list(pool.map(_read, streams))
        finally:
            done.set()
            watcher.join()
            scheduler.close()
        assert max(aside) <= max_parked
        assert scheduler.parks >= 2
        for request, tokens in zip(requests, got):
            assert tokens == alone.tokens(*request)


def test_the_expected_wait_counts_the_steps_a_newcomer_then_waits(engine, monkeypatch):
    """Two rows taken by a's and b's long generations, a slice of 12: a third visitor is told the
    steps it would wait for a row (the rest of the sooner slice, half an alignment to join), and,
    sent at once, gets its first token within half an alignment of that; the loop's seconds a step
    are its real ones (each paced to 10 ms at least). With rows free the wait is none."""
    from runtime.batching import CACHE_ALIGN

    forward = engine.forward
    monkeypatch.setattr(engine, "forward", lambda *a: (time.sleep(0.01), forward(*a))[1])
    scheduler = Scheduler(engine, max_rows=2, max_waiting=MAX_WAITING_REQUESTS, slice_tokens=12)
    try:
        assert scheduler.load("c").wait_steps == 0 and scheduler.load("c").idle
        params = SamplingParams(200, 0.8, seed=1, stop_at_eot=False)
        stop = threading.Event()
        long = [scheduler.stream([464, 3290], params, stop=stop, visitor=v) for v in "ab"]
        with ThreadPoolExecutor(2) as pool:
            readers = [pool.submit(lambda s: sum(1 for _ in s), s) for s in long]
            wait_for(lambda: scheduler.load("c").running_rows == 2 and scheduler.steps >= 2, 10, 0.001,
                     message="both rows decoding")
            load = scheduler.load("c")
            since = scheduler.steps
            first = next(scheduler.stream([318, 257], SamplingParams(4, 0.8, seed=3), visitor="c"))
            waited = scheduler.steps - since
            stop.set()
            assert all(r.result(30) < 200 for r in readers)
        print(f"expected {load.wait_steps} steps ({load.expected_wait_s:.2f} s), waited {waited}")
        assert first.token_ids[0] is not None
        assert load.running_rows == 2 and load.wait_steps > CACHE_ALIGN // 2
        assert abs(waited - load.wait_steps) <= CACHE_ALIGN // 2 + 1, (waited, load)
        assert load.step_s is not None and load.step_s >= 0.01 and load.expected_wait_s == load.wait_steps * load.step_s
    finally:
        scheduler.close()


def test_the_first_end_counts_the_steps_before_a_request_leaves_a_loop_of_turns(engine, monkeypatch):
    """Three visitors' 90-token generations on two rows, taking turns by slices of 12: the loop says
    when the first of them will end (the least left, stretched by 3 rows wanting 2): a lower bound,
    the first ending no sooner and within half as much again (each yield's rejoin waits for an
    aligned step: measured 131 told, 173 steps; counting the running ones alone would say 87)."""
    from runtime.batching import CACHE_ALIGN

    forward = engine.forward
    monkeypatch.setattr(engine, "forward", lambda *a: (time.sleep(0.002), forward(*a))[1])
    scheduler = Scheduler(engine, max_rows=2, max_waiting=MAX_WAITING_REQUESTS, slice_tokens=12)
    try:
        assert scheduler.load("d").first_end_steps is None  # nothing to end
        streams = [scheduler.stream([464 + i, 3290], SamplingParams(90, 0.8, seed=i, stop_at_eot=False), visitor=v)
                   for i, v in enumerate("abc")]
        ended: list[int] = []
        with ThreadPoolExecutor(3) as pool:
            def read(s):
                n = sum(1 for _ in s)
                ended.append(scheduler.steps)
                return n
            readers = [pool.submit(read, s) for s in streams]
            wait_for(lambda: scheduler.load("d").running_rows == 2 and scheduler.load("d").waiting == 1 and scheduler.steps >= 3,
                     10, 0.001, message="two rows decoding, one waiting")
            load, since = scheduler.load("d"), scheduler.steps
            assert [r.result(60) for r in readers] == [90, 90, 90]
        waited = min(ended) - since
        print(f"first end expected in {load.first_end_steps} steps, came in {waited}")
        assert load.first_end_steps > 100  # (90 - a few) x 3/2
        assert load.first_end_steps - CACHE_ALIGN // 2 <= waited <= 1.5 * load.first_end_steps, (waited, load)
        assert load.first_end_s == pytest.approx(load.first_end_steps * load.step_s)
    finally:
        scheduler.close()
