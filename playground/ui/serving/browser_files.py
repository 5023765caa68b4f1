"""The files a page needs to run the model itself ("Run on: this browser" in the Text generation
tab), served from the app under :data:`PREFIX`, from a fixed list (:class:`BrowserFiles`):

- ``/browser/engine/<module>.js``: the browser engine (``web/engine/``), and
  ``/browser/run_on.js`` with ``/browser/server_wait.js``: the tab's page side
  (``web/app/``). Their imports
  of each other carry no hash, so they are revalidated: ``Cache-Control: no-cache`` with an
  ``ETag`` (a reload costs a 304 each);
- ``/browser/views/<file>``: the views both editions draw with (``web/views/*.js`` and ``*.css``,
  listed once when the app starts; playground/ui/web_view.py mounts them), revalidated likewise.
  They are served whether or not the page can run the model itself: the app's tabs draw with them;
- ``/browser/ort/<hash>/<file>``: onnxruntime-web's three files (they come with the repository,
  ``web/vendor/``: export/vendor.py). The page asks for the ``.wasm`` by name beside the ``.mjs``, so
  the content hash is in the folder's path: ``Cache-Control: public, max-age=31536000, immutable``;
- ``/browser/model/<file>?v=<hash>``: the Hub folder's ``onnx/model_quantized.onnx``,
  ``tokenizer.json`` and ``config.json``; immutable under their own hash, revalidated under any
  other address (never kept for a year under a name that is not theirs).

Watch it learn's "Run on: this browser" adds, when the app has written its files
(playground/learn/files.py, ``learn_dir``): the engine's training modules (``LEARN_MODULES``) and the
tab's page side ``/browser/learn_on.js`` (revalidated; its view, ``/browser/views/learn.js``, is
one of the views), plotly.js under its hash (immutable), and ``/browser/learn/<file>`` (the step and forward graphs,
the training text, the held-out windows: immutable under their ``?v=``; ``learn.json`` names them
so).

Inside the model's "Run on: this browser" adds the engine's stage-graph modules (``INSIDE_MODULES``),
the tab's page side ``/browser/inside_on.js`` and the text check both editions run
(``/browser/static/checks.js``), all revalidated, and, once the app has written them
(export/inside_graph.py's ``write_browser_files``, ``inside_dir``), ``/browser/inside/<file>``: the
stage and lens graphs and their 8-bit weights, immutable under their ``?v=``.

Anything else under the prefix is 404, whatever the path (nothing from the request is joined to a
folder). The JavaScript, JSON and WebAssembly go out gzipped to a client that accepts it,
compressed once on first demand (the WebAssembly shrinks to a fraction). The model is streamed from
disk; a visitor (:func:`.visitors.visitor_of`) has at most :data:`MODEL_STREAMS_PER_VISITOR`
streams of it open at once, past that HTTP 429 with ``Retry-After`` (the page waits and tries
again; once downloaded it is kept in the browser's Cache Storage).

Every file, not only the model, is bounded per visitor: at most :data:`FILE_DOWNLOADS_PER_VISITOR`
downloads open at once, and :data:`FILE_MB_PER_MINUTE` megabytes a minute (:mod:`.byte_budget`),
past either HTTP 429 with ``Retry-After``, the seconds until the budget holds the answer. A
``Range: bytes=...`` request (one range) gets that range alone, 206 with ``Content-Range``
(unencoded: the range is of the file), charged its own bytes; ``If-Range`` naming another version
gets the whole file; a range past the end is 416.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from export import vendor

from ...limits import FILE_DOWNLOADS_PER_VISITOR, FILE_MB_PER_MINUTE, MODEL_STREAMS_PER_VISITOR
from .byte_budget import ByteBudget
from .compression import wants_gzip
from .visitors import visitor_of
from .page_cache import etag_matches, request_headers

__all__ = [
    "PREFIX", "ENGINE_MODULES", "LEARN_MODULES", "INSIDE_MODULES", "VIEWS_DIR", "view_files", "ORT_FILES", "MODEL_FILES", "MISSING_ORT",
    "IMMUTABLE", "REVALIDATE",
    "MODEL_STREAMS_PER_VISITOR", "FILE_DOWNLOADS_PER_VISITOR", "FILE_MB_PER_MINUTE", "RETRY_AFTER_S", "Served",
    "BrowserFiles", "DownloadSlots", "BrowserFileServer", "byte_range", "UNSATISFIABLE",
]

log = logging.getLogger("playground")

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "/browser/"
ENGINE_DIR = ROOT / "web" / "engine"
ENGINE_MODULES = ("draws.js", "engine.js", "fetch.js", "sampling.js", "tokenizer.js")
VIEWS_DIR = ROOT / "web" / "views"
VIEW_SUFFIXES = (".js", ".css")
PAGE_MODULE = ROOT / "web" / "app" / "run_on.js"
# Watch it learn in the browser: the engine's training modules, the view both editions mount, its page side here.
LEARN_MODULES = ("draws.js", "init.js", "train.js", "learn.js", "learn_worker.js")
LEARN_VIEW = ROOT / "web" / "views" / "learn.js"  # served as one of the views (VIEWS_DIR)
LEARN_PAGE_MODULE = ROOT / "web" / "app" / "learn_on.js"
LEARN_FILES_MISSING = ("Run on this browser needs Watch it learn's browser files (the step graphs and the training text), "
                       "which the app writes when it starts: {why}")
LEARN_PREPARING = ("Watch it learn's browser files (the step graphs and the training text) are being written by the "
                   "server (a few seconds; minutes on a first start, which builds the graphs)")
LEARN_FACTS = f"{PREFIX}learn/learn.json"
# Inside the model in the browser: the stage graph's modules, its page side here, the text check of both editions.
INSIDE_MODULES = ("inside.js", "weights.js", "fetch.js", "tokenizer.js")
INSIDE_PAGE_MODULE = ROOT / "web" / "app" / "inside_on.js"
INSIDE_IMPORTS = ("panel.js", "server_wait.js")  # what inside_on.js imports from beside it
CHECKS_MODULE = ROOT / "web" / "static" / "checks.js"
INSIDE_INDEX = f"{PREFIX}inside/files.json"  # the four files' addresses, written by the app beside them
INSIDE_PREPARING = ("Inside the model's browser files (the stage graph and its 8-bit weights) are being written by the "
                    "server (a few seconds after it starts)")
INSIDE_FILES_MISSING = "Run on this browser needs Inside the model's browser files, which the app writes when it starts: {why}"
PAGE_IMPORTS = ("server_wait.js", "panel.js", "settings_checks.js", "paint.js")  # what run_on.js imports from beside it
LEARN_IMPORTS = ("panel.js",)  # what learn_on.js imports from beside it
ORT_FILES = vendor.ORT_FILES
# The Hub folder's browser-sized model, and what the engine reads beside it.
MODEL_FILES = ("onnx/model_quantized.onnx", "tokenizer.json", "config.json")
MISSING_ORT = ("Run on this browser needs onnxruntime-web's files, which come with the app (web/vendor/): {why}. "
               "Restart the app once they are back.")

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
HASH_CHARS = 16  # of the sha256: 64 bits name a file well enough for a cache
CHUNK_BYTES = 256 * 1024
COMPRESS_LEVEL = 6
RETRY_AFTER_S = 5

CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".gz": "application/gzip",
    ".bin": "application/octet-stream",
    ".mjs": "text/javascript; charset=utf-8",
    ".wasm": "application/wasm",  # WebAssembly.instantiateStreaming refuses any other type
    ".json": "application/json",
    ".css": "text/css; charset=utf-8",
    ".onnx": "application/octet-stream",
}
COMPRESSED_SUFFIXES = (".js", ".mjs", ".wasm", ".json", ".css")  # the model's 8-bit weights shrink by a few % only

_digests: dict[tuple[str, int, int], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of ``path`` (hex), computed once per version of the file (size and mtime)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        sha = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                sha.update(chunk)
        _digests[key] = sha.hexdigest()
    return _digests[key]


@dataclass(frozen=True)
class Served:
    """One file of the allow-list: its route, where it is, and how it is cached."""

    route: str  # the path served, e.g. "/browser/model/model_quantized.onnx"
    path: Path
    digest: str  # sha256 of the content, hex
    version: str | None = None  # the ?v= that makes it immutable (None: the route itself names the content or it is revalidated)
    immutable: bool = False  # the route names the content (a hash in the path)
    bounded: bool = False  # streams counted per visitor

    @property
    def url(self) -> str:
        """The address a page uses (the route, with ``?v=`` where the version is in the query)."""
        return self.route + (f"?v={self.version}" if self.version else "")

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES.get(self.path.suffix, "application/octet-stream")

    @property
    def compressible(self) -> bool:
        return self.path.suffix in COMPRESSED_SUFFIXES

    def cache_control(self, query_version: str | None) -> str:
        immutable = self.immutable or (self.version is not None and query_version == self.version)
        return IMMUTABLE if immutable else REVALIDATE


@dataclass
class BrowserFiles:
    """The allow-list: route -> :class:`Served`; empty (and :attr:`problem` says why) when the
    page cannot run the model (onnxruntime-web not installed, the model without its 8-bit file)."""

    files: dict[str, Served] = field(default_factory=dict)
    problem: str | None = None
    model_mb: float = 0.0
    learn_problem: str | None = "Watch it learn's browser files are not set up in this app."
    inside_problem: str | None = "Inside the model's browser files are not set up in this app."

    @property
    def available(self) -> bool:
        return self.problem is None

    @property
    def learn_available(self) -> bool:
        return self.available and self.learn_problem is None

    @property
    def inside_available(self) -> bool:
        return self.available and self.inside_problem is None

    @classmethod
    def for_model(cls, onnx_files: Mapping[str, Path], ort_dir: Path | None = None, engine_dir: Path = ENGINE_DIR,
                  page_module: Path = PAGE_MODULE, views_dir: Path = VIEWS_DIR, learn_dir: Path | None = None,
                  inside_dir: Path | None = None) -> BrowserFiles:
        """The files for the model whose ONNX files are ``onnx_files`` (``{"quantized": path, ...}``
        as app.py has them): its Hub folder's 8-bit file and the tokenizer and config beside it.
        ``ort_dir``: onnxruntime-web's files (default: the repository's, :func:`export.vendor.ort_dir`).
        The views of ``views_dir`` are served in any case (:attr:`problem` is about running the model);
        ``learn_dir``: the folder playground.learn.files wrote for Watch it learn (None: none yet);
        ``inside_dir``: the folder of Inside the model's four files (None: none yet)."""
        views = {f.route: f for f in view_files(views_dir)}  # the app's own views: served whatever follows

        def without(problem: str) -> BrowserFiles:
            return cls(dict(views), problem=problem)

        try:
            ort_dir = vendor.ort_dir() if ort_dir is None else ort_dir
        except (vendor.VendorError, OSError) as err:
            return without(MISSING_ORT.format(why=err))
        if missing_ort := [name for name in ORT_FILES if not (ort_dir / name).is_file()]:
            return without(MISSING_ORT.format(why=f"{ort_dir / missing_ort[0]} is missing"))
        quantized = onnx_files.get("quantized")
        if quantized is None or not Path(quantized).is_file():
            return without("Run on this browser needs the model's 8-bit file `onnx/model_quantized.onnx`, which this model has not.")
        hub = Path(quantized).parent.parent
        model = [hub / name for name in MODEL_FILES]
        if missing := [str(p) for p in model if not p.is_file()]:
            return without(f"Run on this browser needs {', '.join(missing)} beside the model.")
        modules = [engine_dir / name for name in ENGINE_MODULES]
        page = [page_module, *(page_module.parent / name for name in PAGE_IMPORTS)]
        if missing := [str(p) for p in [*modules, *page] if not p.is_file()]:
            return without(f"Run on this browser needs the browser engine: {', '.join(missing)} is missing.")
        files: list[Served] = list(views.values())
        for path in modules:
            files.append(Served(f"{PREFIX}engine/{path.name}", path, file_digest(path)))
        for path in page:
            files.append(Served(f"{PREFIX}{path.name}", path, file_digest(path)))
        ort = [ort_dir / name for name in ORT_FILES]
        ort_digests = [file_digest(p) for p in ort]
        folder = hashlib.sha256("".join(ort_digests).encode()).hexdigest()[:HASH_CHARS]
        for path, digest in zip(ort, ort_digests):
            files.append(Served(f"{PREFIX}ort/{folder}/{path.name}", path, digest, immutable=True))
        for path in model:
            digest = file_digest(path)
            files.append(Served(f"{PREFIX}model/{path.name}", path, digest, version=digest[:HASH_CHARS],
                                bounded=path.suffix == ".onnx"))
        learn, learn_problem = _learn_code(engine_dir)
        inside, inside_problem = _inside_code(engine_dir)
        out = cls({f.route: f for f in [*files, *learn, *inside]}, model_mb=model[0].stat().st_size / 1e6,
                  learn_problem=learn_problem, inside_problem=inside_problem)
        if learn_dir is not None:
            out.add_learn(learn_dir)
        if inside_dir is not None:
            out.add_inside(inside_dir)
        return out

    def url(self, name: str) -> str:
        """The address of the served file whose route ends with ``name``."""
        return next(f.url for route, f in self.files.items() if route.endswith("/" + name))

    def view_url(self, name: str) -> str | None:
        """The address of the view file ``name`` (``"inside.js"``) relative to the app's root, None
        when it is not served."""
        served = self.files.get(f"{PREFIX}views/{name}")
        return served.url.removeprefix("/") if served else None

    def page_config(self, hub_model: str | None = None) -> dict[str, Any]:
        """What the page's script needs: the addresses (relative to the app's root), and why not.
        ``hub_model``: the same 8-bit file on the Hub (playground.hub_link.model_address), tried
        before the Space's copy: ``modelSources`` lists both, ``modelSha256`` is the digest the
        page checks the bytes against (a published file that is not this one is not used)."""
        if not self.available:
            return {"available": False, "problem": self.problem}
        rel = lambda url: url.removeprefix("/")  # noqa: E731 -- resolved against the app's root, which a proxy may move
        ort = next(f for f in self.files.values() if f.route.endswith(ORT_FILES[0]))
        model = next(f for f in self.files.values() if f.route.endswith("/model_quantized.onnx"))
        hub = {"modelSources": [hub_model, rel(model.url)], "modelSha256": model.digest} if hub_model else {}
        return {
            "available": True,
            "runOn": rel(self.url(PAGE_MODULE.name)),
            "engine": rel(self.url("engine.js")),
            "ort": rel(ort.route.rsplit("/", 1)[0] + "/"),
            "model": rel(self.url("model_quantized.onnx")),
            "tokenizer": rel(self.url("tokenizer.json")),
            "config": rel(self.url("config.json")),
            "modelMB": round(self.model_mb, 1),
            "retryAfterS": RETRY_AFTER_S,
            **hub,
        }


    def add_learn(self, learn_dir: Path) -> None:
        """Serve Watch it learn's data files from ``learn_dir`` (playground.learn.files' folder, written
        in the background while the app starts: :func:`playground.ui.startup.prepare_browser_files_in_background`)."""
        if not self.learn_code:
            return  # the page side itself is missing: nothing to serve it with
        files, problem = _learn_data(learn_dir)
        self.files.update({f.route: f for f in files})
        self.learn_problem = problem

    @property
    def learn_code(self) -> bool:
        return f"{PREFIX}{LEARN_PAGE_MODULE.name}" in self.files

    def learn_config(self) -> dict[str, Any]:
        """What Watch it learn's page side needs: the addresses (relative to the app's root; learn.json
        revalidated, so a page built before the files were written finds them), or why it cannot."""
        if not self.available or not self.learn_code:
            return {"available": False, "problem": self.problem or self.learn_problem}
        rel = lambda url: url.removeprefix("/")  # noqa: E731 -- as page_config
        ort = next(f for f in self.files.values() if f.route.endswith(ORT_FILES[0]))
        return {
            "available": True,
            "module": rel(self.url(LEARN_PAGE_MODULE.name)),
            "view": self.view_url(LEARN_VIEW.name),
            "facts": rel(LEARN_FACTS),
            "ort": rel(ort.route.rsplit("/", 1)[0] + "/"),
            "plotly": rel(self.url(vendor.PLOTLY_FILE)),
            "retryAfterS": RETRY_AFTER_S,
        }


    def add_inside(self, folder: Path) -> None:
        """Serve Inside the model's four files from ``folder`` (written in the background while the
        app starts: :func:`playground.ui.startup.prepare_browser_files_in_background`), each immutable
        under its ``?v=``, and ``files.json`` (revalidated: a page built before the files were
        written finds them there) naming those addresses."""
        if not self.inside_code:
            return
        from export.inside_graph import BROWSER_FILES

        folder = Path(folder)
        if missing := [name for name in BROWSER_FILES if not (folder / name).is_file()]:
            self.inside_problem = INSIDE_FILES_MISSING.format(why=f"{folder / missing[0]} is missing")
            return
        files = [Served(f"{PREFIX}inside/{name}", folder / name, digest := file_digest(folder / name),
                        version=digest[:HASH_CHARS]) for name in BROWSER_FILES]
        index = folder / INSIDE_INDEX.rsplit("/", 1)[1]
        body = json.dumps({name: f.url.removeprefix("/") for name, f in zip(BROWSER_FILES, files)}, indent=1).encode()
        if not index.is_file() or index.read_bytes() != body:
            part = index.with_name(f".{index.name}.{os.getpid()}.tmp")
            part.write_bytes(body)
            os.replace(part, index)
        files.append(Served(INSIDE_INDEX, index, file_digest(index)))
        self.files.update({f.route: f for f in files})
        self.inside_problem = None

    @property
    def inside_code(self) -> bool:
        return f"{PREFIX}{INSIDE_PAGE_MODULE.name}" in self.files

    def inside_config(self) -> dict[str, Any]:
        """What Inside the model's page side needs: the addresses (relative to the app's root) of its
        modules and of ``files.json`` (``facts``: 404 until the files are written), or why it cannot."""
        if not self.available or not self.inside_code:
            return {"available": False, "problem": self.problem or self.inside_problem}
        rel = lambda url: url.removeprefix("/")  # noqa: E731 -- as page_config
        engine = lambda name: rel(self.files[f"{PREFIX}engine/{name}"].url)  # noqa: E731 -- (a view is named inside.js too)
        ort = next(f for f in self.files.values() if f.route.endswith(ORT_FILES[0]))
        return {
            "available": True,
            "module": rel(self.url(INSIDE_PAGE_MODULE.name)),
            "inside": engine("inside.js"),
            "engine": engine("engine.js"),
            "tokenizerModule": engine("tokenizer.js"),
            "fetch": engine("fetch.js"),
            "checks": rel(f"{PREFIX}static/{CHECKS_MODULE.name}"),
            "ort": rel(ort.route.rsplit("/", 1)[0] + "/"),
            "tokenizer": rel(self.url("tokenizer.json")),
            "facts": rel(INSIDE_INDEX),
            "retryAfterS": RETRY_AFTER_S,
        }


