"""Inside the model tab: one forward pass of the model shown on the learner's text, stage by
stage, with the real numbers; a map of the data flow at the top, a layer, head and token control.
Registers ``/inside``.

A new text computes the pass (kept in ``playground.inside``'s small cache); the layer, head and
token controls only redraw the panels from it."""

from __future__ import annotations

import gradio as gr

from .. import inside as ins
from .. import inside_view as view
from ..resources import get_model
from ..validation import validate_int
from .common import FORWARD_CONCURRENCY, HEAVY, LIGHT, on_input, on_tab_open, static_text, user_errors
from .widgets import RESULT, SECTION, error_slot, layer_head_sliders, next_tab, note, text_with_examples

CSS = static_text("inside.css")  # the classes inside_view writes


# What each output shows depends on: a control change redraws only the outputs it changes.
OUTPUTS = ("map", "info", "embedding", "layernorm", "attention", "residual", "residual_fig", "ffn", "lens", "output")
DEPENDS = {
    "layer": {"map", "info", "layernorm", "attention", "residual", "ffn", "lens"},
    "head": {"map", "info", "attention"},
    "token": set(OUTPUTS) - {"map"},
}


def _render(r: ins.InsideResult, only: set[str] | None = None) -> tuple:
    """The outputs of :func:`build` in the order of ``OUTPUTS``; those not in ``only`` (when
    given) are left as they are."""
    cfg = r.fp.model.config
    draw = {
        "map": lambda: view.map_html(cfg, r.layer, r.head, len(r.fp.ids)),
        "info": lambda: view.info_markdown(r),
        "residual_fig": lambda: view.residual_figure(r),
        **{anchor: (lambda anchor=anchor: view.PANELS[anchor](r)) for anchor, _, _ in view.STAGES},
    }
    return tuple(draw[name]() if only is None or name in only else gr.skip() for name in OUTPUTS)


def ui_run(text, layer, head):
    """A new text: the pass, shown at its last token; the token control spans its tokens; the text
    is kept as the one shown (the other controls redraw it, whatever the box holds meanwhile)."""
    r = ins.inside(text, layer, head)
    last = len(r.fp.ids) - 1
    return (text, gr.Slider(minimum=0, maximum=max(last, 1), value=last, step=1, label=f"Token (0–{last})"), *_render(r))


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


# The map's boxes (and each panel's "↑ map") scroll to their target, the page keeping its address
# (no #hash navigation); the box of the panel in view is highlighted as the page scrolls; a click on
# a token of the loss text chooses it.
GOTO_JS = """
document.addEventListener('click', (e) => {
  // A token of the loss text chooses the position that predicted it: its number goes into the
  // token slider's box, and the box's blur is the slider's release (Gradio's own event).
  const tok = e.target.closest('.ins-lt[data-t]');
  const box = document.querySelector('#ins-token input[type=number]');
  if (tok && box) {
    box.value = tok.dataset.t;
    box.dispatchEvent(new Event('input', {bubbles: true}));
    box.dispatchEvent(new FocusEvent('blur'));
    return;
  }
  const link = e.target.closest('[data-goto]');
  if (!link || !link.closest('#ins-map, .ins-panel')) return;
  e.preventDefault();
  const target = document.getElementById(link.dataset.goto);
  if (target) target.scrollIntoView({behavior: 'smooth', block: 'start'});
});
function highlight() {
  const panels = [...document.querySelectorAll('.ins-panel')].filter((p) => p.offsetParent !== null);
  if (!panels.length) return;
  let current = panels[0].id;
  for (const p of panels) if (p.getBoundingClientRect().top < window.innerHeight * 0.4) current = p.id;
  element.querySelectorAll('.ins-box[data-goto]').forEach((b) => b.classList.toggle('ins-current', b.dataset.goto === current));
}
let pending = false;
window.addEventListener('scroll', () => {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => { pending = false; highlight(); });
}, {passive: true});
highlight();
watch('value', highlight);
"""


def build(tab: gr.Tab) -> dict[str, gr.components.Component]:
    """The tab's content; the example's pass is drawn when ``tab`` is first opened (out of the first page load)."""
    cfg = get_model().config
    note(
        f"One forward pass of the model on your text, stage by stage, with its real numbers: {cfg.n_layer} layers, "
        f"{cfg.n_head} heads of {cfg.head_dim}, d_model {cfg.d_model}. Each box of the map opens its stage; "
        "choose a layer, a head and a token to see their numbers (a new text is computed once, then only redrawn)."
    )
    r = ins.inside(ins.EXAMPLE_TEXTS[0])
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
                token = gr.Slider(0, max(last, 1), value=last, step=1, label=f"Token (0–{last})", elem_id="ins-token")
                run = gr.Button("Run the forward pass", variant="primary", elem_id="ins-run")
        info = note(elem_id="ins-info", result=True)
        emb = gr.HTML(elem_id="ins-embedding", **html)
        ln = gr.HTML(elem_id="ins-layernorm", **html)
        att = gr.HTML(elem_id="ins-attention", **html)
        res = gr.HTML(elem_id="ins-residual", **html)
        res_fig = gr.Plot(show_label=False, elem_id="ins-residual-fig", elem_classes=RESULT)
        ffn = gr.HTML(elem_id="ins-ffn", **html)
        lens = gr.HTML(elem_id="ins-lens", **html)
        out = gr.HTML(elem_id="ins-output", **html)
    next_tab(
        "The last stage gave a probability for every token of the vocabulary: drawing one, appending it and "
        "running the pass again is how the model writes.",
        "Text generation",
    )

    shown = gr.State(ins.EXAMPLE_TEXTS[0])  # the text whose pass the page shows
    outputs = [map_box, info, emb, ln, att, res, res_fig, ffn, lens, out]
    on_tab_open(tab, lambda: first, outputs, concurrency_id=LIGHT)
    events = dict(error=error, concurrency_id=HEAVY, concurrency_limit=FORWARD_CONCURRENCY, trigger_mode="always_last")
    on_input([run.click, text.submit], ui_run, [text, layer, head], [shown, token, *outputs], **events)
    # A slider redraws when let go, or when a number typed in its box is confirmed with Enter.
    for control, handler in ((layer, ui_layer), (head, ui_head), (token, ui_token)):
        on_input([control.release], handler, [shown, layer, head, token], outputs, **events)
    gr.api(user_errors(api_inside), api_name="inside", concurrency_id=HEAVY, concurrency_limit=FORWARD_CONCURRENCY)
    return {"text": text, "layer": layer, "head": head, "token": token}  # its controls, by the names of a link's parameters (playground/links.py)
