// web/static/links.js at its edges: every kind of parameter at the ends of its range and one step
// past them, the parameters a link may carry that are no tab's, and a link written by linkTo read
// back by parseQuery. The specs are site.json's shape (deploy/static.py's link_params); the app's
// own reading of the same links is tests/lessons/test_links.py's, and both together tests/browser/test_static_links.py's.
import assert from "node:assert/strict";
import { test } from "node:test";

import { check, linkTo, parseQuery } from "../links.js";

const spec = (name, kind, more = {}) => ({ name, kind, minimum: null, maximum: null, min_inclusive: true, max_chars: 0,
  choices: [], even: false, max_count: 0, ...more });
const TEXT = spec("text", "text", { max_chars: 20 });
const LAYER = spec("layer", "int", { minimum: 0, maximum: 5 });
const D_MODEL = spec("d_model", "int", { minimum: 2, maximum: 1024, even: true });
const TOP_P = spec("top_p", "float", { minimum: 0, maximum: 1, min_inclusive: false });
const TEMPERATURE = spec("temperature", "float", { minimum: 0, maximum: 5 });
const SPECIAL = spec("special", "bool");
const SIZE = spec("size", "choice", { choices: ["tiny", "small"] });
const DIMS = spec("dims", "ints", { max_chars: 20, max_count: 3 });
const SPECS = { one: [TEXT, LAYER, TOP_P, SPECIAL], two: [D_MODEL, TEMPERATURE, SIZE, DIMS] };
const TABS = ["one", "two", "server"];

const refused = (param, raw) => {
  try {
    return `accepted ${JSON.stringify(check(param, raw))}`;
  } catch (err) {
    return err.message;
  }
};

test("whole numbers: both ends taken, one past each refused, even where it must be", () => {
  assert.equal(check(LAYER, "0"), 0);
  assert.equal(check(LAYER, "5"), 5);
  assert.equal(check(LAYER, " +5 "), 5);
  assert.equal(check(LAYER, "5.0"), 5); // an integral float, as validate_int takes it
  assert.equal(refused(LAYER, "6"), "layer must be from 0 to 5, not 6");
  assert.equal(refused(LAYER, "-1"), "layer must be from 0 to 5, not -1");
  assert.equal(refused(LAYER, "4.5"), "layer must be a whole number from 0 to 5, not 4.5");
  assert.equal(refused(LAYER, "inf"), "layer must be a whole number from 0 to 5, not inf");
  assert.equal(refused(LAYER, "two"), "layer must be a number, not 'two'");
  assert.equal(check(D_MODEL, "2"), 2);
  assert.equal(check(D_MODEL, "1024"), 1024);
  assert.equal(refused(D_MODEL, "1023"), "d_model must be even, from 2 to 1024, not 1023");
  assert.equal(refused(D_MODEL, "1026"), "d_model must be from 2 to 1024, not 1026");
});

test("numbers: an open end refuses the end itself, a closed one takes it", () => {
  assert.equal(check(TOP_P, "1"), 1);
  assert.equal(check(TOP_P, "1e-9"), 1e-9);
  assert.equal(refused(TOP_P, "0"), "top_p must be a number in (0, 1], not 0");
  assert.equal(refused(TOP_P, "1.0000001"), "top_p must be a number in (0, 1], not 1.0000001");
  assert.equal(check(TEMPERATURE, "0"), 0);
  assert.equal(check(TEMPERATURE, "5"), 5);
  assert.equal(refused(TEMPERATURE, "nan"), "temperature must be a number in [0, 5], not nan");
  assert.equal(refused(TEMPERATURE, "-inf"), "temperature must be a number in [0, 5], not -inf");
  assert.equal(refused(TEMPERATURE, "5.5"), "temperature must be a number in [0, 5], not 5.5");
});

test("text at exactly its limit in characters, emoji included", () => {
  assert.equal(check(TEXT, "😀".repeat(20)), "😀".repeat(20));
  assert.equal(refused(TEXT, "😀".repeat(21)), "text is 21 characters long; the limit is 20 characters");
  assert.equal(check(TEXT, "\ufeff"), "\ufeff"); // text to Python, not whitespace
});

test("a list of whole numbers at its count and length, and one past each", () => {
  assert.equal(check(DIMS, "[1 2,3]"), "1, 2, 3");
  assert.equal(refused(DIMS, "1, 2, 3, 4"), "dims: 4 numbers given; the limit is 3");
  assert.equal(check(DIMS, "1".repeat(20)), "1".repeat(20));
  assert.equal(refused(DIMS, "1".repeat(21)), "dims is 21 characters long; the limit is 20 characters");
  assert.equal(refused(DIMS, "1, x"), "dims: item 2 ('x') is not a whole number; type ids separated by commas or spaces, e.g. 31373, 2506");
  assert.equal(refused(DIMS, "[]"), "dims: no numbers found; type ids separated by commas or spaces, e.g. 31373, 2506");
  assert.equal(refused(DIMS, "\x85"), "dims is empty: type some text (1 to 20 characters)");
});

test("switches and choices take only their words", () => {
  for (const word of ["true", "1", "YES", " on "]) assert.equal(check(SPECIAL, word), true, word);
  for (const word of ["false", "0", "No", "off"]) assert.equal(check(SPECIAL, word), false, word);
  assert.equal(refused(SPECIAL, "maybe"), "special must be true or false, not 'maybe'");
  assert.equal(check(SIZE, "small"), "small");
  assert.equal(refused(SIZE, "Small"), "size must be one of 'tiny', 'small', not 'Small'");
});

test("a query: the tab's settings, the page's and Gradio's parameters left alone, the rest named", () => {
  const { tab, settings, messages } = parseQuery("?tab=one&layer=5&view=api&__theme=dark&colour=red&top_p=0", SPECS, TABS,
    { one: { top_p: 0.9 } });
  assert.equal(tab, "one");
  assert.deepEqual(settings, { layer: 5 });
  assert.deepEqual(messages, [
    "'colour' is not a setting of the one tab, left out (it takes text, layer, top_p, special)",
    "top_p must be a number in (0, 1], not 0, so the tab keeps its default (0.9)",
  ]);
  assert.deepEqual(parseQuery("?tab=server&x=1", SPECS, TABS).messages, ["'x' is not a setting of the server tab, left out (it takes no settings)"]);
  assert.deepEqual(parseQuery("?layer=2", SPECS, TABS), { tab: null, settings: {},
    messages: ["this link names no tab, so its layer was left out: add tab=one of one, two, server"] });
  assert.deepEqual(parseQuery("?tab=three", SPECS, TABS).messages, ["tab must be one of one, two, server, not 'three': the page opened on its first tab"]);
  assert.deepEqual(parseQuery("", SPECS, TABS), { tab: null, settings: {}, messages: [] });
});

test("a link written by linkTo reads back as the same settings, in the tab's order", () => {
  const settings = { special: false, layer: 0, text: "to be, or 😀 & ?", top_p: 1 };
  const url = linkTo("one", settings, SPECS, "https://example.org/page/?old=1#x");
  assert.ok(url.startsWith("https://example.org/page/?tab=one&text=to%20be%2C%20or%20"), url);
  assert.ok(!url.includes("+") && !url.includes("old="), url);
  const query = new URL(url).search;
  assert.deepEqual([...new URLSearchParams(query).keys()], ["tab", "text", "layer", "top_p", "special"]);
  assert.deepEqual(parseQuery(query, SPECS, TABS), { tab: "one", settings, messages: [] });
  assert.equal(new URL(linkTo("two", { size: "tiny", dims: null }, SPECS, "http://h/")).search, "?tab=two&size=tiny");
});
