/**
 * GPT-2's tokenizer (byte-level BPE) for the browser and Node.js, built from the Hub folder's
 * tokenizer.json. It gives the ids tiktoken's "gpt2" encoding gives, which the model was trained
 * on: any other split of the same text is a prompt the model has never seen.
 */

const CACHE_LIMIT = 10_000;

// GPT-2's alphabet: every byte as a printable character, so that tokenizer.json's vocabulary can
// spell any byte sequence (openai/gpt-2 encoder.py, bytes_to_unicode).
const BYTE_TO_CHAR = (() => {
  const printable = (b) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const chars = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) chars[b] = String.fromCharCode(printable(b) ? b : 256 + extra++);
  return chars;
})();
const CHAR_TO_BYTE = new Map(BYTE_TO_CHAR.map((c, b) => [c, b]));

// tiktoken's gpt2 pattern, '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
// (case-sensitive: "'S" is not a contraction). JavaScript has no possessive quantifiers, but here
// the greedy ones match the same text. Its \s is Unicode's White_Space, spelled out here:
// JavaScript's \s also holds U+FEFF and leaves out U+0085.
const WHITESPACE = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PIECE = new RegExp(
  `'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^${WHITESPACE}\\p{L}\\p{N}]+` +
    `|[${WHITESPACE}]+$|[${WHITESPACE}]+(?![^${WHITESPACE}])|[${WHITESPACE}]`,
  "gu",
);

const utf8 = new TextEncoder();
// ignoreBOM keeps a leading U+FEFF, which tiktoken's decode keeps; fatal: false replaces invalid
// UTF-8 with U+FFFD, as Python's errors="replace" does.
const utf8Decoder = new TextDecoder("utf-8", { ignoreBOM: true });

const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// Pieces this long (a run of one letter, a pasted line of dashes) merge through a heap: the plain
// scan of every pair per merge is quicker for a word but quadratic in the piece's length.
const LONG_PIECE = 64;

// The heap holds rank * 2^32 + position as one number: ordered by rank, then leftmost first, as
// tiktoken picks its next merge; no object per entry.
const POSITION = 2 ** 32;

function heapPush(heap, key) {
  let i = heap.push(key) - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (heap[parent] <= key) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = key;
}

function heapPop(heap) {
  const top = heap[0];
  const last = heap.pop();
  if (heap.length) {
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= heap.length) break;
      if (child + 1 < heap.length && heap[child + 1] < heap[child]) child++;
      if (heap[child] >= last) break;
      heap[i] = heap[child];
      i = child;
    }
    heap[i] = last;
  }
  return top;
}

export class Tokenizer {
  #ranks = new Map(); // token (in GPT-2's byte alphabet) -> id, which is its merge rank
  #idToToken = [];
  #specials; // special token text -> id
  #specialText;
  #specialPattern;
  #cache = new Map(); // piece -> ids
  #bytes = []; // id -> Uint8Array, filled as tokens are decoded

