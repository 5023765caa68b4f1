// Watch it learn in the static edition: the settings' controls, Start, Stop and "Continue with
// your model" around the view that trains in this browser (web/views/learn.js), given the
// folder's addresses: learn/learn.json (playground/learn/files.py) and onnxruntime-web.

import { facts as learnFacts, mount as mountView } from "../views/learn.js";

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const learn = {
    facts: site.files["learn/learn.json"], ort: "./vendor/ort/", wasm: site.files["vendor/ort/ort-wasm-simd-threaded.wasm.gz"],
    // One WebAssembly thread unless a developer asks (benchmarks/browser_learn.py measures more, on an isolated page).
    threads: Number(globalThis.localStorage?.getItem("pg-learn-threads")) || 1,
  };
  const f = await learnFacts({ learn });
  const d = { ...f.settings.defaults, ...(linked || {}) };
  const t = f.training;
  const radio = (name, label, choices, why) => {
    const box = el("fieldset", { class: "learn-choice", id: `lrn-${name}` }, el("legend", {}, label));
    for (const c of choices) box.append(el("label", { class: "inline" }, el("input", { type: "radio", name: `lrn-${name}`, value: c, checked: c === d[name] }), c));
    box.append(el("div", { class: "pg-note" }, choices.map((c) => `${c}: ${why[c]}`).join("; ") + "."));
    return box;
  };
  const controls = {
    init: radio("init", "Initialisation", f.settings.inits, f.why.init),
    learning_rate: radio("learning_rate", "Learning rate", Object.keys(f.settings.learning_rates), f.why.learning_rate),
    size: radio("size", "Model size", f.settings.sizes, f.why.size),
    positions: radio("positions", "Positions", f.settings.positions, f.why.positions),
  };
  const seed = el("input", { type: "number", id: "lrn-seed", min: 0, max: f.limits.MAX_LEARN_SEED, step: 1, value: d.seed });
  const start = el("button", { class: "pg-btn primary", type: "button", id: "lrn-start", disabled: true }, `Start (${d.steps.toLocaleString("en-US")} steps)`);
  const stop = el("button", { class: "pg-btn", type: "button", id: "lrn-stop", disabled: true }, "Stop");
  const error = el("div", { class: "pg-error", id: "lrn-start-error", role: "alert", hidden: true });
  const prompt = el("textarea", { id: "lrn-prompt", rows: 2, "aria-label": "Prompt for your model" });
  prompt.value = d.text ?? "Romeo.\n";
  const tryButton = el("button", { class: "pg-btn", type: "button", id: "lrn-try", disabled: true }, "Continue with your model");
  const tryError = el("div", { class: "pg-error", id: "lrn-try-error", role: "alert", hidden: true });
  const outputs = el("div", { class: "learn-outputs" });
  root.append(el("div", { class: "pg-note learn-intro", html: f.words.intro }));
  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col learn-controls" }, ...Object.values(controls),
      el("label", { for: "lrn-seed" }, "Seed (the initial weights and the batches: same seed and settings, same curve, here and on the server)"), seed,
      el("div", { class: "gen-buttons" }, start, stop), error,
      el("label", { for: "lrn-prompt" }, `Try your model: when a run has ended, the model it trained writes ${t.continue_chars} characters after your prompt`),
      prompt, tryButton, tryError),
    el("div", { class: "pg-col", style: "flex: 2 1 420px" }, outputs)));
  root.append(el("div", { class: "pg-note", html: f.words.reading }));

  const show = (box, text) => {
    box.hidden = !text;
    box.textContent = text ? `⚠ ${text.charAt(0).toUpperCase()}${text.slice(1)}` : "";
  };
  const chosen = (name) => controls[name].querySelector("input:checked")?.value;
  const settings = () => ({
    seed: seed.value.trim() === "" ? null : Number(seed.value), init: chosen("init"), learning_rate: chosen("learning_rate"),
    size: chosen("size"), positions: chosen("positions"),
  });
  const view = await mountView(outputs, {
    ...ctx, learn,
    onState: ({ ready, running, trained }) => {
      start.disabled = !ready || running;
      stop.disabled = !running;
      tryButton.disabled = running || !trained;
    },
  });
  start.addEventListener("click", () => {
    try {
      show(error, "");
      view.start(settings());
    } catch (err) {
      show(error, err.message);
    }
  });
  stop.addEventListener("click", () => view.stop());
  for (const name of ["size", "positions"]) controls[name].addEventListener("change", () => view.prepare(chosen("size"), chosen("positions")));
  tryButton.addEventListener("click", async () => {
    show(tryError, "");
    tryButton.disabled = true;
    try {
      await view.continueText(prompt.value, Number(seed.value));
    } catch (err) {
      show(tryError, err.message);
    } finally {
      tryButton.disabled = false;
    }
  });
  return { settings: () => ({ ...settings(), text: prompt.value }) };
}
