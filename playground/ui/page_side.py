"""The JavaScript of a tab's "Run on: this browser" events: the tab's page side (a module of
web/app/, served at ``<root>/browser/<name>.js``) imported the way Gradio's page reaches the app's
root (a proxy may move it), mounted in the tab's browser panel, told the Run on radio's mode. Each
tab (Text generation, Inside the model, Watch it learn) adds its own events to what
:func:`page_side_js` gives."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["module_js", "page_side_js"]

_MODULE = (
    "import(new URL({path}, (window.gradio_config && window.gradio_config.root"
    " ? window.gradio_config.root.replace(/\\/?$/, '/') : new URL('.', location.href).href)).href)"
)


def module_js(path: str) -> str:
    """A JavaScript expression: the promise of the module at ``path`` (relative to the app's root)."""
    return _MODULE.format(path=json.dumps(path))


def page_side_js(path: str, config: dict[str, Any], body_class: str, what: str) -> dict[str, str]:
    """``module`` (its import), ``config`` (JSON), ``mount`` (the panel's ``js_on_load``: ``mount(element,
    config)``, or ``what`` "could not start" in the panel) and ``mode`` (the Run on radio's change:
    ``body_class`` on the page's body while this browser is chosen, then ``setMode(mode, config)``)."""
    module, data = module_js(path), json.dumps(config)
    return {
        "module": module,
        "config": data,
        "mount": f"{module}.then((m) => m.mount(element, {data}))"
                 f".catch((e) => {{ element.textContent = {json.dumps(what + ' could not start: ')} + e.message; }});",
        "mode": f"(mode) => {{ document.body.classList.toggle({json.dumps(body_class)}, mode === 'browser'); "
                f"{module}.then((m) => m.setMode(mode, {data})); }}",
    }
