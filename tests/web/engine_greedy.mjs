// The browser engine (web/engine/engine.js) under Node.js with onnxruntime-web's WebAssembly:
// the ids it generates for each request read from stdin as JSON
// {model, tokenizer, config, requests: [{prompt: [ids], settings: {max_new_tokens, temperature, ...}}]};
// prints [{ids, notices, stopReason}].
import fs from "node:fs";
import * as ort from "onnxruntime-web";
import { Engine, generationSettings } from "../../web/engine/engine.js";
import { Tokenizer } from "../../web/engine/tokenizer.js";

ort.env.wasm.numThreads = 1;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { model, tokenizer, config, requests } = JSON.parse(input);
const session = await ort.InferenceSession.create(fs.readFileSync(model), { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
const engine = new Engine(ort, session, Tokenizer.fromJSON(fs.readFileSync(tokenizer, "utf8")), JSON.parse(fs.readFileSync(config, "utf8")));
const out = [];
for (const { prompt, settings } of requests) {
  const notices = [];
  let last = null;
  for await (const step of engine.generate(prompt, generationSettings(settings))) {
    if (step.notice) notices.push(step.notice);
    last = step;
  }
  out.push({ ids: last.ids, notices, stopReason: last.stopReason });
}
console.log(JSON.stringify(out));
