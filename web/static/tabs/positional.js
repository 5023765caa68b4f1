// Positional encoding, in the browser: the sinusoidal table for any d_model, positions and base,
// computed as model.positional_encoding computes it (float64, stored as float32) and drawn whole on
// a canvas, one pixel per position and dimension (as a plotly heatmap, half a million cells took
// the browser seconds); the chosen dimensions over positions, the frequencies and wavelengths, and
// the dot products that depend only on the offset, as playground/positional.py draws them.

import { InputError, pyG, pyRepr, readInt, sentence, validateText, wrap } from "../checks.js";

const TUTORIAL_DIMS = [2, 4, 6, 8];
const LINES_WINDOW = 128; // positions the lines plot opens on: past this the fast dimensions fill it
const MAX_SIMILARITY_POSITIONS = 256;
// plotly's named colour scales, as the app's figures use them (plotly.colors.get_colorscale).
const RDBU = ["rgb(103,0,31)", "rgb(178,24,43)", "rgb(214,96,77)", "rgb(244,165,130)", "rgb(253,219,199)", "rgb(247,247,247)",
  "rgb(209,229,240)", "rgb(146,197,222)", "rgb(67,147,195)", "rgb(33,102,172)", "rgb(5,48,97)"];
const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
const LEVELS = 256; // colours in the lookup table (playground/image_map.LEVELS)

/** Python's format(x, ".1e"): the exponent with at least two digits. */
const pyE = (x) => x.toExponential(1).replace(/e([+-])(\d)$/, "e$10$2");
const thousands = (n) => n.toLocaleString("en-US");
// A wavelength as the summary line writes it (and the app's, playground/ui/positional.py): whole
// positions once it is long, two decimals while it is short (2π = 6.28).
const positions = (w) => (w < 100 ? w.toFixed(2) : thousands(Math.round(w)));

/** f_i = exp(-2i ln(base) / d_model), i = 0 .. d_model/2 - 1, as model.positional_encoding's div_term. */
export function frequencies(d, base) {
  const k = -Math.log(base) / d;
  return Float64Array.from({ length: d / 2 }, (_, i) => Math.exp(2 * i * k));
}

/** The table [n * d] (row-major, float32 as the model's): PE[p, 2i] = sin(p f_i), PE[p, 2i+1] = cos(p f_i). */
export function sinusoidalTable(n, d, base) {
  const f = frequencies(d, base);
  const table = new Float32Array(n * d);
  for (let p = 0; p < n; p++) {
    for (let i = 0; i < d / 2; i++) {
      const angle = p * f[i];
      table[p * d + 2 * i] = Math.sin(angle);
      table[p * d + 2 * i + 1] = Math.cos(angle);
    }
  }
  return table;
}

/** Positions per full turn of dimension `dim`: 2π / f_i with 2i = dim rounded down to even. */
export const wavelength = (dim, d, base) => 2 * Math.PI * base ** ((dim - (dim % 2)) / d);

/** A colour scale's stops (evenly spaced) sampled into LEVELS rgb triples. */
function lookup(stops) {
  const rgb = stops.map((s) => (s.startsWith("#") ? [1, 3, 5].map((k) => parseInt(s.slice(k, k + 2), 16)) : s.match(/\d+/g).map(Number)));
  const out = new Uint8ClampedArray(LEVELS * 3);
  for (let l = 0; l < LEVELS; l++) {
    const t = (l / (LEVELS - 1)) * (rgb.length - 1);
    const k = Math.min(Math.floor(t), rgb.length - 2);
    const u = t - k;
    for (let c = 0; c < 3; c++) out[3 * l + c] = Math.round(rgb[k][c] + u * (rgb[k + 1][c] - rgb[k][c]));
  }
  return out;
}
const LUTS = { RdBu: lookup(RDBU), Viridis: lookup(VIRIDIS) };

