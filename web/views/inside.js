// Inside the model, the view both editions draw with: one forward pass on the learner's text,
// stage by stage, from the contract's data object alone (web/engine/inside.js computes it in the
// browser, playground/inside_data.py in the app; docs/browser.md gives its fields). The map at the
// top is the overview: each box carries its stage's numbers at the chosen layer, head and token and
// opens its stage; below it the stages, folded under their headings, numbered as the map numbers
// them. A vector is a strip (one canvas of one cell per number: blue below zero, red above, white
// at zero, its range at its right end); the chosen head's attention is its whole causal matrix,
// its axes named by the tokens. The value under the pointer is read from the element's data into
// one tooltip. A change of layer, head or token redraws the map and the open stages from the data
// held; rows the data lacks at a token (the app sends a token's at a time, the browser computes
// its logit lens when asked) are asked of the host, and drawn when they come.
//
// mount(root, host) -> { update({key, data, state, note}), set({layer, head, token}), state }
// (the contract of docs/browser.md, "Web views").

import { esc, html, raw } from "./html.js";

// The stages in the map's order: their numbers are their places in this list.
export const STAGES = [
  ["embedding", "Embedding"],
  ["layernorm", "LayerNorm"],
  ["attention", "Q, K, V and attention"],
  ["residual", "Residual stream"],
  ["ffn", "Feed-forward network"],
  ["lens", "Logit lens"],
  ["output", "Output and loss"],
];
const NUMBER = Object.fromEntries(STAGES.map(([a], i) => [a, i + 1]));
const TITLE = Object.fromEntries(STAGES);
const IN_BLOCK = ["layernorm", "attention", "residual", "ffn"]; // the stages of every block
// The stage open when a text is drawn: at the token the view opens on, the logit lens shows a
// prediction form, layer after layer.
export const OPEN_FIRST = "lens";
const FIRST = 6; // values printed of a vector
const STRONGEST = 5; // FFN units and keys listed
export const NEGATIVE = [37, 99, 235];
export const POSITIVE = [220, 38, 38];
export const ATTENDED = [79, 70, 229];
export const MASKED = [226, 232, 240]; // a key after the query: no weight at all
const MATRIX_LABELS = 32; // token labels per axis at most (every other one past 32 tokens)
// Layer 0's feed-forward add is explained where it is at least this many times the stream it
// joins and points where the token alone sends it.
const FIRST_FFN_RATIO = 5;
const FIRST_FFN_COSINE = 0.5;
const LABEL_CHARS = 16; // playground/tokens.LABEL_CHARS
const RETRIES = 5; // a lost request for the awaited rows asked again at most so often,
const RETRY_MS = 2000; // after 2 s, 4 s, 6 s...
const VISIBLE = { " ": "⋅", "\t": "→", "\n": "↵", "\r": "␍" };

// --- numbers and tokens as the page writes them ---------------------------------------------------

const minus = (s) => s.replace(/-/g, "−");
export const fixed = (x, digits = 3) => minus(Number(x).toFixed(digits));
const thousands = (n) => Number(n).toLocaleString("en-US");
const pct = (p, digits = 1) => `${(100 * p).toFixed(digits)}%`;
const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
const maxAbs = (v) => v.reduce((a, x) => Math.max(a, Math.abs(x)), 0);
const vec = (v, n = FIRST) => `[${Array.from(v.slice(0, n), (x) => fixed(x)).join(", ")}${v.length > n ? ", …" : ""}]`;
const twoDigitExponent = (s) => s.replace(/e([+-])(\d)$/, "e$10$2");
/** Python's f"{x:.1e}": one decimal, a signed exponent of two digits at least. */
const sci = (x) => twoDigitExponent(Number(x).toExponential(1));
/** Python's f"{x:g}": six significant digits, an exponent below 1e-4 and from 1e6. */
function gFormat(x) {
  const e = x === 0 ? 0 : Math.floor(Math.log10(Math.abs(x)));
  return e < -4 || e >= 6 ? twoDigitExponent(Number(x.toPrecision(6)).toExponential()) : String(Number(x.toPrecision(6)));
}
/** Python's f"{x:,.1f}". */
const thousandsOne = (x) => Number(x).toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** A token's text on one line, its whitespace visible. */
export const visible = (text) => String(text).replace(/[ \t\n\r]/g, (c) => VISIBLE[c]);
/** A token as an axis label: whitespace visible, cut to LABEL_CHARS characters. */
export function tokenLabel(text) {
  const chars = [...visible(text)];
  return chars.length <= LABEL_CHARS ? chars.join("") : chars.slice(0, LABEL_CHARS - 1).join("") + "…";
}
const candidate = (text) => visible(text) || "∅";
const argsortDesc = (v, n = v.length) => [...v.keys()].sort((a, b) => v[b] - v[a] || a - b).slice(0, n);

/** [n, 4] RGBA of a strip: white at 0 towards blue (negative) or red (positive), full at |v| = scale. */
export function stripColours(v, scale) {
  const out = new Uint8ClampedArray(v.length * 4);
  for (let i = 0; i < v.length; i++) {
    const a = Math.min(Math.abs(v[i]) / (scale || 1), 1);
    const end = v[i] < 0 ? NEGATIVE : POSITIVE;
    for (let c = 0; c < 3; c++) out[4 * i + c] = Math.round(255 - a * (255 - end[c]));
    out[4 * i + 3] = 255;
  }
  return out;
}

/** [T * T, 4] RGBA of a head's causal attention: white (0) to indigo (1), later keys grey. */
export function attentionColours(weights) {
  const T = weights.length;
  const out = new Uint8ClampedArray(T * T * 4);
  for (let q = 0; q < T; q++) {
    for (let k = 0; k < T; k++) {
      const at = 4 * (q * T + k);
      const w = Math.min(Math.max(weights[q][k], 0), 1);
      for (let c = 0; c < 3; c++) out[at + c] = k > q ? MASKED[c] : Math.round(255 - w * (255 - ATTENDED[c]));
      out[at + 3] = 255;
    }
  }
  return out;
}

// --- the view ---------------------------------------------------------------------------------------

export function mount(root, host) {
  styleSheet(root);
  return new InsideView(root, host);
}

function styleSheet(root) {
  const href = new URL("./inside.css", import.meta.url).href;
  const doc = root.ownerDocument;
  if (![...doc.querySelectorAll("link[rel=stylesheet]")].some((l) => l.href === href)) {
    doc.head.append(Object.assign(doc.createElement("link"), { rel: "stylesheet", href }));
  }
}

