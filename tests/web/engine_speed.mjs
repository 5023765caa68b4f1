// The browser engine under Node.js (onnxruntime-web's WebAssembly, one thread): greedy ids and
// speed for one prompt, beside a bare loop over the same session. Prints JSON.
//   node engine_speed.mjs <model.onnx> <tokenizer.json> <config.json> <prompt ids JSON> <n>
import fs from "node:fs";
import * as ort from "onnxruntime-web";
import { Engine, generationSettings } from "../../web/engine/engine.js";
import { Tokenizer } from "../../web/engine/tokenizer.js";

ort.env.wasm.numThreads = 1;
const [modelPath, tokPath, cfgPath, promptJson, n, temperature = "0", seed = "0"] = process.argv.slice(2);
const session = await ort.InferenceSession.create(fs.readFileSync(modelPath), { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
const engine = new Engine(ort, session, Tokenizer.fromJSON(JSON.parse(fs.readFileSync(tokPath, "utf8"))), JSON.parse(fs.readFileSync(cfgPath, "utf8")));
const prompt = JSON.parse(promptJson);
const settings = generationSettings({ max_new_tokens: Number(n), temperature: Number(temperature), top_k: 50, top_p: 0.95, seed: Number(seed) });
async function once(nCandidates) {
  const t0 = performance.now();
  let last;
  for await (const step of engine.generate(prompt, { ...settings, nCandidates })) last = step;
  return { ids: last.ids, seconds: (performance.now() - t0) / 1000, tokensPerS: last.tokensPerS, ttft: last.timeToFirstToken };
}
await once(10);
const withCandidates = await once(10);
const without = await once(0);
console.log(JSON.stringify({ withCandidates, without }));
