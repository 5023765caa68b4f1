"""The exported folder (artifacts/hub/) in the clients people use, with no project code: plain
onnxruntime, transformers, Hugging Face Optimum (its own venv: it needs transformers < 4.58),
onnxruntime-web and transformers.js under Node.js (npm ci of package.json), and transformers.js in
headless Chromium from a page served on 127.0.0.1. Every client must produce the greedy ids our
onnxruntime engine produces for the files it is meant to run (native clients: all three ONNX
files; onnxruntime-web and transformers.js: model.onnx and model_quantized.onnx, the "fp32" and "q8"
files; model_int8.onnx is the native CPU file, docs/export.md), and a left-padded batch must give
each prompt what it gives alone.

The slow tests set up their client once (a venv and an npm install under gitignored folders,
reused by later runs) and run it in a subprocess or a browser.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
import torch

from export import ensure_onnx, hub_dir
from model import get_tokenizer, load_pretrained
from runtime.engine import Engine
from runtime.generate import generate
from runtime.params import SamplingParams
from static_site import npm_ci

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = Path(__file__).resolve().parents[1] / "clients"
CACHE = ROOT / ".cache" / "clients"  # gitignored: the Optimum venv
PROMPTS = ["ROMEO:", "JULIET:\nO Romeo, Romeo! wherefore art thou"]
N_TOKENS = 24
FILES = {"fp32": "onnx/model.onnx", "quantized": "onnx/model_quantized.onnx", "int8": "onnx/model_int8.onnx"}
WEB_FILES = ("fp32", "quantized")  # transformers.js dtype "fp32" and "q8": the files for browsers
DTYPES = {"fp32": "fp32", "quantized": "q8"}  # transformers.js's name of each (tests/clients/greedy.mjs)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="session")
def hub() -> Path:
    ensure_onnx()  # artifacts/hub/, built if missing or stale (as the app does)
    return hub_dir()


@pytest.fixture(scope="session")
def prompt_ids() -> list[list[int]]:
    return [get_tokenizer().encode(p) for p in PROMPTS]


@pytest.fixture(scope="session")
def engine_ids(hub, prompt_ids) -> dict[str, list[list[int]]]:
    """Our engine's greedy ids per file and prompt: what every client must reproduce."""
    out = {}
    for key, name in FILES.items():
        engine = Engine.load(hub / name, provider="cpu")
        out[key] = [generate(engine, ids, SamplingParams(N_TOKENS, stop_at_eot=False)) for ids in prompt_ids]
    assert out["fp32"][0] != out["fp32"][1]  # two prompts that really continue differently
    return out


def run_json(cmd: list[str], timeout: int = 600, **kwargs) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert proc.returncode == 0, f"{cmd[:2]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- plain onnxruntime and transformers (the project's own environment) ------------------------


def test_plain_onnxruntime_gives_the_engines_ids(hub, prompt_ids, engine_ids):
    """The model card's onnxruntime loop, written out: only the graph, its inputs and numpy."""
    import onnxruntime as ort

    for key, name in FILES.items():
        sess = ort.InferenceSession(str(hub / name), providers=["CPUExecutionProvider"])
        pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
        for ids, expected in zip(prompt_ids, engine_ids[key]):
            feeds = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts}
            x, seen, out = np.array([ids]), 0, []
            for _ in range(N_TOKENS):
                n = x.shape[1]
                logits, *present = sess.run(None, {"input_ids": x, "attention_mask": np.ones((1, seen + n), np.int64),
                                                   "position_ids": np.arange(seen, seen + n)[None], **feeds})
                feeds, seen = {i.name: p for i, p in zip(pasts, present)}, seen + n
                x = logits[:, -1:].argmax(-1)
                out.append(int(x[0, 0]))
            assert out == expected, key


def test_transformers_loads_the_folder(hub, prompt_ids, engine_ids):
    """GPT2LMHeadModel.from_pretrained on the folder (model.safetensors, float32) and its tokenizer:
    the same ids, logits and greedy continuation as our PyTorch model and fp32 engine."""
    from transformers import AutoTokenizer, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(hub)
    model = GPT2LMHeadModel.from_pretrained(hub).eval()
    assert next(model.parameters()).dtype == torch.float32
    assert [tok(p)["input_ids"] for p in PROMPTS] == prompt_ids
    ours = load_pretrained()
    with torch.no_grad():
        x = torch.tensor([prompt_ids[1]])
        torch.testing.assert_close(model(x).logits, ours(x)[0], atol=1e-4, rtol=0)
        for ids, expected in zip(prompt_ids, engine_ids["fp32"]):
            x = torch.tensor([ids])
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=N_TOKENS, min_new_tokens=N_TOKENS, do_sample=False)
            assert out[0, len(ids):].tolist() == expected
        # a left-padded batch through the folder's tokenizer (padding_side left): each row as alone
        batch = tok(PROMPTS, return_tensors="pt", padding=True)
        assert batch["attention_mask"][0, 0] == 0  # the short prompt is padded on the left
        out = model.generate(**batch, max_new_tokens=N_TOKENS, min_new_tokens=N_TOKENS, do_sample=False)
    assert out[:, batch["input_ids"].shape[1]:].tolist() == engine_ids["fp32"]


# --- Optimum, in its own venv -------------------------------------------------------------------


