"""ZeroGPU (``python -m deploy.space --zerogpu``): the app's PyTorch passes as ``@spaces.GPU`` calls.

On a ZeroGPU Space, a function decorated with ``spaces.GPU(duration=...)`` runs in a worker that
alone sees the GPU, charged to the visitor's daily quota (the Hub's ZeroGPU page, read 2026-11-28:
2 minutes a day without an account, 5 with a free one). ZeroGPU refuses to start a Space with no
such function. Elsewhere (``spaces`` not installed, or installed but not on ZeroGPU, where
``spaces.GPU`` returns the function itself) :func:`on_gpu` changes nothing, so the same app runs
locally, in CI and on a CPU Space as it is.

What is decorated: Inside the model's and Compare's passes, request by request (each a fraction of
a second of PyTorch at this size, so the durations asked are short: a short task is scheduled
sooner). Text generation stays on onnxruntime in the Space's own process, where it costs no
quota; Watch it learn's runs live in a loop that outlives any one request (the batched step trains
several runs at once), which a per-call worker cannot hold, so they train on the Space's CPU.
When a visitor's quota is spent the pass is refused with :data:`QUOTA_MESSAGE`, which points to
what still runs: generation here, or the static edition in the browser.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import gradio as gr

F = TypeVar("F", bound=Callable[..., Any])

INSIDE_GPU_S = 10
COMPARE_GPU_S = 15
QUOTA_MESSAGE = (
    "Your GPU time on this Space is spent for today (ZeroGPU gives each visitor a daily quota: a few "
    "minutes, more when signed in to Hugging Face). Text generation still runs, on the server or, with "
    "\"Run on: this browser\", on your own device; this tab again once the quota refills."
)


def is_quota_error(err: BaseException) -> bool:
    """Whether ``err`` is ZeroGPU's refusal for a spent quota (spaces raises a ``gr.Error`` whose
    title or message says so: "ZeroGPU quota exceeded", "…exceeded your … quota", "…GPU limit")."""
    text = f"{getattr(err, 'title', '') or ''} {err}".lower()
    return isinstance(err, gr.Error) and ("quota" in text or "gpu limit" in text or "runs limit" in text)


def with_quota_message(fn: F) -> F:
    """``fn`` with ZeroGPU's quota refusal told in this app's words (:data:`QUOTA_MESSAGE`)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except gr.Error as err:
            if is_quota_error(err):
                raise gr.Error(QUOTA_MESSAGE, title="GPU quota spent") from err
            raise

    return call  # type: ignore[return-value]


def on_gpu(duration: int) -> Callable[[F], F]:
    """``spaces.GPU(duration=duration)`` where the ``spaces`` package is installed, with the quota
    refusal in this app's words; the function itself where ``spaces.GPU`` leaves it so (not on
    ZeroGPU) or ``spaces`` is not installed."""
    try:
        import spaces
    except ImportError:
        return lambda fn: fn

    def wrap(fn: F) -> F:
        gpu_fn = spaces.GPU(duration=duration)(fn)
        return fn if gpu_fn is fn else with_quota_message(gpu_fn)

    return wrap
