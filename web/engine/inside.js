// Inside the model, computed in the browser: the stage graph (export/inside_graph.py, traced from
// playground/inside.py's own functions) run by onnxruntime-web on a text's ids, with the weights
// as inputs (weights.js), turned into one plain data object per text. That object is the contract
// between the editions (docs/browser.md): the field names and shapes of playground/inside.py's
// ForwardPass and LayerTrace, as nested arrays, plus the mean loss and the token the tab opens on.
// The logit lens is the lens graph's, run at one position when it is asked for (lensAt): at every
// position it was most of a long text's pass. The view (web/views/inside.js) draws from it alone.

import { fetchBytes, fetchJSON } from "./fetch.js";
import { readWeights } from "./weights.js";

// LayerTrace's fields, in order (export/inside_graph.STAGES).
export const STAGES = ["x_in", "ln1_mean", "ln1_std", "ln1_out", "q", "k", "v", "scores", "weights", "head_out", "concat",
  "attn_out", "x_mid", "ln2_mean", "ln2_std", "ln2_out", "fc", "gelu", "mlp_out", "x_out"];
// ForwardPass's fields after the blocks (export/inside_graph.HEAD_OUTPUTS).
export const HEAD = ["lnf_mean", "lnf_std", "h", "top_ids", "top_logits", "top_probs", "logsumexp", "token_losses",
  "next_logits", "next_ranks"];
// After them: the lens after layer 0's rank of each next token, layer 0's FFN on each token alone.
export const EXTRAS = ["first_ranks", "ffn0_alone"];
// The lens graph's outputs at one position (export/inside_graph.LENS_OUTPUTS) and weights.
export const LENS = ["top_ids", "top_probs", "next_ranks", "next_probs"];
export const LENS_WEIGHTS = ["wte.weight", "ln_f.weight", "ln_f.bias"];
export const LENS_K = 5; // playground/inside.LENS_K: the next tokens the lens lists per layer

/** A flat typed array of `shape` as nested plain arrays (numbers; int64 as numbers). */
export function nest(data, shape) {
  const flat = data instanceof BigInt64Array ? Array.from(data, Number) : Array.from(data);
  if (shape.length <= 1) return flat;
  const build = (at, dims) => {
    if (dims.length === 1) return flat.slice(at, at + dims[0]);
    const step = dims.slice(1).reduce((a, b) => a * b, 1);
    return Array.from({ length: dims[0] }, (_, i) => build(at + i * step, dims.slice(1)));
  };
  return build(0, shape);
}

/**
 * playground/inside.rising_position: the position whose next token rises most through the layers,
 * in log rank from the lens after layer 0 (`firstRanks`) to the output (`lastRanks`); among the
 * positions whose next token the output lists in its top `shown` when there are any; ties to the
 * higher output probability, then the earlier position. Arrays of T-1 values.
 */
export function risingPosition(firstRanks, lastRanks, lastProbs, shown = LENS_K) {
  const n = firstRanks.length;
  if (!n) return 0;
  const rise = firstRanks.map((f, i) => Math.log(f) - Math.log(lastRanks[i]));
  let candidates = [...Array(n).keys()].filter((i) => lastRanks[i] <= shown);
  if (!candidates.length) candidates = [...Array(n).keys()];
  candidates.sort((a, b) => rise[b] - rise[a] || lastProbs[b] - lastProbs[a] || a - b);
  return candidates[0];
}

export class Inside {
  /**
   * @param ort onnxruntime-web's module
   * @param session the stage graph's InferenceSession
   * @param lensSession the lens graph's
   * @param weights readWeights' map (the graphs' weight inputs, by name)
   * @param index weights.json (n_layer, n_head, d_model, vocab_size, block_size)
   * @param tokenText (id) -> the token's text, for the data's `tokens` (optional)
   */
  constructor(ort, session, lensSession, weights, index, tokenText = null) {
    this.ort = ort;
    this.session = session;
    this.lensSession = lensSession;
    this.index = index;
    this.tokenText = tokenText;
    this.weights = weights;
    this.feeds = {};
    for (const [name, { data, shape }] of weights) this.feeds[name] = new ort.Tensor("float32", data, shape);
    for (const s of [session, lensSession]) {
      for (const name of s.inputNames) {
        if (!["ids", "x", "target"].includes(name) && !(name in this.feeds)) throw new Error(`the weights file has no ${name}`);
      }
    }
    this.lensFeeds = Object.fromEntries(LENS_WEIGHTS.map((name) => [name, this.feeds[name]]));
  }

