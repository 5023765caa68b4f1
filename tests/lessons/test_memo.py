"""The module cache: bounded, built once per key under concurrency, failures not kept."""

from __future__ import annotations

import threading

import pytest

from playground.memo import Memo


def test_builds_once_and_keeps_at_most_size():
    built, closed = [], []
    memo = Memo(lambda k: built.append(k) or k * 10, size=2, close=closed.append)
    assert [memo.get(1), memo.get(2), memo.get(1)] == [10, 20, 10]
    assert built == [1, 2]
    memo.get(3)  # 2 is the least recently used: it leaves, and is closed
    assert len(memo) == 2 and 2 not in memo and 1 in memo and closed == [20]
    memo.clear()
    assert len(memo) == 0 and sorted(closed) == [10, 20, 30]


def test_a_failed_build_is_not_kept():
    calls = []

    def build(key):
        calls.append(key)
        if len(calls) == 1:
            raise OSError("file missing")
        return "ok"

    memo = Memo(build)
    with pytest.raises(OSError):
        memo.get("a")
    assert "a" not in memo and memo.get("a") == "ok" and calls == ["a", "a"]


def test_concurrent_requests_build_once():
    built = []
    gate = threading.Event()

    def build(key):
        gate.wait(5)
        built.append(key)
        return object()

    memo = Memo(build)
    got = []
    threads = [threading.Thread(target=lambda: got.append(memo.get("m"))) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert built == ["m"] and len({id(v) for v in got}) == 1 and len(got) == 8


def test_size_below_one_is_refused():
    with pytest.raises(ValueError):
        Memo(size=0)
