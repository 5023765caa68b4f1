// Inside the model's view: draws one forward pass from the contract's data object alone
// (web/engine/inside.js writes it in the browser; docs/browser.md gives its fields), so any page
// that has such an object, whichever edition computed it, mounts the same view. No engine, no
// tokenizer, no network here: the text's tokens coloured by surprise, the chosen layer's head as
// a matrix labelled by tokens, the residual stream's norms per layer, the strongest FFN units,
// the logit lens with the rank and probability of the token that came next, the candidates.

const VISIBLE = { " ": "⋅", "\t": "→", "\n": "↵", "\r": "␍" };
const LABEL_CHARS = 16; // playground/tokens.LABEL_CHARS

/** A token as a label: whitespace visible, cut to LABEL_CHARS characters. */
export function tokenLabel(text) {
  const chars = [...String(text).replace(/[ \t\n\r]/g, (c) => VISIBLE[c])];
  return chars.length <= LABEL_CHARS ? chars.join("") : chars.slice(0, LABEL_CHARS - 1).join("") + "…";
}

const norm = (row) => Math.sqrt(row.reduce((a, x) => a + x * x, 0));
const pct = (p) => `${(100 * p).toFixed(p >= 0.1 ? 1 : 2)}%`;

/** The numbers each panel shows for (layer, head, token): derived from the data, nothing recomputed from weights. */
export function viewNumbers(data, layer, head, token) {
  const T = data.ids.length;
  const tr = data.layers[layer];
  const gelu = tr.gelu[token];
  const strongest = [...gelu.keys()].sort((a, b) => gelu[b] - gelu[a]).slice(0, 5);
  const hasNext = token + 1 < T;
  return {
    attention: tr.weights[head].slice(0, T).map((row) => row.slice(0, T)),
    residual: data.layers.map((x) => ({
      norm_in: norm(x.x_in[token]), attention_added: norm(x.attn_out[token]), mlp_added: norm(x.mlp_out[token]), norm_out: norm(x.x_out[token]),
    })),
    ffn: { units: gelu.length, fired: gelu.filter((v) => v > 0).length, strongest: strongest.map((u) => ({ unit: u, value: gelu[u] })) },
    lens: data.layers.map((_, l) => ({
      top: data.lens.top_ids[l][token].map((id, k) => ({ id, token: data.lens.top_tokens?.[l][token][k] ?? String(id), probability: data.lens.top_probs[l][token][k] })),
      next: hasNext ? { rank: data.lens.next_ranks[l][token], probability: data.lens.next_probs[l][token] } : null,
    })),
    next: hasNext ? { id: data.ids[token + 1], token: data.tokens?.[token + 1] ?? String(data.ids[token + 1]), rank: data.next_ranks[token], loss: data.token_losses[token] } : null,
    candidates: data.top_ids[token].map((id, k) => ({ id, token: data.top_tokens?.[token][k] ?? String(id), probability: data.top_probs[token][k] })),
  };
}

/** Surprise as a colour: the loss of predicting a token, from white (0 nats) to red (the uniform guess's or more). */
function surpriseColour(loss, uniform) {
  const x = Math.max(0, Math.min(1, loss / uniform));
  return `rgba(220, 38, 38, ${(0.08 + 0.8 * x).toFixed(3)})`;
}

/**
 * Draws `data` into `root` at { layer, head, token }; `el` makes elements (app.js's).
 * `onPick(token)` is called when a token of the text is clicked.
 */
