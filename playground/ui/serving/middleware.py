"""ASGI middleware on Gradio's FastAPI app: request bodies capped before they are read
(:class:`BodySizeLimit`), and the routes Gradio opens whatever the app uses guarded
(:class:`RouteGuard`: files, uploads, deep links, unknown endpoints, events and sessions)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gradio as gr

from ... import limits
from .sessions import session_problem
from .unread import UNREAD_RESULT_WAIT_S

API = "/gradio_api"


def json_response(status: int, detail: str, headers: dict[str, str] | None = None):
    """A JSON answer ``{"detail": ...}``, as FastAPI gives its own errors."""
    from starlette.responses import JSONResponse

    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _compact_bytes(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


def _header(scope: dict, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


class BodySizeLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets HTTP 413 before it is read. A
    declared ``Content-Length`` is checked before anything is received; a chunked body is cut
    off as soon as it passes the cap (the app sees the client go away; its answer is dropped)."""

    def __init__(self, app: Callable, max_bytes: int = limits.MAX_REQUEST_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> Any:
        return json_response(
            413,
            f"Request body too large: the limit is {self.max_bytes:,} bytes ({_compact_bytes(self.max_bytes)}), "
            "far above any valid input (the largest, 50,000 characters of token ids, is 50 KB as ASCII).",
            headers={"Connection": "close"},
        )

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await json_response(400, "Content-Length is not a number")(scope, receive, send)
                return
            if size > self.max_bytes:
                await self._too_large()(scope, receive, send)
                return
        received = 0
        refused = started = False

        async def capped_receive() -> dict:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    if not started:
                        await self._too_large()(scope, receive, send)
                    refused = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict) -> None:
            nonlocal started
            if refused and not started:
                return  # the 413 went out; the app's own answer to a cut-off body is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, capped_receive, guarded_send)


# A Range header Gradio's file route parses (it answers 500 to others, e.g. two ranges):
# one range of bytes, first-last (last >= first), first- or -suffix.
_SINGLE_RANGE = re.compile(r"bytes=(?:(\d+)-(\d*)|-(\d+))")
_FILE_ROUTES = (f"{API}/file=", f"{API}/file/")
_CALL_POST = re.compile(rf"{API}/(call/v2|call|run|api)/([^/]+)/?")
CALL_GET = re.compile(rf"{API}/call/(?:v2/)?([^/]+)/([^/]+)/?")



_QUEUE_DATA = f"{API}/queue/data"
_HEARTBEAT = f"{API}/heartbeat/"


def _usable_range(value: bytes) -> bool:
    match = _SINGLE_RANGE.fullmatch(value.decode("latin-1").strip())
    if match is None:
        return False
    first, last = match.group(1), match.group(2)
    return not (first and last) or int(first) <= int(last)


