"""Inside the model tab: one forward pass of the model shown on the learner's text, stage by
stage, with the real numbers, drawn by the view both editions share (web/views/inside.js, mounted
by :func:`playground.ui.web_view.web_view`): a map of the data flow at the top, the overview of the
pass with each stage's numbers, from which each stage opens; a layer, head and token control.
Registers ``/inside``.

A new text computes the pass in PyTorch (kept in ``playground.inside``'s small cache) and opens on
the token whose prediction forms most visibly through the layers; the view is handed that token's
rows of every layer (playground/inside_data.py's ``view_answer``, packed by playground/wire.py), so
the layer and head sliders and the map's chips redraw in the page alone. Another token asks the
server for its rows (the view's ``rows`` event), read from the kept pass.

"Run on: this browser" computes the pass in the learner's browser instead (web/app/inside_on.js:
the static edition's stage graph and 8-bit weights, which the app writes while it starts), drawn by
the same view; the server then only sets the token slider's range. The server's Run is offered
this browser at once when the server's line for heavy passes is long (``/expected-wait?tab=inside``)."""

from __future__ import annotations

import json
import time

import gradio as gr

from .. import inside as ins
from .. import limits, wire
from ..inside_data import view_answer
from ..lessons import LESSONS
from ..resources import Resources
from ..validation import validate_int
from .common import FORWARD, FORWARD_CONCURRENCY, LIGHT, inline_errors, on_input, on_tab_open, user_errors
from .page_side import page_side_js
from .serving.browser_files import BrowserFiles
from .serving.zerogpu import INSIDE_GPU_S, on_gpu
from .web_view import call_view, web_view
from .widgets import RESULT, SECTION, error_slot, layer_head_sliders, next_tab, note, text_with_examples

LESSON = LESSONS["inside"]
VIEW = "ins-view"
# The view draws with its own style sheet (web/views/inside.css); the app adds nothing to it.
CSS = ""
gpu = on_gpu(INSIDE_GPU_S)  # a pass is a @spaces.GPU call on ZeroGPU, the handler itself elsewhere


# "Run on": where the pass is computed. The browser's events have no Python function but the token
# slider's range (inside_on.js); which Run shows is the body's pg-ins-browser class (page.css).
SERVER, BROWSER = "server", "browser"
RUN_ON_CHOICES = [("the server", SERVER), ("this browser", BROWSER)]


def inside_on_js(browser: BrowserFiles) -> dict[str, str]:
    """The page's JavaScript of each browser event: ``mount`` (the panel's ``js_on_load``),
    ``mode`` (the Run on radio's change) and ``run`` (the browser's Run: what the token slider needs)."""
    js = page_side_js(browser.inside_config()["module"], {**browser.inside_config(), "limits": limits.for_browser()},
                      "pg-ins-browser", "Inside the model in this browser")
    return {
        "mount": js["mount"],
        "mode": js["mode"],
        "run": f"async (text, layer, head) => (await {js['module']}).run({{text, layer, head}})",
    }


def run_on_info(browser: BrowserFiles, n_params: int) -> str:
    """The Run on choice's words; ``n_params``: the model's parameters (a byte each in 8 bits)."""
    if not browser.available or not browser.inside_code:
        return browser.problem or browser.inside_problem or ""
    return ("This browser: the same stages, computed on this device by the stage graph traced from this tab's own functions "
            f"(onnxruntime-web, the model's weights in 8 bits: about {n_params / 1e6:.0f} MB, downloaded once), whatever the "
            "server's load. The server: PyTorch at full precision, shared with the class.")


def ui_browser_drawn(drawn: str):
    """The browser drew a pass (inside_on.js's JSON ``{tokens, token}``): the token control spans
    its tokens, at the one shown; nothing changes when it drew nothing."""
    try:
        got = json.loads(drawn) if drawn else None
        tokens = validate_int(got.get("tokens"), name="tokens", minimum=1, maximum=limits.MAX_INSIDE_TOKENS)
        token = validate_int(got.get("token"), name="token", minimum=0, maximum=tokens - 1)
    except (ValueError, TypeError, AttributeError):
        return gr.skip()
    last = tokens - 1
    return gr.Slider(minimum=0, maximum=max(last, 1), value=token, step=1, label=f"Token (0–{last})")


def _answer(r: ins.InsideResult, whole: bool = True, state: bool = True) -> str:
    """What the view is handed: the rows at ``r``'s token (with the text's own fields when
    ``whole``) and, with ``state``, ``r``'s layer, head and token to show; packed for the page.
    ``answer`` makes each answer a new value, so the page hands it to the view even when the same
    rows are asked twice."""
    shown = {"layer": r.layer, "head": r.head, "token": r.token} if state else None
    note = {"note": ""} if whole else {}  # a new pass of the server's: no note of this browser's left beside it
    return wire.pack({**view_answer(r.fp, r.token, shown, whole=whole), **note, "answer": time.monotonic_ns()})


