"""Where the browser's model comes from: the Hub's copy of the 8-bit file where a model repository is
named (the Space's bandwidth spared), the Space's when the Hub cannot give that very file. The
address and the page's config (playground/hub_link.py, serving/browser_files.py); the fallback in
the engine's fetch (web/engine/fetch.js, fetchVerified) run by Node.js against local servers standing
in for the Hub: up with the file, unreachable, answering an error, never answering, serving
another version of it. (In headless Chromium through the app: tests/browser/test_browser_run_on.py.)"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from playground import hub_link

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "web" / "sources.mjs"
FILE = os.urandom(200_000)
OTHER = os.urandom(200_000)  # another version of it: same name, other bytes


class StandIn(BaseHTTPRequestHandler):
    """Serves /good (the file), /other (other bytes), /missing (404) and /silent (no answer),
    with the Hub's CORS header; counts what it was asked."""

    asked: list[str] = []
    release = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 -- http.server's name
        StandIn.asked.append(self.path)
        path = self.path.split("?")[0]
        if path == "/silent":
            StandIn.release.wait(30)
            return
        body = {"/good": FILE, "/other": OTHER}.get(path)
        self.send_response(200 if body else 404)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def stand_in():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    StandIn.release.set()
    server.shutdown()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # (closed again: nothing listens there)


def fetch_cases(cases: list[list[str]], timeout_ms: int = 500) -> list[dict]:
    from static_site import npm_ci

    npm_ci()
    doc = {"digest": hashlib.sha256(FILE).hexdigest(), "headersTimeoutMs": timeout_ms, "cases": cases}
    proc = subprocess.run(["node", str(SCRIPT)], input=json.dumps(doc), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_hub_address_is_the_repositorys_8_bit_file_on_its_main_branch():
    assert hub_link.model_address("someone/gpt-playground") == (
        "https://huggingface.co/someone/gpt-playground/resolve/main/onnx/model_quantized.onnx")
    assert hub_link.model_address("a/b", "http://127.0.0.1:8080") == "http://127.0.0.1:8080/a/b/resolve/main/onnx/model_quantized.onnx"


@pytest.mark.parametrize("raw, want", [("", hub_link.HUB_URL), ("http://127.0.0.1:9/", "http://127.0.0.1:9"),
                                       ("https://hf-mirror.example", "https://hf-mirror.example"),
                                       ("javascript:alert(1)", hub_link.HUB_URL), ("https://x.example/path", hub_link.HUB_URL)])
def test_the_hub_may_be_moved_to_an_address_of_a_host_and_nothing_else(raw, want, caplog):
    with caplog.at_level(logging.WARNING, "playground"):
        assert hub_link.hub_url({hub_link.HUB_URL_ENV: raw}) == want
    assert (hub_link.HUB_URL_ENV in caplog.text) == (want == hub_link.HUB_URL and bool(raw))


def test_the_pages_config_lists_the_hub_first_then_the_spaces_copy_with_its_digest(shipped_onnx, monkeypatch):
    from playground.ui import generation
    from playground.ui.serving.browser_files import BrowserFiles

    files = BrowserFiles.for_model(shipped_onnx)
    digest = hashlib.sha256(Path(shipped_onnx["quantized"]).read_bytes()).hexdigest()
    assert "modelSources" not in files.page_config()  # no repository named: the Space's copy only
    monkeypatch.setenv("PLAYGROUND_MODEL_REPO", "someone/gpt-playground")
    config = json.loads(generation.run_on_js(files)["mount"].split("m.mount(element, ", 1)[1].rsplit("))", 1)[0])
    assert config["modelSources"] == ["https://huggingface.co/someone/gpt-playground/resolve/main/onnx/model_quantized.onnx",
                                      config["model"]]
    assert config["model"].endswith(f"model/model_quantized.onnx?v={digest[:16]}") and config["modelSha256"] == digest


def test_the_first_source_with_the_very_file_is_used_and_the_spaces_copy_when_the_hub_cannot_give_it(stand_in):
    space = f"{stand_in}/good?space"  # the Space's copy, which the page's own host always has
    down = f"http://127.0.0.1:{closed_port()}/model"
    StandIn.asked.clear()
    got = fetch_cases([
        [f"{stand_in}/good", space],  # the Hub up: its copy, the Space not asked
        [down, space],  # unreachable
        [f"{stand_in}/missing", space],  # an error (404)
        [f"{stand_in}/silent", space],  # no answer within the headers' timeout
        [f"{stand_in}/other", space],  # another version of the file: not used
        [down, f"{stand_in}/other"],  # nothing gives this file: an error naming each source
    ])
    assert got[0] == {"source": f"{stand_in}/good", "skipped": [], "bytes": len(FILE)}
    assert StandIn.asked[0] == "/good"
    for case, why in zip(got[1:5], ("fetch failed", "HTTP 404", "no answer within 0.5 s", "another file")):
        assert case["source"] == space and case["bytes"] == len(FILE), case
        assert len(case["skipped"]) == 1 and why in case["skipped"][0], case
    assert "could not be had from" in got[5]["error"] and down in got[5]["error"] and "another file" in got[5]["error"]
