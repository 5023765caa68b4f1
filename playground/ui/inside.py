"""Inside the model tab: one forward pass of the model shown on the learner's text, stage by
stage, with the real numbers; a map of the data flow at the top, the overview of the pass with each
stage's numbers, from which each stage opens; a layer, head and token control. Registers ``/inside``.

A new text computes the pass (kept in ``playground.inside``'s small cache) and opens on the token
whose prediction forms most visibly through the layers; the layer, head and token controls only
redraw the panels from it."""

from __future__ import annotations

import gradio as gr

from .. import inside as ins
from .. import inside_view as view
from ..lessons import LESSONS
from ..resources import get_model
from ..validation import validate_int
from .serving.zerogpu import INSIDE_GPU_S, on_gpu
from .common import FORWARD, FORWARD_CONCURRENCY, LIGHT, on_input, on_tab_open, static_text, user_errors
from .widgets import RESULT, SECTION, error_slot, layer_head_sliders, next_tab, note, text_with_examples

LESSON = LESSONS["inside"]
CSS = static_text("inside.css")  # the classes inside_view writes
gpu = on_gpu(INSIDE_GPU_S)  # a pass is a @spaces.GPU call on ZeroGPU, the handler itself elsewhere


# What each output shows depends on: a control change redraws only the outputs it changes.
OUTPUTS = ("map", "info", "embedding", "layernorm", "attention", "residual", "ffn", "lens", "output")
DEPENDS = {
    "layer": {"map", "info", "layernorm", "attention", "residual", "ffn", "lens"},
    "head": {"map", "info", "attention"},
    "token": set(OUTPUTS),  # the map's boxes carry the token's numbers
}


def _render(r: ins.InsideResult, only: set[str] | None = None) -> tuple:
    """The outputs of :func:`build` in the order of ``OUTPUTS``; those not in ``only`` (when
    given) are left as they are."""
    draw = {
        "map": lambda: view.map_html(r),
        "info": lambda: view.info_markdown(r),
        **{anchor: (lambda anchor=anchor: view.PANELS[anchor](r)) for anchor, _, _ in view.STAGES},
    }
    return tuple(draw[name]() if only is None or name in only else gr.skip() for name in OUTPUTS)


def _opened(text, layer, head) -> ins.InsideResult:
    """A new text's pass at the token the tab opens on (:func:`playground.inside.opening_token`)."""
    r = ins.inside(text, layer, head)
    return ins.InsideResult(r.fp, r.layer, r.head, ins.opening_token(r.fp))


def ui_run(text, layer, head):
    """A new text: the pass, shown at the token whose prediction forms most visibly; the token
    control spans its tokens; the text is kept as the one shown (the other controls redraw it,
    whatever the box holds meanwhile)."""
    r = _opened(text, layer, head)
    last = len(r.fp.ids) - 1
    return (text, gr.Slider(minimum=0, maximum=max(last, 1), value=r.token, step=1, label=f"Token (0–{last})"), *_render(r))


def _view(changed: str):
    def handler(shown, layer, head, token):
        """Another layer, head or token on the text shown: its kept pass, the outputs that change
        redrawn. A token past the text's end shows the last one."""
        r = ins.inside(shown, layer, head)
        position = min(validate_int(token, name="token", minimum=0, maximum=10**6), len(r.fp.ids) - 1)
        return _render(ins.InsideResult(r.fp, r.layer, r.head, position), DEPENDS[changed])

    handler.__name__ = f"ui_{changed}"
    return handler


ui_layer, ui_head, ui_token = _view("layer"), _view("head"), _view("token")


def api_inside(text: str, layer: int, head: int) -> dict:
    """One forward pass of the model on `text`, stage by stage, shown for `layer` and `head`
    (0-based) at the last token. Returns `tokens`, `ids`, `token_losses` (nats, one per predicted
    token: len(tokens) - 1 values), `loss` (their mean), `uniform_loss` (ln V), `logit_lens` (per
    layer, the top-5 next tokens at the last position; the last layer's is the model's own),
    `logit_lens_probabilities`, and the chosen layer's stages: `embedding`, `layer_norm`,
    `attention`, `residual`, `ffn`, `candidates`, with `hidden_max_diff` (the check against the
    model's own forward pass). Limits: text up to 2,000 characters and 64 tokens."""
    return ins.inside(text, layer, head).to_dict()


