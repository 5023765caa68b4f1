"""ASGI middleware on Gradio's FastAPI app (installed through ``launch(app_kwargs=...)``): request
bodies capped before they are read (:class:`BodySizeLimit`), and the routes Gradio opens whatever
the app uses guarded where Gradio has no setting for them (:class:`RouteGuard`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gradio as gr

from ... import limits
from .. import gradio_internals
from ..gradio_internals import CALL_GET, DEEP_LINK, FILE_ROUTES, HEARTBEAT, QUEUE_DATA, UPLOAD
from .sessions import session_problem
from .unread import UNREAD_RESULT_WAIT_S


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


def _usable_range(value: bytes) -> bool:
    match = _SINGLE_RANGE.fullmatch(value.decode("latin-1").strip())
    if match is None:
        return False
    first, last = match.group(1), match.group(2)
    return not (first and last) or int(first) <= int(last)


def _is_url(path: str) -> bool:
    return "://" in path or path.startswith(("http:", "https:"))


class RouteGuard:
    """ASGI middleware for the routes Gradio opens whatever the app uses, where Gradio has no
    setting (which files are served is Gradio's own rule: ``launch_options``):

    - files: a URL is refused (403): Gradio would fetch any public http(s) URL for whoever asks,
      a free proxy on the app's address; a ``Range`` header other than one valid range of bytes
      is ignored, so the whole file is sent (Gradio answered 500 to two ranges);
    - ``/gradio_api/upload``: off (413) unless ``uploads``: no tab takes a file, and Gradio's
      ``max_file_size=0`` still stored empty files (1,000 uploads, 1,000 files in its shared
      temporary folder);
    - ``/gradio_api/deep_link``: off (404); sessions keep no values to link to;
    - ``queue/data`` and ``heartbeat`` with a session id that is not a short token: 400;
      ``queue/data`` for a session the queue does not hold, and ``GET /gradio_api/call/<name>/<event_id>``
      for an event it does not hold (unknown, already read, or dropped unread): 404 saying so
      (Gradio broke off the response mid-stream and logged a stack trace).
    """

    def __init__(self, app: Callable, demo: gr.Blocks, uploads: bool = False):
        self.app = app
        self.demo = demo
        self.uploads = uploads

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        if path.startswith(FILE_ROUTES):
            if _is_url(path[len(FILE_ROUTES[0]):]):
                response = json_response(403, "File not allowed: this app serves its own downloads only, never a URL.")
                await response(scope, receive, send)
                return
            value = _header(scope, b"range")
            if value is not None and not _usable_range(value):
                scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k.lower() != b"range"])
        elif method == "GET" and (path.rstrip("/") == QUEUE_DATA or path.startswith(HEARTBEAT)):
            if path.startswith(HEARTBEAT):
                session = path[len(HEARTBEAT):]
            else:
                from starlette.datastructures import QueryParams

                session = QueryParams(scope.get("query_string", b"")).get("session_hash")
            if problem := session_problem(session):
                await json_response(400, problem)(scope, receive, send)
                return
            if not path.startswith(HEARTBEAT) and not gradio_internals.holds_session(self.demo, session):
                detail = (f"No session {session} in the queue: POST /gradio_api/queue/join first (its results "
                          "stream here), or the session's results were already read or dropped unread.")
                await json_response(404, detail)(scope, receive, send)
                return
        elif path.rstrip("/") == UPLOAD and not self.uploads:
            detail = "Uploads are off: no tab of this app takes a file."
            await json_response(413, detail, headers={"Connection": "close"})(scope, receive, send)
            return
        elif path.rstrip("/") == DEEP_LINK:
            await json_response(404, "Deep links are off in this app.")(scope, receive, send)
            return
        elif method == "GET" and (match := CALL_GET.fullmatch(path)):
            event_id = match.group(2)
            if not gradio_internals.event_known(self.demo, event_id):
                detail = (
                    f"No result for event {event_id}: it is unknown, was already read, or was dropped unread "
                    f"(a result waits {UNREAD_RESULT_WAIT_S:g} s for its reader, a big one less while others "
                    "pile up). POST again."
                )
                await json_response(404, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)
