"""Which onnxruntime execution provider to ask for, without onnxruntime-gpu's noise on CPU boxes."""

from __future__ import annotations

import ctypes
from functools import lru_cache

import onnxruntime as ort

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
CHOICES = ("auto", "cpu", "cuda")


@lru_cache(maxsize=1)
def _libcuda() -> ctypes.CDLL | None:
    """The NVIDIA driver's library, initialised; None when there is no driver (or it fails to start)."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        return lib if lib.cuInit(0) == 0 else None
    return None


@lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """CUDA devices the driver reports (0 with no driver), asked of libcuda directly.

    Asking onnxruntime instead means creating a CUDA session, which logs a loud error on a
    machine without a GPU even though it then falls back to the CPU.
    """
    lib, count = _libcuda(), ctypes.c_int(0)
    return count.value if lib is not None and lib.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0


def driver_cuda_version() -> tuple[int, int] | None:
    """The newest CUDA version the driver supports, e.g. (13, 0); None without a driver."""
    lib, version = _libcuda(), ctypes.c_int(0)
    if lib is None or lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return version.value // 1000, version.value % 1000 // 10


def built_cuda_version() -> tuple[int, int] | None:
    """The CUDA version this onnxruntime-gpu was built for, e.g. (13, 0); None for a CPU build."""
    try:
        from onnxruntime.capi.build_and_package_info import cuda_version

        major, minor = (int(part) for part in cuda_version.split(".")[:2])
        return major, minor
    except (ImportError, AttributeError, ValueError):
        return None


@lru_cache(maxsize=1)
def cuda_libraries_error() -> str | None:
    """Why onnxruntime's CUDA provider library cannot be loaded (the loader's message, naming the
    first missing library, e.g. ``libcublasLt.so.13``), or None when it loads or is not there."""
    from pathlib import Path

    import torch  # noqa: F401 -- PyTorch's CUDA wheels load the CUDA libraries onnxruntime links, as in the app

    capi = Path(ort.__file__).parent / "capi"
    library = capi / "libonnxruntime_providers_cuda.so"
    if not library.is_file():
        return None
    try:
        # As onnxruntime does: the bridge first, its symbols global (the provider needs them), then the provider.
        ctypes.CDLL(str(capi / "libonnxruntime_providers_shared.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(library))
    except OSError as err:  # a library not found is the reason; anything else is left to onnxruntime to judge
        return str(err) if "cannot open shared object file" in str(err) else None
    return None


def cuda_unusable_reason() -> str | None:
    """Why onnxruntime cannot run on CUDA here, for a person; None when it can."""
    if CUDA not in ort.get_available_providers():
        return f"this onnxruntime ({ort.__version__}) has no CUDA provider: install onnxruntime-gpu instead of onnxruntime"
    if _libcuda() is None:
        return "there is no NVIDIA driver on this machine (libcuda.so.1): it has no GPU, or none is passed through"
    if cuda_device_count() == 0:
        return "the NVIDIA driver reports no CUDA device"
    driver, built = driver_cuda_version(), built_cuda_version()
    if driver is not None and built is not None and driver < built:
        return (f"the NVIDIA driver supports CUDA up to {driver[0]}.{driver[1]}, and onnxruntime-gpu {ort.__version__} "
                f"needs CUDA {built[0]}.{built[1]}: a newer driver is needed")
    if (error := cuda_libraries_error()) is not None:
        return f"onnxruntime's CUDA provider cannot load the CUDA libraries it links ({error})"
    return None


def cuda_usable() -> bool:
    return cuda_unusable_reason() is None


def requested_providers(provider: str) -> list[str]:
    """The provider list for ``InferenceSession``; "cuda" fails clearly when there is no GPU."""
    if provider not in CHOICES:
        raise ValueError(f"provider must be one of {', '.join(CHOICES)}, not {provider!r}")
    if provider == "cpu":
        return [CPU]
    if provider == "cuda" and not cuda_usable():
        why = cuda_unusable_reason() or "CUDA is not usable"
        raise RuntimeError(f"provider='cuda' requested but {why}; use provider='auto' or 'cpu'")
    if provider == "auto" and not cuda_usable():
        return [CPU]
    return [CUDA, CPU]