def _page_side(engine_dir: Path, modules: Iterable[str], page_module: Path, imports: Iterable[str],
               extra: Iterable[Path] = ()) -> tuple[list[Served], list[str]]:
    """A tab's "this browser" code, revalidated: the engine's ``modules``, its page side and what
    that imports beside it, served beside run_on.js; and the paths missing (none served then)."""
    engine = [engine_dir / name for name in modules]
    page = [page_module, *(page_module.parent / name for name in imports)]
    if missing := [str(p) for p in [*engine, *page, *extra] if not p.is_file()]:
        return [], missing
    return ([Served(f"{PREFIX}engine/{p.name}", p, file_digest(p)) for p in engine]
            + [Served(f"{PREFIX}{p.name}", p, file_digest(p)) for p in page]), []


def _inside_code(engine_dir: Path) -> tuple[list[Served], str | None]:
    """Inside the model's page side: the engine's stage-graph modules, inside_on.js and what it
    imports beside it, the text check; and the problem until its data files are added."""
    files, missing = _page_side(engine_dir, INSIDE_MODULES, INSIDE_PAGE_MODULE, INSIDE_IMPORTS, [CHECKS_MODULE])
    if missing:
        return [], INSIDE_FILES_MISSING.format(why=f"{', '.join(missing)} is missing")
    files.append(Served(f"{PREFIX}static/{CHECKS_MODULE.name}", CHECKS_MODULE, file_digest(CHECKS_MODULE)))
    return files, INSIDE_PREPARING


