"""What the tabs share: the PyTorch model, GPT-2's tokenizer, and the onnxruntime engine that
generates text (with the execution provider the ``PLAYGROUND_PROVIDER`` environment variable asks
for, on the ONNX file ``PLAYGROUND_ONNX`` asks for: by default the 8-bit integer file on a CPU,
fp32 on CUDA), and beside it the other precision's file a generation may ask for, each with its
decoding loop.

The app builds one :class:`Resources` for the model it shows (``python app.py --model DIR``: that
folder's) and hands it to each tab's ``build``; nothing here is replaced while the app runs. The
plain functions under the tabs take a model (their default, :func:`shipped_model`, is the shipped
weights loaded once, read-only, as ``model.get_tokenizer`` loads the tokenizer once).

Gradio runs requests on worker threads; the first few may arrive together, so loading is
guarded by a lock (the model is read-only afterwards: concurrent forward passes in eval mode
under ``torch.inference_mode`` are safe; the engine's session is thread-safe too).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import tiktoken

from export.naming import FP32_NAME, INT8_NAME
from model import GPT, get_tokenizer, load_pretrained

from . import limits
from .memo import Memo
from .validation import InputError

if TYPE_CHECKING:  # annotations only
    from runtime.batching import Scheduler
    from runtime.engine import Engine

__all__ = [
    "ResourceError",
    "Resources",
    "load_model",
    "shipped_model",
    "is_shipped",
    "get_encoding",
    "PROVIDER_ENV",
    "ONNX_FILE_ENV",
    "requested_file",
    "choose_file",
    "requested_provider",
    "planned_provider",
    "open_engine",
    "AUTO_PRECISION",
    "PRECISION_FILES",
    "budget_cpu",
]

log = logging.getLogger("playground")


class ResourceError(RuntimeError):
    """The shipped model cannot be loaded; the message names the command that fixes it."""


def load_model(path: str | Path | None = None) -> GPT:
    """The model of folder ``path`` (default: the shipped weights) in eval mode; missing or corrupt
    weights raise :class:`ResourceError` naming the command that fixes them."""
    try:
        return load_pretrained(path).eval()
    except FileNotFoundError as err:
        raise ResourceError(f"the model's weights are missing: {err}") from err
    except Exception as err:  # a corrupt or mismatched file
        raise ResourceError(
            f"the model's weights could not be loaded ({type(err).__name__}: {err}); "
            "restore them with `git checkout model/weights` or retrain with `python -m model.train`"
        ) from err


_shipped_lock = threading.Lock()


@functools.cache
def _shipped() -> GPT:
    return load_model(None)


def shipped_model() -> GPT:
    """The shipped model in eval mode, loaded once (read-only: every caller may share it)."""
    with _shipped_lock:  # the first callers may arrive together: one load
        return _shipped()


def is_shipped(model: GPT) -> bool:
    """Whether ``model`` is the shipped model (:func:`shipped_model`'s), loading nothing."""
    return _shipped.cache_info().currsize > 0 and model is _shipped()


def get_encoding() -> tiktoken.Encoding:
    """GPT-2's tokenizer (offline, cached by ``model.get_tokenizer``)."""
    return get_tokenizer()


# --- The onnxruntime engine ------------------------------------------------------------------------

# Which execution provider the app asks for: "auto" (CUDA when usable, else CPU), "cpu" or
# "cuda". A Space with a GPU sets PLAYGROUND_PROVIDER=cuda; if CUDA turns out unusable there the
# app still serves, on the CPU, and says so once on the console (the stats show the provider).
PROVIDER_ENV = "PLAYGROUND_PROVIDER"


def requested_provider() -> str:
    """The provider ``PLAYGROUND_PROVIDER`` asks for: "auto" (the default), "cpu" or "cuda"."""
    value = os.environ.get(PROVIDER_ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "cpu", "cuda"):
        log.warning("%s=%r is not one of auto, cpu, cuda: using auto", PROVIDER_ENV, value)
        return "auto"
    return value


@functools.cache  # said once a process, whichever app asked
def _say_cuda_unusable(reason: str) -> None:
    log.warning("CUDA was requested (%s=cuda) but is not usable on this machine (%s): generating on the CPU.",
                PROVIDER_ENV, reason)


def _usable_provider(requested: str) -> str:
    """``requested``, except "cuda" on a machine where CUDA is unusable: "cpu", said once."""
    from runtime import providers

    if requested != "cuda" or providers.cuda_usable():
        return requested
    _say_cuda_unusable(str(providers.cuda_unusable_reason()))
    return "cpu"


def planned_provider() -> tuple[str, str | None]:
    """(the onnxruntime provider generation runs on, as the settings and this machine give it;
    why CUDA is not used although ``PLAYGROUND_PROVIDER=cuda`` asked for it, else None), known
    before the engine opens, for the page."""
    from runtime import providers

    requested = requested_provider()
    if requested == "cpu":
        return providers.CPU, None
    reason = providers.cuda_unusable_reason()
    return (providers.CUDA if reason is None else providers.CPU), (reason if requested == "cuda" else None)


def open_engine(path: str | Path | None = None, provider: str | None = None) -> Engine:
    """An onnxruntime engine on ``path`` (default artifacts/hub/onnx/model.onnx); a missing or unreadable
    file raises :class:`ResourceError` naming the command that rebuilds it."""
    from export.naming import hub_dir
    from runtime.engine import Engine

    provider = _usable_provider(provider or requested_provider())
    try:
        return Engine.load(path if path is not None else hub_dir() / FP32_NAME, provider=provider)
    except FileNotFoundError:
        raise ResourceError(
            "the ONNX model file is missing: build it with `python -m export` (or restart the app, which builds it)"
        ) from None
    except Exception as err:  # noqa: BLE001 -- onnxruntime raises its own types for a corrupt file
        raise ResourceError(
            f"the ONNX model file cannot be opened ({type(err).__name__}); it may be truncated or corrupt: "
            "rebuild it with `python -m export`"
        ) from err


# Which ONNX file generates: "auto" (the default) takes the 8-bit integer file on a CPU (faster
# than fp32 there, at a held-out loss within a thousandth of a nat: docs/export.md, "The 8-bit
# files") and fp32 on CUDA (float kernels are what a GPU
# is fast at; onnxruntime's integer MatMul has no CUDA kernel worth using). "fp32", "quantized"
# or "int8" force one (`python -m export` writes all three).
ONNX_FILE_ENV = "PLAYGROUND_ONNX"
_FILE_CHOICES = ("auto", "fp32", "quantized", "int8")


def requested_file() -> str:
    """The file ``PLAYGROUND_ONNX`` asks for: "auto" (the default), "fp32", "quantized" or "int8"."""
    value = os.environ.get(ONNX_FILE_ENV, "auto").strip().lower() or "auto"
    if value not in _FILE_CHOICES:
        log.warning("%s=%r is not one of %s: using auto", ONNX_FILE_ENV, value, ", ".join(_FILE_CHOICES))
        return "auto"
    return value


def choose_file(files: dict[str, Path], on_gpu: bool, requested: str | None = None) -> Path:
    """The ONNX file to generate with among ``files`` (keys as ``export.artifact_paths``):
    ``requested`` (default :func:`requested_file`) where there is one, else fp32 on a GPU and the
    integer file on a CPU; fp32 when the wanted file is missing from ``files``."""
    requested = requested or requested_file()
    key = requested if requested != "auto" else ("fp32" if on_gpu else "int8")
    if key not in files:
        if requested != "auto":
            log.warning("%s=%s: this model has no such file; generating with fp32", ONNX_FILE_ENV, requested)
        key = "fp32"
    return files[key]


# The ONNX file of each precision a generation may ask for, beside the app's engine's file: "full"
# (fp32, what Inside the model and Compare compute with) and "8-bit" (the integer file). "auto"
# is the app's engine itself, whichever file PLAYGROUND_ONNX and the device chose.
PRECISION_FILES = {"full": FP32_NAME, "8-bit": INT8_NAME}
AUTO_PRECISION = "auto"


def _scheduler_of(engine: Engine) -> Scheduler:
    """A decoding loop on ``engine``, with the app's row limits."""
    from runtime.batching import Scheduler

    return Scheduler(engine, max_rows=limits.MAX_BATCH_ROWS, max_waiting=limits.MAX_WAITING_REQUESTS, wide=engine.widened())


class Resources:
    """What one app's tabs share, each opened on first use: the model of ``weights_dir``
    (None: the shipped one, :func:`shipped_model`), the onnxruntime engine on one of
    ``onnx_files`` ({"fp32", "int8", ...: path}, keys as ``export.artifact_paths``; one path;
    None: the shipped model's files) and its decoding loop, and the other precision's file with a
    loop of its own. ``model``: a model already in memory, shown instead of loading one."""

    def __init__(self, weights_dir: str | Path | None = None, onnx_files: dict[str, Path] | str | Path | None = None,
                 model: GPT | None = None) -> None:
        if isinstance(onnx_files, (str, Path)):
            onnx_files = {"fp32": Path(onnx_files)}
        self.weights_dir = None if weights_dir is None else Path(weights_dir)
        self.onnx_files = None if onnx_files is None else {key: Path(path) for key, path in onnx_files.items()}
        self._lock = threading.Lock()
        self._model = None if model is None else model.eval()
        self._engine_lock = threading.Lock()
        self._engine: Engine | None = None
        self._scheduler: Scheduler | None = None
        # One entry: the file of the other precision than the engine's, with its own loop.
        self._precision_engines: Memo[Path, tuple[Engine, Scheduler]] = Memo(size=1, close=lambda pair: pair[1].close())

    def __repr__(self) -> str:
        return f"Resources({str(self.weights_dir or 'shipped')!r})"

    # --- the PyTorch model -------------------------------------------------------------------

    def model(self) -> GPT:
        """The model in eval mode, loaded on first use (once, whichever threads arrive together)."""
        if self._model is None:
            with self._lock:
                if self._model is None:  # another thread may have loaded it while we waited
                    self._model = shipped_model() if self.weights_dir is None else load_model(self.weights_dir)
        return self._model

    # --- the onnxruntime engine and its decoding loops ----------------------------------------

    def engine(self) -> Engine:
        """The one onnxruntime engine every request shares (its session is thread-safe: every call
        keeps its cache and random state to itself), opened on first use. A failure is not kept:
        the next request tries again, so rebuilding the file mends a running app."""
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    from export import artifact_paths
                    from runtime import providers

                    provider = _usable_provider(requested_provider())
                    on_gpu = provider == "cuda" or (provider == "auto" and providers.cuda_usable())
                    self._engine = open_engine(choose_file(self.onnx_files or artifact_paths(), on_gpu), provider)
        return self._engine

    def scheduler(self) -> Scheduler:
        """The decoding loop every generation joins (continuous batching on :meth:`engine`, at
        most ``limits.MAX_BATCH_ROWS`` samples at once)."""
        engine = self.engine()
        with self._engine_lock:
            if self._scheduler is None or self._scheduler.engine is not engine:
                if self._scheduler is not None:
                    self._scheduler.close()
                self._scheduler = _scheduler_of(engine)
        return self._scheduler

    def engine_for(self, precision: str) -> tuple[Engine, Scheduler]:
        """The engine and decoding loop of ``precision`` (a key of :data:`PRECISION_FILES`, or
        :data:`AUTO_PRECISION`: the app's own). The file that is not the engine's is opened on
        first use, beside it (its own session and loop, the same row limits); a model without such
        a file is told with an :class:`InputError` naming the precision it has."""
        engine = self.engine()
        if precision == AUTO_PRECISION:
            return engine, self.scheduler()
        path = engine.path.parent.parent / PRECISION_FILES[precision]  # <hub>/onnx/<file>
        if path == engine.path:
            return engine, self.scheduler()

        def open_beside(path: Path) -> tuple[Engine, Scheduler]:
            if not path.is_file():
                raise InputError(
                    f"precision: this model has no {precision} file ({PRECISION_FILES[precision]}); "
                    f"choose {' or '.join(p for p in PRECISION_FILES if p != precision)}"
                )
            other = open_engine(path)
            return other, _scheduler_of(other)

        return self._precision_engines.get(path, open_beside)

    def open_loop(self, precision: str) -> Scheduler | None:
        """The decoding loop of ``precision`` (as :meth:`engine_for` takes it) if it is open
        already, else None: what a question about the load may read without opening an engine."""
        engine, scheduler = self._engine, self._scheduler
        if engine is None:
            return None
        if precision == AUTO_PRECISION or engine.path.parent.parent / PRECISION_FILES[precision] == engine.path:
            return scheduler if scheduler is not None and scheduler.engine is engine else None
        pair = self._precision_engines.peek(engine.path.parent.parent / PRECISION_FILES[precision])
        return None if pair is None else pair[1]

    def open_loops(self) -> list[Scheduler]:
        """Every decoding loop open now (the engine's, and the other precision's once used)."""
        loops = [self._scheduler] if self._scheduler is not None else []
        if self._engine is not None:
            for precision in PRECISION_FILES:
                if (loop := self.open_loop(precision)) is not None and loop not in loops:
                    loops.append(loop)
        return loops


def budget_cpu() -> int:
    """Share the cores between the app's three kinds of work: the decoding loop (one onnxruntime
    thread, runtime.engine.DEFAULT_CPU_THREADS), PyTorch's forward passes (attention, contextual
    embeddings) and Gradio's event loop with the light tabs. PyTorch gets every core but the
    loop's: by default it would take all of them and a forward pass would stall generations and
    light calls alike. Returns PyTorch's thread count."""
    import torch

    threads = max(1, (os.cpu_count() or 2) - 1)
    torch.set_num_threads(threads)
    return threads
