// Watch it learn in the learner's browser: one run of the server's Watch it learn
// (playground/learn/), trained by its step graph (train.js) and sampled by its forward graph, with
// every number drawn as the server draws it from the generator both share (draws.js): the
// initial weights (init.js, then the skewed start's x10 on the token embedding), each step's batch
// from (seed, BATCHES, lane = step) (playground/learn/batches.py), each sample's characters from
// (seed, SAMPLES, lane = step) and a prompt's continuation from (seed, SAMPLING). So the same
// settings and seed give the same curve here as on the server, within float rounding
// (docs/training.md says how far they agree, measured). Runs in a Web Worker (learn_worker.js)
// and under Node.js; nothing here touches a page.

import { STREAMS, integers, uniform } from "./draws.js";
import { initialWeights } from "./init.js";
import { sample } from "./sampling.js";
import { Trainer } from "./train.js";

/** Where each of the `rows` windows of step `step` starts in a text of `nIds` ids (batches.py's batch_starts). */
export function batchStarts(seed, step, nIds, block, rows) {
  if (nIds <= block) throw new RangeError(`a text of ${nIds} ids has no window of ${block} + 1`);
  return integers(seed, STREAMS.batches, rows, nIds - block, 0, step);
}

/** Step `step`'s batch from `data` (the training ids): {idx, targets}, int64 [rows * block], row after row. */
export function batch(data, seed, step, block, rows) {
  const idx = new BigInt64Array(rows * block);
  const targets = new BigInt64Array(rows * block);
  batchStarts(seed, step, data.length, block, rows).forEach((s, r) => {
    for (let t = 0; t < block; t++) {
      idx[r * block + t] = BigInt(data[s + t]);
      targets[r * block + t] = BigInt(data[s + t + 1]);
    }
  });
  return { idx, targets };
}

/** The learning rate of step `step`: model.train's lr_at with min_lr = lr (a linear warmup, then constant). */
export function lrAt(step, lr, warmup) {
  return step < warmup ? (lr * (step + 1)) / warmup : lr;
}

/**
 * The untrained model of a run: {name: {data: Float32Array, dims}} for every parameter of `spec`
 * (learn.json's, from playground/initial.py), drawn for `seed`; the skewed start multiplies the
 * token embedding (the tied output head) by `skew`, in float32 as the server does.
 */
export function startWeights(spec, seed, init, skew) {
  const drawn = initialWeights(spec, seed);
  if (init === "skewed") {
    const w = drawn["wte.weight"];
    for (let i = 0; i < w.length; i++) w[i] = Math.fround(w[i] * skew);
  }
  return Object.fromEntries(spec.map((p) => [p.name, { data: drawn[p.name], dims: p.shape }]));
}

/** Mean cross-entropy (nats) of `logits` [n, V] (float32, row after row) against `targets` [n]. */
export function meanCrossEntropy(logits, targets, V) {
  let total = 0;
  const n = targets.length;
  for (let r = 0; r < n; r++) {
    const row = logits.subarray(r * V, (r + 1) * V);
    let m = -Infinity;
    for (let i = 0; i < V; i++) if (row[i] > m) m = row[i];
    let z = 0;
    for (let i = 0; i < V; i++) z += Math.exp(row[i] - m);
    total += m + Math.log(z) - row[Number(targets[r])];
  }
  return total / n;
}

const TEMPERATURE_1 = { temperature: 1 };

/**
 * A model of one size and position kind, on its two graphs: the step graph (Trainer) and the
 * forward graph (logits of every position, the weights fed in).
 */
export class LearnModel {
  constructor(ort, trainer, forward, entry) {
    this.ort = ort;
    this.trainer = trainer;
    this.forward = forward;
    this.entry = entry; // learn.json's models[size-positions]: config, spec, files
    this.block = entry.config.block_size;
    this.V = entry.config.vocab_size;
  }

  static async create(ort, entry, stepBytes, forwardBytes) {
    const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
    const [step, forward] = await Promise.all([
      ort.InferenceSession.create(stepBytes, options),
      ort.InferenceSession.create(forwardBytes, options),
    ]);
    return new LearnModel(ort, new Trainer(ort, step), forward, entry);
  }

  /** The weights as the forward graph takes them: `params` {name: Tensor or {data, dims}}. */
  _weights(params) {
    const out = {};
    for (const name of this.trainer.paramNames) {
      const p = params[name];
      out[name] = p instanceof this.ort.Tensor ? p : new this.ort.Tensor("float32", p.data, p.dims);
    }
    return out;
  }

  /** Logits [rows, T, V] of `ids` (numbers, `rows` windows of T) under `params`. */
  async logits(ids, rows, params) {
    const T = ids.length / rows;
    const idx = new this.ort.Tensor("int64", BigInt64Array.from(ids, (v) => BigInt(v)), [rows, T]);
    const out = await this.forward.run({ idx, ...this._weights(params) });
    return out.logits.data;
  }

