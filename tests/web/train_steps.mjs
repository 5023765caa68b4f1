// Watch it learn's step graph under Node.js with onnxruntime-web's WebAssembly, as a page runs it
// (web/engine/train.js): reads {graph, params: {name: {data, dims}}, batches: [{idx, targets, lr}],
// dims} as JSON from stdin, trains one step per batch, prints {losses, gradNorms, params}.
import fs from "node:fs";
import * as ort from "onnxruntime-web";
import { Trainer } from "../../web/engine/train.js";

ort.env.wasm.numThreads = 1;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { graph, params, batches, dims } = JSON.parse(input);
const trainer = await Trainer.create(ort, fs.readFileSync(graph));
trainer.start(params);
const losses = [];
const gradNorms = [];
const t0 = performance.now();
for (const { idx, targets, lr } of batches) {
  const r = await trainer.train(idx, targets, dims, lr);
  losses.push(r.loss);
  gradNorms.push(r.gradNorm);
}
const msPerStep = (performance.now() - t0) / batches.length;
const out = Object.fromEntries(Object.entries(trainer.params()).map(([name, data]) => [name, Array.from(data)]));
console.log(JSON.stringify({ losses, gradNorms, msPerStep, params: out }));