class Handlers:
    """The tab's handlers on the model of the app's :class:`~playground.resources.Resources`."""

    def __init__(self, res: Resources):
        self.res = res

    def opened(self, text, layer, head) -> ins.InsideResult:
        """A new text's pass at the token the tab opens on (:func:`playground.inside.opening_token`)."""
        r = ins.inside(text, layer, head, model=self.res.model())
        return ins.InsideResult(r.fp, r.layer, r.head, ins.opening_token(r.fp))

    def ui_run(self, text, layer, head):
        """A new text: the pass, shown at the token whose prediction forms most visibly; the token
        control spans its tokens; the text is kept as the one shown (the view's requests read it,
        whatever the box holds meanwhile)."""
        r = self.opened(text, layer, head)
        last = len(r.fp.ids) - 1
        return text, gr.Slider(minimum=0, maximum=max(last, 1), value=r.token, step=1, label=f"Token (0–{last})"), _answer(r)

    def ui_rows(self, shown, evt: gr.EventData):
        """The view asks for a token's rows (every layer's, and its logit lens) of the text shown: read
        from its kept pass. A token past the text's end gets the last one's."""
        r = ins.inside(shown, 0, 0, model=self.res.model())
        position = min(validate_int(getattr(evt, "_data", {}).get("token"), name="token", minimum=0, maximum=10**6), len(r.fp.ids) - 1)
        return _answer(ins.InsideResult(r.fp, 0, 0, position), whole=False, state=False)

    def api_inside(self, text: str, layer: int, head: int) -> dict:
        """One forward pass of the model on `text`, stage by stage, shown for `layer` and `head`
        (0-based) at the last token. Returns `tokens`, `ids`, `token_losses` (nats, one per predicted
        token: len(tokens) - 1 values), `loss` (their mean), `uniform_loss` (ln V), `logit_lens` (per
        layer, the top-5 next tokens at the last position; the last layer's is the model's own),
        `logit_lens_probabilities`, and the chosen layer's stages: `embedding`, `layer_norm`,
        `attention`, `residual`, `ffn`, `candidates`, with `hidden_max_diff` (the check against the
        model's own forward pass). Limits: text up to 2,000 characters and 64 tokens."""
        return ins.inside(text, layer, head, model=self.res.model()).to_dict()


def build(res: Resources, tab: gr.Tab, browser: BrowserFiles | None = None) -> dict[str, gr.components.Component]:
    """The tab's content on the model of ``res``; the example's pass is drawn when ``tab`` is first opened (out of the
    first page load). ``browser``: the files the app serves its pages (the view's module among them)."""
    browser = browser if browser is not None else BrowserFiles.for_model({})
    js = inside_on_js(browser) if browser.available and browser.inside_code else None
    h, model = Handlers(res), res.model()
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    note(LESSON.intro)
    note(
        f"The model: {cfg.n_layer} layers, {cfg.n_head} heads of {cfg.head_dim}, d_model {cfg.d_model}. Each box of the map "
        "gives its stage's numbers and opens it; the map's chips or the sliders choose the layer and head, the slider or a "
        "click on a token the token. Computed on the server in PyTorch, full precision, or in this browser."
    )
    r = h.opened(ins.EXAMPLE_TEXTS[0], 0, 0)
    first, last = _answer(r), len(r.fp.ids) - 1
    with gr.Column(elem_classes=SECTION):
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=300):
                text = text_with_examples(ins.EXAMPLE_TEXTS, label="Text", lines=3, elem_id="ins-text")
                error = error_slot("ins-error")
            with gr.Column(scale=1, min_width=240):
                layer, head = layer_head_sliders(cfg.n_layer, cfg.n_head, prefix="ins")
                token = gr.Slider(0, max(last, 1), value=r.token, step=1, label=f"Token (0–{last})", elem_id="ins-token")
                run_on = gr.Radio(RUN_ON_CHOICES, value=SERVER, label="Run on", elem_id="ins-run-on",
                                  info=run_on_info(browser, n_params), interactive=js is not None)
                run = gr.Button("Run the forward pass", variant="primary", elem_id="ins-run")
                if js:
                    run_here = gr.Button("Run the forward pass", variant="primary", elem_id="ins-run-browser")
        if js:  # the browser's loading and errors, written by the page only (inside_on.js)
            gr.HTML('<div class="pg-browser-panel"></div>', elem_id="ins-browser", js_on_load=js["mount"], padding=False)
        view = web_view("inside", browser, elem_id=VIEW, events=["rows"], elem_classes=RESULT,
                        controls={"layer": "ins-layer", "head": "ins-head", "token": "ins-token"})
    next_tab(LESSON.next_sentence, LESSON.next_tab)

    shown = gr.State(ins.EXAMPLE_TEXTS[0])  # the text whose pass the page shows
    on_tab_open(tab, lambda: first, [view], concurrency_id=LIGHT)
    events = dict(concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY, trigger_mode="always_last")
    on_input([run.click, text.submit], gpu(h.ui_run), [text, layer, head], [shown, token, view], error=error, **events)
    # A slider redraws on every user input (a drag, a click on the track, the arrow keys, a
    # number typed in its box) in the page alone: the view holds every layer and head at its token.
    for name, control in (("layer", layer), ("head", head), ("token", token)):
        control.input(None, [control], None, js=call_view(VIEW, "set", [name]), queue=False)
    # (a small progress mark, not an overlay over the view for a tenth of a second)
    # Every request of the view runs ("multiple"): under "always_last" Gradio's page sends again
    # the request that ran, with its own token, in place of the later ones (the view asks one at
    # a time, web/views/inside.js's ask()).
    view.rows(inline_errors(gpu(h.ui_rows), 1), [shown], [view, error], api_visibility="private", show_progress="minimal",
              **{**events, "trigger_mode": "multiple"})
    if js:
        drawn = gr.Textbox(visible=False, elem_id="ins-browser-result")
        run_on.change(None, inputs=[run_on], js=js["mode"], api_visibility="private", queue=False)
        run_here.click(None, inputs=[text, layer, head], outputs=[drawn], js=js["run"], api_visibility="private", queue=False,
                       show_progress="hidden").then(
            user_errors(ui_browser_drawn), inputs=[drawn], outputs=[token], api_visibility="private", concurrency_id=LIGHT,
            show_progress="hidden")
    gr.api(user_errors(gpu(h.api_inside)), api_name="inside", concurrency_id=FORWARD, concurrency_limit=FORWARD_CONCURRENCY)
    return {"text": text, "layer": layer, "head": head, "token": token}  # its controls, by the names of a link's parameters (playground/links.py)
