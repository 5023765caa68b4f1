// Tokens as the views write them (playground/tokens.py): whitespace made visible with
// tiktokenizer's symbols, and cut to a short label for an axis or a table's head.

const VISIBLE = { " ": "⋅", "\t": "→", "\n": "↵", "\r": "␍" }; // playground/tokens.VISIBLE_WHITESPACE
const LABEL_CHARS = 16; // playground/tokens.LABEL_CHARS

/** A token's text on one line, its whitespace visible (" king" -> "⋅king"). */
export const visibleToken = (text) => String(text).replace(/[ \t\n\r]/g, (c) => VISIBLE[c]);

/** visibleToken cut to LABEL_CHARS characters (playground/tokens.token_label). */
export function tokenLabel(text) {
  const chars = [...visibleToken(text)];
  return chars.length <= LABEL_CHARS ? chars.join("") : chars.slice(0, LABEL_CHARS - 1).join("") + "…";
}
