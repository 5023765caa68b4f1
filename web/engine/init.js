// A fresh GPT's initial weights, drawn in the browser as the server draws them
// (playground/initial.py): each parameter of the spec the export writes (name, shape, GPT-2's rule
// from model.gpt.init_rule, its lane) filled from the shared generator's INIT stream (draws.js).
// The same seed gives the same untrained model here and in PyTorch, with nothing to download.

import { STREAMS, normal } from "./draws.js";

// Normals drawn per call: the embedding's 12.9 M at once would hold 300 MB of doubles on the way
// (normal() draws two uniforms a normal), more than a phone's tab has; pieces hold 1.5 MB.
const CHUNK = 1 << 16;

const count = (p) => p.shape.reduce((a, b) => a * b, 1);

/** Normals `start` .. `start + w.length` of `lane` times `std` into `w`, yielding after each piece. */
function* normals(w, seed, lane, std, start) {
  for (let at = 0; at < w.length; at += CHUNK) {
    const z = normal(seed, STREAMS.init, Math.min(CHUNK, w.length - at), start + at, lane);
    for (let i = 0; i < z.length; i++) w[at + i] = z[i] * std;
    yield z.length;
  }
}

/** normals() at once (init_worker.js draws its piece so). */
export function fillNormals(w, seed, lane, std, start = 0) {
  for (const _ of normals(w, seed, lane, std, start));
}

/** Every parameter of `spec` allocated (zeros and ones filled); the normal ones listed to draw. */
function allocate(spec) {
  const out = {};
  const todo = [];
  for (const p of spec) {
    const w = (out[p.name] = new Float32Array(count(p)));
    if (p.kind === "normal") todo.push({ p, w });
    else if (p.kind === "zeros" || p.kind === "ones") w.fill(p.kind === "ones" ? 1 : 0);
    else throw new RangeError(`unknown initialisation "${p.kind}" for ${p.name}`);
  }
  return { out, todo };
}

/** Fills every parameter of `spec` into `out`, yielding the numbers drawn so far after each piece. */
function* fill(spec, seed, out) {
  const { out: made, todo } = allocate(spec);
  Object.assign(out, made);
  let drawn = 0;
  for (const { p, w } of todo) {
    for (const n of normals(w, seed, p.lane, p.std, 0)) yield (drawn += n);
  }
}

/** spec: [{name, shape, kind: "normal"|"zeros"|"ones", std, lane}] -> {name: Float32Array} (row-major). */
export function initialWeights(spec, seed) {
  const out = {};
  for (const _ of fill(spec, seed, out));
  return out;
}

// Normals a worker draws per task: the embedding's 12.9 M in 13 pieces, shared among the workers.
const TASK = 1 << 20;

/**
 * initialWeights for a page, where a full model is seconds of drawing: by `workers` Web Workers at
 * once (init_worker.js; default: one per core, at most 8), each piece of a parameter in one of
 * them, the page's own thread free meanwhile (to download and unpack the trained weights); where
 * workers cannot start, on the page's thread, given back every `sliceMs` so that it paints and
 * answers. The same numbers either way. `onProgress({drawn, total})` as pieces arrive.
 */
export async function drawWeights(spec, seed, { onProgress = () => {}, sliceMs = 50, workers = defaultWorkers() } = {}) {
  const total = spec.reduce((a, p) => a + (p.kind === "normal" ? count(p) : 0), 0);
  if (workers > 0 && typeof Worker !== "undefined") {
    try {
      return await drawInWorkers(spec, seed, workers, (drawn) => onProgress({ drawn, total }));
    } catch (err) {
      console.warn(`the untrained weights are drawn on the page's thread: ${err.message}`);
    }
  }
  const out = {};
  let since = performance.now();
  for (const drawn of fill(spec, seed, out)) {
    if (performance.now() - since < sliceMs) continue;
    onProgress({ drawn, total });
    await new Promise((resolve) => setTimeout(resolve, 0));
    since = performance.now();
  }
  onProgress({ drawn: total, total });
  return out;
}

function defaultWorkers() {
  const cores = typeof navigator !== "undefined" && navigator.hardwareConcurrency ? navigator.hardwareConcurrency : 0;
  return Math.min(cores, 8);
}

async function drawInWorkers(spec, seed, nWorkers, progress) {
  const { out, todo } = allocate(spec);
  const tasks = todo.flatMap(({ p, w }) => Array.from({ length: Math.ceil(w.length / TASK) }, (_, k) =>
    ({ w, msg: { seed, lane: p.lane, std: p.std, start: k * TASK, n: Math.min(TASK, w.length - k * TASK) } })));
  const pool = Array.from({ length: Math.min(nWorkers, tasks.length) }, () => new Worker(new URL("./init_worker.js", import.meta.url), { type: "module" }));
  let drawn = 0;
  const run = (worker) => new Promise((resolve, reject) => {
    const next = () => {
      const task = tasks.shift();
      if (!task) return resolve();
      worker.onmessage = ({ data }) => {
        task.w.set(data.w, data.start);
        progress((drawn += data.w.length));
        next();
      };
      worker.onerror = (e) => reject(new Error(e.message || "a worker failed"));
      worker.postMessage(task.msg);
    };
    next();
  });
  try {
    await Promise.all(pool.map(run));
  } finally {
    for (const worker of pool) worker.terminate();
  }
  return out;
}
