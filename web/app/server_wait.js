// The server's expected wait for a tab's server button, and the browser offered at once when it is
// long: Text generation's Generate (the first token) and Inside the model's Run (the pass). The
// server says it (<root>/expected-wait: its line and, for a generation, the decoding loop's turns,
// timed by its own steps: playground/ui/serving/wait.py); this page reads it while the tab's server
// button shows, shows it under the tab's Run on choice, and when the learner clicks the button with
// a wait the server calls long (offer_browser), holds the click and offers "Run it in this browser
// instead" beside "Wait for the server", the wait in words. run_on.js and inside_on.js start it.

export const POLL_MS = 10_000; // while the tab's server button shows and the page is visible
export const FRESH_MS = 20_000; // an answer older than this decides nothing at a click
export const SHOWN_FROM_S = 1; // a wait under this is no wait: nothing shown

/** The tabs whose server button waits: the elements by id prefix, and the question asked. */
export const TABS = {
  generation: {
    prefix: "gen",
    query: () => `precision=${encodeURIComponent(document.querySelector("#gen-precision input:checked")?.value || "full")}`,
  },
  inside: { prefix: "ins", query: () => "tab=inside" },
};

/** The line under the Run on choice for an answer of /expected-wait ("" when there is no wait). */
export function waitLine(answer) {
  if (!answer) return "";
  const s = answer.expected_wait_s;
  if (s !== null && s < SHOWN_FROM_S) return "";
  const until = answer.until || "the first token";
  const when = s === null ? "a long wait, not moving lately" : `about ${s < 10 ? s.toFixed(1) : Math.round(s)} s before ${until}`;
  return `The server now: ${when}${answer.offer_browser ? " (this browser starts in seconds)" : ""}.`;
}

const states = new Map(); // tab name -> its state

/**
 * Start reading the wait of `tab` (TABS' name; once per page and tab). `url(path)`: an address
 * under the app's root; `runHere()`: what "Run it in this browser instead" does (the tab's browser
 * mode, then its own button).
 */
export function watchWait({ url, runHere, tab = "generation" }) {
  if (states.has(tab)) return;
  const { prefix, query } = TABS[tab];
  const ids = { run: `#${prefix}-run`, anchor: `#${prefix}-run-on`, line: `${prefix}-server-wait`, offer: `${prefix}-wait-offer`,
    error: `#${prefix}-error` };
  const state = { url, runHere, query, ids, answer: null, at: -Infinity, pending: null, bypass: false };
  states.set(tab, state);
  const mine = (e) => e.target.closest?.(ids.run);
  document.addEventListener("focusin", (e) => { if (mine(e)) refresh(tab); }, true);
  document.addEventListener("pointerdown", (e) => { if (mine(e)) refresh(tab); }, true);
  document.addEventListener("click", (e) => held(state, e), true); // before Gradio's own listener on the button
  const poll = () => { if (document.visibilityState === "visible" && shown(ids.run)) refresh(tab); };
  setInterval(poll, POLL_MS);
  poll();
}

function shown(selector) {
  const button = document.querySelector(selector);
  return Boolean(button && button.offsetParent !== null);
}

/** Ask the server now for `tab`'s wait (one question at a time); resolves to its answer, or null. */
export function refresh(tab = "generation") {
  const state = states.get(tab);
  if (!state) return Promise.resolve(null);
  state.pending ??= fetch(state.url(`expected-wait?${state.query()}`), { cache: "no-store" })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null)
    .then((answer) => {
      state.pending = null;
      if (answer) {
        state.answer = answer;
        state.at = performance.now();
        show(state, answer);
      }
      return answer;
    });
  return state.pending;
}

function show(state, answer) {
  let line = document.getElementById(state.ids.line);
  const text = waitLine(answer);
  if (!line) {
    const anchor = document.querySelector(state.ids.anchor);
    if (!anchor) return;
    line = document.createElement("div");
    line.id = state.ids.line;
    line.className = "pg-server-wait";
    line.setAttribute("role", "status");
    anchor.after(line);
  }
  line.textContent = text;
  line.hidden = !text;
  line.dataset.waitS = answer.expected_wait_s === null ? "" : String(answer.expected_wait_s);
  line.dataset.offer = String(Boolean(answer.offer_browser));
}

function held(state, e) {
  const button = e.target.closest?.(state.ids.run);
  if (!button) return;
  if (state.bypass) { // "Wait for the server": this click goes on to the server
    state.bypass = false;
    return;
  }
  const answer = state.answer;
  if (!answer || !answer.offer_browser || performance.now() - state.at > FRESH_MS) return;
  e.stopImmediatePropagation();
  e.preventDefault();
  offer(state, button, answer);
}

function offer(state, button, answer) {
  document.getElementById(state.ids.offer)?.remove();
  const box = document.createElement("div");
  box.id = state.ids.offer;
  box.className = "pg-wait-offer";
  box.setAttribute("role", "alert");
  const words = document.createElement("p");
  words.textContent = `${answer.words} In this browser the model starts in seconds, whatever the server's line.`;
  const here = document.createElement("button");
  here.type = "button";
  here.className = "pg-run-here";
  here.textContent = "Run it in this browser instead";
  const wait = document.createElement("button");
  wait.type = "button";
  wait.className = "pg-wait-server";
  wait.textContent = "Wait for the server";
  here.addEventListener("click", () => { box.remove(); state.runHere(); });
  wait.addEventListener("click", () => { box.remove(); state.bypass = true; button.click(); });
  box.append(words, here, wait);
  (document.querySelector(state.ids.error) || button).before(box);
  here.focus();
}
