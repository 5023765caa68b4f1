// The Model tab's view: the network as a picture with each part's parameters, the parameters per
// part, the training curves and the downloads, drawn from the data object the export writes
// (playground/model_data.py, data/model.json; docs/browser.md) with nothing recomputed: the
// picture's parts, the table's rows and the chart (the app's own plotly figure, with its mark of
// the final evaluation on the whole held-out split) arrive as the app built them.

import { el as make, stylesheet } from "./dom.js";

const mb = (n) => `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)} MB`;
const size = (n) => (n >= 1e5 ? mb(n) : `${(n / 1e3).toFixed(1)} kB`);

/** One box of the picture (playground/model_info.architecture_html writes the same elements). */
function box(el, b) {
  return el("div", { class: `pg-arch-box ${b.kind}` }, el("b", {}, b.title), el("span", { class: "pg-arch-shape" }, b.shape),
    ...(b.count === null ? [] : [el("span", { class: "pg-arch-n" }, b.count)]));
}

/** The architecture as the app draws it: top to bottom as the data flows, the repeated block framed. */
export function architecture(el, parts) {
  const items = [];
  parts.forEach((p, i) => {
    if (i) items.push(el("div", { class: "pg-arch-arrow" }, "↓"));
    items.push(p.boxes ? el("div", { class: "pg-arch-block" }, el("div", { class: "pg-arch-title" }, p.title), ...p.boxes.map((b) => box(el, b))) : box(el, p));
  });
  return el("div", { class: "pg-arch", id: "model-arch", "aria-label": "the model's architecture" }, ...items);
}

/**
 * Draws `data` into `root`: the network always; the training chart where `plotly()` (a promise of
 * plotly.js) is given, with its note (the app draws the same figure as a Gradio plot of its own);
 * the downloads where the data lists some (the app offers its files with Gradio's buttons).
 * Resolves once the chart is drawn.
 */
export async function render(root, data, { el = make, plotly = null } = {}) {
  const rows = data.rows.map((r, i) => el("tr", i === data.rows.length - 1 ? { class: "total" } : {},
    el("td", {}, r[0]), el("td", { class: "num" }, r[1]), el("td", { class: "num" }, r[2])));
  const chart = el("div", { class: "mdl-plot", id: "model-curves" });
  root.replaceChildren(
    el("h3", {}, "The network"),
    el("div", { class: "mdl-row" },
      el("div", { class: "mdl-col" }, architecture(el, data.architecture)),
      el("div", { class: "mdl-col" },
        el("div", { class: "mdl-summary", html: data.summary_html }),
        el("table", { class: "mdl-table", id: "model-params" },
          el("thead", {}, el("tr", {}, ...["part", "parameters", "share"].map((h) => el("th", {}, h)))), el("tbody", {}, ...rows)))),
  );
  if (plotly) root.append(el("h3", {}, "How it learned"), chart, el("div", { class: "mdl-note", id: "model-curves-note", html: data.curves_note_html }));
  if (data.downloads.length || data.hub) {
    root.append(el("h3", {}, "Take it home"),
      ...(data.hub ? [el("div", { class: "mdl-note", id: "model-hub-link", html: data.hub.html })] : []),
      el("ul", { class: "mdl-downloads", id: "model-downloads" }, ...data.downloads.map((d) =>
        el("li", { "data-bytes": String(d.bytes) }, el("a", { href: d.href, download: "" }, `⬇ ${d.label}`), ` (${size(d.bytes)})`))));
  }
  root.dataset.drawn = "true";
  if (!plotly) return;
  const Plotly = await plotly();
  // The app's figure as it built it; only its size follows the page (a phone's width).
  await Plotly.react(chart, data.curves.data, { ...data.curves.layout, autosize: true, width: undefined }, { displayModeBar: false, responsive: true });
  chart.dataset.drawn = "true";
}

/** The view as both editions mount it (docs/browser.md, "Web views"); `host.plotly`: plotly.js for the chart, where the host has it. */
export function mount(root, host = {}) {
  stylesheet("model.css");
  root.classList.add("mdl-view");
  return { update: (data) => render(root, data, { plotly: host.plotly ?? null }) };
}