  /** Downloads (or takes from the cache) the graphs and the weights and opens the sessions. */
  static async load({ ort, graph, lens, weights, index, tokenText = null, onProgress = () => {} }) {
    const report = (file) => (p) => onProgress({ file, ...p });
    const [g, l, w, idx] = await Promise.all([fetchBytes(graph, report("graph")), fetchBytes(lens, report("lens")),
      fetchBytes(weights, report("weights")), fetchJSON(index)]);
    const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
    const [session, lensSession] = [await ort.InferenceSession.create(g.bytes, options), await ort.InferenceSession.create(l.bytes, options)];
    return new Inside(ort, session, lensSession, readWeights(w.bytes, idx), idx, tokenText);
  }

  get config() {
    const { n_layer, n_head, d_model, vocab_size, block_size } = this.index;
    return { n_layer, n_head, d_model, head_dim: d_model / n_head, d_ff: 4 * d_model, vocab_size, block_size };
  }

  /**
   * Every stage of the model on `ids` (1 to block_size of them): the contract's data object, its
   * logit lens still empty (null at every position: lensAt fills one).
   */
  async pass(ids) {
    const cfg = this.config;
    const T = ids.length;
    if (T < 1 || T > cfg.block_size) throw new Error(`1 to ${cfg.block_size} tokens, not ${T}`);
    const ort = this.ort;
    const feeds = { ...this.feeds, ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [T]) };
    const out = await this.session.run(feeds);
    // A one-token text has nothing to predict: the graph's T-1 arrays are empty (their shapes
    // then say nothing useful), so they are read as [].
    const get = (name) => {
      const t = out[name];
      return t.data.length === 0 ? [] : nest(t.data, t.dims);
    };
    const row = (name) => Array.from(this.weights.get(name).data);
    const data = {
      ids: [...ids],
      tokens: this.tokenText ? ids.map((id) => this.tokenText(id)) : null,
      config: cfg,
      tok_emb: get("tok_emb"),
      pos_emb: get("pos_emb"),
      x0: get("x0"),
      layers: Array.from({ length: cfg.n_layer }, (_, i) => ({
        ...Object.fromEntries(STAGES.map((s) => [s, get(`layers.${i}.${s}`)])),
        ln1_weight: row(`blocks.${i}.ln_1.weight`), ln1_bias: row(`blocks.${i}.ln_1.bias`),
      })),
    };
    for (const name of [...HEAD, ...EXTRAS]) data[name] = get(name);
    if (T === 1) for (const name of ["token_losses", "next_logits", "next_ranks", "first_ranks"]) data[name] = [];
    const empty = (n) => Array.from({ length: cfg.n_layer }, () => Array(n).fill(null));
    data.lens = { top_ids: empty(T), top_probs: empty(T), top_tokens: empty(T), next_ranks: empty(T - 1), next_probs: empty(T - 1) };
    if (this.tokenText) data.top_tokens = data.top_ids.map((r) => r.map((id) => this.tokenText(id)));
    const losses = data.token_losses;
    data.loss = losses.length ? losses.reduce((a, b) => a + b, 0) / losses.length : null;
    data.uniform_loss = Math.log(cfg.vocab_size);
    data.opening_token = T < 2 ? 0 : risingPosition(data.first_ranks, data.next_ranks, losses.map((l) => Math.exp(-l)));
    data.hidden_max_diff = null; // the app's check against the model's own forward pass
    return data;
  }

  /**
   * The logit lens at position `t` of `data` (pass's object), after every layer, written into
   * `data.lens`. One at a time (a session runs one call at once): a request waits for the last.
   */
  lensAt(data, t) {
    this.lensQueue = (this.lensQueue ?? Promise.resolve()).then(() => this.lensNow(data, t), () => this.lensNow(data, t));
    return this.lensQueue;
  }

  async lensNow(data, t) {
    if (data.lens.top_ids[0][t] !== null) return data;
    const ort = this.ort;
    const cfg = this.config;
    const x = new Float32Array(cfg.n_layer * cfg.d_model);
    data.layers.forEach((layer, i) => x.set(layer.x_out[t], i * cfg.d_model));
    const following = t + 1 < data.ids.length;
    const target = BigInt64Array.of(BigInt(following ? data.ids[t + 1] : 0));
    const out = await this.lensSession.run({
      ...this.lensFeeds, x: new ort.Tensor("float32", x, [cfg.n_layer, cfg.d_model]), target: new ort.Tensor("int64", target, [1]),
    });
    const [ids, probs, ranks, nextProbs] = LENS.map((name) => nest(out[name].data, out[name].dims));
    for (let l = 0; l < cfg.n_layer; l++) {
      data.lens.top_ids[l][t] = ids[l];
      data.lens.top_probs[l][t] = probs[l];
      data.lens.top_tokens[l][t] = this.tokenText ? ids[l].map((id) => this.tokenText(id)) : null;
      if (following) {
        data.lens.next_ranks[l][t] = ranks[l];
        data.lens.next_probs[l][t] = nextProbs[l];
      }
    }
    return data;
  }
}