/** A float setting as validate_float checks it, or a message. */
function readFloat(raw, name, minimum, maximum) {
  const s = String(raw).trim();
  const v = Number(s);
  const accepted = `a number in [${pyG(minimum)}, ${pyG(maximum)}]`;
  if (!s || Number.isNaN(v)) throw new InputError(`${name} must be a number, not ${pyRepr(String(raw))}`);
  if (!Number.isFinite(v) || v < minimum || v > maximum) throw new InputError(`${name} must be ${accepted}, not ${pyG(v)}`);
  return v;
}

/** The "Dimensions to plot" box, as positional._parse_dims reads it (parse_int_list's messages). */
function readDims(raw, d, maxCount) {
  const name = "dimensions";
  const text = validateText(raw, name, 200).trim();
  const body = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const items = body.split(/[\s,]+/).filter(Boolean);
  if (!items.length) throw new InputError(`${name}: no numbers found; type ids separated by commas or spaces, e.g. 31373, 2506`);
  if (items.length > maxCount) throw new InputError(`${name}: ${thousands(items.length)} numbers given; the limit is ${thousands(maxCount)}`);
  items.forEach((item, k) => {
    if (!/^[+-]?\d+$/.test(item)) throw new InputError(`${name}: item ${k + 1} (${pyRepr(item)}) is not a whole number; type ids separated by commas or spaces, e.g. 31373, 2506`);
  });
  return [...new Set(items.map((item) => readInt(item, "dimension", 0, d - 1)))];
}

/**
 * A matrix drawn as one canvas, a pixel per cell (the browser scales it without smoothing), with
 * its axes' ticks, a colour bar, a readout of the cell under the pointer (a tap on a phone), and a
 * box dragged with the mouse zooming in (double-click or the button: the whole matrix again).
 */
