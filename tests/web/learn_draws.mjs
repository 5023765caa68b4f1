// Answers tests/browser/test_web_learn.py: what the browser's Watch it learn draws (web/engine/learn.js)
// for a request {data, batches: [{seed, step, rows, block}], weights: [{spec, seed, init, skew}],
// lr: [{step, lr, warmup}], entropy: {logits, targets, V}}: each batch's starts, inputs and
// targets, each start's weights as little-endian float32 bytes in base64, the learning rates and
// the cross-entropy.
import { readFileSync } from "node:fs";
import { batch, batchStarts, lrAt, meanCrossEntropy, startWeights } from "../../web/engine/learn.js";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const data = Uint8Array.from(request.data);
const b64 = (w) => Buffer.from(w.buffer, w.byteOffset, w.byteLength).toString("base64");
const answer = {
  batches: request.batches.map(({ seed, step, rows, block }) => {
    const { idx, targets } = batch(data, seed, step, block, rows);
    return { starts: batchStarts(seed, step, data.length, block, rows), idx: Array.from(idx, Number), targets: Array.from(targets, Number) };
  }),
  weights: request.weights.map(({ spec, seed, init, skew }) =>
    Object.fromEntries(Object.entries(startWeights(spec, seed, init, skew)).map(([name, p]) => [name, { dims: p.dims, data: b64(p.data) }]))),
  lr: request.lr.map(({ step, lr, warmup }) => lrAt(step, lr, warmup)),
  entropy: meanCrossEntropy(Float32Array.from(request.entropy.logits), request.entropy.targets, request.entropy.V),
};
process.stdout.write(JSON.stringify(answer));