class InsideView {
  constructor(root, host) {
    this.root = root;
    this.host = host;
    this.key = null;
    this.data = null;
    this.note = "";
    this.state = { layer: 0, head: 0, token: 0 };
    this.open = new Set([OPEN_FIRST]);
    this.fitted = null; // the stage opened from the map: its body sized so that map and stage fit one screen
    this.asked = null; // the token whose rows were asked of the host
    this.inflight = null; // the one request the host is answering: { ask, at }
    this.wish = null; // the request to send once it has answered: { token, ahead, key }
    this.ahead = new Set(); // the tokens whose rows were asked ahead (prefetch)
    this.step = 0; // the way the token last moved (+1, -1; 0: not yet)
    this.strips = [];
    root.classList.add("ins-view");
    root.replaceChildren();
    root.addEventListener("click", (e) => this.click(e));
    root.addEventListener("keydown", (e) => this.keydown(e));
    root.addEventListener("pointermove", (e) => this.tip(e), { passive: true });
    root.addEventListener("pointerdown", (e) => this.tip(e), { passive: true });
    root.addEventListener("pointerleave", () => tooltip(root).hide());
    root.ownerDocument.defaultView.addEventListener("scroll", () => tooltip(root).hide(), { passive: true });
    root.ownerDocument.defaultView.addEventListener("resize", () => this.fit());
  }

  /**
   * New data from the host: `key` names the pass (another key's whole pass replaces the data, the
   * same key's rows merge into it, another key's rows are dropped). Redrawn for a new pass, a new state or note, or rows the view was waiting for;
   * rows asked for ahead (prefetch) are only kept.
   */
  update({ key = null, data = null, state = null, note = null } = {}) {
    let redraw = Boolean(state) || (note !== null && note !== this.note) || "pending" in this.root.dataset;
    // While the view waits for a token's rows, any answer that does not bring them lets it ask
    // again (a few times at most): the app's queue keeps only the last of an event's waiting
    // requests, so a request for the token can be replaced by a later one asked ahead, and one
    // that crossed a new text's pass was answered from the text before.
    if (data && "pending" in this.root.dataset && (this.reasked = (this.reasked || 0) + 1) <= RETRIES) this.asked = null;
    if (data && key !== this.key && data.ids === undefined) {
      data = null; // rows of a pass no longer shown: dropped
    }
    if (data) {
      if (key !== this.key || !this.data) {
        this.key = key;
        this.data = data;
        this.open = new Set([OPEN_FIRST]);
        this.fitted = null;
        this.step = 0; // no way yet: the token has not moved
        this.ahead = new Set();
        redraw = true;
      } else if (data !== this.data) {
        merge(this.data, data);
      }
    }
    if (note !== null) this.note = note;
    if (state) this.move(state);
    if (data) this.answered();
    if (redraw) this.draw();
  }

  /**
   * Asks the host for token `token`'s rows, one request at a time. The app's queue keeps an
   * event's later requests while one runs, and sends again the one that ran, with its data, not
   * the later ones' (Gradio's trigger_mode "always_last"): a second request could bring back the
   * first's token. So the latest wish waits for the answer (a token awaited before one ahead); a
   * request unanswered after RETRY_MS counts as lost.
   */
  ask(token, ahead = false) {
    const now = performance.now();
    if (this.inflight && now - this.inflight.at < RETRY_MS) {
      if (!ahead || !this.wish || this.wish.ahead) this.wish = { token, ahead, key: this.key };
      return;
    }
    this.inflight = { token, at: now };
    this.host.request("rows", ahead ? { token, ahead: true } : { token });
  }

  /** An answer came: the waiting wish, if its rows are still missing, is asked now. */
  answered() {
    this.inflight = null;
    const wish = this.wish;
    this.wish = null;
    if (wish && wish.key === this.key && this.data?.ids && wish.token < this.data.ids.length && !this.hasRows(wish.token)) {
      this.ask(wish.token, wish.ahead);
    }
  }

  /** The host's controls moved: redraw at the new layer, head or token from the data held. */
  set(state) {
    this.move(state);
    this.draw();
  }

  move(state) {
    for (const [k, v] of Object.entries(state)) {
      if (v === null || v === undefined || !Number.isFinite(Number(v))) continue;
      if (k === "token" && Number(v) !== this.state.token) this.step = Math.sign(Number(v) - this.state.token);
      this.state[k] = Number(v);
    }
  }

  /**
   * The rows of the next token the way the learner is going (an arrow key's next step), asked of
   * the host while the learner looks at this one: that step then redraws at once.
   */
  prefetch(t) {
    // Nothing ahead while a token's rows are awaited: the app's queue keeps only the last of an
    // event's waiting requests, so a request ahead would replace the one the learner waits for.
    if ("pending" in this.root.dataset) return;
    // both ways until the learner has moved the token (a new text), then the way they go
    for (const next of this.step ? [t + this.step] : [t + 1, t - 1]) {
      const ask = `${this.key}:${next}`;
      if (next < 0 || next >= this.data.ids.length || this.hasRows(next) || this.asked === ask || this.ahead.has(ask)) continue;
      this.ahead.add(ask);
      this.ask(next, true);
    }
  }

  /**
   * A request for the rows the view waits for can be lost with nothing to say so (a connection
   * that errored out, a request the app's queue replaced while another ran): asked again if
   * still awaited after a while, a few times at most (2 s, 4 s, 6 s...).
   */
  askAgainLater(ask) {
    const win = this.root.ownerDocument.defaultView;
    win.clearTimeout(this.retry);
    if (this.retryAsk !== ask) [this.retryAsk, this.retries] = [ask, 0];
    const tries = (this.retries = this.retries + 1);
    if (tries > RETRIES) return;
    this.retry = win.setTimeout(() => {
      if (this.asked !== ask || !("pending" in this.root.dataset)) return;
      this.asked = null;
      this.draw();
    }, RETRY_MS * tries);
  }

  /** `fn` once the frame drawn is painted: work for later does not hold the paint back. */
  later(fn) {
    const win = this.root.ownerDocument.defaultView;
    win.requestAnimationFrame(() => win.setTimeout(fn, 0));
  }

  /** The state shown, clamped to the data (a token past the text's end shows its last). */
  clamped() {
    const cfg = this.data.config;
    const T = this.data.ids.length;
    const clamp = (v, hi) => Math.min(Math.max(Math.round(v) || 0, 0), hi);
    return { layer: clamp(this.state.layer, cfg.n_layer - 1), head: clamp(this.state.head, cfg.n_head - 1), token: clamp(this.state.token, T - 1) };
  }

  /** Whether the data holds what the panels read at `t`. */
  hasRows(t) {
    const d = this.data;
    return d.x0[t] != null && d.layers.every((l) => l.x_out[t] != null && l.gelu[t] != null) && d.lens.top_ids[0][t] != null;
  }

