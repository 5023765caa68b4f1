// "Run on: this browser" in the app's Text generation tab: the model runs in the learner's own
// browser (the engine of web/engine/ on onnxruntime-web), its text streamed where the server's goes
// (#gen-output) and its progress and stats in the tab's browser panel (#gen-browser). Generate
// (several samples too) and Next token run here; when one ends, what the engine drew (each step's
// token, its probabilities and candidates) goes back to the tab as JSON, and the server's own views
// draw it: the text, the candidates chart and its pickers, the Next token steps
// (playground/generation/browser.py). The app serves this file, the engine, onnxruntime-web and the
// model under <root>/browser/ (playground/ui/serving/browser_files.py); the tab's events call mount,
// setMode, generate, next and stop (playground/ui/generation.py). When the server refuses a
// generation as busy, the message offers to run it here instead; when its expected wait is long,
// Generate offers it at once (server_wait.js).

import { el, hideProgress, panelBody, showError as showPanelError, showProgress as showPanelProgress } from "./panel.js";
import { PAINT_MS, nextPaintAfter } from "./paint.js";
import { settingsProblems } from "./settings_checks.js";
import { watchWait } from "./server_wait.js";

const ROOT = new URL("../", import.meta.url); // this file is <root>/browser/run_on.js
const at = (path) => new URL(path, ROOT).href;

