// Attention, in the browser: the model's own attention weights for a text, from the extra outputs
// the export adds to the ONNX graph (one [n_head, T, T] block a layer), drawn as the app draws them
// (playground/attention.py): the chosen head, the mean over the layer's heads, every head of the
// layer, and what the head's pattern is (previous token, earlier occurrence, induction).

import { InputError, sentence, textIds, wrap } from "../checks.js";

const VISIBLE = { " ": "⋅", "\t": "→", "\n": "↵", "\r": "␍" };
const LABEL_CHARS = 16; // playground/tokens.LABEL_CHARS
// A head giving the first token this much of every row on average is an "attention sink": the
// page never opens on one.
const FIRST_TOKEN_SINK = 0.5;
const HEAD_KINDS = {
  "previous-token": ["the token just before it", "word order, read by every later layer"],
  "earlier-occurrence": ["the earlier occurrences of its own token", "it finds where a word was said before"],
  induction: ["the token that followed its own token's earlier occurrence", "how a model continues a pattern it has already seen"],
};
const BLUES = [[0, "rgb(247,251,255)"], [0.125, "rgb(222,235,247)"], [0.25, "rgb(198,219,239)"], [0.375, "rgb(158,202,225)"],
  [0.5, "rgb(107,174,214)"], [0.625, "rgb(66,146,198)"], [0.75, "rgb(33,113,181)"], [0.875, "rgb(8,81,156)"], [1, "rgb(8,48,107)"]];

/** A token as an axis label: whitespace visible, cut to LABEL_CHARS characters. */
export function tokenLabel(text) {
  const chars = [...text.replace(/[ \t\n\r]/g, (c) => VISIBLE[c])];
  return chars.length <= LABEL_CHARS ? chars.join("") : chars.slice(0, LABEL_CHARS - 1).join("") + "…";
}

/** Per kind of head, the (query, its keys) pairs its pattern looks at (attention._pattern_keys). */
export function patternKeys(ids, t) {
  const kinds = { "previous-token": [] };
  for (let q = 1; q < t; q++) kinds["previous-token"].push([q, [q - 1]]);
  kinds["earlier-occurrence"] = [];
  kinds.induction = [];
  for (let q = 1; q < t; q++) {
    const same = [];
    for (let k = 0; k < q; k++) if (ids[k] === ids[q]) same.push(k);
    if (same.length) kinds["earlier-occurrence"].push([q, same]);
    if (q >= 2) {
      const after = [];
      for (let k = 1; k < q; k++) if (ids[k - 1] === ids[q]) after.push(k);
      if (after.length) kinds.induction.push([q, after]);
    }
  }
  return Object.fromEntries(Object.entries(kinds).filter(([kind, pairs]) => pairs.length >= 2 || kind === "previous-token"));
}

/** One head's [T*T] weights: each kind's mean share on its keys, the uniform head's, the first token's. */
export function headPattern(w, ids, t) {
  const kinds = {};
  for (const [kind, pairs] of Object.entries(patternKeys(ids, t))) {
    if (!pairs.length) continue;
    let share = 0, uniform = 0;
    for (const [q, ks] of pairs) {
      for (const k of ks) share += w[q * t + k];
      uniform += ks.length / (q + 1);
    }
    kinds[kind] = { share: share / pairs.length, uniform: uniform / pairs.length };
  }
  let first = 0;
  for (let q = 1; q < t; q++) first += w[q * t];
  return { kinds, firstToken: t > 1 ? first / (t - 1) : 1 };
}

/** The head whose pattern most exceeds a uniform head's, sinks left out (attention.salient_head). */
export function salientHead(attentions, nHead, ids) {
  const t = ids.length;
  if (t < 2) return { layer: 0, head: 0, kind: "previous-token", share: 1, uniform: 1 };
  const heads = [];
  attentions.forEach((layerWeights, layer) => {
    for (let head = 0; head < nHead; head++) {
      const w = layerWeights.subarray(head * t * t, (head + 1) * t * t);
      heads.push({ layer, head, ...headPattern(w, ids, t) });
    }
  });
  const allSinks = heads.every((h) => h.firstToken >= FIRST_TOKEN_SINK);
  let best = null;
  for (const kind of Object.keys(heads[0].kinds)) {
    let top = null;
    for (const h of heads) {
      const excess = !allSinks && h.firstToken >= FIRST_TOKEN_SINK ? -Infinity : h.kinds[kind].share - h.kinds[kind].uniform;
      if (!top || excess > top.excess) top = { excess, layer: h.layer, head: h.head, kind, ...h.kinds[kind] };
    }
    if (!best || top.excess > best.excess) best = top;
  }
  return best;
}