  draw() {
    if (!this.data) return;
    const s = this.clamped();
    const root = this.root;
    if (!this.hasRows(s.token)) {
      // drawn when the host answers (a later update); the last state stays on screen meanwhile
      root.dataset.pending = String(s.token);
      // Asked even if asked ahead: a host may drop a request still waiting for a newer one (the
      // app's queue keeps the last of an event's), and the first answer to come is drawn.
      const ask = `${this.key}:${s.token}`;
      if (this.asked !== ask) {
        this.asked = ask;
        this.ask(s.token);
        this.askAgainLater(ask);
      }
      return;
    }
    this.asked = null;
    this.reasked = 0;
    this.retries = 0;
    delete root.dataset.pending;
    const t0 = performance.now();
    const d = new Drawn(this.data, s);
    this.strips = [];
    const body = (anchor) => (this.open.has(anchor) ? PANELS[anchor](d, this) : raw(""));
    root.innerHTML = html`<p id="ins-info" class="ins-info">${d.info()}${this.note ? " " + this.note : ""}</p>
      ${d.map(this.open)}
      <div id="ins-stages" class="ins-stages" data-open="${[...this.open].join(" ")}">${STAGES.map(([anchor]) => section(d, anchor, this.open.has(anchor), body(anchor)))}</div>`.text;
    this.paint();
    root.dataset.layer = String(s.layer);
    root.dataset.head = String(s.head);
    root.dataset.token = String(s.token);
    root.dataset.tokens = String(this.data.ids.length);
    root.dataset.drawMs = (performance.now() - t0).toFixed(1);
    root.dataset.done = String((Number(root.dataset.done) || 0) + 1);
    this.fit();
    const shownKey = this.key;
    this.later(() => this.key === shownKey && this.prefetch(this.clamped().token));
  }

  /** Paints the strips and the matrix drawn as canvases (their numbers kept in this.strips). */
  paint() {
    for (const canvas of this.root.querySelectorAll("canvas[data-paint]")) {
      const { width, height, rgba } = this.strips[Number(canvas.dataset.paint)];
      canvas.width = width;
      canvas.height = height;
      canvas.getContext("2d").putImageData(new ImageData(rgba, width, height), 0, 0);
    }
  }

  /** Registers a canvas's pixels for paint(); returns its index. */
  pixels(width, height, rgba) {
    this.strips.push({ width, height, rgba });
    return this.strips.length - 1;
  }

  /**
   * The stage opened from the map fits the screen with the map: its body no taller than what the
   * screen leaves under the map and the headings above it (it scrolls within itself past that).
   */
  fit() {
    const body = this.fitted && this.root.querySelector(`#ins-b-${this.fitted}`);
    for (const other of this.root.querySelectorAll(".ins-body.ins-fit")) if (other !== body) other.classList.remove("ins-fit");
    if (!body) return;
    const map = this.root.querySelector("#ins-map");
    const view = this.root.ownerDocument.defaultView;
    const above = body.getBoundingClientRect().top - map.getBoundingClientRect().top;
    body.classList.add("ins-fit");
    body.style.setProperty("--ins-fit", `${Math.max(160, view.innerHeight - topInset(map) - above - 12)}px`);
  }

  /** The map's top at the screen's top (below what stays there: a sticky tab bar). */
  showMap() {
    const map = this.root.querySelector("#ins-map");
    // twice: a sticky bar covers the top only once the page has scrolled under it
    for (let i = 0; i < 2; i++) map.ownerDocument.defaultView.scrollBy({ top: map.getBoundingClientRect().top - topInset(map) - 4, behavior: "instant" });
    this.fit();
  }

  choose(name, value) {
    // The host moves its own control; its event redraws the view (set), so the two never disagree.
    if (!this.host.choose(name, value)) this.set({ [name]: value });
  }

  openStage(anchor) {
    this.open = new Set([anchor]);
    this.fitted = anchor;
    this.draw();
    this.showMap();
  }

  click(e) {
    const chip = e.target.closest(".ins-chip");
    if (chip) return this.choose(chip.dataset.layer !== undefined ? "layer" : "head", Number(chip.dataset.layer ?? chip.dataset.head));
    const tok = e.target.closest(".ins-lt[data-t]");
    if (tok) return this.choose("token", Number(tok.dataset.t));
    const matrix = e.target.closest(".ins-matrix[data-n]");
    if (matrix) {
      const cell = matrixCell(matrix, e);
      if (cell) this.choose("token", cell.row);
      return;
    }
    const toggle = e.target.closest(".ins-toggle");
    if (toggle) {
      const anchor = toggle.dataset.stage;
      if (this.open.has(anchor)) this.open.delete(anchor);
      else this.open.add(anchor);
      this.fitted = null;
      return this.draw();
    }
    const up = e.target.closest(".ins-up");
    if (up) {
      e.preventDefault();
      return this.showMap();
    }
    const box = e.target.closest(".ins-box[data-goto]");
    if (box) {
      e.preventDefault();
      this.openStage(box.dataset.goto.slice("ins-s-".length));
    }
  }

  keydown(e) {
    // A box of the map is a button's container: Enter or Space on it opens its stage as a click does.
    if ((e.key === "Enter" || e.key === " ") && e.target.matches(".ins-box[data-goto]")) {
      e.preventDefault();
      this.openStage(e.target.dataset.goto.slice("ins-s-".length));
    }
  }

  tip(e) {
    const text = this.data ? describe(e, this) : null;
    tooltip(this.root).show(text, e);
  }
}

/** The height at the screen's top that a sticky or fixed element covers, above `el`'s column. */
function topInset(el) {
  const doc = el.ownerDocument;
  const x = Math.max(1, el.getBoundingClientRect().left + 2);
  for (let node = doc.elementFromPoint(x, 1); node && node !== doc.body && node !== doc.documentElement; node = node.parentElement) {
    if (el.contains(node)) return 0;
    const position = doc.defaultView.getComputedStyle(node).position;
    if (position === "sticky" || position === "fixed") return Math.max(0, node.getBoundingClientRect().bottom);
  }
  return 0;
}

/** Copies `source`'s non-null values into `target`, recursively (a host's rows into the data held). */
export function merge(target, source) {
  for (const k of Object.keys(source)) {
    const v = source[k];
    if (v === null || v === undefined) continue;
    if (target[k] === null || target[k] === undefined || typeof v !== "object") target[k] = v;
    else merge(target[k], v);
  }
  return target;
}

// --- what the pass says at the chosen layer, head and token ----------------------------------------

class Drawn {
  constructor(data, { layer, head, token }) {
    this.d = data;
    this.layer = layer;
    this.head = head;
    this.t = token;
    this.cfg = data.config;
    this.T = data.ids.length;
    this.tr = data.layers[layer];
    this.labels = (data.tokens ?? data.ids.map(String)).map(tokenLabel);
    this.D = this.cfg.head_dim;
  }

  tok(i) {
    return html`<span class="ins-tok">${this.labels[i]}</span>`;
  }

  /** Per layer at the chosen token: (rank, probability) of the token that came next; null at the last. */
  lensNext() {
    if (this.t + 1 >= this.T) return null;
    const l = this.d.lens;
    return l.next_ranks.map((_, i) => [l.next_ranks[i][this.t], l.next_probs[i][this.t]]);
  }

  /** Per layer at the chosen token: the lens's top tokens [(text, probability)]. */
  lensTop() {
    const l = this.d.lens;
    return l.top_ids.map((_, i) => l.top_ids[i][this.t].map((id, k) => [l.top_tokens?.[i]?.[this.t]?.[k] ?? String(id), l.top_probs[i][this.t][k]]));
  }

  weightsRow(h = this.head) {
    return this.tr.weights[h][this.t];
  }

