// Random numbers that the browser and the server draw alike: Philox4x32-10, a counter-based
// generator, specified in runtime/draws.py and written here line for line. Draw j of a stream is
// a pure function of (seed, stream, lane, j), so the i-th token of a seeded generation, the i-th
// batch of a training run or the k-th initial weight is the same number in both engines.
// Checked against Random123's known-answer vectors and against the Python (tests/test_draws.py).

export const STREAMS = { sampling: 1, init: 2, batches: 3, samples: 4 };

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;
const ROUNDS = 10;
const TWO_26 = 2 ** 26;
const TWO_32 = 2 ** 32;
const TWO_53 = 2 ** 53;

/** The 64-bit product of two uint32s as [high, low] words (16-bit halves: every partial sum is exact in a double). */
function mulhilo(a, b) {
  const aH = a >>> 16, aL = a & 0xffff, bH = b >>> 16, bL = b & 0xffff;
  const ll = aL * bL;
  const mid1 = aH * bL + (ll >>> 16);
  const mid2 = aL * bH + (mid1 & 0xffff);
  const hi = (aH * bH + Math.floor(mid1 / 65536) + Math.floor(mid2 / 65536)) >>> 0;
  const lo = (((mid2 & 0xffff) << 16) | (ll & 0xffff)) >>> 0;
  return [hi, lo];
}

/** Philox4x32-10 of one counter (four uint32 words) under a key (two words): four words. */
export function philox4x32(counter, key) {
  let [c0, c1, c2, c3] = counter.map((w) => w >>> 0);
  let k0 = key[0] >>> 0, k1 = key[1] >>> 0;
  for (let r = 0; r < ROUNDS; r++) {
    if (r) {
      k0 = (k0 + W0) >>> 0;
      k1 = (k1 + W1) >>> 0;
    }
    const [hi0, lo0] = mulhilo(M0, c0);
    const [hi1, lo1] = mulhilo(M1, c2);
    [c0, c1, c2, c3] = [(hi1 ^ c1 ^ k0) >>> 0, lo1, (hi0 ^ c3 ^ k1) >>> 0, lo0];
  }
  return [c0, c1, c2, c3];
}

function check(seed, stream, n, start, lane) {
  for (const [name, value] of Object.entries({ seed, stream, n, start, lane })) {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a whole number >= 0, not ${value}`);
  }
  if (stream >= TWO_32 || lane >= TWO_32) throw new RangeError("stream and lane must be below 2**32");
}

/** Uniforms start .. start + n - 1 of (seed, stream, lane): a Float64Array in [0, 1). */
export function uniform(seed, stream, n, start = 0, lane = 0) {
  check(seed, stream, n, start, lane);
  const out = new Float64Array(n);
  const key = [seed % TWO_32, stream];
  let block = -1;
  let words = null;
  for (let i = 0; i < n; i++) {
    const j = start + i;
    const b = Math.floor(j / 2);
    if (b !== block) {
      block = b;
      words = philox4x32([b % TWO_32, Math.floor(b / TWO_32), lane, 0], key);
    }
    const o = 2 * (j % 2);
    out[i] = ((words[o] >>> 5) * TWO_26 + (words[o + 1] >>> 6)) / TWO_53;
  }
  return out;
}

/** Standard normals start .. start + n - 1 of (seed, stream, lane) (Box-Muller): a Float64Array. */
export function normal(seed, stream, n, start = 0, lane = 0) {
  check(seed, stream, n, start, lane);
  const u = uniform(seed, stream, 2 * n, 2 * start, lane);
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.sqrt(-2 * Math.log(1 - u[2 * i])) * Math.cos(2 * Math.PI * u[2 * i + 1]);
  return out;
}

/** Whole numbers in [0, high): floor(uniform * high). */
export function integers(seed, stream, n, high, start = 0, lane = 0) {
  if (!Number.isInteger(high) || high < 1 || high > TWO_32) throw new RangeError(`high must be a whole number from 1 to 2**32, not ${high}`);
  return Array.from(uniform(seed, stream, n, start, lane), (u) => Math.floor(u * high));
}
