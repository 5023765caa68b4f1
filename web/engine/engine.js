// The browser engine: the project's ONNX decoder run by onnxruntime-web in the learner's own
// browser, with the key/value cache, the server's sampling rule (sampling.js, runtime/sampling.py's
// sample()) and its uniforms (draws.js: token i of sample s draws uniform(seed, SAMPLING, 1, i, s)),
// so a seeded generation writes in the browser what the server writes from the same logits. The
// app's Text generation tab ("Run on: this browser") and the static edition both use it.

import { fetchBytes, fetchJSON, fetchVerified } from "./fetch.js";
import { STREAMS, uniform } from "./draws.js";
import { sample, topCandidates } from "./sampling.js";
import { Tokenizer } from "./tokenizer.js";

export const ORT_WASM = "ort-wasm-simd-threaded.wasm";

/**
 * onnxruntime-web from `base` (a folder holding ort.wasm.min.mjs and its WebAssembly), never from
 * a CDN: the page works offline and in tests. Its 14 MB WebAssembly is fetched here, through the
 * page's Cache Storage (fetch.js), and handed over as bytes, so a return visit downloads none of it
 * whatever the host's caching headers; `wasm` is its address (default: beside the module; a
 * ".gz" address is unpacked). One thread by default: at this model's size two were slower than
 * one (docs/browser.md).
 */
export async function loadOrt(base, { threads = 1, wasm = null, onProgress = () => {} } = {}) {
  const here = globalThis.location ? globalThis.location.href : import.meta.url;
  const folder = new URL(base, here).href.replace(/\/?$/, "/");
  const [ort, binary] = await Promise.all([
    import(`${folder}ort.wasm.min.mjs`),
    fetchBytes(wasm ? new URL(wasm, here).href : `${folder}${ORT_WASM}`, onProgress),
  ]);
  ort.env.wasm.wasmPaths = folder;
  ort.env.wasm.wasmBinary = binary.bytes;
  ort.env.wasm.numThreads = threads;
  return ort;
}

/**
 * The settings of one generation, by the API's names and conventions (0 = greedy / no cut);
 * `sample`: which of several samples (its uniforms' lane: sample 0 is the generation alone).
 */
export function generationSettings({ max_new_tokens = 64, temperature = 0.8, top_k = 50, top_p = 0.95, seed = 0, sample = 0, n_candidates = 10, stop_at_eot = true } = {}) {
  return {
    maxNewTokens: max_new_tokens,
    temperature,
    topK: top_k > 0 ? top_k : null,
    topP: top_p < 1 ? top_p : null,
    seed,
    sample,
    nCandidates: n_candidates,
    stopAtEot: stop_at_eot,
  };
}

/**
 * A prompt's ids as the app's tab keeps them (playground/generation/params.py's validate_params):
 * the last blockSize - 1, room for one new token, and the sentence saying so when some were cut.
 */
export function keptPrompt(ids, blockSize) {
  const keep = blockSize - 1;
  if (ids.length <= keep) return { ids, notice: null };
  return { ids: ids.slice(-keep), notice: `The prompt was ${ids.length} tokens long; only its last ${keep} were kept (${ids.length - keep} cut from the start).` };
}

/**
 * The seed of one "Next token" draw, as the app's (playground/ui/generation.py's step_seed): the
 * seed plus the prompt's length in tokens, so each step draws afresh and the same prompt repeats.
 */
export const stepSeed = (seed, promptTokens) => (seed + promptTokens) % 2 ** 32;

