"""``python app.py --model DIR`` on small random 2-layer checkpoints of every format
(tests/model_dirs.py): the folder is recognised, its ONNX exported (or a hub folder's own loaded),
every endpoint answers with the model's sizes, generation follows its weights, and a browser
visits every tab, which says which model it shows."""

from __future__ import annotations

import json
import re

import pytest
import torch

from model_dirs import FORMATS, LEARNED, RUN, make_model_dirs
from playground.model_source import ModelSourceError, describe, resolve

EXPECTED = {"run": ("run", RUN), "converted": ("run", LEARNED), "hf": ("hf", LEARNED), "hub": ("hub", RUN)}


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    return make_model_dirs(tmp_path_factory.mktemp("model_dirs"))


@pytest.fixture(scope="session")
def models_cache(tmp_path_factory, model_dirs):
    """Converted weights and ONNX exports of these folders go here, not into artifacts/."""
    return tmp_path_factory.mktemp("models_cache")


@pytest.fixture(autouse=True)
def _cache_env(monkeypatch, models_cache):
    monkeypatch.setenv("PLAYGROUND_MODELS_DIR", str(models_cache))


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_recognised_with_its_sizes(model_dirs, fmt):
    source = resolve(model_dirs[fmt])
    kind, config = EXPECTED[fmt]
    assert source.kind == kind
    got = source.config
    assert (got.n_layer, got.n_head, got.d_model, got.block_size) == (config.n_layer, config.n_head, config.d_model, config.block_size)
    # A Hugging Face / hub folder has learned positions (GPT-2's wpe; a sinusoidal table is baked in).
    assert got.pos_encoding == (config.pos_encoding if fmt in ("run", "converted") else "learned")
    line = describe(source)
    assert source.name in line and f"{config.n_layer} layers" in line and f"d_model {config.d_model}" in line
    if fmt == "hub":
        assert source.name.endswith("/hub") and source.onnx_dir == model_dirs["hub"]


def test_hf_weights_convert_to_the_same_network(model_dirs):
    """The converted folder computes what the Hugging Face folder's source computed."""
    from model import load_pretrained

    ids = torch.tensor([[31373, 2506, 11, 703]])
    ours = load_pretrained(resolve(model_dirs["hf"]).weights_dir)(ids)[0]
    src = load_pretrained(model_dirs["hf"].parent / "learned-src")(ids)[0]
    assert torch.allclose(ours, src, atol=1e-5)


