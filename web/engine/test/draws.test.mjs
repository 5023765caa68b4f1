// web/engine/draws.js on its own edges: slices of a stream, the seed's 32 bits, the limits of
// every argument. (The published vectors and the agreement with runtime/draws.py are
// tests/runtime/test_draws.py's.)
import assert from "node:assert/strict";
import { test } from "node:test";

import { STREAMS, integers, normal, uniform } from "../draws.js";

test("a slice starting at an odd draw is the slice of the whole stream", () => {
  const whole = uniform(3, STREAMS.sampling, 40);
  for (const start of [0, 1, 2, 7, 38, 39]) {
    assert.deepEqual(uniform(3, STREAMS.sampling, 40 - start, start), whole.subarray(start), `start ${start}`);
  }
  // normal j takes uniforms 2j and 2j + 1: a slice of normals is a slice too
  assert.deepEqual(normal(3, STREAMS.init, 5, 11), normal(3, STREAMS.init, 16).subarray(11));
});

test("no draw at all is an empty array, not an error", () => {
  assert.equal(uniform(0, 1, 0).length, 0);
  assert.equal(normal(0, 1, 0, 5).length, 0);
  assert.deepEqual(integers(0, 1, 0, 10), []);
});

test("the key takes the seed modulo 2**32, as the specification says", () => {
  assert.deepEqual(uniform(2 ** 32 + 5, 1, 8), uniform(5, 1, 8));
  assert.notDeepEqual(uniform(2 ** 32 - 1, 1, 8), uniform(0, 1, 8));
});

test("every argument at its largest legal value is drawn, one past it refused", () => {
  const last = 2 ** 32 - 1;
  assert.equal(uniform(0, last, 1, 0, last).length, 1); // stream and lane at 2**32 - 1
  assert.throws(() => uniform(0, 2 ** 32, 1), RangeError);
  assert.throws(() => uniform(0, 1, 1, 0, 2 ** 32), RangeError);
  // at most 2**53 draws per stream and lane (runtime/draws.py refuses past it too): the last one
  // is drawn, one more is refused, never a wrong index rounded in a double
  assert.equal(uniform(0, 1, 1, 2 ** 53 - 1).length, 1);
  assert.throws(() => uniform(0, 1, 2, 2 ** 53 - 1), RangeError);
  assert.throws(() => normal(0, 1, 1, 2 ** 52), RangeError); // its uniforms 2**53 and 2**53 + 1
});

test("a draw far along a stream is the one a short slice there gives", () => {
  // a block index past 2**32 fills the counter's second word
  const far = 2 ** 33 + 1;
  assert.deepEqual(uniform(9, 1, 3, far).subarray(1), uniform(9, 1, 2, far + 1));
});

test("negative, fractional or unsafe numbers are refused by name", () => {
  for (const [args, name] of [
    [[-1, 1, 1], "seed"], [[1.5, 1, 1], "seed"], [[2 ** 53, 1, 1], "seed"], [[0, -1, 1], "stream"],
    [[0, 1, 2.5], "n"], [[0, 1, 1, -3], "start"], [[0, 1, 1, 0, 0.5], "lane"], [[0, 1, NaN], "n"],
  ]) {
    assert.throws(() => uniform(...args), (err) => err instanceof RangeError && err.message.startsWith(name), String(args));
  }
});

test("whole numbers: every high from 1 to 2**32, within [0, high)", () => {
  assert.deepEqual(integers(4, 3, 50, 1), new Array(50).fill(0));
  const big = integers(4, 3, 200, 2 ** 32);
  assert.ok(big.every((k) => Number.isInteger(k) && k >= 0 && k < 2 ** 32));
  assert.ok(new Set(big).size > 190); // not stuck at a few values
  for (const high of [0, 2 ** 32 + 1, 2.5, -1]) assert.throws(() => integers(0, 1, 1, high), RangeError, String(high));
  const dice = integers(8, 3, 6000, 6);
  for (let k = 0; k < 6; k++) assert.ok(dice.filter((d) => d === k).length > 800, `face ${k}`);
});

test("normals are finite at the uniforms' ends", () => {
  const z = normal(0, 2, 20000);
  assert.ok(z.every(Number.isFinite));
  const mean = z.reduce((a, b) => a + b, 0) / z.length;
  assert.ok(Math.abs(mean) < 0.05, `mean ${mean}`);
});