export class Engine {
  /**
   * @param ort onnxruntime-web's module (loadOrt)
   * @param session an InferenceSession of a decoder with Optimum's GPT-2 interface
   * @param tokenizer a Tokenizer
   * @param config the Hub folder's config.json (n_layer, n_head, n_embd, n_positions)
   */
  constructor(ort, session, tokenizer, config, { cached = false, loadSeconds = 0, modelSource = null } = {}) {
    this.ort = ort;
    this.session = session;
    this.tokenizer = tokenizer;
    this.config = config;
    this.blockSize = config.n_positions;
    this.contextShift = Math.max(1, Math.floor(this.blockSize / 4)); // as runtime/engine.py
    this.pastNames = session.inputNames.filter((n) => n.startsWith("past_key_values."));
    this.presentNames = this.pastNames.map((n) => n.replace("past_key_values", "present"));
    this.attentionNames = session.outputNames.filter((n) => n.startsWith("attentions."));
    this.headDim = config.n_embd / config.n_head;
    this.cached = cached;
    this.loadSeconds = loadSeconds;
    this.modelSource = modelSource; // the address the model came from (the Hub, or this page's host)
  }

  /**
   * Downloads (or takes from the cache) the model, tokenizer and config and opens the session.
   * `onProgress({ file, loaded, total, cached })` reports each download.
   */
  static async load({ ort, model, tokenizer, config, onProgress = () => {} }) {
    const start = performance.now();
    const report = (file) => (p) => onProgress({ file, ...p });
    const [modelFile, tokenizerJSON, configJSON] = await Promise.all([
      // an address, or { sources, sha256 }: the first source that gives that file (fetchVerified)
      typeof model === "string" ? fetchBytes(model, report("model")) : fetchVerified(model.sources, model.sha256, report("model")),
      fetchJSON(tokenizer, report("tokenizer")),
      fetchJSON(config, report("config")),
    ]);
    const session = await ort.InferenceSession.create(modelFile.bytes, {
      executionProviders: ["wasm"],
      graphOptimizationLevel: "all",
    });
    return new Engine(ort, session, Tokenizer.fromJSON(tokenizerJSON), configJSON, {
      cached: modelFile.cached,
      loadSeconds: (performance.now() - start) / 1000,
      modelSource: modelFile.source ?? model,
    });
  }

  /**
   * Runs the model on a few tokens nobody sees: WebAssembly starts on code compiled quickly and
   * recompiles what runs often with the optimizing compiler, so the first generation of a page
   * ran at a fraction of the later ones' speed. generate() waits for it when it has started.
   */
  warmUp(tokens = 48) {
    this._warming ??= (async () => {
      const settings = { ...generationSettings(), maxNewTokens: tokens, temperature: 0, nCandidates: 10 };
      for await (const step of this._decode([this.tokenizer.eotId], settings)) void step;
    })();
    return this._warming;
  }

  get hasAttentions() {
    return this.attentionNames.length > 0;
  }

  _emptyPast() {
    const ort = this.ort;
    return Object.fromEntries(this.pastNames.map((n) => [n, new ort.Tensor("float32", new Float32Array(0), [1, this.config.n_head, 0, this.headDim])]));
  }