function pixelMap(el, { id, title, rows, cols, value, colours, zmin, zmax, xName, yName, describe, height }) {
  const canvas = el("canvas", { id: `${id}-canvas`, class: "pe-canvas" });
  const lut = LUTS[colours];
  const span = zmax - zmin || 1;
  let view = { r0: 0, r1: rows - 1, c0: 0, c1: cols - 1 };
  const yTicks = el("div", { class: "pe-yticks", style: `height: ${height}px` });
  const xTicks = el("div", { class: "pe-xticks" });
  const cross = el("div", { class: "pe-cross", hidden: true });
  const band = el("div", { class: "pe-band", hidden: true });
  const box = el("div", { class: "pe-canvas-box" }, el("div", { class: "pe-canvas-wrap" }, canvas, cross, band), xTicks);
  const reset = el("button", { type: "button", class: "pg-btn pe-reset", id: `${id}-reset`, hidden: true }, "Whole table");
  const readout = el("div", { class: "pe-readout", id: `${id}-readout`, "aria-live": "polite" }, `Hover or tap a cell: its ${yName}, ${xName} and value.`);

  function render() {
    const h = view.r1 - view.r0 + 1, w = view.c1 - view.c0 + 1;
    canvas.width = w;
    canvas.height = h;
    const image = new ImageData(w, h);
    for (let r = 0; r < h; r++) {
      for (let c = 0; c < w; c++) {
        const l = Math.max(0, Math.min(LEVELS - 1, Math.round(((value(view.r0 + r, view.c0 + c) - zmin) / span) * (LEVELS - 1))));
        const at = 4 * (r * w + c);
        image.data[at] = lut[3 * l];
        image.data[at + 1] = lut[3 * l + 1];
        image.data[at + 2] = lut[3 * l + 2];
        image.data[at + 3] = 255;
      }
    }
    canvas.getContext("2d").putImageData(image, 0, 0);
    canvas.style.height = `${height}px`;
    // At least a CSS pixel per column: a wide table scrolls inside its frame, never the page.
    box.style.minWidth = `${Math.min(w, 1024)}px`;
    const ticks = (lo, n, horizontal) => niceTicks(n).map((t) => el("span", {
      class: "pe-tick", style: `${horizontal ? "left" : "top"}: ${((t + 0.5) / n) * 100}%`,
    }, String(lo + t)));
    yTicks.replaceChildren(...ticks(view.r0, h, false));
    xTicks.replaceChildren(...ticks(view.c0, w, true));
    reset.hidden = h === rows && w === cols;
    cross.hidden = true;
  }

  // The cell under a pointer event, in the whole matrix's coordinates (clamped to the view).
  const cellAt = (e) => {
    const rect = canvas.getBoundingClientRect();
    const h = view.r1 - view.r0 + 1, w = view.c1 - view.c0 + 1;
    const c = Math.floor(((e.clientX - rect.left) / rect.width) * w);
    const r = Math.floor(((e.clientY - rect.top) / rect.height) * h);
    return { r: view.r0 + Math.max(0, Math.min(h - 1, r)), c: view.c0 + Math.max(0, Math.min(w - 1, c)), inside: r >= 0 && c >= 0 && r < h && c < w };
  };
  const place = (node, ra, rb, ca, cb) => {
    const h = view.r1 - view.r0 + 1, w = view.c1 - view.c0 + 1;
    Object.assign(node.style, {
      left: `${((Math.min(ca, cb) - view.c0) / w) * 100}%`, top: `${((Math.min(ra, rb) - view.r0) / h) * 100}%`,
      width: `${((Math.abs(cb - ca) + 1) / w) * 100}%`, height: `${((Math.abs(rb - ra) + 1) / h) * 100}%`,
    });
    node.hidden = false;
  };
  let drag = null;
  const show = (e) => {
    const { r, c, inside } = cellAt(e);
    if (drag) place(band, drag.r, r, drag.c, c);
    if (!inside) return;
    readout.textContent = describe(r, c, value(r, c));
    readout.dataset.row = String(r);
    readout.dataset.col = String(c);
    place(cross, r, r, c, c);
  };
  canvas.addEventListener("pointermove", show);
  canvas.addEventListener("pointerdown", (e) => {
    show(e);
    if (e.pointerType !== "mouse" || e.button !== 0) return; // a finger scrolls the page, a mouse draws the box
    drag = cellAt(e);
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointerup", (e) => {
    if (!drag) return;
    const end = cellAt(e);
    band.hidden = true;
    const start = drag;
    drag = null;
    if (Math.abs(end.r - start.r) < 1 && Math.abs(end.c - start.c) < 1) return; // a click, not a box
    view = { r0: Math.min(start.r, end.r), r1: Math.max(start.r, end.r), c0: Math.min(start.c, end.c), c1: Math.max(start.c, end.c) };
    render();
  });
  const whole = () => { view = { r0: 0, r1: rows - 1, c0: 0, c1: cols - 1 }; render(); };
  canvas.addEventListener("dblclick", whole);
  reset.addEventListener("click", whole);
  render();

  const gradient = Array.from({ length: 11 }, (_, k) => {
    const l = Math.round((k / 10) * (LEVELS - 1));
    return `rgb(${lut[3 * l]},${lut[3 * l + 1]},${lut[3 * l + 2]}) ${k * 10}%`;
  }).join(", ");
  const bar = el("div", { class: "pe-colourbar" }, el("span", {}, zmin.toFixed(2)),
    el("div", { class: "pe-gradient", style: `background: linear-gradient(to right, ${gradient})` }), el("span", {}, zmax.toFixed(2)));
  return el("figure", { class: "pe-map", id },
    el("figcaption", { class: "pe-map-title" }, title),
    el("div", { class: "pe-axis-names pg-subdued" }, `${xName} →, ${yName} ↓ `, reset),
    el("div", { class: "pe-frame" }, el("div", { class: "pe-plot" }, yTicks, box)), bar, readout);
}

