"""Attention tab: a BertViz-style line view (click a token, see what it attends to) beside the
chosen head's heatmap, the mean over heads, every head of a layer, and the lessons' step-through
from the chosen head's queries and keys. The page opens on the example's clearest head. Registers ``/attention``."""

from __future__ import annotations

import gradio as gr

from .. import attention as att
from ..lessons import LESSONS
from ..resources import Resources
from .common import FORWARD, FORWARD_CONCURRENCY, LIGHT, on_input, on_tab_open, user_errors
from .serving.sessions import ResultStore
from .widgets import RESULT, SECTION, error_slot, layer_head_sliders, next_tab, note, text_with_examples, with_notice

LESSON = LESSONS["attention"]


def _stage_md(stage: att.Stage) -> str:
    return f"**{stage.name}** `{stage.code}`\n\n{stage.caption}"


class Handlers:
    """The tab's handlers on the model of the app's :class:`~playground.resources.Resources`."""

    def __init__(self, res: Resources):
        self.res = res

    def ui_attention(self, text, layer, head):
        """The figures for a prompt. The step-through follows in ui_stage, chained after this, so it
        shows the stage selected when the result arrives, even if the radio moved meanwhile."""
        r = att.attention(text, layer, head, model=self.res.model())
        return r.lines_html, r.head_figure, r.mean_figure, r.heads_figure, r.stages, _info(r)

    def api_attention(self, text: str, layer: int, head: int) -> dict:
        """Attention weights of the model on `text` for `layer` and `head` (both 0-based). Returns
        `tokens`, `ids`, `weights` ([T][T], row t = how much token t attends to each earlier token;
        zeros above the diagonal), `mean_over_heads`, and checks of the step-through against the
        model. Limits: text up to 2,000 characters and 64 tokens; layer and head within the model."""
        return att.attention(text, layer, head, model=self.res.model()).to_dict()


def _info(r: att.AttentionResult, opened_on: att.SalientHead | None = None) -> str:
    """The token count and what the chosen head does on the text, named and measured (and, on the
    page's opening, that it is the clearest head), then the checks folded away."""
    why = ""
    if len(r.ids) > 1:
        h = opened_on or att.describe_head(r.weights, r.ids, r.layer, r.head)
        where = (f"The page opened on layer {h.layer}, head {h.head}, the clearest head on this text"
                 if opened_on is not None else f"Layer {h.layer}, head {h.head}")
        why = f" {where}: {att.head_sentence(h)}"
    check = (
        "<details class=\"pg-how\"><summary>How we know these are the model's weights</summary>\n\n"
        f"The step-through below recomputes this head from the block's own W_Q, W_K and W_V: its weights match the "
        f"model's own (`output_attentions`) to {r.weights_max_diff:.1e}, and the layer's output recomputed from all "
        f"heads and W_O matches the model's to {r.output_max_diff:.1e}.\n\n</details>"
    )
    return with_notice(f"{len(r.ids)} tokens.{why}", r.notice, sep=" ") + "\n\n" + check


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


# The tokens' boxes are drawn inside their edges: the list scrolls, and a scrolling box clips what
# overflows it, so an outline drawn outside lost its left side (a query, flush with the list's left
# edge) and the first and last tokens' top and bottom. The chosen rule last: a hovered chosen token
# keeps its 2 px box inside. (Scoped to this component by Gradio.)
LINE_VIEW_CSS = """
& .att-tok:hover { outline-offset: -1px; }
& .att-tok.chosen { outline-offset: -2px; }
"""

