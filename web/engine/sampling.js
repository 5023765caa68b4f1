// The server's choice of the next token (runtime/sampling.py) in JavaScript: greedy, temperature,
// top-k, top-p, and the top candidates a step shows. Given the same logits and the same uniform u
// it picks the same token, so a seeded generation (rng.js) writes in the browser what it writes on
// the server. The arithmetic is the float64 path's: the same subtractions, divisions, sums in
// numpy's order (its pairwise summation) and cumulative sums; only Math.exp may differ from
// numpy's exp in the last bit, which moves a probability by ~1e-16 and never the set of kept
// tokens short of an exact tie with p.
//
// Nothing sorts the whole vocabulary (short of a row of exact ties at the top-p cut): at 50,257
// logits that cost more than the model's own step in the browser. top-k finds its k-th value by a
// selection, top-p sorts only the tokens around its cut.

// Rows this short are sorted whole for top-p (what a top-k cut leaves): the bucket passes cost
// more than one sort of a few hundred values (runtime/sampling.py's SMALL_ROW).
const SMALL_ROW = 512;
// The margin the threshold's mass must clear above p, for the rounding of its sum against the
// sorted running sums (a top_p within 1e-12 of 1 takes every token), as runtime/sampling.py.
const NUCLEUS_MARGIN = 1e-12;

// Scratch rows reused from token to token: a fresh 400 KB Float64Array per token cost as much as
// the exponentials written into it.
let scratch64 = new Float64Array(0);
let scratchSelect = new Float64Array(0);
function buffer64(n) {
  if (scratch64.length < n) scratch64 = new Float64Array(n);
  return scratch64;
}
function selectBuffer(n) {
  if (scratchSelect.length < n) scratchSelect = new Float64Array(n);
  return scratchSelect;
}

/**
 * numpy's sum of a float64 array (pairwise summation: 8 accumulators on blocks of up to 128),
 * so a total rounds as the server's does.
 */
