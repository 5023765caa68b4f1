"""Web views, the mechanism (playground/ui/web_view.py, playground/wire.py, web/views/wire.js,
serving/browser_files.py): numbers packed by Python reach a view as the same numbers (Node.js
unpacking what Python packed: float32 exactly, attention weights within a 16-bit step, a causal
matrix's upper triangle 0), the views are served from the app's fixed list with revalidation
whether or not the page can run the model itself, nothing else under /browser/views/ is, and a
view's component names its module and its custom events. The views themselves are checked in
the browser by their tabs' tests (tests/browser/test_browser_inside.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import numpy as np

from playground import wire
from playground.ui.serving import browser_files
from playground.ui.serving.browser_files import REVALIDATE, BrowserFiles, BrowserFileServer
from test_byte_budget import _ask, _nothing

WEB_TESTS = Path(__file__).resolve().parents[1] / "web"


def test_what_python_packs_a_view_unpacks_to_the_same_numbers():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3, 5)).astype(np.float32) * 30
    weights = np.tril(rng.random((2, 4, 4)))
    weights /= weights.sum(-1, keepdims=True)  # causal rows that sum to 1, as a softmax gives
    value = {"v": vectors, "rows": wire.Sparse(4, {1: vectors[1], 3: [np.float32(0.5)]}), "w": wire.Unit(weights, tril=True),
             "full": wire.Unit(weights), "ids": np.array([3, 50256]), "n": np.int64(7), "text": "⋅the ↵", "nothing": None}
    packed = wire.encode(value)
    text = wire.pack(value)
    assert json.loads(text) == packed and isinstance(text, str)  # one string: Gradio's page keeps it as one node
    assert "$f32" in text and "$u16" in text and "$at" in text and len(text) < 2000
    proc = subprocess.run(["node", str(WEB_TESTS / "wire_decode.mjs")], input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = wire.plain(value)
    assert got["v"] == want["v"] and got["rows"] == want["rows"]  # float32: the same numbers, bit for bit
    assert got["rows"][0] is None and got["rows"][2] is None and got["rows"][3] == [0.5]  # a row where given, None elsewhere
    assert got["ids"] == [3, 50256] and got["n"] == 7 and got["text"] == "⋅the ↵" and got["nothing"] is None
    for key in ("w", "full"):
        w = np.array(got[key])
        assert w.shape == weights.shape
        assert np.abs(w - weights).max() <= 0.5 / wire.UNIT_STEPS + 1e-12
        assert np.all(w[:, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]] == 0)
    # the triangle alone travels: about half the bytes of the whole matrices
    assert len(packed["w"]["$u16"]) < 0.7 * len(packed["full"]["$u16"])


def test_the_views_are_served_from_the_fixed_list_even_where_the_model_cannot_run_in_the_page(tmp_path):
    files = BrowserFiles.for_model({})  # no 8-bit file: "Run on: this browser" is off
    assert not files.available
    views = sorted(r for r in files.files if r.startswith("/browser/views/"))
    on_disk = sorted(f"/browser/views/{p.name}" for p in browser_files.VIEWS_DIR.iterdir() if p.suffix in (".js", ".css"))
    assert views == on_disk and "/browser/views/inside.js" in views and "/browser/views/wire.js" in views
    assert files.view_url("inside.js") == "browser/views/inside.js" and files.view_url("nothing.js") is None
    server = BrowserFileServer(_nothing, files)

    async def asks():
        status, headers, body = await _ask(server, "/browser/views/wire.js", "10.0.0.1")
        assert status == 200 and body == (browser_files.VIEWS_DIR / "wire.js").read_bytes()
        assert headers[b"cache-control"] == REVALIDATE.encode() and headers[b"content-type"].startswith(b"text/javascript")
        again = await _ask(server, "/browser/views/wire.js", "10.0.0.1", {"If-None-Match": headers[b"etag"].decode()})
        assert again[0] == 304
        for route in ("/browser/views/", "/browser/views/../engine/engine.js", "/browser/views/wire.js.map",
                      "/browser/views/inside.py", "/browser/views/%2e%2e/app.py"):
            assert (await _ask(server, route, "10.0.0.1"))[0] == 404, route

    asyncio.run(asks())


def test_a_view_component_names_its_module_and_its_events():
    from playground.ui.web_view import call_view, web_view

    files = BrowserFiles.for_model({})
    view = web_view("inside", files, elem_id="v-test", events=["need"], controls={"layer": "v-layer"}, render=False)
    assert '"browser/views/inside.js"' in view.js_on_load and '"browser/views/wire.js"' in view.js_on_load
    assert callable(view.need)  # a custom event: its name quoted in the script, as Gradio lists them
    js = call_view("v-test", "set", ["layer", "head"])
    assert js.startswith("(a0, a1) =>") and '"layer": a0' in js and "set(" in js
