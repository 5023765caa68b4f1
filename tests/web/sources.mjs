// The engine's model sources (web/engine/fetch.js, fetchVerified) on cases read from stdin as JSON
// {digest, headersTimeoutMs, cases: [[address, ...], ...]}; prints, per case, {source, skipped,
// bytes} or {error}.
import { fetchVerified } from "../../web/engine/fetch.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { digest, headersTimeoutMs, cases } = JSON.parse(input);
const out = [];
for (const sources of cases) {
  try {
    const got = await fetchVerified(sources, digest, () => {}, { headersTimeoutMs });
    out.push({ source: got.source, skipped: got.skipped, bytes: got.bytes.length });
  } catch (err) {
    out.push({ error: err.message });
  }
}
console.log(JSON.stringify(out));
