// Compare's view: the trained model beside its untrained start, drawn from the three data objects
// of docs/browser.md ("Model and Compare in the browser"), which the static edition computes in
// the browser (web/static/tabs/compare.js) and playground/compare_data.py writes from the app's
// functions. It derives what it says from their numbers alone, as playground/compare.py says it:
// the losses against ln V (loss_summary), one log-scale probability axis for both sides
// (shared_probability_axis) and how sharp each head's rows are (head_summary). No engine here.

import { el as make, stylesheet } from "./dom.js";
import { tokenLabel } from "./labels.js";

// playground/attention.CELL_VALUES_MAX_TOKENS: the weights written in the cells up to this many tokens.
const CELL_VALUES_MAX_TOKENS = 16;
const NEIGHBOUR_HEADERS = ["rank", "token", "id", "cosine", "count in training"]; // playground/ui/widgets.py
const SHARED_AXIS_TITLE = "probability (shared log scale)"; // playground/compare.SHARED_AXIS_TITLE

const thousands = (n) => n.toLocaleString("en-US");

/** playground/plots.percent: one decimal from 1 %, two significant digits below. */
export function percent(p) {
  if (p >= 0.01 || p <= 0) return p > 0 ? `${(100 * p).toFixed(1)}%` : "0%";
  const v = Number((100 * p).toPrecision(2));
  const digits = Math.max(0, 1 - Math.floor(Math.log10(v)));
  return `${v.toFixed(digits).replace(/\.?0+$/, "")}%`;
}

/** 10**k as Python's format(x, "g") writes it: positional from 1e-4 to 1e5, else 1e-05. */
function powerOfTen(k) {
  if (k >= 0 && k < 6) return "1" + "0".repeat(k);
  if (k < 0 && k >= -4) return "0." + "0".repeat(-k - 1) + "1";
  return `1e${k < 0 ? "-" : "+"}${String(Math.abs(k)).padStart(2, "0")}`;
}

/** playground/compare.shared_probability_axis: [low, high] in log10 and the ticks, one per power of ten. */
export function sharedAxis(sides) {
  const ps = sides.flatMap((s) => s.candidates.map((c) => c.probability)).filter((p) => p > 0);
  const low = Math.floor(Math.log10(Math.min(...ps) / 2));
  const high = Math.log10(Math.max(...ps)) + 0.75; // the largest bar's label, outside it
  const ticks = [];
  for (let e = low; e <= 0; e++) if (e <= high) ticks.push({ exponent: e, text: `${powerOfTen(e + 2)}%` });
  return { low, high, ticks };
}

/** playground/compare.loss_summary, as [text | {bold}] pieces. */
export function lossSummary(next) {
  const pieces = [];
  next.sides.forEach((s, i) => {
    if (i) pieces.push(" · ");
    const loss = s.prompt_loss === null ? "–" : s.prompt_loss.toFixed(2);
    pieces.push({ bold: s.model }, `: loss on the prompt ${loss} nats, next-token entropy ${s.entropy.toFixed(2)}`);
  });
  const v = thousands(next.vocab_size);
  let text = `. A uniform guess over the ${v} tokens scores ln ${v} = ${next.uniform_loss.toFixed(2)}: `
    + "an untrained model is about there; training is what brings the loss down.";
  const tops = next.sides.filter((s) => s.candidates.length).map((s) => s.candidates[0].probability);
  if (tops.length === 2 && Math.min(...tops) > 0) {
    const ratio = Math.max(...tops) / Math.min(...tops);
    text += " Both charts share one probability axis, on a log scale (each tick ten times the one before): the left "
      + `chart's top candidate has ${percent(tops[0])}, the right's ${percent(tops[1])}`
      + (ratio >= 1.5 ? `, a factor of ${Math.round(ratio).toLocaleString("en-US")}.` : ".");
  }
  pieces.push(text);
  return pieces;
}

/** playground/compare.head_spread of one head's [T][T] causal weights: the rows' mean entropy and the weight on the token before. */
export function headSpread(w) {
  const t = w.length;
  let entropy = 0;
  for (const row of w) for (const p of row) entropy -= p * Math.log(Math.min(1, Math.max(p, 1e-12)));
  let previous = 0;
  for (let q = 1; q < t; q++) previous += w[q][q - 1];
  return { entropy: entropy / t, previous: t > 1 ? previous / (t - 1) : null };
}

/** headSpread of a head that spreads every row evenly (row q: 1/(q+1) on each of its tokens). */
export const uniformSpread = (t) => headSpread(Array.from({ length: t }, (_, q) => Array.from({ length: t }, (_, k) => (k <= q ? 1 / (q + 1) : 0))));

/** playground/compare.head_summary, as [text | {bold}] pieces. */
export function headSummary(att) {
  const one = (s) => `${s.entropy.toFixed(2)} nats` + (s.previous === null ? "" : `, ${Math.round(100 * s.previous)} %`);
  const pieces = [`Layer ${att.layer}, head ${att.head}: how spread out each token's attention is (the rows' mean `
    + "entropy, 0 = all on one token) and the share it gives the token just before: "];
  att.sides.forEach((s, i) => {
    if (i) pieces.push("; ");
    const where = s.layer !== att.layer || s.head !== att.head ? ` (layer ${s.layer}, head ${s.head})` : "";
    pieces.push({ bold: s.model }, `${where} ${one(headSpread(s.weights))}`);
  });
  pieces.push(`; an even spread ${one(uniformSpread(att.tokens.length))}.`);
  return pieces;
}