  info() {
    const { T, t, layer, head } = this;
    let opening = "";
    if (T >= 2 && t === this.d.opening_token) {
      const first = this.d.first_ranks[t];
      const last = this.d.next_ranks[t];
      if (first > last) {
        opening = ` Opened here: of the text's tokens, this one's next (${this.labels[t + 1]}) climbs most through the logit lens, rank ${thousands(first)} after layer 0 → ${thousands(last)} at the output.`;
      }
    }
    const check = this.d.hidden_max_diff === null || this.d.hidden_max_diff === undefined ? ""
      : ` Check: the last hidden state computed here stage by stage matches the model's own forward pass to ${sci(this.d.hidden_max_diff)}.`;
    return `${T} tokens; showing layer ${layer}, head ${head}, token ${t} (${this.labels[t]}).${opening}${check}`;
  }

  /** Each stage's numbers for the map's boxes. */
  live() {
    const { d, tr, t, head: h } = this;
    const w = this.weightsRow().slice(0, t + 1);
    const top = argsortDesc(w, 1)[0];
    const gelu = tr.gelu[t];
    const live = {
      text: html`token ${t} ${this.tok(t)}`,
      embedding: `‖x‖ = ${fixed(norm(d.x0[t]), 2)}`,
      layernorm: `layer ${this.layer}: μ ${fixed(tr.ln1_mean[t])}, σ ${fixed(tr.ln1_std[t])}`,
      attention: html`head ${h}: most to ${this.tok(top)} ${w[top].toFixed(2)}`,
      residual: `‖x‖ ${fixed(norm(tr.x_in[t]), 2)} → ${fixed(norm(tr.x_out[t]), 2)}`,
      ffn: `${gelu.filter((v) => v > 0).length} of ${gelu.length} fire, add ‖${fixed(norm(tr.mlp_out[t]), 2)}‖`,
    };
    const next = this.lensNext();
    if (next) {
      const loss = d.token_losses[t];
      live.lens = html`${this.tok(t + 1)}: rank ${thousands(next[0][0])} → ${thousands(next[next.length - 1][0])}`;
      live.output = html`p(${this.tok(t + 1)}) = ${pct(Math.exp(-loss))}, −ln p = ${loss.toFixed(2)}`;
    } else {
      const lens = this.lensTop();
      live.lens = `top: ${candidate(lens[0][0][0])} → ${candidate(lens[lens.length - 1][0][0])}`;
      live.output = `top: ${visible(d.top_tokens?.[t]?.[0] ?? d.top_ids[t][0])} ${pct(d.top_probs[t][0])}`;
    }
    return live;
  }

  /** The data flow of the model, drawn from its config, and the overview of the pass. */
  map(open) {
    const { cfg, T } = this;
    const C = cfg.d_model;
    const H = cfg.n_head;
    const F = cfg.d_ff;
    const live = this.live();
    const box = (anchor, title, detail, now, numbered = true, extra = "") => {
      const label = numbered ? `${NUMBER[anchor]} · ${title}` : title;
      const current = numbered && open.size === 1 && open.has(anchor) ? " ins-current" : "";
      return html`<div class="ins-box${current}" data-goto="ins-s-${anchor}"><button type="button" class="ins-open" data-goto="ins-s-${anchor}" aria-controls="ins-b-${anchor}"><b>${label}</b><span class="ins-detail">${detail}</span><em class="ins-live">${now}</em></button>${extra}</div>`;
    };
    const arrow = raw('<span class="ins-arrow" aria-hidden="true">→</span>');
    const block = html`<div class="ins-block"><div class="ins-block-title">block × ${cfg.n_layer}: layer ${chips("layer", cfg.n_layer, this.layer)}</div><div class="ins-flow">${[
      box("layernorm", "LayerNorm", "ln_1: mean 0, std 1, × γ + β", live.layernorm), arrow,
      box("attention", "Q, K, V", `${H} heads × ${this.D}: softmax(q·k/√${this.D}) @ V`, live.attention, true,
        html`<span class="ins-head-chips">head ${chips("head", H, this.head)}</span>`), arrow,
      box("residual", "+ residual", "x + attn(ln_1(x))", live.residual), arrow,
      box("ffn", "FFN", html`x + mlp(ln_2(x))<br>ln_2 → ${C} → ${F} → GELU → ${C}`, live.ffn),
    ]}</div></div>`;
    const down = raw('<span class="ins-arrow ins-down" aria-hidden="true">↓</span>');
    // On a wide screen the text over the embedding, the block's four stages two by two, the lens
    // over the output: the map two boxes high. On a phone the boxes flow two a row.
    return html`<nav id="ins-map" class="ins-map" aria-label="The data flow of one forward pass: each box opens its stage">${[
      html`<div class="ins-col">${box("embedding", "text", `${T} tokens`, live.text, false)}${down}${box("embedding", "Embedding", `E[ids] + P → (${T}, ${C})`, live.embedding)}</div>`,
      arrow, block, arrow,
      html`<div class="ins-col">${box("lens", "Logit lens", "ln_f + head after each layer", live.lens)}${down}${box("output", "Output", `ln_f → h·Eᵀ (${thousands(cfg.vocab_size)}) → softmax → loss`, live.output)}</div>`,
    ]}</nav>`;
  }
}

function chips(kind, n, chosen) {
  return html`<span class="ins-chips" role="group" aria-label="choose the ${kind}">${Array.from({ length: n }, (_, i) =>
    html`<button type="button" class="ins-chip${i === chosen ? " ins-on" : ""}" data-${kind}="${i}" aria-pressed="${String(i === chosen)}" title="${kind} ${i}">${i}</button>`)}</span>`;
}

/** A small copy of the map beside a panel's heading, this stage filled (a click: the map). */
function here(anchor, layer) {
  const cell = (a) => (a === anchor ? html`<i class="ins-on">${NUMBER[a]}</i>` : html`<i>${NUMBER[a]}</i>`);
  const before = STAGES.filter(([a]) => NUMBER[a] < NUMBER[IN_BLOCK[0]]).map(([a]) => cell(a));
  const after = STAGES.filter(([a]) => NUMBER[a] > NUMBER[IN_BLOCK[IN_BLOCK.length - 1]]).map(([a]) => cell(a));
  const where = IN_BLOCK.includes(anchor) ? `, inside block ${layer}` : "";
  return html`<a class="ins-here ins-up" href="#ins-map" title="Stage ${NUMBER[anchor]} of ${STAGES.length} in the map${where} (click: the map)"><span class="ins-here-text">text</span>${before}<span class="ins-here-block">${IN_BLOCK.map(cell)}</span>${after}<span class="ins-here-up">↑ map</span></a>`;
}

/** A stage's panel: its heading a button that folds or opens it, the body drawn only while open. */
function section(d, anchor, open, body) {
  return html`<section class="ins-panel" id="ins-s-${anchor}" data-stage="${anchor}"><h3><button type="button" class="ins-toggle" data-stage="${anchor}" aria-controls="ins-b-${anchor}" aria-expanded="${String(open)}"><span>${NUMBER[anchor]} · ${TITLE[anchor]}</span></button> ${open ? here(anchor, d.layer) : ""}</h3><div class="ins-body" id="ins-b-${anchor}"${open ? "" : raw(" hidden")}>${body}</div></section>`;
}