  /** One call of the graph: `ids` new tokens after `past` (whose length is `seen`). */
  async _run(ids, past, seen, extra = []) {
    const ort = this.ort;
    const T = ids.length;
    const feeds = {
      ...past,
      input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, T]),
      attention_mask: new ort.Tensor("int64", new BigInt64Array(seen + T).fill(1n), [1, seen + T]),
      position_ids: new ort.Tensor("int64", BigInt64Array.from({ length: T }, (_, k) => BigInt(seen + k)), [1, T]),
    };
    const out = await this.session.run(feeds, ["logits", ...this.presentNames, ...extra]);
    const V = out.logits.dims[2];
    const last = out.logits.data.subarray((T - 1) * V, T * V);
    const next = Object.fromEntries(this.pastNames.map((n, i) => [n, out[this.presentNames[i]]]));
    return { out, last, past: next };
  }

  /**
   * One forward pass over `ids` (at most blockSize): the logits [T][V] as one Float32Array and,
   * when the graph has them, every layer's attention weights [n_head, T, T] (one Float32Array a
   * layer, rows summing to 1, zeros above the diagonal).
   */
  async forward(ids) {
    if (this._warming) await this._warming;
    if (ids.length > this.blockSize) throw new Error(`at most ${this.blockSize} tokens, not ${ids.length}`);
    const { out } = await this._run(ids, this._emptyPast(), 0, this.attentionNames);
    return { logits: out.logits.data, vocab: out.logits.dims[2], attentions: this.attentionNames.map((n) => out[n].data) };
  }

  /**
   * Generates from `promptIds`, one yielded step a token (an async generator, so the page draws
   * each as it comes). Settings as generationSettings(). `signal`: an AbortSignal (Stop), looked
   * at before every step. Each step: { index, token, text (the completion so far), piece,
   * candidates, finished, stopReason, timeToFirstToken, tokensPerS, notice }.
   */
  async *generate(promptIds, settings, { signal } = {}) {
    if (this._warming) await this._warming;
    yield* this._decode(promptIds, settings, signal);
  }

  async *_decode(promptIds, settings, signal = null) {
    const s = { ...generationSettings(), ...settings };
    if (!promptIds.length) throw new Error("the prompt is empty: give at least one token");
    const eot = this.tokenizer.eotId;
    const t0 = performance.now();
    const dropped = Math.max(0, promptIds.length - this.blockSize);
    let notice = dropped ? `The prompt has ${promptIds.length} tokens but the model sees only the last ${this.blockSize}: the first ${dropped} were dropped.` : null;
    let window = promptIds.slice(-this.blockSize);
    let slid = false;
    let { last, past } = await this._run(window, this._emptyPast(), 0);
    const tokens = [];
    let text = "";
    let shown = ""; // what the pieces so far add up to
    let firstAt = null;
    for (let index = 0; index < s.maxNewTokens; index++) {
      if (signal && signal.aborted) {
        yield this._step({ index, tokens, text, piece: text.slice(shown.length), finished: true, stopReason: "stopped", t0, firstAt });
        return;
      }
      const u = s.temperature === 0 ? 0 : uniform(s.seed, STREAMS.sampling, 1, index, s.sample)[0];
      const { token, kept } = sample(last, { temperature: s.temperature, topK: s.topK, topP: s.topP }, u);
      const listed = s.nCandidates ? topCandidates(last, s.nCandidates, token, kept) : null;
      tokens.push(token);
      firstAt ??= performance.now();
      text = this.tokenizer.decode(tokens);
      const atEot = token === eot && s.stopAtEot;
      const finished = atEot || index === s.maxNewTokens - 1;
      // A character whose bytes span two tokens decodes as U+FFFD until its last byte comes: the
      // pieces hold that back until then, so they always add up to the text.
      const settled = finished ? text : text.replace(/\uFFFD+$/, "");
      const piece = settled.slice(shown.length);
      shown = settled;
      yield this._step({
        index, token, tokens, text, piece, candidates: listed, finished,
        stopReason: atEot ? "eot" : finished ? "max_new_tokens" : null, t0, firstAt, notice,
      });
      notice = null;
      if (finished) return;
      if (window.length >= this.blockSize) {
        // No position exists past blockSize: the oldest tokens drop out and the rest is read anew
        // from position 0, contextShift of them at once (as the server does).
        window = [...window, token].slice(-(this.blockSize - this.contextShift + 1));
        if (!slid) {
          notice = `The context is full (${this.blockSize} tokens): ${this.contextShift} tokens drop out whenever it fills again, and the rest is read anew.`;
          slid = true;
        }
        ({ last, past } = await this._run(window, this._emptyPast(), 0));
      } else {
        const seen = window.length;
        window.push(token);
        ({ last, past } = await this._run([token], past, seen));
      }
    }
  }

  _step({ index, token = null, tokens, text, piece = "", candidates: shown = null, finished, stopReason, t0, firstAt, notice = null }) {
    const now = performance.now();
    const n = tokens.length;
    return {
      index, token, ids: tokens.slice(), text, piece, candidates: shown, finished, stopReason, notice,
      timeToFirstToken: firstAt === null ? null : (firstAt - t0) / 1000,
      // after the first token, as the server's tokens_per_s: the decoding rate, not the prefill
      tokensPerS: n > 1 && now > firstAt ? (n - 1) / ((now - firstAt) / 1000) : null,
    };
  }
}
