"""Results nobody reads: a finished result nobody came for stays in Gradio's queue for good. Here it
is dropped after :data:`UNREAD_RESULT_WAIT_S` seconds, and past :data:`MAX_UNREAD_BYTES` of them at
once (:func:`drop_unread_results`); freed memory is handed back to the system (glibc's
``malloc_trim``, :func:`malloc_trim`)."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

from .. import gradio_internals

# A finished result nobody came to read (a POST to /gradio_api/call/<endpoint> whose GET never
# came, a queue/join without queue/data) is dropped after this long ...
UNREAD_RESULT_WAIT_S = 30.0
# ... or, the oldest first, as soon as such results together take more than this (estimated
# Python memory; /positional_encoding's largest table, 524,288 values, is about 17 MB: 30 s of them
# would be gigabytes). Small results are
# never dropped early, however many clients are slow to open their stream at once.
MAX_UNREAD_BYTES = 64 * 2**20
TRIM_EVERY_S = 5.0


def approx_bytes(value: Any, depth: int = 0) -> int:
    """About how much memory ``value`` (a result: JSON-like dicts, lists, strings, numbers)
    takes as Python objects, in microseconds even for a 1024 x 1024 table: long lists are
    estimated from 16 of their items."""
    if isinstance(value, str):
        return 50 + len(value)
    if isinstance(value, (bytes, bytearray)):
        return 40 + len(value)
    if value is None or isinstance(value, (bool, int, float)):
        return 24  # the object; the list or dict holding it adds its pointer
    if depth > 12:
        return 64
    if isinstance(value, dict):
        items = list(value.items())
        sample = items if len(items) <= 32 else items[:: len(items) // 16][:16]
        each = sum(approx_bytes(k, depth + 1) + approx_bytes(v, depth + 1) for k, v in sample) / max(1, len(sample))
        return int(100 + 24 * len(items) + each * len(items))
    if isinstance(value, (list, tuple)):
        sample = value if len(value) <= 32 else value[:: len(value) // 16][:16]
        each = sum(approx_bytes(x, depth + 1) for x in sample) / max(1, len(sample))
        return int(56 + (8 + each) * len(value))
    output = getattr(value, "output", None)  # Gradio's messages carry the result in .output
    if output is not None:
        return 200 + approx_bytes(output, depth + 1)
    return sys.getsizeof(value)


def drop_unread_results(queue: Any, first_seen: dict[str, tuple[int, float]], now: float) -> list[str]:
    """Drop the messages of sessions whose events have all finished but whose results nobody
    has read: after :data:`UNREAD_RESULT_WAIT_S`, or the oldest first while all of them together
    take more than :data:`MAX_UNREAD_BYTES`. A session still running or waiting for an event is
    left alone. ``first_seen`` (session -> (id of the oldest unread message, when it was first
    seen)) carries over between calls. Returns the sessions dropped; a client that comes for one
    of their results later is told so (:class:`.middleware.RouteGuard`)."""
    waiting: list[tuple[float, str, int]] = []
    for session, unread in gradio_internals.unread_results(queue):
        seen = first_seen.get(session)
        if seen is None or seen[0] != id(unread[0]):  # new, or someone read since the last sweep
            seen = first_seen[session] = (id(unread[0]), now)
        waiting.append((seen[1], session, sum(approx_bytes(m) for m in unread)))
    for session in set(first_seen) - {session for _, session, _ in waiting}:
        del first_seen[session]  # read, or its session running again
    waiting.sort(key=lambda item: item[0])  # stable: ties keep the queue's order, oldest session first
    total = sum(size for _, _, size in waiting)
    dropped = []
    for since, session, size in waiting:
        if total > MAX_UNREAD_BYTES or now - since >= UNREAD_RESULT_WAIT_S:
            dropped.append(session)
            total -= size
    for session in dropped:
        gradio_internals.drop_results(queue, session)
        first_seen.pop(session, None)
    gradio_internals.forget_read_sessions(queue)
    return dropped


def malloc_trim() -> Callable[[], Any] | None:
    """glibc's ``malloc_trim(0)``, or None elsewhere (macOS, Windows, musl)."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


M_ARENA_MAX = -8  # glibc's mallopt parameter
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Ask glibc for at most ``arenas`` malloc arenas (``mallopt(M_ARENA_MAX)``; by default up to
    8 a core: each of the ~40 worker threads a burst of requests starts may get one, and freed
    memory in an arena stays with it). Call before the worker threads start. False elsewhere."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False