function pairwiseSum(a, lo, n) {
  if (n < 8) {
    let res = 0;
    for (let i = lo; i < lo + n; i++) res += a[i];
    return res;
  }
  if (n <= 128) {
    let r0 = a[lo], r1 = a[lo + 1], r2 = a[lo + 2], r3 = a[lo + 3];
    let r4 = a[lo + 4], r5 = a[lo + 5], r6 = a[lo + 6], r7 = a[lo + 7];
    const end = lo + n - (n % 8);
    let i = lo + 8;
    for (; i < end; i += 8) {
      r0 += a[i]; r1 += a[i + 1]; r2 += a[i + 2]; r3 += a[i + 3];
      r4 += a[i + 4]; r5 += a[i + 5]; r6 += a[i + 6]; r7 += a[i + 7];
    }
    let res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
    for (; i < lo + n; i++) res += a[i];
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwiseSum(a, lo, n2) + pairwiseSum(a, lo + n2, n - n2);
}

/** The index of the largest value, the first among equals (np.argmax; a NaN wins, as there). */
export function argmax(row) {
  let best = 0;
  let top = row[0];
  if (top !== top) return 0;
  for (let i = 1; i < row.length; i++) {
    const v = row[i];
    if (v > top) {
      top = v;
      best = i;
    } else if (v !== v) {
      return i;
    }
  }
  return best;
}

function maxOf(row, n = row.length) {
  let m = -Infinity;
  for (let i = 0; i < n; i++) if (row[i] > m) m = row[i];
  return m;
}

/** The k-th smallest (0-based) of a[0..n), reordering them (Hoare's selection: ties cost nothing extra). */
function select(a, n, k) {
  let lo = 0;
  let hi = n - 1;
  while (hi > lo) {
    const pivot = a[(lo + hi) >> 1];
    let i = lo;
    let j = hi;
    do {
      while (a[i] < pivot) i++;
      while (pivot < a[j]) j--;
      if (i <= j) {
        const t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        j--;
      }
    } while (i <= j);
    if (j < k) lo = i;
    if (k < i) hi = j;
  }
  return a[k];
}

/** The k-th largest of `values` at the positions `pool[0..n)`, counting equal values apart. */
function kthLargest(values, pool, n, k) {
  const a = selectBuffer(n);
  for (let i = 0; i < n; i++) a[i] = values[pool[i]];
  return select(a, n, n - k);
}

/**
 * The positions of `pool` (all of `values` when null), in their order, whose values are at least
 * the k-th largest: the k largest and every value tied with the k-th.
 *
 * As runtime/sampling.py's top_k_ids, every 16th value is searched first: the k-th largest of a
 * subset is at most the row's, so the values at or above it (a few hundred for k = 50) hold the
 * row's k largest, and the k-th is found among them.
 */
function atLeastKth(values, pool, k) {
  pool ??= range(values.length);
  const n = pool.length;
  let contenders = pool;
  let size = n;
  const stride = Math.min(16, Math.floor(n / (4 * k)));
  if (stride >= 2) {
    const sample = new Int32Array(Math.ceil(n / stride));
    for (let i = 0, j = 0; i < n; i += stride) sample[j++] = pool[i];
    const floor = kthLargest(values, sample, sample.length, k);
    contenders = new Int32Array(n);
    size = 0;
    for (let i = 0; i < n; i++) if (values[pool[i]] >= floor) contenders[size++] = pool[i];
  }
  const kth = kthLargest(values, contenders, size, k);
  let count = 0;
  for (let i = 0; i < size; i++) if (values[contenders[i]] >= kth) count++;
  const out = new Int32Array(count);
  for (let i = 0, j = 0; i < size; i++) if (values[contenders[i]] >= kth) out[j++] = contenders[i];
  return out;
}

function range(n) {
  const ids = new Int32Array(n);
  for (let i = 0; i < n; i++) ids[i] = i;
  return ids;
}

function isCut(topK, n) {
  return topK !== null && topK !== undefined && topK > 0 && topK < n;
}

function isNucleus(topP) {
  return topP !== null && topP !== undefined && topP < 1;
}

// The probabilities are bucketed by the top bits of their float64 pattern (exponent and 5 bits of
// mantissa: 32 buckets an octave), which orders positive numbers as their values do: one pass
// finds the bucket where the mass of the most likely tokens reaches p, and only that bucket is
// sorted. (At temperature 1.3 the model's nucleus of 0.9 holds up to 30,000 tokens: sorting them
// cost 3 ms a token, this 0.3 ms.)
const KEY_SHIFT = 15;
const KEYS = 32768; // every probability in [0, 1] has a key below 32737
const HI = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 1 : 0; // the high word of a float64
const bucketMass = new Float64Array(KEYS);
const bucketCount = new Int32Array(KEYS);

function keyOf(words, i) {
  const k = words[2 * i + HI] >>> KEY_SHIFT;
  return k < KEYS ? k : KEYS - 1;
}

/**
 * The indices, in id order, of the smallest set of the most likely `p[0..n)` whose probabilities
 * add up to at least `topP`, as runtime/sampling.py's float64 path: sorted from the most likely,
 * a token is kept while the mass before it (its running sum less itself) is below topP, and among
 * equal probabilities the lower index comes first.
 *
 * The running sums here are added in another order than the full sort's, so they may differ from
 * its by the rounding of n additions; wherever the cut comes within that of topP, the full sort
 * decides (an exact tie whose mass meets p exactly, in practice only).
 */
function nucleus(p, n, topP) {
  if (n <= SMALL_ROW) return nucleusBySort(p, n, topP, null);
  const words = new Uint32Array(p.buffer, p.byteOffset, 2 * n);
  bucketMass.fill(0);
  bucketCount.fill(0);
  let maxKey = 0;
  for (let i = 0; i < n; i++) {
    const k = keyOf(words, i);
    bucketMass[k] += p[i];
    bucketCount[k]++;
    if (k > maxKey) maxKey = k;
  }
  // The bucket where the running mass reaches topP, and the mass of those above it.
  let cutKey = -1;
  let above = 0;
  for (let k = maxKey; k >= 0; k--) {
    if (bucketCount[k] === 0) continue;
    if (above + bucketMass[k] >= topP) {
      cutKey = k;
      break;
    }
    above += bucketMass[k];
  }
  const slack = (n + 2) * 2 ** -52; // both sums' rounding bound, and Math.exp's last bit
  if (cutKey >= 0) {
    const size = bucketCount[cutKey];
    const sorted = new Float64Array(size);
    for (let i = 0, j = 0; i < n; i++) if (keyOf(words, i) === cutKey) sorted[j++] = p[i];
    sorted.sort();
    let sum = above;
    let nKeep = 0;
    let beforeLast = 0;
    let beforeNext = null; // the mass before the first token left out
    for (let j = size - 1; j >= 0 && beforeNext === null; j--) {
      if (sum < topP) {
        nKeep++;
        beforeLast = sum;
        sum += sorted[j];
      } else beforeNext = sum;
    }
    beforeNext ??= sum;
    if (nKeep > 0 && topP - beforeLast > slack && beforeNext - topP > slack) {
      return cut(p, n, words, cutKey, sorted[size - nKeep], nKeep - countAbove(sorted, sorted[size - nKeep]));
    }
  }
  // Too close to call: the full sort's own running sums over the most likely tokens, those whose
  // buckets hold more than topP (with a margin for the rounding of this sum against the sort's).
  const goal = topP + NUCLEUS_MARGIN;
  let mass = 0;
  for (let k = maxKey; k >= 0; k--) {
    mass += bucketMass[k];
    if (bucketCount[k] && mass > goal) {
      const pool = [];
      let poolMass = 0;
      for (let i = 0; i < n; i++) {
        if (keyOf(words, i) >= k) {
          pool.push(i);
          poolMass += p[i];
        }
      }
      if (poolMass > goal) return nucleusBySort(p, n, topP, Int32Array.from(pool));
    }
  }
  return nucleusBySort(p, n, topP, null);
}

/** How many of the ascending `sorted` are above `value`. */
function countAbove(sorted, value) {
  let count = 0;
  for (let j = sorted.length - 1; j >= 0 && sorted[j] > value; j--) count++;
  return count;
}

/**
 * The kept indices in id order: every one in a bucket above `cutKey`, those of the cut bucket
 * above `last`, and the first `ties` equal to it (a stable sort's order: the lower index first).
 */
function cut(p, n, words, cutKey, last, ties) {
  const kept = [];
  for (let i = 0; i < n; i++) {
    const k = keyOf(words, i);
    if (k > cutKey || (k === cutKey && (p[i] > last || (p[i] === last && ties-- > 0)))) kept.push(i);
  }
  return Int32Array.from(kept);
}

/**
 * nucleus() by runtime/sampling.py's float64 path to the bit: the probabilities of `pool` (a
 * prefix of the most likely tokens with mass above topP, in id order; null: all) sorted, their
 * running sums, and a token kept while its sum less itself is below topP (counted over the whole
 * pool, as np.count_nonzero(before < top_p)).
 */
function nucleusBySort(p, n, topP, pool) {
  const size = pool ? pool.length : n;
  const sorted = new Float64Array(size);
  for (let j = 0; j < size; j++) sorted[j] = p[pool ? pool[j] : j];
  sorted.sort();
  let sum = 0;
  let nKeep = 0;
  for (let j = size - 1; j >= 0; j--) {
    const v = sorted[j];
    sum += v;
    if (sum - v < topP) nKeep++;
  }
  const last = sorted[size - nKeep];
  let ties = nKeep - countAbove(sorted, last);
  const kept = [];
  for (let j = 0; j < size; j++) {
    const i = pool ? pool[j] : j;
    if (p[i] > last || (p[i] === last && ties-- > 0)) kept.push(i);
  }
  return Int32Array.from(kept);
}

/**
 * The tokens one row of logits can draw and their probabilities, as runtime/sampling.py's
 * `candidates`: softmax(logits / temperature) in float64, cut to the `topK` largest logits (every
 * logit tied with the k-th stays; 0, null or >= the row's length: no cut), then to the smallest
 * set of most likely tokens whose probabilities add up to at least `topP` (null or >= 1: no cut;
 * ties: the lower id first), renormalised.
 *
 * @param {Float32Array} logits one row [V]
 * @param {number} temperature > 0
 * @param {number|null} topK
 * @param {number|null} topP
 * @returns {{ids: Int32Array, probs: Float64Array}} ids ascending, probs summing to 1
 */
export function candidates(logits, temperature, topK, topP) {
  let ids = null;
  let x = logits;
  if (isCut(topK, logits.length)) {
    ids = atLeastKth(logits, null, topK);
    x = new Float64Array(ids.length);
    for (let i = 0; i < ids.length; i++) x[i] = logits[ids[i]];
  }
  const n = x.length;
  // The largest logit is taken off BEFORE dividing: a tiny temperature then sends the others to
  // -inf (probability 0) instead of every logit to +-inf (inf - inf = NaN).
  const m = maxOf(x);
  const z = n === logits.length && ids === null ? buffer64(n) : new Float64Array(n);
  if (temperature !== 1) {
    for (let i = 0; i < n; i++) z[i] = Math.exp((x[i] - m) / temperature);
  } else {
    for (let i = 0; i < n; i++) z[i] = Math.exp(x[i] - m);
  }
  const total = pairwiseSum(z, 0, n);
  for (let i = 0; i < n; i++) z[i] /= total;
  if (!isNucleus(topP)) {
    return { ids: ids ?? range(n), probs: z.slice(0, n) };
  }
  const kept = nucleus(z, n, topP);
  const probs = new Float64Array(kept.length);
  for (let i = 0; i < kept.length; i++) probs[i] = z[kept[i]];
  const keptTotal = pairwiseSum(probs, 0, probs.length);
  for (let i = 0; i < probs.length; i++) probs[i] /= keptTotal;
  const outIds = ids ? kept.map((i) => ids[i]) : kept.slice();
  return { ids: outIds, probs };
}

/** The first index whose value exceeds `x` in the ascending `cdf` (np.searchsorted side="right"). */
function searchRight(cdf, x) {
  let lo = 0;
  let hi = cdf.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (x < cdf[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * The token drawn from `kept` (candidates()) by the uniform `u` in [0, 1), as choose_rows: the
 * first candidate whose cumulative probability exceeds u times the total (scaled, so rounding
 * never lets u fall past the last token).
 */
function drawFrom(kept, u) {
  const { ids, probs } = kept;
  const cdf = new Float64Array(probs.length);
  let sum = 0;
  for (let i = 0; i < probs.length; i++) cdf[i] = sum += probs[i];
  return ids[Math.min(searchRight(cdf, u * cdf[cdf.length - 1]), ids.length - 1)];
}

/**
 * The next token of one row of logits, as runtime/sampling.py's choose_rows: temperature 0 is the
 * argmax (the first of equals); else the token the uniform `u` picks from candidates().
 *
 * @param {Float32Array} logits one row [V]
 * @param {{temperature: number, topK?: number|null, topP?: number|null}} settings
 * @param {number} u a uniform in [0, 1) (NumpyRandom.random(); unused when greedy)
 * @param {{ids: Int32Array, probs: Float64Array}} [kept] the row's candidates() with these
 *   settings, when the caller has them already (they are not worked out again)
 * @returns {number} the token id
 */
export function choose(logits, { temperature, topK = null, topP = null }, u, kept = null) {
  if (temperature === 0) return argmax(logits);
  return drawFrom(kept ?? candidates(logits, temperature, topK, topP), u);
}

/**
 * choose() and the candidates it drew from in one call: `{ token, kept }`, kept null when greedy
 * (as choose_rows' per-row candidates), ready for topCandidates().
 */
export function sample(logits, settings, u) {
  if (settings.temperature === 0) return { token: argmax(logits), kept: null };
  const kept = candidates(logits, settings.temperature, settings.topK ?? null, settings.topP ?? null);
  return { token: drawFrom(kept, u), kept };
}

/**
 * What a step shows, as runtime/sampling.py's top_candidates: the `n` most likely ids of one row
 * of logits (best first, the lower id first among equals), their model probabilities (softmax at
 * temperature 1) and sampling probabilities (from `kept`, the row's candidates(); null: greedy,
 * all mass on `token`), and the drawn token's own two probabilities.
 *
 * @returns {{ids: Int32Array, probs: Float64Array, sampleProbs: Float64Array, tokenProb: number, tokenSampleProb: number}}
 */
export function topCandidates(logits, n, token, kept) {
  const V = logits.length;
  const m = maxOf(logits);
  const e = buffer64(V);
  for (let i = 0; i < V; i++) e[i] = Math.exp(logits[i] - m);
  const total = pairwiseSum(e, 0, V);
  // A top-k or top-p cut kept the most likely tokens (ties by lower id, as here): when it kept at
  // least n, the n best are among them, found without another pass over the vocabulary.
  const pool = kept && n <= kept.ids.length && kept.ids.length < V ? kept.ids : null;
  const size = pool ? pool.length : V;
  let best;
  if (n <= 0) best = new Int32Array(0);
  else if (n >= size) best = pool ? Int32Array.from(pool) : range(V);
  else best = atLeastKth(logits, pool, n);
  best.sort((a, b) => logits[b] - logits[a] || a - b);
  const ids = best.slice(0, Math.max(0, Math.min(n, best.length)));
  const probs = new Float64Array(ids.length);
  for (let i = 0; i < ids.length; i++) probs[i] = Math.exp(logits[ids[i]] - m) / total;
  const sampleProbs = new Float64Array(ids.length);
  let tokenSampleProb;
  if (!kept) {
    for (let i = 0; i < ids.length; i++) sampleProbs[i] = ids[i] === token ? 1 : 0;
    tokenSampleProb = 1;
  } else {
    const q = (id) => {
      const at = Math.min(searchLeft(kept.ids, id), kept.ids.length - 1);
      return kept.ids[at] === id ? kept.probs[at] : 0;
    };
    for (let i = 0; i < ids.length; i++) sampleProbs[i] = q(ids[i]);
    tokenSampleProb = q(token);
  }
  return { ids, probs, sampleProbs, tokenProb: Math.exp(logits[token] - m) / total, tokenSampleProb };
}

function searchLeft(sorted, x) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The API's settings (temperature 0 = greedy, top_k 0 and top_p 1 cut nothing: the conventions of
 * playground/next_token.py's SamplingSettings) as candidates() and choose() take them; a value out
 * of range throws a RangeError.
 *
 * @returns {{temperature: number, topK: number|null, topP: number|null}}
 */
export function samplingSettings({ temperature, top_k = 0, top_p = 1 }, vocabSize = Infinity) {
  if (typeof temperature !== "number" || !Number.isFinite(temperature) || temperature < 0) {
    throw new RangeError(`temperature must be a number >= 0 (0 = greedy), not ${temperature}`);
  }
  if (top_k !== null && (!Number.isInteger(top_k) || top_k < 0)) {
    throw new RangeError(`top_k must be an integer >= 0 (0 = no cut), not ${top_k}`);
  }
  if (top_p !== null && (typeof top_p !== "number" || !(top_p > 0 && top_p <= 1))) {
    throw new RangeError(`top_p must be in (0, 1] (1 = no cut), not ${top_p}`);
  }
  return {
    temperature,
    topK: top_k === null || top_k === 0 || top_k >= vocabSize ? null : top_k,
    topP: top_p === null || top_p >= 1 ? null : top_p,
  };
}
