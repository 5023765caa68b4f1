// Text generation, in the browser: the model continues a prompt token by token on this device,
// streamed as it comes, with Stop, tokens/s, time to first token, and the candidates the model
// weighed at each step (click a token) from the browser's own logits.

import { pyLength, pyStrip } from "../checks.js";
import { generationSettings, keptPrompt, stepSeed } from "../engine/engine.js";
import { isCached } from "../engine/fetch.js";

// A phone's screen, as style.css's phone rules: its download waits for Generate.
const PHONE_QUERY = "(max-width: 600px)";
// What the first token needs, by their keys in site.json's files (plotly.js comes after, for the chart).
const FIRST_TOKEN_FILES = { "model/model.onnx": "the model", "vendor/ort/ort-wasm-simd-threaded.wasm.gz": "onnxruntime-web", "model/tokenizer.json": "the tokenizer" };

const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;

/** "Before its first token this page downloads 21.9 MB: …" from the files' sizes in site.json. */
export function downloadNote(site) {
  const sizes = Object.entries(FIRST_TOKEN_FILES).map(([file, what]) => [what, site.bytes[file]]);
  const total = sizes.reduce((sum, [, n]) => sum + n, 0);
  return `Before its first token this page downloads ${mb(total)} (${sizes.map(([what, n]) => `${what} ${mb(n)}`).join(", ")}), `
    + `then plotly.js ${mb(site.bytes["vendor/plotly/plotly.min.js.gz"])} for the chart; once: this browser keeps them for your next visit.`;
}

// The page is given back to the browser (to paint the new tokens, to take a click on Stop) every
// PAINT_MS, and the tokens drawn meanwhile join the page in one piece when it is: a paint and
// its layout cost more than a token at this model's size, so painting at the frame rate (33 ms)
// held the page's Generate to about half the engine's speed alone (docs/browser.md, measured).
// Ten paints a second still show the text growing. A message, not setTimeout(0): timers are
// clamped and throttled.
export const PAINT_MS = 100;
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()?.();
const yieldToPage = () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(null); });

