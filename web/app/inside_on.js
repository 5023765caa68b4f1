// "Run on: this browser" in the app's Inside the model tab: the pass computed in the learner's own
// browser by the stage graph the static edition runs (web/engine/inside.js, the same 8-bit weights
// file, written by the app: export/inside_graph.py), drawn by the tab's own view (the one both
// editions share, web/views/inside.js, mounted by web_view.js); the server's CPU does nothing for it.
// While this browser is chosen, the view's requests (a token's logit lens) are answered here, and
// the tab's Run is the browser's twin (page.css shows one or the other). The server's Run is
// offered this browser at once when the server's line for a heavy pass is long (server_wait.js).
// The tab's events call mount, setMode and run (playground/ui/inside.py).

import { hideProgress, panelBody, showError as showPanelError, showProgress } from "./panel.js";
import { watchWait } from "./server_wait.js";

const ROOT = new URL("../", import.meta.url); // this file is <root>/browser/inside_on.js
const at = (path) => new URL(path, ROOT).href;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const VIEW = "ins-view";
const MAX_TRIES = 60; // files.json not written yet (the app writes it while it starts): asked again every retryAfterS
export const ENGINE_WORDS = "8-bit weights, onnxruntime-web"; // what computes it, as the static edition says it

let config = null;
let panel = null;
let loading = null; // Promise of {inside, checks}, kept once it succeeds
let mode = "server";
let shown = null; // the browser's pass the view shows: {key, data}; null when the view shows the server's
let runs = 0;

const host = () => window.pgHosts?.[VIEW];
const view = () => window.pgViews?.[VIEW];
const progress = (text, fraction) => showProgress(panel, text, fraction);
const showError = (text) => showPanelError(panel, text);

/** The tab's browser panel (the page calls this when the panel appears). */
export function mount(element, cfg) {
  config = cfg;
  panel = element;
  panel.replaceChildren(panelBody());
  watchWait({ url: at, runHere: runHereInstead, tab: "inside" });
  // The text box's Shift+Enter (Gradio's submit of a box of several lines) runs here too, not on the server.
  for (const type of ["keydown", "keypress"]) {
    document.addEventListener(type, (e) => {
      if (mode !== "browser" || e.key !== "Enter" || !e.shiftKey || !e.target.closest?.("#ins-text")) return;
      e.preventDefault();
      e.stopImmediatePropagation();
      if (type === "keydown") document.querySelector("#ins-run-browser")?.click();
    }, true);
  }
}

/**
 * The Run on radio. This browser: its Run shows, the view's requests are answered here, and the
 * text in the box is computed here at once. The server: the view's requests go to the server
 * again, and a pass this browser drew is drawn again by the server (the view never mixes the two).
 */
export function setMode(next, cfg) {
  config ??= cfg;
  mode = next === "browser" ? "browser" : "server";
  document.body.classList.toggle("pg-ins-browser", mode === "browser");
  const h = host();
  if (mode === "browser") {
    if (h) h.answer = answer;
    load().catch(() => {});
    click("#ins-run-browser");
  } else {
    if (h) h.answer = null;
    if (shown) {
      shown = null;
      click("#ins-run");
    }
  }
}

function click(selector) {
  requestAnimationFrame(() => document.querySelector(selector)?.click());
}

/** "Run it in this browser instead" (the server's line is long): the browser's mode, then its Run. */
function runHereInstead() {
  const choice = document.querySelector('#ins-run-on input[type="radio"][value="browser"]');
  if (choice && !choice.checked) choice.click(); // Gradio's change event calls setMode, which runs the pass
  else setMode("browser");
}

function load() {
  loading ??= loadStages().catch((err) => {
    loading = null; // the next Run tries again
    hideProgress(panel);
    showError(`The model's stages could not be loaded in this browser: ${err.message}`);
    throw err;
  });
  return loading;
}

