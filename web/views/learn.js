// Watch it learn, trained in this browser: the settings of the server's runs (proper or skewed
// start, learning rate, size, positions, seed; 500 steps; Stop), the loss of every step on a
// log-scale step axis against ln V, the unigram, bigram and shipped model's lines, step 0's sample
// beside the latest, the counters, the learner's runs in a table and the last three curves in
// grey, and the trained model continuing a prompt: what playground/learn/view.py draws for the
// server's runs, drawn here from the run a Web Worker trains (web/engine/learn_worker.js). One
// module for both editions: the static edition's tab (web/static/tabs/learn.js) and the app's
// "Run on: this browser" (web/app/learn_on.js) mount it with their own addresses.
//
// ctx: {el, plotly: () => Promise<Plotly>, learn: {facts, ort, wasm, threads} (addresses: learn.json,
// onnxruntime-web's folder and its WebAssembly; WebAssembly threads, default 1), progress ({show(text, fraction), hide()}), linked
// (a link's settings, or null)}.

import { fetchJSON } from "../engine/fetch.js";

const REFERENCES = [ // learn.json's references -> (label, colour, dash), as view.py's REFERENCE_STYLE
  ["ln_vocab_size", "ln V (even guess)", "#9ca3af", "dot"],
  ["unigram", "unigram", "#f59e0b", "dash"],
  ["bigram", "bigram", "#10b981", "dash"],
  ["shipped_model", "shipped model", "#6366f1", "dashdot"],
];
const LOSS_COLOUR = "#dc2626";
const HISTORY_COLOUR = "#9ca3af";
const HISTORY_RUNS = 3; // earlier runs drawn in grey
const MAX_RUNS = 8; // runs the table keeps
const STEP_TICKS = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
const BREAK_RUN = 3; // line breaks in a row shown as a count
const DRAW_MS = 250; // the chart is redrawn at most this often while a run trains (a redraw is a layout)
const X = (step) => step + 1; // a log axis has no 0: step 0 sits at its left end

const fmt = (x, digits = 2) => (x === null || x === undefined ? "-" : x.toFixed(digits));
const int = (n) => n.toLocaleString("en-US");
const secondsText = (s) => (s < 9.95 ? s.toFixed(1) : s.toFixed(0));

/** The mean loss of the last `n` steps of `losses` ([step, loss] pairs), or null. */
export function recentLoss(losses, n) {
  const tail = losses.slice(-n);
  return tail.length ? tail.reduce((a, [, l]) => a + l, 0) / tail.length : null;
}

/** A run's settings in words, as view.py's describe. */
export function describe(s) {
  return `${s.init} start, learning rate ${s.learning_rate}, ${s.size}, ${s.positions} positions, seed ${s.seed}`;
}

