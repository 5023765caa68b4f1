// The static edition's page: the tab bar, each tab's lesson around its module (tabs/*.js), links,
// and the shared resources the tabs load only when one needs them (the tokenizer, the model,
// plotly.js, the embedding table), each once, with progress.

import { Engine, loadOrt } from "./engine/engine.js";
import { fetchBytes, fetchJSON } from "./engine/fetch.js";
import { untrainedInside } from "./engine/compare.js";
import { drawWeights } from "./engine/init.js";
import { Inside } from "./engine/inside.js";
import { Tokenizer } from "./engine/tokenizer.js";
import { linkTo, parseQuery } from "./links.js";
import { el } from "./views/dom.js";

const TAB_TITLES = {
  tokenization: "Tokenization", embeddings: "Embeddings", positional: "Positional encoding", attention: "Attention",
  inside: "Inside the model", generation: "Text generation", model: "Model", compare: "Compare", learn: "Watch it learn",
};

// The large libraries, gzipped in the folder (deploy/static.py), by their keys in site.json's files.
const ORT_WASM_FILE = "vendor/ort/ort-wasm-simd-threaded.wasm.gz";
const PLOTLY_FILE = "vendor/plotly/plotly.min.js.gz";

const $ = (sel, root = document) => root.querySelector(sel);

// -- shared resources, loaded once, on first need ------------------------------------------------

const once = (make) => {
  let promise = null;
  return (...args) => (promise ??= make(...args).catch((err) => { promise = null; throw err; }));
};

const progress = {
  box: null,
  show(text, fraction) {
    this.box ??= $("#pg-progress");
    this.box.hidden = false;
    $(".pg-progress-text", this.box).textContent = text;
    const bar = $("progress", this.box);
    if (fraction === null) bar.removeAttribute("value");
    else bar.value = fraction;
  },
  hide() {
    if (this.box) this.box.hidden = true;
  },
};

const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;

function reporter(what) {
  return ({ loaded, total, cached }) => {
    if (cached) progress.show(`${what}: from this browser's cache`, 1);
    else progress.show(`Downloading ${what}: ${mb(loaded)}${total ? ` of ${mb(total)}` : ""} (kept in this browser for your next visit)`, total ? loaded / total : null);
  };
}

function makeResources(site) {
  const f = site.files;
  const tokenizer = once(async () => Tokenizer.fromJSON(await fetchJSON(f["model/tokenizer.json"], reporter("the tokenizer"))));
  const ort = once(() => loadOrt("./vendor/ort/", { wasm: f[ORT_WASM_FILE], onProgress: reporter("onnxruntime-web") }));
  const engine = once(async () => {
    const t0 = performance.now();
    const loaded = await Engine.load({
      ort: await ort(), model: f["model/model.onnx"], tokenizer: f["model/tokenizer.json"], config: f["model/config.json"],
      onProgress: ({ file, ...p }) => file === "model" && reporter(`the model (${site.model.file})`)(p),
    });
    progress.show(`The model is ready (${((performance.now() - t0) / 1000).toFixed(1)} s${loaded.cached ? ", from this browser's cache" : ""}).`, 1);
    setTimeout(() => progress.hide(), 1500);
    window.pgEngine = loaded; // for the browser tests and the curious, in the console
    loaded.warmUp();
    return loaded;
  });
  // plotly.js through the same cache as the model (a classic script, run from the cached bytes).
  const plotly = once(async () => {
    if (window.Plotly) return window.Plotly;
    const { bytes } = await fetchBytes(f[PLOTLY_FILE], reporter("plotly.js"));
    progress.hide();
    const src = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
    try {
      await new Promise((resolve, reject) => {
        const script = el("script", { src });
        script.onload = resolve;
        script.onerror = () => reject(new Error("plotly.js could not be loaded"));
        document.head.append(script);
      });
    } finally {
      URL.revokeObjectURL(src);
    }
    return window.Plotly;
  });
  const embeddings = once(async () => {
    const meta = await fetchJSON(f["data/embeddings.json"]);
    const { bytes } = await fetchBytes(f["data/embeddings.bin"], reporter("the token embeddings"));
    progress.hide();
    return { ...meta, rows: float16ToFloat32(bytes) };
  });
  // Inside the model: the stage graph and its own 8-bit weights (export/inside_graph.py), fetched
  // when that tab first opens; the tokenizer is the page's.
  const inside = once(async () => {
    const [runtime, tok] = await Promise.all([ort(), tokenizer()]);
    const t0 = performance.now();
    const loaded = await Inside.load({
      ort: runtime, graph: f["inside/graph.onnx"], lens: f["inside/lens.onnx"], weights: f["inside/weights.bin"], index: f["inside/weights.json"],
      tokenText: (id) => tok.tokenText(id),
      onProgress: ({ file, ...p }) => reporter({ weights: "the model's weights for Inside (8-bit)", lens: "the logit lens's graph" }[file] ?? "the stage graph")(p),
    });
    loaded.tokenizer = tok;
    progress.show(`The model's stages are ready (${((performance.now() - t0) / 1000).toFixed(1)} s).`, 1);
    setTimeout(() => progress.hide(), 1500);
    return oneAtATime(loaded);
  });
  // Compare's untrained start: drawn in this page (data/compare.json: the seed and each weight's
  // rule) while the trained weights download, then run on the same stage graph.
  const untrained = once(async (onProgress) => {
    const meta = await fetchJSON(f["data/compare.json"]);
    const [trained, drawn] = await Promise.all([inside(), drawWeights(meta.spec, meta.seed, { onProgress })]);
    const loaded = oneAtATime(untrainedInside(trained, drawn));
    loaded.tokenizer = trained.tokenizer;
    loaded.labels = meta.labels;
    loaded.seed = meta.seed;
    return loaded;
  });
  return { tokenizer, engine, plotly, embeddings, inside, untrained };
}

