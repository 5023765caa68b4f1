// Text generation's settings checked in the browser before "Run on: this browser" runs anything,
// against the server's limits by their own names (`L`: playground/limits.py's for_browser(), the
// page's config): each problem a sentence, as the server's checks word it (an empty list: none).
// A module of its own, so that tests/lessons/test_limits.py holds it against the server's check at every
// bound.

/** Problems with settings `s` (the API's names; `oneToken`: Next token, which draws one). */
export function settingsProblems(s, L, { oneToken = false } = {}) {
  const out = [];
  const number = (name, v, lo, hi, { whole = false, openLow = false } = {}) => {
    const ok = typeof v === "number" && Number.isFinite(v) && (!whole || Number.isInteger(v)) && v <= hi && (openLow ? v > lo : v >= lo);
    if (!ok) out.push(`${name} must be ${whole ? "a whole number" : "a number"} ${openLow ? `above ${lo} and up to` : `from ${lo} to`} ${hi}, not ${v === null || v === undefined ? "empty" : v}`);
  };
  if (typeof s.prompt !== "string" || !s.prompt.trim()) out.push("the prompt is empty: type some text for the model to continue");
  else if (s.prompt.length > L.MAX_PROMPT_CHARS) out.push(`the prompt is ${s.prompt.length.toLocaleString("en-US")} characters long; the limit is ${L.MAX_PROMPT_CHARS.toLocaleString("en-US")}`);
  if (!oneToken) number("max_new_tokens", s.max_new_tokens, L.MIN_NEW_TOKENS, L.MAX_NEW_TOKENS, { whole: true });
  number("temperature", s.temperature, L.MIN_TEMPERATURE, L.MAX_TEMPERATURE);
  number("top_k", s.top_k, L.MIN_TOP_K, L.MAX_TOP_K, { whole: true });
  number("top_p", s.top_p, L.MIN_TOP_P, L.MAX_TOP_P, { openLow: true });
  number("seed", s.seed, L.MIN_SEED, L.MAX_SEED, { whole: true });
  if (!oneToken) number("num_samples", s.num_samples, L.MIN_SAMPLES, L.MAX_SAMPLES, { whole: true });
  return out;
}
