// web/app/server_wait.js's line under a tab's Run on choice, for the server's answers of each tab
// (/expected-wait and /expected-wait?tab=inside, playground/ui/serving/wait.py).
import assert from "node:assert/strict";
import { test } from "node:test";

import { SHOWN_FROM_S, TABS, waitLine } from "../server_wait.js";

test("a generation's wait is told before the first token, a heavy pass's before the pass is drawn", () => {
  assert.equal(waitLine({ expected_wait_s: 28, offer_browser: true }),
    "The server now: about 28 s before the first token (this browser starts in seconds).");
  assert.equal(waitLine({ expected_wait_s: 7.5, offer_browser: true, until: "the pass is drawn" }),
    "The server now: about 7.5 s before the pass is drawn (this browser starts in seconds).");
  assert.equal(waitLine({ expected_wait_s: 3.25, offer_browser: false, until: "the pass is drawn" }),
    "The server now: about 3.3 s before the pass is drawn.");
  assert.equal(waitLine({ expected_wait_s: null, offer_browser: true, until: "the pass is drawn" }),
    "The server now: a long wait, not moving lately (this browser starts in seconds).");
});

test("under a second is no wait, and no answer says nothing", () => {
  assert.equal(waitLine({ expected_wait_s: SHOWN_FROM_S - 0.01, offer_browser: false }), "");
  assert.notEqual(waitLine({ expected_wait_s: SHOWN_FROM_S, offer_browser: false }), "");
  assert.equal(waitLine(null), "");
});

test("each tab asks its own question of the server", () => {
  assert.equal(TABS.inside.query(), "tab=inside");
  assert.deepEqual(Object.keys(TABS), ["generation", "inside"]);
  assert.equal(TABS.inside.prefix, "ins");
  assert.equal(TABS.generation.prefix, "gen");
});