const pct = (x) => `${Math.round(100 * x)}%`;
const article = (word) => ("aeiou".includes(word[0]) ? "an" : "a");

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const { n_layer: nLayer, n_head: nHead, block_size: blockSize } = site.model;
  const maxChars = site.limits.MAX_ATTENTION_CHARS;
  const maxTokens = Math.min(site.limits.MAX_ATTENTION_TOKENS, blockSize);
  const examples = site.examples.attention;
  const text = el("textarea", { id: "att-text", rows: 3, "aria-label": "Text" });
  text.value = linked?.text ?? examples[0];
  const picker = (id, label, n) => {
    const select = el("select", { id }, ...Array.from({ length: n }, (_, i) => el("option", { value: String(i) }, String(i))));
    return { select, box: el("div", { class: "att-pick" }, el("label", { for: id }, label), select) };
  };
  const layer = picker("att-layer", `Layer (0–${nLayer - 1})`, nLayer);
  const head = picker("att-head", `Head (0–${nHead - 1})`, nHead);
  const runButton = el("button", { class: "pg-btn primary", type: "button", id: "att-run" }, "Show attention");
  const error = el("div", { class: "pg-error", id: "att-error", role: "alert", hidden: true });
  const info = el("div", { class: "pg-note att-info", id: "att-info" }, "Loading the model into this browser…");
  const pattern = el("div", { class: "att-pattern", id: "att-pattern" });
  const headFig = el("div", { class: "pg-plot", id: "att-head-fig" });
  const meanFig = el("div", { class: "pg-plot", id: "att-mean-fig" });
  const headsFig = el("div", { class: "pg-plot", id: "att-heads-fig" });
  // A tapped cell, in the page's own type: a phone's cells are too small for their numbers.
  const cell = el("div", { class: "att-cell", id: "att-cell", "aria-live": "polite" }, "Tap or click a cell to read its weight here.");
  const source = el("div", { class: "pg-note", id: "att-source" },
    `Weights computed in this browser by onnxruntime-web on ${site.model.file}; the Gradio app computes them in PyTorch at full `
    + "precision, so a cell may differ from the app's by about 0.01.");
  const results = el("div", { class: "att-results", id: "att-results" }, info, pattern,
    el("div", { class: "pg-row" }, el("div", { class: "pg-col" }, headFig, cell), el("div", { class: "pg-col" }, meanFig)), source,
    el("div", { class: "pg-note att-mask", id: "att-mask" },
      el("b", {}, "The causal mask. "),
      "Row t is token t's query and its weights over the keys 0 … t: a decoder never looks ahead, so before the softmax the scores of "
      + "later tokens (above the diagonal) are set to −inf, and their weights come out exactly 0. The first token can only attend "
      + "to itself (weight 1); every row sums to 1."),
    headsFig);

  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col", style: "flex: 2 1 320px" },
      el("label", { for: "att-text" }, `Text (up to ${maxChars.toLocaleString("en-US")} characters and ${maxTokens} tokens)`), text,
      el("div", { class: "pg-examples" }, ...examples.map((x) => el("button", { type: "button", onclick: () => { text.value = x; run({ fresh: true }); } }, x))),
      error),
    el("div", { class: "pg-col att-controls", style: "flex: 1 1 240px" },
      el("div", { class: "att-picks" }, layer.box, head.box), el("div", { style: "margin-top: 8px" }, runButton))),
  results,
  el("p", { class: "pg-note" }, "The full app also draws the line view (click a token, see where it looks) and steps through one head from its queries and keys, which need the model's weights on a server."));

  let engine = null;
  let last = null; // { ids, tokens, attentions }
  let runs = 0;
  let openedOn = null;
  let chooseHead = !(linked && ("layer" in linked || "head" in linked));
  if (linked?.layer !== undefined) layer.select.value = String(linked.layer);
  if (linked?.head !== undefined) head.select.value = String(linked.head);

  function fail(message) {
    error.hidden = false;
    error.textContent = sentence(message);
    if (results.dataset.shown) {
      error.append(" The result below is from the last input that worked.");
      results.classList.add("pg-stale");
    }
  }

  async function run({ fresh = false } = {}) {
    if (!engine) return;
    const which = ++runs;
    let ids;
    try {
      ids = textIds(engine.tokenizer, text.value, maxChars, maxTokens);
    } catch (err) {
      if (!(err instanceof InputError)) console.error(err);
      return fail(err.message);
    }
    try {
      if (!last || last.ids.join() !== ids.join()) {
        const out = await engine.forward(ids);
        if (!out.attentions.length) throw new Error("this model file has no attention outputs");
        last = { ids, tokens: ids.map((id) => tokenLabel(engine.tokenizer.tokenText(id))), attentions: out.attentions };
        if (fresh) chooseHead = true;
      }
      if (which !== runs) return; // a newer request has the page
      if (chooseHead) {
        openedOn = salientHead(last.attentions, nHead, last.ids);
        layer.select.value = String(openedOn.layer);
        head.select.value = String(openedOn.head);
        chooseHead = false;
      }
      error.hidden = true;
      results.classList.remove("pg-stale");
      results.dataset.shown = "true";
      await draw(which, Number(layer.select.value), Number(head.select.value));
    } catch (err) {
      console.error(err);
      fail(`The model could not run in this browser: ${err.message}`);
    }
  }

  function showCell(point, what) {
    const [query, key, masked] = point.customdata;
    cell.replaceChildren(`Query ${query} → key ${key}: `, el("b", {}, point.z.toFixed(3)), ` (${what})${masked}`);
    cell.dataset.cell = `${point.y}:${point.x}`;
  }

  function weightsOf(l, h) {
    const t = last.ids.length;
    return last.attentions[l].subarray(h * t * t, (h + 1) * t * t);
  }

  async function draw(which, l, h) {
    const { ids, tokens } = last;
    const t = ids.length;
    const w = weightsOf(l, h);
    const mean = new Float32Array(t * t);
    for (let k = 0; k < nHead; k++) {
      const wk = weightsOf(l, k);
      for (let i = 0; i < t * t; i++) mean[i] += wk[i] / nHead;
    }
    window.pgAttention = { ids, tokens, layer: l, head: h, n_layer: nLayer, n_head: nHead, attentions: last.attentions };

    let why = "";
    if (openedOn && openedOn.layer === l && openedOn.head === h) {
      const o = openedOn;
      why = ` The page opened on layer ${o.layer}, head ${o.head}, the clearest head on this text: ${article(o.kind)} ${o.kind} head `
        + `(${HEAD_KINDS[o.kind][1]}). Each token it applies to gives ${HEAD_KINDS[o.kind][0]} ${pct(o.share)} of its attention on `
        + `average; a uniform head would give ${pct(o.uniform)}.`;
    }
    info.textContent = `${t} tokens.${why}${t > 1 ? "" : " One token attends only to itself: type a longer text to see attention spread."}`;

    const p = headPattern(w, ids, t);
    const parts = Object.entries(p.kinds).map(([kind, s]) => el("li", {},
      `${HEAD_KINDS[kind][0]}: `, el("b", {}, pct(s.share)), ` of a token's attention (a uniform head: ${pct(s.uniform)})`));
    pattern.replaceChildren(el("b", {}, `What layer ${l}, head ${h} looks at`), " (mean over the tokens each pattern applies to):",
      el("ul", {}, ...parts, el("li", {}, "the first token: ", el("b", {}, pct(p.firstToken)),
        p.firstToken >= FIRST_TOKEN_SINK ? " (an “attention sink”: a head with nothing to do parks its weight there)" : "")));

    const Plotly = await ctx.plotly();
    if (which !== runs) return;
    const config = { displayModeBar: false, responsive: true };
    const rows = (m) => Array.from({ length: t }, (_, q) => Array.from(m.subarray(q * t, (q + 1) * t)));
    const custom = Array.from({ length: t }, (_, q) => Array.from({ length: t }, (_, k) => [`${q}: ${tokens[q]}`, `${k}: ${tokens[k]}`, k > q ? " (masked: a future token)" : ""]));
    const ticks = { tickmode: "array", tickvals: tokens.map((_, i) => i), ticktext: tokens, automargin: true };
    const figure = (m, title) => {
      const wrapped = wrap(title);
      return [[{
        type: "heatmap", z: rows(m), x: tokens.map((_, i) => i), y: tokens.map((_, i) => i), colorscale: BLUES, zmin: 0, zmax: 1,
        customdata: custom, colorbar: { thickness: 12 },
        hovertemplate: "query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.3f}%{customdata[2]}<extra></extra>",
        // two decimals in the cells of short texts, as the app writes them (playground/attention.py)
        ...(t <= site.defaults.attention.cell_values_max_tokens ? { texttemplate: "%{z:.2f}" } : {}),
      }], {
        title: { text: wrapped, x: 0.01, xanchor: "left", font: { size: 14 } }, height: Math.max(420, 18 * t + 160),
        margin: { l: 56, r: 16, t: 30 + 19 * wrapped.split("<br>").length, b: 56 },
        xaxis: { title: { text: "key (attended-to token)" }, tickangle: -60, ...ticks },
        yaxis: { title: { text: "query (attending token)" }, autorange: "reversed", ...ticks },
      }, config];
    };
    await Promise.all([
      Plotly.react(headFig, ...figure(w, `Layer ${l}, head ${h}: attention weights (zeros above the diagonal: causal mask)`)),
      Plotly.react(meanFig, ...figure(mean, `Layer ${l}: mean over the ${nHead} heads`)),
      drawHeads(Plotly, l, rows, custom, config),
    ]);
    if (which !== runs) return;
    for (const [fig, what] of [[headFig, `layer ${l}, head ${h}`], [meanFig, `layer ${l}, mean of the heads`]]) {
      fig.removeAllListeners?.("plotly_click");
      fig.on("plotly_click", (e) => showCell(e.points[0], what));
    }
    cell.textContent = "Tap or click a cell to read its weight here.";
    headFig.dataset.drawn = `${l}:${h}:${ids.join(",")}`;
    results.dataset.drawn = String(which);
  }

  // Every head of the layer, two a row (four a row left each head 60 px wide on a phone), as
  // BertViz's model view: the tokens label the first column's rows and the last row's columns.
  function drawHeads(Plotly, l, rows, custom, config) {
    const t = last.ids.length;
    const cols = Math.min(2, nHead);
    const gridRows = Math.ceil(nHead / cols);
    const ticks = { tickmode: "array", tickvals: last.tokens.map((_, i) => i), ticktext: last.tokens, tickfont: { size: 9 } };
    const traces = [];
    const title = wrap(`Layer ${l}: every head (rows: queries, columns: keys)`);
    const layout = {
      title: { text: title, x: 0.01, xanchor: "left", font: { size: 14 } },
      height: Math.max(220, 7 * t + 150) * gridRows + 120, margin: { l: 10, r: 10, t: 40 + 19 * title.split("<br>").length, b: 40 },
      grid: { rows: gridRows, columns: cols, pattern: "independent", xgap: 0.06, ygap: 0.12 / gridRows * 4 },
      annotations: [],
    };
    for (let k = 0; k < nHead; k++) {
      const n = k === 0 ? "" : String(k + 1);
      const row = Math.floor(k / cols), col = k % cols;
      traces.push({
        type: "heatmap", z: rows(weightsOf(l, k)), xaxis: `x${n}`, yaxis: `y${n}`, zmin: 0, zmax: 1, colorscale: BLUES,
        showscale: k === 0, colorbar: { thickness: 12 }, customdata: custom,
        hovertemplate: `head ${k}<br>query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.3f}%{customdata[2]}<extra></extra>`,
      });
      layout[`xaxis${n}`] = { ...ticks, tickangle: -60, showticklabels: row === gridRows - 1, automargin: true };
      layout[`yaxis${n}`] = { ...ticks, autorange: "reversed", showticklabels: col === 0, automargin: true };
      layout.annotations.push({ text: `head ${k}`, showarrow: false, xref: `x${n} domain`, yref: `y${n} domain`, x: 0.5, y: 1.0, yanchor: "bottom", font: { size: 12 } });
    }
    return Plotly.react(headsFig, traces, layout, config);
  }

  runButton.addEventListener("click", () => run());
  text.addEventListener("keydown", (e) => e.key === "Enter" && (e.ctrlKey || e.metaKey) && run());
  for (const p of [layer, head]) p.select.addEventListener("change", () => run());

  // Not awaited: the page is ready (and the Copy link works) while the model downloads.
  ctx.engine().then((loaded) => {
    engine = loaded;
    ctx.plotly();
    return run();
  }, (err) => {
    info.textContent = "";
    fail(`The model could not be loaded: ${err.message}`);
  });
  return { settings: () => ({ text: text.value, layer: Number(layer.select.value), head: Number(head.select.value) }) };
}