def _learn_code(engine_dir: Path) -> tuple[list[Served], str | None]:
    """Watch it learn's page side: the engine's training modules, learn_on.js, plotly.js (the view is
    one of web/views/, served with the others); and the problem until its data files are added
    (:meth:`BrowserFiles.add_learn`)."""
    try:
        plotly = vendor.plotly_js()
    except (vendor.VendorError, OSError) as err:
        return [], LEARN_FILES_MISSING.format(why=f"plotly.js is missing ({err})")
    files, missing = _page_side(engine_dir, LEARN_MODULES, LEARN_PAGE_MODULE, LEARN_IMPORTS, [LEARN_VIEW])
    if missing:
        return [], LEARN_FILES_MISSING.format(why=f"{', '.join(missing)} is missing")
    digest = file_digest(plotly)
    files.append(Served(f"{PREFIX}plotly/{digest[:HASH_CHARS]}/{plotly.name}", plotly, digest, immutable=True))
    return files, LEARN_PREPARING


def _learn_data(learn_dir: Path) -> tuple[list[Served], str | None]:
    """``learn_dir``/learn/'s files (immutable under their ``?v=``, which learn.json gives), or why there are none."""
    folder = Path(learn_dir) / "learn"
    if not (folder / "learn.json").is_file():
        return [], LEARN_FILES_MISSING.format(why=f"{folder / 'learn.json'} is missing")
    files = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.endswith(".tmp"):
            digest = file_digest(path)
            files.append(Served(f"{PREFIX}learn/{path.name}", path, digest, version=digest[:HASH_CHARS]))
    return files, None