class RouteGuard:
    """ASGI middleware for the routes Gradio opens whatever the app uses:

    - files: only the ``allowed`` ones (the Model tab's downloads), not the shared Gradio
      cache of other apps on the machine nor any other path (403); a ``Range`` header other
      than one valid range of bytes is ignored, so the whole file is sent (Gradio answered 500
      to two ranges);
    - ``/gradio_api/deep_link``: off (404); sessions keep no values to link to;
    - ``/gradio_api/upload``: off (413) unless ``uploads``; no tab takes a file;
    - ``/gradio_api/call|run|api/<name>``: an unknown or private name gets 404 naming the
      endpoints, instead of a bare 500; the keyword form (``call/v2``) answers a bad argument
      with 400 and Gradio's message, instead of a bare 500;
    - ``GET /gradio_api/call/<name>/<event_id>`` for an event the queue does not hold (unknown,
      already read, or dropped unread) gets 404 saying so, instead of an SSE ``"404: Not Found"``.
    """

    def __init__(self, app: Callable, demo: gr.Blocks, allowed: Sequence[Path], uploads: bool = False):
        self.app = app
        self.demo = demo
        self.uploads = uploads
        self.allowed = [Path(p).resolve() for p in allowed]
        self.endpoints = sorted(
            fn.api_name for fn in demo.fns.values() if fn.fn is not None and fn.api_visibility == "public"
        )
        self.callable = set(self.endpoints) | {
            fn.api_name for fn in demo.fns.values() if fn.fn is not None and fn.api_visibility == "undocumented"
        }

    def _file_allowed(self, path: str) -> bool:
        from gradio.utils import abspath, is_in_or_equal

        if "://" in path or path.startswith(("http:", "https:", "file:", "data:")):
            return False
        try:
            target = abspath(path)
            return any(is_in_or_equal(target, allowed) for allowed in self.allowed)
        except (OSError, ValueError):
            return False

    def _unknown_endpoint(self, name: str) -> Any:
        listed = ", ".join(f"/{n}" for n in self.endpoints)
        return json_response(404, f"No API endpoint /{name}. The endpoints are {listed} (see /gradio_api/info).")

    def _event_known(self, event_id: str) -> bool:
        queue = self.demo._queue
        return event_id in queue.event_ids_to_events or any(
            event_id in ids for ids in list(queue.pending_event_ids_session.values())
        )

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        if path.startswith(_FILE_ROUTES):
            file_path = path[len(_FILE_ROUTES[0]):]
            if not self._file_allowed(file_path):
                response = json_response(403, "File not allowed: only the ONNX downloads (the Model tab's files) are served.")
                await response(scope, receive, send)
                return
            value = _header(scope, b"range")
            if value is not None and not _usable_range(value):
                scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k.lower() != b"range"])
        elif method == "GET" and (path.rstrip("/") == _QUEUE_DATA or path.startswith(_HEARTBEAT)):
            if path.startswith(_HEARTBEAT):
                session = path[len(_HEARTBEAT):]
            else:
                from starlette.datastructures import QueryParams

                session = QueryParams(scope.get("query_string", b"")).get("session_hash")
            if problem := session_problem(session):
                await json_response(400, problem)(scope, receive, send)
                return
            if not path.startswith(_HEARTBEAT) and session not in self.demo._queue.pending_messages_per_session:
                detail = (f"No session {session} in the queue: POST /gradio_api/queue/join first (its results "
                          "stream here), or the session's results were already read or dropped unread.")
                await json_response(404, detail)(scope, receive, send)
                return
        elif path.rstrip("/") == f"{API}/upload" and not self.uploads:
            # Gradio's max_file_size=0 still let an empty file through: 1,000 of them were 1,000
            # files in its shared temporary folder.
            detail = "Uploads are off: no tab of this app takes a file."
            await json_response(413, detail, headers={"Connection": "close"})(scope, receive, send)
            return
        elif path.rstrip("/") == f"{API}/deep_link":
            await json_response(404, "Deep links are off in this app.")(scope, receive, send)
            return
        elif method == "POST" and (match := _CALL_POST.fullmatch(path)):
            route, name = match.groups()
            known = self.endpoints if route == "call/v2" else self.callable
            if name not in known:
                await self._unknown_endpoint(name)(scope, receive, send)
                return
            if route == "call/v2":
                await self._call_v2(scope, receive, send)
                return
        elif method == "GET" and (match := CALL_GET.fullmatch(path)):
            name, event_id = match.groups()
            if name not in self.callable:
                await self._unknown_endpoint(name)(scope, receive, send)
                return
            if not self._event_known(event_id):
                detail = (
                    f"No result for event {event_id}: it is unknown, was already read, or was dropped unread "
                    f"(a result waits {UNREAD_RESULT_WAIT_S:g} s for its reader, a big one less while others "
                    "pile up). POST again."
                )
                await json_response(404, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _call_v2(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Gradio's keyword route raises TypeError/ValueError (a bare 500) for a missing,
        unknown or doubled argument; its message is clear, so send it with a 400."""
        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except (TypeError, ValueError) as err:
            if started:
                raise
            await json_response(400, str(err))(scope, receive, send)

