"""Links on the page: a "Copy link" button beside every tab's lesson sentence, and a page opened from such a
link (``/?tab=inside&text=...&layer=2&head=3``) showing that tab with those settings.

The page itself stays the same for every address (serving/page_cache.py builds it once): the link
is applied when the page loads, by one event that reads the page's query (``gr.Request``), checks
it (playground/links.py), selects the tab and sets its controls, then presses the tab's own button
in the browser, so that each tab's own handler draws the result. The Copy link button builds the
address in the browser from the controls' current values and copies it."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping
from typing import Any

import gradio as gr

from model import GPTConfig

from .. import links
from .common import LIGHT, LIGHT_CONCURRENCY, user_errors
from .widgets import lesson_line

__all__ = ["Links", "CSS", "RUN", "READY"]

# The buttons whose click draws a tab's result once its controls are set (the tabs not listed
# redraw on a control's change by themselves, or have nothing to run: a generation or a training
# run is the learner's to start).
RUN: dict[str, tuple[str, ...]] = {
    "embeddings": ("emb-run",),
    "positional": ("pe-run",),
    "attention": ("att-run",),
    "inside": ("ins-run",),
    "compare": ("cmp-next-run", "cmp-nb-run", "cmp-att-run"),
}
# What shows that a tab's opening figures (drawn when it first opens) have arrived: the link's
# run waits for them, or they could land after it and replace its result.
READY: dict[str, str] = {"attention": "#att-lines .att-lines", "inside": "#ins-map .ins-box"}
# Controls that the tab's run sets itself (the Inside tab's run shows the last token): set after
# the run has redrawn them, recognised by their label, which the run writes and the link empties.
AFTER_RUN: dict[str, tuple[str, str]] = {"inside": ("token", "ins-token")}
ERROR_SLOTS: dict[str, str] = {"inside": "#ins-error"}
WAITING_LABEL = "Token …"

CSS = """
/* The lesson sentence, Copy link at its right (on a phone under it, at its right end); the link
   it gives under that line, taking no room until then. */
.pg-lesson-line { align-items: flex-start; gap: 12px; flex-wrap: nowrap; }
.pg-lesson-line > .pg-lesson { flex: 1 1 auto; min-width: 0; }
.pg-lesson-line > .pg-copy-link { flex: 0 0 auto; width: auto; margin-top: 2px; }
.pg-link-out:not(:has(.pg-link-url)) { display: none !important; }
.pg-link-out .pg-link-status { font-size: 0.9em; margin-right: 6px; color: var(--body-text-color-subdued); }
.pg-link-out input.pg-link-url { width: 100%; max-width: 100%; font: 0.85em var(--font-mono); padding: 2px 6px;
  border: 1px solid var(--border-color-primary); border-radius: 4px; background: var(--background-fill-secondary); }
#pg-link-note .pg-link-msgs { border: 1px solid #fcd34d; border-left: 4px solid #d97706; background: #fffbeb; color: #78350f;
  border-radius: 6px; padding: 6px 10px; font-size: 0.92em; }
