// web/engine/tokenizer.js on a vocabulary small enough to work out by hand: the order of its
// merges (lowest rank first, the leftmost among equals) on both of its merge paths, short pieces
// and long ones (a heap past LONG_PIECE bytes), special tokens, and the bytes behind each id.
// (The same ids as tiktoken on GPT-2's own vocabulary: tests/browser/test_web_tokenizer.py.)
import assert from "node:assert/strict";
import { test } from "node:test";

import { Tokenizer } from "../tokenizer.js";

// GPT-2's byte alphabet (openai/gpt-2 encoder.py): a printable byte is its own character, the
// space byte is "Ġ" (U+0120), the UTF-8 bytes of "é" (C3 A9) are "Ã©".
const LETTERS = "abcdefghijklmnopqrstuvwxyz";
const vocab = {};
[..."<|>!", ..."Ġ", ..."Ã©ï»¿", ...LETTERS].forEach((c, i) => (vocab[c] = i));
const A = vocab.a;
const AA = (vocab.aa = 100); // the lowest rank: merged first
const AAAA = (vocab.aaaa = 101);
const BC = (vocab.bc = 102);
const AB = (vocab.ab = 103); // ranked after "bc": "abc" is a + bc, though "ab" is leftmost
const E_ACUTE = (vocab["Ã©"] = 104);
vocab["<|endoftext|>"] = 200;
const tokenizer = new Tokenizer(vocab, { "<|endoftext|>": 200 });

/** "a" * n as byte-pair encoding makes it: the a's paired from the left, then the pairs paired. */
function runOfA(n) {
  const ids = new Array(Math.floor(n / 4)).fill(AAAA);
  if (n % 4 >= 2) ids.push(AA);
  if (n % 2) ids.push(A);
  return ids;
}

test("a run of one letter merges from the left, on both sides of the long-piece path", () => {
  for (let n = 1; n <= 140; n++) assert.deepEqual(tokenizer.encode("a".repeat(n)), runOfA(n), `${n} a's`);
});

test("the lowest rank merges first, wherever it stands, in short and long pieces", () => {
  assert.deepEqual(tokenizer.encode("abc"), [A, BC]);
  assert.deepEqual(tokenizer.encode("abab"), [AB, AB]);
  for (const times of [1, 20, 21, 22, 40]) {
    assert.deepEqual(tokenizer.encode("abc".repeat(times)), new Array(times).fill([A, BC]).flat(), `abc x ${times}`);
  }
});

test("a piece that is itself a token is taken whole", () => {
  assert.deepEqual(tokenizer.encode("aaaa"), [AAAA]);
  assert.deepEqual(tokenizer.encode(" a"), [vocab["Ġ"], A]); // " a" is one piece, not one token
});

test("<|endoftext|> is one token only when special tokens are on", () => {
  assert.deepEqual(tokenizer.encode("a<|endoftext|>a"), [A, 200, A]);
  const plain = tokenizer.encode("a<|endoftext|>a", { special: false });
  assert.ok(!plain.includes(200));
  assert.equal(tokenizer.decode(plain), "a<|endoftext|>a");
  assert.equal(tokenizer.decode([200]), "<|endoftext|>");
  assert.equal(tokenizer.eotId, 200);
  assert.equal(tokenizer.vocabSize, 201); // the largest id, special or not, plus one
});

test("a character split across tokens decodes whole, and alone as U+FFFD", () => {
  const parts = [vocab["Ã"], vocab["©"]];
  assert.equal(tokenizer.decode(parts), "é");
  assert.equal(tokenizer.tokenText(parts[0]), "\ufffd");
  assert.deepEqual(tokenizer.encode("é"), [E_ACUTE]);
  assert.deepEqual(Array.from(tokenizer.tokenBytes(E_ACUTE)), [0xc3, 0xa9]);
  // a leading byte-order mark is text, kept by decode (tiktoken keeps it)
  assert.equal(tokenizer.decode([vocab["ï"], vocab["»"], vocab["¿"], A]), "\ufeffa");
});

test("tokenBytes gives a copy, and an id outside the vocabulary is refused", () => {
  const bytes = tokenizer.tokenBytes(AA);
  bytes[0] = 0;
  assert.deepEqual(Array.from(tokenizer.tokenBytes(AA)), [0x61, 0x61]);
  assert.throws(() => tokenizer.tokenBytes(150), RangeError);
  assert.throws(() => tokenizer.decode([A, 150]), /150/);
});

test("fromJSON takes GPT-2's kind of tokenizer.json, text or parsed, and refuses others", () => {
  const doc = {
    model: { type: "BPE", vocab },
    pre_tokenizer: { type: "ByteLevel" },
    added_tokens: [{ id: 200, content: "<|endoftext|>", special: true }, { id: 0, content: "<", special: false }],
  };
  for (const given of [doc, JSON.stringify(doc)]) {
    const t = Tokenizer.fromJSON(given);
    assert.deepEqual(t.encode("aab<|endoftext|>"), [AA, vocab.b, 200]);
    assert.equal(t.eotId, 200);
  }
  assert.throws(() => Tokenizer.fromJSON({ ...doc, model: { type: "WordPiece", vocab } }), /byte-level BPE/);
  assert.throws(() => Tokenizer.fromJSON({ ...doc, pre_tokenizer: { type: "Whitespace" } }), /byte-level BPE/);
});

test("past its cache's bound the tokenizer still gives the same ids", () => {
  const words = Array.from({ length: 10_050 }, (_, i) => i.toString(26).replace(/./g, (d) => LETTERS[parseInt(d, 26)]));
  const first = tokenizer.encode(words[7]);
  for (const w of words) tokenizer.encode(w);
  assert.deepEqual(tokenizer.encode(words[7]), first);
  assert.equal(tokenizer.decode(tokenizer.encode(words.slice(0, 300).join(" "))), words.slice(0, 300).join(" "));
});
