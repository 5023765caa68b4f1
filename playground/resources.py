"""What the tabs share, loaded once on first use, thread-safely: the PyTorch model, GPT-2's
tokenizer, and the onnxruntime engine that generates text (with the execution provider the
``PLAYGROUND_PROVIDER`` environment variable asks for, on the ONNX file ``PLAYGROUND_ONNX`` asks
for: by default the 8-bit integer file on a CPU, fp32 on CUDA), and beside it the other
precision's file a generation may ask for, each with its decoding loop.

Gradio runs requests on worker threads; the first few may arrive together, so loading is
guarded by a lock (the model is read-only afterwards: concurrent forward passes in eval mode
under ``torch.inference_mode`` are safe; the engine's session is thread-safe too).
"""

from __future__ import annotations

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
    "shows_shipped_model",
    "get_model",
    "get_encoding",
    "set_model",
    "use_model",
    "PROVIDER_ENV",
    "ONNX_FILE_ENV",
    "requested_file",
    "choose_file",
    "requested_provider",
    "planned_provider",
    "open_engine",
    "get_engine",
    "get_scheduler",
    "AUTO_PRECISION",
    "PRECISION_FILES",
    "engine_for",
    "open_loop",
    "open_loops",
    "budget_cpu",
]

log = logging.getLogger("playground")

_lock = threading.Lock()
_model: GPT | None = None
# What `python app.py --model DIR` shows instead of the shipped model (playground/model_source.py).
_model_dir: Path | None = None
_engine_files: dict[str, Path] | None = None  # artifact_paths()-style keys: "fp32", "quantized", "int8"


class ResourceError(RuntimeError):
    """The shipped model cannot be loaded; the message names the command that fixes it."""


def get_model(path: str | Path | None = None) -> GPT:
    """The shared model in eval mode (the shipped weights unless ``set_model`` replaced it)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:  # another thread may have loaded it while we waited
                try:
                    _model = load_pretrained(path if path is not None else _model_dir)
                except FileNotFoundError as err:
                    raise ResourceError(f"the model's weights are missing: {err}") from err
                except Exception as err:  # a corrupt or mismatched file
                    raise ResourceError(
                        f"the model's weights could not be loaded ({type(err).__name__}: {err}); "
                        "restore them with `git checkout model/weights` or retrain with `python -m model.train`"
                    ) from err
    return _model


def shows_shipped_model(model: GPT | None = None) -> bool:
    """Whether ``model`` (default: the shared one) is the shipped model, trained on this
    project's Shakespeare text: the shared model while no ``--model DIR`` replaced it."""
    return _model_dir is None and (model is None or model is _model)


def set_model(model: GPT | None) -> None:
    """Replace the shared model (None: reload the shipped one on next use)."""
    global _model
    with _lock:
        _model = None if model is None else model.eval()


def use_model(weights_dir: str | Path | None, onnx_files: dict[str, Path] | str | Path | None) -> None:
    """Show another model folder (config.json + model.safetensors) and generate with its ONNX
    files ({"fp32", "int8", ...: path}, or one path); None, None: the shipped model again. Call
    before the page is built."""
    global _model_dir, _engine_files, _model, _engine
    if isinstance(onnx_files, (str, Path)):
        onnx_files = {"fp32": Path(onnx_files)}
    with _lock, _engine_lock:
        _model_dir = None if weights_dir is None else Path(weights_dir)
        _engine_files = None if onnx_files is None else {key: Path(path) for key, path in onnx_files.items()}
        _model, _engine = None, None


def get_encoding() -> tiktoken.Encoding:
    """GPT-2's tokenizer (offline, cached by ``model.get_tokenizer``)."""
    return get_tokenizer()


# --- The onnxruntime engine ------------------------------------------------------------------------

# Which execution provider the app asks for: "auto" (CUDA when usable, else CPU), "cpu" or
# "cuda". A Space with a GPU sets PLAYGROUND_PROVIDER=cuda; if CUDA turns out unusable there the
# app still serves, on the CPU, and says so once on the console (the stats show the provider).
PROVIDER_ENV = "PLAYGROUND_PROVIDER"
_cuda_fallback_said = False

_engine_lock = threading.Lock()
_engine: Engine | None = None


def requested_provider() -> str:
    """The provider ``PLAYGROUND_PROVIDER`` asks for: "auto" (the default), "cpu" or "cuda"."""
    value = os.environ.get(PROVIDER_ENV, "auto").strip().lower() or "auto"
    if value not in ("auto", "cpu", "cuda"):
        log.warning("%s=%r is not one of auto, cpu, cuda: using auto", PROVIDER_ENV, value)
        return "auto"
    return value


