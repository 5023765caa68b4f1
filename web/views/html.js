// HTML written by the views, safe by default: html`<b>${text}</b>` escapes every interpolated
// value (a token's text is the learner's own), except what html`` or raw() already made. One
// string per panel, set with innerHTML once: far fewer DOM calls than an element per number.

class Raw {
  constructor(text) {
    this.text = text;
  }

  toString() {
    return this.text;
  }
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` with the five characters HTML gives a meaning escaped. */
export const esc = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** `text` as HTML, not escaped: for markup the view wrote itself. */
export const raw = (text) => new Raw(String(text));

const show = (v) => (v instanceof Raw ? v.text : Array.isArray(v) ? v.map(show).join("") : v === null || v === undefined || v === false ? "" : esc(v));

/** A tagged template: the literal parts as they are, every value escaped (arrays joined). */
export function html(strings, ...values) {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += show(values[i]) + strings[i + 1];
  return new Raw(out);
}