def view_files(folder: Path = VIEWS_DIR) -> list[Served]:
    """The views' modules and style sheets (``*.js``, ``*.css`` directly in ``folder``), listed
    once: the routes are fixed when the app starts, whatever a request asks."""
    if not folder.is_dir():
        return []
    paths = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in VIEW_SUFFIXES)
    return [Served(f"{PREFIX}views/{p.name}", p, file_digest(p)) for p in paths]


class DownloadSlots:
    """Streams of a bounded file open per visitor: :meth:`take` one (False when the visitor has
    ``limit`` open already), :meth:`give` it back when the stream ends. Holds only visitors with a
    stream open."""

    def __init__(self, limit: int = MODEL_STREAMS_PER_VISITOR) -> None:
        self.limit = limit
        self.open: dict[str, int] = {}

    def take(self, visitor: str) -> bool:
        if self.open.get(visitor, 0) >= self.limit:
            return False
        self.open[visitor] = self.open.get(visitor, 0) + 1
        return True

    def give(self, visitor: str) -> None:
        left = self.open.get(visitor, 0) - 1
        if left > 0:
            self.open[visitor] = left
        else:
            self.open.pop(visitor, None)


UNSATISFIABLE = (-1, -1)


def byte_range(header: bytes | None, size: int) -> tuple[int, int] | None:
    """The one range ``Range: bytes=...`` asks of a ``size``-byte file, ``(first, last)`` both
    included; None to send the whole file (no header, another unit, several ranges: a server may
    answer those whole); :data:`UNSATISFIABLE` for a range wholly past the end (416)."""
    if not header:
        return None
    text = header.decode("latin-1").strip()
    unit, _, spec = text.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash or not (first.isdigit() or last.isdigit()) or (first and not first.isdigit()) or (last and not last.isdigit()):
        return None
    if not first:  # the last n bytes
        n = int(last)
        return UNSATISFIABLE if n == 0 or size == 0 else (max(0, size - n), size - 1)
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size:
        return UNSATISFIABLE
    return None if end < start else (start, end)


