// Answers tests/browser/test_compare_view.py: Compare's view's own numbers and sentences
// (web/views/compare.js, pure functions) for the requests on stdin.
import { readFileSync } from "node:fs";
import { headSpread, headSummary, lossSummary, percent, sharedAxis, uniformSpread } from "../../web/views/compare.js";

const text = (pieces) => pieces.map((x) => (typeof x === "string" ? x : x.bold)).join("");
const { spreads, uniform, percents, next, attention } = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify({
  spreads: spreads.map(headSpread),
  uniform: uniform.map(uniformSpread),
  percents: percents.map(percent),
  axis: sharedAxis(next.sides),
  loss: text(lossSummary(next)),
  heads: text(headSummary(attention)),
}));
