// web/views/inside.js's requests for a token's rows, on their own: one at a time, the latest wish
// sent when the answer comes, nothing asked ahead while a token is awaited, and a request that
// is never answered asked again after a while. (What the view draws is checked in Chromium, by
// tests/browser/test_browser_inside.py and the static edition's tests.) The view runs on a stand-in
// element: the pending branch of its draw touches nothing else.
import assert from "node:assert/strict";
import { test } from "node:test";

import { mount } from "../inside.js";

function fakeRoot() {
  const timers = [];
  const win = {
    addEventListener() {},
    setTimeout: (fn, ms) => timers.push({ fn, ms }) && timers.length,
    clearTimeout: (id) => { if (id) timers[id - 1].fn = null; },
    requestAnimationFrame: (fn) => fn(),
  };
  const doc = { defaultView: win, head: { append() {} }, querySelectorAll: () => [], createElement: () => ({}) };
  const root = { ownerDocument: doc, dataset: {}, classList: { add() {} }, replaceChildren() {}, addEventListener() {} };
  return { root, timers };
}

/** A pass of `T` tokens whose data holds no token's rows: every token must be asked for. */
function pass(T = 8) {
  return { ids: Array.from({ length: T }, (_, i) => i), config: { n_layer: 1, n_head: 1 }, x0: [],
           layers: [{ x_out: [], gelu: [] }], lens: { top_ids: [[]] } };
}

/** Rows for token `t` only, as the app's answer brings them (no ids: rows of the pass shown). */
function rows(t) {
  const at = (v) => { const a = []; a[t] = v; return a; };
  return { x0: at([0]), layers: [{ x_out: at([0]), gelu: at([0]) }], lens: { top_ids: [at([1])] } };
}

function setUp() {
  const { root, timers } = fakeRoot();
  const asked = [];
  const view = mount(root, { request: (name, data) => asked.push({ name, ...data }) });
  return { root, timers, asked, view };
}

test("a token's rows are asked once, and the view says it waits for them", () => {
  const { root, asked, view } = setUp();
  view.update({ key: "k", data: pass(), state: { token: 3 } });
  assert.deepEqual(asked, [{ name: "rows", token: 3 }]);
  assert.equal(root.dataset.pending, "3");
  view.set({ token: 3 }); // the same token again: not asked twice while its request runs
  assert.equal(asked.length, 1);
});

test("while one request runs the later ones wait, and the latest is sent when its answer comes", () => {
  const { asked, view } = setUp();
  view.update({ key: "k", data: pass(), state: { token: 3 } });
  view.set({ token: 4 });
  view.set({ token: 5 });
  assert.deepEqual(asked.map((a) => a.token), [3], "a second request sent while the first ran");
  view.update({ key: "k", data: rows(3) }); // the first answer
  assert.deepEqual(asked.map((a) => a.token), [3, 5], "the latest wish, not the one in between, goes next");
  assert.equal(asked[1].ahead, undefined);
});

test("nothing is asked ahead while the token shown is awaited, even once its request counts as lost", () => {
  const { asked, view } = setUp();
  view.update({ key: "k", data: pass(), state: { token: 3 } });
  const realNow = performance.now;
  const later = realNow.call(performance) + 2500; // past RETRY_MS: the request for 3 counts as lost
  performance.now = () => later;
  try {
    view.prefetch(3);
  } finally {
    performance.now = realNow;
  }
  assert.deepEqual(asked.map((a) => a.token), [3], "tokens asked ahead of the one awaited");
});

test("a request never answered is asked again after a while, a few times at most", () => {
  const { timers, asked, view } = setUp();
  view.update({ key: "k", data: pass(), state: { token: 3 } });
  const realNow = performance.now;
  let now = realNow.call(performance);
  performance.now = () => now;
  try {
    for (let i = 0; i < 10; i++) {
      const timer = timers.findLast((t) => t.fn);
      if (!timer) break;
      now += timer.ms;
      const fn = timer.fn;
      timer.fn = null;
      fn();
    }
  } finally {
    performance.now = realNow;
  }
  const again = asked.filter((a) => a.token === 3).length;
  assert.ok(again >= 2, `asked ${again} time(s): a lost request was not asked again`);
  assert.ok(again <= 6, `asked ${again} times: the view kept asking`);
  assert.deepEqual(timers.map((t) => t.ms).slice(0, 3), [2000, 4000, 6000]);
});

test("another pass's rows are dropped, and its wish with them", () => {
  const { asked, view } = setUp();
  view.update({ key: "k", data: pass(), state: { token: 3 } });
  view.set({ token: 6 });
  view.update({ key: "other", data: pass(4), state: { token: 1 } }); // a new text's pass arrives
  assert.ok(!asked.some((a) => a.token === 6), "the old pass's wish was sent for the new one");
  assert.equal(asked.at(-1).token, 1);
});
