"""The browser engine (web/engine/engine.js) under Node.js, with onnxruntime-web's WebAssembly as a
page runs it, against the server's engine (runtime/) on the same 8-bit file: greedy and seeded ids
where the context fills up and shifts, and a prompt longer than the context."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from export import hub_dir
from model import get_tokenizer
from runtime.engine import Engine
from runtime.generate import generate
from runtime.params import SamplingParams
from static_site import npm_ci

WEB_TESTS = Path(__file__).resolve().parents[1] / "web"


def run_engine(hub: Path, requests: list[dict]) -> list[dict]:
    npm_ci()
    doc = {"model": str(hub / "onnx" / "model_quantized.onnx"), "tokenizer": str(hub / "tokenizer.json"),
           "config": str(hub / "config.json"), "requests": requests}
    proc = subprocess.run(["node", str(WEB_TESTS / "engine_greedy.mjs")], input=json.dumps(doc), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def server(shipped_onnx) -> Engine:
    return Engine.load(shipped_onnx["quantized"], provider="cpu")


def corpus_ids(n: int) -> list[int]:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    return get_tokenizer().encode(text)[:n]


def step_gap(server: Engine, prompt: list[int], params: SamplingParams, index: int) -> float:
    """How far, relative to the total, the server's uniform of token ``index`` (its last sample's)
    falls from the nearest step of the draw's running weight."""
    import numpy as np

    from runtime import draws
    from runtime.batching import Request
    from runtime.generate import decode
    from runtime.sampling import ranked

    request = Request.new(np.array(prompt), params, server.block_size)
    for i, step in enumerate(decode(server, request)):
        if i == index:
            lane = params.num_samples - 1
            _, cdf = ranked(step.logits[lane], params.temperature, params.top_k, params.top_p)
            at = draws.uniform(params.seed, draws.SAMPLING, 1, i, lane)[0] * cdf[-1]
            return float(np.min(np.abs(cdf - at)) / cdf[-1])
    raise AssertionError(f"no step {index}")


def test_the_context_shifts_as_the_servers_does(server):
    """A 240-token prompt and 40 new tokens cross block_size (256): both engines drop the oldest
    tokens and read the rest anew at the same step, so the ids stay the same after it. Seeded with a
    top-k or top-p cut, the browser writes what the server writes on the same file (the seed
    contract: docs/browser.md). Without a cut the two may part only where a draw falls among the
    tail's tokens, within the rounding of the logits (WebAssembly's kernels against native ones) of
    a step between two tokens: where they part, the server's uniform lies within 1e-5 of the total
    from a step, never clear of one."""
    block = server.block_size
    cases = [
        (corpus_ids(block - 16), dict(max_new_tokens=40, temperature=0, stop_at_eot=False)),
        (corpus_ids(block + 30), dict(max_new_tokens=12, temperature=0, stop_at_eot=False)),  # the prompt itself too long
        (corpus_ids(block - 8), dict(max_new_tokens=24, temperature=0.9, top_k=40, top_p=0.9, seed=3, stop_at_eot=False)),
        (corpus_ids(12), dict(max_new_tokens=64, temperature=1.0, top_k=0, top_p=1.0, seed=5, stop_at_eot=False)),
        (corpus_ids(12), dict(max_new_tokens=64, temperature=1.0, top_k=0, top_p=1.0, seed=5, sample=1, stop_at_eot=False)),
    ]
    got = run_engine(hub_dir(), [{"prompt": p, "settings": s} for p, s in cases])
    for (prompt, s), js in zip(cases, got):
        top_k, top_p = s.get("top_k") or None, s.get("top_p") if s.get("top_p", 1.0) < 1 else None
        samples = s.get("sample", 0) + 1  # sample s of several: the server's row s
        params = SamplingParams(s["max_new_tokens"], temperature=s["temperature"], top_k=top_k, top_p=top_p,
                                seed=s.get("seed", 0), num_samples=samples, stop_at_eot=False)
        served = generate(server, prompt, params)
        served = served[-1] if samples > 1 else served
        if top_k is None and top_p is None and s["temperature"]:
            parted = next((i for i, (a, b) in enumerate(zip(js["ids"], served)) if a != b), None)
            if parted is not None:
                assert js["ids"][:parted] == served[:parted] and step_gap(server, prompt, params, parted) < 1e-5, (s, parted)
                continue
        assert js["ids"] == served, s
    assert any("context is full" in n for n in got[0]["notices"])
    assert any("the first 30 were dropped" in n for n in got[1]["notices"])


def test_streamed_pieces_add_up_to_the_text_when_a_character_spans_tokens(tmp_path):
    """A character whose bytes are split over tokens shows as U+FFFD until its last byte: the
    pieces the page appends hold it back, so they always add up to the text."""
    from export.hf_tokenizer import tokenizer_json

    enc = get_tokenizer()
    text = " naïve 🎭 café 你好!"
    tokens = enc.encode(text)
    partial = [t for t in tokens if "\ufffd" in enc.decode([t])]
    assert partial, "the text must hold a character split over tokens"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(tokenizer_json(), ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run(["node", str(WEB_TESTS / "engine_pieces.mjs")], input=json.dumps({"tokenizer": str(path), "tokens": tokens}),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = json.loads(proc.stdout)
    assert len(steps) == len(tokens)
    joined = ""
    for step in steps:
        joined += step["piece"]
        assert step["text"].startswith(joined)
        assert "\ufffd" not in joined
    assert joined == steps[-1]["text"] == text
