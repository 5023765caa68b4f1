// web/static/checks.js at its edges: a text exactly at its limit (counted in code points, as
// Python's len() counts), the whitespace Python's strip() takes, and Python's repr and "g" format
// where JavaScript's own would write another thing. The expected strings are what Python 3 writes.
import assert from "node:assert/strict";
import { test } from "node:test";

import { InputError, describe, pyG, pyLength, pyRepr, pyStrip, readInt, sentence, validateText, wrap } from "../checks.js";

const refusal = (run) => {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof InputError, `not an InputError: ${err}`);
    return err.message;
  }
  assert.fail("accepted");
};

test("a text of exactly the limit is accepted, in characters however many UTF-16 units", () => {
  for (const ch of ["a", "é", "😀", "𝔸"]) {
    assert.equal(validateText(ch.repeat(5), "text", 5), ch.repeat(5), ch);
    assert.equal(refusal(() => validateText(ch.repeat(6), "text", 5)), "text is 6 characters long; the limit is 5 characters");
  }
  assert.equal(refusal(() => validateText("x".repeat(20_001), "text", 20_000)), "text is 20,001 characters long; the limit is 20,000 characters");
  assert.equal(pyLength("a😀\ud800"), 3); // a lone surrogate is one character, as in Python
});

test("empty means empty to Python's strip(): U+FEFF is text, U+001C and U+0085 are space", () => {
  const empty = "text is empty: type some text (1 to 9 characters)";
  for (const blank of ["", " ", "\t\n\r", "\x0b\x0c", "\x1c\x1d\x1e\x1f", "\x85", "\xa0\u2000\u3000", "\u2028\u2029"]) {
    assert.equal(refusal(() => validateText(blank, "text", 9)), empty, JSON.stringify(blank));
  }
  assert.equal(validateText("\ufeff", "text", 9), "\ufeff");
  assert.equal(pyStrip("\ufeff a \x1c"), "\ufeff a");
  assert.equal(pyStrip(" \u200b "), "\u200b"); // a zero-width space is not whitespace to Python
});

test("a control character or lone surrogate is placed by its character, not its UTF-16 unit", () => {
  assert.equal(refusal(() => validateText("😀😀\x00", "text", 9)),
    "text contains the control character U+0000 at character 2: only printable text, tabs and newlines are accepted");
  assert.equal(refusal(() => validateText("😀\udc00", "text", 9)),
    "text contains a lone surrogate U+DC00 at character 1: only valid Unicode text is accepted");
  assert.equal(validateText("tab\there\r\nend", "text", 99), "tab\there\r\nend");
});

test("repr quotes and escapes as Python's does", () => {
  const cases = [
    ["plain", "'plain'"], ["it's", `"it's"`], [`it's "x"`, `'it\\'s "x"'`], ["tab\there", "'tab\\there'"],
    ["back\\slash", "'back\\\\slash'"], ["\x00\x7f", "'\\x00\\x7f'"], ["a\u200bb", "'a\\u200bb'"], ["\u2028", "'\\u2028'"],
    ["\xa0", "'\\xa0'"], ["\ue000", "'\\ue000'"], ["\u{e0001}", "'\\U000e0001'"], ["\ud800", "'\\ud800'"],
    ["😀 é", "'😀 é'"],
  ];
  for (const [text, python] of cases) assert.equal(pyRepr(text), python, JSON.stringify(text));
});

test("describe cuts a long value to 40 characters, never through an emoji", () => {
  assert.equal(describe("x".repeat(38)), `'${"x".repeat(38)}'`); // exactly 40: kept whole
  assert.equal(describe("x".repeat(39)), `'${"x".repeat(36)}...`);
  assert.equal(describe("😀".repeat(50)), `'${"😀".repeat(36)}...`);
});

test("format g as Python writes it, at the switches to exponents", () => {
  const cases = [
    [1e-4, "0.0001"], [9.999995e-5, "0.0001"], [1e-5, "1e-05"], [0.00012345678, "0.000123457"], [123456, "123456"],
    [999999, "999999"], [999999.5, "1e+06"], [1234567, "1.23457e+06"], [1e16, "1e+16"], [100000, "100000"],
    [2.5, "2.5"], [-0, "-0"], [0, "0"], [NaN, "nan"], [Infinity, "inf"], [-Infinity, "-inf"], [-1.5e-7, "-1.5e-07"],
  ];
  for (const [x, python] of cases) assert.equal(pyG(x), python, String(x));
});

test("a whole-number setting takes both ends and refuses one past them", () => {
  assert.equal(readInt(" 0 ", "layer", 0, 5), 0);
  assert.equal(readInt("5", "layer", 0, 5), 5);
  assert.equal(refusal(() => readInt("6", "layer", 0, 5)), "layer must be from 0 to 5, not 6");
  assert.equal(refusal(() => readInt("-1", "layer", 0, 5)), "layer must be from 0 to 5, not -1");
  assert.equal(refusal(() => readInt("2.5", "layer", 0, 5)), "layer must be a whole number from 0 to 5, not 2.5");
  assert.equal(refusal(() => readInt("", "layer", 0, 5)), "layer must be a number, not ''");
});

test("a message reads as a sentence, and a title wraps at 40 characters", () => {
  assert.equal(sentence("text is empty"), "Text is empty.");
  assert.equal(sentence("'x' is unknown!"), "'x' is unknown!");
  assert.equal(sentence("top_k must be from 1 to 50"), "top_k must be from 1 to 50."); // not a word: kept as written
  const line = "a".repeat(20);
  assert.equal(wrap(`${line} ${line}`), `${line}<br>${line}`); // 41 characters: two lines
  assert.equal(wrap(`${line} ${"b".repeat(19)}`), `${line} ${"b".repeat(19)}`); // 40: one
});
