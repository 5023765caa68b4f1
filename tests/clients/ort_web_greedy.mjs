// onnxruntime-web (its WebAssembly build, as a browser page runs it) under Node.js, one thread:
// greedy ids and speed for each ONNX file, the cache fed back by hand. Prints JSON.
//   node ort_web_greedy.mjs <max_new_tokens> <prompt ids as JSON> <file.onnx>... [--reps N]
// The prompt is a list of ids, or a list of such lists (then "ids" holds one list per prompt and
// the speed is timed on the first).
// With several files the runs alternate (file 1, file 2, ..., again), and the medians are
// reported both per second of wall clock and per second of this process's CPU time (which a
// busy machine does not skew).
import fs from "node:fs";
import * as ort from "onnxruntime-web";

ort.env.wasm.numThreads = 1;
const args = process.argv.slice(2);
const repsAt = args.indexOf("--reps");
const reps = repsAt >= 0 ? Number(args.splice(repsAt, 2)[1]) : 1;
const [maxNew, promptJson, ...files] = args;
const n = Number(maxNew);
const parsed = JSON.parse(promptJson);
const prompts = Array.isArray(parsed[0]) ? parsed : [parsed];

async function greedy(session, count, prompt = prompts[0]) {
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

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sessions = {};
for (const file of files) {
  sessions[file] = await ort.InferenceSession.create(fs.readFileSync(file), { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
  await greedy(sessions[file], 4); // warm-up
}
const runs = Object.fromEntries(files.map((f) => [f, { ids: null, wall: [], cpu: [] }]));
for (let r = 0; r < reps; r++) {
  for (const file of files) {
    const start = performance.now();
    const cpu = process.cpuUsage();
    runs[file].ids = await greedy(sessions[file], n);
    const used = process.cpuUsage(cpu);
    runs[file].cpu.push((used.user + used.system) / 1e6);
    runs[file].wall.push((performance.now() - start) / 1000);
  }
}
const report = {};
for (const file of files) {
  let ids = runs[file].ids;
  if (Array.isArray(parsed[0])) {
    ids = [ids];
    for (const prompt of prompts.slice(1)) ids.push(await greedy(sessions[file], n, prompt));
  }
  report[file] = { ids, tokens_per_s: n / median(runs[file].wall), tokens_per_cpu_s: n / median(runs[file].cpu) };
}
console.log(JSON.stringify(report));
