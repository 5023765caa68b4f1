"""Which onnxruntime execution provider to ask for, without onnxruntime-gpu's noise on CPU boxes."""

from __future__ import annotations

import ctypes
from functools import lru_cache

import onnxruntime as ort

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
CHOICES = ("auto", "cpu", "cuda")


@lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """CUDA devices the driver reports (0 with no driver), asked of libcuda directly.

    Asking onnxruntime instead means creating a CUDA session, which logs a loud error on a
    machine without a GPU even though it then falls back to the CPU.
    """
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0:
            return count.value
        return 0
    return 0


def cuda_usable() -> bool:
    return CUDA in ort.get_available_providers() and cuda_device_count() > 0


def requested_providers(provider: str) -> list[str]:
    """The provider list for ``InferenceSession``; "cuda" fails clearly when there is no GPU."""
    if provider not in CHOICES:
        raise ValueError(f"provider must be one of {', '.join(CHOICES)}, not {provider!r}")
    if provider == "cpu":
        return [CPU]
    if provider == "cuda" and not cuda_usable():
        why = "this onnxruntime has no CUDA provider" if CUDA not in ort.get_available_providers() else "no CUDA device found"
        raise RuntimeError(f"provider='cuda' requested but {why}; use provider='auto' or 'cpu'")
    if provider == "auto" and not cuda_usable():
        return [CPU]
    return [CUDA, CPU]