# The map is the overview: a box (a click, or Enter on it) opens its stage alone and scrolls to it,
# the page keeping its address (no #hash navigation); a stage's heading folds or opens it; the
# map's layer and head chips set their sliders. Which stages are open is kept on the panels' column
# (#ins-stages, never redrawn): Gradio redraws a panel by patching its attributes to the server's
# HTML, which would close it again, so the CSS reads the column's data-open and an observer puts
# the headings' aria-expanded back. A click on a token of the loss text, or on a row of the
# attention matrix, chooses that token. A strip or the matrix is one image: the value under the
# pointer is read from its data attribute into one tooltip, so the page holds no element per number.
GOTO_JS = """
function setControl(id, value) {
  // The number goes into the slider's box; its "input" event is the one the page listens to (as
  // a drag or an arrow key on the slider).
  const box = document.querySelector('#' + id + ' input[type=number]');
  if (!box) return;
  box.value = String(value);
  box.dispatchEvent(new Event('input', {bubbles: true}));
}
const stagesBox = () => document.getElementById('ins-stages');
function openStages() {
  const box = stagesBox();
  if (box && box.hasAttribute('data-open')) return new Set(box.dataset.open.split(' ').filter(Boolean));
  return new Set([...document.querySelectorAll('#ins-stages .ins-open-first')].map((s) => s.dataset.stage));
}
function syncStages() {
  const open = openStages();
  document.querySelectorAll('#ins-stages .ins-toggle').forEach((b) => {
    const v = String(open.has(b.dataset.stage));
    if (b.getAttribute('aria-expanded') !== v) b.setAttribute('aria-expanded', v);
  });
  element.querySelectorAll('.ins-box[data-goto]').forEach((b) => {
    b.classList.toggle('ins-current', open.has(b.dataset.goto.slice('ins-s-'.length)));
  });
}
let observed = null;
function watchStages() {
  const box = stagesBox();
  if (!box || observed === box) return;
  observed = box;
  new MutationObserver(syncStages).observe(box, {subtree: true, childList: true, attributes: true, attributeFilter: ['aria-expanded']});
}
function setStages(open) {
  const box = stagesBox();
  if (!box) return;
  watchStages();
  box.dataset.open = [...open].join(' ');
  syncStages();
}
document.addEventListener('click', (e) => {
  const chip = e.target.closest('#ins-map .ins-chip');
  if (chip) { setControl(chip.dataset.layer !== undefined ? 'ins-layer' : 'ins-head', chip.dataset.layer ?? chip.dataset.head); return; }
  const tok = e.target.closest('.ins-lt[data-t]');
  if (tok) { setControl('ins-token', tok.dataset.t); return; }
  const m = e.target.closest('.ins-matrix[data-n]');
  if (m) { const c = matrixCell(m, e); if (c) setControl('ins-token', c.row); return; }
  const toggle = e.target.closest('#ins-stages .ins-toggle');
  if (toggle) {
    const open = openStages();
    if (open.has(toggle.dataset.stage)) open.delete(toggle.dataset.stage); else open.add(toggle.dataset.stage);
    setStages(open);
    return;
  }
  const link = e.target.closest('[data-goto]');
  if (!link || !link.closest('#ins-map, .ins-panel')) return;
  e.preventDefault();
  const goto = link.dataset.goto;
  if (goto.startsWith('ins-s-')) setStages(new Set([goto.slice('ins-s-'.length)]));
  const target = document.getElementById(goto);
  if (target) target.scrollIntoView({behavior: 'smooth', block: 'start'});
});
function matrixCell(m, e) {
  const img = m.querySelector('img');
  const r = img.getBoundingClientRect();
  const n = Number(m.dataset.n);
  const col = Math.floor((e.clientX - r.left) / r.width * n), row = Math.floor((e.clientY - r.top) / r.height * n);
  if (row < 0 || col < 0 || row >= n || col >= n) return null;
  return {row, col, n};
}
let tip = document.getElementById('ins-tip');
if (!tip) {
  tip = document.createElement('div');
  tip.id = 'ins-tip';
  tip.setAttribute('role', 'tooltip');
  document.body.appendChild(tip);
}
// Parsed once per drawn state: Gradio's HTML updates its elements in place (the same element, new
// attributes), so an entry is keyed by the element and checked against the attribute it was read from.
const parsed = new WeakMap();
function read(el, key, parse) {
  const raw = el.dataset[key];
  let entry = parsed.get(el);
  if (!entry || entry.key !== key || entry.raw !== raw) {
    entry = {key, raw, value: parse(raw)};
    parsed.set(el, entry);
  }
  return entry.value;
}
const numbers = (raw) => raw.split(',').map(Number);
function describe(e) {
  const s = e.target.closest('.ins-cells[data-v]');
  if (s) {
    const img = s.querySelector('img');
    const r = img.getBoundingClientRect();
    const v = read(s, 'v', numbers);
    const i = Math.floor((e.clientX - r.left) / r.width * v.length);
    if (i < 0 || i >= v.length || e.clientY < r.top || e.clientY > r.bottom) return null;
    const groups = Number(s.dataset.groups || 1), size = v.length / groups;
    const where = groups > 1 ? ` (head ${Math.floor(i / size)}, ${i % size})` : '';
    return `${s.dataset.name}: index ${i}${where} = ${v[i].toFixed(4)}`;
  }
  const m = e.target.closest('.ins-matrix[data-n]');
  if (m) {
    const c = matrixCell(m, e);
    if (!c) return null;
    const tokens = JSON.parse(m.dataset.tokens);
    const pair = `query ${c.row} ${JSON.stringify(tokens[c.row])} → key ${c.col} ${JSON.stringify(tokens[c.col])}`;
    if (c.col > c.row) return `${pair}: masked (a later key), weight 0`;
    return `${pair}: weight ${read(m, 'w', numbers)[c.row * (c.row + 1) / 2 + c.col].toFixed(3)}`;
  }
  return null;
}
function showTip(e) {
  const text = describe(e);
  if (!text) { tip.style.display = 'none'; return; }
  tip.textContent = text;
  tip.style.display = 'block';
  const x = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4);
  tip.style.left = Math.max(4, x) + 'px';
  tip.style.top = (e.clientY + 16) + 'px';
}
document.addEventListener('pointermove', showTip, {passive: true});
document.addEventListener('pointerdown', showTip, {passive: true});
window.addEventListener('scroll', () => { tip.style.display = 'none'; }, {passive: true});
watchStages();
syncStages();
watch('value', () => { watchStages(); syncStages(); });
"""