const write = (el, pieces) => pieces.map((x) => (typeof x === "string" ? x : el("b", {}, x.bold)));

function sideBySide(el, id, sides, draw) {
  return el("div", { class: "cmp-sides", id }, ...sides.map((s, i) =>
    el("div", { class: "cmp-side", id: `${id}-${"ab"[i]}`, "data-model": s.model }, draw(s, i))));
}

/** The prompt's next-token candidates of both sides on one log-scale axis, and their losses. */
export function renderNext(root, next, { el = make } = {}) {
  const axis = sharedAxis(next.sides);
  const at = (p) => `${(100 * Math.max(0, Math.log10(p) - axis.low) / (axis.high - axis.low)).toFixed(2)}%`;
  const losses = next.sides.map((s) => s.prompt_loss);
  root.replaceChildren(
    el("p", { class: "cmp-summary", id: "cmp-loss", "data-losses": JSON.stringify(losses) }, ...write(el, lossSummary(next))),
    sideBySide(el, "cmp-next", next.sides, (s) => el("div", {},
      el("h4", {}, s.model),
      el("ol", { class: "cmp-bars" }, ...s.candidates.map((c, k) => el("li", { class: k ? "" : "top", "data-id": String(c.id), "data-probability": String(c.probability) },
        el("code", { class: "cmp-bar-token" }, tokenLabel(c.token)),
        el("span", { class: "cmp-bar-track" }, el("span", { class: "cmp-bar", style: `width: ${at(c.probability)}` })),
        el("span", { class: "cmp-bar-value" }, percent(c.probability))))),
      el("div", { class: "cmp-axis-row" }, el("span", {}),
        el("div", { class: "cmp-axis" }, ...axis.ticks.map((t) => el("span", { class: "cmp-tick", style: `left: ${at(10 ** t.exponent)}` }, t.text))),
        el("span", {})),
      el("div", { class: "cmp-axis-title" }, SHARED_AXIS_TITLE),
      el("div", { class: "cmp-legend" }, el("span", { class: "cmp-key-top" }), "the most likely (greedy choice) ",
        el("span", { class: "cmp-key-rest" }), "probability (temperature 1)"))),
  );
}

/** The word's nearest tokens in each side's embedding table. */
export function renderNeighbours(root, nb, { el = make } = {}) {
  root.replaceChildren(sideBySide(el, "cmp-nb", nb.sides, (s) => el("div", {},
    el("h4", {}, s.model),
    el("div", { class: "cmp-table-wrap" }, el("table", { class: "cmp-table" },
      el("thead", {}, el("tr", {}, ...NEIGHBOUR_HEADERS.map((h) => el("th", {}, h)))),
      el("tbody", {}, ...s.neighbours.map((n, r) => el("tr", { "data-id": String(n.id), "data-similarity": String(n.similarity) },
        el("td", { class: "num" }, String(r + 1)), el("td", { class: "cmp-token" }, n.token), el("td", { class: "num" }, String(n.id)),
        el("td", { class: "num" }, n.similarity.toFixed(4)), el("td", { class: "num" }, thousands(n.count))))))))));
}

/** The sentence's attention at one layer and head, both sides, and how sharp each side's rows are. */
export function renderAttention(root, att, { el = make } = {}) {
  const labels = att.tokens;
  const cells = labels.length <= CELL_VALUES_MAX_TOKENS;
  root.replaceChildren(
    sideBySide(el, "cmp-att", att.sides, (s) => el("div", {},
      el("h4", {}, `${s.model}: layer ${s.layer}, head ${s.head}`),
      el("div", { class: "cmp-scroll" }, el("table", { class: "cmp-matrix" },
        el("thead", {}, el("tr", {}, el("th", { class: "cmp-corner" }, "query ↓ key →"), ...labels.map((x) => el("th", { class: "cmp-key" }, x)))),
        el("tbody", {}, ...s.weights.map((row, q) => el("tr", {}, el("th", {}, labels[q]),
          ...row.map((w, k) => el("td", {
            class: k > q ? "masked" : w > 0.55 ? "dark" : "",
            title: k > q ? "masked: a later token" : `query ${q}: ${labels[q]} → key ${k}: ${labels[k]}: ${w.toFixed(3)}`,
            style: k > q ? "" : `background: rgba(79, 70, 229, ${w.toFixed(3)})`,
          }, cells && k <= q ? w.toFixed(2) : ""))))))))),
    el("p", { class: "cmp-summary", id: "cmp-att-spread" }, ...write(el, headSummary(att))),
  );
}

const SECTIONS = { next: renderNext, neighbours: renderNeighbours, attention: renderAttention };

/**
 * The view as both editions mount it (docs/browser.md, "Web views"): `host.config.section` is the
 * comparison this mount draws (next, neighbours or attention); `update(data)` draws its data
 * object (or, with no section, an object holding all three).
 */
export function mount(root, host = {}) {
  stylesheet("compare.css");
  const section = host.config?.section;
  if (section && !SECTIONS[section]) throw new Error(`Compare has no section ${section}`);
  root.classList.add("cmp-view");
  return {
    update(data) {
      if (section) SECTIONS[section](root, data);
      else {
        root.replaceChildren();
        for (const [name, draw] of Object.entries(SECTIONS)) if (data[name]) draw(root.appendChild(make("div")), data[name]);
      }
      root.dataset.drawn = String(Number(root.dataset.drawn || 0) + 1);
    },
  };
}
