"""The Model tab in the static edition (``python -m deploy.static DIR``, headless Chromium): it shows
the export's numbers, which are the app's (playground.model_info on the shipped model and its
training log): the architecture's parameter counts, every row of the parameters per part, the
training curves with the final whole-split evaluation marked where the app's chart marks it, and
the folder's files to download with their sizes."""

from __future__ import annotations

import json

import pytest

from playground import model_info
from playground.resources import shipped_model
from static_site import LAPTOP, PHONE, ready, static_page, static_server, static_site  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(static_server):
    with static_page(static_server.url + "?tab=model", viewport=LAPTOP) as pg:
        ready(pg)
        pg.wait_for_selector("#model-curves[data-drawn]", timeout=120_000)
        yield pg


def test_the_picture_and_the_table_are_the_apps(page):
    model = shipped_model()
    c = model.config
    arch = page.inner_text("#model-arch")
    per_block = sum(p.numel() for p in model.blocks[0].parameters())
    assert f"× {c.n_layer} blocks, {per_block / 1e6:.2f} M parameters each" in arch
    assert f"{(model.wte.weight.numel() + model.wpe.weight.numel()) / 1e6:.2f} M" in arch and f"{c.n_head} heads × {c.head_dim}" in arch
    rows = page.eval_on_selector_all("#model-params tbody tr", "rows => rows.map((r) => [...r.cells].map((c) => c.textContent))")
    assert rows == model_info.architecture_rows(model)
    assert rows[-1] == ["total", f"{model.num_parameters():,}", "100%"]


def test_the_curves_are_the_training_logs_with_the_final_evaluation_marked(page):
    """Each line is its own entries of model/weights/training_log.json, read here as plain JSON."""
    log = json.loads(model_info.TRAINING_LOG.read_text())
    scored = [e for e in log if e.get("val_loss") is not None]
    final = max(scored, key=lambda e: e["val_windows"])
    sample = [e for e in scored if e["val_windows"] < final["val_windows"]]
    traces = page.evaluate("() => document.querySelector('#model-curves').data.map((t) => ({name: t.name, x: [...t.x], y: [...t.y]}))")
    lines = {t["name"]: t for t in traces}
    train = lines["train loss"]
    assert train["y"] == [e["train_loss"] for e in log if e.get("train_loss") is not None]
    val = lines[f"validation, a sample of {sample[-1]['val_windows']} windows"]
    assert val["x"] == [e["tokens"] for e in sample] and val["y"] == [e["val_loss"] for e in sample]
    result = lines[f"validation, all {final['val_windows']} windows (the result)"]
    assert (result["x"][-1], result["y"][-1]) == (final["tokens"], final["val_loss"])
    marks = page.evaluate("() => document.querySelector('#model-curves').layout.annotations.map((a) => ({x: a.x, y: a.y, name: a.name}))")
    assert {"x": final["tokens"], "y": final["val_loss"], "name": "final-evaluation"} in marks
    chart = page.inner_text("#model-curves")
    assert f"final: {final['val_loss']:.2f} on all {final['val_windows']} windows" in chart
    assert f"{final['val_loss']:.2f}" in page.inner_text("#model-curves-note")


def test_the_downloads_are_the_folders_files_with_their_sizes(page, static_site):
    items = page.eval_on_selector_all("#model-downloads li", "li => li.map((x) => [x.querySelector('a').getAttribute('href'), Number(x.dataset.bytes), x.textContent])")
    assert [href for href, _, _ in items] == ["model/model.onnx", "model/config.json", "model/tokenizer.json"]
    for href, size, text in items:
        assert size == (static_site / href).stat().st_size
        assert f"({size / 1e6:.0f} MB)" in text or f"({size / 1e6:.1f} MB)" in text or f"({size / 1e3:.1f} kB)" in text
    # each one is served: a learner's click downloads the file
    got = page.evaluate("async (h) => (await fetch(h)).headers.get('content-length')", items[0][0])
    assert int(got) == items[0][1]


def test_the_tab_fits_a_phone(page):
    page.set_viewport_size(PHONE)
    try:
        page.wait_for_function(f"document.documentElement.scrollWidth <= {PHONE['width']}")
    finally:
        page.set_viewport_size(LAPTOP)
    assert not page.errors


def test_a_named_model_repository_adds_its_files_from_the_hub(static_site):
    """With --model-repo, the Model tab links the repository's files, sized from the folder that
    python -m export --publish uploads (artifacts/hub/), after the folder's own."""
    from export.naming import hub_dir
    from deploy.static import HUB_DOWNLOADS, model_downloads
    from playground.model_data import model_data

    rows = model_downloads(static_site, "teacher/gpt-model")
    hub = rows[3:]
    assert [r["href"] for r in hub] == [f"https://huggingface.co/teacher/gpt-model/resolve/main/{path}" for path, _ in HUB_DOWNLOADS]
    assert [r["bytes"] for r in hub] == [(hub_dir() / path).stat().st_size for path, _ in HUB_DOWNLOADS]
    data = model_data(shipped_model(), [], rows, hub_repo="teacher/gpt-model")
    assert data["hub"]["url"] == "https://huggingface.co/teacher/gpt-model" and 'href="https://huggingface.co/teacher/gpt-model"' in data["hub"]["html"]
