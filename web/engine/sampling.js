// The choice of the next token in the browser: runtime/sampling.py's sample(), the rule the server
// follows, so that a seeded generation draws the same tokens from the same logits in both (its
// uniforms: draws.js). The rule:
//
//   1. temperature 0 is greedy: the most likely token (the lowest id among equal logits);
//   2. else the tokens are ranked, most likely first (by logit; equal logits: the lower id first);
//   3. top-k keeps the first k, and every later token whose logit equals the k-th's;
//   4. each kept token weighs w = exp((logit - the top logit) / temperature), softmax's numerator;
//   5. top-p keeps the first tokens while the weight before each is below p of their total;
//   6. the token drawn is the first whose running weight exceeds u of the kept tokens' total.
//
// Only the tokens the cut and the draw reach are ranked: a sort of all 50,257 at every token would
// cost more than the model's own step. The sums are float64 as the server's; they may round
// differently (another order of addition, Math.exp's last bit), which moves a step of the draw by
// at most ~1e-11 of the total (50,257 additions).

// A token's place in the ranking packed with its id into one float64, exactly (32 bits for the
// float32 logit's order, 20 for ids up to a million), so a typed array's own numeric sort ranks
// them: five times faster than a sort by a comparator for the thousands a top-p cut can keep.
const ID_SPAN = 2 ** 20;
const word = new Uint32Array(1);
const single = new Float32Array(word.buffer);

/** `ids` ranked: the higher logit first, the lower id among equals. */
function rank(row, ids) {
  if (row.length > ID_SPAN) return Int32Array.from(ids).sort((a, b) => row[b] - row[a] || a - b);
  const keys = new Float64Array(ids.length);
  for (let j = 0; j < ids.length; j++) {
    single[0] = row[ids[j]] || 0; // (-0 ranks as 0, its equal)
    const b = word[0];
    const up = b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0; // ascending as the value
    keys[j] = (0xffffffff - up) * ID_SPAN + ids[j];
  }
  keys.sort();
  return Int32Array.from(keys, (k) => k % ID_SPAN);
}

/** The ids of `row` whose value is at least `floor`, ascending. */
function atLeast(row, floor) {
  const ids = [];
  for (let i = 0; i < row.length; i++) if (row[i] >= floor) ids.push(i);
  return ids;
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

let scratch = new Float32Array(0); // reused from token to token (a fresh 200 kB row cost as much as the pass over it)

/** The k-th largest of `row` (equal values counted apart), by Hoare's selection on a copy. */
function kthLargest(row, k) {
  if (scratch.length < row.length) scratch = new Float32Array(row.length);
  const a = scratch;
  a.set(row);
  const target = row.length - k;
  let lo = 0;
  let hi = row.length - 1;
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
    if (j < target) lo = i;
    if (target < i) hi = j;
  }
  return a[target];
}

/** Every `stride`-th value of `row`. */
function everyNth(row, stride) {
  const out = new Float32Array(Math.ceil(row.length / stride));
  for (let i = 0, j = 0; i < row.length; i += stride) out[j++] = row[i];
  return out;
}

/**
 * The ids of the `n` most likely tokens and of every one tied with the n-th, ranked (steps 2-3).
 * The n-th largest of every 16th logit is at most the row's: the logits at or above it (a few
 * hundred for n = 50) hold the n most likely, and only they are ranked.
 */
function best(row, n) {
  const stride = Math.min(16, Math.floor(row.length / (4 * n)));
  let floor = -Infinity;
  if (n < row.length) floor = kthLargest(stride >= 2 ? everyNth(row, stride) : row, n);
  const ranked = rank(row, atLeast(row, floor));
  let end = Math.min(n, ranked.length);
  while (end < ranked.length && row[ranked[end]] === row[ranked[end - 1]]) end++;
  return ranked.subarray(0, end);
}

// Without a top-k cut the weights of all 50,257 tokens are bucketed by the top bits of their
// float64 pattern (the exponent and 5 bits of mantissa: 32 buckets an octave), which order positive
// numbers as their values do: the running weight reaches a given mass inside one bucket, found from
// the buckets' masses, and only that bucket's tokens are ranked. (At temperature 1.3, top-p 0.9
// keeps up to 30,000 tokens: ranking them all at every token cost 10 ms in the browser.)
const KEY_SHIFT = 15;
const KEYS = 32768; // every weight in [0, 1] has a key below 32737
const HI = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 1 : 0; // the high word of a float64
const bucketMass = new Float64Array(KEYS);
let weights = new Float64Array(0);
let keys = new Uint16Array(0);

