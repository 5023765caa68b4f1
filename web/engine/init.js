// A fresh GPT's initial weights, drawn in the browser as the server draws them
// (playground/initial.py): each parameter of the spec the export writes (name, shape, GPT-2's rule
// from model.gpt.init_rule, its lane) filled from the shared generator's INIT stream (draws.js).
// The same seed gives the same untrained model here and in PyTorch, with nothing to download.

import { STREAMS, normal } from "./draws.js";

// Normals drawn per call: the embedding's 12.9 M at once would hold 300 MB of doubles on the way
// (normal() draws two uniforms a normal), more than a phone's tab has; pieces hold 1.5 MB.
const CHUNK = 1 << 16;

const count = (p) => p.shape.reduce((a, b) => a * b, 1);

/** Fills every parameter of `spec`, yielding the numbers drawn so far after each piece. */
function* fill(spec, seed, out) {
  let drawn = 0;
  for (const p of spec) {
    const n = count(p);
    const w = new Float32Array(n);
    out[p.name] = w;
    if (p.kind === "zeros" || p.kind === "ones") {
      w.fill(p.kind === "ones" ? 1 : 0);
      continue;
    }
    if (p.kind !== "normal") throw new RangeError(`unknown initialisation "${p.kind}" for ${p.name}`);
    for (let start = 0; start < n; start += CHUNK) {
      const z = normal(seed, STREAMS.init, Math.min(CHUNK, n - start), start, p.lane);
      for (let i = 0; i < z.length; i++) w[start + i] = z[i] * p.std;
      drawn += z.length;
      yield drawn;
    }
  }
}

/** spec: [{name, shape, kind: "normal"|"zeros"|"ones", std, lane}] -> {name: Float32Array} (row-major). */
export function initialWeights(spec, seed) {
  const out = {};
  for (const _ of fill(spec, seed, out));
  return out;
}

/**
 * initialWeights, giving the page back every `sliceMs` (a full model is seconds of drawing): the
 * page paints and answers meanwhile. `onProgress({drawn, total})` after each slice.
 */
export async function drawWeights(spec, seed, { onProgress = () => {}, sliceMs = 50 } = {}) {
  const out = {};
  const total = spec.reduce((a, p) => a + (p.kind === "normal" ? count(p) : 0), 0);
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