const percent = (p) => (p >= 0.001 ? `${(100 * p).toFixed(1)} %` : p > 0 ? `${(100 * p).toPrecision(2)} %` : "0 %");
const shownToken = (s) => s.replace(/ /g, "⋅").replace(/\n/g, "↵").replace(/\t/g, "→");

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const spec = Object.fromEntries(site.links.generation.map((p) => [p.name, p]));
  const d = { ...site.defaults.generation, ...(linked || {}) };
  const prompt = el("textarea", { id: "gen-prompt", rows: 4, "aria-label": "Prompt" });
  prompt.value = d.text;
  const number = (name, label, step) => {
    const p = spec[name];
    const input = el("input", { type: "number", id: `gen-${name}`, min: p.minimum, max: p.maximum, step, value: d[name] });
    return { input, box: el("div", { class: "pg-col", style: "flex: 1 1 140px" }, el("label", { for: `gen-${name}` }, label), input) };
  };
  const controls = {
    max_new_tokens: number("max_new_tokens", "Max new tokens", 1),
    temperature: number("temperature", "Temperature (0 = greedy)", 0.05),
    top_k: number("top_k", "Top-k (0 = no cut)", 1),
    top_p: number("top_p", "Top-p (1 = no cut)", 0.01),
    seed: number("seed", "Seed", 1),
  };
  const slow = el("input", { type: "checkbox", id: "gen-slow" });
  const generate = el("button", { class: "pg-btn primary", type: "button", id: "gen-run" }, "Generate");
  const next = el("button", { class: "pg-btn", type: "button", id: "gen-next", title: "Draw one token with these settings and append it to the prompt" }, "Next token");
  const stop = el("button", { class: "pg-btn", type: "button", id: "gen-stop", disabled: true }, "Stop");
  const error = el("div", { class: "pg-error", id: "gen-error", hidden: true });
  const output = el("div", { class: "gen-output", id: "gen-output" }, el("span", { class: "pg-subdued" }, "Press Generate: the model runs in this browser."));
  const stats = el("div", { class: "pg-cards", id: "gen-stats" });
  const notice = el("div", { class: "pg-note", id: "gen-notice" });
  const chart = el("div", { class: "pg-plot", id: "gen-chart" });
  const chartNote = el("div", { class: "pg-note", id: "gen-chart-note" }, "Click a generated token to see the candidates the model weighed at that step.");

  const download = el("div", { class: "pg-note", id: "gen-download" }, downloadNote(site));

  // Generate right under the prompt, the settings after it: on a phone the button, the download's
  // size and its progress (the page's bar, above the tab) are then on the first screen.
  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col" },
      el("label", { for: "gen-prompt" }, "Prompt"), prompt,
      el("div", { class: "gen-buttons" }, generate, next, stop), download, error,
      el("div", { class: "pg-examples" }, ...site.examples.generation.map((x) => el("button", { type: "button", onclick: () => { prompt.value = x; } }, x.split("\n")[0]))),
      el("div", { class: "pg-row", style: "gap: 8px" }, ...Object.values(controls).map((c) => c.box)),
      el("label", { class: "inline" }, slow, "Slow motion (one token every 0.15 s, to watch the text grow)")),
    el("div", { class: "pg-col" }, output, stats, notice)));
  root.append(el("h2", {}, "The candidates of a step"), chartNote, chart);

  let engine = null;
  let abort = null;
  let steps = [];

  function settings() {
    const out = {};
    const messages = [];
    for (const [name, c] of Object.entries(controls)) {
      const p = spec[name];
      const v = Number(c.input.value);
      const bad = c.input.value.trim() === "" || !Number.isFinite(v) || (p.kind === "int" && !Number.isInteger(v))
        || v > p.maximum || (p.min_inclusive ? v < p.minimum : v <= p.minimum);
      if (bad) messages.push(`${name} must be ${p.accepted}, not ${JSON.stringify(c.input.value)}`);
      out[name] = v;
    }
    return { out, messages };
  }

  function fail(message) {
    error.hidden = false;
    error.textContent = message;
    output.classList.add("pg-stale");
  }

  async function ready() {
    if (engine) return engine;
    output.replaceChildren(el("span", { class: "pg-subdued" }, "Loading the model into this browser…"));
    engine = await ctx.engine();
    download.textContent = `Runs in this browser with onnxruntime-web, on ${site.model.file}.`;
    ctx.plotly();
    output.dataset.ready = "true";
    return engine;
  }

  async function run({ oneToken = false } = {}) {
    const { out, messages } = settings();
    const text = prompt.value;
    if (!pyStrip(text)) messages.unshift("the prompt is empty: type some text for the model to continue");
    const length = pyLength(text); // characters as the app counts them: an emoji is one
    if (length > site.limits.MAX_PROMPT_CHARS) messages.unshift(`the prompt is ${length.toLocaleString("en-US")} characters long; the limit is ${site.limits.MAX_PROMPT_CHARS.toLocaleString("en-US")}`);
    if (messages.length) return fail(messages.join("; "));
    error.hidden = true;
    output.classList.remove("pg-stale");
    generate.disabled = next.disabled = true;
    stop.disabled = false;
    abort = new AbortController();
    try {
      const eng = await ready();
      // The prompt and the seed as the app's tab takes them: the same text for the same seed and file.
      const { ids, notice: cut } = keptPrompt(eng.tokenizer.encode(text, { special: true }), eng.blockSize);
      const s = generationSettings({ ...out, max_new_tokens: oneToken ? 1 : out.max_new_tokens, seed: oneToken ? stepSeed(out.seed, ids.length) : out.seed });
      notice.textContent = cut ?? "";
      const promptSpan = el("span", { class: "gen-prompt" }, text);
      const completion = el("span", { id: "gen-completion" });
      output.replaceChildren(promptSpan, completion);
      steps = [];
      let last = null;
      let pending = document.createDocumentFragment(); // tokens drawn since the last paint
      let yieldedAt = performance.now();
      const paint = (step) => {
        completion.append(pending);
        pending = document.createDocumentFragment();
        showStats(step, eng, s); // the cards and the scroll once a paint: each is a layout
        output.scrollTop = output.scrollHeight;
      };
      for await (const step of eng.generate(ids, s, { signal: abort.signal })) {
        last = step;
        if (step.token !== null) {
          steps.push(step);
          pending.append(el("span", { class: "gen-tok", "data-step": String(steps.length - 1), title: `step ${steps.length}: id ${step.token}` }, step.piece));
        }
        if (step.notice) notice.textContent = step.notice;
        if (step.finished) paint(step);
        else if (slow.checked) {
          paint(step);
          await new Promise((r) => setTimeout(r, 150));
        } else if (performance.now() - yieldedAt > PAINT_MS) {
          paint(step);
          await yieldToPage();
          yieldedAt = performance.now();
        }
      }
      completion.append(pending); // what a stopped generation drew after its last paint
      output.dataset.done = "true";
      if (oneToken && last && last.token !== null) {
        prompt.value = text + last.text; // the drawn token joins the prompt, as the app's Next token does
        notice.textContent = `Next token appended “${shownToken(last.text)}” (id ${last.token}) to the prompt.`;
      }
      if (steps.length) await draw(steps.length - 1);
    } catch (err) {
      fail(`The model could not run in this browser: ${err.message}`);
      console.error(err);
    } finally {
      generate.disabled = next.disabled = false;
      stop.disabled = true;
      abort = null;
    }
  }

  function showStats(step, eng, s) {
    const cards = [
      [step.ids.length, "new tokens"],
      [step.tokensPerS === null ? "–" : step.tokensPerS.toFixed(0), "tokens / s"],
      [step.timeToFirstToken === null ? "–" : `${(1000 * step.timeToFirstToken).toFixed(0)} ms`, "to the first token"],
      // which engine and file: a seed's text holds for these, not for the app's model.onnx or model_int8.onnx
      ["this browser", `${s.temperature === 0 ? "greedy" : `seed ${s.seed}`}: onnxruntime-web, 8-bit model_quantized.onnx`],
    ];
    stats.replaceChildren(...cards.map(([n, what]) => el("div", { class: "pg-card" }, el("b", {}, String(n)), el("span", {}, what))));
    stats.dataset.stopReason = step.stopReason || "";
    if (step.finished) {
      const why = { eot: "it wrote <|endoftext|>", max_new_tokens: "it reached max new tokens", stopped: "you pressed Stop" }[step.stopReason] || "";
      notice.textContent = `${notice.textContent && !notice.textContent.startsWith("Stopped") ? notice.textContent + " " : ""}Finished: ${why}.`;
    }
  }

  async function draw(index) {
    const step = steps[index];
    if (!step || !step.candidates) return;
    for (const t of output.querySelectorAll(".gen-tok.chosen")) t.classList.remove("chosen");
    output.querySelector(`.gen-tok[data-step="${index}"]`)?.classList.add("chosen");
    const c = step.candidates;
    const Plotly = await ctx.plotly();
    const ids = Array.from(c.ids);
    const labels = ids.map((id) => `${shownToken(engine.tokenizer.tokenText(id))} (${id})`);
    const colours = ids.map((id) => (id === step.token ? "#f97316" : "#6366f1"));
    const model = Array.from(c.probs);
    const sample = Array.from(c.sampleProbs);
    const data = [
      { type: "bar", orientation: "h", name: "the model (temperature 1)", x: model.slice().reverse(), y: labels.slice().reverse(), marker: { color: colours.slice().reverse() }, hovertemplate: "%{x:.2%}<extra>model</extra>" },
      { type: "bar", orientation: "h", name: "drawn from (the settings)", x: sample.slice().reverse(), y: labels.slice().reverse(), marker: { color: "rgba(249,115,22,0.35)" }, hovertemplate: "%{x:.2%}<extra>sampling</extra>" },
    ];
    const title = `Step ${index + 1}: drew “${shownToken(engine.tokenizer.tokenText(step.token))}” (model ${percent(c.tokenProb)}, drawn with ${percent(c.tokenSampleProb)})`;
    await Plotly.react(chart, data, {
      // The legend well below the axis title: at y -0.15 the two overlapped on a phone.
      title: { text: title, font: { size: 14 } }, barmode: "group", height: 400, margin: { l: 140, r: 20, t: 50, b: 90 },
      xaxis: { tickformat: ".0%", title: { text: "probability", standoff: 4 } }, legend: { orientation: "h", x: 0, y: -0.2, yanchor: "top" },
    }, { displayModeBar: false, responsive: true });
    chart.dataset.step = String(index + 1);
  }

  // One listener for every token (a listener a token was work in the generation's loop).
  output.addEventListener("click", (e) => {
    const tok = e.target.closest?.(".gen-tok");
    if (tok) draw(Number(tok.dataset.step));
  });
  generate.addEventListener("click", () => run());
  next.addEventListener("click", () => run({ oneToken: true }));
  stop.addEventListener("click", () => abort && abort.abort());
  // On a laptop the model is loaded as soon as the tab opens: the first Generate then starts at
  // once, and the page keeps working if the connection goes. On a phone whose browser does not
  // hold it yet, the download waits for Generate: the note above says how much it is first.
  const load = () => ready().then(() => {
    output.replaceChildren(el("span", { class: "pg-subdued" }, `The model is loaded in this browser (${engine.loadSeconds.toFixed(1)} s${engine.cached ? ", from the cache" : ""}). Press Generate.`));
  }, (err) => fail(`The model could not be loaded: ${err.message}`));
  if (!matchMedia(PHONE_QUERY).matches || (await isCached(site.files["model/model.onnx"]))) load();
  else output.replaceChildren(el("span", { class: "pg-subdued" }, "Press Generate: the model is downloaded first (see above), then runs in this browser."));
  return {
    settings: () => ({ text: prompt.value, ...Object.fromEntries(Object.entries(controls).map(([k, c]) => [k, Number(c.input.value)])) }),
  };
}
