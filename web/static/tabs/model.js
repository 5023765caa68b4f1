// The Model tab, in the static edition: the export's facts about the model (data/model.json,
// written by playground/model_data.py from the app's own functions), drawn by the view both
// editions share (../views/model.js). Nothing here is computed in the browser but the drawing.

import { fetchJSON } from "../engine/fetch.js";
import { mount as mountView } from "../views/model.js";

export async function mount(root, ctx) {
  const { el, site } = ctx;
  const view = el("div", { class: "model-view", id: "model-view" }, el("p", { class: "pg-note" }, "Loading the model's facts…"));
  root.append(view);
  const data = await fetchJSON(site.files["data/model.json"]);
  window.pgModel = data; // for the browser tests and the curious, in the console
  // Not awaited: the page is ready while plotly.js downloads for the chart.
  mountView(view, { edition: "static", config: {}, plotly: ctx.plotly }).update(data).then(() => { view.dataset.done = "true"; }, (err) => {
    console.error(err);
    view.append(el("div", { class: "pg-error" }, `The chart could not be drawn: ${err.message}`));
  });
  return { settings: () => ({}) };
}
