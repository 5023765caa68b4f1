// Embeddings, in the browser: king − man + woman on the model's own token embeddings, the nearest
// tokens by cosine similarity among those seen in training, and the similarity of two words, as
// playground/embeddings.py computes them (its expression grammar from playground/expressions.py,
// its messages too), from the float16 copy of the table that the export writes.

import { InputError, pyG, pyRepr, readInt, sentence, thousands, validateText, wrap } from "../checks.js";

const VISIBLE = { " ": "⋅", "\t": "→", "\n": "↵", "\r": "␍" }; // playground/tokens.VISIBLE_WHITESPACE
const visible = (s) => s.replace(/[ \t\n\r]/g, (c) => VISIBLE[c]);
const TINY = 1e-12; // playground/similarity: below this length a vector counts as zero
const SEARCHED = "its training text (Shakespeare)"; // the static edition ships only the shipped model

// -- the expression grammar (playground/expressions.py) -------------------------------------------
//   expr := term (("+" | "-") term)*;  term := unary (("*" | "/") unary)*
//   unary := ("-" | "+") unary | primary;  primary := NUMBER | WORD | "(" expr ")"
// Everything it builds is linear in the word vectors: {word: coefficient}.

// Python's \w is Unicode letters, digits and _; [^\W\d] the same without decimal digits.
const LEX = /\s*(?:(?<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?<word>[\p{L}\p{Nl}\p{No}_][\p{L}\p{N}_']*|'[\p{L}\p{N}_']+)|(?<op>[-+*/()]))/uy;

class LinearForm {
  constructor(coefs = new Map(), scalar = 0) {
    this.coefs = coefs; // a Map, in the order the words first appear (a word may be "__proto__")
    this.scalar = scalar;
  }
  get isNumber() { return this.coefs.size === 0; }
  formula() {
    const parts = [];
    let i = 0;
    for (const [word, c] of this.coefs) {
      const mag = Math.abs(c);
      const term = mag === 1 ? word : `${pyG(mag)}·${word}`;
      parts.push((i === 0 ? (c < 0 ? "−" : "") : ` ${c < 0 ? "−" : "+"} `) + term);
      i++;
    }
    return parts.join("") || pyG(this.scalar);
  }
}

const add = (a, b, sign) => {
  const coefs = new Map(a.coefs);
  for (const [w, c] of b.coefs) coefs.set(w, (coefs.get(w) ?? 0) + sign * c);
  return new LinearForm(coefs, a.scalar + sign * b.scalar);
};
const scale = (a, f) => new LinearForm(new Map([...a.coefs].map(([w, c]) => [w, c * f])), a.scalar * f);

function lex(text) {
  const toks = [];
  const end = text.trimEnd().length;
  let pos = 0;
  while (pos < end) {
    LEX.lastIndex = pos;
    const m = LEX.exec(text);
    if (!m || LEX.lastIndex === pos) {
      const rest = text.slice(pos).trimStart();
      throw new InputError(`unexpected character ${pyRepr([...rest][0] ?? "")} at position ${text.length - rest.length + 1}: expressions use words, numbers, + - * / and parentheses, e.g. king - man + woman`);
    }
    const kind = Object.keys(m.groups).find((k) => m.groups[k] !== undefined);
    toks.push({ kind, text: m.groups[kind], pos: LEX.lastIndex - m.groups[kind].length });
    pos = LEX.lastIndex;
  }
  toks.push({ kind: "end", text: "", pos: text.length });
  return toks;
}

class Parser {
  constructor(text, limits) {
    this.toks = lex(text);
    this.i = 0;
    this.depth = 0;
    this.words = 0;
    this.limits = limits;
  }
  peek() { return this.toks[this.i]; }
  take() { return this.toks[this.i++]; }
  nest() {
    if (++this.depth > this.limits.MAX_EXPRESSION_DEPTH) {
      throw new InputError(`expression nested too deeply: at most ${this.limits.MAX_EXPRESSION_DEPTH} levels of parentheses or signs`);
    }
  }
  expr() {
    let value = this.term();
    while (this.peek().kind === "op" && "+-".includes(this.peek().text)) {
      const op = this.take();
      const right = this.term();
      if (value.isNumber !== right.isNumber) throw new InputError(`cannot add or subtract a number and a word vector (${op.text} at position ${op.pos + 1})`);
      value = add(value, right, op.text === "+" ? 1 : -1);
    }
    return value;
  }
  term() {
    let value = this.unary();
    while (this.peek().kind === "op" && "*/".includes(this.peek().text)) {
      const op = this.take();
      const right = this.unary();
      if (op.text === "*") {
        if (!value.isNumber && !right.isNumber) throw new InputError(`cannot multiply two word vectors (* at position ${op.pos + 1}); scale a word by a number, e.g. 0.5*king`);
        value = value.isNumber ? scale(right, value.scalar) : scale(value, right.scalar);
      } else {
        if (!right.isNumber) throw new InputError(`cannot divide by a word vector (/ at position ${op.pos + 1}); divide by a number, e.g. king/2`);
        if (right.scalar === 0) throw new InputError(`division by zero (/ at position ${op.pos + 1})`);
        value = scale(value, 1 / right.scalar);
      }
    }
    return value;
  }
  unary() {
    const tok = this.peek();
    if (tok.kind === "op" && (tok.text === "-" || tok.text === "+")) {
      this.take();
      this.nest();
      const inner = this.unary();
      this.depth--;
      return tok.text === "-" ? scale(inner, -1) : inner;
    }
    return this.primary();
  }
  primary() {
    const L = this.limits;
    const tok = this.take();
    let result;
    if (tok.kind === "num") {
      const value = Number(tok.text);
      if (!Number.isFinite(value) || Math.abs(value) > L.MAX_COEFFICIENT) throw new InputError(`number ${tok.text} is out of range: numbers must be within ±${pyG(L.MAX_COEFFICIENT)}`);
      result = new LinearForm(new Map(), value);
    } else if (tok.kind === "word") {
      if (++this.words > L.MAX_EXPRESSION_TERMS) throw new InputError(`too many words: an expression may use at most ${L.MAX_EXPRESSION_TERMS}`);
      if ([...tok.text].length > L.MAX_WORD_CHARS) throw new InputError(`word at position ${tok.pos + 1} is longer than ${L.MAX_WORD_CHARS} characters`);
      result = new LinearForm(new Map([[tok.text, 1]]));
    } else if (tok.text === "(") {
      this.nest();
      result = this.expr();
      if (this.take().text !== ")") throw new InputError(`missing ')' for the '(' at position ${tok.pos + 1}`);
      this.depth--;
    } else if (tok.kind === "end") {
      throw new InputError("expression ends too early: a word or number is missing after the last operator");
    } else {
      throw new InputError(`unexpected ${pyRepr(tok.text)} at position ${tok.pos + 1}: a word, number or '(' was expected`);
    }
    const next = this.peek();
    if (next.kind === "word" || next.kind === "num" || next.text === "(") {
      if (next.text === "(" && tok.kind === "word") throw new InputError(`calls are not supported (${tok.text}( at position ${tok.pos + 1}): combine words with + - * / only`);
      throw new InputError(`missing operator before ${pyRepr(next.text)} at position ${next.pos + 1}: write e.g. 0.5*king or king + queen`);
    }
    return result;
  }
}

/** The linear combination of words `text` denotes (playground.expressions.parse_expression). */
export function parseExpression(text, limits) {
  validateText(text, "expression", limits.MAX_EXPRESSION_CHARS);
  const parser = new Parser(text, limits);
  const form = parser.expr();
  const tail = parser.peek();
  if (tail.kind !== "end") {
    if (tail.text === ")") throw new InputError(`unbalanced ')' at position ${tail.pos + 1}: it has no matching '('`);
    throw new InputError(`unexpected ${pyRepr(tail.text)} at position ${tail.pos + 1}`);
  }
  if (form.isNumber) throw new InputError("the expression has no word: use words, e.g. king - man + woman");
  const kept = new Map([...form.coefs].filter(([, c]) => Math.abs(c) > 1e-12));
  if (!kept.size) throw new InputError("the words cancel out (e.g. king - king): the result would be the zero vector");
  for (const [word, c] of kept) {
    if (!Number.isFinite(c) || Math.abs(c) > limits.MAX_COEFFICIENT) {
      throw new InputError(`the coefficient of ${pyRepr(word)} is ${pyG(c)}: it must be within ±${pyG(limits.MAX_COEFFICIENT)}`);
    }
  }
  return new LinearForm(kept);
}

// -- the table: words to vectors, vectors to their nearest tokens ---------------------------------

/**
 * The searchable table: the rows of the tokens seen in training, as the app's _Index holds them.
 * `rows` holds those rows in the order of `ids`, or with `byId` a whole table (every id's row at
 * id * d_model: a model's own embedding matrix, searched without a copy).
 */
export class EmbeddingIndex {
  constructor({ rows, ids, counts, d_model: d, byId = false }, tokenizer, limits) {
    this.rows = rows;
    this.ids = ids;
    this.counts = counts;
    this.d = d;
    this.tokenizer = tokenizer;
    this.limits = limits;
    this.at = byId ? ids : null;
    this.rowOf = new Map(ids.map((id, j) => [id, j]));
    // Norms once (a unit copy of the table would double its 20 MB): the cosine divides by them.
    this.norms = new Float64Array(ids.length);
    for (let j = 0; j < ids.length; j++) {
      let s = 0;
      for (let c = this.base(j), e = c + d; c < e; c++) s += rows[c] * rows[c];
      this.norms[j] = Math.sqrt(s);
    }
  }

  /** Where row j (the token ids[j]) starts in `rows`. */
  base(j) {
    return (this.at ? this.at[j] : j) * this.d;
  }

  /** playground.embeddings.word_vector: a word's row, or the mean of its tokens' rows. */
  wordVector(raw, leadingSpace) {
    const L = this.limits;
    const word = validateText(raw, "word", L.MAX_WORD_CHARS).trim();
    if (/\s/u.test(word)) throw new InputError(`${pyRepr(word)} is more than one word: give a single word (no spaces)`);
    const ids = this.tokenizer.encode((leadingSpace ? " " : "") + word, { special: false });
    if (ids.length > L.MAX_WORD_TOKENS) throw new InputError(`${pyRepr(word)} splits into ${ids.length} tokens; at most ${L.MAX_WORD_TOKENS} are averaged`);
    const pieces = ids.map((id) => visible(this.tokenizer.tokenText(id)));
    const unseen = pieces.filter((_, k) => !this.rowOf.has(ids[k]));
    if (unseen.length) {
      throw new InputError(`${pyRepr(word)} is unknown to the model: its token(s) ${unseen.map(pyRepr).join(", ")} never occur in the training text (Shakespeare), so their embeddings were never trained; try another word`);
    }
    const vector = new Float64Array(this.d);
    for (const id of ids) {
      const base = this.base(this.rowOf.get(id));
      for (let c = 0; c < this.d; c++) vector[c] += this.rows[base + c] / ids.length;
    }
    return { word, ids, pieces, vector, expression: false };
  }

  combine(form, leadingSpace) {
    const words = [...form.coefs.keys()].map((w) => this.wordVector(w, leadingSpace));
    const coefs = [...form.coefs.values()];
    const vector = new Float64Array(this.d);
    words.forEach((w, k) => {
      for (let i = 0; i < this.d; i++) vector[i] += coefs[k] * w.vector[i];
    });
    return { words, vector };
  }

  /** A word, or an expression's vector when the text holds an operator (word_or_expression). */
  wordOrExpression(text, leadingSpace) {
    if (/[+\-*]/.test(text)) {
      const form = parseExpression(text, this.limits);
      const { words, vector } = this.combine(form, leadingSpace);
      return { word: form.formula(), ids: words.flatMap((w) => w.ids), pieces: words.flatMap((w) => w.pieces), vector, expression: true };
    }
    return this.wordVector(text, leadingSpace);
  }

  /** The `k` rows nearest `vector` by cosine, best first, leaving out the ids in `exclude`. */
  neighbours(vector, k, exclude) {
    const d = this.d;
    const length = Math.max(Math.hypot(...vector), TINY);
    const best = []; // [similarity, row], kept sorted best first: k is at most 50
    for (let j = 0; j < this.ids.length; j++) {
      if (exclude.has(this.ids[j])) continue;
      let dot = 0;
      for (let c = 0, b = this.base(j); c < d; c++) dot += this.rows[b + c] * vector[c];
      const sim = dot / (Math.max(this.norms[j], TINY) * length);
      if (best.length === k && sim <= best[k - 1][0]) continue;
      let at = best.length;
      while (at > 0 && best[at - 1][0] < sim) at--;
      best.splice(at, 0, [sim, j]);
      if (best.length > k) best.pop();
    }
    return best.map(([similarity, j]) => ({
      id: this.ids[j], token: visible(this.tokenizer.tokenText(this.ids[j])), similarity, count: this.counts[j],
    }));
  }
}

export const cosine = (a, b) => {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / (Math.max(Math.sqrt(na), TINY) * Math.max(Math.sqrt(nb), TINY));
};

/** WordVector.describe(): what the model made of a word. */
export function describe(w) {
  if (w.expression) return `${w.word} → a vector computed from its words' embeddings`;
  const shown = w.pieces.map((p, k) => `'${p}' (${w.ids[k]})`).join(" + ");
  if (w.ids.length > 1) return `${w.word} → ${w.ids.length} tokens ${shown}: the mean of their embeddings`;
  return `${w.word} → token ${shown}`;
}

/** playground.embeddings.embedding_arithmetic, on the browser's table. */
export function arithmetic(index, expression, rawTopK, excludeInputs, leadingSpace) {
  const L = index.limits;
  const form = parseExpression(expression, L);
  const topK = readInt(rawTopK, "top_k", L.MIN_NEIGHBOURS, L.MAX_NEIGHBOURS);
  const { words, vector } = index.combine(form, leadingSpace);
  if (!vector.some((x) => x !== 0)) throw new InputError("the result is the zero vector (the words' embeddings cancel): nothing to compare with");
  const exclude = new Set(excludeInputs ? words.flatMap((w) => w.ids) : []);
  const neighbours = index.neighbours(vector, topK, exclude);
  const notes = words.filter((w) => w.ids.length > 1).map(describe);
  notes.push(`Searched the ${thousands(index.ids.length)} tokens that occur in ${SEARCHED}${excludeInputs ? ", leaving out the input words' tokens." : "."}`);
  return { expression, formula: form.formula(), words, vector, neighbours, notice: notes.join(" ") };
}

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const limits = site.limits;
  const examples = site.examples.embeddings;
  const captions = ctx.lesson.captions || {};
  const expr = el("input", { type: "text", id: "emb-expr", "aria-label": "Expression", value: linked?.text ?? examples[0] });
  const topK = el("input", { type: "number", id: "emb-topk", min: limits.MIN_NEIGHBOURS, max: limits.MAX_NEIGHBOURS, step: 1, value: linked?.top_k ?? 10 });
  const exclude = el("input", { type: "checkbox", id: "emb-exclude" });
  exclude.checked = linked?.exclude_inputs ?? true;
  const space = el("input", { type: "checkbox", id: "emb-space" });
  space.checked = linked?.leading_space ?? true;
  const runButton = el("button", { class: "pg-btn primary", type: "button", id: "emb-run" }, "Compute");
  const error = el("div", { class: "pg-error", id: "emb-error", role: "alert", hidden: true });
  const summary = el("div", { class: "emb-summary", id: "emb-summary" }, el("span", { class: "pg-subdued" }, "Loading the token embeddings…"));
  const table = el("table", { class: "pg-table emb-table", id: "emb-table" });
  const chart = el("div", { class: "pg-plot emb-chart", id: "emb-chart" });
  const results = el("div", { class: "emb-results", id: "emb-results" }, summary, el("div", { class: "emb-table-wrap" }, table));

  const simA = el("input", { type: "text", id: "emb-sim-a", value: "king", "aria-label": "Word A" });
  const simB = el("input", { type: "text", id: "emb-sim-b", value: "queen", "aria-label": "Word B" });
  const simRun = el("button", { class: "pg-btn", type: "button", id: "emb-sim-run" }, "Compare");
  const simError = el("div", { class: "pg-error", id: "emb-sim-error", role: "alert", hidden: true });
  const simOut = el("div", { class: "emb-sim-out", id: "emb-sim-out" });

  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col" },
      el("label", { for: "emb-expr" }, "Expression"), expr,
      el("div", { class: "pg-note" }, "Words, numbers, + − * / and parentheses; Enter computes."),
      el("div", { class: "pg-examples" }, el("span", { class: "pg-subdued" }, "Try:"),
        ...examples.map((x) => el("button", { type: "button", onclick: () => { expr.value = x; run(); } }, x))),
      error,
      el("label", { for: "emb-topk" }, `Nearest tokens (${limits.MIN_NEIGHBOURS}–${limits.MAX_NEIGHBOURS})`), topK,
      el("label", { class: "inline" }, exclude, "Leave out the input words"),
      el("label", { class: "inline" }, space, "Leading space (' king')"),
      el("div", { style: "margin-top: 8px" }, runButton)),
    el("div", { class: "pg-col" }, results)));
  root.append(chart);
  root.append(el("h2", {}, el("span", { html: captions.similarity || "Cosine similarity of two words" })),
    el("div", { class: "pg-row emb-sim-row" },
      el("div", { class: "emb-sim-field" }, el("label", { for: "emb-sim-a" }, "Word A (or an expression: queen + man - woman)"), simA),
      el("div", { class: "emb-sim-field" }, el("label", { for: "emb-sim-b" }, "Word B"), simB),
      el("div", { class: "emb-sim-go" }, simRun)),
    simError, simOut,
    el("p", { class: "pg-note" }, "The full app also projects a word list (PCA) and compares a word's static and contextual embeddings."));

  let index = null;
  let drawn = 0;

  const fail = (box, stale, err) => {
    if (!(err instanceof InputError)) console.error(err);
    box.hidden = false;
    box.textContent = sentence(err.message);
    if (stale.dataset.shown) {
      box.append(el("span", { class: "emb-stale-note" }, " The result below is from the last input that worked."));
      stale.classList.add("pg-stale");
    }
  };
  const ok = (box, stale) => {
    box.hidden = true;
    stale.classList.remove("pg-stale");
    stale.dataset.shown = "true";
  };

  function run() {
    if (!index) return;
    try {
      const r = arithmetic(index, expr.value, topK.value, exclude.checked, space.checked);
      ok(error, results);
      show(r);
    } catch (err) {
      fail(error, results, err);
      chart.classList.toggle("pg-stale", Boolean(results.dataset.shown));
    }
  }

  function show(r) {
    summary.replaceChildren(el("b", {}, r.formula), " → nearest tokens by cosine similarity",
      el("div", { class: "pg-note", id: "emb-notice" }, r.notice));
    const head = el("tr", {}, ...["rank", "token", "id", "cosine", "count in training"].map((h) => el("th", {}, h)));
    const body = r.neighbours.map((n, i) => el("tr", { "data-id": String(n.id) },
      el("td", { class: "num" }, String(i + 1)), el("td", { class: "emb-token" }, n.token), el("td", { class: "num" }, String(n.id)),
      el("td", { class: "num" }, n.similarity.toFixed(4)), el("td", { class: "num" }, thousands(n.count))));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
    // The exact numbers for the tests and the curious (the table shows four decimals).
    window.pgEmbeddings = { expression: r.expression, formula: r.formula, neighbours: r.neighbours };
    table.dataset.expression = r.expression;
    table.dataset.run = String(++drawn);
    chart.classList.remove("pg-stale");
    drawChart(r, drawn);
  }

  async function drawChart(r, which) {
    try {
      const Plotly = await ctx.plotly();
      if (which !== drawn) return; // a newer result is on its way
      const n = r.neighbours;
      const title = wrap(`Nearest tokens to ${r.formula} (cosine similarity)`);
      await Plotly.react(chart, [{
        type: "bar", orientation: "h", x: n.map((x) => x.similarity), y: n.map((_, i) => i), marker: { color: "#6366f1" },
        hovertemplate: "%{x:.4f}<extra></extra>", customdata: n.map((x) => x.token),
      }], {
        title: { text: title, x: 0.01, xanchor: "left", font: { size: 14 } }, height: Math.max(320, 26 * n.length + 120),
        margin: { l: 110, r: 16, t: 30 + 19 * title.split("<br>").length, b: 50 },
        xaxis: { title: { text: "cosine similarity" } },
        yaxis: { autorange: "reversed", tickmode: "array", tickvals: n.map((_, i) => i), ticktext: n.map((x) => x.token) },
      }, { displayModeBar: false, responsive: true });
      chart.dataset.drawn = String(which);
    } catch (err) {
      chart.replaceChildren(el("div", { class: "pg-error" }, `The chart could not be drawn: ${err.message}`));
    }
  }

  function similarity() {
    if (!index) return;
    try {
      const a = index.wordOrExpression(simA.value, space.checked);
      const b = index.wordOrExpression(simB.value, space.checked);
      const s = cosine(a.vector, b.vector);
      ok(simError, simOut);
      const multi = [a, b].filter((w) => w.ids.length > 1 && !w.expression).map(describe).join(" ");
      simOut.replaceChildren(
        el("p", {}, "cos(", el("b", {}, a.word), ", ", el("b", {}, b.word), ") = ", el("b", { id: "emb-sim-value" }, s.toFixed(4))),
        el("p", { class: "pg-note" }, `${describe(a)}; ${describe(b)}`),
        el("ul", { class: "emb-vectors" }, el("li", {}, vectorLine(a)), el("li", {}, vectorLine(b))),
        ...(multi ? [el("p", { class: "pg-note" }, multi)] : []));
      simOut.dataset.similarity = String(s);
    } catch (err) {
      fail(simError, simOut, err);
    }
  }

  // The vector itself, as the Transformer tutorial prints it: the lookup, then its first and last numbers.
  function vectorLine(w) {
    const v = Array.from(w.vector);
    const shown = `${v.slice(0, 6).map((x) => x.toFixed(3)).join(", ")}, …, ${v.slice(-2).map((x) => x.toFixed(3)).join(", ")}`;
    const lookup = w.expression ? w.word : w.ids.length === 1 ? `wte.weight[${w.ids[0]}]` : `wte.weight[[${w.ids.join(", ")}]].mean(0)`;
    return el("span", {}, el("code", {}, lookup), ` = [${shown}] (${v.length} numbers)`);
  }

  runButton.addEventListener("click", run);
  expr.addEventListener("keydown", (e) => e.key === "Enter" && run());
  for (const box of [topK, exclude]) box.addEventListener("change", run);
  space.addEventListener("change", () => { run(); similarity(); });
  simRun.addEventListener("click", similarity);
  for (const box of [simA, simB]) box.addEventListener("keydown", (e) => e.key === "Enter" && similarity());

  // Not awaited: the page is ready (and the Copy link works) while the table downloads.
  Promise.all([ctx.embeddings(), ctx.tokenizer()]).then(([loaded, tokenizer]) => {
    ctx.progress.hide();
    index = new EmbeddingIndex(loaded, tokenizer, limits);
    ctx.plotly(); // on its way while the first result is computed
    run();
    similarity();
  }, (err) => {
    summary.replaceChildren();
    error.hidden = false;
    error.textContent = `The token embeddings could not be loaded: ${err.message}`;
    console.error(err);
  });
  return {
    settings: () => ({ text: expr.value, top_k: Number(topK.value), exclude_inputs: exclude.checked, leading_space: space.checked }),
  };
}
