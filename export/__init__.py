"""ONNX export of the GPT, the onnxruntime generation engine, and their benchmark.

    python -m export          # writes artifacts/gpt.onnx and artifacts/gpt.int8.onnx, validated
    python -m export.bench    # tokens/s of this engine against PyTorch and transformers

From Python: ``ensure_onnx()`` builds what is missing or stale and returns the paths,
``inspect_onnx(path)`` describes a graph, ``export.engine.Engine`` generates text.
"""

from __future__ import annotations

from pathlib import Path

from .build import Progress, artifact_paths, build, stale_files
from .graph_info import inspect_onnx
from .naming import ARTIFACTS_DIR

__all__ = ["ensure_onnx", "inspect_onnx", "artifact_paths", "ARTIFACTS_DIR"]


def ensure_onnx(
    progress: Progress | None = None, weights_dir: Path | None = None, out_dir: Path | None = None
) -> dict[str, Path]:
    """Return {"fp32": path, "int8": path}, exporting any file that is missing or stale first.

    Stale: its ``source_weights_sha256`` metadata differs from the current weights (or it came
    from an older exporter). ``progress(fraction, description)`` is called while building; every
    file built is checked (onnx.checker and parity against PyTorch) before it is returned.
    """
    stale = stale_files(weights_dir, out_dir)
    if not stale:
        if progress:
            progress(1.0, "ONNX files are up to date")
        return artifact_paths(out_dir)
    report = progress or (lambda fraction, text: None)
    paths = build(weights_dir, out_dir, lambda f, text: report(0.8 * f, text), only=stale)
    from .validate import quick_check

    quick_check(paths, weights_dir, lambda f, text: report(0.8 + 0.2 * f, text))
    report(1.0, "ONNX files ready")
    return paths
