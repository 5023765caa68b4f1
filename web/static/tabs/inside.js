// Inside the model, in the static edition: the text box, the examples and the layer, head and
// token controls around the shared view (../views/inside.js). The pass is computed here by the
// stage graph in onnxruntime-web (engine/inside.js, downloaded when this tab first opens); the
// view draws the data object it returns and nothing else.

import { InputError, sentence, textIds } from "../checks.js";
import { render } from "../views/inside.js";

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const { n_layer: nLayer, n_head: nHead, block_size: blockSize } = site.model;
  const maxChars = site.limits.MAX_INSIDE_CHARS;
  const maxTokens = Math.min(site.limits.MAX_INSIDE_TOKENS, blockSize);
  const examples = site.examples.inside;
  const text = el("textarea", { id: "ins-text", rows: 3, "aria-label": "Text" });
  text.value = linked?.text ?? site.defaults.inside.text;
  const picker = (id, label, n) => {
    const select = el("select", { id }, ...Array.from({ length: n }, (_, i) => el("option", { value: String(i) }, String(i))));
    return { select, box: el("div", { class: "att-pick" }, el("label", { for: id }, label), select) };
  };
  const layer = picker("ins-layer", `Layer (0–${nLayer - 1})`, nLayer);
  const head = picker("ins-head", `Head (0–${nHead - 1})`, nHead);
  const token = { select: el("select", { id: "ins-token" }) };
  token.box = el("div", { class: "att-pick" }, el("label", { for: "ins-token" }, "Token"), token.select);
  const runButton = el("button", { class: "pg-btn primary", type: "button", id: "ins-run" }, "Look inside");
  const error = el("div", { class: "pg-error", id: "ins-error", role: "alert", hidden: true });
  const info = el("div", { class: "pg-note", id: "ins-info" }, "Loading the model's stages into this browser…");
  const view = el("div", { class: "ins-view", id: "ins-view" });

  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col", style: "flex: 2 1 320px" },
      el("label", { for: "ins-text" }, `Text (up to ${maxChars.toLocaleString("en-US")} characters and ${maxTokens} tokens)`), text,
      el("div", { class: "pg-examples" }, ...examples.map((x) => el("button", { type: "button", onclick: () => { text.value = x; run({ fresh: true }); } }, x.split("\n").join(" ↵ ")))),
      error),
    el("div", { class: "pg-col att-controls", style: "flex: 1 1 240px" },
      el("div", { class: "att-picks" }, layer.box, head.box, token.box), el("div", { style: "margin-top: 8px" }, runButton))),
  info, view);

  let inside = null;
  let data = null;
  let runs = 0;
  if (linked?.layer !== undefined) layer.select.value = String(linked.layer);
  if (linked?.head !== undefined) head.select.value = String(linked.head);
  let wantedToken = linked?.token ?? null; // a link's token, else the one where a prediction forms

  function fail(message) {
    error.hidden = false;
    error.textContent = sentence(message);
    if (view.dataset.shown) error.append(" The result below is from the last input that worked.");
  }

  function draw() {
    const t = Number(token.select.value);
    render(view, data, { layer: Number(layer.select.value), head: Number(head.select.value), token: t }, {
      el, onPick: (i) => { token.select.value = String(i); draw(); },
    });
    view.dataset.shown = "true";
    window.pgInside = data; // for the browser tests and the curious, in the console
  }

  async function run({ fresh = false } = {}) {
    if (!inside) return;
    const which = ++runs;
    let ids;
    try {
      ids = textIds(inside.tokenizer, text.value, maxChars, maxTokens);
    } catch (err) {
      if (!(err instanceof InputError)) console.error(err);
      return fail(err.message);
    }
    try {
      const t0 = performance.now();
      const next = await inside.pass(ids);
      if (which !== runs) return; // a newer request has the page
      data = next;
      error.hidden = true;
      const labels = data.tokens.map((x, i) => `${i}: ${JSON.stringify(x)}`);
      token.select.replaceChildren(...labels.map((x, i) => el("option", { value: String(i) }, x)));
      // The link's token (past the text's end: its last), else where a prediction forms.
      const chosen = !fresh && wantedToken !== null ? Math.min(wantedToken, ids.length - 1) : data.opening_token;
      wantedToken = null;
      token.select.value = String(chosen);
      info.textContent = `${ids.length} tokens, computed in this browser in ${((performance.now() - t0) / 1000).toFixed(2)} s.`
        + (chosen === data.opening_token && ids.length > 1 ? ` The page opened on token ${chosen}, where the logit lens shows a prediction form.` : "");
      draw();
      view.dataset.done = String(which);
    } catch (err) {
      console.error(err);
      fail(`The model could not run in this browser: ${err.message}`);
    }
  }

  runButton.addEventListener("click", () => run({ fresh: true }));
  text.addEventListener("keydown", (e) => e.key === "Enter" && (e.ctrlKey || e.metaKey) && run({ fresh: true }));
  for (const p of [layer, head, token]) p.select.addEventListener("change", () => data && draw());

  // Not awaited: the page is ready (and Copy link works) while the stages download.
  ctx.inside().then((loaded) => {
    inside = loaded;
    return run();
  }, (err) => {
    info.textContent = "";
    fail(`The model's stages could not be loaded: ${err.message}`);
  });
  return {
    settings: () => ({ text: text.value, layer: Number(layer.select.value), head: Number(head.select.value),
      ...(token.select.value === "" ? {} : { token: Number(token.select.value) }) }),
  };
}
