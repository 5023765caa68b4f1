// Answers tests/runtime/test_draws.py: the browser's generator (web/engine/draws.js) on the cases it is
// sent, as JSON on stdout.
import { readFileSync } from "node:fs";
import { STREAMS, integers, normal, philox4x32, uniform } from "../../web/engine/draws.js";

const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
const answer = {
  streams: STREAMS,
  kat: request.kat.map(({ counter, key }) => philox4x32(counter, key)),
  uniform: request.uniform.map(([seed, stream, n, start, lane]) => Array.from(uniform(seed, stream, n, start, lane))),
  normal: request.normal.map(([seed, stream, n, start, lane]) => Array.from(normal(seed, stream, n, start, lane))),
  integers: request.integers.map(([seed, stream, n, high, start, lane]) => integers(seed, stream, n, high, start, lane)),
  errors: request.errors.map(([seed, stream, n, start, lane]) => {
    try {
      uniform(seed, stream, n, start, lane);
      return null;
    } catch (err) {
      return err.message;
    }
  }),
};
process.stdout.write(JSON.stringify(answer));