/** The chart's traces and layout for the run `run` (or none), the earlier `history` and the references. */
export function figure(run, history, refs, steps, recentSteps) {
  const earlier = history.filter((r) => r !== run && r.losses.length).slice(-HISTORY_RUNS);
  const target = run ? run.settings.steps : steps;
  const xEnd = X(Math.max(target, ...earlier.map((r) => r.losses[r.losses.length - 1][0])));
  const traces = earlier.map((r, i) => ({
    type: "scatter", mode: "lines", name: `earlier run: ${describe(r.settings)}`, x: r.losses.map((p) => X(p[0])), y: r.losses.map((p) => p[1]),
    line: { color: HISTORY_COLOUR, width: 1 }, opacity: 0.45 + (0.5 * (i + 1)) / earlier.length, customdata: r.losses.map((p) => p[0]),
    hovertemplate: `earlier run (${describe(r.settings)})<br>step %{customdata}: loss %{y:.3f}<extra></extra>`,
  }));
  const annotations = [];
  for (const [key, name, colour, dash] of REFERENCES) {
    const value = refs[key];
    traces.push({ type: "scatter", mode: "lines", name: `${name} ${value.toFixed(2)}`, x: [1, xEnd], y: [value, value],
      line: { color: colour, dash, width: 1.5 }, hovertemplate: `${name}: ${value.toFixed(3)}<extra></extra>` });
    annotations.push({ x: 1, xref: "paper", xanchor: "right", y: value, yanchor: "bottom", text: `${name.split(" (")[0]} ${value.toFixed(2)}`,
      showarrow: false, font: { size: 11, color: colour } });
  }
  const losses = run ? run.losses : [];
  traces.push({ type: "scatter", mode: "lines", name: "training loss", x: losses.map((p) => X(p[0])), y: losses.map((p) => p[1]),
    line: { color: LOSS_COLOUR, width: 1.5 }, customdata: losses.map((p) => p[0]),
    hovertemplate: "step %{customdata}: loss %{y:.3f} (this step's batch)<extra></extra>" });
  const recent = recentLoss(losses, recentSteps);
  const title = !losses.length ? "Loss while it learns: the lines to beat"
    : `Loss while it learns: step ${int(run.step)}, mean of the last ${Math.min(recentSteps, losses.length)} steps ${recent.toFixed(2)} nats/character`;
  const top = Math.max(...losses.slice(0, 1).map((p) => p[1]), ...earlier.map((r) => r.losses[0][1]), refs.ln_vocab_size) + 0.4;
  const ticks = STEP_TICKS.filter((t) => X(t) <= xEnd);
  const layout = {
    title: { text: title, x: 0.01, xanchor: "left", font: { size: 14 } }, height: 420, margin: { l: 56, r: 16, t: 44, b: 56 },
    showlegend: false, hovermode: "closest", annotations,
    xaxis: { type: "log", range: [0, Math.log10(xEnd)], tickmode: "array", tickvals: ticks.map(X), ticktext: ticks.map(int),
      title: { text: "step (log scale: the first steps magnified)" } },
    yaxis: { range: [0, top], title: { text: "cross-entropy (nats/character)" } },
  };
  return { traces, layout };
}

/** A sample's text as nodes: runs of BREAK_RUN or more line breaks shown as one "↵ ×N". */
function sampleNodes(el, text) {
  const parts = text.split(new RegExp(`(\\n{${BREAK_RUN},})`));
  return parts.map((part, i) => (i % 2 ? el("span", { class: "learn-breaks", title: `${part.length} line breaks in a row` }, `↵ ×${part.length}`, "\n") : part));
}

/** Why the run's step-0 loss is what it is, and where the curve is: view.py's status sentences. */
export function statusText(run, refs, recentSteps) {
  if (!run) return "Press Start: a GPT with random weights starts learning Shakespeare, one character at a time, in this browser.";
  const words = [];
  if (run.message) words.push(run.message);
  const first = run.losses.length ? run.losses[0][1] : null;
  if (first !== null) {
    const gap = first - refs.ln_vocab_size;
    words.push(`At step 0 the loss was ${first.toFixed(2)}, ln V = ${refs.ln_vocab_size.toFixed(2)}: `
      + (Math.abs(gap) < 0.15 ? "random weights guess every character about evenly."
        : `${gap >= 0 ? "+" : ""}${gap.toFixed(2)} above an even guess: the skewed start is confidently wrong, and its first steps only bring it back to ln V: training spent undoing a bad start.`));
  }
  const recent = recentLoss(run.losses, recentSteps);
  if (recent !== null && run.step >= recentSteps) {
    const beaten = [["unigram", refs.unigram], ["bigram", refs.bigram]].filter(([, v]) => recent < v).map(([n]) => n);
    words.push(`Mean of the last ${recentSteps} steps ${recent.toFixed(2)}${beaten.length ? `: below the ${beaten.join(" and ")} model${beaten.length > 1 ? "s" : ""}.` : "."}`);
  }
  if (run.valLoss !== null) words.push(`On ${run.valWords}, never trained on, it scores ${run.valLoss.toFixed(2)}.`);
  return words.join(" ");
}

function endedMessage(run) {
  if (run.stopReason === "stopped") return `Stopped after ${int(run.step)} steps.`;
  if (run.stopReason === "diverged") return `The loss became infinite at step ${int(run.step)}: the learning rate is far too high.`;
  return `Finished: ${int(run.step)} steps in ${secondsText(run.seconds)} s, in this browser.`;
}

/** learn.json, from its address (the page's controls are drawn from it before the view mounts). */
export function facts(ctx) {
  return fetchJSON(new URL(ctx.learn.facts, document.baseURI).href);
}

