"""Compare tab: the model shown beside a second one (``--compare DIR``, or by default its own
untrained initialisation): next-token candidates, nearest neighbours, attention, side by side,
drawn by the view the static edition draws with (web/views/compare.js) from
playground/compare_data.py's objects. Registers ``/compare``."""

from __future__ import annotations

import gradio as gr

from .. import compare as cmp
from .. import wire
from ..compare_data import attention_data, neighbours_data, next_data
from ..lessons import LESSONS
from .common import FORWARD, FORWARD_CONCURRENCY, user_errors
from .serving.browser_files import BrowserFiles
from .serving.zerogpu import COMPARE_GPU_S, on_gpu
from .web_view import web_view
from .widgets import layer_head_sliders, next_tab, note

LESSON = LESSONS["compare"]
PROMPT, WORD, SENTENCE = cmp.EXAMPLE_PROMPT, cmp.EXAMPLE_WORD, cmp.EXAMPLE_SENTENCE
gpu = on_gpu(COMPARE_GPU_S)  # each comparison a @spaces.GPU call on ZeroGPU, the handler itself elsewhere


class Handlers:
    """The tab's handlers on one :class:`~playground.compare.Comparison` (the app's, handed to
    :func:`build`): each comparison as the view's data, and the ``/compare`` answer."""

    def __init__(self, comparison: cmp.Comparison):
        self.comparison = comparison

    def ui_compare_next_token(self, prompt):
        return wire.encode(next_data(prompt, cmp.compare_next_token(prompt, comparison=self.comparison),
                                     self.comparison.vocab_size()))

    def ui_compare_neighbours(self, word):
        return wire.encode(neighbours_data(word, cmp.compare_neighbours(word, comparison=self.comparison)))

    def ui_compare_attention(self, sentence, layer, head):
        return wire.encode(attention_data(sentence, cmp.compare_attention(sentence, layer, head, self.comparison)))

    def api_compare(self, prompt: str, word: str, sentence: str) -> dict:
        """The model shown beside the compared one (`--compare DIR`, or its untrained initialisation):
        for each, `candidates` (top next tokens after `prompt`), `prompt_loss` and `entropy` (nats),
        `neighbours` (nearest tokens of `word` by cosine), the attention of layer 0, head 0 on
        `sentence` and its mean row entropy; `uniform_loss` is ln(vocabulary size)."""
        return cmp.compare_all(prompt, word, sentence, self.comparison)


def build(browser: BrowserFiles | None = None, comparison: cmp.Comparison | None = None) -> dict[str, gr.components.Component]:
    """The tab: each comparison's inputs, then the view both editions draw with (web/views/compare.js,
    mounted once per comparison, ``browser`` serving it), from the numbers PyTorch computes here
    for ``comparison`` (default: the model shown beside its untrained initialisation)."""
    browser = browser if browser is not None else BrowserFiles.for_model({})
    h = Handlers(comparison or cmp.Comparison())
    (shown, _), (other, other_model) = h.comparison.sides()
    cfg, other_cfg = h.comparison.shown().config, other_model.config
    note(LESSON.intro)
    if (shown, other) != (cmp.TRAINED, cmp.UNTRAINED):  # --model or --compare DIR: say which two these are
        note(f"Here: **{shown}** (left) beside **{other}** (right).")
    events = dict(api_visibility="private", concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY, trigger_mode="always_last")

    def view(section: str, elem_id: str, value: dict) -> gr.HTML:
        return web_view("compare", browser, elem_id=elem_id, value=value, config={"section": section})

    gr.Markdown("### The same prompt: which token comes next?")
    with gr.Row(equal_height=False):
        prompt = gr.Textbox(PROMPT, label="Prompt", lines=2, scale=3, elem_id="cmp-prompt")
        run_next = gr.Button("Compare next tokens", variant="primary", scale=1, elem_id="cmp-next-run")
    next_view = view("next", "cmp-next-view", h.ui_compare_next_token(PROMPT))
    gr.on([run_next.click, prompt.submit], user_errors(gpu(h.ui_compare_next_token)), [prompt], [next_view], **events)

    gr.Markdown("### The same word: its nearest tokens in the embedding table")
    with gr.Row(equal_height=False):
        word = gr.Textbox(WORD, label="Word (or an expression such as king - man + woman)", scale=3, elem_id="cmp-word")
        run_nb = gr.Button("Compare neighbours", variant="primary", scale=1, elem_id="cmp-nb-run")
    nb_view = view("neighbours", "cmp-nb-view", h.ui_compare_neighbours(WORD))
    gr.on([run_nb.click, word.submit], user_errors(gpu(h.ui_compare_neighbours)), [word], [nb_view], **events)

    gr.Markdown("### The same sentence: what each token attends to")
    n_layer, n_head = max(cfg.n_layer, other_cfg.n_layer), max(cfg.n_head, other_cfg.n_head)
    # It opens on the shown model's clearest head on the sentence: a trained model's layer 0, head 0
    # is a blur much like the untrained one's, which hides the lesson.
    opening = cmp.opening_head(SENTENCE, h.comparison)
    with gr.Row(equal_height=False):
        sentence = gr.Textbox(SENTENCE, label="Sentence", scale=3, elem_id="cmp-sentence")
        layer, head = layer_head_sliders(n_layer, n_head, prefix="cmp", layer=opening.layer, head=opening.head, scale=1)
        run_att = gr.Button("Compare attention", variant="primary", scale=1, elem_id="cmp-att-run")
    att_view = view("attention", "cmp-att-view", h.ui_compare_attention(SENTENCE, opening.layer, opening.head))
    gr.on(
        [run_att.click, sentence.submit, layer.release, head.release],
        user_errors(gpu(h.ui_compare_attention)), [sentence, layer, head], [att_view], **events,
    )
    next_tab(LESSON.next_sentence, LESSON.next_tab)
    gr.api(user_errors(gpu(h.api_compare)), api_name="compare", concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY)
    return {"text": prompt, "word": word, "sentence": sentence, "layer": layer, "head": head}  # its controls, by the names of a link's parameters (playground/links.py)