// --- pieces of the panels ---------------------------------------------------------------------------

const code = (text) => html`<p class="ins-code"><code>${text}</code></p>`;
const shape = (...dims) => html`<code>(${dims.join(", ")})</code>`;
const scaleKey = (low, high, gradient = "ins-grad-div", middle = "") =>
  html`<span class="ins-scale" title="colour scale"><em>${low}</em><i class="${gradient}"></i>${middle ? html`<em>${middle}</em>` : ""}<em>${high}</em></span>`;
const key = () => html`<p class="ins-key">Each strip is one vector, a cell per number: ${scaleKey("−", "+", "ins-grad-div", "0")} blue below 0, white at 0, red above; full colour at the ± range written at the strip's right end. Hover or touch a cell for its index and value.</p>`;

/**
 * One vector as one row of coloured cells, scaled to the width (on a phone too); `groups` equal
 * segments (the heads) marked apart, segment `chosen` outlined; its colour range at its right end.
 */
function strip(view, v, label, { scale = null, groups = 1, chosen = null, groupLabels = true } = {}) {
  const range = (scale ?? maxAbs(v)) || 1;
  const n = v.length;
  const at = view.pixels(n, 1, stripColours(v, range));
  let overlay = "";
  if (groups > 1) {
    const width = 100 / groups;
    overlay = html`<span class="ins-grid" style="--ins-groups:${groups}"></span>${chosen === null ? "" : html`<span class="ins-seg-on" style="left:${(chosen * width).toFixed(4)}%;width:${width.toFixed(4)}%"></span>`}`;
  }
  const heads = groups > 1 && groupLabels
    ? html`<span class="ins-heads">${Array.from({ length: groups }, (_, g) => html`<b${g === chosen ? raw(' class="ins-on"') : ""}>head ${g}</b>`)}</span>` : "";
  const values = Array.from(v, (x) => x.toFixed(4)).join(",");
  return html`<div class="ins-strip"><span class="ins-strip-label">${label}</span><span class="ins-cells" data-v="${values}" data-name="${label}" data-groups="${groups}">${heads}<span class="ins-img-wrap"><canvas class="ins-img${n > 512 ? " ins-smooth" : ""}" data-paint="${at}" role="img" aria-label="${label}: ${n} values, colour scale ±${range.toFixed(2)}"></canvas>${overlay}</span></span>${scaleKey(`−${range.toFixed(2)}`, `+${range.toFixed(2)}`)}</div>`;
}

const table = (head, rows, cls = "ins-table") => html`<div class="ins-table-wrap"><table class="${cls}">${head}<tbody>${rows}</tbody></table></div>`;

// --- the panels -------------------------------------------------------------------------------------

function embeddingPanel(d, view) {
  const { d: data, t, cfg, T } = d;
  const C = cfg.d_model;
  const id = data.ids[t];
  const scale = maxAbs(data.x0[t]);
  const kind = cfg.pos_encoding === "sinusoidal" ? "the sinusoidal table (sin and cos of pos / 10000^(2i/d_model))"
    : "the learned position table (a row per position, trained with the model)";
  const scaled = Boolean(cfg.scale_embedding); // "Attention Is All You Need", section 3.4
  const row = scaled ? `√${C} · E[${id}]` : `E[${id}]`;
  const times = scaled ? `, multiplied by √d_model = ${Math.sqrt(C).toFixed(0)} as in “Attention Is All You Need” (so that it is not drowned by the position row it is added to)` : "";
  return html`${code(scaled ? "x = wte(idx) * sqrt(d_model) + pos_table[:T]    # (T, d_model)" : "x = wte(idx) + pos_table[:T]    # (T, d_model)")}
    <p>Token ${t} ${d.tok(t)} is id <b>${id}</b>: its vector is row ${id} of the embedding table E ${shape(thousands(cfg.vocab_size), C)}${times}. Position ${t} adds row ${t} of ${kind}. Every token of the text gets one row: the block's input has shape ${shape(T, C)}.</p>
    ${key()}${strip(view, data.tok_emb[t], row, { scale })}${strip(view, data.pos_emb[t], `+ P[${t}]`, { scale })}${strip(view, data.x0[t], "= x", { scale })}
    <p>First values: ${row} = ${vec(data.tok_emb[t])}, P[${t}] = ${vec(data.pos_emb[t])}, x = ${vec(data.x0[t])}</p>`;
}

function layernormPanel(d, view) {
  const { tr, t, layer } = d;
  const x = tr.x_in[t];
  const mean = tr.ln1_mean[t];
  const std = tr.ln1_std[t];
  const gamma = tr.ln1_weight;
  const beta = tr.ln1_bias;
  const eps = d.cfg.layer_norm_eps ?? 1e-5;
  return html`${code("ln_1(x) = (x − mean) / √(var + ε) · γ + β    # over the d_model values of one token")}
    <p>Layer ${layer}, token ${t} ${d.tok(t)}: before, mean <b>${fixed(mean)}</b> and standard deviation <b>${fixed(std)}</b> (ε = ${gFormat(eps)}); after the division every token's vector has mean 0 and standard deviation 1, then the learned γ (scale) and β (shift) of each dimension apply.</p>
    ${strip(view, x, "x")}${strip(view, x.map((v) => (v - mean) / std), "(x−μ)/σ", { scale: 3 })}${strip(view, gamma, "γ")}${strip(view, beta, "β")}${strip(view, tr.ln1_out[t], "ln_1(x)")}
    <p>First values: x = ${vec(x)}, γ = ${vec(gamma)}, β = ${vec(beta)}, ln_1(x) = ${vec(tr.ln1_out[t])}</p>`;
}

/** The attention matrix's axes: each token's label centred on its column (keys) and row (queries). */
function matrixLabels(labels, chosen) {
  const T = labels.length;
  const step = Math.max(1, Math.ceil(T / MATRIX_LABELS));
  const keys = [];
  const queries = [];
  for (let i = 0; i < T; i += step) {
    const at = `${(((i + 0.5) * 100) / T).toFixed(4)}%`;
    keys.push(html`<span style="left:${at}" title="key ${i}">${labels[i]}</span>`);
    queries.push(html`<span${i === chosen ? raw(' class="ins-on"') : ""} style="top:${at}" title="query ${i}">${labels[i]}</span>`);
  }
  return [html`<div class="ins-xlabels" aria-hidden="true">${keys}</div>`, html`<div class="ins-ylabels" aria-hidden="true">${queries}</div>`];
}

