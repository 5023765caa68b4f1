// The Inside engine (web/engine/inside.js) under Node.js with onnxruntime-web's WebAssembly: the
// data object of each text's ids read from stdin as JSON {graph, weights, index, tokenizer, texts:
// [[ids]]} (the tokenizer.json gives the tokens' texts); prints [data].
import fs from "node:fs";
import * as ort from "onnxruntime-web";
import { Inside } from "../../web/engine/inside.js";
import { Tokenizer } from "../../web/engine/tokenizer.js";
import { readWeights } from "../../web/engine/weights.js";

ort.env.wasm.numThreads = 1;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { graph, weights, index, tokenizer, texts } = JSON.parse(input);
const tok = Tokenizer.fromJSON(fs.readFileSync(tokenizer, "utf8"));
const session = await ort.InferenceSession.create(fs.readFileSync(graph), { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
const idx = JSON.parse(fs.readFileSync(index, "utf8"));
const inside = new Inside(ort, session, readWeights(new Uint8Array(fs.readFileSync(weights)), idx), idx, (id) => tok.tokenText(id));
const out = [];
for (const ids of texts) out.push(await inside.pass(ids));
console.log(JSON.stringify(out));
