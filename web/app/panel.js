// The browser panel of the app's "Run on: this browser" (Text generation's run_on.js and Watch it
// learn's learn_on.js): its progress line and its error line, and the small element builder both
// draw with. Served beside them under <root>/browser/ (serving/browser_files.py).

/** `<tag attrs...>children</tag>`: an attribute true is present and empty, false or null absent; `html` sets the markup. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "html") node.innerHTML = v;
    else if (v !== false && v !== null && v !== undefined) node.setAttribute(k, v === true ? "" : v);
  }
  node.append(...children);
  return node;
}

/** The panel's progress and error lines, hidden until used, then `rest`. */
export function panelBody(...rest) {
  return el("div", { class: "pg-browser-panel" },
    el("div", { class: "pg-browser-progress", hidden: true }, el("progress", { max: "1" }), el("span", { class: "pg-browser-progress-text" })),
    el("div", { class: "pg-browser-error", role: "alert", hidden: true }),
    ...rest);
}

/** Shows `text` on `panel`'s progress line, its bar at `fraction` (0–1; null: no known end). */
export function showProgress(panel, text, fraction) {
  const box = panel?.querySelector(".pg-browser-progress");
  if (!box) return;
  box.hidden = false;
  box.querySelector(".pg-browser-progress-text").textContent = text;
  const bar = box.querySelector("progress");
  if (fraction === null) bar.removeAttribute("value");
  else bar.value = fraction;
}

export function hideProgress(panel) {
  const box = panel?.querySelector(".pg-browser-progress");
  if (box) box.hidden = true;
}

/** Shows `text` as `panel`'s error (an empty text hides it). */
export function showError(panel, text) {
  const box = panel?.querySelector(".pg-browser-error");
  if (!box) return;
  box.hidden = !text;
  box.textContent = text ? `⚠ ${text}` : "";
}
