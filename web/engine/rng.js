// numpy's default random generator, np.random.default_rng(seed), in JavaScript: the server draws
// its uniforms with it (runtime/batching.py), so a seeded generation in the browser draws the very
// numbers the server draws, and writes the same text. SeedSequence (numpy/random/bit_generator.pyx)
// turns the seed into PCG64's 128-bit state and increment (numpy/random/src/pcg64); random() is
// Generator.random(): the top 53 bits of the next 64-bit output.

const MASK32 = 0xffffffff;
// SeedSequence's hash constants.
const INIT_A = 0x43b0d7e5;
const MULT_A = 0x931e8875;
const INIT_B = 0x8b51f9dd;
const MULT_B = 0x58f38ded;
const MIX_MULT_L = 0xca01f9dd;
const MIX_MULT_R = 0x4973f715;
const XSHIFT = 16;
const POOL_SIZE = 4;

const MASK64 = (1n << 64n) - 1n;
const MASK128 = (1n << 128n) - 1n;
// PCG_DEFAULT_MULTIPLIER_128 (numpy's pcg64.h).
const PCG_MULTIPLIER = (2549297995355413924n << 64n) | 4865540595714422341n;
const TWO_POW_MINUS_53 = 2 ** -53;

/** One step of SeedSequence's hash of a 32-bit word; `hash` is a one-element Uint32Array it advances. */
function hashmix(value, hash) {
  value = (value ^ hash[0]) >>> 0;
  hash[0] = Math.imul(hash[0], MULT_A);
  value = Math.imul(value, hash[0]) >>> 0;
  return (value ^ (value >>> XSHIFT)) >>> 0;
}

function mix(x, y) {
  // (Math.imul's are int32s: their difference, taken mod 2**32, is the uint32 one.)
  const result = (Math.imul(MIX_MULT_L, x) - Math.imul(MIX_MULT_R, y)) >>> 0;
  return (result ^ (result >>> XSHIFT)) >>> 0;
}

/** The seed as numpy's _coerce_to_uint32_array reads an int: 32-bit words, least significant first (0: [0]). */
function seedWords(seed) {
  let s;
  if (typeof seed === "bigint") s = seed;
  else if (Number.isSafeInteger(seed)) s = BigInt(seed);
  else throw new TypeError(`seed must be a non-negative integer, not ${seed}`);
  if (s < 0n) throw new RangeError(`seed must be a non-negative integer, not ${seed}`);
  const words = [];
  do {
    words.push(Number(s & BigInt(MASK32)));
    s >>= 32n;
  } while (s > 0n);
  return words;
}

/** SeedSequence(seed).pool: the entropy mixed into four 32-bit words. */
function entropyPool(seed) {
  const entropy = seedWords(seed);
  const pool = new Uint32Array(POOL_SIZE);
  const hash = new Uint32Array([INIT_A]);
  for (let i = 0; i < POOL_SIZE; i++) pool[i] = hashmix(i < entropy.length ? entropy[i] : 0, hash);
  // Every word into every other, so later words change the earlier ones too.
  for (let src = 0; src < POOL_SIZE; src++) {
    for (let dst = 0; dst < POOL_SIZE; dst++) {
      if (src !== dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash));
    }
  }
  for (let src = POOL_SIZE; src < entropy.length; src++) {
    for (let dst = 0; dst < POOL_SIZE; dst++) pool[dst] = mix(pool[dst], hashmix(entropy[src], hash));
  }
  return pool;
}

/** SeedSequence.generate_state(n, np.uint64) as BigInts: 2n words of the pool, paired little-endian. */
function generateState64(pool, n) {
  const words = new Uint32Array(2 * n);
  let hash = INIT_B;
  for (let i = 0; i < words.length; i++) {
    let value = (pool[i % POOL_SIZE] ^ hash) >>> 0;
    hash = Math.imul(hash, MULT_B) >>> 0;
    value = Math.imul(value, hash) >>> 0;
    words[i] = (value ^ (value >>> XSHIFT)) >>> 0;
  }
  const out = [];
  for (let i = 0; i < n; i++) out.push((BigInt(words[2 * i + 1]) << 32n) | BigInt(words[2 * i]));
  return out;
}

/**
 * np.random.default_rng(seed) (PCG64 seeded through SeedSequence), bit for bit.
 *
 *   const rng = new NumpyRandom(42);
 *   rng.random();        // == np.random.default_rng(42).random(), and so on, draw after draw
 *
 * `seed`: a non-negative integer (a Number up to 2**53 - 1, or a BigInt of any size).
 */
export class NumpyRandom {
  constructor(seed) {
    const [s0, s1, i0, i1] = generateState64(entropyPool(seed), 4);
    // pcg64_set_seed: the first word of each pair is the high half; then pcg_setseq_128_srandom_r.
    const initState = (s0 << 64n) | s1;
    const initSeq = (i0 << 64n) | i1;
    this.inc = ((initSeq << 1n) | 1n) & MASK128;
    this.state = 0n;
    this._step();
    this.state = (this.state + initState) & MASK128;
    this._step();
  }

  _step() {
    this.state = (this.state * PCG_MULTIPLIER + this.inc) & MASK128;
  }

  /** The next 64-bit output (a BigInt): XSL-RR of the state after one step, as numpy's next_uint64. */
  nextUint64() {
    this._step();
    const s = this.state;
    const xored = ((s >> 64n) ^ s) & MASK64;
    const rot = s >> 122n;
    return ((xored >> rot) | (xored << ((64n - rot) & 63n))) & MASK64;
  }

  /** The next uniform in [0, 1): Generator.random(), (next_uint64 >> 11) * 2**-53. */
  random() {
    return Number(this.nextUint64() >> 11n) * TWO_POW_MINUS_53;
  }
}