@pytest.fixture(scope="session")
def optimum_python() -> Path:
    """A venv with optimum-onnx (tests/clients/requirements-optimum.txt), made once under .cache/."""
    requirements = CLIENTS / "requirements-optimum.txt"
    venv = CACHE / "optimum-venv"
    python = venv / "bin" / "python"
    stamp = venv / "requirements.sha256"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    if not (python.is_file() and stamp.is_file() and stamp.read_text() == digest):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(requirements)],
                              capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0, f"pip install -r {requirements.name} failed:\n{proc.stderr[-3000:]}"
        stamp.write_text(digest)
    return python


@pytest.mark.slow
def test_optimum_loads_the_folder_without_legacy_path(hub, optimum_python, prompt_ids, engine_ids):
    """ORTModelForCausalLM.from_pretrained(folder, subfolder="onnx", file_name=...): no legacy
    warning, position_ids and attention_mask are real inputs, the engine's greedy ids, and a
    left-padded batch generates for each prompt what it generates alone."""
    result = run_json([str(optimum_python), str(CLIENTS / "optimum_generate.py"), str(hub), str(N_TOKENS), *PROMPTS],
                      cwd=ROOT)
    assert "legacy" not in result["log"].lower(), result["log"]
    assert result["prompt_ids"] == prompt_ids
    for key, name in FILES.items():
        got = result[Path(name).name]
        assert got["inputs"][:3] == ["input_ids", "attention_mask", "position_ids"] and got["use_cache"]
        assert got["padding"][0][0] == 0, "the batch must really be left-padded"
        assert got["alone"] == engine_ids[key], key
        assert got["batch"] == got["alone"], f"{key}: a padded row must generate what it generates alone"


# --- JavaScript: onnxruntime-web and transformers.js -------------------------------------------


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """``npm ci`` of package.json / package-lock.json, once (tests/static_site.py)."""
    return npm_ci()


@pytest.mark.slow
def test_onnxruntime_web_wasm_gives_the_native_ids(hub, node_modules, prompt_ids, engine_ids):
    """onnxruntime-web's WebAssembly build (what a browser page runs) on the fp32 and the 8-bit
    weight-only file: the ids of native onnxruntime. model_quantized.onnx computes in float32 on
    weights folded at load, so the browser agrees with native as it does on fp32."""
    files = [str(hub / FILES[key]) for key in WEB_FILES]
    result = run_json(["node", str(CLIENTS / "ort_web_greedy.mjs"), str(N_TOKENS), json.dumps(prompt_ids), *files], cwd=ROOT)
    for key in WEB_FILES:
        assert result[str(hub / FILES[key])]["ids"] == engine_ids[key], key


@pytest.mark.slow
def test_transformers_js_in_node(hub, node_modules, prompt_ids, engine_ids):
    """transformers.js (onnxruntime-node) with dtype fp32 (onnx/model.onnx), q8
    (onnx/model_quantized.onnx) and int8 (onnx/model_int8.onnx, natively as fast as it gets):
    its tokenizer, the engine's greedy ids, a padded batch exact."""
    result = run_json(["node", str(CLIENTS / "transformers_node.mjs"), str(hub), str(N_TOKENS), *PROMPTS], cwd=ROOT)
    assert result["prompt_ids"] == prompt_ids
    for key, dtype in {**DTYPES, "int8": "int8"}.items():
        assert result[dtype]["alone"] == engine_ids[key], dtype
        assert result[dtype]["padding"][0][0] == 0
        assert result[dtype]["batch"] == result[dtype]["alone"], dtype


class _Files(http.server.SimpleHTTPRequestHandler):
    """Serves /page.html, /clients/, /transformers/, /ort/ and /models/gpt-playground/ from local folders."""

    routes: dict[str, Path] = {}
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript", ".wasm": "application/wasm"}

    def translate_path(self, path: str) -> str:
        path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        for prefix, folder in self.routes.items():
            if path.startswith(prefix):
                target = (folder / path[len(prefix):]).resolve()
                if target.is_relative_to(folder.resolve()):
                    return str(target)
        return str(ROOT / "nonexistent")

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.mark.slow
def test_transformers_js_in_chromium(hub, node_modules, prompt_ids, engine_ids, tmp_path):
    """A page on 127.0.0.1 runs transformers.js with onnxruntime-web's WebAssembly, all files
    served locally (no CDN): the engine's greedy ids for both files, a padded batch exact."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    handler = type("Files", (_Files,), {"routes": {
        "/page.html": CLIENTS / "browser.html",
        "/clients/": CLIENTS,
        "/transformers/": node_modules / "@huggingface" / "transformers" / "dist",
        "/ort/": node_modules / "onnxruntime-web" / "dist",
        "/models/gpt-playground/": hub,
    }})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    outside: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            base = f"http://127.0.0.1:{server.server_port}"
            page.on("request", lambda r: None if r.url.startswith((base, "data:", "blob:")) else outside.append(r.url))
            query = urllib.parse.urlencode({"prompts": json.dumps(PROMPTS), "tokens": N_TOKENS})
            page.goto(f"{base}/page.html?{query}")
            page.wait_for_function("window.result !== undefined", timeout=300_000)
            result = page.evaluate("window.result")
            browser.close()
    finally:
        server.shutdown()
    assert "error" not in result, result.get("error")
    assert not outside, f"the page fetched from outside 127.0.0.1: {outside}"
    assert result["prompt_ids"] == prompt_ids
    for key, dtype in DTYPES.items():
        assert result[dtype]["alone"] == engine_ids[key], dtype
        assert result[dtype]["padding"][0][0] == 0 and result[dtype]["batch"] == result[dtype]["alone"], dtype
