// "Run on: this browser" in the app's Watch it learn tab: the run is trained in the learner's own
// browser by the view both editions share (web/views/learn.js, its Web Worker and the step graphs),
// from the tab's own Gradio controls; the server's CPU does nothing for it. The app serves this
// file, the view, the engine, onnxruntime-web, plotly.js and the step graphs under <root>/browser/
// (playground/ui/serving/browser_files.py); the tab's events call mount, setMode, start, stop and
// continueText (playground/ui/learn.py). The page chooses this browser by default where it can
// train (canTrain); where it cannot, it moves the choice to the server and says why.

import { el, hideProgress, panelBody, showError as showPanelError, showProgress } from "./panel.js";

let config = null;
let panel = null;
let view = null; // Promise of the mounted view
const ROOT = new URL("../", import.meta.url); // this file is <root>/browser/learn_on.js
const at = (path) => new URL(path, ROOT).href;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const MAX_TRIES = 120; // learn.json not written yet (a first start builds the graphs): asked again every retryAfterS

const part = (cls) => panel && panel.querySelector(`.${cls}`);
const progress = {
  show: (text, fraction) => showProgress(panel, text, fraction),
  hide: () => hideProgress(panel),
};
const showError = (text) => showPanelError(panel, text);

/** Why this browser cannot train (a sentence), or null: a module Web Worker and WebAssembly with SIMD. */
export function cannotTrain() {
  if (typeof Worker === "undefined") return "this browser has no Web Workers";
  if (typeof WebAssembly === "undefined") return "this browser has no WebAssembly";
  // The smallest module with SIMD instructions (wasm-feature-detect's: i8x16.splat, i8x16.popcnt): onnxruntime-web's build needs SIMD.
  const simd = Uint8Array.from([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);
  if (!WebAssembly.validate(simd)) return "this browser's WebAssembly has no SIMD (Safari before 16.4, Chrome before 91)";
  let module = false;
  try {
    new Worker("data:text/javascript,", { get type() { module = true; return "module"; } }).terminate();
  } catch { /* the option was read before the address was refused */ }
  if (!module) return "this browser cannot start a module Web Worker (Firefox before 114, Safari before 15)";
  return null;
}

let plotly = null;
function loadPlotly() {
  plotly ??= new Promise((resolve, reject) => {
    if (window.Plotly) return resolve(window.Plotly);
    const script = el("script", { src: at(config.plotly) });
    script.onload = () => resolve(window.Plotly);
    script.onerror = () => { plotly = null; reject(new Error("plotly.js could not be loaded")); };
    document.head.append(script);
  });
  return plotly;
}

function chooseServer(why) {
  const server = document.querySelector('#learn-run-on input[type="radio"][value="server"]');
  if (server && !server.checked) server.click(); // Gradio's own value follows (its change event calls setMode)
  document.body.classList.remove("pg-learn-browser");
  const note = document.querySelector("#learn-run-on-why");
  if (note) note.textContent = `This browser cannot train the model (${why}): the server trains it instead.`;
}

/** The tab's browser panel (the page calls this when the panel appears). */
export function mount(element, cfg) {
  config = cfg;
  panel = element;
  panel.replaceChildren(panelBody(el("div", { class: "learn-browser-view" })));
  const why = cannotTrain();
  if (why) return chooseServer(why);
  // A link's run_on (?tab=learn&run_on=server) before Gradio's own update of the radio arrives:
  // a page linked to the server's runs downloads nothing for this one.
  const linked = new URLSearchParams(location.search).get("run_on");
  const chosen = document.querySelector('#learn-run-on input[type="radio"]:checked');
  setMode(["browser", "server"].includes(linked) ? linked : chosen ? chosen.value : "browser", cfg);
}

/** The Run on radio: the controls of the mode chosen show (page.css); the view loads once this browser is chosen and the tab seen. */
export function setMode(mode, cfg) {
  config ??= cfg;
  document.body.classList.toggle("pg-learn-browser", mode === "browser");
  if (mode !== "browser" || !panel) return;
  // Only once the tab is shown: a page opened on another tab downloads nothing for this one. Shown,
  // not scrolled to: on a phone the panel starts below the first screen, and it must be ready (its
  // graphs loaded, its first step warm) by the time the learner scrolls down to Start. A hidden
  // tab's panel has no box and intersects nothing, however far the margin reaches.
  const seen = new IntersectionObserver((entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    seen.disconnect();
    load().catch(() => {});
  }, { rootMargin: "0px 0px 100000px 0px" });
  seen.observe(panel);
}

function load() {
  view ??= loadView().catch((err) => {
    view = null;
    progress.hide();
    showError(`Watch it learn could not start in this browser: ${err.message}`);
    throw err;
  });
  return view;
}

async function loadView() {
  progress.show("Loading Watch it learn into this browser…", null);
  for (let attempt = 1; ; attempt++) { // a first start writes the files while the page is already served
    const answer = await fetch(at(config.facts), { method: "HEAD" });
    if (answer.ok) break;
    if (answer.status !== 404 || attempt >= MAX_TRIES) throw new Error(`its files could not be fetched (HTTP ${answer.status})`);
    progress.show(`The server is still writing Watch it learn's files (the step graphs and the training text): trying again in ${config.retryAfterS} s…`, null);
    await sleep(config.retryAfterS * 1000);
  }
  const { mount: mountView } = await import(at(config.view));
  const buttons = (ids, disabled) => ids.forEach((id) => { const b = document.querySelector(`#${id}`); if (b) b.disabled = disabled; });
  const mounted = await mountView(part("learn-browser-view"), {
    el, plotly: loadPlotly, progress,
    learn: { facts: at(config.facts), ort: at(config.ort), wasm: null },
    onState: ({ ready, running, trained }) => {
      buttons(["learn-start-browser"], !ready || running);
      buttons(["learn-stop-browser"], !running);
      buttons(["learn-try-browser"], running || !trained);
      if (panel) panel.dataset.ready = String(ready);
    },
  });
  window.pgLearnOn = mounted; // for the tests and the curious, in the console
  return mounted;
}

const wrapped = (fn) => async (...args) => {
  showError("");
  try {
    return await fn(await load(), ...args);
  } catch (err) {
    showError(err.message);
    return undefined;
  }
};

/** Start, from the tab's controls: {seed, init, learning_rate, size, positions}. */
export const start = wrapped((v, s) => v.start({ ...s, seed: typeof s.seed === "number" ? s.seed : Number(s.seed) }));

/** A size or position kind chosen: that model's first (slow) step is run, unseen, before Start. */
export function prepare(size, positions) {
  view?.then((v) => v.prepare(size, positions), () => {});
}

/** Stop: the run ends before its next step. */
export function stop() {
  view?.then((v) => v.stop(), () => {});
}

/** The last run's model continues `prompt` (its text shown under the runs). */
export const continueText = wrapped((v, prompt, seed) => v.continueText(prompt, Number(seed)));
