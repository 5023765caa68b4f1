// Watch it learn's Web Worker: trains the learner's GPT off the page's thread (learn.js), so the
// page keeps drawing and answering while a step runs. One worker a page, kept for the page's life:
// once its files are loaded (onnxruntime-web, the graphs, the corpus) a run needs no network, so
// a second run trains even when the server that sent the page has gone.
//
// Messages in: {type: "open", ort, wasm, facts, threads} (addresses; WebAssembly threads), {type: "start", settings},
// {type: "stop"}, {type: "continue", prompt, seed, id}. Out: {type: "progress", what, loaded,
// total, cached}, {type: "ready", seconds}, the run's events (learn.js's runSteps: "step",
// "sample", "end"), {type: "continued", id, text} and {type: "error", message, during}.

import { loadOrt } from "./engine.js";
import { fetchBytes, fetchJSON } from "./fetch.js";
import { LearnModel, batch, continuePrompt, runSteps, startWeights } from "./learn.js";

let opened = null; // Promise<{ort, facts, data, heldout, graphs}>
const models = new Map(); // "size-positions" -> Promise<LearnModel>: at most 4, one per graph pair
let stopping = false;
let running = false;
let trained = null; // {model, params}: the last run's model, for "continue"

// A turn for the messages between steps (Stop): a message, not setTimeout, which is clamped.
const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => waiting.shift()?.();
const pause = () => new Promise((resolve) => { waiting.push(resolve); channel.port2.postMessage(null); });

const post = (msg) => self.postMessage(msg);
const reporter = (what) => ({ loaded, total, cached }) => post({ type: "progress", what, loaded, total, cached });

async function open({ ort: ortBase, wasm, facts: factsUrl, threads = 1 }) {
  const t0 = performance.now();
  const base = new URL(factsUrl, self.location.href);
  const at = (path) => new URL(path, new URL("..", base)).href; // learn.json's addresses are relative to the folder above learn/
  const [ort, facts] = await Promise.all([
    loadOrt(new URL(ortBase, self.location.href).href, { threads, wasm: wasm && new URL(wasm, self.location.href).href, onProgress: reporter("onnxruntime-web") }),
    fetchJSON(base.href),
  ]);
  const [train, heldout, ...graphs] = await Promise.all([
    fetchBytes(at(facts.corpus.train), reporter("the training text")),
    fetchBytes(at(facts.corpus.heldout)),
    ...Object.values(facts.models).flatMap((m) => [fetchBytes(at(m.step), reporter("the training step graphs")), fetchBytes(at(m.forward))]),
  ]);
  const bytes = {};
  Object.keys(facts.models).forEach((key, i) => { bytes[key] = { step: graphs[2 * i].bytes, forward: graphs[2 * i + 1].bytes }; });
  const o = { ort, facts, data: train.bytes, heldout: heldout.bytes, bytes };
  post({ type: "progress", note: "Preparing the training step: a first step nobody sees (the next ones are faster)…" });
  warmed.add(defaultKey(facts));
  await warmUp(o, defaultKey(facts));
  post({ type: "ready", seconds: (performance.now() - t0) / 1000, cached: train.cached });
  return o;
}

const defaultKey = (facts) => `${facts.settings.defaults.size}-${facts.settings.defaults.positions}`;
const warmed = new Set(); // the models whose first step has run

/**
 * The default model's sessions opened and one step and one forward pass run on its untrained
 * weights, thrown away: onnxruntime-web's first run of a graph took 5 s where the next took 0.5
 * (WebAssembly compiled again by the optimising tier, kernels set up), which the learner's first
 * point waited for.
 */
async function warmUp(o, key) {
  const m = await model(o, key);
  const t = o.facts.training;
  const weights = startWeights(m.entry.spec, 0, "proper", t.skew);
  m.trainer.start(weights);
  const { idx, targets } = batch(o.data, 0, 0, m.block, t.batch_size);
  await m.trainer.train(idx, targets, [t.batch_size, m.block], 0);
  await m.draw([o.facts.vocabulary.start_id], [0.5, 0.5], weights);
}

function model(o, key) {
  if (!models.has(key)) {
    const entry = o.facts.models[key];
    if (!entry) throw new RangeError(`no model ${key}`);
    const made = LearnModel.create(o.ort, entry, o.bytes[key].step, o.bytes[key].forward);
    made.catch(() => models.delete(key));
    models.set(key, made);
  }
  return models.get(key);
}

async function start(settings) {
  if (running) throw new Error("a run is training in this page already: press Stop first");
  running = true;
  trained = null;
  try {
    const o = await opened;
    const m = await model(o, `${settings.size}-${settings.positions}`);
    for await (const event of runSteps(m, o.facts, o.data, o.heldout, settings, { stopped: () => stopping, pause })) post(event);
    trained = { model: m, params: m.trainer.state };
  } finally {
    running = false;
  }
}

// One piece of work on the sessions at a time (a warm-up, a run, a continuation), in the order asked;
// Stop is not queued behind the run it stops.
let turn = Promise.resolve();
const inTurn = (work) => {
  const mine = turn.then(work);
  turn = mine.catch(() => {});
  return mine;
};

self.onmessage = ({ data: msg }) => {
  if (msg.type === "stop") return handle(msg);
  if (msg.type === "start") stopping = false; // now: a Stop sent while this run waits its turn still stops it
  return inTurn(() => handle(msg));
};

async function handle(msg) {
  try {
    if (msg.type === "open") {
      opened ??= open(msg).catch((err) => { opened = null; throw err; });
      await opened;
    } else if (msg.type === "start") {
      await start(msg.settings);
    } else if (msg.type === "prepare") { // a size or position kind chosen: its first step, unseen, before Start
      const o = await opened;
      const key = `${msg.size}-${msg.positions}`;
      if (o.facts.models[key] && !warmed.has(key) && !running) {
        warmed.add(key);
        await warmUp(o, key);
      }
    } else if (msg.type === "stop") {
      stopping = true;
    } else if (msg.type === "continue") {
      if (running) throw new Error("your model is still training: try it when the run ends, or press Stop");
      if (!trained) throw new Error("there is no trained model yet: press Start and let a run finish (or stop it) first");
      const o = await opened;
      const text = await continuePrompt(trained.model, o.facts, trained.params, msg.prompt, msg.seed, o.facts.training.continue_chars);
      post({ type: "continued", id: msg.id, text });
    }
  } catch (err) {
    post({ type: "error", during: msg.type, id: msg.id, message: String(err && err.message ? err.message : err) });
  }
}
