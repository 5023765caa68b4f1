"""The PyTorch model and tokenizer shared by the tabs: loaded once, on first use, thread-safely.

Gradio runs requests on worker threads; the first few may arrive together, so loading is
guarded by a lock (the model is read-only afterwards: concurrent forward passes in eval mode
under ``torch.inference_mode`` are safe).
"""

from __future__ import annotations

import threading
from pathlib import Path

import tiktoken

from model import GPT, get_tokenizer, load_pretrained

__all__ = ["ResourceError", "get_model", "get_encoding", "set_model"]

_lock = threading.Lock()
_model: GPT | None = None


class ResourceError(RuntimeError):
    """The shipped model cannot be loaded; the message names the command that fixes it."""


def get_model(path: str | Path | None = None) -> GPT:
    """The shared model in eval mode (the shipped weights unless ``set_model`` replaced it)."""
    global _model
    if _model is None:
        with _lock:
            if _model is None:  # another thread may have loaded it while we waited
                try:
                    _model = load_pretrained(path)
                except FileNotFoundError as err:
                    raise ResourceError(f"the model's weights are missing: {err}") from err
                except Exception as err:  # a corrupt or mismatched file
                    raise ResourceError(
                        f"the model's weights could not be loaded ({type(err).__name__}: {err}); "
                        "restore them with `git checkout model/weights` or retrain with `python -m model.train`"
                    ) from err
    return _model


def set_model(model: GPT | None) -> None:
    """Replace the shared model (None: reload the shipped one on next use)."""
    global _model
    with _lock:
        _model = None if model is None else model.eval()


def get_encoding() -> tiktoken.Encoding:
    """GPT-2's tokenizer (offline, cached by ``model.get_tokenizer``)."""
    return get_tokenizer()
