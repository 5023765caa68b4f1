// Runs web/engine/sampling.js (with web/engine/draws.js) under Node.js for tests/browser/test_web_sampling.py.
//
//   node tests/web/sampling.mjs request.json > answer.json
//
// request (each part optional):
//   logits: a file of float32 rows, little-endian, back to back; rows: their lengths
//   cases: [{row, temperature, topK, topP, us: [u]}]      -> cases: [[token per u]]
//   shown: [{row, n, token, temperature, topK, topP, u}] (temperature 0: greedy)
//                                                         -> shown: [topCandidates() of sample()'s kept]
//   sequences: [{rows: [row], seed, sample, temperature, topK, topP}]
//                                                         -> sequences: [[token per row]], row i drawn with
//                                                            uniform(seed, SAMPLING, 1, i, sample)
//   bench: {rows: [row], settings: [{temperature, topK, topP}], repeat}
//                                                         -> bench: [{chooseMs, withShownMs} per setting]
//   settings: [[{temperature, top_k, top_p}, vocabSize]] -> settings: [samplingSettings() or {error}]
import { readFileSync } from "node:fs";
import { STREAMS, uniform } from "../../web/engine/draws.js";
import { sample, samplingSettings, topCandidates } from "../../web/engine/sampling.js";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const rows = [];
if (request.logits) {
  const bytes = readFileSync(request.logits);
  const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  let at = 0;
  for (const n of request.rows) {
    rows.push(all.slice(at, at + n));
    at += n;
  }
}
const settingsOf = (c) => ({ temperature: c.temperature, topK: c.topK, topP: c.topP });
const answer = {};

if (request.cases) {
  answer.cases = request.cases.map((c) => c.us.map((u) => sample(rows[c.row], settingsOf(c), u).token));
}

if (request.shown) {
  answer.shown = request.shown.map((s) => {
    const { kept } = sample(rows[s.row], settingsOf(s), s.u);
    const r = topCandidates(rows[s.row], s.n, s.token, kept);
    return {
      ids: Array.from(r.ids), probs: Array.from(r.probs), sampleProbs: Array.from(r.sampleProbs),
      tokenProb: r.tokenProb, tokenSampleProb: r.tokenSampleProb,
    };
  });
}

if (request.sequences) {
  answer.sequences = request.sequences.map((q) => q.rows.map((r, i) =>
    sample(rows[r], settingsOf(q), q.temperature === 0 ? 0 : uniform(q.seed, STREAMS.sampling, 1, i, q.sample)[0]).token));
}

if (request.settings) {
  answer.settings = request.settings.map(([api, vocabSize]) => {
    try {
      return samplingSettings(api, vocabSize ?? undefined);
    } catch (e) {
      return { error: `${e.name}: ${e.message}` };
    }
  });
}

if (request.bench) {
  const { repeat } = request.bench;
  answer.bench = request.bench.settings.map((settings) => {
    const rowsUsed = request.bench.rows.map((r) => rows[r]);
    const run = (withShown) => {
      const t0 = performance.now();
      for (let i = 0; i < repeat; i++) {
        rowsUsed.forEach((row, r) => {
          const u = uniform(0, STREAMS.sampling, 1, i * rowsUsed.length + r)[0];
          const { token, kept } = sample(row, settings, u);
          if (withShown) topCandidates(row, 10, token, kept);
        });
      }
      return (performance.now() - t0) / (repeat * rowsUsed.length);
    };
    run(true); // (warm-up: the JIT's first compilations)
    return { ...settings, chooseMs: run(false), withShownMs: run(true) };
  });
}

process.stdout.write(JSON.stringify(answer));
