// Compare, in the static edition: the trained model beside its untrained start, both computed in
// this browser on Inside's stage graph (engine/compare.js; the untrained weights drawn here, from
// the app's seed, as the app draws them), checked and worded as the app's tab
// (playground/compare.py), drawn by the view both editions share (../views/compare.js).

import { InputError, sentence as asSentence, textIds } from "../checks.js";
import { attentionSide, embeddingTable, nextSide } from "../engine/compare.js";
import { fetchJSON } from "../engine/fetch.js";
import { tokenLabel } from "../views/labels.js";
import { mount as mountView } from "../views/compare.js";
import { EmbeddingIndex, arithmetic } from "./embeddings.js";

export async function mount(root, ctx) {
  const { el, site, linked } = ctx;
  const d = site.defaults.compare;
  const L = site.limits;
  const { n_layer: nLayer, n_head: nHead, block_size: blockSize } = site.model;
  // The prompt runs through the stage graph, which computes every stage of the pass: the Inside
  // tab's limit, not the app's context (docs/browser.md).
  const promptTokens = Math.min(L.MAX_INSIDE_TOKENS, blockSize);
  const sentenceTokens = Math.min(L.MAX_ATTENTION_TOKENS, blockSize);

  const prompt = el("textarea", { id: "cmp-prompt", rows: 2, "aria-label": "Prompt" });
  prompt.value = linked?.text ?? d.text;
  const word = el("input", { type: "text", id: "cmp-word", "aria-label": "Word", value: linked?.word ?? d.word });
  const sentenceBox = el("textarea", { id: "cmp-sentence", rows: 1, "aria-label": "Sentence" }); // a link's sentence may hold a line break
  sentenceBox.value = linked?.sentence ?? d.sentence;
  const picker = (id, label, n) => {
    const select = el("select", { id }, ...Array.from({ length: n }, (_, i) => el("option", { value: String(i) }, String(i))));
    return { select, box: el("div", { class: "att-pick" }, el("label", { for: id }, label), select) };
  };
  const layer = picker("cmp-layer", `Layer (0–${nLayer - 1})`, nLayer);
  const head = picker("cmp-head", `Head (0–${nHead - 1})`, nHead);
  const button = (id, text) => el("button", { class: "pg-btn primary", type: "button", id }, text);
  // One mount of the shared view per comparison, each below its own inputs, as the app places them.
  const section = (key, name) => {
    const box = el("div", { class: "cmp-result", id: `cmp-${key}-view` });
    return { box, view: mountView(box, { edition: "static", config: { section: name } }),
      error: el("div", { class: "pg-error", id: `cmp-${key}-error`, role: "alert", hidden: true }) };
  };
  const next = section("next", "next");
  const nb = section("nb", "neighbours");
  const att = section("att", "attention");
  const runNext = button("cmp-next-run", "Compare next tokens");
  const runNb = button("cmp-nb-run", "Compare neighbours");
  const runAtt = button("cmp-att-run", "Compare attention");
  const info = el("div", { class: "pg-note", id: "cmp-info" }, "Loading the trained weights and drawing the untrained ones in this browser…");

  root.append(
    info,
    el("h3", {}, "The same prompt: which token comes next?"),
    el("div", { class: "pg-row" },
      el("div", { class: "pg-col", style: "flex: 3 1 320px" },
        el("label", { for: "cmp-prompt" }, `Prompt (up to ${promptTokens} tokens here)`), prompt, next.error),
      el("div", { class: "pg-col cmp-go" }, runNext)),
    next.box,
    el("h3", {}, "The same word: its nearest tokens in the embedding table"),
    el("div", { class: "pg-row" },
      el("div", { class: "pg-col", style: "flex: 3 1 320px" },
        el("label", { for: "cmp-word" }, "Word (or an expression such as king - man + woman)"), word, nb.error),
      el("div", { class: "pg-col cmp-go" }, runNb)),
    nb.box,
    el("h3", {}, "The same sentence: what each token attends to"),
    el("div", { class: "pg-row" },
      el("div", { class: "pg-col", style: "flex: 3 1 320px" }, el("label", { for: "cmp-sentence" }, "Sentence"), sentenceBox, att.error),
      el("div", { class: "pg-col att-controls", style: "flex: 1 1 240px" },
        el("div", { class: "att-picks" }, layer.box, head.box), el("div", { style: "margin-top: 8px" }, runAtt))),
    att.box,
  );

  let sides = null; // [{model, inside, index}], trained first
  let tokenizer = null;
  const shown = { next: null, neighbours: null, attention: null }; // the data objects drawn, for the tests and the curious
  const attPasses = { key: null, passes: null };
  // As the app's tab opens (its sliders), whatever sentence a link brings: on the trained model's
  // clearest head on the tab's own sentence, which the export measured with the app's weights
  // (site.json; the page's 8-bit ones may order two near-equal heads the other way), but for the
  // layer or head a link names.
  layer.select.value = String(linked?.layer ?? d.layer);
  head.select.value = String(linked?.head ?? d.head);
  const runs = { next: 0, nb: 0, att: 0 };

  function fail(s, err) {
    if (!(err instanceof InputError)) console.error(err);
    s.error.hidden = false;
    s.error.textContent = asSentence(err.message);
    if (s.box.dataset.shown) {
      s.error.append(" The result below is from the last input that worked.");
      s.box.classList.add("pg-stale");
    }
  }

  function done(s, which) {
    s.error.hidden = true;
    s.box.classList.remove("pg-stale");
    s.box.dataset.shown = "true";
    s.box.dataset.done = String(which);
    window.pgCompare = shown;
  }

  async function compareNext() {
    if (!sides) return;
    const which = ++runs.next;
    try {
      const ids = textIds(tokenizer, prompt.value, L.MAX_ATTENTION_CHARS, promptTokens, "prompt");
      const passes = [];
      for (const s of sides) passes.push(await s.inside.pass(ids));
      if (which !== runs.next) return; // a newer request has the page
      const vocab = site.model.vocab_size;
      shown.next = {
        prompt: prompt.value, ids, vocab_size: vocab, uniform_loss: Math.log(vocab),
        sides: sides.map((s, i) => nextSide(s.model, passes[i], embeddingTable(s.inside), d.top_k)),
      };
      next.view.update(shown.next);
      done(next, which);
    } catch (err) {
      fail(next, err);
    }
  }

  function compareNeighbours() {
    if (!sides) return;
    const which = ++runs.nb;
    try {
      const results = sides.map((s) => arithmetic(s.index, word.value, d.neighbours_k, true, true));
      shown.neighbours = { word: word.value, sides: sides.map((s, i) => ({ model: s.model, formula: results[i].formula, neighbours: results[i].neighbours })) };
      nb.view.update(shown.neighbours);
      done(nb, which);
    } catch (err) {
      fail(nb, err);
    }
  }

  async function compareAttention() {
    if (!sides) return;
    const which = ++runs.att;
    try {
      const ids = textIds(tokenizer, sentenceBox.value, L.MAX_ATTENTION_CHARS, sentenceTokens);
      if (attPasses.key !== ids.join()) {
        const passes = [];
        for (const s of sides) passes.push(await s.inside.pass(ids));
        if (which !== runs.att) return;
        Object.assign(attPasses, { key: ids.join(), passes });
      }
      const passes = attPasses.passes;
      const [l, h] = [Number(layer.select.value), Number(head.select.value)];
      shown.attention = {
        sentence: sentenceBox.value, ids, tokens: ids.map((id) => tokenLabel(tokenizer.tokenText(id))), layer: l, head: h,
        sides: sides.map((s, i) => attentionSide(s.model, passes[i], l, h)),
      };
      att.view.update(shown.attention);
      done(att, which);
    } catch (err) {
      fail(att, err);
    }
  }

  runNext.addEventListener("click", compareNext);
  prompt.addEventListener("keydown", (e) => e.key === "Enter" && (e.ctrlKey || e.metaKey) && compareNext());
  runNb.addEventListener("click", compareNeighbours);
  word.addEventListener("keydown", (e) => e.key === "Enter" && compareNeighbours());
  runAtt.addEventListener("click", compareAttention);
  sentenceBox.addEventListener("keydown", (e) => e.key === "Enter" && (e.ctrlKey || e.metaKey) && compareAttention());
  for (const p of [layer, head]) p.select.addEventListener("change", compareAttention);

  // Not awaited: the page is ready (and Copy link works) while the weights download and draw.
  const t0 = performance.now();
  const drawing = (p) => { info.textContent = `Drawing the untrained weights in this browser, as the app draws them: ${Math.round(100 * p.drawn / p.total)} %…`; };
  Promise.all([ctx.inside(), ctx.untrained(drawing), fetchJSON(site.files["data/embeddings.json"])]).then(async ([trained, untrained, seen]) => {
    tokenizer = trained.tokenizer;
    const index = (inside) => new EmbeddingIndex({ rows: embeddingTable(inside), ids: seen.ids, counts: seen.counts, d_model: seen.d_model, byId: true }, tokenizer, L);
    sides = [{ model: untrained.labels[0], inside: trained }, { model: untrained.labels[1], inside: untrained }].map((s) => ({ ...s, index: index(s.inside) }));
    info.textContent = `Both models are in this browser (${((performance.now() - t0) / 1000).toFixed(1)} s): the trained one's 8-bit weights, `
      + `and its untrained start drawn from seed ${untrained.seed}, the same float32 weights as the app's.`;
    root.dataset.ready = "true";
    compareNeighbours();
    await compareNext();
    await compareAttention();
  }, (err) => {
    console.error(err);
    info.textContent = "";
    fail(next, new Error(`The models could not be loaded in this browser: ${err.message}`));
  });
  return {
    settings: () => ({ text: prompt.value, word: word.value, sentence: sentenceBox.value, layer: Number(layer.select.value), head: Number(head.select.value) }),
  };
}
