"""Compressed responses: the page itself (Gradio writes every component's first value into the
HTML as JSON), /config and the API's JSON go out gzipped to a client that accepts it.

Gradio already serves its JavaScript and CSS compressed; streams (text/event-stream) and range
requests pass untouched (Starlette's GZipMiddleware), and so do the Model tab's downloads
(already compressed or large binaries: compressing them would cost CPU for little).

"Accepts it" is read with the header's q-values (RFC 9110, 12.5.3): ``gzip;q=0`` refuses gzip,
where Starlette's own test (the word "gzip" anywhere in the header) would send it anyway."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

__all__ = ["COMPRESS_LEVEL", "MIN_BYTES", "QValueGZip", "gzip_middleware", "wants_gzip"]

COMPRESS_LEVEL = 6  # zlib's default: 9 costs several times the CPU for barely fewer bytes
MIN_BYTES = 1024  # smaller bodies gain less than the header costs
NOT_COMPRESSED = (*DEFAULT_EXCLUDED_CONTENT_TYPES, "application/zip", "application/octet-stream", "application/gzip")
GZIP_NAMES = ("gzip", "x-gzip")  # x-gzip: gzip's old name, still equivalent (RFC 9110, 8.4.1.3)


def wants_gzip(accept_encoding: str | bytes | None) -> bool:
    """Whether an ``Accept-Encoding`` value names gzip with a q-value above 0 (``gzip``,
    ``gzip;q=0.5``: yes; ``gzip;q=0``, ``br``, none: no). A malformed q-value counts as a refusal:
    an uncompressed answer is always acceptable, a compressed one only when asked for. ``*`` is
    not taken as a request for gzip (the answer goes out as it is, which ``*`` also accepts)."""
    if isinstance(accept_encoding, bytes):
        accept_encoding = accept_encoding.decode("latin-1")
    wanted = False
    for entry in (accept_encoding or "").split(","):
        coding, *params = (part.strip() for part in entry.split(";"))
        if coding.lower() not in GZIP_NAMES:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
        if not 0 < q <= 1:  # (also nan, inf and negatives: not a q-value)
            return False  # an explicit refusal wins over any other mention
        wanted = True
    return wanted


class QValueGZip(GZipMiddleware):
    """Starlette's GZipMiddleware, compressing only for a client that :func:`wants_gzip`."""

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not wants_gzip(Headers(scope=scope).get("accept-encoding")):
            await self.app(scope, receive, send)  # as built: identity is always acceptable
            return
        await super().__call__(scope, receive, send)


def gzip_middleware() -> Middleware:
    """The middleware for ``launch(app_kwargs={"middleware": [...]})``."""
    return Middleware(QValueGZip, minimum_size=MIN_BYTES, compresslevel=COMPRESS_LEVEL,
                      exclude_content_types=NOT_COMPRESSED)
