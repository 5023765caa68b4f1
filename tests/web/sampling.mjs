// Runs web/engine/rng.js and web/engine/sampling.js under Node.js for tests/test_web_sampling.py.
//
//   node tests/web/sampling.mjs request.json > answer.json
//
// request (each part optional):
//   logits: a file of float32 rows, little-endian, back to back; rows: their lengths
//   rng: {seeds: [int or decimal string], n}              -> rng: [[n draws] per seed]
//   cases: [{row, temperature, topK, topP, us: [u]}]      -> cases: [{tokens: [per u], direct, n}],
//          and each case's candidates() into out + ".ids" (int32) and out + ".probs" (float64)
//   shown: [{row, n, token, case}] (case: whose candidates are `kept`; null: greedy)
//                                                         -> shown: [topCandidates()]
//   sequences: [{rows: [row], seed, temperature, topK, topP}] -> sequences: [[token per row]]
//   bench: {rows: [row], settings: [{temperature, topK, topP}], repeat}
//                                                         -> bench: [{chooseMs, shownMs} per setting]
//   settings: [[{temperature, top_k, top_p}, vocabSize]] -> settings: [samplingSettings() or {error}]
//   out: the prefix of the binary files
import { readFileSync, writeFileSync } from "node:fs";
import { NumpyRandom } from "../../web/engine/rng.js";
import { candidates, choose, sample, samplingSettings, topCandidates } from "../../web/engine/sampling.js";

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
const seedOf = (s) => (typeof s === "string" ? BigInt(s) : s);
const answer = {};

if (request.rng) {
  answer.rng = request.rng.seeds.map((s) => {
    const rng = new NumpyRandom(seedOf(s));
    return Array.from({ length: request.rng.n }, () => rng.random());
  });
}

const keptOf = [];
if (request.cases) {
  const idParts = [];
  const probParts = [];
  answer.cases = request.cases.map((c, i) => {
    const settings = { temperature: c.temperature, topK: c.topK, topP: c.topP };
    const row = rows[c.row];
    const kept = c.temperature === 0 ? null : candidates(row, c.temperature, c.topK, c.topP);
    keptOf[i] = kept;
    if (kept) {
      idParts.push(kept.ids);
      probParts.push(kept.probs);
    }
    return {
      // every u through the candidates already made, and the first on its own as the engine calls it
      tokens: c.us.map((u) => choose(row, settings, u, kept)),
      direct: c.us.length ? choose(row, settings, c.us[0]) : null,
      sampled: c.us.length ? sample(row, settings, c.us[0]).token : null,
      n: kept ? kept.ids.length : 0,
    };
  });
  const join = (parts, Type) => {
    const out = new Type(parts.reduce((s, p) => s + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
  writeFileSync(request.out + ".ids", join(idParts, Int32Array));
  writeFileSync(request.out + ".probs", join(probParts, Float64Array));
}

if (request.shown) {
  answer.shown = request.shown.map((s) => {
    const kept = s.case === null ? null : keptOf[s.case];
    const r = topCandidates(rows[s.row], s.n, s.token, kept);
    return {
      ids: Array.from(r.ids), probs: Array.from(r.probs), sampleProbs: Array.from(r.sampleProbs),
      tokenProb: r.tokenProb, tokenSampleProb: r.tokenSampleProb,
    };
  });
}

if (request.sequences) {
  answer.sequences = request.sequences.map((q) => {
    const rng = new NumpyRandom(seedOf(q.seed));
    const settings = { temperature: q.temperature, topK: q.topK, topP: q.topP };
    // one draw a token and none when greedy, as the server's rng.random(1) per step
    return q.rows.map((r) => choose(rows[r], settings, q.temperature === 0 ? 0 : rng.random()));
  });
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
    const rng = new NumpyRandom(0);
    const rowsUsed = request.bench.rows.map((r) => rows[r]);
    const run = (withShown) => {
      const t0 = performance.now();
      for (let i = 0; i < repeat; i++) {
        for (const row of rowsUsed) {
          const { token, kept } = sample(row, settings, settings.temperature === 0 ? 0 : rng.random());
          if (withShown) topCandidates(row, 10, token, kept);
        }
      }
      return (performance.now() - t0) / (repeat * rowsUsed.length);
    };
    run(true); // (warm-up: the JIT's first compilations)
    return { ...settings, chooseMs: run(false), withShownMs: run(true) };
  });
}

process.stdout.write(JSON.stringify(answer));
