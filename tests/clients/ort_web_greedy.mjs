// onnxruntime-web (its WebAssembly build, as a browser page runs it) under Node.js, one thread:
// greedy ids and tokens/s for each ONNX file, the cache fed back by hand. Prints JSON.
//   node ort_web_greedy.mjs <max_new_tokens> <prompt ids as JSON> <file.onnx>...
import fs from "node:fs";
import * as ort from "onnxruntime-web";

ort.env.wasm.numThreads = 1;
const [maxNew, promptJson, ...files] = process.argv.slice(2);
const n = Number(maxNew);
const prompt = JSON.parse(promptJson);

async function greedy(session, count) {
  const pasts = session.inputNames.filter((name) => name.startsWith("past_key_values."));
  const [, heads, , headDim] = session.inputMetadata.find((m) => m.name === pasts[0]).shape;
  let cache = Object.fromEntries(pasts.map((name) => [name, new ort.Tensor("float32", new Float32Array(0), [1, heads, 0, headDim])]));
  let ids = prompt.slice();
  let seen = 0;
  const out = [];
  for (let step = 0; step < count; step++) {
    const T = ids.length;
    const feeds = {
      ...cache,
      input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, T]),
      attention_mask: new ort.Tensor("int64", new BigInt64Array(seen + T).fill(1n), [1, seen + T]),
      position_ids: new ort.Tensor("int64", BigInt64Array.from({ length: T }, (_, k) => BigInt(seen + k)), [1, T]),
    };
    const result = await session.run(feeds);
    seen += T;
    const logits = result.logits.data;
    const vocab = result.logits.dims[2];
    let best = 0;
    for (let v = 1, offset = (T - 1) * vocab; v < vocab; v++) if (logits[offset + v] > logits[offset + best]) best = v;
    out.push(best);
    ids = [best];
    cache = Object.fromEntries(pasts.map((name) => [name, result[name.replace("past_key_values", "present")]]));
  }
  return out;
}

const report = {};
for (const file of files) {
  const session = await ort.InferenceSession.create(fs.readFileSync(file), { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
  await greedy(session, 4); // warm-up
  const start = performance.now();
  const ids = await greedy(session, n);
  report[file] = { ids, tokens_per_s: n / ((performance.now() - start) / 1000) };
}
console.log(JSON.stringify(report));
