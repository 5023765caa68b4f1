// A fresh GPT's initial weights, drawn in the browser as the server draws them
// (playground/initial.py): each parameter of the spec the export writes (name, shape, GPT-2's rule
// from model.gpt.init_rule, its lane) filled from the shared generator's INIT stream (draws.js).
// The same seed gives the same untrained model here and in PyTorch, with nothing to download.

import { STREAMS, normal } from "./draws.js";

/** spec: [{name, shape, kind: "normal"|"zeros"|"ones", std, lane}] -> {name: Float32Array} (row-major). */
export function initialWeights(spec, seed) {
  const out = {};
  for (const p of spec) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    if (p.kind === "normal") {
      const z = normal(seed, STREAMS.init, n, 0, p.lane);
      const w = new Float32Array(n);
      for (let i = 0; i < n; i++) w[i] = z[i] * p.std;
      out[p.name] = w;
    } else if (p.kind === "zeros" || p.kind === "ones") {
      out[p.name] = new Float32Array(n).fill(p.kind === "ones" ? 1 : 0);
    } else {
      throw new RangeError(`unknown initialisation "${p.kind}" for ${p.name}`);
    }
  }
  return out;
}
