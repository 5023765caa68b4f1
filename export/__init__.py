"""The build pipeline: the GPT as ONNX files, the Hub-ready folder around them, their checks and their upload.

    python -m export          # writes artifacts/hub/ (ONNX fp32 + two 8-bit, config, tokenizer, card), validated
    python -m export --publish USER/NAME    # ... then upload artifacts/hub/ as that model repository
    python -m deploy.space USER/SPACE       # the app as a Hugging Face Space (--dry-run DIR: the files into DIR)

From Python: ``ensure_onnx()`` builds what is missing or stale and returns the ONNX paths
(``export.apart.ensure_onnx_apart()``: the build in a child process, for a long-lived server),
``inspect_onnx(path)`` describes a graph. The files are run by runtime/ (``runtime.engine.Engine``)
and measured by benchmarks/.
"""

from __future__ import annotations

from pathlib import Path

from .build import Progress, artifact_paths, build, stale_files
from .graph_info import inspect_onnx
from .naming import ARTIFACTS_DIR, hub_dir

__all__ = ["ensure_onnx", "inspect_onnx", "artifact_paths", "hub_dir", "ARTIFACTS_DIR"]


def ensure_onnx(
    progress: Progress | None = None, weights_dir: Path | None = None, out_dir: Path | None = None
) -> dict[str, Path]:
    """Return :func:`artifact_paths`: {"fp32", "quantized", "int8"} -> ``artifacts/hub/onnx/model.onnx``,
    ``model_quantized.onnx``, ``model_int8.onnx``, building whatever of ``artifacts/hub/`` is
    missing or stale first.

    Stale: its ``source_weights_sha256`` metadata differs from the current weights (or it came
    from an older exporter), or a file of the Hub folder is missing. ``progress(fraction,
    description)`` is called while building; every ONNX file built is checked (onnx.checker,
    parity against PyTorch, a padded batch) before it is returned.
    """
    stale = stale_files(weights_dir, out_dir)
    if not stale:
        if progress:
            progress(1.0, "ONNX files are up to date")
        return artifact_paths(out_dir)
    report = progress or (lambda fraction, text: None)
    paths = build(weights_dir, out_dir, lambda f, text: report(0.8 * f, text), only=stale)
    from .validate import quick_check

    built = {key: path for key, path in paths.items() if key in stale}
    if built:  # (only "hub" stale: no ONNX file was rebuilt)
        quick_check(built, weights_dir, lambda f, text: report(0.8 + 0.2 * f, text))
    report(1.0, "ONNX files ready")
    return paths