// Passes on the stage graph's one session, one at a time, whichever tab (Inside, Compare) and
// side asks: the trained and the untrained model share it.
let passes = Promise.resolve();
function oneAtATime(inside) {
  const pass = inside.pass.bind(inside);
  inside.pass = (ids) => (passes = passes.then(() => pass(ids), () => pass(ids)));
  return inside;
}

/** float16 little-endian bytes -> Float32Array (no Float16Array in every browser yet). */
export function float16ToFloat32(bytes) {
  const half = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  const out = new Float32Array(half.length);
  for (let i = 0; i < half.length; i++) {
    const h = half[i];
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    out[i] = exp === 0 ? sign * 2 ** -14 * (frac / 1024) : exp === 31 ? (frac ? NaN : sign * Infinity) : sign * 2 ** (exp - 15) * (1 + frac / 1024);
  }
  return out;
}

// -- the page ---------------------------------------------------------------------------------------

async function main() {
  const [site, lessons] = await Promise.all([fetchJSON("./data/site.json?" + Date.now()), fetchJSON("./data/lessons.json?" + Date.now())]);
  const m = site.model;
  $("#pg-model-line").textContent = `Model: ${m.n_layer} layers, ${m.n_head} heads, d_model ${m.d_model}, ${(m.parameters / 1e6).toFixed(1)} M parameters.`;
  if (site.app_url) $("#pg-footer-app").innerHTML = `The full app, with every tab: <a href="${site.app_url}">${site.app_space}</a>.`;
  const resources = makeResources(site);
  const link = parseQuery(location.search, site.links, site.tabs);
  if (link.messages.length) {
    const notes = $("#pg-link-notes");
    notes.hidden = false;
    notes.append(el("b", {}, "From the link: "), ...link.messages.map((msg) => el("div", {}, msg)));
  }
  const nav = $("#pg-tabs");
  const panels = $("#pg-panels");
  const mounted = {};
  const buttons = {};
  site.tabs.forEach((tab, i) => {
    const server = site.server_tabs.includes(tab);
    buttons[tab] = el("button", {
      role: "tab", id: `tab-${tab}`, "aria-selected": "false", class: server ? "server" : "",
      title: server ? "Needs a server: in the Gradio app" : "", onclick: () => select(tab, true),
    }, `${i + 1} · ${TAB_TITLES[tab]}`);
    nav.append(buttons[tab]);
  });

  function lessonOf(tab) {
    return lessons[tab] || { intro: "", notes: {}, captions: {}, next_sentence: "", next_key: null };
  }

  async function mount(tab) {
    const panel = el("section", { class: "pg-panel", id: `panel-${tab}`, role: "tabpanel", "aria-labelledby": `tab-${tab}` });
    panels.append(panel);
    const lesson = lessonOf(tab);
    const head = el("div", { class: "pg-lesson-head" }, el("div", { class: "pg-intro", html: lesson.intro || "" }), foldButton());
    const body = el("div", { class: "pg-body" });
    panel.append(head, body);
    if (site.server_tabs.includes(tab)) {
      body.append(serverNote(tab));
      return { panel, settings: () => ({}) };
    }
    let module;
    const state = { panel, settings: () => ({}) };
    const copy = copyLink(() => linkTo(tab, state.settings(), site.links));
    head.append(copy);
    try {
      module = await import(`./tabs/${tab}.js`);
      const linked = link.tab === tab ? link.settings : null;
      const api = await module.mount(body, { site, lesson, linked, tab, ...resources, el, progress });
      state.settings = api.settings;
    } catch (err) {
      body.append(el("div", { class: "pg-error" }, `This tab could not start: ${err.message}`));
      console.error(err);
    }
    if (lesson.next_key) {
      const next = el("a", { href: `?tab=${lesson.next_key}`, onclick: (e) => { e.preventDefault(); select(lesson.next_key, true); } }, `${TAB_TITLES[lesson.next_key]} →`);
      panel.append(el("div", { class: "pg-next" }, el("span", { html: lesson.next_sentence + " " }), next));
    }
    return state;
  }

  function serverNote(tab) {
    const box = el("div", { class: "pg-server-tab" });
    box.append(el("p", {}, `${TAB_TITLES[tab]} needs a server: ${serverWhy(tab)} This edition runs only what a browser can compute.`));
    if (site.app_url) box.append(el("p", {}, el("a", { href: `${site.app_url}?tab=${tab}`, target: "_blank", rel: "noopener" }, `Open ${TAB_TITLES[tab]} in the Gradio app →`)));
    else box.append(el("p", {}, "Run the full app yourself: ", el("code", {}, "pip install -r requirements.txt && python app.py"), "."));
    return box;
  }

  async function select(tab, push) {
    for (const [name, button] of Object.entries(buttons)) button.setAttribute("aria-selected", String(name === tab));
    for (const panel of panels.children) panel.hidden = panel.id !== `panel-${tab}`;
    if (push) history.replaceState(null, "", `?tab=${tab}`);
    buttons[tab].scrollIntoView({ block: "nearest", inline: "nearest" });
    mounted[tab] ??= mount(tab);
    const state = await mounted[tab];
    state.panel.hidden = false;
    for (const panel of panels.children) panel.hidden = panel !== state.panel;
  }

  await select(link.tab || site.tabs[0], false);
  document.body.dataset.ready = "true";
}

