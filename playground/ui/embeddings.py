"""Embeddings tab: arithmetic on the token embeddings (king - man + woman), cosine similarity of
two words, a PCA projection of a word list with the result marked, and static versus
contextual embeddings. Registers ``/embedding_arithmetic``."""

from __future__ import annotations

from typing import Any

import gradio as gr

from .. import embeddings as emb
from .. import limits
from ..lessons import LESSONS
from ..resources import Resources
from .common import FORWARD, FORWARD_CONCURRENCY, LIGHT, LIGHT_CONCURRENCY, on_input, user_errors
from .widgets import RESULT, SECTION, error_slot, neighbours_table, next_tab, note, text_with_examples, with_notice

LESSON = LESSONS["embeddings"]


def _vector_line(w: emb.WordVector) -> str:
    """The vector itself, as the Transformer tutorial prints it: the lookup, then its first and last numbers."""
    v = w.vector
    shown = ", ".join(f"{x:.3f}" for x in v[:6]) + ", …, " + ", ".join(f"{x:.3f}" for x in v[-2:])
    if w.expression:
        lookup = w.word
    elif len(w.ids) == 1:
        lookup = f"wte.weight[{w.ids[0]}]"
    else:
        lookup = f"wte.weight[[{', '.join(map(str, w.ids))}]].mean(0)"
    return f"`{lookup}` = [{shown}] ({v.size} numbers)"


class Handlers:
    """The tab's handlers on the app's :class:`~playground.resources.Resources` (handed to
    :func:`build`): every number from the model it shows."""

    def __init__(self, res: Resources):
        self.res = res

    def ui_arithmetic(self, expression, top_k, exclude_inputs, leading_space):
        r = emb.embedding_arithmetic(expression, top_k, exclude_inputs, leading_space, model=self.res.model())
        head = f"**{r.formula}** → nearest tokens by cosine similarity"
        return with_notice(head, r.notice), r.rows(), r.figure

    def ui_similarity(self, a, b, leading_space):
        r = emb.word_similarity(a, b, leading_space, model=self.res.model())
        text = (f"cos(**{r.a.word}**, **{r.b.word}**) = **{r.similarity:.4f}**  \n{r.a.describe()}; {r.b.describe()}\n\n"
                f"- {_vector_line(r.a)}\n- {_vector_line(r.b)}")
        return with_notice(text, r.notice)

    def ui_projection(self, words, expression, dims, leading_space):
        r = emb.pca_projection(words, expression, dims, leading_space, model=self.res.model())
        explained = ", ".join(f"PC{i + 1} {100 * v:.1f}%" for i, v in enumerate(r.explained_variance))  # as the chart's title writes it
        drag = " Drag to turn the 3D view; scroll to zoom." if dims == "3D" else ""
        return r.figure, with_notice(f"Variance explained: {explained}.{drag}", r.notice, sep=" ")

    def ui_context(self, word, sentence_a, sentence_b):
        r = emb.contextual_embeddings(word, sentence_a, sentence_b, model=self.res.model())
        a_in, b_in = r.static_vs_contextual
        text = (
            f"**Static** (input embedding, one row of the table): similarity between the two sentences = "
            f"**{r.static_similarity:.3f}**. **Contextual** (last hidden state at the word): "
            f"**{r.contextual_similarity:.3f}**. Input vs hidden state: {a_in:.3f} in A, {b_in:.3f} in B."
        )
        return with_notice(text, r.notice), r.figure

    def api_embedding_arithmetic(self, expression: str, top_k: int) -> dict:
        """Evaluate an expression on the model's token embeddings, e.g. `king - man + woman` or
        `0.5*king + queen` (numbers, + - * /, parentheses; words get GPT-2's leading space; a word of
        several tokens is the mean of their embeddings) and return the `top_k` nearest tokens by
        cosine similarity among the tokens seen in training, input words left out. Limits:
        expression up to 200 characters and 12 words; top_k 1-50."""
        return emb.embedding_arithmetic(expression, top_k, model=self.res.model()).to_dict()