def build(tab: gr.Tab) -> dict[str, gr.components.Component]:
    """The tab's content; the example's pass is drawn when ``tab`` is first opened (out of the first page load)."""
    cfg = get_model().config
    note(LESSON.intro)
    note(
        f"The model: {cfg.n_layer} layers, {cfg.n_head} heads of {cfg.head_dim}, d_model {cfg.d_model}. Each box of the map "
        "gives its stage's numbers and opens it; the map's chips or the sliders choose the layer and head, the slider or a "
        "click on a token the token."
    )
    r = _opened(ins.EXAMPLE_TEXTS[0], 0, 0)
    first, last = _render(r), len(r.fp.ids) - 1
    html = dict(js_on_load=None, elem_classes=RESULT, padding=False)
    map_box = gr.HTML(elem_id="ins-map", js_on_load=GOTO_JS, elem_classes=RESULT, padding=False)
    with gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=300):
                text = text_with_examples(ins.EXAMPLE_TEXTS, label="Text", lines=3, elem_id="ins-text")
                error = error_slot("ins-error")
            with gr.Column(scale=1, min_width=240):
                layer, head = layer_head_sliders(cfg.n_layer, cfg.n_head, prefix="ins")
                token = gr.Slider(0, max(last, 1), value=r.token, step=1, label=f"Token (0–{last})", elem_id="ins-token")
                run = gr.Button("Run the forward pass", variant="primary", elem_id="ins-run")
        info = note(elem_id="ins-info", result=True)
        with gr.Column(elem_id="ins-stages"):  # holds which stages are open (GOTO_JS): never redrawn itself
            emb = gr.HTML(elem_id="ins-embedding", **html)
            ln = gr.HTML(elem_id="ins-layernorm", **html)
            att = gr.HTML(elem_id="ins-attention", **html)
            res = gr.HTML(elem_id="ins-residual", **html)
            ffn = gr.HTML(elem_id="ins-ffn", **html)
            lens = gr.HTML(elem_id="ins-lens", **html)
            out = gr.HTML(elem_id="ins-output", **html)
    next_tab(LESSON.next_sentence, LESSON.next_tab)

    shown = gr.State(ins.EXAMPLE_TEXTS[0])  # the text whose pass the page shows
    outputs = [map_box, info, emb, ln, att, res, ffn, lens, out]
    on_tab_open(tab, lambda: first, outputs, concurrency_id=LIGHT)
    events = dict(error=error, concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY, trigger_mode="always_last")
    on_input([run.click, text.submit], gpu(ui_run), [text, layer, head], [shown, token, *outputs], **events)
    # A slider redraws on every user input: a drag (each step, the last one kept), a click on the
    # track, the arrow keys (which send no "release" in Gradio 6), a number typed in its box.
    # Not "change": that also fires when ui_run sets the token slider, redrawing twice.
    for control, handler in ((layer, gpu(ui_layer)), (head, gpu(ui_head)), (token, gpu(ui_token))):
        # (a small progress mark, not an overlay on every panel for a redraw of a tenth of a second)
        on_input([control.input], handler, [shown, layer, head, token], outputs, show_progress="minimal", **events)
    gr.api(user_errors(gpu(api_inside)), api_name="inside", concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY)
    return {"text": text, "layer": layer, "head": head, "token": token}  # its controls, by the names of a link's parameters (playground/links.py)
