// The app's ways of checking input and writing values (playground/validation.py, Python's repr
// and format), shared by the static edition's tabs and its links, so every message reads as the
// app's own.

export class InputError extends Error {}

// -- Python's ways of writing values, so the messages read as the app's ---------------------------

// What Python's repr() writes as an escape (str.isprintable() false): control, format, private,
// unassigned and surrogate code points, and every separator but the space.
const UNPRINTABLE = /[\p{C}\p{Z}]/u;
const hex = (code, width) => code.toString(16).padStart(width, "0");

/** Python's repr() of a string: single quotes unless the text holds one and no double quote. */
export function pyRepr(s) {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  const named = new Map([["\\", "\\\\"], ["\n", "\\n"], ["\r", "\\r"], ["\t", "\\t"], [q, q === "'" ? "\\'" : q]]);
  let body = "";
  for (const ch of s) {
    const code = ch.codePointAt(0);
    if (named.has(ch)) body += named.get(ch);
    else if (ch === " " || !UNPRINTABLE.test(ch)) body += ch;
    else body += code < 0x100 ? `\\x${hex(code, 2)}` : code < 0x10000 ? `\\u${hex(code, 4)}` : `\\U${hex(code, 8)}`;
  }
  return q + body + q;
}

/** Python's format(x, "g"): six significant digits, no trailing zeros, e+XX past 1e6 or below 1e-4. */
export function pyG(x) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const exp = Math.floor(Math.log10(Math.abs(Number(x.toPrecision(6)))));
  if (exp < -4 || exp >= 6) {
    const [m, e] = x.toExponential(5).split("e");
    const mant = m.includes(".") ? m.replace(/0+$/, "").replace(/\.$/, "") : m;
    const n = Number(e);
    return `${mant}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
  }
  const fixed = x.toFixed(Math.max(0, 5 - exp));
  return fixed.includes(".") ? fixed.replace(/0+$/, "").replace(/\.$/, "") : fixed;
}

export const thousands = (n) => n.toLocaleString("en-US");

/** A text's length as Python's len() counts it: in code points (an emoji is one, not two UTF-16 units). */
export function pyLength(text) {
  let n = 0;
  for (const _ of text) n++; // (a lone surrogate is one, as in Python)
  return n;
}

// Python's str.strip() whitespace (str.isspace()): JavaScript's trim() also strips U+FEFF and
// keeps U+001C..U+001F and U+0085.
const PY_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");

/** Python's str.strip(). */
export const pyStrip = (text) => text.replace(PY_STRIP, "");

/** playground/validation.validate_text: the app's checks of typed text (`allowEmpty`: an empty or blank text is taken). */
export function validateText(text, name, maxChars, { allowEmpty = false } = {}) {
  if (!allowEmpty && !pyStrip(text)) throw new InputError(`${name} is empty: type some text (1 to ${thousands(maxChars)} characters)`);
  const length = pyLength(text);
  if (length > maxChars) throw new InputError(`${name} is ${thousands(length)} characters long; the limit is ${thousands(maxChars)} characters`);
  let i = 0;
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (code >= 0xd800 && code <= 0xdfff) {
      throw new InputError(`${name} contains a lone surrogate U+${code.toString(16).toUpperCase().padStart(4, "0")} at character ${i}: only valid Unicode text is accepted`);
    }
    if (!"\t\n\r".includes(ch) && /\p{Cc}/u.test(ch)) {
      throw new InputError(`${name} contains the control character U+${code.toString(16).toUpperCase().padStart(4, "0")} at character ${i}: only printable text, tabs and newlines are accepted`);
    }
    i++;
  }
  return text;
}

/** A tab's text checked as the app checks it (encode_prompt), then its ids under the tab's token limit (Attention, Inside, Compare). */
export function textIds(tokenizer, text, maxChars, maxTokens, name = "text") {
  const ids = tokenizer.encode(validateText(text, name, maxChars), { special: true });
  if (ids.length > maxTokens) throw new InputError(`${name} is ${ids.length} tokens long; the limit here is ${maxTokens} tokens`);
  return ids;
}

/** validation._describe: a value as a message quotes it, cut past 40 characters. */
export function describe(s) {
  const shown = [...pyRepr(s)]; // cut in code points, as Python cuts: never half an emoji
  return shown.length <= 40 ? shown.join("") : shown.slice(0, 37).join("") + "...";
}

/** A message as the app's error slot shows it: a capital when it opens with a word, a full stop. */
export function sentence(message) {
  const first = message.split(" ", 1)[0];
  let out = /^\p{L}+$/u.test(first) ? message[0].toUpperCase() + message.slice(1) : message;
  if (!/[.!?]$/.test(out)) out += ".";
  return out;
}

/** An integer setting as validate_int checks it, or a message. */
export function readInt(raw, name, minimum, maximum) {
  const s = String(raw).trim();
  const v = Number(s);
  if (!s || !Number.isFinite(v)) throw new InputError(`${name} must be a number, not ${pyRepr(String(raw))}`);
  if (!Number.isInteger(v)) throw new InputError(`${name} must be a whole number from ${minimum} to ${maximum}, not ${pyG(v)}`);
  if (v < minimum || v > maximum) throw new InputError(`${name} must be from ${minimum} to ${maximum}, not ${v}`);
  return v;
}

/** playground/plots.wrap_title: plotly never wraps a title, and a phone fits about 40 characters. */
export function wrap(text, width = 40) {
  const lines = [];
  for (const word of text.split(" ")) {
    if (lines.length && lines[lines.length - 1].length + 1 + word.length <= width) lines[lines.length - 1] += " " + word;
    else lines.push(word);
  }
  return lines.join("<br>");
}