function matrix(d, view) {
  const { tr, t, T, head: h, layer } = d;
  const w = tr.weights[h];
  const values = [];
  for (let q = 0; q < T; q++) for (let k = 0; k <= q; k++) values.push(w[q][k].toFixed(3));
  const [keys, queries] = matrixLabels(d.labels, t);
  const at = view.pixels(T, T, attentionColours(w));
  const row = 100 / T;
  return html`<div class="ins-matrix-wrap"><div class="ins-matrix-axes"><span class="ins-axis-x">keys (attended to) →</span><span class="ins-axis-y">queries ↓</span>${keys}${queries}<div class="ins-matrix" data-n="${T}" data-w="${values.join(",")}"><canvas class="ins-img" data-paint="${at}" role="img" aria-label="layer ${layer}, head ${h}: attention of every query (rows) to every key (columns)"></canvas><span class="ins-qrow" style="top:${(t * row).toFixed(4)}%;height:${row.toFixed(4)}%"></span></div></div>${scaleKey("0", "1", "ins-grad-att")}<span class="ins-masked-key"><i></i> masked (a later key)</span></div>`;
}

function attentionPanel(d, view) {
  const { tr, t, T, cfg, head: h, layer, D } = d;
  const C = cfg.d_model;
  const H = cfg.n_head;
  const heads = (m) => m.flatMap((perHead) => Array.from(perHead[t]));
  const scores = tr.scores[h][t];
  const weights = tr.weights[h][t];
  const dot = (j) => scores[j] * Math.sqrt(D);
  const row = (j) => html`<tr><td>${j}</td><td>${d.labels[j]}</td><td>${fixed(dot(j), 2)}</td><td>${fixed(scores[j], 2)}</td><td class="ins-bar"><span style="width:${(100 * weights[j]).toFixed(1)}%"></span><em>${weights[j].toFixed(3)}</em></td></tr>`;
  const headRow = html`<thead><tr><th>key</th><th>token</th><th>q·k</th><th>÷ √${D}</th><th>weight</th></tr></thead>`;
  const strongest = argsortDesc(Array.from(weights.slice(0, t + 1)), STRONGEST);
  const future = T - 1 - t;
  const rows = Array.from({ length: t + 1 }, (_, j) => row(j));
  if (future) rows.push(html`<tr class="ins-masked"><td>${t + 1}–${T - 1}</td><td colspan="2">${future} later token${future > 1 ? "s" : ""}: masked</td><td>−inf</td><td>0</td></tr>`);
  const concat = tr.concat[t];
  const headOut = concat.slice(h * D, (h + 1) * D);
  const top = strongest[0];
  return html`${code(`q, k, v = c_attn(ln_1(x)).split(${C}, dim=-1)    # each (T, ${C})`)}${code(`q = q.view(T, ${H}, ${D}).transpose(0, 1)    # (${T}, ${C}) → (${H}, ${T}, ${D}): ${H} heads of ${D}`)}
    <p>One matrix multiplication gives every token its query, key and value (${C} values each); the ${C} values are cut into ${H} heads of ${D}, and each head attends on its own. Token ${t} ${d.tok(t)}'s query, key and value, split (head ${h} outlined):</p>
    ${strip(view, heads(tr.q), "q", { groups: H, chosen: h })}${strip(view, heads(tr.k), "k", { groups: H, chosen: h, groupLabels: false })}${strip(view, heads(tr.v), "v", { groups: H, chosen: h, groupLabels: false })}
    ${code(`wei = q @ k.transpose(-2, -1) / √${D};  wei.masked_fill(tril == 0, −inf);  softmax;  out = wei @ v`)}
    <div class="ins-att-row"><div class="ins-att-matrix">${matrix(d, view)}</div><div class="ins-att-side">
    <p>Layer ${layer}, head ${h}: every query against every key at once, a ${shape(T, T)} matrix per head. The dot product q·k, divided by √${D} = ${Math.sqrt(D).toFixed(2)}; the causal mask hides each query's later keys (−inf, grey above the diagonal) and softmax turns each row into weights that sum to 1. Query ${t} ${d.tok(t)} is the outlined row; it attends most to key ${top} ${d.tok(top)} (${weights[top].toFixed(3)}). Hover a cell for its weight; click a row to choose that token.</p>
    <p>Query ${t}'s strongest keys, the row's numbers step by step:</p>
    ${table(headRow, strongest.map(row), "ins-table ins-strongest")}
    <details class="ins-details"><summary>Query ${t}'s whole row, key by key (${t + 1} keys${future ? ", then the masked later ones" : ""})</summary>${table(headRow, rows)}</details></div></div>
    <p>The head's output is the weighted sum of the value vectors: ${shape(D)} = ${vec(headOut)}</p>
    ${strip(view, headOut, `head ${h} out`, { scale: maxAbs(concat) })}
    <p>The ${H} heads' outputs side by side (concatenated) make ${C} values again; the output projection <code>c_proj</code> (${C} → ${C}) mixes them:</p>
    ${strip(view, concat, "concat", { groups: H, chosen: h })}${strip(view, tr.attn_out[t], "c_proj")}`;
}

/** Per layer at the chosen token: the norm of the stream entering it, and of what attention and the FFN add. */
export function residualNorms(data, t) {
  return {
    attention: data.layers.map((x) => norm(x.attn_out[t])),
    ffn: data.layers.map((x) => norm(x.mlp_out[t])),
    entering: data.layers.map((x) => norm(x.x_in[t])),
  };
}

/** A round tick step giving 3 to 6 ticks up to `top`. */
function niceStep(top) {
  const rough = top / 4 || 1;
  const mag = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= rough);
}

/** The residual stream layer by layer as an inline SVG: bars for the adds, a line for the stream entering. */
function residualChart(d) {
  const norms = residualNorms(d.d, d.t);
  const n = norms.entering.length;
  const [W, Hh, left, right, top, bottom] = [640, 230, 44, 10, 28, 30];
  const topValue = Math.max(...Object.values(norms).flat()) * 1.08 || 1;
  const step = niceStep(topValue);
  const y = (v) => top + (Hh - top - bottom) * (1 - v / topValue);
  const slot = (W - left - right) / n;
  const bar = slot * 0.3;
  const parts = [];
  for (let tick = 0; tick <= topValue; tick += step) {
    parts.push(html`<line x1="${left}" x2="${W - right}" y1="${y(tick).toFixed(1)}" y2="${y(tick).toFixed(1)}" class="ins-gridline"/><text x="${left - 4}" y="${(y(tick) + 4).toFixed(1)}" text-anchor="end">${gFormat(tick)}</text>`);
  }
  const line = [];
  for (let i = 0; i < n; i++) {
    const x0 = left + i * slot;
    if (i === d.layer) parts.push(html`<rect x="${x0.toFixed(1)}" y="${top}" width="${slot.toFixed(1)}" height="${Hh - top - bottom}" class="ins-chart-on"/>`);
    [["attention", "ins-c-att", "attention added"], ["ffn", "ins-c-ffn", "FFN added"]].forEach(([k, cls, what], j) => {
      const v = norms[k][i];
      const bx = x0 + slot / 2 - bar + j * bar;
      parts.push(html`<rect x="${bx.toFixed(1)}" y="${y(v).toFixed(1)}" width="${bar.toFixed(1)}" height="${(y(0) - y(v)).toFixed(1)}" class="${cls}"><title>layer ${i}: ‖${what}‖ = ${v.toFixed(3)}</title></rect>`);
    });
    line.push([x0 + slot / 2, y(norms.entering[i])]);
    parts.push(html`<text x="${(x0 + slot / 2).toFixed(1)}" y="${Hh - bottom + 16}" text-anchor="middle">layer ${i}</text>`);
  }
  parts.push(html`<polyline class="ins-c-line" points="${line.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" ")}"/>`);
  line.forEach(([a, b], i) => parts.push(html`<circle cx="${a.toFixed(1)}" cy="${b.toFixed(1)}" r="4" class="ins-c-dot"><title>layer ${i}: ‖x‖ entering = ${norms.entering[i].toFixed(3)}</title></circle>`));
  [["ins-c-att", "‖attention added‖"], ["ins-c-ffn", "‖FFN added‖"], ["ins-c-dot", "‖x‖ entering"]].forEach(([cls, text], k) => {
    const lx = left + k * 170;
    parts.push(html`<rect x="${lx}" y="6" width="12" height="12" class="${cls}"/><text x="${lx + 17}" y="16">${text}</text>`);
  });
  return html`<svg class="ins-chart" viewBox="0 0 ${W} ${Hh}" role="img" aria-label="Token ${d.t}: the residual stream layer by layer">${parts}</svg>`;
}

/**
 * Why layer 0's feed-forward add dwarfs the stream, where it does: it is mostly the token's own
 * (layer 0's FFN run on the token's embedding row alone points the same way). Empty elsewhere.
 */
export function firstFfnNote(d) {
  const { t } = d;
  const first = d.d.layers[0];
  const added = first.mlp_out[t];
  const add = norm(added);
  const stream = norm(first.x_in[t]);
  const alone = d.d.ffn0_alone?.[t];
  if (!alone) return "";
  const cosine = alone.reduce((a, x, i) => a + x * added[i], 0) / (norm(alone) * add || 1);
  if (add < FIRST_FFN_RATIO * stream || cosine < FIRST_FFN_COSINE) return "";
  return html`<p class="ins-first-ffn">Why layer 0's feed-forward add dwarfs the stream (‖${add.toFixed(2)}‖ on ‖${stream.toFixed(2)}‖): it writes a second, larger embedding of the token, set mostly by the token itself (run on ${d.tok(t)}'s embedding row alone, without its position or attention, it gives a vector at cosine <b>${cosine.toFixed(2)}</b> to the one it adds here), and the layers above read the stream through LayerNorms, which undo its size.</p>`;
}

function residualPanel(d, view) {
  const { tr, t, layer } = d;
  const scale = maxAbs(tr.x_mid[t]);
  const n = (v) => fixed(norm(v), 2);
  return html`${code("x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))")}
    <p>Each block adds to the token's vector rather than replacing it: the residual stream. Layer ${layer}, token ${t} ${d.tok(t)}: ‖x‖ = <b>${n(tr.x_in[t])}</b>, attention adds a vector of norm <b>${n(tr.attn_out[t])}</b> (‖x + attention‖ = ${n(tr.x_mid[t])}), the feed-forward network one of norm <b>${n(tr.mlp_out[t])}</b> (‖x‖ after the block = ${n(tr.x_out[t])}).</p>
    ${strip(view, tr.x_in[t], "x", { scale })}${strip(view, tr.attn_out[t], "+ attention", { scale })}${strip(view, tr.x_mid[t], "= x", { scale })}
    <p>Token ${t} ${d.tok(t)}'s stream over all ${d.d.layers.length} layers (layer ${layer} marked):</p>
    ${residualChart(d)}${firstFfnNote(d)}`;
}

function ffnPanel(d, view) {
  const { tr, t, layer, cfg } = d;
  const C = cfg.d_model;
  const act = tr.gelu[t];
  const pre = tr.fc[t];
  const F = act.length;
  const fired = act.filter((v) => v > 0).length;
  const top = argsortDesc(Array.from(act), STRONGEST);
  const scale = maxAbs(tr.x_out[t]);
  return html`${code(`mlp(x) = c_proj(gelu(c_fc(ln_2(x))))    # ${C} → ${F} → ${C}, each token on its own`)}
    <p>Layer ${layer}, token ${t} ${d.tok(t)}: ln_2 (mean ${fixed(tr.ln2_mean[t])}, std ${fixed(tr.ln2_std[t])}), then the up-projection to ${F} units. GELU (tanh form: 0.5·u·(1 + tanh(√(2/π)(u + 0.044715u³)))) lets positive values through and squashes negative ones to near 0: <b>${fired} of ${F}</b> units fire (&gt; 0) for this token. The strongest:</p>
    ${table(html`<thead><tr><th>unit</th><th>before GELU</th><th>after</th></tr></thead>`, top.map((u) => html`<tr><td>${u}</td><td>${fixed(pre[u])}</td><td>${fixed(act[u])}</td></tr>`))}
    ${strip(view, act, `GELU (${F})`)}
    <p>The down-projection brings the ${F} values back to ${C}, added to the stream (‖added‖ = ${fixed(norm(tr.mlp_out[t]), 2)}):</p>
    ${strip(view, tr.mlp_out[t], "c_proj", { scale })}${strip(view, tr.x_out[t], "x out", { scale })}`;
}

function lensPanel(d) {
  const { t, T, cfg } = d;
  const target = t + 1 < T ? d.d.tokens?.[t + 1] ?? null : null;
  const following = d.lensNext();
  const n = d.d.layers.length;
  const chipsOf = (row) => row.map(([text, p]) => html`<span class="ins-cand${target !== null && text === target ? " ins-hit" : ""}">${candidate(text)} <em>${pct(p)}</em></span>`);
  const head = html`<tr><th>stop after</th><th>top 5 next tokens</th>${following ? html`<th>${d.tok(t + 1)}: rank, probability</th>` : ""}</tr>`;
  const rows = d.lensTop().map((row, i) => {
    let cell = "";
    if (following) {
      const [rank, p] = following[i];
      cell = html`<td class="ins-next${rank === 1 ? " ins-top" : ""}" data-rank="${rank}" data-p="${gFormat(p)}">rank <b>${thousands(rank)}</b> <em>${pct(p, 2)}</em></td>`;
    }
    return html`<tr${i === d.layer ? raw(' class="ins-row-on"') : ""}><td>after layer ${i}${i === n - 1 ? " = the output" : ""}</td><td>${chipsOf(row)}</td>${cell}</tr>`;
  });
  const came = following
    ? html`The token that really came next, ${d.tok(t + 1)}, is outlined where it is in a top 5; the last column gives its rank among all ${thousands(cfg.vocab_size)} tokens (1 = the lens's first choice) and its probability after every layer: rank ${thousands(following[0][0])} after layer 0, ${thousands(following[n - 1][0])} at the output.`
    : "This is the text's last token: the model's guess for what comes after the text.";
  return html`${code("lens(x_ℓ) = softmax(ln_f(x_ℓ) @ E.T)    # stop after layer ℓ")}
    <p>If the model stopped after each layer (the final LayerNorm and the output head applied to the stream there), what would it predict after token ${t} ${d.tok(t)}? The prediction forms layer by layer. ${came}</p>
    <div class="ins-table-wrap"><table class="ins-table ins-lens">${head}${rows}</table></div>`;
}