def _usable_provider(requested: str) -> str:
    """``requested``, except "cuda" on a machine where CUDA is unusable: "cpu", said once."""
    global _cuda_fallback_said
    from runtime import providers

    if requested != "cuda" or providers.cuda_usable():
        return requested
    if not _cuda_fallback_said:
        _cuda_fallback_said = True
        log.warning("CUDA was requested (%s=cuda) but is not usable on this machine (%s): generating on the CPU.",
                    PROVIDER_ENV, providers.cuda_unusable_reason())
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


def get_engine() -> Engine:
    """The one onnxruntime engine every request shares (its session is thread-safe: every call
    keeps its cache and random state to itself), opened on first use. A failure is not cached:
    the next request tries again, so rebuilding the file fixes a running app."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                from export import artifact_paths
                from runtime import providers

                provider = _usable_provider(requested_provider())
                on_gpu = provider == "cuda" or (provider == "auto" and providers.cuda_usable())
                _engine = open_engine(choose_file(_engine_files or artifact_paths(), on_gpu), provider)
    return _engine


def _scheduler_of(engine: Engine) -> Scheduler:
    """A decoding loop on ``engine``, with the app's row limits."""
    from runtime.batching import Scheduler

    return Scheduler(engine, max_rows=limits.MAX_BATCH_ROWS, max_waiting=limits.MAX_WAITING_REQUESTS, wide=engine.widened())


_scheduler: Scheduler | None = None


def get_scheduler() -> Scheduler:
    """The decoding loop every generation of the app joins (continuous batching on the shared
    engine, at most ``limits.MAX_BATCH_ROWS`` samples at once); a new one follows a new engine."""
    global _scheduler
    engine = get_engine()
    with _engine_lock:
        if _scheduler is None or _scheduler.engine is not engine:
            if _scheduler is not None:
                _scheduler.close()
            _scheduler = _scheduler_of(engine)
    return _scheduler


# The ONNX file of each precision a generation may ask for, beside the app's engine's file: "full"
# (fp32, what Inside the model and Compare compute with) and "8-bit" (the integer file). "auto"
# is the app's engine itself, whichever file PLAYGROUND_ONNX and the device chose.
PRECISION_FILES = {"full": FP32_NAME, "8-bit": INT8_NAME}
AUTO_PRECISION = "auto"


# The file of the other precision than the app's engine's, with a decoding loop of its own. One
# entry: a model shown with --model replaces the shipped one's, whose loop is then closed.
_precision_engines: Memo[Path, tuple[Engine, Scheduler]] = Memo(size=1, close=lambda pair: pair[1].close())


def engine_for(precision: str) -> tuple[Engine, Scheduler]:
    """The engine and decoding loop of ``precision`` (a key of :data:`PRECISION_FILES`, or
    :data:`AUTO_PRECISION`: the app's own). The file that is not the app's engine's is opened on
    first use, beside it (its own session and loop, the same row limits); a model without such a
    file is told with an :class:`InputError` naming the precision it has."""
    engine = get_engine()
    if precision == AUTO_PRECISION:
        return engine, get_scheduler()
    path = engine.path.parent.parent / PRECISION_FILES[precision]  # <hub>/onnx/<file>
    if path == engine.path:
        return engine, get_scheduler()

    def open_beside(path: Path) -> tuple[Engine, Scheduler]:
        if not path.is_file():
            raise InputError(
                f"precision: this model has no {precision} file ({PRECISION_FILES[precision]}); "
                f"choose {' or '.join(p for p in PRECISION_FILES if p != precision)}"
            )
        other = open_engine(path)
        return other, _scheduler_of(other)

    return _precision_engines.get(path, open_beside)


def open_loop(precision: str) -> Scheduler | None:
    """The decoding loop of ``precision`` (as :func:`engine_for` takes it) if it is open already,
    else None: what a question about the load may read without opening an engine."""
    engine, scheduler = _engine, _scheduler
    if engine is None:
        return None
    if precision == AUTO_PRECISION or engine.path.parent.parent / PRECISION_FILES[precision] == engine.path:
        return scheduler if scheduler is not None and scheduler.engine is engine else None
    pair = _precision_engines.peek(engine.path.parent.parent / PRECISION_FILES[precision])
    return None if pair is None else pair[1]


def open_loops() -> list[Scheduler]:
    """Every decoding loop open now (the app's engine's, and the other precision's once used)."""
    loops = [_scheduler] if _scheduler is not None else []
    if _engine is not None:
        for precision in PRECISION_FILES:
            if (loop := open_loop(precision)) is not None and loop not in loops:
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
