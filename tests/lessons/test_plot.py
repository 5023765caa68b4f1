"""model.plot draws what the training log says."""

from __future__ import annotations

import json
import math

import matplotlib.pyplot as plt
import pytest

from model.plot import main, make_figure, vocab_size_beside

# A small log in the format model.train writes (step 0 has no train loss yet).
LOG = [
    {"step": 0, "tokens": 0, "train_loss": float("nan"), "val_loss": 10.88, "lr": 2e-5, "tokens_per_s": 0.0, "elapsed_s": 3.0},
    {"step": 100, "tokens": 409600, "train_loss": 7.1, "val_loss": 6.9, "lr": 2e-3, "tokens_per_s": 1500.0, "elapsed_s": 280.0},
    {"step": 200, "tokens": 819200, "train_loss": 5.8, "val_loss": 5.9, "lr": 1e-3, "tokens_per_s": 1510.0, "elapsed_s": 550.0},
    {"step": 300, "tokens": 1228800, "train_loss": 5.1, "val_loss": 5.6, "lr": 2e-4, "tokens_per_s": 1490.0, "elapsed_s": 830.0},
]


def test_curves_and_reference_lines():
    fig = make_figure(LOG, vocab_size=50257)
    ax = fig.axes[0]
    lines = {line.get_label().split(" ")[0]: line for line in ax.get_lines()}
    assert list(lines["train"].get_xdata()) == [409600, 819200, 1228800]  # the NaN entry is skipped
    assert list(lines["train"].get_ydata()) == [7.1, 5.8, 5.1]
    assert list(lines["validation"].get_xdata()) == [0, 409600, 819200, 1228800]
    assert list(lines["validation"].get_ydata()) == [10.88, 6.9, 5.9, 5.6]
    assert list(lines["ln(V)"].get_ydata()) == pytest.approx([math.log(50257)] * 2)
    assert list(lines["target"].get_ydata()) == [5.0, 5.0]
    assert "tokens" in ax.get_xlabel() and "5.600" in ax.get_title()
    plt.close(fig)


def test_legend_says_when_evaluations_sampled_the_split():
    sampled = [dict(e, val_windows=96) for e in LOG[:-1]] + [dict(LOG[-1], val_windows=255)]
    fig = make_figure(sampled, vocab_size=50257)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert any("96 of 255 windows" in label for label in labels), labels
    plt.close(fig)
    fig = make_figure([dict(e, val_windows=255) for e in LOG], vocab_size=50257)
    assert "validation loss (held-out works)" in [line.get_label() for line in fig.axes[0].get_lines()]
    plt.close(fig)


def test_cli_writes_a_png(tmp_path, capsys):
    log = tmp_path / "training_log.json"
    log.write_text(json.dumps(LOG))  # writes NaN as json.dumps does in model.train
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 1000}))
    main(["--log", str(log), "--out", str(tmp_path / "curve.png")])
    png = (tmp_path / "curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "curve.png" in capsys.readouterr().out
    assert vocab_size_beside(log) == 1000  # ln(V) comes from the run's own config


def test_missing_log_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="training_log.json"):
        main(["--log", str(tmp_path / "nope" / "training_log.json"), "--out", str(tmp_path / "c.png")])
