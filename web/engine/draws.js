// Random numbers that the browser and the server draw alike: Philox4x32-10, a counter-based
// generator, specified in runtime/draws.py and written here line for line. Draw j of a stream is
// a pure function of (seed, stream, lane, j), so the i-th token of a seeded generation, the i-th
// batch of a training run or the k-th initial weight is the same number in both engines.
// Checked against Random123's known-answer vectors and against the Python (tests/runtime/test_draws.py).

export const STREAMS = { sampling: 1, init: 2, batches: 3, samples: 4 };

const M0 = 0xd2511f53;
const M1 = 0xcd9e8d57;
const W0 = 0x9e3779b9;
const W1 = 0xbb67ae85;
const ROUNDS = 10;
const TWO_26 = 2 ** 26;
const TWO_32 = 2 ** 32;
const TWO_53 = 2 ** 53;

// The high and low words of the 64-bit product of two uint32s, from 16-bit halves so that every
// partial sum is exact in a double; written into HILO (no array per call: an initialisation of the
// full model draws 35 M uniforms).
const HILO = new Uint32Array(2);
function mulhilo(a, b) {
  const aH = a >>> 16, aL = a & 0xffff, bH = b >>> 16, bL = b & 0xffff;
  const ll = aL * bL;
  const mid1 = aH * bL + (ll >>> 16);
  const mid2 = aL * bH + (mid1 % 65536);
  HILO[0] = aH * bH + Math.floor(mid1 / 65536) + Math.floor(mid2 / 65536);
  HILO[1] = (mid2 % 65536) * 65536 + (ll & 0xffff);
}

/** Philox4x32-10 of the counter (c0, c1, c2, c3) under the key (k0, k1), into `out` (a Uint32Array of 4). */
function philoxInto(out, c0, c1, c2, c3, k0, k1) {
  for (let r = 0; r < ROUNDS; r++) {
    if (r) {
      k0 = (k0 + W0) >>> 0;
      k1 = (k1 + W1) >>> 0;
    }
    mulhilo(M0, c0);
    const hi0 = HILO[0], lo0 = HILO[1];
    mulhilo(M1, c2);
    const hi1 = HILO[0], lo1 = HILO[1];
    c0 = (hi1 ^ c1 ^ k0) >>> 0;
    c1 = lo1;
    c2 = (hi0 ^ c3 ^ k1) >>> 0;
    c3 = lo0;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/** Philox4x32-10 of one counter (four uint32 words) under a key (two words): four words. */
export function philox4x32(counter, key) {
  const out = new Uint32Array(4);
  philoxInto(out, counter[0] >>> 0, counter[1] >>> 0, counter[2] >>> 0, counter[3] >>> 0, key[0] >>> 0, key[1] >>> 0);
  return Array.from(out);
}

function check(seed, stream, n, start, lane) {
  for (const [name, value] of Object.entries({ seed, stream, n, start, lane })) {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a whole number >= 0, not ${value}`);
  }
  if (stream >= TWO_32 || lane >= TWO_32) throw new RangeError("stream and lane must be below 2**32");
  // (as runtime/draws.py: past it an index no longer fits a double; start + n would round)
  if (n > TWO_53 - start) throw new RangeError("at most 2**53 draws per stream and lane");
}

/** Uniforms start .. start + n - 1 of (seed, stream, lane): a Float64Array in [0, 1). */
export function uniform(seed, stream, n, start = 0, lane = 0) {
  check(seed, stream, n, start, lane);
  const out = new Float64Array(n);
  const k0 = seed % TWO_32;
  const words = new Uint32Array(4);
  let block = -1;
  for (let i = 0; i < n; i++) {
    const j = start + i;
    const b = Math.floor(j / 2);
    if (b !== block) {
      block = b;
      philoxInto(words, b % TWO_32, Math.floor(b / TWO_32), lane, 0, k0, stream);
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