const surprise = (loss, scale) => `rgba(234, 88, 12, ${(0.06 + 0.8 * Math.min(loss / scale, 1)).toFixed(2)})`;
const textOf = (text) => String(text).replace(/\n/g, "↵\n");

function lossText(d) {
  const data = d.d;
  const V = d.cfg.vocab_size;
  const scale = Math.log(V);
  const texts = data.tokens ?? data.ids.map(String);
  const spans = [html`<span class="ins-lt ins-first" data-t="0" title="0: the first token (nothing predicts it)">${textOf(texts[0])}</span>`];
  data.token_losses.forEach((loss, k) => {
    const i = k + 1;
    spans.push(html`<span class="ins-lt${i === d.t + 1 ? " ins-on" : ""}" data-t="${i - 1}" style="background:${surprise(loss, scale)}" title="${i}: −ln p = ${loss.toFixed(3)} nats (p = ${pct(Math.exp(-loss), 2)})">${textOf(texts[i])}</span>`);
  });
  const mean = data.loss === null ? "–" : data.loss.toFixed(3);
  const perplexity = data.loss === null ? "nan" : thousandsOne(Math.exp(data.loss));
  return html`<div class="ins-loss-text">${spans}</div><div class="pg-cards ins-cards"><div class="pg-card"><b id="ins-loss" data-loss="${data.loss ?? ""}">${mean}</b><span>loss: the mean of ${data.token_losses.length} values (nats)</span></div><div class="pg-card"><b>${scale.toFixed(3)}</b><span>ln ${thousands(V)}: a model that knows nothing</span></div><div class="pg-card"><b>${perplexity}</b><span>perplexity e^loss</span></div></div>`;
}