  /**
   * `u.length` ids written after `ids` under `params`: id i drawn by the uniform u[i] from the
   * softmax of the logits for the last block_size ids (sampling.js's sample at temperature 1, as
   * the server's playground.learn.run.draw).
   */
  async draw(ids, u, params) {
    const context = Array.from(ids);
    const out = [];
    const weights = this._weights(params);
    for (let i = 0; i < u.length; i++) {
      const window = context.slice(-this.block);
      const idx = new this.ort.Tensor("int64", BigInt64Array.from(window, (v) => BigInt(v)), [1, window.length]);
      const logits = (await this.forward.run({ idx, ...weights })).logits.data;
      const token = sample(logits.subarray((window.length - 1) * this.V, window.length * this.V), TEMPERATURE_1, u[i]).token;
      context.push(token);
      out.push(token);
    }
    return out;
  }

  /** The held-out loss of `params` on `heldout` (Uint8Array of windows of block + 1 ids), as model.evaluate scores them. */
  async heldOut(heldout, params) {
    const W = heldout.length / (this.block + 1);
    const ids = new Array(W * this.block);
    const targets = new Array(W * this.block);
    for (let w = 0; w < W; w++) {
      for (let t = 0; t < this.block; t++) {
        ids[w * this.block + t] = heldout[w * (this.block + 1) + t];
        targets[w * this.block + t] = heldout[w * (this.block + 1) + t + 1];
      }
    }
    return meanCrossEntropy(await this.logits(ids, W, params), targets, this.V);
  }
}

/**
 * One run, as the server's scheduler runs it: every step's loss (the batch's, before its update),
 * step 0's sample (the untrained weights) and one every `sample_every` steps, the last step's,
 * the held-out score at the end (a stopped run: neither, as on the server: Stop frees the CPU).
 * Yields events: {type: "step", step, loss, gradNorm, tokens, seconds}, {type: "sample", step,
 * text}, then {type: "end", step, stopReason, valLoss, seconds}. `stopped()` is asked before
 * every step; `pause()` is awaited after each (the worker gives its messages a turn there).
 */
export async function* runSteps(model, facts, data, heldout, s, { stopped = () => false, pause = async () => {} } = {}) {
  const t = facts.training;
  const start = startWeights(model.entry.spec, s.seed, s.init, t.skew);
  model.trainer.start(start);
  const lr = facts.settings.learning_rates[s.learning_rate];
  const tokensPerStep = t.batch_size * model.block;
  const dims = [t.batch_size, model.block];
  const sample = async (step, params) => {
    const u = uniform(s.seed, STREAMS.samples, t.sample_chars, 0, step);
    const ids = await model.draw([facts.vocabulary.start_id], u, params);
    return { type: "sample", step, text: ids.map((i) => facts.vocabulary.itos[i]).join("") };
  };
  const t0 = performance.now();
  const seconds = () => (performance.now() - t0) / 1000;
  let step = 0;
  let stopReason = "";
  let lastSample = -1;
  while (!stopReason) {
    if (stopped()) {
      stopReason = "stopped";
      break;
    }
    if (step >= s.steps) {
      stopReason = "steps";
      break;
    }
    const { idx, targets } = batch(data, s.seed, step, model.block, t.batch_size);
    const r = await model.trainer.train(idx, targets, dims, lrAt(step, lr, t.warmup_steps));
    step += 1;
    yield { type: "step", step: r.step, loss: r.loss, gradNorm: r.gradNorm, tokens: step * tokensPerStep, seconds: seconds() };
    if (!Number.isFinite(r.loss)) stopReason = "diverged";
    if (step === 1) {
      yield await sample(0, start); // after the first step, as the server, so that a run starts at once
      lastSample = 0;
    }
    if (!stopReason && step % t.sample_every === 0 && !stopped()) {
      yield await sample(step, model.trainer.state);
      lastSample = step;
    }
    await pause();
  }
  let valLoss = null;
  if (stopReason !== "stopped") {
    if (lastSample !== step) yield await sample(step, model.trainer.state);
    valLoss = await model.heldOut(heldout, model.trainer.state);
  }
  yield { type: "end", step, stopReason, valLoss, seconds: seconds() };
}

/**
 * `n` characters the trained model (`params`) writes after `prompt`, from (seed, SAMPLING), as the
 * server's continue_text; a character outside the vocabulary is an error that names it.
 */
export async function continuePrompt(model, facts, params, prompt, seed, n) {
  const itos = facts.vocabulary.itos;
  const unknown = [...new Set([...prompt].filter((c) => !itos.includes(c)))].sort();
  if (unknown.length) {
    throw new RangeError(`the model's vocabulary has no ${unknown.slice(0, 5).map((c) => JSON.stringify(c)).join(", ")}: it knows only the `
      + `${itos.length} characters of the training plays (letters, digits, punctuation, space, line break)`);
  }
  const ids = [...prompt].map((c) => itos.indexOf(c));
  const out = await model.draw(ids, uniform(seed, STREAMS.sampling, n), params);
  return out.map((i) => itos[i]).join("");
}