.dark #pg-link-note .pg-link-msgs { background: #451a03; color: #fde68a; border-color: #b45309; }
#pg-link-note .pg-link-msgs ul { margin: 2px 0 0 1.2em; padding: 0; }
"""

# In the browser, on the button's click: the address of the tab with the controls' values, shown
# (to select by hand where the clipboard is refused: plain http, an old browser) and copied.
COPY_JS = """
(...values) => {
  const names = __NAMES__, out = document.querySelector('#__OUT__');
  const query = new URLSearchParams([['tab', '__TAB__']]);
  names.forEach((name, i) => {
    const v = values[i];
    if (v !== null && v !== undefined && v !== '') query.append(name, String(v));
  });
  const link = location.origin + location.pathname + '?' + query.toString();
  const show = (status) => {
    const label = document.createElement('span');
    label.className = 'pg-link-status';
    label.textContent = status;
    const box = document.createElement('input');
    box.className = 'pg-link-url'; box.readOnly = true; box.value = link;
    box.setAttribute('aria-label', 'Link to this tab with these settings');
    box.addEventListener('focus', () => box.select());
    out.replaceChildren(label, box);
    return box;
  };
  const byHand = () => { const box = show('Select the link and copy it:'); box.focus(); box.select(); };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(link).then(() => show('Copied ✓'), byHand);
  else byHand();
  return [];
}
"""

# After the link's settings are set: open the tab's first figures, press its buttons, then set
# what the run itself resets. The plan is the data the load event wrote into the note.
APPLY_JS = """
async (note) => {
  const holder = document.createElement('div');
  holder.innerHTML = note || '';
  const el = holder.querySelector('[data-plan]');
  if (!el) return [];
  const plan = JSON.parse(el.dataset.plan);
  const until = async (test, ms = 60000) => {
    const start = Date.now();
    while (!test()) {
      if (Date.now() - start > ms) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
    return true;
  };
  if (plan.ready) await until(() => document.querySelector(plan.ready));
  for (const id of plan.run) {
    if (await until(() => document.querySelector('#' + id))) document.querySelector('#' + id).click();
  }
  if (plan.after) {
    const {id, value, waiting, error} = plan.after;
    const label = () => document.querySelector('#' + id + ' [data-testid="block-info"], #' + id + ' label');
    const failed = () => error && document.querySelector(error + ' .pg-error-msg');
    await until(() => failed() || (label() && !label().textContent.includes(waiting)));
    const box = document.querySelector('#' + id + ' input[type=number]');
    if (!failed() && box) {
      box.value = String(value);
      box.dispatchEvent(new Event('input', {bubbles: true}));
      box.dispatchEvent(new FocusEvent('blur'));
    }
  }
  return [];
}
"""


def _bounds(component: Any) -> tuple[float, float] | None:
    lo, hi = getattr(component, "minimum", None), getattr(component, "maximum", None)
    return None if lo is None and hi is None else (lo, hi)


def note_html(link: links.Link, plan: Mapping[str, Any] | None) -> str:
    """What the note above the tabs shows of a link: the values it could not use, and (hidden)
    the plan the page's script follows."""
    attr = f' data-plan="{html.escape(json.dumps(plan), quote=True)}"' if plan else ""
    if not link.messages:
        return f"<div{attr}></div>"
    items = "".join(f"<li>{html.escape(m)}</li>" for m in link.messages)
    return f'<div class="pg-link-msgs" role="status"{attr}><b>This link could not be followed in full:</b><ul>{items}</ul></div>'


class Links:
    """The links of a page: create it where the link's messages should appear (above the tabs),
    build each tab through :meth:`tab`, then :meth:`wire` once the tabs exist. ``config``: the
    shown model's (a link's layer and head are checked against its size)."""

    def __init__(self, config: GPTConfig) -> None:
        self.config = config
        self.note = gr.HTML("", elem_id="pg-link-note", padding=False)
        self.controls: dict[str, dict[str, Any]] = {}

    def tab(self, tab: str, build: Callable[[], Mapping[str, Any] | None]) -> Any:
        """The tab's content, ``build()``, which returns its controls by parameter name
        (playground/links.py's names), its Copy link button at the right of its lesson sentence
        (the link it gives shows under that line); returns what ``build()`` returned."""
        button = gr.Button("Copy link", size="sm", scale=0, min_width=110, elem_id=f"{tab}-copy-link",
                           elem_classes="pg-copy-link", render=False)
        out = gr.HTML("", elem_id=f"{tab}-link", elem_classes="pg-link-out", padding=False, render=False)
        with lesson_line(beside=[button], below=[out]):
            built = build()
        controls = dict(built or {})
        names = [p.name for p in links.params(tab) if p.name in controls]
        self.controls[tab] = {name: controls[name] for name in names}
        js = COPY_JS.replace("__NAMES__", json.dumps(names)).replace("__OUT__", f"{tab}-link").replace("__TAB__", tab)
        button.click(None, inputs=[controls[n] for n in names], outputs=None, js=js, api_visibility="private", queue=False)
        return built

    def parse(self, query: Mapping[str, Any]) -> links.Link:
        """The page's query checked against the tabs' own controls' ranges and defaults."""
        return links.parse_query(
            query,
            shape=links.Shape.of(self.config),
            bounds=lambda tab: {n: b for n, c in self.controls.get(tab, {}).items() if (b := _bounds(c)) is not None},
            defaults=lambda tab: {n: c.value for n, c in self.controls.get(tab, {}).items()},
        )

    def wire(self, demo: gr.Blocks, tabs: gr.Tabs) -> None:
        """On every page load: the link in the page's address, if any, applied."""
        order = [(tab, name, component) for tab, controls in self.controls.items() for name, component in controls.items()]

        def apply(request: gr.Request):
            query = dict(request.query_params) if request is not None else {}
            link = self.parse(query) if query else links.Link()
            if link.tab is None and not link.messages:
                return (gr.skip(),) * (2 + len(order))
            plan = None
            updates = []
            for tab, name, _ in order:
                if tab != link.tab or name not in link.settings:
                    updates.append(gr.skip())
                elif AFTER_RUN.get(tab, ("",))[0] == name:
                    updates.append(gr.update(label=WAITING_LABEL))  # the run writes it again
                else:
                    updates.append(gr.update(value=link.settings[name]))
            if link.tab is not None:
                after = AFTER_RUN.get(link.tab)
                plan = {
                    "tab": link.tab,
                    "run": list(RUN.get(link.tab, ())),
                    "ready": READY.get(link.tab),
                    "after": {"id": after[1], "value": link.settings[after[0]], "waiting": WAITING_LABEL,
                              "error": ERROR_SLOTS.get(link.tab)} if after and after[0] in link.settings else None,
                }
            selected = gr.Tabs(selected=link.tab) if link.tab else gr.skip()
            return (selected, note_html(link, plan), *updates)

        demo.load(
            user_errors(apply), None, [tabs, self.note, *(c for _, _, c in order)], api_visibility="private",
            concurrency_id=LIGHT, concurrency_limit=LIGHT_CONCURRENCY, show_progress="hidden",
        ).then(None, [self.note], None, js=APPLY_JS, api_visibility="private", queue=False)
