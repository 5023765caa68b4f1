"""Compressed responses: the page itself (Gradio writes every component's first value into the
HTML, ~0.5 MB of JSON), /config and the API's JSON go out gzipped to a client that accepts it.

Gradio already serves its JavaScript and CSS compressed; streams (text/event-stream) and range
requests pass untouched (Starlette's GZipMiddleware), and so do the Model tab's downloads
(already compressed or large binaries: compressing them would cost CPU for little)."""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

__all__ = ["COMPRESS_LEVEL", "MIN_BYTES", "gzip_middleware"]

COMPRESS_LEVEL = 6  # zlib's default: 9 costs several times the CPU for ~2 % fewer bytes
MIN_BYTES = 1024  # smaller bodies gain less than the header costs
NOT_COMPRESSED = (*DEFAULT_EXCLUDED_CONTENT_TYPES, "application/zip", "application/octet-stream", "application/gzip")


def gzip_middleware() -> Middleware:
    """The middleware for ``launch(app_kwargs={"middleware": [...]})``."""
    return Middleware(GZipMiddleware, minimum_size=MIN_BYTES, compresslevel=COMPRESS_LEVEL,
                      exclude_content_types=NOT_COMPRESSED)
