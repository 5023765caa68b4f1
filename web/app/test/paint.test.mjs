// web/app/paint.js: a cheap paint keeps the ten paints a second; a dear one spaces the next so
// that painting is at most a seventh of the time, and never more than a second apart.
import assert from "node:assert/strict";
import { test } from "node:test";

import { MAX_PAINT_MS, PAINT_MS, PAINT_SHARE, nextPaintAfter } from "../paint.js";

test("a paint cheaper than a sixth of PAINT_MS keeps the page's ten paints a second", () => {
  assert.equal(PAINT_MS, 100);
  for (const cost of [0, 1, 10, PAINT_MS / PAINT_SHARE]) assert.equal(nextPaintAfter(cost), PAINT_MS);
  assert.equal(nextPaintAfter(-3), PAINT_MS); // a clock that went backwards
});

test("a dearer paint waits six times its cost: painting at most a seventh of the time", () => {
  for (const cost of [26, 50, 120, MAX_PAINT_MS / PAINT_SHARE]) {
    const wait = nextPaintAfter(cost);
    assert.equal(PAINT_SHARE, 6);
    assert.equal(wait, PAINT_SHARE * cost);
    assert.ok(cost / (cost + wait) <= 1 / 7 + 1e-12, `${cost} ms of paint every ${cost + wait} ms`);
  }
});

test("however dear a paint, the next comes within a second: the text grows, Stop is taken", () => {
  assert.equal(MAX_PAINT_MS, 1000);
  for (const cost of [167, 900, 5_000, Infinity]) assert.equal(nextPaintAfter(cost), MAX_PAINT_MS);
});