async function loadStages() {
  const t0 = performance.now();
  progress("Loading the model's stages into this browser…", null);
  let files;
  for (let attempt = 1; ; attempt++) { // a first start writes them while the page is already served
    const r = await fetch(at(config.facts), { cache: "no-cache" });
    if (r.ok) {
      files = await r.json();
      break;
    }
    if (r.status !== 404 || attempt >= MAX_TRIES) throw new Error(`their list could not be fetched (HTTP ${r.status})`);
    progress(`The server is still writing the model's stages for this browser: trying again in ${config.retryAfterS} s…`, null);
    await sleep(config.retryAfterS * 1000);
  }
  const [{ Inside }, { loadOrt }, { Tokenizer }, { fetchJSON }, checks] = await Promise.all(
    [config.inside, config.engine, config.tokenizerModule, config.fetch, config.checks].map((m) => import(at(m))));
  const [ort, tokenizer] = await Promise.all([loadOrt(at(config.ort)), fetchJSON(at(config.tokenizer)).then((j) => Tokenizer.fromJSON(j))]);
  const words = { graph: "the stage graph", lens: "the logit lens's graph", weights: "the model's weights (8-bit)" };
  const inside = await Inside.load({
    ort, graph: at(files["graph.onnx"]), lens: at(files["lens.onnx"]), weights: at(files["weights.bin"]), index: at(files["weights.json"]),
    tokenText: (id) => tokenizer.tokenText(id),
    onProgress: ({ file, loaded, total }) => progress(`Downloading ${words[file] ?? file}…`, total ? loaded / total : null),
  });
  inside.tokenizer = tokenizer;
  progress(`The model's stages are ready in this browser (${((performance.now() - t0) / 1000).toFixed(1)} s).`, 1);
  setTimeout(() => hideProgress(panel), 1500);
  if (panel) panel.dataset.ready = "true";
  window.pgInsideOn = inside; // for the tests and the curious, in the console
  return { inside, checks };
}

/** The view's request for a token's rows: its logit lens, run here on the pass shown. */
function answer(name, { token }) {
  if (name !== "rows" || !shown) return;
  const pass = shown;
  loading?.then(({ inside }) => inside.lensAt(pass.data, token))
    .then(() => pass === shown && view()?.update({ key: pass.key, data: pass.data }),
      (err) => showError(`The model could not run in this browser: ${err.message}`));
}

/**
 * The browser's Run, from the tab's controls {text, layer, head}: the pass computed here and drawn,
 * opened on the token whose prediction forms most visibly (as the server opens). Returns what the
 * tab's token control needs (JSON {tokens, token}), or "" when nothing was drawn (the panel says why).
 */
export async function run({ text, layer, head }) {
  const which = ++runs;
  showError("");
  try {
    const { inside, checks } = await load();
    const L = config.limits;
    let ids;
    try {
      ids = checks.textIds(inside.tokenizer, text, L.MAX_INSIDE_CHARS, Math.min(L.MAX_INSIDE_TOKENS, inside.config.block_size));
    } catch (err) {
      if (!(err instanceof checks.InputError)) throw err;
      showError(checks.sentence(err.message));
      return "";
    }
    const t0 = performance.now();
    const data = await inside.pass(ids);
    const token = data.opening_token;
    await inside.lensAt(data, token);
    if (which !== runs || mode !== "browser") return ""; // a newer Run, or the server chosen meanwhile
    shown = { key: `browser:${which}:${ids.join(",")}`, data };
    const seconds = ((performance.now() - t0) / 1000).toFixed(2);
    view()?.update({ key: shown.key, data, state: { layer: Number(layer), head: Number(head), token },
      note: `Computed in this browser (${ENGINE_WORDS}) in ${seconds} s.` });
    return JSON.stringify({ tokens: ids.length, token });
  } catch (err) {
    console.error(err);
    if (loading) showError(`The model could not run in this browser: ${err.message}`);
    return "";
  }
}