/** About six round tick values from 0 to n - 1. */
function niceTicks(n) {
  if (n <= 1) return [0];
  const raw = (n - 1) / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let t = 0; t <= n - 1; t += step) out.push(Math.round(t));
  return out;
}

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const limits = site.limits;
  const lesson = ctx.lesson;
  const spec = Object.fromEntries(site.links.positional.map((p) => [p.name, p]));
  const number = (name, label, value, step) => el("div", { class: "pe-field" },
    el("label", { for: `pe-${name}` }, label),
    el("input", { type: "number", id: `pe-${name}`, min: spec[name].minimum, max: spec[name].maximum, step, value }));
  const fields = {
    d_model: number("d_model", "d_model (even)", linked?.d_model ?? 20, 2),
    n_positions: number("n_positions", "Positions", linked?.n_positions ?? 100, 1),
    base: number("base", "Base (the paper: 10000)", linked?.base ?? 10000, 1),
  };
  const input = (name) => fields[name].querySelector("input");
  const dims = el("input", { type: "text", id: "pe-dims", value: linked?.dims ?? TUTORIAL_DIMS.join(", "), "aria-label": "Dimensions to plot" });
  const runButton = el("button", { class: "pg-btn primary", type: "button", id: "pe-run" }, "Compute");
  const error = el("div", { class: "pg-error", id: "pe-error", role: "alert", hidden: true });
  const summary = el("div", { class: "pe-summary", id: "pe-summary" });
  const table = el("div", { class: "pe-table", id: "pe-table" });
  const lines = el("div", { class: "pg-plot", id: "pe-lines" });
  const spectrum = el("div", { class: "pg-plot", id: "pe-spectrum" });
  const similarity = el("div", { class: "pe-similarity", id: "pe-similarity" });
  const offsets = el("div", { class: "pg-plot", id: "pe-offsets" });
  const results = el("div", { class: "pe-results", id: "pe-results" }, summary, table,
    el("p", { class: "pg-note pe-hint" }, el("span", { html: lesson.captions?.table_hint || "" })),
    el("div", { class: "pg-row" }, el("div", { class: "pg-col" }, lines), el("div", { class: "pg-col" }, spectrum)),
    el("div", { class: "pg-row" }, el("div", { class: "pg-col" }, similarity), el("div", { class: "pg-col" }, offsets)));

  root.append(
    el("div", { class: "pe-formula", id: "pe-formula", html: FORMULA_HTML }),
    el("div", { class: "pg-note pe-lesson-fix", id: "pe-lesson-fix", html: lesson.notes?.lesson_fix || "" }),
    el("div", { class: "pg-row pe-controls" }, fields.d_model, fields.n_positions, fields.base,
      el("div", { class: "pe-field pe-dims" }, el("label", { for: "pe-dims" }, "Dimensions to plot (the lesson's: 2, 4, 6, 8)"), dims)),
    el("div", { style: "margin: 8px 0" }, runButton), error, results,
    el("h2", {}, el("span", { html: lesson.captions?.model_table || "The model's own table" })),
    el("p", { class: "pg-note" }, "This model learned its positions (a trained table, not the formula): the full app draws that table beside the sinusoidal one."));

  let drawn = 0;

  function settings() {
    const d = readInt(input("d_model").value, "d_model", limits.MIN_D_MODEL, limits.MAX_D_MODEL);
    if (d % 2) throw new InputError(`d_model must be even (each frequency has a sine and a cosine column), not ${d}`);
    const n = readInt(input("n_positions").value, "number of positions", limits.MIN_POSITIONS, limits.MAX_POSITIONS);
    const base = readFloat(input("base").value, "base", limits.MIN_BASE, limits.MAX_BASE);
    return { d, n, base, dims: readDims(dims.value, d, limits.MAX_PLOT_DIMS) };
  }

  function run() {
    let s;
    try {
      s = settings();
    } catch (err) {
      if (!(err instanceof InputError)) console.error(err);
      error.hidden = false;
      error.textContent = sentence(err.message);
      if (results.dataset.shown) {
        error.append(" The result below is from the last input that worked.");
        results.classList.add("pg-stale");
      }
      return;
    }
    error.hidden = true;
    results.classList.remove("pg-stale");
    results.dataset.shown = "true";
    draw(s);
  }

  function draw({ d, n, base, dims: chosen }) {
    const which = ++drawn;
    const pe = sinusoidalTable(n, d, base);
    const freqs = frequencies(d, base);
    const waves = Array.from(freqs, (f) => (2 * Math.PI) / f);
    const at = (p, c) => pe[p * d + c];
    const dot = (p, q) => {
      let s = 0;
      for (let c = 0; c < d; c++) s += pe[p * d + c] * pe[q * d + c];
      return s;
    };
    // PE[p]·PE[p+k] from a few starts p: the curves coincide (sin a sin b + cos a cos b = cos(a − b)).
    const starts = n > 2 ? [...new Set([0, Math.floor(n / 4), Math.floor(n / 2)])].sort((a, b) => a - b) : [0];
    const kMax = Math.min(MAX_SIMILARITY_POSITIONS, n - Math.max(...starts));
    const ks = Array.from({ length: Math.max(kMax, 0) }, (_, k) => k);
    const series = starts.map((p) => ks.map((k) => dot(p, p + k)));
    let spread = 0;
    for (const s of series) s.forEach((v, k) => { spread = Math.max(spread, Math.abs(v - series[0][k])); });

    summary.replaceChildren(el("b", {}, `${n} positions × ${d} dimensions`),
      `, base ${pyG(base)}: wavelengths from ${waves[0].toFixed(2)} to ${thousands(Math.round(waves[waves.length - 1]))} positions. `
      + `PE[p]·PE[p+k] depends only on the offset k: across all p it varies by at most ${pyE(spread)} for any k.`);

    let lim = 0;
    for (const v of pe) lim = Math.max(lim, Math.abs(v));
    lim ||= 1;
    table.replaceChildren(pixelMap(el, {
      id: "pe-heatmap", title: `Sinusoidal positional encoding: ${n} positions × ${d} dimensions, base ${pyG(base)}`,
      rows: n, cols: d, value: at, colours: "RdBu", zmin: -lim, zmax: lim, xName: "dimension", yName: "position",
      height: n > 256 ? n : 320,
      describe: (p, c, v) => `position ${p}, dimension ${c}: ${c % 2 ? "cos" : "sin"}(${p} / ${pyG(base)}^(${c - (c % 2)}/${d})) = ${v.toFixed(4)} `
        + `(a turn every ${positions(wavelength(c, d, base))} positions)`,
    }));

    const m = Math.min(n, MAX_SIMILARITY_POSITIONS);
    const gram = new Float64Array(m * m);
    let gmin = Infinity, gmax = -Infinity;
    for (let p = 0; p < m; p++) {
      for (let q = p; q < m; q++) {
        const v = dot(p, q);
        gram[p * m + q] = gram[q * m + p] = v;
        gmin = Math.min(gmin, v);
        gmax = Math.max(gmax, v);
      }
    }
    similarity.replaceChildren(pixelMap(el, {
      id: "pe-gram", title: `Dot product PE[p] · PE[q], first ${m} positions (constant along diagonals)`,
      rows: m, cols: m, value: (p, q) => gram[p * m + q], colours: "Viridis", zmin: gmin, zmax: gmax,
      xName: "position q", yName: "position p", height: 300,
      describe: (p, q, v) => `p ${p}, q ${q}: PE[p]·PE[q] = ${v.toFixed(2)}`,
    }));

    // For the tests and the curious: the table as drawn, cell by cell.
    window.pgPositional = {
      d_model: d, n_positions: n, base, dims: chosen, frequencies: Array.from(freqs), wavelengths: waves, spread,
      table: (p, c) => at(p, c),
    };
    table.dataset.drawn = `${d}x${n}@${base}`;
    drawPlots(which, { d, n, base, chosen, at, freqs, waves, ks, starts, series });
  }

  async function drawPlots(which, { d, n, base, chosen, at, freqs, waves, ks, starts, series }) {
    let Plotly;
    try {
      Plotly = await ctx.plotly();
    } catch (err) {
      lines.replaceChildren(el("div", { class: "pg-error" }, `The plots could not be drawn: ${err.message}`));
      return;
    }
    if (which !== drawn) return;
    const positions = Array.from({ length: n }, (_, p) => p);
    const config = { displayModeBar: false, responsive: true };
    const layout = (title, x, y, extra = {}) => {
      const text = wrap(title);
      return {
        title: { text, x: 0.01, xanchor: "left", font: { size: 14 } }, height: 380,
        margin: { l: 56, r: 16, t: 30 + 19 * text.split("<br>").length, b: 56 },
        xaxis: { title: { text: x } }, yaxis: { title: { text: y } }, legend: { orientation: "h", y: -0.22, x: 0 }, ...extra,
      };
    };
    let linesTitle = `PE over positions, dimensions ${chosen.join(", ")}`;
    if (n > LINES_WINDOW) linesTitle += ` (positions 0–${LINES_WINDOW - 1} shown: drag to pan, zoom out for all ${n})`;
    const linesLayout = layout(linesTitle, "position", "value");
    linesLayout.xaxis.range = [0, Math.min(n, LINES_WINDOW) - 1];
    const pairs = Array.from(freqs, (_, i) => 2 * i);
    const spectrumLayout = layout(`Frequency and wavelength per dimension pair (2i, 2i+1), base ${pyG(base)}`, "dimension 2i", "log scale");
    spectrumLayout.yaxis.type = "log";
    await Promise.all([
      Plotly.react(lines, chosen.map((c) => ({ type: "scatter", mode: "lines", name: `dim ${c}`, x: positions, y: positions.map((p) => at(p, c)) })),
        linesLayout, config),
      Plotly.react(spectrum, [
        { type: "scatter", mode: "lines+markers", name: "wavelength 2π/f_i (positions)", x: pairs, y: waves },
        { type: "scatter", mode: "lines+markers", name: "frequency f_i (radians/position)", x: pairs, y: Array.from(freqs) },
      ], spectrumLayout, config),
      Plotly.react(offsets, starts.map((p, j) => ({ type: "scatter", mode: "lines", name: `from position ${p}`, x: ks, y: series[j] })),
        layout("Dot product PE[p] · PE[p + k]: the same curve from every start p", "offset k", "dot product"), config),
    ]);
    if (which === drawn) lines.dataset.drawn = String(which);
  }

  runButton.addEventListener("click", run);
  for (const box of [input("d_model"), input("n_positions"), input("base"), dims]) {
    box.addEventListener("change", run);
    box.addEventListener("keydown", (e) => e.key === "Enter" && run());
  }
  run();
  return {
    settings: () => ({ d_model: Number(input("d_model").value), n_positions: Number(input("n_positions").value), base: Number(input("base").value), dims: dims.value }),
  };
}

// The lesson's formula (the app typesets it with LaTeX), one line each so a phone holds it.
const FRACTION = "<span class=\"pe-frac\"><span>pos</span><span>base<sup>2i/d<sub>model</sub></sup></span></span>";
const FORMULA_HTML = `
<div class="pe-line"><i>PE</i><sub>(pos, 2i)</sub> = sin(${FRACTION})</div>
<div class="pe-line"><i>PE</i><sub>(pos, 2i+1)</sub> = cos(${FRACTION})</div>
<div class="pe-line"><i>f<sub>i</sub></i> = 1 / base<sup>2i/d<sub>model</sub></sup> = exp(−2i · ln base / d<sub>model</sub>)</div>`;
