// What every view builds with, in either edition: elements from a tag, attributes and children
// (the static page's own helper too), and the view's stylesheet, loaded once from beside the
// module (web/views/*.css: the static folder's views/, the app's /browser/views/).

/** An element: `class`, `html` (trusted HTML only: the export's rendered Markdown), `on<event>` handlers, other attributes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "html") node.innerHTML = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== false && v !== null && v !== undefined) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) node.append(c);
  return node;
}

/** Adds web/views/`name` to the page's styles, once. */
export function stylesheet(name) {
  if (typeof document === "undefined" || document.querySelector(`link[data-view-css="${name}"]`)) return;
  document.head.append(el("link", { rel: "stylesheet", href: new URL(`./${name}`, import.meta.url).href, "data-view-css": name }));
}
