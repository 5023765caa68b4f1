"""What happens once before the page is built: artifacts/hub/ exists (built with progress on the
console on a first start), zipped once as one download, and Gradio may serve the Model tab's
downloads, and no other file."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import gradio as gr


def prepare_onnx() -> dict[str, Path]:
    """``{"fp32", "quantized", "int8", "zip", "browser_zip": path}``: the three ONNX files of
    artifacts/hub/, the whole folder as one zip and the browser-sized part of it (config, tokenizer,
    model_quantized.onnx) as another, exporting first what is missing or stale (a minute or two on a CPU,
    in a child process, whose memory goes with it: the server runs for weeks; progress is printed).
    These files become Gradio's static paths (:func:`serve`)."""
    from export import hub_dir
    from export.apart import ensure_onnx_apart
    from export.hub import BROWSER_FILES, BROWSER_ZIP_NAME, zip_hub

    t0 = time.perf_counter()
    building = False

    def announce(stale: list[str]) -> None:
        nonlocal building
        building = True
        print(f"First start: building the ONNX files into {hub_dir()} (python -m export) ...", file=sys.stderr, flush=True)

    try:
        paths = ensure_onnx_apart(on_build=announce)  # a missing or corrupt file is stale: rebuilt here
    except FileNotFoundError as err:  # no weights: nothing to serve; say what fixes it, no traceback
        raise SystemExit(f"GPT Playground cannot start: {err}") from None
    except Exception as err:  # noqa: BLE001 -- e.g. unreadable weights: the export cannot run
        raise SystemExit(
            f"GPT Playground cannot start: building the ONNX files failed ({_why(err)}). "
            "Check model/weights/ (or retrain: `python -m model.train`), then run `python -m export`."
        ) from None
    if building:
        print(f"ONNX files built in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    archive = zip_hub(hub_dir())  # built once; rebuilt only when a file of the folder is newer
    browser = zip_hub(hub_dir(), hub_dir().parent / BROWSER_ZIP_NAME, only=BROWSER_FILES)
    return serve({**{key: Path(path) for key, path in paths.items()}, "zip": archive, "browser_zip": browser})


def _why(err: Exception) -> str:
    """``Type: message`` of what stopped the build (the child's own error when it ran apart)."""
    from export.apart import BuildFailed

    return str(err) if isinstance(err, BuildFailed) else f"{type(err).__name__}: {err}"


def serve(files: dict[str, Path]) -> dict[str, Path]:
    """Let Gradio serve ``files`` (the Model tab's downloads), in place and no other file of their
    folders (``gr.set_static_paths``: not copied into Gradio's cache); returns ``files``."""
    gr.set_static_paths([str(path) for path in files.values()])
    return files


def warm_up_in_background(res) -> None:
    """Open the onnxruntime session and run one token while the server starts, so the first
    user's generation does not pay for it (the page is served meanwhile); ``res``: the app's
    :class:`~playground.resources.Resources`."""
    import threading

    def warm() -> None:
        try:
            from ..generation.streaming import prepare, run

            for _ in run(res, prepare(res, "Romeo.\n", 1, 1.0, 1, 1.0, 0)):
                pass
        except Exception as err:  # noqa: BLE001 -- a user request will report it properly
            print(f"engine warm-up failed: {err}", file=sys.stderr, flush=True)

    threading.Thread(target=warm, name="engine-warm-up", daemon=True).start()


INSIDE_APP_DIR = "browser-inside"  # under artifacts/: Inside the model's files the app serves, a folder per model


def inside_folder(weights_dir: Path | None = None, out_dir: Path | None = None) -> Path:
    """Where the app writes Inside the model's browser files for the model of ``weights_dir``
    (None: the shipped one), under ``out_dir`` (the model's own, where its ONNX files go; None:
    artifacts/): a folder per model, so two apps showing two models never share one."""
    import hashlib

    from export.naming import ARTIFACTS_DIR

    name = "shipped" if weights_dir is None else hashlib.sha256(str(Path(weights_dir).resolve()).encode()).hexdigest()[:16]
    return (Path(out_dir) if out_dir is not None else ARTIFACTS_DIR) / INSIDE_APP_DIR / name


# What Inside's browser files are made from besides the weights: the stage graph's exporter and the
# stage math it traces (an edit to either writes them again).
_ROOT = Path(__file__).resolve().parents[2]
INSIDE_SOURCES = tuple(_ROOT / p for p in ("export/inside_graph.py", "export/onnx_export.py", "model/stages.py", "model/gpt.py"))


def _current(folder: Path, weights_dir: Path | None, sources: tuple[Path, ...] = INSIDE_SOURCES) -> bool:
    """Whether ``folder``'s Inside files were written after the model's weights and ``sources``
    last changed (then the app serves them at once and writes nothing)."""
    from model import WEIGHTS_DIR

    index, weights = folder / "weights.json", Path(weights_dir or WEIGHTS_DIR) / "model.safetensors"
    if not (index.is_file() and weights.is_file()):
        return False
    made = [weights, *(path for path in sources if path.is_file())]
    return index.stat().st_mtime >= max(path.stat().st_mtime for path in made)


def prepare_browser_files_in_background(browser, weights_dir: Path | None = None, out_dir: Path | None = None) -> None:
    """Write, in child processes one after the other (building a graph the first time takes minutes
    and a few hundred MB, whose memory goes with the child), what "Run on: this browser" loads
    beyond the model while the server starts, then serve it: Inside the model's stage graph and
    8-bit weights for the model of ``weights_dir`` (into :func:`inside_folder`, ``out_dir``: the
    model's own folder; ``python -m export.inside_graph``;
    ``browser.add_inside``), then Watch it learn's step graphs and text (``python -m
    playground.learn.files``; ``browser.add_learn``). Until then each tab's "this browser" waits
    for its files and says so. Files already written for this model are served at once."""
    import subprocess
    import threading

    from playground.learn.files import app_folder

    learn, inside = app_folder(), inside_folder(weights_dir, out_dir)
    if (learn / "learn" / "learn.json").is_file():
        browser.add_learn(learn)
    written = _current(inside, weights_dir)  # written before, for these weights and this code: no child
    if written:
        browser.add_inside(inside)
    root = _ROOT

    def child(what: str, args: list[str]) -> bool:
        run = subprocess.run([sys.executable, "-m", *args], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            print(f"{what} could not be written: {run.stderr.strip()[-500:]}", file=sys.stderr, flush=True)
        return run.returncode == 0

    def write() -> None:
        weights = [] if weights_dir is None else ["--weights", str(weights_dir)]
        if browser.inside_code and not written and child("Inside the model's browser files", ["export.inside_graph", str(inside), *weights]):
            browser.add_inside(inside)
        if browser.learn_code and child("Watch it learn's browser files", ["playground.learn.files", str(learn)]):
            browser.add_learn(learn)

    threading.Thread(target=write, name="browser-files", daemon=True).start()


def prepare_model(source) -> dict[str, Path]:
    """:func:`prepare_onnx` for the model ``python app.py --model DIR`` shows (a
    :class:`playground.model_source.ModelSource`): its ONNX files exported once into
    artifacts/models/ (or a hub folder's own), zipped, and served as the Model tab's downloads;
    the app's :class:`~playground.resources.Resources` then open them."""
    from export.hub import BROWSER_FILES, zip_hub

    from ..model_source import prepare_onnx_files

    if source.kind == "shipped":
        return prepare_onnx()
    print(f"Preparing the ONNX files of {source.folder} ...", file=sys.stderr, flush=True)
    try:
        paths = prepare_onnx_files(source, apart=True)
    except Exception as err:  # noqa: BLE001 -- the export of a user's folder failed: say why, no traceback
        raise SystemExit(f"GPT Playground cannot start on {source.folder}: exporting its ONNX failed ({_why(err)})") from None
    hub = paths["fp32"].parent.parent
    zip_path = (source.out_dir or hub.parent) / f"{source.name.replace('/', '-')}-hub.zip"
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    archive = zip_hub(hub, zip_path)
    browser = zip_hub(hub, zip_path.with_name(zip_path.name.replace("-hub.zip", "-browser.zip")), only=BROWSER_FILES)
    return serve({**{key: Path(path) for key, path in paths.items()}, "zip": archive, "browser_zip": browser})
