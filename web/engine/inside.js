// Inside the model, computed in the browser: the stage graph (export/inside_graph.py, traced from
// playground/inside.py's own functions) run by onnxruntime-web on a text's ids, with the weights
// as inputs (weights.js), turned into one plain data object per text. That object is the contract
// between the editions (docs/browser.md): the field names and shapes of playground/inside.py's
// ForwardPass and LayerTrace, as nested arrays, plus the logit lens at every position, the mean
// loss and the token the tab opens on. The views render from it alone.

import { fetchBytes, fetchJSON } from "./fetch.js";
import { readWeights } from "./weights.js";

// LayerTrace's fields, in order (export/inside_graph.STAGES).
export const STAGES = ["x_in", "ln1_mean", "ln1_std", "ln1_out", "q", "k", "v", "scores", "weights", "head_out", "concat",
  "attn_out", "x_mid", "ln2_mean", "ln2_std", "ln2_out", "fc", "gelu", "mlp_out", "x_out"];
// ForwardPass's fields after the blocks (export/inside_graph.HEAD_OUTPUTS).
export const HEAD = ["lnf_mean", "lnf_std", "h", "top_ids", "top_logits", "top_probs", "logsumexp", "token_losses",
  "next_logits", "next_ranks"];
export const LENS = ["top_ids", "top_probs", "next_ranks", "next_probs"];
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
   * @param weights readWeights' map (the graph's weight inputs, by name)
   * @param index weights.json (n_layer, n_head, d_model, vocab_size, block_size)
   * @param tokenText (id) -> the token's text, for the data's `tokens` (optional)
   */
  constructor(ort, session, weights, index, tokenText = null) {
    this.ort = ort;
    this.session = session;
    this.index = index;
    this.tokenText = tokenText;
    this.feeds = {};
    for (const [name, { data, shape }] of weights) this.feeds[name] = new ort.Tensor("float32", data, shape);
    for (const name of session.inputNames) {
      if (name !== "ids" && !(name in this.feeds)) throw new Error(`the weights file has no ${name}`);
    }
  }

  /** Downloads (or takes from the cache) the graph and the weights and opens the session. */
  static async load({ ort, graph, weights, index, tokenText = null, onProgress = () => {} }) {
    const report = (file) => (p) => onProgress({ file, ...p });
    const [g, w, idx] = await Promise.all([fetchBytes(graph, report("graph")), fetchBytes(weights, report("weights")), fetchJSON(index)]);
    const session = await ort.InferenceSession.create(g.bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
    return new Inside(ort, session, readWeights(w.bytes, idx), idx, tokenText);
  }

  get config() {
    const { n_layer, n_head, d_model, vocab_size, block_size } = this.index;
    return { n_layer, n_head, d_model, head_dim: d_model / n_head, d_ff: 4 * d_model, vocab_size, block_size };
  }

  /** Every stage of the model on `ids` (1 to block_size of them): the contract's data object. */
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
    const data = {
      ids: [...ids],
      tokens: this.tokenText ? ids.map((id) => this.tokenText(id)) : null,
      config: cfg,
      tok_emb: get("tok_emb"),
      pos_emb: get("pos_emb"),
      x0: get("x0"),
      layers: Array.from({ length: cfg.n_layer }, (_, i) => Object.fromEntries(STAGES.map((s) => [s, get(`layers.${i}.${s}`)]))),
    };
    for (const name of HEAD) data[name] = get(name);
    if (T === 1) for (const name of ["token_losses", "next_logits", "next_ranks"]) data[name] = [];
    data.lens = Object.fromEntries(LENS.map((s) => [s, Array.from({ length: cfg.n_layer }, (_, i) => get(`lens.${i}.${s}`))]));
    if (T === 1) for (const s of ["next_ranks", "next_probs"]) data.lens[s] = data.lens[s].map(() => []);
    if (this.tokenText) {
      // the texts of the ids the views list, so that a view needs the data object alone
      data.top_tokens = data.top_ids.map((row) => row.map((id) => this.tokenText(id)));
      data.lens.top_tokens = data.lens.top_ids.map((layer) => layer.map((row) => row.map((id) => this.tokenText(id))));
    }
    const losses = data.token_losses;
    data.loss = losses.length ? losses.reduce((a, b) => a + b, 0) / losses.length : null;
    data.uniform_loss = Math.log(cfg.vocab_size);
    data.opening_token = T < 2 ? 0 : risingPosition(data.lens.next_ranks[0], data.next_ranks, losses.map((l) => Math.exp(-l)));
    return data;
  }
}