/** Fills `weights`, `keys` and the buckets' masses for a row; the weights' total and the top key. */
function bucket(logits, m, temperature) {
  const V = logits.length;
  if (weights.length < V) [weights, keys] = [new Float64Array(V), new Uint16Array(V)];
  const words = new Uint32Array(weights.buffer, 0, 2 * V);
  bucketMass.fill(0);
  let total = 0;
  let top = 0;
  for (let i = 0; i < V; i++) {
    const w = (weights[i] = Math.exp((logits[i] - m) / temperature));
    const k = Math.min(words[2 * i + HI] >>> KEY_SHIFT, KEYS - 1);
    keys[i] = k;
    bucketMass[k] += w;
    total += w;
    if (k > top) top = k;
  }
  return { total, top };
}

/**
 * The first token in rank order whose running weight reaches `goal` (exceeds it, when `strict`),
 * and that running weight; where rounding leaves the goal beyond every token, the last one with
 * any weight.
 */
function reach(logits, V, top, goal, strict) {
  const past = (sum) => (strict ? sum > goal : sum >= goal);
  let above = 0;
  let last = null;
  for (let k = top; k >= 0; k--) {
    if (bucketMass[k] === 0 || (!past(above + bucketMass[k]) && k > 0)) {
      above += bucketMass[k];
      continue;
    }
    const members = [];
    for (let i = 0; i < V; i++) if (keys[i] === k) members.push(i);
    for (const id of rank(logits, members)) {
      above += weights[id];
      if (weights[id] > 0) last = { id, sum: above };
      if (past(above)) return last;
    }
  }
  return last;
}

/**
 * The next token of one row of logits, drawn with the uniform `u` in [0, 1) (unused when greedy),
 * by the rule above; and what the draw kept, for topCandidates() (null when greedy).
 *
 * @param {Float32Array} logits one row [V]
 * @param {{temperature: number, topK?: number|null, topP?: number|null}} settings as samplingSettings()
 * @returns {{token: number, kept: object|null}}
 */
export function sample(logits, { temperature, topK = null, topP = null }, u) {
  if (temperature === 0) return { token: argmax(logits), kept: null };
  const V = logits.length;
  let m = -Infinity;
  for (let i = 0; i < V; i++) if (logits[i] > m) m = logits[i];
  const kept = (total, last) => ({ max: m, temperature, total, last, lastLogit: last === null ? null : logits[last] });
  if (topK === null || topK <= 0 || topK >= V) {
    const { total, top } = bucket(logits, m, temperature);
    if (topP === null) return { token: reach(logits, V, top, u * total, true).id, kept: kept(total, null) };
    const cut = reach(logits, V, top, topP * total, false); // the last token kept, and the kept total
    return { token: reach(logits, V, top, u * cut.sum, true).id, kept: kept(cut.sum, cut.id) };
  }
  // A top-k cut: its few tokens ranked, and their running weight.
  const ids = best(logits, topK);
  const cdf = new Float64Array(ids.length);
  let sum = 0;
  for (let j = 0; j < ids.length; j++) cdf[j] = sum += Math.exp((logits[ids[j]] - m) / temperature);
  let n = ids.length;
  if (topP !== null) {
    n = 1;
    while (n < ids.length && cdf[n - 1] < topP * sum) n++;
  }
  const total = cdf[n - 1];
  let j = 0;
  while (j < n - 1 && !(cdf[j] > u * total)) j++;
  return { token: ids[j], kept: kept(total, ids[n - 1]) };
}

/** The probability of `id` in the distribution `kept` (sample()'s) was drawn from. */
function keptProbability(logits, kept, id) {
  const { last, lastLogit } = kept;
  const inside = last === null || logits[id] > lastLogit || (logits[id] === lastLogit && id <= last);
  return inside ? Math.exp((logits[id] - kept.max) / kept.temperature) / kept.total : 0;
}

/**
 * What a step shows, as runtime/sampling.py's top_candidates: the `n` most likely ids of one row
 * of logits (best first, the lower id first among equals), their model probabilities (softmax at
 * temperature 1) and sampling probabilities (in `kept`, the distribution sample() drew from; null:
 * greedy, all of it on `token`), and the drawn token's own two probabilities.
 *
 * @returns {{ids: Int32Array, probs: Float64Array, sampleProbs: Float64Array, tokenProb: number, tokenSampleProb: number}}
 */
export function topCandidates(logits, n, token, kept) {
  let m = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > m) m = logits[i];
  let total = 0;
  for (let i = 0; i < logits.length; i++) total += Math.exp(logits[i] - m);
  const ids = n > 0 ? best(logits, Math.min(n, logits.length)).slice(0, n) : new Int32Array(0);
  const model = (id) => Math.exp(logits[id] - m) / total;
  const sampled = (id) => (kept ? keptProbability(logits, kept, id) : id === token ? 1 : 0);
  return {
    ids,
    probs: Float64Array.from(ids, model),
    sampleProbs: Float64Array.from(ids, sampled),
    tokenProb: model(token),
    tokenSampleProb: sampled(token),
  };
}

/**
 * The API's settings (temperature 0 = greedy, top_k 0 and top_p 1 cut nothing: the conventions of
 * playground/next_token.py's SamplingSettings) as sample() takes them; a value out of range throws
 * a RangeError.
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
