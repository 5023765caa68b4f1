"""The Model tab's notes: where the 8-bit file's megabytes go, and why the last
point of the validation curve drops."""

from __future__ import annotations

import pytest

from playground import model_info


def test_the_int8_file_is_a_quarter_of_fp32_and_the_note_says_why(tmp_path):
    from export import ensure_onnx

    files = ensure_onnx()
    fp32 = model_info.onnx_summary(files["fp32"])
    int8 = model_info.onnx_summary(files["int8"])
    n_fp32 = sum(n for n, _ in fp32["weight_bytes"].values())
    int8_count, int8_bytes = int8["weight_bytes"]["int8"]
    assert int8_bytes == int8_count and int8_count > 0.99 * n_fp32 - 100_000  # the matrices, one byte each
    assert fp32["weight_bytes"]["float32"][1] == 4 * fp32["weight_bytes"]["float32"][0]
    stored = sum(b for _, b in int8["weight_bytes"].values())
    assert stored <= int8["size_mb"] * 1e6 <= stored * 1.02  # the stored numbers are the file's size
    assert 0.24 < int8["size_mb"] / fp32["size_mb"] < 0.28
    note = model_info.size_note(int8["weight_bytes"], int8["size_mb"])
    assert f"{int8_count / 1e6:.2f} M int8 numbers (1 byte each" in note and "a quarter of the fp32 one" in note
    assert "8-bit" not in model_info.size_note(fp32["weight_bytes"], fp32["size_mb"])
    assert note in model_info.onnx_markdown(int8)


def test_the_last_validation_point_is_explained_when_it_scores_more_windows():
    log = [
        {"tokens": 1, "train_loss": 6.0, "val_loss": 6.2, "val_windows": 96},
        {"tokens": 2, "train_loss": 5.0, "val_loss": 5.4, "val_windows": 96},
        {"tokens": 3, "train_loss": 4.9, "val_loss": 4.42, "val_windows": 255},
    ]
    note = model_info.training_note(log)
    assert "all 255 windows" in note and "a sample of 96" in note and "Pericles" not in note
    assert "Pericles" in model_info.training_note(log, shipped=True)
    same = [dict(e, val_windows=96) for e in log]
    assert model_info.training_note(same) == "" and model_info.training_note([]) == ""


def test_the_chart_marks_the_final_evaluation_on_the_whole_split_where_it_is_drawn():
    """The shipped log read here as plain JSON: the final score is the entry scored on the most
    windows, the line's last point the last entry scored on the sample."""
    import json

    log = json.loads(model_info.TRAINING_LOG.read_text())
    scored = [e for e in log if e.get("val_loss") is not None]
    final = max(scored, key=lambda e: e["val_windows"])
    sample = [e for e in scored if e["val_windows"] < final["val_windows"]][-1]
    fig = model_info.training_figure(model_info.load_training_log())
    notes = {a.name: a for a in fig.layout.annotations}
    end = notes["final-evaluation"]
    assert (end.x, end.y) == (final["tokens"], final["val_loss"])
    assert f"<b>{final['val_loss']:.2f}</b> on all {final['val_windows']} windows" in end.text  # 4.42 on all 255
    last = notes["last-sample"]
    assert (last.x, last.y) == (sample["tokens"], sample["val_loss"])
    assert f"{sample['val_loss']:.2f} on a sample of {sample['val_windows']} windows" in last.text  # 5.42 on 96
    names = [t.name for t in fig.data]
    assert f"validation, a sample of {sample['val_windows']} windows" in names
    assert f"validation, all {final['val_windows']} windows (the result)" in names
    # A log that never scored the whole split has no final mark.
    plain = [dict(e, val_windows=96) for e in log if e.get("val_loss") is not None]
    assert not [a for a in model_info.training_figure(plain).layout.annotations if a.name == "final-evaluation"]


def test_the_shipped_log_gets_its_note():
    note = model_info.training_note(model_info.load_training_log(), shipped=True)
    assert "4.42" in note and "255" in note and "docs/training.md" in note


@pytest.mark.parametrize(
    "message, shown",
    [
        ("text is too long", "Text is too long."),
        ("d_model must be even", "d_model must be even."),
        ("top_k must be a number", "top_k must be a number."),
        ("Missing operator!", "Missing operator!"),
    ],
)
def test_error_messages_read_as_sentences_and_keep_names(message, shown):
    from playground.ui.widgets import error_html

    out = error_html("Invalid input", message)
    assert f"</b> {shown}<span" in out and 'role="alert"' in out and "last input that worked" in out
    assert error_html("", "") == ""
    assert "&lt;script&gt;" in error_html("Invalid input", "<script>")


def test_architecture_picture_has_every_part_with_its_parameters():
    import json

    from playground.model_info import architecture_parts
    from playground.resources import shipped_model

    model = shipped_model()
    c = model.config
    html = json.dumps(architecture_parts(model), ensure_ascii=False)  # every text the picture writes
    block = model.blocks[0]
    per_block = sum(p.numel() for p in block.parameters())
    attn = sum(p.numel() for p in block.attn.parameters())
    mlp = sum(p.numel() for p in block.mlp.parameters())
    assert f"× {c.n_layer} blocks, {per_block / 1e6:.2f} M parameters each" in html
    assert f"{attn / 1e6:.2f} M" in html and f"{mlp / 1e6:.2f} M" in html
    assert f"{(model.wte.weight.numel() + model.wpe.weight.numel()) / 1e6:.2f} M" in html
    assert f"{c.n_head} heads × {c.head_dim}" in html and f"logits [T × {c.vocab_size:,}]" in html


def test_the_browser_zip_holds_what_a_browser_loads(tmp_path):
    import zipfile

    from export import hub_dir
    from export.hub import BROWSER_FILES, zip_hub

    path = zip_hub(hub_dir(), tmp_path / "browser.zip", only=BROWSER_FILES)
    with zipfile.ZipFile(path) as z:
        names = {n.split("/", 1)[1] for n in z.namelist()}
    assert names == set(BROWSER_FILES)
    assert path.stat().st_size < 25e6 < (hub_dir() / "onnx" / "model.onnx").stat().st_size
