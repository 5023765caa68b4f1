// Tokenization, in the browser: the text's GPT-2 tokens coloured with their ids, the counts, and
// ids back to text, from the same tokenizer.json the model was exported with.
import { pyLength, validateText } from "../checks.js";

const PALETTE = ["#fde68a", "#bbf7d0", "#bfdbfe", "#fbcfe8", "#ddd6fe", "#fed7aa", "#99f6e4", "#e5e7eb"]; // playground/plots.PALETTE
const MAX_COLOURED_TOKENS = 4000; // past a few thousand spans the page only gets slower
const VISIBLE = { " ": "⋅", "\t": "→", "\n": "↵\n", "\r": "␍" };

export const visibleWhitespace = (s) => s.replace(/[ \t\n\r]/g, (c) => VISIBLE[c]);

/** Tokens grouped into spans of whole characters: tokens that split one character share a span. */
export function spans(tokenizer, ids) {
  const out = [];
  let pending = [];
  let bytes = [];
  const strict = new TextDecoder("utf-8", { fatal: true });
  for (const id of ids) {
    pending.push(id);
    bytes.push(...tokenizer.tokenBytes(id));
    let text = null;
    try {
      text = strict.decode(new Uint8Array(bytes));
    } catch {
      continue; // a character not finished yet: its next token belongs to the same span
    }
    out.push({ text, ids: pending, special: pending.includes(tokenizer.eotId) });
    pending = [];
    bytes = [];
  }
  if (pending.length) out.push({ text: new TextDecoder().decode(new Uint8Array(bytes)), ids: pending, special: false });
  return out;
}

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const limit = site.limits.MAX_TEXT_CHARS;
  const examples = site.examples.tokenization;
  const text = el("textarea", { id: "tok-text", rows: 6, "aria-label": "Text" });
  text.value = linked?.text ?? examples[0];
  const ws = el("input", { type: "checkbox", id: "tok-ws" });
  ws.checked = linked?.whitespace ?? false;
  const special = el("input", { type: "checkbox", id: "tok-special" });
  special.checked = linked?.special ?? true;
  const error = el("div", { class: "pg-error", id: "tok-error", hidden: true });
  const counts = el("div", { class: "pg-cards", id: "tok-counts" });
  const tokens = el("div", { class: "gpt-tokens", id: "tok-spans" });
  const ids = el("div", { class: "pg-ids", id: "tok-ids" });
  const notice = el("div", { class: "pg-note", id: "tok-notice" });
  const results = el("div", {}, counts, tokens, el("label", {}, "Token ids"), ids, notice);
  const idsIn = el("input", { type: "text", id: "dec-ids", value: "31373, 2506", "aria-label": "Token ids" });
  const decoded = el("div", { class: "pg-ids", id: "dec-text" });
  const decodeError = el("div", { class: "pg-error", id: "dec-error", hidden: true });

  root.append(el("div", { class: "pg-row" },
    el("div", { class: "pg-col" },
      el("label", { for: "tok-text" }, `Text (up to ${limit.toLocaleString("en-US")} characters; tokenized as you type)`), text,
      el("div", { class: "pg-examples" }, ...examples.map((x) => el("button", { type: "button", onclick: () => { text.value = x; run(); } }, x))),
      el("label", { class: "inline" }, ws, "Show whitespace (⋅ → ↵)"),
      el("label", { class: "inline" }, special, "<|endoftext|> is one special token"),
      error),
    el("div", { class: "pg-col" }, results)));
  root.append(el("h2", {}, "Ids → text"), el("div", { class: "pg-row" },
    el("div", { class: "pg-col" }, idsIn, decodeError, el("button", { class: "pg-btn", type: "button", id: "dec-run", onclick: () => decode() }, "Decode")),
    el("div", { class: "pg-col" }, decoded)));

  tokens.textContent = "Loading the tokenizer…";
  const tokenizer = await ctx.tokenizer();
  ctx.progress.hide();

  function run() {
    const value = text.value;
    const length = pyLength(value); // characters as the app counts them: an emoji is one
    try {
      validateText(value, "text", limit, { allowEmpty: true }); // as the app's Tokenization checks it
    } catch (err) {
      error.hidden = false;
      error.textContent = err.message;
      results.classList.add("pg-stale");
      return;
    }
    error.hidden = true;
    results.classList.remove("pg-stale");
    const list = tokenizer.encode(value, { special: special.checked });
    const nBytes = new TextEncoder().encode(value).length;
    const cards = [[list.length, "tokens"], [length, "characters"], [list.length ? +(length / list.length).toFixed(2) : 0, "characters / token"], [nBytes, "UTF-8 bytes"]];
    counts.replaceChildren(...cards.map(([n, what]) => el("div", { class: "pg-card" }, el("b", {}, n.toLocaleString("en-US")), el("span", {}, what))));
    const parts = [];
    let n = 0;
    const groups = spans(tokenizer, list);
    for (let k = 0; k < groups.length; k++) {
      const g = groups[k];
      if (n >= MAX_COLOURED_TOKENS) {
        parts.push(el("span", { class: "gpt-rest" }, groups.slice(k).map((s) => s.text).join("")));
        break;
      }
      n += g.ids.length;
      const shown = ws.checked ? visibleWhitespace(g.text) : g.text;
      const span = el("span", { class: `gpt-token${g.special ? " special" : ""}`, tabindex: "0", title: `id${g.ids.length > 1 ? "s" : ""} ${g.ids.join(" ")}` },
        shown, el("sub", { class: "gpt-id" }, g.ids.join(" ")));
      if (!g.special) span.style.background = PALETTE[k % PALETTE.length];
      parts.push(span);
    }
    tokens.replaceChildren(...parts);
    ids.textContent = `[${list.join(", ")}]`;
    notice.textContent = !value ? "Empty text: nothing to tokenize." : !value.trim() ? `The text is only whitespace: its ${list.length} tokens are spaces, tabs or newlines (switch on visible whitespace to see them).` : "";
  }

  function decode() {
    const raw = idsIn.value.trim();
    const parts = raw.split(/[\s,]+/).filter(Boolean);
    const bad = parts.find((p) => !/^\d+$/.test(p) || Number(p) >= tokenizer.vocabSize);
    if (!parts.length || bad !== undefined) {
      decodeError.hidden = false;
      decodeError.textContent = !parts.length ? "Type some token ids, separated by commas or spaces." : `${JSON.stringify(bad)} is not a token id: ids are whole numbers from 0 to ${tokenizer.vocabSize - 1}`;
      return;
    }
    decodeError.hidden = true;
    decoded.textContent = tokenizer.decode(parts.map(Number));
  }

  text.addEventListener("input", run);
  ws.addEventListener("change", run);
  special.addEventListener("change", run);
  idsIn.addEventListener("keydown", (e) => e.key === "Enter" && decode());
  run();
  // Ids → text opens on the opened text's own ids (a link's text, not a fixed example left behind).
  idsIn.value = tokenizer.encode(text.value.slice(0, 400), { special: special.checked }).slice(0, 32).join(", ") || "31373, 2506";
  decode();
  return { settings: () => ({ text: text.value, whitespace: ws.checked, special: special.checked }) };
}