function outputPanel(d) {
  const { d: data, t, T, cfg } = d;
  const C = cfg.d_model;
  const V = cfg.vocab_size;
  const target = t + 1 < T ? data.ids[t + 1] : null;
  const bars = data.top_ids[t].map((id, k) => {
    const p = data.top_probs[t][k];
    return html`<tr${target !== null && id === target ? raw(' class="ins-hit"') : ""} data-id="${id}"><td>${visible(data.top_tokens?.[t]?.[k] ?? String(id))}</td><td>${fixed(data.top_logits[t][k], 2)}</td><td class="ins-bar"><span style="width:${(100 * p).toFixed(1)}%"></span><em>${pct(p, 2)}</em></td></tr>`;
  });
  const came = target !== null
    ? html`What really came next, ${d.tok(t + 1)} (id ${target}): logit ${fixed(data.next_logits[t], 2)}, p = ${pct(Math.exp(-data.token_losses[t]), 2)}, rank ${data.next_ranks[t]} of ${thousands(V)}; its loss −ln p = <b>${data.token_losses[t].toFixed(3)}</b> nats.`
    : "This is the last token: nothing in the text came next, so it adds no loss.";
  return html`${code("h = ln_f(x);  logits = h @ E.T;  p = softmax(logits);  loss = −ln p[next]")}
    <p>After the last block the final LayerNorm (token ${t}: mean ${fixed(data.lnf_mean[t])}, std ${fixed(data.lnf_std[t])}) gives h ${shape(T, C)}. The logits are h times the transpose of the same embedding matrix E ${shape(thousands(V), C)} as stage ${NUMBER.embedding} (weight tying): ${shape(T, thousands(V))}, one score per token of the vocabulary. Softmax: p = e^logit / Σ e^logit (here Σ = e^${data.logsumexp[t].toFixed(2)}). After ${d.tok(t)} the most probable next tokens:</p>
    ${table(html`<thead><tr><th>token</th><th>logit</th><th>probability</th></tr></thead>`, bars, "ins-table ins-candidates")}
    <p>${came}</p>
    <p>The loss of every token of the text, −ln p of the token that really came next, given those before it (the darker, the more it surprised the model; hover for the numbers, click a token to see the prediction that led to it; the chosen token's next is outlined):</p>
    ${lossText(d)}`;
}

const PANELS = {
  embedding: embeddingPanel, layernorm: layernormPanel, attention: attentionPanel, residual: residualPanel,
  ffn: ffnPanel, lens: lensPanel, output: outputPanel,
};

// --- the value under the pointer --------------------------------------------------------------------

function matrixCell(m, e) {
  const r = m.querySelector("canvas").getBoundingClientRect();
  const n = Number(m.dataset.n);
  const col = Math.floor(((e.clientX - r.left) / r.width) * n);
  const row = Math.floor(((e.clientY - r.top) / r.height) * n);
  if (row < 0 || col < 0 || row >= n || col >= n) return null;
  return { row, col };
}

// Parsed once per drawn element: a redraw makes new elements.
const parsed = new WeakMap();
const numbers = (el, key) => {
  if (!parsed.has(el)) parsed.set(el, el.dataset[key].split(",").map(Number));
  return parsed.get(el);
};

function describe(e, view) {
  const s = e.target.closest?.(".ins-cells[data-v]");
  if (s) {
    const r = s.querySelector("canvas").getBoundingClientRect();
    const v = numbers(s, "v");
    const i = Math.floor(((e.clientX - r.left) / r.width) * v.length);
    if (i < 0 || i >= v.length || e.clientY < r.top || e.clientY > r.bottom) return null;
    const groups = Number(s.dataset.groups || 1);
    const size = v.length / groups;
    const where = groups > 1 ? ` (head ${Math.floor(i / size)}, ${i % size})` : "";
    return `${s.dataset.name}: index ${i}${where} = ${v[i].toFixed(4)}`;
  }
  const m = e.target.closest?.(".ins-matrix[data-n]");
  if (m) {
    const c = matrixCell(m, e);
    if (!c) return null;
    const texts = view.data.tokens ?? view.data.ids.map(String);
    const pair = `query ${c.row} ${JSON.stringify(texts[c.row])} → key ${c.col} ${JSON.stringify(texts[c.col])}`;
    if (c.col > c.row) return `${pair}: masked (a later key), weight 0`;
    return `${pair}: weight ${numbers(m, "w")[(c.row * (c.row + 1)) / 2 + c.col].toFixed(3)}`;
  }
  return null;
}

function tooltip(root) {
  const doc = root.ownerDocument;
  let tip = doc.getElementById("ins-tip");
  if (!tip) {
    tip = doc.createElement("div");
    tip.id = "ins-tip";
    tip.setAttribute("role", "tooltip");
    doc.body.append(tip);
  }
  return {
    show(text, e) {
      if (!text) return this.hide();
      tip.textContent = text;
      tip.style.display = "block";
      const x = Math.min(e.clientX + 12, doc.defaultView.innerWidth - tip.offsetWidth - 4);
      tip.style.left = `${Math.max(4, x)}px`;
      tip.style.top = `${e.clientY + 16}px`;
    },
    hide() {
      tip.style.display = "none";
    },
  };
}

export { esc };
