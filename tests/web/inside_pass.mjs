// The Inside engine (web/engine/inside.js) under Node.js with onnxruntime-web's WebAssembly: the
// data object of each text's ids read from stdin as JSON {graph, lens, weights, index, tokenizer,
// texts: [[ids]], lens_at: "all" | "none"} (the tokenizer.json gives the tokens' texts), the logit
// lens asked for at every position (or none); prints [data], and the milliseconds each pass and
// each position's lens took ({passes: [data], ms: {pass: [...], lens: [...]}}).
import fs from "node:fs";
import * as ort from "onnxruntime-web";
import { Inside } from "../../web/engine/inside.js";
import { Tokenizer } from "../../web/engine/tokenizer.js";
import { readWeights } from "../../web/engine/weights.js";

ort.env.wasm.numThreads = 1;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { graph, lens, weights, index, tokenizer, texts, lens_at: lensAt = "all" } = JSON.parse(input);
const tok = Tokenizer.fromJSON(fs.readFileSync(tokenizer, "utf8"));
const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
const session = await ort.InferenceSession.create(fs.readFileSync(graph), options);
const lensSession = await ort.InferenceSession.create(fs.readFileSync(lens), options);
const idx = JSON.parse(fs.readFileSync(index, "utf8"));
const inside = new Inside(ort, session, lensSession, readWeights(new Uint8Array(fs.readFileSync(weights)), idx), idx, (id) => tok.tokenText(id));
const passes = [];
const ms = { pass: [], lens: [] };
for (const ids of texts) {
  let t0 = performance.now();
  const data = await inside.pass(ids);
  ms.pass.push(performance.now() - t0);
  if (lensAt === "all") {
    for (let t = 0; t < ids.length; t++) {
      t0 = performance.now();
      await inside.lensAt(data, t);
      ms.lens.push(performance.now() - t0);
    }
  }
  passes.push(data);
}
console.log(JSON.stringify({ passes, ms }));
