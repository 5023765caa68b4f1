// Inside the model, in the static edition: the text box, the examples and the layer, head and
// token sliders around the view both editions draw with (../views/inside.js). The pass is computed
// here by the stage graph in onnxruntime-web (engine/inside.js, downloaded when this tab first
// opens), once per text; a slider, a chip of the map or a click on a token only redraws it, and a
// token's logit lens is the lens graph's, run when that token is first shown.

import { InputError, sentence, textIds } from "../checks.js";
import { mount as mountView } from "../views/inside.js";

const ENGINE = "8-bit weights, onnxruntime-web";

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const { n_layer: nLayer, n_head: nHead, block_size: blockSize } = site.model;
  const maxChars = site.limits.MAX_INSIDE_CHARS;
  const maxTokens = Math.min(site.limits.MAX_INSIDE_TOKENS, blockSize);
  const examples = site.examples.inside;
  const text = el("textarea", { id: "ins-text", rows: 3, "aria-label": "Text" });
  text.value = linked?.text ?? site.defaults.inside.text;
  // A slider with its number beside it: a drag, a click on its track, the arrow keys.
  const slider = (name, label, max) => {
    const input = el("input", { type: "range", id: `ins-${name}`, min: "0", max: String(max), step: "1", value: "0" });
    const shown = el("output", { id: `ins-${name}-value`, for: `ins-${name}` }, "0");
    const caption = el("span", {}, label(max));
    const box = el("div", { class: "ins-slider" }, el("label", { for: `ins-${name}` }, caption, " ", shown), input);
    return { input, shown, caption, box, label };
  };
  const controls = {
    layer: slider("layer", (n) => `Layer (0–${n})`, nLayer - 1),
    head: slider("head", (n) => `Head (0–${n})`, nHead - 1),
    token: slider("token", (n) => `Token (0–${n})`, 1),
  };
  const runButton = el("button", { class: "pg-btn primary", type: "button", id: "ins-run" }, "Run the forward pass");
  const error = el("div", { class: "pg-error", id: "ins-error", role: "alert", hidden: true });
  const status = el("div", { class: "pg-note", id: "ins-status" }, "Loading the model's stages into this browser…");
  const holder = el("div", { id: "ins-view" });

  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col", style: "flex: 2 1 320px" },
      el("label", { for: "ins-text" }, `Text (up to ${maxChars.toLocaleString("en-US")} characters and ${maxTokens} tokens)`), text,
      el("div", { class: "pg-examples" }, ...examples.map((x) => el("button", { type: "button", onclick: () => { text.value = x; run({ fresh: true }); } }, x.split("\n").join(" ↵ ")))),
      error),
    el("div", { class: "pg-col ins-controls", style: "flex: 1 1 240px" },
      controls.layer.box, controls.head.box, controls.token.box, el("div", { style: "margin-top: 8px" }, runButton))),
  status, holder);

  let inside = null;
  let data = null;
  let key = null;
  let runs = 0;
  const set = (name, value) => {
    const c = controls[name];
    c.input.value = String(value);
    c.shown.textContent = c.input.value;
  };
  if (linked?.layer !== undefined) set("layer", linked.layer);
  if (linked?.head !== undefined) set("head", linked.head);
  let wantedToken = linked?.token ?? null; // a link's token, else the one where a prediction forms
  const state = () => Object.fromEntries(Object.entries(controls).map(([name, c]) => [name, Number(c.input.value)]));

  const view = mountView(holder, {
    edition: "static",
    config: {},
    // The view lacks a token's logit lens until the lens graph has run there (asked for the token
    // shown, and for the next one ahead while the learner looks).
    request: (name, { token }) => {
      if (name !== "rows" || !data) return;
      const shown = data;
      inside.lensAt(shown, token).then(() => shown === data && view.update({ key, data }), (err) => fail(`The model could not run in this browser: ${err.message}`));
    },
    // A chip of the map or a click on a token moves the slider, which redraws the view.
    choose: (name, value) => {
      if (!controls[name]) return false;
      set(name, value);
      view.set({ [name]: Number(controls[name].input.value) });
      return true;
    },
    control: (name) => (controls[name] ? Number(controls[name].input.value) : null),
  });
  window.pgViews = Object.assign(window.pgViews || {}, { "ins-view": view });

  function fail(message) {
    error.hidden = false;
    error.textContent = sentence(message);
    if (data) error.append(" The result below is from the last input that worked.");
    holder.classList.add("pg-stale");
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
      // The link's token (past the text's end: its last), else where a prediction forms.
      const chosen = !fresh && wantedToken !== null ? Math.min(wantedToken, ids.length - 1) : next.opening_token;
      await inside.lensAt(next, chosen);
      if (which !== runs) return; // a newer request has the page
      wantedToken = null;
      data = next;
      key = `${which}:${ids.join(",")}`;
      error.hidden = true;
      holder.classList.remove("pg-stale");
      const last = ids.length - 1;
      controls.token.input.max = String(Math.max(last, 1));
      controls.token.caption.textContent = controls.token.label(last);
      set("token", chosen);
      const seconds = ((performance.now() - t0) / 1000).toFixed(2);
      status.textContent = "";
      view.update({ key, data, state: state(), note: `Computed in this browser (${ENGINE}) in ${seconds} s.` });
      holder.dataset.run = String(which); // (the view counts its own drawings in data-done)
    } catch (err) {
      console.error(err);
      fail(`The model could not run in this browser: ${err.message}`);
    }
  }

  runButton.addEventListener("click", () => run({ fresh: true }));
  text.addEventListener("keydown", (e) => e.key === "Enter" && (e.ctrlKey || e.metaKey) && run({ fresh: true }));
  for (const [name, c] of Object.entries(controls)) {
    c.input.addEventListener("input", () => {
      c.shown.textContent = c.input.value;
      if (!data) return;
      view.set({ [name]: Number(c.input.value) });
    });
  }

  // Not awaited: the page is ready (and Copy link works) while the stages download.
  ctx.inside().then((loaded) => {
    inside = loaded;
    return run();
  }, (err) => {
    status.textContent = "";
    fail(`The model's stages could not be loaded: ${err.message}`);
  });
  return {
    // (before the first pass, a link's token is still the one it asked for: the slider spans one token until then)
    settings: () => ({ text: text.value, ...state(), ...(data || wantedToken === null ? {} : { token: wantedToken }) }),
  };
}
