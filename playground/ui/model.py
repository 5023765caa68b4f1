"""Model tab: the architecture as a picture with its parameter counts (the view both editions
draw with, web/views/model.js, from playground/model_data.py's object), the training curves, the
downloads (the browser-sized folder first, then the whole Hub folder, then each file, each with
its size), and folded away the ONNX graph and how to run it with each client. Everything is
computed once, when the page is built."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from .. import hub_link, model_info, wire
from ..lessons import LESSONS
from ..model_data import model_data
from ..resources import Resources
from .serving.browser_files import BrowserFiles
from .web_view import web_view
from .widgets import next_tab, note

LESSON = LESSONS["model"]
# The keys of export.build.artifact_paths, as the Model tab names the files.
LABELS = {"fp32": "fp32", "quantized": "8-bit weights (browsers)", "int8": "8-bit integer (native CPU)"}


def served_path(path: Path) -> str:
    """``path`` as the page names it: relative to the working directory, which Gradio resolves
    file routes against, so that the page (and ``/config``) shows no absolute path of the server;
    absolute only for a file outside it (a ``--model`` folder elsewhere)."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def _download(path: Path, what: str, **button) -> gr.DownloadButton:
    size = path.stat().st_size / 1e6
    return gr.DownloadButton(f"⬇ {what} ({size:.0f} MB)", value=served_path(path), **button)


def build(res: Resources, onnx_files: dict[str, Path], training_log: Path | None = None, browser: BrowserFiles | None = None) -> None:
    """The tab for the model of ``res``. ``onnx_files``: {"fp32", "quantized", "int8": path} of the exported files, and optionally "zip"
    (the whole Hub folder as one archive) and "browser_zip" (its browser-sized part:
    ``playground.ui.startup.prepare_onnx``); ``training_log``: the model's training_log.json
    (default: the shipped model's); ``browser``: what serves the view (web/views/model.js). The tab
    reads top to bottom as a learner asks: what the network is, how it learned, how to take it
    home; the engineering (graph, operators, clients) folded."""
    browser = browser if browser is not None else BrowserFiles.for_model(onnx_files)
    model = res.model()
    archive, browser_zip = onnx_files.get("zip"), onnx_files.get("browser_zip")
    files = {LABELS.get(key, key): path for key, path in onnx_files.items() if key not in ("zip", "browser_zip")}

    note(LESSON.intro)
    log_path = training_log or model_info.TRAINING_LOG
    log = model_info.load_training_log(log_path)
    shipped = Path(log_path) == model_info.TRAINING_LOG
    # The network (its picture, the parameters per part) drawn by the view the static edition draws
    # with; the chart and the downloads below are Gradio's own (the view leaves them to the host).
    web_view("model", browser, elem_id="model-view", value=wire.encode(model_data(model, log, [], shipped=shipped)))

    gr.Markdown("### How it learned")
    # The figure's own title names it: Gradio's label over the plot said "Training curves" again.
    gr.Plot(model_info.training_figure(log), label="Training curves", show_label=False, elem_id="model-curves")
    note(model_info.training_note(log, shipped=shipped), elem_id="model-curves-note")

    gr.Markdown("### Take it home")
    if link := hub_link.published_markdown():  # the published model repository, when the setting names one
        gr.Markdown(link, elem_id="model-hub-link")
    with gr.Row(elem_id="model-downloads"):
        if browser_zip is not None:  # what a browser loads (transformers.js, dtype "q8"): first, the smallest
            _download(browser_zip, f"{browser_zip.name}: config, tokenizer, model_quantized.onnx, for a browser",
                      variant="primary", elem_id="model-browser-zip")
        if archive is not None:
            _download(archive, f"{archive.name}: the whole folder, every format", variant="secondary", elem_id="model-zip")
        for label, path in files.items():
            _download(path, f"{path.name}, {label}", variant="secondary")

    with gr.Accordion("The engineering: the ONNX graph, its operators and the clients that run it", open=False,
                      elem_id="model-engineering"):
        summaries = {label: model_info.onnx_summary(path) for label, path in files.items()}
        labels = list(summaries)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=360):
                pick = gr.Radio(labels, value=labels[0], label="File", elem_id="model-file")
                graph = gr.Markdown(model_info.onnx_markdown(summaries[labels[0]]), elem_id="model-graph")
            with gr.Column(scale=1, min_width=360):
                ops = gr.Plot(model_info.operators_figure(summaries[labels[0]]), label="Operator counts", elem_id="model-ops")
        pick.change(
            lambda label: (model_info.onnx_markdown(summaries[label]), model_info.operators_figure(summaries[label]))
            if label in summaries
            else (gr.skip(), gr.skip()),
            inputs=[pick],
            outputs=[graph, ops],
            api_visibility="private",
            queue=False,
        )
        gr.Markdown(
            "### Run it yourself\n"
            "The browser zip holds what transformers.js loads (`dtype: \"q8\"`): `config.json`, the tokenizer "
            "files and `onnx/model_quantized.onnx`. The whole-folder zip holds the Hugging Face Hub folder "
            "(`gpt-playground/`): `config.json`, `tokenizer.json`, "
            "`onnx/model.onnx` (fp32), `onnx/model_quantized.onnx` (8-bit weights computed in float32: a quarter "
            "of the download, the same greedy text in the browser as natively; transformers.js `dtype: \"q8\"`), "
            "`onnx/model_int8.onnx` (8-bit integer products: about twice fp32's speed natively on a CPU; "
            "not for the browser), `model.safetensors` and a model card. Inputs `input_ids`, `attention_mask`, "
            "`position_ids` and an empty key/value cache per layer; outputs the `logits` and the updated cache "
            "(`present.*`): Hugging Face Optimum's decoder interface, so these clients load it as it is."
        )
        for i, (client, (language, code)) in enumerate(model_info.client_snippets().items()):
            gr.Code(code, language="javascript" if language == "js" else language, label=client, interactive=False,
                    elem_id="model-snippet" if i == 0 else None)
    next_tab(LESSON.next_sentence, LESSON.next_tab)