/** Problems with settings `s` ({seed, init, learning_rate, size, positions}), as the server's checks word them. */
export function problems(s, f) {
  const out = [];
  const maxSeed = f.limits.MAX_LEARN_SEED;
  if (!Number.isInteger(s.seed) || s.seed < 0 || s.seed > maxSeed) {
    out.push(`seed must be a whole number from 0 to ${int(maxSeed)}, not ${Number.isNaN(s.seed) || s.seed === null ? "empty" : s.seed}`);
  }
  const choices = { init: f.settings.inits, learning_rate: Object.keys(f.settings.learning_rates), size: f.settings.sizes, positions: f.settings.positions };
  for (const [name, accepted] of Object.entries(choices)) {
    if (!accepted.includes(s[name])) out.push(`${name} must be one of ${accepted.join(", ")}, not ${JSON.stringify(s[name])}`);
  }
  return out;
}

/**
 * The problem with a prompt for "Continue with your model", as the server's check words it
 * (validate_text: empty, or longer than MAX_LEARN_PROMPT_CHARS counted in code points as Python
 * counts them, an emoji one character), or null; the worker then checks its characters.
 */
export function promptProblem(prompt, f) {
  if (typeof prompt !== "string" || !prompt.trim()) return "The prompt is empty: type a few characters for your model to continue.";
  const maxChars = f.limits.MAX_LEARN_PROMPT_CHARS;
  const length = [...prompt].length;
  return length > maxChars ? `The prompt is ${int(length)} characters long; the limit is ${int(maxChars)}.` : null;
}

/**
 * Draws the outputs into `root` and opens the worker; returns {start(settings), stop(),
 * continueText(prompt, seed), state()}. start() and continueText() throw an Error whose message
 * says what was wrong (the page shows it beside its button).
 */
