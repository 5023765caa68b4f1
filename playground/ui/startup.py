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


def warm_up_in_background() -> None:
    """Open the onnxruntime session and run one token while the server starts, so the first
    user's generation does not pay for it (the page is served meanwhile)."""
    import threading

    def warm() -> None:
        try:
            from ..generation.streaming import prepare, run

            for _ in run(prepare("Romeo.\n", 1, 1.0, 1, 1.0, 0)):
                pass
        except Exception as err:  # noqa: BLE001 -- a user request will report it properly
            print(f"engine warm-up failed: {err}", file=sys.stderr, flush=True)

    threading.Thread(target=warm, name="engine-warm-up", daemon=True).start()


def prepare_learn_in_background(browser) -> None:
    """Write Watch it learn's browser files (``python -m playground.learn.files``, in a child process:
    building the step graphs the first time takes minutes and a few hundred MB) while the server
    starts, then serve them (``browser.add_learn``); until then the page's "this browser" waits
    for them and says so. Files already written are served at once and kept where unchanged."""
    import subprocess
    import threading

    from playground.learn.files import app_folder

    folder = app_folder()
    if (folder / "learn" / "learn.json").is_file():
        browser.add_learn(folder)

    def write() -> None:
        root = Path(__file__).resolve().parents[2]
        child = subprocess.run([sys.executable, "-m", "playground.learn.files", str(folder)], cwd=root,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if child.returncode == 0:
            browser.add_learn(folder)
        else:
            print(f"Watch it learn's browser files could not be written: {child.stderr.strip()[-500:]}", file=sys.stderr, flush=True)

    if browser.learn_code:
        threading.Thread(target=write, name="learn-files", daemon=True).start()


def prepare_model(source) -> dict[str, Path]:
    """:func:`prepare_onnx` for the model ``python app.py --model DIR`` shows (a
    :class:`playground.model_source.ModelSource`): its ONNX files exported once into
    artifacts/models/ (or a hub folder's own), zipped, and served as the Model tab's downloads;
    the shared resources then load that model."""
    from export.hub import BROWSER_FILES, zip_hub

    from ..model_source import prepare_onnx_files
    from ..resources import use_model

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
    use_model(source.weights_dir, paths)
    return serve({**{key: Path(path) for key, path in paths.items()}, "zip": archive, "browser_zip": browser})