@pytest.mark.parametrize(
    "setup, fragment",
    [
        (lambda d: d, "no config.json"),
        (lambda d: (d / "config.json").write_text("{not json") and d, "not valid JSON"),
        (lambda d: d / "absent", "is not a folder"),
    ],
)
def test_not_a_model_folder_is_refused_with_what_it_needs(tmp_path, setup, fragment):
    (tmp_path / "model.safetensors").write_bytes(b"")
    folder = setup(tmp_path)
    with pytest.raises(ModelSourceError, match=fragment):
        resolve(folder)


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """``python app.py`` given a bad model folder and, apart, a bad Compare folder, both started
    at once (each spends its seconds importing before it refuses): {name: (exit status, stderr)}."""
    import subprocess
    import sys

    from benchmarks.app_server import ROOT

    empty = tmp_path_factory.mktemp("empty")
    args = {"model": ["--model", str(empty)], "compare": ["--compare", str(empty / "nowhere")]}
    procs = {name: subprocess.Popen([sys.executable, "app.py", *a], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for name, a in args.items()}
    out = {}
    try:
        for name, proc in procs.items():
            _, stderr = proc.communicate(timeout=300)
            out[name] = (proc.returncode, stderr)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    return out


def test_app_refuses_a_bad_folder_without_a_traceback(refusals):
    code, stderr = refusals["model"]
    assert code != 0 and "cannot start" in stderr and "config.json" in stderr and "Traceback" not in stderr


# --- the launched app, one per format ---------------------------------------------------------


@pytest.fixture(scope="module", params=FORMATS)
def model_app(request, model_dirs, models_cache, tmp_path_factory):
    from benchmarks.app_server import launch, stop

    fmt = request.param
    server = launch(
        tmp_path_factory.mktemp(f"app-{fmt}") / "app.log",
        extra_env={"PLAYGROUND_MODELS_DIR": str(models_cache)},
        args=["--model", str(model_dirs[fmt])],
    )
    yield fmt, server, resolve(model_dirs[fmt])
    stop(server)


@pytest.mark.slow
def test_every_endpoint_answers_with_the_models_sizes(model_app):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    from model import load_pretrained

    fmt, server, source = model_app
    config = source.config
    client = Client(server.url, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    from test_app_api import ENDPOINTS

    assert set(api) == set(ENDPOINTS)  # every endpoint is called below

    assert client.predict("hello everyone", api_name="/tokenize")["ids"] == [31373, 2506]
    assert client.predict("hello", api_name="/tokenize_encodings")["encodings"][0]["n_tokens"] == 1
    neighbours = client.predict("king - man + woman", 3, api_name="/embedding_arithmetic")
    assert json.dumps(neighbours)  # answers (random weights: no meaningful neighbours to check)
    assert len(client.predict(8, 5, 10000, api_name="/positional_encoding")["table"]) == 5

    # Attention: the model's layers and heads, and no more.
    last_layer, last_head = config.n_layer - 1, config.n_head - 1
    att = client.predict("hello everyone, how are you", last_layer, last_head, api_name="/attention")
    assert (att["layer"], att["head"]) == (last_layer, last_head)
    assert all(abs(sum(row) - 1) < 1e-3 for row in att["weights"])
    with pytest.raises(AppError, match=f"from 0 to {last_head}"):
        client.predict("hello everyone", 0, config.n_head, api_name="/attention")

    # Compare: this model beside its own untrained initialisation.
    cmp = client.predict("ROMEO: What say you to", "king", "hello everyone", api_name="/compare")
    assert [m["model"] for m in cmp["models"]] == [source.name, "untrained initialisation"]
    assert len(cmp["models"][1]["attention_layer0_head0"]) == 2

    # Generation runs this model's ONNX file: greedy tokens are its PyTorch argmax.
    out = client.predict("ROMEO:", 3, 1.0, 1, 1.0, 0, api_name="/generate")
    model = load_pretrained(source.weights_dir)
    from model import get_tokenizer

    prompt = get_tokenizer().encode("ROMEO:")
    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(3):
            ids.append(int(model(torch.tensor([ids]))[0][0, -1].argmax()))
    assert out["token_ids"] == ids[len(prompt):]

    # Watch it learn trains its own small model, whatever the folder shown.
    run = client.predict(5, 0, "proper", api_name="/learn")
    assert run["status"] == "finished" and run["losses"][0][0] == 0


@pytest.mark.slow
@pytest.mark.browser
def test_browser_visits_every_tab_of_the_model(model_app, tmp_path):
    from test_browser import ARGS, CHROMIUM, TIMEOUT_MS

    if not CHROMIUM or not __import__("os").path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    from playwright.sync_api import sync_playwright

    fmt, server, source = model_app
    config = source.config
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url, wait_until="domcontentloaded")
        header = page.locator("#pg-model")
        header.wait_for()
        assert source.name in header.inner_text() and f"{config.n_layer} layers" in header.inner_text()
        tabs = page.get_by_role("tab")
        tabs.first.wait_for()  # the header is drawn before the tabs: all() does not wait
        names = [t.inner_text() for t in tabs.all()]
        assert len(names) >= 6
        for name in names:
            page.get_by_role("tab", name=name).click()
            page.wait_for_timeout(300)
        page.get_by_role("tab", name=re.compile("Attention")).click()
        # The sliders span this model's layers and heads.
        assert f"Layer (0–{config.n_layer - 1})" in page.locator("body").inner_text()
        assert f"Head (0–{config.n_head - 1})" in page.locator("body").inner_text()
        page.get_by_role("tab", name=re.compile("Model")).click()
        assert f"{config.n_layer} layers" in page.locator("body").inner_text()
        # The Model tab offers this model's ONNX files, and they download.
        from pathlib import Path

        from playground.model_source import prepare_onnx_files

        int8 = prepare_onnx_files(source)["int8"]
        with page.expect_download() as download:
            page.get_by_role("button", name=re.compile(re.escape(int8.name))).click()
        assert Path(download.value.path()).stat().st_size == int8.stat().st_size
        page.screenshot(path=str(tmp_path / f"model-{fmt}.png"), full_page=True)
        browser.close()
    assert not errors, errors


@pytest.mark.slow
def test_compare_with_another_folder(model_dirs, models_cache, tmp_path):
    """``python app.py --compare DIR``: the Compare tab sets that folder beside the shipped model."""
    from gradio_client import Client

    from benchmarks.app_server import launch, stop

    server = launch(tmp_path / "app.log", extra_env={"PLAYGROUND_MODELS_DIR": str(models_cache)},
                    args=["--compare", str(model_dirs["hf"])])
    try:
        out = Client(server.url, verbose=False).predict("ROMEO: What say you to", "king", "hello everyone", api_name="/compare")
    finally:
        stop(server)
    shipped, other = out["models"]
    assert (shipped["model"], other["model"]) == ("trained model", "hf-gpt2")
    assert abs(other["prompt_loss"] - out["uniform_loss"]) < 1.0  # random weights: about ln 50257
    assert shipped["prompt_loss"] < out["uniform_loss"] - 3


def test_app_refuses_a_bad_compare_folder(refusals):
    code, stderr = refusals["compare"]
    assert code != 0 and "is not a folder" in stderr and "Traceback" not in stderr