function serverWhy(tab) {
  return {
    learn: "it trains a GPT from random weights on the server's CPU.",
  }[tab];
}

// On a phone the lesson's intro is folded to three lines (style.css), so that a tab's own controls
// start on the first screen; this button unfolds it.
function foldButton() {
  const button = el("button", {
    class: "pg-btn pg-more", type: "button", "aria-expanded": "false",
    onclick: () => {
      const open = button.closest(".pg-lesson-head").classList.toggle("pg-open");
      button.setAttribute("aria-expanded", String(open));
      button.textContent = open ? "Less" : "More of the lesson";
    },
  }, "More of the lesson");
  return button;
}

function copyLink(address) {
  const shown = el("input", { type: "text", readonly: true, hidden: true, "aria-label": "Link to this tab" });
  const button = el("button", {
    class: "pg-btn", type: "button",
    onclick: async () => {
      const url = address();
      shown.value = url;
      try {
        await navigator.clipboard.writeText(url);
        button.textContent = "Link copied";
      } catch {
        button.textContent = "Copy the link:"; // plain http to another machine: the clipboard is refused
      }
      shown.hidden = false;
      shown.select();
      setTimeout(() => (button.textContent = "Copy link"), 2500);
    },
  }, "Copy link");
  return el("div", { class: "pg-copy" }, button, shown);
}

main().catch((err) => {
  document.body.append(el("div", { class: "pg-error" }, `The page could not start: ${err.message}`));
  console.error(err);
});