export async function mount(root, ctx) {
  const { el, progress } = ctx;
  const abs = (url) => url && new URL(url, document.baseURI).href; // the worker resolves against its own address
  const f = await facts(ctx);
  const worker = new Worker(new URL("../engine/learn_worker.js", import.meta.url), { type: "module" });
  const t = f.training;
  const steps = f.settings.defaults.steps;
  const onState = ctx.onState || (() => {});
  const error = el("div", { class: "pg-error", id: "lrn-error", role: "alert", hidden: true });
  const status = el("div", { id: "lrn-status", class: "learn-status" });
  const stats = el("div", { class: "pg-cards", id: "lrn-stats" });
  const chart = el("div", { class: "pg-plot", id: "lrn-chart" });
  const samples = el("div", { id: "lrn-samples" });
  const runs = el("div", { id: "lrn-runs", class: "learn-runs" });
  const tryOut = el("div", { class: "gen-output", id: "lrn-try-out" });
  root.append(error, status, stats, chart, samples, runs, tryOut);

  const history = []; // the page's earlier runs (their curves and table rows), oldest first
  let run = null;
  let drawnAt = 0;
  let timer = null;
  let ready = false;
  const valWords = `${t.val_windows} windows of ${f.models[Object.keys(f.models)[0]].config.block_size} characters from the held-out plays`;
  const tell = () => onState({ ready, running: Boolean(run && run.running), trained: Boolean(run && !run.running && run.losses.length) });

  function showError(box, text) {
    box.hidden = !text;
    box.textContent = text ? `⚠ ${text}` : "";
  }

  function cards() {
    const r = run;
    const recent = r ? recentLoss(r.losses, t.recent_steps) : null;
    const items = r ? [[`${int(r.step)} / ${int(r.settings.steps)}`, "steps"], [int(r.tokens), "tokens seen"],
      [int(Math.round(r.seconds ? r.tokens / r.seconds : 0)), "tokens / s"], [fmt(recent), `loss now (mean of last ${t.recent_steps} steps)`],
      [secondsText(r.seconds), "seconds"]]
      : [["-", "steps"], ["-", "tokens seen"], ["-", "tokens / s"], ["-", `loss now (mean of last ${t.recent_steps} steps)`], ["-", "seconds"]];
    stats.replaceChildren(...items.map(([v, what]) => el("div", { class: "pg-card" }, el("b", {}, v), el("span", {}, what))));
  }

  function drawSamples() {
    if (!run || !run.samples.length) {
      samples.replaceChildren(el("div", { class: "gen-output pg-subdued" }, `Samples of the model's text appear here: step 0's beside the latest (one every ${t.sample_every} steps).`));
      return;
    }
    const box = (step, text, label) => {
      const why = text && [...new Set(text)].join("") === "\n" ? el("span", { class: "pg-subdued" }, " (nothing but line breaks: the model is sure of one character, and wrong)") : "";
      return el("div", { class: "gen-sample", "data-step": String(step), "data-text": text }, el("div", { class: "gen-sample-title" }, label), ...sampleNodes(el, text.trimEnd()), why);
    };
    const first = run.samples[0];
    const latest = run.samples[run.samples.length - 1];
    const pair = [box(first[0], first[1], "step 0: random weights")];
    if (latest !== first) pair.push(box(latest[0], latest[1], `step ${int(latest[0])}: the latest`));
    const older = run.samples.slice(1, -1).reverse().slice(0, 4).map(([k, text]) => box(k, text, `step ${int(k)}`));
    samples.replaceChildren(el("div", { class: "gen-output learn-samples" },
      el("div", { class: "learn-sample-pair", style: "display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:12px" }, ...pair), ...older));
  }

  function drawTable() {
    const all = [...history, ...(run && !history.includes(run) ? [run] : [])].filter((r) => r.losses.length);
    if (!all.length) {
      runs.replaceChildren(el("div", { class: "pg-subdued" }, "Your runs will be listed here, to compare their settings."));
      return;
    }
    const rows = all.map((r, i) => el("tr", {}, el("td", {}, String(i + 1)), el("td", {}, describe(r.settings)),
      el("td", {}, `${int(r.step)} / ${int(r.settings.steps)} (${r.stopReason || "training"})`), el("td", {}, r.losses[0][1].toFixed(3)),
      el("td", {}, recentLoss(r.losses, t.recent_steps).toFixed(3)),
      el("td", {}, r.valLoss !== null ? r.valLoss.toFixed(3) : r.stopReason === "stopped" ? "not scored: stopped" : r.stopReason ? "-" : "at the end"))).reverse();
    runs.replaceChildren(el("div", { style: "overflow-x:auto" }, el("table", { class: "pg-table learn-runs-table" },
      el("thead", {}, el("tr", {}, ...["run", "settings", "steps", "loss at step 0", `training loss (mean of last ${t.recent_steps} steps)`,
        `held-out loss (${t.val_windows} windows, ${int(t.val_windows * 64)} characters)`].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...rows))));
  }

  async function drawChart() {
    const Plotly = await ctx.plotly();
    const { traces, layout } = figure(run, history, f.references, steps, t.recent_steps);
    await Plotly.react(chart, traces, layout, { displayModeBar: false, responsive: true });
    chart.dataset.points = String(run ? run.losses.length : 0);
  }

  function draw(now = false) {
    const due = () => {
      timer = null;
      drawnAt = performance.now();
      try {
        status.textContent = statusText(run, f.references, t.recent_steps);
        cards();
        drawSamples();
        drawTable();
        drawChart().catch((err) => showError(error, `The chart could not be drawn: ${err.message}`));
      } catch (err) {
        showError(error, `The page could not show the run: ${err.message}`);
        console.error(err);
      }
    };
    if (now) {
      clearTimeout(timer);
      due();
    } else if (!timer) {
      timer = setTimeout(due, Math.max(0, DRAW_MS - (performance.now() - drawnAt)));
    }
  }

  const continued = new Map();
  let nextId = 0;
  // A worker whose modules fail to load (a missing export, a file not served) posts nothing: its
  // error event is the only word of it, and without this the page would say "Loading…" for ever.
  worker.onerror = (event) => {
    event.preventDefault();
    worker.onmessage({ data: { type: "error", during: "open", message: `its worker did not start (${event.message || "a module failed to load"})` } });
  };
  worker.onmessage = ({ data: msg }) => {
    if (msg.type === "progress") {
      const { what, loaded, cached } = msg;
      const total = msg.total >= loaded ? msg.total : 0; // a compressed transfer's length counts other bytes
      if (msg.note) progress.show(msg.note, null);
      else if (cached) progress.show(`${what}: from this browser's cache`, 1);
      else progress.show(`Downloading ${what}: ${(loaded / 1e6).toFixed(1)} MB${total ? ` of ${(total / 1e6).toFixed(1)} MB` : ""} (kept in this browser for your next visit)`, total ? loaded / total : null);
    } else if (msg.type === "ready") {
      progress.show(`Watch it learn is ready in this browser (${msg.seconds.toFixed(1)} s): the training runs here, on this device.`, 1);
      setTimeout(() => progress.hide(), 1500);
      ready = true;
      root.dataset.ready = "true";
      tell();
    } else if (msg.type === "step") {
      run.losses.push([msg.step, msg.loss]);
      run.step = msg.step + 1;
      run.tokens = msg.tokens;
      run.seconds = msg.seconds;
      if (run.step === 1) run.firstStepMs = performance.now() - run.startedAt;
      draw();
    } else if (msg.type === "sample") {
      run.samples.push([msg.step, msg.text]);
      draw();
    } else if (msg.type === "end") {
      Object.assign(run, { step: msg.step, stopReason: msg.stopReason, valLoss: msg.valLoss, seconds: msg.seconds, running: false });
      run.message = endedMessage(run);
      root.dataset.running = "false";
      tell();
      draw(true);
    } else if (msg.type === "continued") {
      continued.get(msg.id)?.resolve(msg.text);
    } else if (msg.type === "error") {
      if (msg.during === "continue") continued.get(msg.id)?.reject(new Error(msg.message));
      else {
        showError(error, msg.during === "open" ? `Watch it learn could not start in this browser: ${msg.message}` : msg.message);
        if (run && run.running) {
          run.running = false;
          run.stopReason = "failed";
          run.message = `The run failed: ${msg.message}`;
        }
        if (msg.during === "open") ready = false;
        root.dataset.running = "false";
        tell();
        draw(true);
      }
    }
  };

  /** A run of settings `s` ({seed, init, learning_rate, size, positions}; the page's 500 steps). */
  function start(s) {
    const wrong = problems(s, f);
    if (wrong.length) throw new Error(`${wrong.join("; ")}.`);
    if (!ready) throw new Error("Watch it learn is still loading into this browser: press Start again in a moment.");
    if (run && run.running) throw new Error("a run is training already: press Stop first.");
    showError(error, "");
    if (run && run.losses.length) history.push(run);
    history.splice(0, Math.max(0, history.length - MAX_RUNS));
    const settings = { seed: s.seed, init: s.init, learning_rate: s.learning_rate, size: s.size, positions: s.positions, steps: s.steps ?? steps };
    run = { settings, losses: [], samples: [], step: 0, tokens: 0, seconds: 0, valLoss: null, stopReason: "", message: "",
      running: true, startedAt: performance.now(), valWords };
    root.dataset.running = "true";
    worker.postMessage({ type: "start", settings });
    tell();
    draw(true);
  }

  /** `prompt` continued by the last run's model (the seed picks the draws): resolves to its text, shown under the runs. */
  async function continueText(prompt, seed) {
    const problem = promptProblem(prompt, f);
    if (problem) throw new Error(problem);
    const id = nextId++;
    const done = new Promise((resolve, reject) => continued.set(id, { resolve, reject }));
    worker.postMessage({ type: "continue", id, prompt, seed: Number.isInteger(seed) ? seed : 0 });
    try {
      const text = await done;
      tryOut.replaceChildren(el("span", { class: "gen-prompt" }, prompt), text);
      tryOut.dataset.done = "true";
      return text;
    } finally {
      continued.delete(id);
    }
  }

  draw(true);
  tell();
  progress.show("Loading Watch it learn into this browser…", null);
  worker.postMessage({ type: "open", ort: abs(ctx.learn.ort), wasm: abs(ctx.learn.wasm), facts: abs(ctx.learn.facts), threads: ctx.learn.threads || 1 });
  const api = {
    start,
    stop: () => worker.postMessage({ type: "stop" }),
    prepare: (size, positions) => worker.postMessage({ type: "prepare", size, positions }), // a setting chosen: its first step before Start
    continueText,
    state: () => ({ run, history }), // for the benchmark, the tests and the curious, in the console
  };
  window.pgLearn = api;
  return api;
}