  /**
   * @param {Record<string, number>} vocab token (in GPT-2's byte alphabet) -> id
   * @param {Record<string, number>} specials special token text -> id, e.g. {"<|endoftext|>": 50256}
   */
  constructor(vocab, specials = {}) {
    // As in tiktoken, two neighbouring parts merge by the rank of the token they make, and GPT-2's
    // ids are those ranks: the vocabulary alone drives the merges (tokenizer.json's list of merges,
    // derived from the same ranks, is not needed).
    this.#specials = new Map(Object.entries(specials));
    for (const [token, id] of Object.entries(vocab)) {
      if (this.#specials.has(token)) continue;
      this.#ranks.set(token, id);
      this.#idToToken[id] = token;
    }
    this.#specialText = new Map([...this.#specials].map(([text, id]) => [id, text]));
    this.#specialPattern = this.#specials.size
      ? new RegExp([...this.#specials.keys()].map(escapeRegExp).join("|"), "gu")
      : null;
    this.vocabSize = Math.max(this.#idToToken.length - 1, ...this.#specials.values()) + 1;
    this.eotId = this.#specials.get("<|endoftext|>");
  }

  /** From tokenizer.json (parsed, or its text): byte-level BPE plus its added special tokens. */
  static fromJSON(json) {
    const doc = typeof json === "string" ? JSON.parse(json) : json;
    if (doc?.model?.type !== "BPE" || doc.pre_tokenizer?.type !== "ByteLevel") {
      throw new Error("tokenizer.json: expected a byte-level BPE tokenizer (GPT-2's)");
    }
    const specials = {};
    for (const added of doc.added_tokens ?? []) if (added.special) specials[added.content] = added.id;
    return new Tokenizer(doc.model.vocab, specials);
  }

  /**
   * Text -> ids. With special: true, "<|endoftext|>" in the text is the one special token (what
   * tiktoken's encode(allowed_special="all") does); with false it is ordinary text (encode_ordinary),
   * so that pasted text cannot smuggle in a document boundary.
   */
  encode(text, { special = true } = {}) {
    const ids = [];
    if (!special || !this.#specialPattern) {
      this.#encodeOrdinary(text, ids);
      return ids;
    }
    let start = 0;
    // Each stretch between special tokens is its own text to the pattern ($ ends at the stretch),
    // as tiktoken runs it.
    for (const match of text.matchAll(this.#specialPattern)) {
      this.#encodeOrdinary(text.slice(start, match.index), ids);
      ids.push(this.#specials.get(match[0]));
      start = match.index + match[0].length;
    }
    this.#encodeOrdinary(text.slice(start), ids);
    return ids;
  }

  #encodeOrdinary(text, ids) {
    for (const [piece] of text.matchAll(PIECE)) {
      let pieceIds = this.#cache.get(piece);
      if (!pieceIds) {
        pieceIds = this.#bytePairEncode(piece);
        // Text repeats its words: a bounded cache keeps the speed without growing forever.
        if (this.#cache.size >= CACHE_LIMIT) this.#cache.clear();
        this.#cache.set(piece, pieceIds);
      }
      for (const id of pieceIds) ids.push(id);
    }
  }

  /** One piece's UTF-8 bytes, merged pair by pair, lowest rank first (tiktoken's byte_pair_merge). */
  #bytePairEncode(piece) {
    const bytes = utf8.encode(piece);
    let word = "";
    for (let i = 0; i < bytes.length; i++) word += BYTE_TO_CHAR[bytes[i]];
    // tiktoken takes a piece that is itself a token whole, without merging its bytes.
    const whole = this.#ranks.get(word);
    if (whole !== undefined) return [whole];
    const parts = word.split(""); // GPT-2's alphabet spells each byte as one UTF-16 unit
    const merged = parts.length < LONG_PIECE ? this.#mergeShort(parts) : this.#mergeLong(parts);
    return merged.map((part) => this.#ranks.get(part));
  }

  #pairRank(parts, i) {
    return i + 1 < parts.length ? (this.#ranks.get(parts[i] + parts[i + 1]) ?? Infinity) : Infinity;
  }

  #mergeShort(parts) {
    const pairRanks = parts.map((_, i) => this.#pairRank(parts, i));
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i < pairRanks.length; i++) {
        if (pairRanks[i] < bestRank) {
          best = i;
          bestRank = pairRanks[i];
        }
      }
      if (best < 0) return parts;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
      pairRanks.splice(best + 1, 1);
      pairRanks[best] = this.#pairRank(parts, best);
      if (best > 0) pairRanks[best - 1] = this.#pairRank(parts, best - 1);
    }
  }

  /** The same merges, as a linked list of parts (each at its first byte) and a heap of pairs. */
  #mergeLong(parts) {
    const n = parts.length;
    const next = Array.from({ length: n }, (_, i) => i + 1);
    const prev = Array.from({ length: n }, (_, i) => i - 1);
    const heap = [];
    const offer = (left) => {
      if (left < 0 || next[left] >= n) return;
      const rank = this.#ranks.get(parts[left] + parts[next[left]]);
      if (rank !== undefined) heapPush(heap, rank * POSITION + left);
    };
    for (let i = 0; i < n - 1; i++) offer(i);
    while (heap.length) {
      const key = heapPop(heap);
      const rank = Math.floor(key / POSITION);
      const left = key - rank * POSITION;
      const right = next[left];
      // An entry goes stale when either part has merged since: it then no longer makes its rank.
      if (parts[left] === null || right >= n || this.#ranks.get(parts[left] + parts[right]) !== rank) continue;
      parts[left] += parts[right];
      parts[right] = null;
      next[left] = next[right];
      if (next[left] < n) prev[next[left]] = left;
      offer(prev[left]);
      offer(left);
    }
    return parts.filter((part) => part !== null);
  }

  /** The bytes a token stands for: a token can hold part of a character, so text is not enough. */
  tokenBytes(id) {
    return this.#tokenBytes(id).slice(); // a copy: the cached array stays as it is
  }

  #tokenBytes(id) {
    let bytes = this.#bytes[id];
    if (bytes) return bytes;
    if (this.#specialText.has(id)) {
      bytes = utf8.encode(this.#specialText.get(id));
    } else {
      const token = this.#idToToken[id];
      if (token === undefined) throw new RangeError(`token id ${id} is not in the vocabulary`);
      bytes = Uint8Array.from(token, (c) => CHAR_TO_BYTE.get(c));
    }
    this.#bytes[id] = bytes;
    return bytes;
  }

  /** Ids -> text: the tokens' bytes joined first, since a character may span several tokens. */
  decode(ids) {
    const chunks = Array.from(ids, (id) => this.#tokenBytes(id));
    const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let offset = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, offset);
      offset += chunk.length;
    }
    return utf8Decoder.decode(bytes);
  }

  /** One token as text, U+FFFD standing for a partial character (as tiktoken shows it alone). */
  tokenText(id) {
    return utf8Decoder.decode(this.#tokenBytes(id));
  }
}