async def _plain(send: Callable, status: int, detail: str, headers: Iterable[tuple[bytes, bytes]] = (), body: bool = True) -> None:
    data = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]})
    await send({"type": "http.response.body", "body": data if body else b""})


class BrowserFileServer:
    """ASGI middleware answering every request under :data:`PREFIX` from ``files`` (the module's
    doc); any other request passes on to the app."""

    def __init__(self, app: Callable, files: BrowserFiles, slots: DownloadSlots | None = None,
                 visitor: Callable[[Any], str] = visitor_of, budget: ByteBudget | None = None,
                 any_slots: DownloadSlots | None = None) -> None:
        self.app = app
        self.files = files
        self.slots = slots if slots is not None else DownloadSlots()  # the model's streams
        self.any_slots = any_slots if any_slots is not None else DownloadSlots(FILE_DOWNLOADS_PER_VISITOR)  # every file's
        self.budget = budget if budget is not None else ByteBudget(FILE_MB_PER_MINUTE * 1_000_000)
        self.visitor = visitor
        self._gzipped: dict[str, bytes] = {}
        self._gzip_locks: dict[str, asyncio.Lock] = {}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        root = scope.get("root_path") or ""
        if root and path.startswith(root + "/"):
            path = path[len(root):]
        if not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        if method not in ("GET", "HEAD"):
            await _plain(send, 405, "Only GET and HEAD are answered here.", [(b"allow", b"GET, HEAD")])
            return
        served = self.files.files.get(path)
        if served is None:
            detail = (self.files.problem or "") if not self.files.available else ""
            await _plain(send, 404, (detail + " " if detail else "") + "Not a file of this app: "
                         f"{PREFIX} serves the browser engine, onnxruntime-web and the model's browser files only.",
                         body=method == "GET")
            return
        await self._serve(served, scope, receive, send, head=method == "HEAD")

    async def _gzip(self, served: Served) -> bytes:
        if served.route not in self._gzipped:
            lock = self._gzip_locks.setdefault(served.route, asyncio.Lock())
            async with lock:  # one compression per file, whoever asks meanwhile waits for it
                if served.route not in self._gzipped:
                    raw = await asyncio.to_thread(served.path.read_bytes)
                    self._gzipped[served.route] = await asyncio.to_thread(gzip.compress, raw, COMPRESS_LEVEL, mtime=0)
        return self._gzipped[served.route]

    async def _serve(self, served: Served, scope: dict, receive: Callable, send: Callable, head: bool) -> None:
        from starlette.datastructures import QueryParams

        headers = request_headers(scope)
        version = QueryParams(scope.get("query_string", b"")).get("v")
        size = served.path.stat().st_size
        if_range = headers.get(b"if-range")
        plain_etag = f'"{served.digest[:32]}"'.encode()
        # (a range is of the file's own bytes, so it goes out unencoded; another version's If-Range: the whole file)
        wanted = byte_range(headers.get(b"range"), size) if not head and if_range in (None, plain_etag) else None
        zipped = served.compressible and wants_gzip(headers.get(b"accept-encoding")) and wanted is None
        etag = f'"{served.digest[:32]}{"-gz" if zipped else ""}"'.encode()
        common = [
            (b"etag", etag),
            (b"cache-control", served.cache_control(version).encode()),
            (b"x-content-type-options", b"nosniff"),
        ]
        if served.compressible:
            common.append((b"vary", b"Accept-Encoding"))
        if etag_matches(headers.get(b"if-none-match"), etag):
            await send({"type": "http.response.start", "status": 304, "headers": common})
            await send({"type": "http.response.body", "body": b""})
            return
        if head:
            zipped_size = len(await self._gzip(served)) if zipped else served.path.stat().st_size
            await self._start(send, 200, served, zipped, zipped_size, common)
            await send({"type": "http.response.body", "body": b""})
            return
        if wanted == UNSATISFIABLE:
            await _plain(send, 416, f"The file has {size} bytes.", [(b"content-range", f"bytes */{size}".encode())])
            return
        visitor = self.visitor(scope)
        taken: list[DownloadSlots] = []
        try:
            for slots, what in ((self.any_slots, "of this app's files"), (self.slots, "of the model")):
                if slots is self.slots and not served.bounded:
                    continue
                if not slots.take(visitor):
                    await _plain(send, 429, (
                        f"{slots.limit} downloads {what} from you are under way already (at most {slots.limit} at once); "
                        f"try again in {RETRY_AFTER_S} s, or when one finishes: a browser keeps these files once downloaded."),
                        [(b"retry-after", str(RETRY_AFTER_S).encode())])
                    return
                taken.append(slots)
            body = await self._gzip(served) if zipped else None
            first, last = wanted if wanted is not None else (0, (len(body) if body is not None else size) - 1)
            length = last - first + 1
            wait = self.budget.take(visitor, length)
            if wait:
                mb = self.budget.capacity / 1e6
                await _plain(send, 429, (
                    f"You have downloaded your share of this app's files for now ({mb:g} MB a minute each); try again "
                    f"in {wait:g} s: a browser keeps these files once downloaded."), [(b"retry-after", f"{wait:g}".encode())])
                return
            if wanted is not None:
                common = [*common, (b"content-range", f"bytes {first}-{last}/{size}".encode())]
            await self._start(send, 206 if wanted is not None else 200, served, zipped, length, common)
            if body is not None:
                await send({"type": "http.response.body", "body": body})
            else:
                await self._stream(served.path, receive, send, first, length)
        finally:
            for slots in taken:
                slots.give(visitor)

    async def _start(self, send: Callable, status: int, served: Served, zipped: bool, length: int,
                     common: list[tuple[bytes, bytes]]) -> None:
        start = [(b"content-type", served.content_type.encode()), (b"content-length", str(length).encode()), *common]
        start.append((b"content-encoding", b"gzip") if zipped else (b"accept-ranges", b"bytes"))
        await send({"type": "http.response.start", "status": status, "headers": start})

    async def _stream(self, path: Path, receive: Callable, send: Callable, offset: int = 0, length: int | None = None) -> None:
        """``length`` bytes of ``path`` from ``offset`` (default: to its end) in chunks, each sent once
        the client took the last (the server's send waits for the socket), stopped when the client
        goes: the server then drops what is sent without a word."""
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            left = path.stat().st_size - offset if length is None else length
            with open(path, "rb") as f:
                f.seek(offset)
                while not gone.is_set():
                    chunk = await asyncio.to_thread(f.read, min(CHUNK_BYTES, left))
                    left -= len(chunk)
                    more = left > 0 and len(chunk) > 0
                    await send({"type": "http.response.body", "body": chunk, "more_body": more})
                    if not more:
                        break
        finally:
            watcher.cancel()