export function render(root, data, { layer, head, token }, { el, onPick = () => {} }) {
  const T = data.ids.length;
  const labels = (data.tokens ?? data.ids.map(String)).map(tokenLabel);
  const v = viewNumbers(data, layer, head, token);
  root.replaceChildren();
  root.dataset.layer = layer;
  root.dataset.head = head;
  root.dataset.token = token;

  const loss = data.loss === null
    ? el("p", { id: "ins-loss", class: "ins-loss" }, "One token: nothing to predict yet, so no loss.")
    : el("p", { id: "ins-loss", class: "ins-loss", "data-loss": String(data.loss) },
      el("b", {}, `Mean loss: ${data.loss.toFixed(3)} nats`),
      ` over ${T - 1} predictions (a uniform guess over ${data.config.vocab_size.toLocaleString("en-US")} tokens: ${data.uniform_loss.toFixed(3)}).`);

  // The text, each token shaded by how surprised the model was to see it (its loss, when predicted).
  const strip = el("div", { id: "ins-tokens", class: "ins-tokens", role: "list" }, ...labels.map((label, i) => {
    const l = i > 0 ? data.token_losses[i - 1] : null;
    return el("button", {
      type: "button", role: "listitem", class: i === token ? "ins-tok selected" : "ins-tok", "data-i": String(i),
      style: l === null ? "" : `background: ${surpriseColour(l, data.uniform_loss)}`,
      title: l === null ? `token ${i}: the first, nothing predicted it` : `token ${i}: loss ${l.toFixed(3)} nats`,
      onclick: () => onPick(i),
    }, label);
  }));

  // The head's causal attention matrix: rows are queries, columns keys, both named by tokens.
  const matrix = el("table", { id: "ins-attn", class: "ins-matrix" },
    el("thead", {}, el("tr", {}, el("th", {}, "query ↓ key →"), ...labels.map((x) => el("th", { class: "ins-key" }, x)))),
    el("tbody", {}, ...v.attention.map((row, q) => el("tr", { class: q === token ? "selected" : "" },
      el("th", {}, labels[q]),
      ...row.map((w, k) => el("td", {
        class: k > q ? "masked" : "", title: k > q ? "masked: a later token" : `${labels[q]} → ${labels[k]}: ${w.toFixed(3)}`,
        style: k > q ? "" : `background: rgba(79, 70, 229, ${w.toFixed(3)})`,
      }))))));

  const residual = el("table", { id: "ins-residual", class: "ins-table" },
    el("thead", {}, el("tr", {}, ...["layer", "|x in|", "+ attention", "+ FFN", "|x out|"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...v.residual.map((r, l) => el("tr", { class: l === layer ? "selected" : "" },
      el("td", {}, String(l)), ...[r.norm_in, r.attention_added, r.mlp_added, r.norm_out].map((x) => el("td", {}, x.toFixed(2)))))));

  const ffn = el("p", { id: "ins-ffn", class: "pg-note" },
    `Layer ${layer}'s feed-forward network at this token: ${v.ffn.fired} of ${v.ffn.units} units fire (GELU > 0); the strongest: `,
    v.ffn.strongest.map((s) => `unit ${s.unit} (${s.value.toFixed(2)})`).join(", "), ".");

  const nextWord = v.next ? tokenLabel(v.next.token) : null;
  const lens = el("table", { id: "ins-lens", class: "ins-table" },
    el("thead", {}, el("tr", {}, el("th", {}, "after layer"), el("th", {}, "the lens's top 5 next tokens"),
      el("th", {}, v.next ? `“${nextWord}” (came next): rank, probability` : "(nothing came next)"))),
    el("tbody", {}, ...v.lens.map((row, l) => el("tr", { class: l === layer ? "selected" : "", "data-rank": row.next ? String(row.next.rank) : "", "data-probability": row.next ? String(row.next.probability) : "" },
      el("td", {}, l === v.lens.length - 1 ? `${l} (the output)` : String(l)),
      el("td", { class: "ins-lens-top" }, row.top.map((c) => `${tokenLabel(c.token)} ${pct(c.probability)}`).join(" · ")),
      el("td", {}, row.next ? `${row.next.rank.toLocaleString("en-US")} · ${pct(row.next.probability)}` : "")))));

  const candidates = el("ol", { id: "ins-candidates", class: "ins-candidates" },
    ...v.candidates.map((c) => el("li", { "data-id": String(c.id) }, el("code", {}, tokenLabel(c.token)), ` ${pct(c.probability)}`)));

  const at = `token ${token} “${labels[token]}”`;
  root.append(
    loss,
    el("p", { class: "pg-note" }, "Each token is shaded by its loss: how surprised the model was to see it, from what came before. Click one to follow it."),
    strip,
    el("h3", {}, `Layer ${layer}, head ${head}: where each token looks`),
    el("div", { class: "ins-scroll" }, matrix),
    el("div", { class: "pg-row" },
      el("div", { class: "pg-col" }, el("h3", {}, `The residual stream at ${at}`), residual, ffn),
      el("div", { class: "pg-col" }, el("h3", {}, `The logit lens at ${at}`),
        el("p", { class: "pg-note" }, "ln_f and the output head applied after every layer: what the model would predict if it stopped there."),
        el("div", { class: "ins-scroll" }, lens))),
    el("h3", {}, `What the model predicts after ${at}`),
    v.next ? el("p", { id: "ins-next", class: "pg-note" }, `What came next: “${nextWord}”, rank ${v.next.rank.toLocaleString("en-US")}, loss ${v.next.loss.toFixed(3)} nats.`) : el("p", { class: "pg-note" }, "The text ends here."),
    candidates,
  );
}
