// The engine's streamed pieces when a character's bytes span tokens: a stand-in session whose
// logits put all mass on a given token sequence (the loop, the decode and the pieces are the
// engine's own). Reads {tokenizer, tokens} as JSON on stdin; prints [{piece, text}] per step.
import fs from "node:fs";
import { Engine } from "../../web/engine/engine.js";
import { Tokenizer } from "../../web/engine/tokenizer.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { tokenizer, tokens } = JSON.parse(input);
const tok = Tokenizer.fromJSON(fs.readFileSync(tokenizer, "utf8"));
const V = tok.vocabSize;
class Tensor {
  constructor(type, data, dims) { Object.assign(this, { type, data, dims }); }
}
let call = 0;
const session = {
  inputNames: ["input_ids", "attention_mask", "position_ids", "past_key_values.0.key", "past_key_values.0.value"],
  outputNames: ["logits", "present.0.key", "present.0.value"],
  async run(feeds) {
    const T = feeds.input_ids.dims[1];
    const logits = new Float32Array(T * V).fill(-30);
    logits[(T - 1) * V + tokens[Math.min(call++, tokens.length - 1)]] = 30;
    const present = new Tensor("float32", new Float32Array(0), [1, 1, 0, 1]);
    return { logits: new Tensor("float32", logits, [1, T, V]), "present.0.key": present, "present.0.value": present };
  },
};
const engine = new Engine({ Tensor }, session, tok, { n_positions: 256, n_embd: 1, n_head: 1 });
const out = [];
for await (const step of engine.generate([tok.eotId], { maxNewTokens: tokens.length, temperature: 0, nCandidates: 0 })) {
  out.push({ piece: step.piece, text: step.text });
}
console.log(JSON.stringify(out));
