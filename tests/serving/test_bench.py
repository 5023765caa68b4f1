"""The benchmark command on the tiny exported model: it runs every engine and prints the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.bench import main, weight_bytes_per_token
from model import load_pretrained


def test_weight_bytes_count_the_tied_head_once_in_full(tiny_export):
    weights, paths = tiny_export.weights, tiny_export.paths
    n_params = load_pretrained(weights).num_parameters()
    fp32 = weight_bytes_per_token(paths["fp32"])
    # Every parameter is read once per token (the tied table by the head), up to small constants.
    assert abs(fp32 - 4 * n_params) < 0.01 * 4 * n_params
    assert weight_bytes_per_token(paths["int8"]) < fp32 / 3


def test_bench_prints_the_comparison_table(tiny_export, capsys):
    weights, paths = tiny_export.weights, tiny_export.paths
    argv = ["--weights", str(weights), "--artifacts", str(paths["fp32"].parent.parent.parent), "--tokens", "6", "--reps", "1",
            "--val", str(Path("/nonexistent")), "--threads", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in out.splitlines() if line.startswith("| ") and "---" not in line}
    names = {"onnx engine int8 (1 thr)", "onnx engine fp32 (1 thr)", "onnx engine int8 (2 thr)", "pytorch, kv cache",
             "pytorch, full recompute", "transformers generate"}
    assert names <= rows.keys()
    assert rows["onnx engine fp32 (1 thr)"][-1].strip() == "yes"  # same greedy tokens as PyTorch
    assert rows["transformers generate"][-1].strip() == "yes"
    assert all(float(cols[0]) > 0 for name, cols in rows.items() if name in names)
    assert "memory copy bandwidth" in out
    # The batched-streams table has both loops; the context table both ways of decoding, each
    # with tokens/s after a short prompt and a full context and their ratio.
    assert any(k.startswith("1 thread") for k in rows) and any(k.startswith("the app's") for k in rows)
    steps = [rows[n] for n in ("1", "4", "16")]  # the model's step alone, on one thread and on the wide session
    assert all(len(cols) == 2 and all(float(c) > 0 for c in cols) for cols in steps)
    context = [cols for name, cols in rows.items() if name.startswith("model_int8.onnx, 1 thread") or name.startswith("the app's loop")]
    assert len(context) == 2 and all(float(c) > 0 for cols in context for c in cols)


def test_real_text_agreement_reads_every_position_of_validation_windows(tiny_export, tmp_path):
    from benchmarks.quant_compare import real_text_agreement, real_text_report

    paths = tiny_export.paths
    val = tmp_path / "val.bin"
    np.random.default_rng(0).integers(0, 50257, 500).astype(np.uint16).tofile(val)
    windows = [np.fromfile(val, dtype=np.uint16)[:20].astype(int).tolist()]
    assert real_text_agreement(paths["fp32"], paths["fp32"], windows) == (20, 20, 0.0, [])
    # Windows longer than the context are cut to it (the tiny model's 32), every position counted.
    out = real_text_report(paths, 3, 250, val)
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in out.splitlines() if line.startswith("| `")}
    assert set(rows) == {"`model_quantized.onnx`", "`model_int8.onnx`"}
    assert all("of 96 positions" in cols[0] and float(cols[1]) >= 0 for cols in rows.values())
    assert "3 windows of 32 tokens" in out


def test_sampling_bench_prints_every_decoding_beside_greedy(capsys):
    """``python -m benchmarks.bench_sampling`` on the shipped int8 file: a row for every setting,
    call and sampler, each against greedy decoding of the same call."""
    from benchmarks.bench_sampling import SAMPLERS, SETTINGS
    from benchmarks.bench_sampling import main as bench_sampling

    assert bench_sampling(["--tokens", "8", "--reps", "1"]) == 0
    table = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line]
    rows = {name.strip(): (float(rate), float(ratio)) for name, rate, ratio in table[1:]}
    with_top_p = sum(p is not None for *_, p in SETTINGS)
    assert len(rows) == 2 * len(SETTINGS) + 2 * with_top_p * (len(SAMPLERS) - 1)
    assert rows["greedy, generate"][1] == rows["greedy, stream"][1] == 1.0
    assert all(rate > 0 for rate, _ in rows.values())


def test_inside_bench_times_each_control_on_a_text_of_the_asked_length(capsys):
    """``python -m benchmarks.bench_inside``: the tab's own handlers on a text of exactly ``--tokens``."""
    from benchmarks.bench_inside import main as bench_inside

    bench_inside(["--repeats", "1", "--tokens", "16"])
    out = capsys.readouterr().out
    assert "16-token text, 1 repeats" in out
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["text", "token"]


def test_every_benchmark_command_is_listed():
    """The package's docstring is the list a newcomer reads: every command in it, and docs/export.md's table."""
    import benchmarks

    folder = Path(benchmarks.__file__).parent
    commands = {p.stem for p in folder.glob("*.py")} - {"__init__", "app_server"}
    table = (folder.parent / "docs" / "export.md").read_text()
    for name in sorted(commands):
        assert f"python -m benchmarks.{name} " in benchmarks.__doc__, name
        assert f"`{name}.py`" in table, name