# Draws the line view from the data attribute att.line_view_html writes (again whenever a new
# result arrives): queries on the left, keys on the right, one line per (head, query, key) pair
# of the selection, its opacity and width the weight, as BertViz's head view.
LINE_VIEW_JS = """
const PITCH = 24;
const SVG = 'http://www.w3.org/2000/svg';
function draw() {
  const root = element.querySelector('.att-lines');
  if (!root || root.dataset.drawn) return;
  root.dataset.drawn = '1';
  const d = JSON.parse(root.dataset.att);
  const T = d.tokens.length;
  const heads = new Set([d.head]);
  let sel = {side: 'q', i: T - 1};
  const chips = document.createElement('div');
  chips.className = 'att-heads';
  d.colours.forEach((c, h) => {
    const b = document.createElement('button');
    b.type = 'button'; b.textContent = 'head ' + h; b.dataset.h = h; b.style.setProperty('--c', c);
    chips.append(b);
  });
  const grid = document.createElement('div');
  grid.className = 'att-grid';
  const column = (cls, side) => {
    const col = document.createElement('div');
    col.className = 'att-col ' + cls;
    d.tokens.forEach((tok, i) => {
      const t = document.createElement('div');
      t.className = 'att-tok'; t.dataset.side = side; t.dataset.i = i; t.style.height = PITCH + 'px';
      const label = document.createElement('span'); label.className = 'att-label'; label.textContent = tok;
      const w = document.createElement('span'); w.className = 'att-w';
      if (side === 'q') t.append(w, label); else t.append(label, w);
      col.append(t);
    });
    return col;
  };
  const left = column('att-q', 'q'), right = column('att-k', 'k');
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'att-svg');
  svg.setAttribute('viewBox', `0 0 100 ${T * PITCH}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.style.height = T * PITCH + 'px';
  grid.append(left, svg, right);
  const scroller = document.createElement('div');
  scroller.className = 'att-scroll';
  scroller.append(grid);
  root.append(chips, scroller);
  const weight = (h, q, k) => (k <= q ? d.weights[h][q][k] : 0);
  const y = (i) => i * PITCH + PITCH / 2;
  function render() {
    chips.querySelectorAll('button').forEach((b) => b.classList.toggle('on', heads.has(Number(b.dataset.h))));
    svg.replaceChildren();
    const pairs = [];
    for (const h of heads) {
      if (sel.side === 'q') for (let k = 0; k <= sel.i; k++) pairs.push([h, sel.i, k]);
      else for (let q = sel.i; q < T; q++) pairs.push([h, q, sel.i]);
    }
    const strength = new Array(T).fill(0);
    for (const [h, q, k] of pairs) {
      const w = weight(h, q, k);
      const other = sel.side === 'q' ? k : q;
      strength[other] = Math.max(strength[other], w);
      if (w < 0.005) continue;
      const line = document.createElementNS(SVG, 'line');
      line.setAttribute('x1', 0); line.setAttribute('y1', y(q));
      line.setAttribute('x2', 100); line.setAttribute('y2', y(k));
      line.setAttribute('stroke', d.colours[h]);
      line.setAttribute('stroke-opacity', Math.min(1, 0.15 + w));
      line.setAttribute('stroke-width', 1 + 5 * w);
      line.setAttribute('vector-effect', 'non-scaling-stroke');
      svg.append(line);
    }
    const one = heads.size === 1;
    for (const [col, side] of [[left, 'q'], [right, 'k']]) {
      col.querySelectorAll('.att-tok').forEach((t) => {
        const i = Number(t.dataset.i);
        const chosen = side === sel.side && i === sel.i;
        const shown = side !== sel.side;
        t.classList.toggle('chosen', chosen);
        t.style.background = shown && strength[i] > 0 ? `rgba(79, 70, 229, ${0.08 + 0.6 * strength[i]})` : '';
        t.querySelector('.att-w').textContent = shown && one && (side === 'k' ? i <= sel.i : i >= sel.i)
          ? Math.round(100 * strength[i]) + '%' : '';
      });
    }
  }
  // The selected token stays in view: the list scrolls (itself, not the page) to centre it.
  const reveal = () => {
    const top = y(sel.i) - scroller.clientHeight / 2;
    scroller.scrollTop = Math.max(0, Math.min(top, scroller.scrollHeight - scroller.clientHeight));
  };
  grid.addEventListener('click', (e) => {
    const t = e.target.closest('.att-tok');
    if (!t) return;
    sel = {side: t.dataset.side, i: Number(t.dataset.i)};
    render();
    reveal();
  });
  chips.addEventListener('click', (e) => {
    const b = e.target.closest('button');
    if (!b) return;
    const h = Number(b.dataset.h);
    if (heads.has(h) && heads.size > 1) heads.delete(h); else heads.add(h);
    render();
  });
  render();
  // Drawn while its tab may be hidden (no height yet): centre the token once the list has a size.
  new ResizeObserver(reveal).observe(scroller);
}
draw();
watch('value', draw);
"""


