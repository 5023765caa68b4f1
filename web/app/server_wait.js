// The server's expected wait for the Text generation tab's Generate, and the browser offered at
// once when it is long. The server says it (<root>/expected-wait: its line and the decoding loop's
// turns, timed by its own steps: playground/ui/serving/wait.py); this page reads it while the
// server's Generate shows, shows it under the Run on choice, and when the learner clicks Generate
// with a wait the server calls long (offer_browser), holds the click and offers "Run it in this
// browser instead" beside "Wait for the server", the wait in words. run_on.js starts it.

export const POLL_MS = 10_000; // while the server's Generate shows and the page is visible
export const FRESH_MS = 20_000; // an answer older than this decides nothing at a click
export const SHOWN_FROM_S = 1; // a wait under this is no wait: nothing shown

/** The line under the Run on choice for an answer of /expected-wait ("" when there is no wait). */
export function waitLine(answer) {
  if (!answer) return "";
  const s = answer.expected_wait_s;
  if (s !== null && s < SHOWN_FROM_S) return "";
  const when = s === null ? "a long wait, not moving lately" : `about ${s < 10 ? s.toFixed(1) : Math.round(s)} s before the first token`;
  return `The server now: ${when}${answer.offer_browser ? " (this browser starts in seconds)" : ""}.`;
}

let state = null;

/**
 * Start reading the wait (once per page). `url(path)`: an address under the app's root;
 * `runHere()`: what "Run it in this browser instead" does (the tab's browser mode, then its Generate).
 */
export function watchWait({ url, runHere }) {
  if (state) return;
  state = { url, runHere, answer: null, at: -Infinity, pending: null, bypass: false };
  document.addEventListener("focusin", (e) => { if (e.target.closest?.("#gen-run")) refresh(); }, true);
  document.addEventListener("pointerdown", (e) => { if (e.target.closest?.("#gen-run")) refresh(); }, true);
  document.addEventListener("click", held, true); // before Gradio's own listener on the button
  const poll = () => { if (document.visibilityState === "visible" && serverGenerateShown()) refresh(); };
  setInterval(poll, POLL_MS);
  poll();
}

function serverGenerateShown() {
  const button = document.querySelector("#gen-run");
  return Boolean(button && button.offsetParent !== null);
}

function precision() {
  return document.querySelector("#gen-precision input:checked")?.value || "full";
}

/** Ask the server now (one question at a time); resolves to its answer, or null. */
export function refresh() {
  if (!state) return Promise.resolve(null);
  state.pending ??= fetch(state.url(`expected-wait?precision=${encodeURIComponent(precision())}`), { cache: "no-store" })
    .then((r) => (r.ok ? r.json() : null))
    .catch(() => null)
    .then((answer) => {
      state.pending = null;
      if (answer) {
        state.answer = answer;
        state.at = performance.now();
        show(answer);
      }
      return answer;
    });
  return state.pending;
}

function show(answer) {
  let line = document.querySelector("#gen-server-wait");
  const text = waitLine(answer);
  if (!line) {
    const anchor = document.querySelector("#gen-run-on");
    if (!anchor) return;
    line = document.createElement("div");
    line.id = "gen-server-wait";
    line.className = "pg-server-wait";
    line.setAttribute("role", "status");
    anchor.after(line);
  }
  line.textContent = text;
  line.hidden = !text;
  line.dataset.waitS = answer.expected_wait_s === null ? "" : String(answer.expected_wait_s);
  line.dataset.offer = String(Boolean(answer.offer_browser));
}

function held(e) {
  const button = e.target.closest?.("#gen-run");
  if (!button || !state) return;
  if (state.bypass) { // "Wait for the server": this click goes on to the server
    state.bypass = false;
    return;
  }
  const answer = state.answer;
  if (!answer || !answer.offer_browser || performance.now() - state.at > FRESH_MS) return;
  e.stopImmediatePropagation();
  e.preventDefault();
  offer(button, answer);
}

function offer(button, answer) {
  document.querySelector("#gen-wait-offer")?.remove();
  const box = document.createElement("div");
  box.id = "gen-wait-offer";
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
  (document.querySelector("#gen-error") || button).before(box);
  here.focus();
}
