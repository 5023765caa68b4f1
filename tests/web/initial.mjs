// Answers tests/model/test_initial.py: the browser's initial weights (web/engine/init.js) for a spec and
// seed, each parameter as little-endian float32 bytes in base64.
import { readFileSync } from "node:fs";
import { initialWeights } from "../../web/engine/init.js";

const { spec, seed } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const weights = initialWeights(spec, seed);
const answer = {};
for (const [name, w] of Object.entries(weights)) answer[name] = Buffer.from(w.buffer, w.byteOffset, w.byteLength).toString("base64");
process.stdout.write(JSON.stringify(answer));
