// Links: ?tab=…&text=… reopens a tab on the same text and settings, with the parameters and
// checks of the app (playground/links.py writes them into data/site.json), so a link works in
// both editions. A value that fails keeps the tab's default and gets a message saying why.

import { describe as repr, pyG as g, pyLength, pyStrip, thousands, validateText } from "./checks.js";

const TRUE = ["true", "1", "yes", "on"];
const FALSE = ["false", "0", "no", "off"];
// Parameters the app's page or Gradio read: never a tab's setting, never reported as unknown.
const FOREIGN = new Set(["view", "deep_link", "page", "ui", "write_token", "logs"]);

// playground/validation.format_number: ints as they are, floats short
const formatNumber = (x, isInt) => (isInt ? String(x) : !Number.isFinite(x) || Number(g(x)) === x ? g(x) : String(x));
const INT = /^[+-]?\d+$/;

// validation._number: an int from an integer string, else a float from a short numeric string
function number(raw, name) {
  const s = pyStrip(raw);
  if (INT.test(s)) return { value: Number(s), isInt: true };
  if (s.length <= 64 && /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$|^[+-]?(inf|infinity|nan)$/i.test(s)) {
    const t = s.toLowerCase().replace(/^\+/, "");
    const value = t.endsWith("inf") || t.endsWith("infinity") ? (t.startsWith("-") ? -Infinity : Infinity) : t.endsWith("nan") ? NaN : Number(s);
    return { value, isInt: false };
  }
  throw new Error(`${name} must be a number, not ${repr(raw)}`);
}

/** The value a query string `raw` stands for under `param` (site.json's spec), or throws a message. */
export function check(param, raw) {
  const name = param.name;
  const s = String(raw);
  switch (param.kind) {
    case "text":
      return validateText(s, name, param.max_chars);
    case "int": {
      const { value, isInt } = number(s, name);
      const [lo, hi] = [param.minimum, param.maximum];
      if (!isInt && (!Number.isFinite(value) || !Number.isInteger(value))) throw new Error(`${name} must be a whole number from ${lo} to ${hi}, not ${formatNumber(value, false)}`);
      if (value < lo || value > hi) throw new Error(`${name} must be from ${lo} to ${hi}, not ${formatNumber(value, isInt)}`);
      if (param.even && value % 2) throw new Error(`${name} must be even, from ${lo} to ${hi}, not ${value}`);
      return value;
    }
    case "float": {
      const { value, isInt } = number(s, name);
      const accepted = `a number in ${param.min_inclusive ? "[" : "("}${g(param.minimum)}, ${g(param.maximum)}]`;
      if (!Number.isFinite(value)) throw new Error(`${name} must be ${accepted}, not ${Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf"}`);
      const below = value < param.minimum || (!param.min_inclusive && value === param.minimum);
      if (below || value > param.maximum) throw new Error(`${name} must be ${accepted}, not ${formatNumber(value, false)}`);
      return value;
    }
    case "bool": {
      const t = pyStrip(s).toLowerCase();
      if (TRUE.includes(t)) return true;
      if (FALSE.includes(t)) return false;
      throw new Error(`${name} must be true or false, not ${repr(s)}`);
    }
    case "choice":
      if (!param.choices.includes(s)) throw new Error(`${name} must be one of ${param.choices.map(repr).join(", ")}, not ${repr(s)}`);
      return s;
    case "ints": {
      if (!pyStrip(s)) throw new Error(`${name} is empty: type some text (1 to ${thousands(param.max_chars)} characters)`);
      if (pyLength(s) > param.max_chars) throw new Error(`${name} is ${thousands(pyLength(s))} characters long; the limit is ${thousands(param.max_chars)} characters`);
      let body = pyStrip(s);
      if (body.startsWith("[") && body.endsWith("]")) body = body.slice(1, -1);
      const items = body.split(/[\s,]+/).filter(Boolean);
      const eg = "type ids separated by commas or spaces, e.g. 31373, 2506";
      if (!items.length) throw new Error(`${name}: no numbers found; ${eg}`);
      if (items.length > param.max_count) throw new Error(`${name}: ${thousands(items.length)} numbers given; the limit is ${thousands(param.max_count)}`);
      items.forEach((item, i) => {
        if (!INT.test(item)) throw new Error(`${name}: item ${i + 1} (${repr(item)}) is not a whole number; ${eg}`);
      });
      return items.map((item) => BigInt(item).toString()).join(", "); // exact, as Python's int(): no double rounds it
    }
    default:
      throw new Error(`unknown kind ${param.kind}`);
  }
}

/**
 * The page's query: { tab, settings, messages }. `specs`: site.json's links (tab -> params);
 * `tabs`: every tab of the app, in order (a link to a server tab opens that tab's note).
 */
export function parseQuery(search, specs, tabs, defaults = {}) {
  const query = new URLSearchParams(search);
  const tab = query.get("tab");
  const own = [...query.keys()].filter((k) => k !== "tab" && !FOREIGN.has(k) && !k.startsWith("_"));
  if (tab === null) {
    return { tab: null, settings: {}, messages: own.length ? [`this link names no tab, so its ${own.join(", ")} ${own.length === 1 ? "was" : "were"} left out: add tab=one of ${tabs.join(", ")}`] : [] };
  }
  if (!tabs.includes(tab)) return { tab: null, settings: {}, messages: [`tab must be one of ${tabs.join(", ")}, not ${repr(tab)}: the page opened on its first tab`] };
  const spec = Object.fromEntries((specs[tab] || []).map((p) => [p.name, p]));
  const settings = {};
  const messages = [];
  for (const key of own) {
    const param = spec[key];
    if (!param) {
      const takes = Object.keys(spec).join(", ") || "no settings";
      messages.push(`${repr(key)} is not a setting of the ${tab} tab, left out (it takes ${takes})`);
      continue;
    }
    try {
      settings[key] = check(param, query.get(key));
    } catch (err) {
      const kept = key in (defaults[tab] || {}) && param.kind !== "text" ? ` (${defaults[tab][key]})` : "";
      messages.push(`${err.message}, so the tab keeps its default${kept}`);
    }
  }
  return { tab, settings, messages };
}

/** The address that reopens `tab` with `settings` (in the tab's parameter order), as the app writes it. */
export function linkTo(tab, settings, specs, base = location.href) {
  const url = new URL(base);
  url.search = "";
  const params = new URLSearchParams({ tab });
  for (const p of specs[tab] || []) {
    if (settings[p.name] === undefined || settings[p.name] === null) continue;
    params.append(p.name, String(settings[p.name]));
  }
  // encodeURIComponent-style spaces (%20), as playground/links.url writes them
  url.search = params.toString().replace(/\+/g, "%20");
  return url.href;
}
