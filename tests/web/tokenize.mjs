// Runs web/engine/tokenizer.js under Node.js for tests/browser/test_web_tokenizer.py.
//
//   node tests/web/tokenize.mjs path/to/tokenizer.json < request.json
//
// request (each field optional): {"texts": [text, ...], "decode": [[id, ...], ...], "tokens": [id, ...],
//                                 "bench": text, "long": text}
// answer: {"special": [[id, ...], ...], "ordinary": [[id, ...], ...], "roundTrip": [text, ...],
//          "decoded": [text, ...], "tokenTexts": [text, ...], "tokenBytes": [hex, ...],
//          "vocabSize": n, "eotId": n,
//          "bench": {"chars", "ids", "firstMs", "warmMs", "longIds", "longMs"}}
import { readFileSync } from "node:fs";
import { Tokenizer } from "../../web/engine/tokenizer.js";

const [jsonPath] = process.argv.slice(2);
const request = JSON.parse(readFileSync(0, "utf8"));
const tokenizerJson = readFileSync(jsonPath, "utf8");
const tokenizer = Tokenizer.fromJSON(tokenizerJson);
const texts = request.texts ?? [];
const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const elapsed = (run) => {
  const start = performance.now();
  const value = run();
  return [value, performance.now() - start];
};

// Timed first, in a fresh tokenizer and a fresh process: every word is new to the cache and the
// code is not yet optimised, as on a page's first keystroke.
let bench;
if (request.bench !== undefined) {
  const fresh = Tokenizer.fromJSON(tokenizerJson);
  const [ids, firstMs] = elapsed(() => fresh.encode(request.bench, { special: false }));
  const [, warmMs] = elapsed(() => fresh.encode(request.bench, { special: false }));
  const [longIds, longMs] = elapsed(() => fresh.encode(request.long ?? "", { special: false }));
  bench = { chars: request.bench.length, ids, firstMs, warmMs, longIds, longMs };
}

const answer = {
  special: texts.map((t) => tokenizer.encode(t)),
  ordinary: texts.map((t) => tokenizer.encode(t, { special: false })),
  roundTrip: texts.map((t) => tokenizer.decode(tokenizer.encode(t))),
  decoded: (request.decode ?? []).map((ids) => tokenizer.decode(ids)),
  tokenTexts: (request.tokens ?? []).map((id) => tokenizer.tokenText(id)),
  tokenBytes: (request.tokens ?? []).map((id) => hex(tokenizer.tokenBytes(id))),
  vocabSize: tokenizer.vocabSize,
  eotId: tokenizer.eotId,
  bench,
};

process.stdout.write(JSON.stringify(answer));
