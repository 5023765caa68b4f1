"""Model tab: architecture and parameter counts, training curves, the ONNX graph, downloads and
how to run the file with plain onnxruntime. Everything is computed once, when the page is built."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from .. import model_info
from ..resources import get_model


def build(onnx_files: dict[str, Path]) -> None:
    """``onnx_files``: label -> path of the exported files (fp32 first)."""
    model = get_model()
    gr.Markdown(model_info.architecture_markdown(model))
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=360):
            gr.Dataframe(
                value=model_info.architecture_rows(model),
                headers=["part", "parameters", "share"],
                label="Parameters per part",
                interactive=False,
                wrap=True,
                column_widths=["62%", "23%", "15%"],
                elem_id="model-params",
            )
        with gr.Column(scale=1, min_width=360):
            gr.Plot(model_info.training_figure(model_info.load_training_log()), label="Training curves", elem_id="model-curves")

    gr.Markdown("### The ONNX graph the app runs")
    summaries = {label: model_info.onnx_summary(path) for label, path in onnx_files.items()}
    labels = list(summaries)
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=360):
            pick = gr.Radio(labels, value=labels[0], label="File", elem_id="model-file")
            graph = gr.Markdown(model_info.onnx_markdown(summaries[labels[0]]), elem_id="model-graph")
            with gr.Row():
                for label, path in onnx_files.items():
                    size = path.stat().st_size / 1e6
                    gr.DownloadButton(f"⬇ {path.name} ({size:.0f} MB)", value=str(path), variant="secondary")
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
        "### Run it yourself with plain onnxruntime\n"
        "Download `gpt.onnx` (or `gpt.int8.onnx`, its matrix multiplications quantized to int8) and run this, with "
        "`pip install onnxruntime numpy tiktoken`. Inputs: `input_ids` and one empty key/value "
        "cache per layer; outputs: the `logits` and the updated cache (`present.*`)."
    )
    gr.Code(model_info.onnxruntime_snippet(), language="python", label="greedy decoding, 40 tokens", interactive=False, elem_id="model-snippet")