// When the page paints while it generates: web/app/paint.js. A message, not setTimeout(0), which
// browsers clamp and throttle, gives the page back.
const STATS_EVERY_MS = 100; // the stats line is a layout: a few times a second is enough
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()?.();
const yieldToPage = () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(null); });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Refusals of a generation by a server with no room for it (serving/admission.py's 429 and 503,
// which Gradio shows as a toast; the decoding loop's own "Busy" in the tab's error slot).
const BUSY = /currently busy|too many generations|too many requests|\bbusy\b/i;
const OFFER_FOR_MS = 60_000; // a refusal this long after a server Generate is that Generate's
const MAX_TRIES = 60; // a model download refused as one too many, tried again (5 s apart: 5 minutes)

let config = null;
let panel = null;
let loading = null; // Promise<Engine>, kept once it succeeds
let abort = null;
let running = false;
let watching = false;
let askedServerAt = -Infinity;

const part = (cls) => panel && panel.querySelector(`.${cls}`);
const showProgress = (text, fraction) => showPanelProgress(panel, text, fraction);

function showError(text) {
  showPanelError(panel, text);
  outputBox().classList.toggle("pg-stale", Boolean(text));
}

/** The tab's browser panel (the page calls this when the panel appears). */
export function mount(element, cfg) {
  config = cfg;
  panel = element;
  panel.replaceChildren(panelBody(
    el("div", { class: "pg-browser-stats", id: "gen-browser-stats" }, "Press ", el("b", {}, "Generate"), ": the model runs in this browser.")));
  if (loading) loading.then((engine) => ready(engine), () => {});
  if (!watching) {
    watching = true;
    watchRefusals();
    watchWait({ url: at, runHere: () => runHereInstead(panel) });
  }
}

/**
 * The Run on radio: the controls of the mode chosen show (page.css), the precision choice (the
 * server's files) is off while this browser runs its own, and the model starts loading. Back to the
 * server, a generation running here stops: the output is the server's again.
 */
export function setMode(mode, cfg) {
  config ??= cfg;
  const here = mode === "browser";
  document.body.classList.toggle("pg-run-browser", here);
  for (const input of document.querySelectorAll("#gen-precision input")) input.disabled = here;
  if (here) load().catch(() => {}); // the panel says what went wrong
  else stop();
}

function load() {
  loading ??= loadEngine().catch((err) => {
    loading = null; // the next Generate tries again
    showProgress("", 0);
    hideProgress(panel);
    showError(`The model could not be loaded in this browser: ${err.message}`);
    throw err;
  });
  return loading;
}

const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;

async function loadEngine() {
  const t0 = performance.now();
  showProgress("Loading onnxruntime-web…", null);
  const { Engine, loadOrt } = await import(at(config.engine));
  const ort = await loadOrt(at(config.ort));
  const onProgress = ({ file, loaded, total, cached }) => {
    if (file !== "model") return;
    if (cached) showProgress("The model is in this browser's cache: preparing it…", 1);
    else if (total && loaded >= total) showProgress(`Downloaded the model (${mb(total)}): preparing it…`, 1);
    else showProgress(`Downloading the model: ${mb(loaded)}${total ? ` of ${mb(total)}` : ""} (kept in this browser for your next visit)`, total ? loaded / total : null);
  };
  for (let attempt = 1; ; attempt++) {
    try {
      // The Hub's copy first where the app names a model repository (the Space's bandwidth spared), by its digest.
      const model = config.modelSources ? { sources: config.modelSources.map(at), sha256: config.modelSha256 } : at(config.model);
      const engine = await Engine.load({ ort, model, tokenizer: at(config.tokenizer), config: at(config.config), onProgress });
      engine.seconds = (performance.now() - t0) / 1000;
      window.pgRunOnEngine = engine; // for the tests and the curious, in the console
      engine.warmUp(); // the first Generate waits for it (engine.js)
      ready(engine);
      return engine;
    } catch (err) {
      // The app lets a visitor download the model a few times at once (other tabs): wait for a turn.
      if (!/HTTP 429/.test(String(err && err.message)) || attempt >= MAX_TRIES) throw err;
      showProgress(`Waiting to download the model: your other tabs are downloading it (trying again in ${config.retryAfterS} s)…`, null);
      await sleep(config.retryAfterS * 1000);
    }
  }
}

function ready(engine) {
  const hub = /^https?:/.test(String(config.modelSources?.[0])) && engine.modelSource === at(config.modelSources[0]);
  const from = engine.cached ? ", from this browser's cache" : hub ? ", downloaded from the Hugging Face Hub" : "";
  showProgress(`The model is ready in this browser (${engine.seconds.toFixed(1)} s${from}).`, 1);
  if (panel) panel.dataset.ready = "true";
}

/** The element holding the tab's output text (its value's own root, as the server writes it). */
function outputBox() {
  const found = document.querySelector("#gen-output .gen-output");
  if (found) return found;
  const host = document.querySelector("#gen-output .prose") || document.querySelector("#gen-output");
  const box = el("div", { class: "gen-output" });
  host?.replaceChildren(box);
  return box;
}

/**
 * Generate in this browser (`s.num_samples` samples, one after the other), the text streamed
 * into the tab's output; returns what the engine drew as JSON text for the tab's views ("" when
 * nothing ran). `s`: the tab's controls, by the API's names.
 */
export async function generate(s, cfg) {
  return start(s, cfg, {});
}

/**
 * Next token in this browser: one token drawn with the settings (seeded as the server's Next
 * token: the seed plus the prompt's length in tokens), then appended to the prompt by the tab.
 */
export async function next(s, cfg) {
  return start({ ...s, max_new_tokens: 1, num_samples: 1 }, cfg, { oneToken: true });
}

async function start(s, cfg, how) {
  config ??= cfg;
  if (running) return ""; // one at a time: a second click changes nothing
  const wrong = settingsProblems(s, config.limits, how);
  if (wrong.length) {
    const text = wrong.join("; ");
    showError(text.charAt(0).toUpperCase() + text.slice(1) + ".");
    return "";
  }
  showError("");
  running = true;
  abort = new AbortController();
  try {
    return await run(s, abort.signal, how);
  } catch (err) {
    showError(`The model could not run in this browser: ${err.message}`);
    console.error(err);
    return "";
  } finally {
    running = false;
    abort = null;
  }
}

/** Stop: the generation ends before its next token. */
export function stop() {
  abort?.abort();
}

const percent = (p) => (p >= 0.001 ? `${(100 * p).toFixed(1)} %` : p > 0 ? `${(100 * p).toPrecision(2)} %` : "0 %");
const digits = (p) => Number(p.toPrecision(4)); // what the views show of a probability, and more
let runs = 0; // counted in each result, so that two equal generations still send two values

/** One step as the tab's views read it: the token, its two probabilities, then its candidates'. */
function packed(step) {
  const c = step.candidates;
  const out = [step.token, digits(c.tokenProb), digits(c.tokenSampleProb)];
  for (let i = 0; i < c.ids.length; i++) out.push(c.ids[i], digits(c.probs[i]), digits(c.sampleProbs[i]));
  return out;
}

async function run(s, signal, { oneToken = false } = {}) {
  const stats = part("pg-browser-stats");
  if (stats) stats.textContent = loading ? "Starting…" : "Loading the model into this browser…";
  showOutput();
  const t0 = performance.now();
  const engine = await load();
  const { generationSettings, keptPrompt, stepSeed } = await import(at(config.engine));
  const { ids, notice } = keptPrompt(engine.tokenizer.encode(s.prompt, { special: true }), engine.blockSize);
  const notices = notice ? [notice] : [];
  const seed = oneToken ? stepSeed(s.seed, ids.length) : s.seed;
  const box = outputBox();
  delete box.dataset.done;
  delete box.dataset.file; // the tab's views name the file once they have drawn the result
  box.className = "gen-output";
  box.dataset.runOn = "browser";
  const n = s.num_samples;
  const completions = Array.from({ length: n }, () => el("span", { class: "gen-completion" }));
  box.replaceChildren(...completions.map((completion, k) => el("div", { class: "gen-sample" },
    ...(n > 1 ? [el("div", { class: "gen-sample-title" }, `Sample ${k + 1}`)] : []), el("span", { class: "gen-prompt" }, s.prompt), completion)));
  const samples = [];
  let first = null;
  let last = null;
  let statsAt = 0;
  let yieldedAt = performance.now();
  let paintEvery = PAINT_MS;
  for (let k = 0; k < n; k++) {
    const settings = generationSettings({ ...s, seed, sample: k, n_candidates: 10 });
    const steps = [];
    const spans = [];
    let shown = "";
    let stop = "stopped";
    const pending = document.createDocumentFragment(); // tokens drawn since the last paint (emptied by each append)
    for await (const step of engine.generate(ids, settings, { signal })) {
      last = step;
      first ??= step.timeToFirstToken;
      if (step.notice && !notices.includes(step.notice)) notices.push(step.notice);
      if (step.finished) stop = step.stopReason;
      if (step.token !== null) {
        const c = step.candidates;
        steps.push(packed(step));
        const span = el("span", {
          class: "gen-tok", tabindex: "0", "data-sample": String(k), "data-step": String(step.index + 1), "data-id": String(step.token),
          style: `background: rgba(99, 102, 241, ${(0.08 + 0.5 * (1 - c.tokenSampleProb)).toFixed(2)})`,
          "data-tip": `step ${step.index + 1} · id ${step.token} · model p = ${percent(c.tokenProb)} · sampled p = ${percent(c.tokenSampleProb)}`,
        });
        shown = write(spans, shown, step.text, span);
        spans.push(span);
        pending.append(span);
      }
      const now = performance.now();
      const paint = now - yieldedAt > paintEvery;
      if (step.finished || paint) completions[k].append(pending);
      if (step.finished || (paint && now - statsAt > STATS_EVERY_MS)) {
        showStats(step, notices, { sample: k, samples: n, done: step.finished && k === n - 1 });
        box.scrollTop = box.scrollHeight;
        statsAt = now;
      }
      if (paint) {
        await yieldToPage();
        yieldedAt = performance.now();
        // what the page was given back for: the tokens' append and stats, the observers and the
        // browser's rendering of them (measured up to the loop's return, never past it)
        paintEvery = nextPaintAfter(yieldedAt - now);
      }
    }
    completions[k].append(pending); // what a stopped generation drew after its last paint
    samples.push({ steps, stop });
    if (signal.aborted) break;
  }
  while (samples.length < n) samples.push({ steps: [], stop: "stopped" }); // the samples Stop kept from starting
  if (last) showStats(last, notices, { sample: n - 1, samples: n, done: true, stopped: signal.aborted });
  if (oneToken && last && last.token !== null) showAppended(last.text);
  box.dataset.done = "true";
  runs += 1;
  return JSON.stringify({
    run: runs, samples, notices, ttft_s: first, elapsed_s: (performance.now() - t0) / 1000,
    settings: { prompt: s.prompt, max_new_tokens: s.max_new_tokens, temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, seed: s.seed, num_samples: n },
  });
}

/**
 * Writes the text up to a new token: its new characters go into the token's span. A character
 * whose bytes span two tokens decodes as U+FFFD until its last byte comes, so the text may not
 * start with what is shown: the shown spans are cut back to what they share with it first. The
 * spans together always read the engine's text.
 */
function write(spans, shown, text, span) {
  let common = shown.length;
  if (!text.startsWith(shown)) {
    common = 0;
    while (common < shown.length && shown.charCodeAt(common) === text.charCodeAt(common)) common++;
    let cut = shown.length - common;
    for (let i = spans.length - 1; cut > 0 && i >= 0; i--) {
      const t = spans[i].textContent;
      const k = Math.min(cut, t.length);
      spans[i].textContent = t.slice(0, t.length - k);
      cut -= k;
    }
  }
  span.textContent = text.slice(common);
  return text;
}

const STOP_WORDS = { eot: "eot", max_new_tokens: "max_new_tokens", stopped: "stopped" };

/** The stats line: tokens, speed, time to first token, where and on which file, why it stopped. */
function showStats(step, notices, { sample, samples, done, stopped = false }) {
  const stats = part("pg-browser-stats");
  if (!stats) return;
  const n = step.ids.length;
  const bits = [
    [...(samples > 1 ? [`sample ${sample + 1} of ${samples}: `] : []), el("b", {}, String(n)), ` new token${n === 1 ? "" : "s"}`],
    step.tokensPerS === null ? ["tokens/s –"] : [el("b", {}, step.tokensPerS.toFixed(1)), " tokens/s"],
    step.timeToFirstToken === null ? ["time to first token –"] : ["time to first token ", el("b", {}, `${(1000 * step.timeToFirstToken).toFixed(0)} ms`)],
    ["run on ", el("b", {}, "this browser"), " (", el("code", {}, "model_quantized.onnx"), ", 8-bit, onnxruntime-web)"],
  ];
  if (done) bits.push([`stopped by: ${stopped ? "stopped" : STOP_WORDS[step.stopReason] || step.stopReason}`]);
  const line = el("p", {});
  bits.forEach((b, i) => line.append(...(i ? [" · "] : []), ...b));
  stats.replaceChildren(line, ...notices.map((text) => el("p", {}, `⚠️ ${text}`)));
  stats.dataset.stopReason = done ? (stopped ? "stopped" : step.stopReason || "") : "";
}

// The prompt box changes under the learner's eyes: say what joined it (a line break would not show).
function showAppended(text) {
  const stats = part("pg-browser-stats");
  const shown = text.replace(/ /g, "⋅").replace(/\n/g, "↵").replace(/\t/g, "→");
  stats?.prepend(el("p", { class: "pg-appended" }, el("b", {}, "Next token"), ` appended “${shown}” to the prompt.`));
}

// On a phone the output is a screen and a half below the Generate button: bring the stats into
// view (only when they are not already, so a wide page does not move).
function showOutput() {
  const r = panel && panel.getBoundingClientRect();
  if (r && (r.top > window.innerHeight * 0.6 || r.bottom < 0)) panel.scrollIntoView({ behavior: "smooth", block: "start" });
}

function watchRefusals() {
  document.addEventListener("click", (e) => {
    if (e.target.closest("#gen-run, #gen-next")) askedServerAt = performance.now();
  }, true);
  const SPOTS = '[data-testid="toast-body"], #gen-error .pg-error-msg';
  new MutationObserver((records) => {
    if (performance.now() - askedServerAt > OFFER_FOR_MS) return;
    for (const r of records) {
      for (const node of r.addedNodes) {
        if (node.nodeType !== 1) continue;
        const spots = node.matches(SPOTS) ? [node] : Array.from(node.querySelectorAll(SPOTS));
        for (const spot of spots) if (BUSY.test(spot.textContent) && !spot.querySelector(".pg-run-here")) offer(spot);
      }
    }
  }).observe(document.body, { childList: true, subtree: true });
}

function offer(spot) {
  const button = el("button", { type: "button", class: "pg-run-here" }, "Run it in this browser instead");
  button.addEventListener("click", (e) => {
    e.stopPropagation();
    runHereInstead(spot);
  });
  (spot.querySelector(".toast-messages") || spot).append(button); // under the message, in a toast
}

async function runHereInstead(spot) {
  const choice = document.querySelector('#gen-run-on input[type="radio"][value="browser"]');
  if (choice && !choice.checked) choice.click(); // Gradio's own value follows (its change event calls setMode)
  setMode("browser");
  spot.closest('[data-testid="toast-body"]')?.querySelector('[data-testid="toast-close"]')?.click();
  await new Promise((resolve) => requestAnimationFrame(resolve));
  document.querySelector("#gen-run-browser")?.click();
}
