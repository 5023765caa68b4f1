"""Attention tab: heatmaps of the model's attention per layer and head (and the mean over
heads), every head of a layer, and the seeds' step-through on the prompt's own scores.
Registers ``/attention``."""

from __future__ import annotations

import gradio as gr

from .. import attention as att
from ..resources import get_model
from .common import FORWARD_CONCURRENCY, HEAVY, LIGHT, user_errors
from .widgets import note, text_with_examples, with_notice


def _stage_md(stage: att.Stage) -> str:
    return f"**{stage.name}** `{stage.code}`\n\n{stage.caption}"


def ui_attention(text, layer, head):
    """The figures for a prompt. The step-through follows in ui_stage, chained after this, so it
    shows the stage selected when the result arrives, even if the radio moved meanwhile."""
    r = att.attention(text, layer, head)
    check = (
        f"Step-through check: these weights match the model's own to {r.weights_max_diff:.1e}; "
        f"the layer's output recomputed from all heads matches to {r.output_max_diff:.1e}."
    )
    info = with_notice(f"{len(r.ids)} tokens. {check}", r.notice, sep=" ")
    return r.head_figure, r.mean_figure, r.heads_figure, r.stages, info


def _stage_index(value, stages) -> int:
    try:
        return min(max(int(value), 0), len(stages) - 1)
    except (TypeError, ValueError):
        return 0


def ui_stage(stages, stage_index):
    if not stages:
        return gr.skip(), gr.skip()
    s = stages[_stage_index(stage_index, stages)]
    return _stage_md(s), s.figure


def api_attention(text: str, layer: int, head: int) -> dict:
    """Attention weights of the model on `text` for `layer` and `head` (both 0-based). Returns
    `tokens`, `ids`, `weights` ([T][T], row t = how much token t attends to each earlier token;
    zeros above the diagonal), `mean_over_heads`, and checks of the step-through against the
    model. Limits: text up to 2,000 characters and 64 tokens; layer and head within the model."""
    return att.attention(text, layer, head).to_dict()


def build() -> None:
    cfg = get_model().config
    note(
        "Each token's query is compared with the keys of the tokens before it; a softmax turns the "
        "scores into weights (each row sums to 1) and the token takes the weighted average of their "
        "values. A decoder hides the future: everything above the diagonal is zero.",
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=320):
            text = text_with_examples(att.EXAMPLE_PROMPTS, label="Text", lines=3, elem_id="att-text")
        with gr.Column(scale=1, min_width=240):
            layer = gr.Slider(0, cfg.n_layer - 1, value=0, step=1, label=f"Layer (0–{cfg.n_layer - 1})", elem_id="att-layer")
            head = gr.Slider(0, cfg.n_head - 1, value=0, step=1, label=f"Head (0–{cfg.n_head - 1})", elem_id="att-head")
            run = gr.Button("Show attention", variant="primary", elem_id="att-run")
    first = ui_attention(att.EXAMPLE_PROMPTS[0], 0, 0)  # the page opens with a result
    first_md, first_fig = ui_stage(first[3], 0)
    info = note(first[4], elem_id="att-info")
    with gr.Row(equal_height=False):
        head_fig = gr.Plot(first[0], label="Chosen head", elem_id="att-head-fig")
        mean_fig = gr.Plot(first[1], label="Mean over heads", elem_id="att-mean-fig")
    heads_fig = gr.Plot(first[2], label="Every head of the layer", elem_id="att-heads-fig")
    gr.Markdown("### Step by step: the seeds' weighted aggregation on this prompt's scores")
    stage_pick = gr.Radio(
        [("1 · scores", 0), ("2 · tril", 1), ("3 · masked fill −inf", 2), ("4 · softmax", 3), ("5 · weights @ values", 4)],
        value=0, label="Stage", elem_id="att-stage",
    )
    stage_md = gr.Markdown(first_md, elem_id="att-stage-md")
    stage_fig = gr.Plot(first_fig, label="Stage", elem_id="att-stage-fig")
    stages = gr.State(first[3])

    show_stage = dict(
        fn=user_errors(ui_stage), inputs=[stages, stage_pick], outputs=[stage_md, stage_fig],
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    gr.on(
        [run.click, text.submit, layer.release, head.release],
        user_errors(ui_attention),
        [text, layer, head],
        [head_fig, mean_fig, heads_fig, stages, info],
        api_visibility="private",
        concurrency_id=HEAVY,
        concurrency_limit=FORWARD_CONCURRENCY,
        trigger_mode="always_last",
    ).success(**show_stage)
    stage_pick.change(**show_stage)
    gr.api(user_errors(api_attention), api_name="attention", concurrency_id=HEAVY, concurrency_limit=FORWARD_CONCURRENCY)
