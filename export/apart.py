"""The build in a process of its own, for a server that then runs for weeks: ``ensure_onnx_apart``.

Exporting, quantizing and checking the ONNX files loads PyTorch's exporter and a few copies of the
weights; the allocator keeps most of that memory after the build, so an app that built its files
in its own process kept it for its whole life (measured in docs/export.md). Built by a child
process, it goes when the child exits. The child prints its progress on the console (stderr) and
answers on stdout; ``python -m export.apart [--weights DIR] [--out DIR]`` is that child.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .build import artifact_paths, console_progress, stale_files, weights_file
from .naming import hub_dir

_ERROR = "build failed: "  # the child's last stdout line when the build raised


class BuildFailed(RuntimeError):
    """The child could not build the files; the message names its error as ``Type: message``."""


def ensure_onnx_apart(weights_dir: Path | None = None, out_dir: Path | None = None,
                      on_build: Callable[[list[str]], None] | None = None) -> dict[str, Path]:
    """:func:`export.ensure_onnx` with the build, when one is needed, in a child process.

    What is stale is found here (missing weights raise ``FileNotFoundError`` as there); up-to-date
    files start no process. ``on_build(stale)`` is called before a build starts. Raises
    :class:`BuildFailed` when the child fails."""
    stale = stale_files(weights_dir, out_dir)
    if not stale:
        return artifact_paths(out_dir)
    if on_build is not None:
        on_build(stale)
    # The folders as this process sees them, defaults included: the child builds exactly these.
    weights = weights_file(weights_dir).parent.resolve()
    out = hub_dir(out_dir).parent.resolve()
    command = [sys.executable, "-m", "export.apart", "--weights", str(weights), "--out", str(out)]
    root = Path(__file__).resolve().parents[1]
    child = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, text=True)
    said = [line for line in child.stdout.splitlines() if line.startswith(_ERROR)]
    if said:
        raise BuildFailed(said[-1][len(_ERROR):])
    if child.returncode != 0:
        raise BuildFailed(f"the build process ended with status {child.returncode}")
    still = stale_files(weights_dir, out_dir)
    if still:  # the child said nothing wrong, yet a file is not current: never serve a stale file
        raise BuildFailed(f"the build process left {', '.join(still)} stale")
    return artifact_paths(out_dir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m export.apart", description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", type=Path, default=None, help="model folder (default: model/weights)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: artifacts/)")
    args = ap.parse_args(argv)
    from . import ensure_onnx

    try:
        ensure_onnx(progress=console_progress, weights_dir=args.weights, out_dir=args.out)
    except Exception as err:  # noqa: BLE001 -- the parent says it to the user, without a traceback
        print(f"{_ERROR}{type(err).__name__}: {' '.join(str(err).split())}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