def build(res: Resources) -> dict[str, gr.components.Component]:
    """The tab's components and events (call inside ``gr.Tab``), on the model of ``res``."""
    h = Handlers(res)
    note(LESSON.intro)
    light: dict[str, Any] = dict(concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY)
    first = h.ui_arithmetic(emb.DEFAULT_EXPRESSION, 10, True, True)
    with gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=320):
                expression = text_with_examples(
                    emb.EXAMPLE_EXPRESSIONS, label="Expression", examples_label="Try", elem_id="emb-expr",
                    info="Words, numbers, + − * / and parentheses; Enter computes.",
                )
                error = error_slot("emb-error")
                top_k = gr.Slider(limits.MIN_NEIGHBOURS, limits.MAX_NEIGHBOURS, value=10, step=1, label="Nearest tokens")
                with gr.Row():
                    exclude = gr.Checkbox(value=True, label="Leave out the input words")
                    space = gr.Checkbox(value=True, label="Leading space (' king')")
                run = gr.Button("Compute", variant="primary", elem_id="emb-run")
            with gr.Column(scale=1, min_width=320):
                summary = gr.Markdown(first[0], elem_id="emb-summary", elem_classes=RESULT)
                # Every row shown (up to MAX_NEIGHBOURS): a table that scrolls inside the page hid rows.
                table = neighbours_table(
                    first[1], label="Nearest tokens", elem_id="emb-table", max_rows=limits.MAX_NEIGHBOURS, elem_classes=RESULT
                )
        chart = gr.Plot(first[2], label="Similarities", show_label=False, elem_id="emb-chart", elem_classes=RESULT)
    on_input(
        [run.click, expression.submit, top_k.release], h.ui_arithmetic, [expression, top_k, exclude, space],
        [summary, table, chart], error=error, trigger_mode="always_last", **light,
    )

    with gr.Accordion(LESSON.captions["similarity"], open=True), gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            word_a = gr.Textbox(value="king", label="Word A (or an expression: queen + man - woman)", elem_id="sim-a", min_width=120)
            word_b = gr.Textbox(value="queen", label="Word B", elem_id="sim-b", min_width=120)
            sim_run = gr.Button("Compare", elem_id="sim-run", scale=0, min_width=120)
        sim_error = error_slot("sim-error")
        sim_out = gr.Markdown(h.ui_similarity("king", "queen", True), elem_id="sim-out", elem_classes=RESULT)
    on_input([sim_run.click, word_a.submit, word_b.submit], h.ui_similarity, [word_a, word_b, space], [sim_out], error=sim_error, **light)

    with gr.Accordion(LESSON.captions["projection"], open=True), gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            words = gr.Textbox(value=", ".join(emb.DEFAULT_WORDS), label="Words (comma-separated)", lines=2, scale=3, elem_id="pca-words")
            pca_expr = gr.Textbox(value=emb.DEFAULT_EXPRESSION, label="Mark this expression's result", scale=2, elem_id="pca-expr")
            dims = gr.Radio(["2D", "3D"], value="2D", label="Projection", scale=1, min_width=120, elem_id="pca-dims")
        pca_error = error_slot("pca-error")
        pca_run = gr.Button("Project", elem_id="pca-run")
        first_pca = h.ui_projection(", ".join(emb.DEFAULT_WORDS), emb.DEFAULT_EXPRESSION, "2D", True)
        pca_note = note(first_pca[1], result=True)
        pca_plot = gr.Plot(first_pca[0], label="PCA", show_label=False, elem_id="pca-plot", elem_classes=RESULT)
    on_input(
        [pca_run.click, dims.change, words.submit, pca_expr.submit], h.ui_projection, [words, pca_expr, dims, space],
        [pca_plot, pca_note], error=pca_error, **light,
    )

    with gr.Accordion(LESSON.captions["context"], open=True), gr.Column(elem_classes=SECTION):
        note(LESSON.notes["context"])
        word, sent_a, sent_b = emb.CONTEXT_EXAMPLE
        with gr.Row(equal_height=False):
            ctx_word = gr.Textbox(value=word, label="Word", scale=1, elem_id="ctx-word", min_width=100)
            ctx_a = gr.Textbox(value=sent_a, label="Sentence A", scale=2, elem_id="ctx-a")
            ctx_b = gr.Textbox(value=sent_b, label="Sentence B", scale=2, elem_id="ctx-b")
        ctx_error = error_slot("ctx-error")
        ctx_run = gr.Button("Compare in context", elem_id="ctx-run")
        first_ctx = h.ui_context(word, sent_a, sent_b)
        ctx_out = gr.Markdown(first_ctx[0], elem_id="ctx-out", elem_classes=RESULT)
        ctx_plot = gr.Plot(first_ctx[1], label="Cosine similarities", show_label=False, elem_id="ctx-plot", elem_classes=RESULT)
    on_input(
        [ctx_run.click, ctx_word.submit, ctx_a.submit, ctx_b.submit], h.ui_context, [ctx_word, ctx_a, ctx_b],
        [ctx_out, ctx_plot], error=ctx_error, concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY,
    )
    next_tab(LESSON.next_sentence, LESSON.next_tab)

    gr.api(user_errors(h.api_embedding_arithmetic), api_name="embedding_arithmetic", concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY)
    return {"text": expression, "top_k": top_k, "exclude_inputs": exclude, "leading_space": space}  # its controls, by the names of a link's parameters (playground/links.py)
