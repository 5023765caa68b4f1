// Compare, computed in the browser: the trained model beside its untrained start, both run by
// Inside's stage graph (inside.js: the weights are the graph's inputs), the untrained weights drawn
// as the server draws them (init.js, playground.compare.untrained_like: the same seed, the
// same float32 numbers). Turns two passes into the data objects the view draws (docs/browser.md):
// the next-token side and the attention side; web/views/compare.js draws them.

import { Inside } from "./inside.js";

// The graph's inputs are the model's parameter names but for the position table
// (export/inside_graph.weight_names): a learned one is the parameter wpe.weight.
const PARAMETER_OF = { position_table: "wpe.weight" };

/**
 * The untrained start as a second Inside on `trained`'s session, its weights `drawn` by init.js's
 * drawWeights from data/compare.json's spec and seed; a sinusoidal position table is no parameter
 * (a fixed table, the same before and after training), so it is the trained model's.
 */
export function untrainedInside(trained, drawn) {
  const weights = new Map();
  for (const name of trained.session.inputNames) {
    if (name === "ids") continue;
    const given = trained.feeds[name];
    const data = drawn[PARAMETER_OF[name] ?? name];
    if (data) weights.set(name, { data, shape: given.dims });
    else if (name === "position_table") weights.set(name, { data: given.data, shape: given.dims });
    else throw new Error(`the initialisation spec has no ${name}`);
  }
  return new Inside(trained.ort, trained.session, trained.lensSession, weights, trained.index, trained.tokenText);
}

/** The embedding table E [V * C] an Inside runs on. */
export const embeddingTable = (inside) => inside.feeds["wte.weight"].data;

/**
 * The entropy (nats) of the next-token distribution at position t of a pass: softmax of h[t] E^T,
 * from the pass's own last hidden state and logsumexp (the graph lists only the top candidates).
 */
export function entropyAt(pass, table, t) {
  const h = pass.h[t];
  const C = h.length;
  const lse = pass.logsumexp[t];
  const V = table.length / C;
  let mean = 0; // sum of p * logit
  for (let v = 0, base = 0; v < V; v++, base += C) {
    let logit = 0;
    for (let c = 0; c < C; c++) logit += h[c] * table[base + c];
    mean += Math.exp(logit - lse) * logit;
  }
  return lse - mean;
}

/** One side of the next-token data: the top candidates after the last token, the loss on the text, the entropy. */
export function nextSide(model, pass, table, topK) {
  const t = pass.ids.length - 1;
  return {
    model,
    prompt_loss: pass.loss,
    entropy: entropyAt(pass, table, t),
    candidates: pass.top_ids[t].slice(0, topK).map((id, k) => ({ id, token: pass.top_tokens[t][k], probability: pass.top_probs[t][k] })),
  };
}

/** One side of the attention data: the [T][T] weights of `layer`'s head `head`. */
export function attentionSide(model, pass, layer, head) {
  return { model, layer, head, weights: pass.layers[layer].weights[head] };
}
