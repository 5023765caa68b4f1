"""The page, built once: Gradio renders ``/`` (over a megabyte of HTML with every component's
first value) and ``/config`` afresh for every request, a build of noticeable CPU each, so a few
clients reloading the page slowed every tab (docs/app.md, Limits: "The page"). :class:`PageCache` keeps each answer once built,
compressed as it went out, and tags it with an ``ETag``: a reload costs a dictionary lookup, and a
browser that revalidates (``Cache-Control: no-cache``) gets ``304 Not Modified`` and no body.

What the page holds is fixed once the app is launched (``Blocks.config``), except the root URL
Gradio writes into it, which it works out from the request (``Host``, ``X-Forwarded-Host``,
``X-Forwarded-Proto``, ``X-Gradio-Server``, the ASGI ``root_path``): those are part of the key,
so a client that
sends another host gets a page built for that host, never one built for somebody else. The query
string is not: a share link (``/?tab=inside&text=...``) gets the same page as ``/``, built without
its query, because the page reads the link in the browser once loaded (playground/ui/links.py);
built afresh, a few reloaders of unique links would slow every tab's requests. (Gradio's own query parameters change nothing here: the app has one page, and deep links
are off.) ``HEAD`` and any request carrying Gradio's login cookie pass through untouched. The
cache holds at most :data:`MAX_ENTRIES` answers (least recently used dropped first) of at most
:data:`MAX_ENTRY_BYTES` each.

A client inventing a new ``Host`` on each request would cost a build each (docs/app.md, Limits): at most :data:`BUILDS_PER_MINUTE` answers not yet kept are built in any minute (a
bucket refilled at that rate, full at start); past it such a request gets HTTP 503 with
``Retry-After``, while every answer already kept is still served at once. A Space is reached on
one or two hosts, so its pages are built once and kept.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .compression import wants_gzip

__all__ = ["BUILDS_PER_MINUTE", "CACHED_PATHS", "MAX_ENTRIES", "MAX_ENTRY_BYTES", "BuildBudget", "PageCache"]

CACHED_PATHS = ("/", "/config")
MAX_ENTRIES = 16  # distinct (path, host, encoding) answers: a Space sees one or two hosts
MAX_ENTRY_BYTES = 4 * 2**20  # several times the page's uncompressed size; anything far larger is not cached
# Request headers Gradio reads to build the page's root URL (Accept-Encoding is keyed apart: gzip or not).
KEY_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto", b"x-gradio-server")
LOGIN_COOKIE = b"access-token"  # Gradio's login cookie (an app with ``auth``): the page is per user
BUILDS_PER_MINUTE = 12  # builds of answers not kept: a small fraction of a core at most


class BuildBudget:
    """A bucket of ``per_minute`` builds, refilled continuously at that rate (full at start)."""

    def __init__(self, per_minute: int = BUILDS_PER_MINUTE, clock=time.monotonic) -> None:
        self.per_minute, self.clock = per_minute, clock
        self.tokens, self.at = float(per_minute), clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(float(self.per_minute), self.tokens + (now - self.at) * self.per_minute / 60.0)
        self.at = now

    def take(self) -> bool:
        """Spend one build if the bucket has one."""
        self._refill()
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def wait_s(self) -> float:
        """Seconds until the next build may be spent."""
        self._refill()
        return max(0.0, (1.0 - self.tokens) * 60.0 / self.per_minute)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    etag: bytes


def request_headers(scope: dict) -> dict[bytes, bytes]:
    return {key.lower(): value for key, value in scope.get("headers", ())}


def etag_matches(if_none_match: bytes | None, etag: bytes) -> bool:
    if if_none_match is None:
        return False
    tags = [tag.strip().removeprefix(b"W/") for tag in if_none_match.split(b",")]
    return etag in tags or b"*" in tags


class PageCache:
    """ASGI middleware: ``GET`` answers of ``paths`` kept once built (see the module's doc).
    Installed outside the compression, so that what is kept is what went out."""

    def __init__(self, app: Callable, paths: Iterable[str] = CACHED_PATHS, max_entries: int = MAX_ENTRIES,
                 max_entry_bytes: int = MAX_ENTRY_BYTES, budget: BuildBudget | None = None) -> None:
        self.app = app
        self.budget = budget if budget is not None else BuildBudget()
        self.paths = frozenset(paths)
        self.max_entries = max_entries
        self.max_entry_bytes = max_entry_bytes
        self.entries: OrderedDict[tuple, Answer] = OrderedDict()

    def key(self, scope: dict, headers: dict[bytes, bytes]) -> tuple | None:
        """What the answer depends on, or None for a request that must pass through."""
        if (scope["type"] != "http" or scope.get("method") != "GET" or scope.get("path") not in self.paths
                or LOGIN_COOKIE in headers.get(b"cookie", b"")):
            return None
        gzip = wants_gzip(headers.get(b"accept-encoding"))  # as the compression decides, q-values read
        return (scope["path"], scope.get("scheme"), scope.get("root_path", ""), gzip,
                *(headers.get(name) for name in KEY_HEADERS))

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        headers = request_headers(scope) if scope["type"] == "http" else {}
        key = self.key(scope, headers)
        if key is None:
            await self.app(scope, receive, send)
            return
        answer = self.entries.get(key)
        if answer is not None:
            self.entries.move_to_end(key)
            await self._send(answer, headers.get(b"if-none-match"), send)
            return
        if not self.budget.take():
            wait = max(1, round(self.budget.wait_s() + 0.5))
            detail = (f"Too many different hosts asked for this page in the last minute (it is built for each); "
                      f"try again in {wait} s.").encode()
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"), (b"retry-after", str(wait).encode())]})
            await send({"type": "http.response.body", "body": b'{"detail": "' + detail + b'"}'})
            return
        answer, keep = await self._build(scope, receive)
        if not keep:  # sent as Gradio built it
            await send({"type": "http.response.start", "status": answer.status, "headers": list(answer.headers)})
            await send({"type": "http.response.body", "body": answer.body})
            return
        self.entries[key] = answer
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)
        await self._send(answer, headers.get(b"if-none-match"), send)

    async def _build(self, scope: dict, receive: Callable) -> tuple[Answer, bool]:
        """Gradio's answer, whole, and whether it may be kept (a 200 of a sane size setting no cookie)."""
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def collect(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(dict(scope, query_string=b""), receive, collect)  # the page for every query
        body = b"".join(chunks)
        status, headers = start.get("status", 500), tuple(start.get("headers", ()))
        keep = status == 200 and len(body) <= self.max_entry_bytes and all(k.lower() != b"set-cookie" for k, _ in headers)
        if not keep:
            return Answer(status, headers, body, etag=b""), False
        headers = tuple((k, v) for k, v in headers if k.lower() not in (b"etag", b"cache-control"))
        etag = b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
        return Answer(status, headers, body, etag), True

    async def _send(self, answer: Answer, if_none_match: bytes | None, send: Callable) -> None:
        tags = [(b"etag", answer.etag), (b"cache-control", b"no-cache")]
        if etag_matches(if_none_match, answer.etag):
            kept = [(k, v) for k, v in answer.headers if k.lower() == b"vary"]
            await send({"type": "http.response.start", "status": 304, "headers": kept + tags})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": list(answer.headers) + tags})
        await send({"type": "http.response.body", "body": answer.body})