def build(res: Resources, tab: gr.Tab) -> dict[str, gr.components.Component]:
    """The tab's content on the model of ``res``; its figures are drawn when ``tab`` is first
    opened (out of the first page load)."""
    h, model = Handlers(res), res.model()
    cfg = model.config
    results = ResultStore()  # the step-through stages the stage picker reads back (~1 MB a text), the most recent 32
    note(LESSON.intro)
    # The page opens on the example's clearest head, found from the model's weights (layer 0,
    # head 0 is nearly uniform: a pale square that taught nothing; heads that look at the first
    # token are left out).
    example = att.attention(att.EXAMPLE_PROMPTS[0], 0, 0, model=model, step_through=False)
    opening = att.salient_head(example.weights, example.ids)
    r = att.attention(att.EXAMPLE_PROMPTS[0], opening.layer, opening.head, model=model)
    first = (r.lines_html, r.head_figure, r.mean_figure, r.heads_figure, r.stages, _info(r, opening))
    first_md, first_fig = ui_stage(first[4], 0)
    with gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=320):
                text = text_with_examples(att.EXAMPLE_PROMPTS, label="Text", lines=3, elem_id="att-text")
                error = error_slot("att-error")
            with gr.Column(scale=1, min_width=240):
                layer, head = layer_head_sliders(cfg.n_layer, cfg.n_head, prefix="att", layer=opening.layer, head=opening.head)
                run = gr.Button("Show attention", variant="primary", elem_id="att-run")
        info = note(elem_id="att-info", result=True)
        plot = dict(show_label=False, elem_classes=RESULT)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                lines = gr.HTML(elem_id="att-lines", js_on_load=LINE_VIEW_JS, css_template=LINE_VIEW_CSS, elem_classes=RESULT)
            with gr.Column(scale=1, min_width=300):
                head_fig = gr.Plot(label="Chosen head", elem_id="att-head-fig", **plot)
                mean_fig = gr.Plot(label="Mean over heads", elem_id="att-mean-fig", **plot)
        heads_fig = gr.Plot(label="Every head of the layer", elem_id="att-heads-fig", **plot)
    gr.Markdown(f"### {LESSON.captions['steps']}")
    stage_pick = gr.Radio(
        [("1 · q = x W_Q", 0), ("2 · k = x W_K", 1), ("3 · q·kᵀ / √d", 2), ("4 · tril", 3), ("5 · masked fill −inf", 4),
         ("6 · softmax", 5), ("7 · weights @ values", 6)],
        value=0, label="Stage", elem_id="att-stage",
    )
    stage_md = gr.Markdown(elem_id="att-stage-md")
    stage_fig = gr.Plot(label="Stage", show_label=False, elem_id="att-stage-fig")
    stages = results.state(first[4])  # the example's, pinned: every new session starts from them
    on_tab_open(tab, lambda: (first[5], first[0], first[1], first[2], first[3], first_md, first_fig),
                [info, lines, head_fig, mean_fig, heads_fig, stage_md, stage_fig], concurrency_id=LIGHT)
    next_tab(LESSON.next_sentence, LESSON.next_tab)

    show_stage = dict(
        results.through(
            user_errors(ui_stage), inputs=[stages, stage_pick], outputs=[stage_md, stage_fig], state=stages, read="stages",
        )._asdict(),
        api_visibility="private", concurrency_id=LIGHT, show_progress="hidden",
    )
    # A slider recomputes when let go, or when a number typed in its box is confirmed with Enter
    # (common.JS turns that Enter into the same "release").
    on_input(
        [run.click, text.submit, layer.release, head.release],
        *results.through(
            h.ui_attention, inputs=[text, layer, head, stages], outputs=[lines, head_fig, mean_fig, heads_fig, stages, info],
            state=stages,
        ),
        error=error,
        concurrency_id=FORWARD,
        concurrency_limit=FORWARD_CONCURRENCY,
        trigger_mode="always_last",
    ).then(**show_stage)
    stage_pick.change(**show_stage)
    gr.api(user_errors(h.api_attention), api_name="attention", concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY)
    return {"text": text, "layer": layer, "head": head}  # its controls, by the names of a link's parameters (playground/links.py)
