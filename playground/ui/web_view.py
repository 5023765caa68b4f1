"""A web view in a Gradio tab: one of the modules of ``web/views/`` (the same file the static
edition draws with) mounted in a ``gr.HTML``, drawing what the tab's Python handlers compute.

:func:`web_view` builds the component. Its value is the view's data (packed by
:mod:`playground.wire`: float32 arrays as bytes, unpacked in the page by ``web/views/wire.js``):
every handler that outputs to it hands the view new data, which the view's ``update`` takes. The
view talks back through its host: ``host.request(name, data)`` is a custom event of the component
(listed in ``events``; wire a handler with ``getattr(view, name)(fn, inputs, outputs)``, its
``gr.EventData`` carrying ``data``), ``host.choose(name, value)`` sets the tab's Gradio control
``controls[name]`` (a slider's number box, as a learner types it, so its own events follow), and
:func:`call_view` is the JavaScript of a Gradio event that tells the view something without the
server (a slider's ``input``). The module is served by serving/browser_files.py under
``<root>/browser/views/``. docs/browser.md, "Web views", gives the contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr

from .common import static_text
from .serving.browser_files import BrowserFiles

__all__ = ["web_view", "call_view", "TEMPLATE", "MOUNT_JS"]

TEMPLATE = '<div class="pg-web-view"></div>'  # never re-rendered: the view draws inside it
MOUNT_JS = static_text("web_view.js")


def web_view(name: str, files: BrowserFiles, *, elem_id: str, value: Any = None, events: Sequence[str] = (),
             controls: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None, **kwargs: Any) -> gr.HTML:
    """The view ``web/views/<name>.js`` in a ``gr.HTML`` with id ``elem_id`` (the page's
    ``window.pgViews[elem_id]`` once mounted). ``events``: the names the view's ``host.request``
    sends; ``controls``: the view's control names -> the elem_id of the Gradio control that
    ``host.choose`` sets; ``config``: JSON the view reads as ``host.config``."""
    module, wire = files.view_url(f"{name}.js"), files.view_url("wire.js")
    if module is None or wire is None:
        raise FileNotFoundError(f"web/views/{name}.js or wire.js is not served: the app's file list has no such view")
    spec = {"id": elem_id, "module": module, "wire": wire, "events": list(events), "controls": dict(controls or {}),
            "config": dict(config or {})}
    # The event names appear quoted in the script: Gradio's HTML lists a component's custom events so.
    js = MOUNT_JS.replace("__SPEC__", json.dumps(spec))
    return gr.HTML(value=value, html_template=TEMPLATE, js_on_load=js, elem_id=elem_id, padding=False, **kwargs)


def call_view(elem_id: str, method: str, names: Sequence[str]) -> str:
    """The JavaScript of an event that calls ``window.pgViews[elem_id][method]({name: value, ...})``
    with the event's inputs (one per name), in the page alone."""
    args = ", ".join(f"a{i}" for i in range(len(names)))
    fields = ", ".join(f"{json.dumps(n)}: a{i}" for i, n in enumerate(names))
    return (f"({args}) => {{ const v = (window.pgViews || {{}})[{json.dumps(elem_id)}]; "
            f"if (v) v.{method}({{{fields}}}); return []; }}")
