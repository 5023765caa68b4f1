"""The training script end to end on a tiny corpus: files, log, --resume and DistributedDataParallel."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import model.evaluate as evaluate
import model.train as train
from model import get_tokenizer, load_pretrained

ROOT = Path(__file__).resolve().parents[2]
# Exact comparisons: full float32 matmuls (no bf16 autocast), one thread, no progress bar.
EXACT = ["--preset", "tiny", "--bf16", "false", "--threads", "1", "--quiet"]
LOG_KEYS = {"step", "tokens", "train_loss", "train_softmax_tokens", "val_loss", "val_windows", "lr", "tokens_per_s", "elapsed_s"}


def write_corpus(folder: Path, works: int = 3, lines: int = 120) -> Path:
    """A few small 'plays' with a repetitive grammar: learnable in a few steps."""
    rng = random.Random(0)
    names = ["ROMEO", "JULIET", "HAMLET", "OPHELIA", "LEAR"]
    verbs = ["love", "fear", "seek", "praise", "curse"]
    nouns = ["the moon", "my lord", "the night", "thy face", "the crown"]
    folder.mkdir(parents=True)
    for w in range(works):
        text = "\n".join(
            f"{rng.choice(names)}: I {rng.choice(verbs)} {rng.choice(nouns)}, and {rng.choice(nouns)} doth {rng.choice(verbs)} me."
            for _ in range(lines)
        )
        (folder / f"play_{w}.txt").write_text(text + "\n")
    return folder


@pytest.fixture(scope="module", autouse=True)
def restore_threads():
    """train.main sets torch's thread count for the whole process; give later tests theirs back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    """Prepared with the command line, as a user would: python -m model.data --corpus DIR --out DIR."""
    base = tmp_path_factory.mktemp("tiny")
    corpus = write_corpus(base / "corpus")
    out = base / "data"
    subprocess.run([sys.executable, "-m", "model.data", "--corpus", str(corpus), "--out", str(out)], cwd=ROOT, check=True)
    return out


def reject_nan(name: str):
    raise ValueError(f"{name} is not JSON")


def test_data_prep_holds_out_a_work(tiny_data):
    meta = json.loads((tiny_data / "meta.json").read_text())
    assert meta["val_works"] == ["play_2.txt"] and meta["train_works"] == ["play_0.txt", "play_1.txt"]
    val = np.fromfile(tiny_data / "val.bin", dtype=np.uint16)
    text = (tiny_data.parent / "corpus" / "play_2.txt").read_text()
    assert val.tolist() == get_tokenizer().encode_ordinary(text) + [get_tokenizer().eot_token]
    assert meta["val_tokens"] == val.size > 8 * 32 + 1  # enough for the tiny preset's eval windows


@pytest.fixture(scope="module")
def tiny_run(tiny_data, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("run")
    return train.main([*EXACT, "--data", str(tiny_data), "--out", str(out)]), out


def test_tiny_preset_end_to_end(tiny_run):
    result, out = tiny_run
    _, tc = train.PRESETS["tiny"]
    for name in ("model.safetensors", "config.json", "last.safetensors", "optimizer.safetensors", "state.json", "training_log.json"):
        assert (out / name).is_file(), name
    log = json.loads((out / "training_log.json").read_text(), parse_constant=reject_nan)
    assert [e["step"] for e in log] == list(range(0, tc.max_steps + 1, tc.eval_interval))
    for entry in log[:-1]:
        assert set(entry) == LOG_KEYS
    assert set(log[-1]) == LOG_KEYS | {"val_loss_all", "val_windows_all"}  # the run's result: every window
    # The best checkpoint is chosen on the same windows at every evaluation, like with like.
    assert {e["val_windows"] for e in log} == {tc.eval_windows}
    assert log[-1]["val_windows_all"] > tc.eval_windows and log[-1]["val_loss_all"] > 0
    # The training loss says what its softmax ran over: the training text's tokens until
    # full_vocab_frac of the steps remain, then all 50,257.
    full_from = int(tc.max_steps * (1 - tc.full_vocab_frac))
    for entry in log[1:]:
        subset_only = entry["step"] <= full_from
        assert (entry["train_softmax_tokens"] < 50257) == subset_only, entry
    assert log[0]["train_softmax_tokens"] is None
    for entry in log:
        assert entry["tokens"] == entry["step"] * tc.batch_size * 32
        assert entry["elapsed_s"] >= 0 and entry["tokens_per_s"] >= 0
    assert log[0]["train_loss"] is None and abs(log[0]["val_loss"] - math.log(50257)) < 0.15
    # It learns the tiny grammar. (The held-out loss falls more slowly: the vocabulary-subset
    # softmax of most steps does not yet push down the 50k tokens the corpus never uses.)
    assert log[-1]["train_loss"] < math.log(50257) - 4
    assert log[-1]["val_loss"] < log[1]["val_loss"] < log[0]["val_loss"]
    assert len(result["losses"]) == tc.max_steps
    # each entry logs the learning rate of the step just taken
    assert [e["lr"] for e in log[1:]] == [train.lr_at(e["step"] - 1, tc) for e in log[1:]]


def test_warmup_then_cosine_schedule():
    tc = train.TrainConfig(lr=1e-3, min_lr=1e-4, warmup_steps=10, max_steps=110)
    assert train.lr_at(0, tc) == pytest.approx(1e-4)  # linear warmup from lr / warmup_steps
    assert train.lr_at(9, tc) == pytest.approx(1e-3)
    assert train.lr_at(10, tc) == pytest.approx(1e-3)  # cosine starts at the peak
    assert train.lr_at(60, tc) == pytest.approx(0.55e-3)  # halfway: the mean of lr and min_lr
    assert train.lr_at(110, tc) == pytest.approx(1e-4)
    lrs = [train.lr_at(s, tc) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_best_checkpoint_loads_and_scores_its_logged_loss(tiny_run, tiny_data):
    result, out = tiny_run
    model = load_pretrained(out)
    assert not model.training
    val = np.fromfile(tiny_data / "val.bin", dtype=np.uint16)
    log = json.loads((out / "training_log.json").read_text())
    best = min(log, key=lambda e: e["val_loss"])
    loss = evaluate.evaluate_loss(model, val, max_windows=best["val_windows"])
    assert loss == pytest.approx(result["best_val_loss"], abs=1e-5)
    assert result["best_val_loss"] == pytest.approx(best["val_loss"], abs=1e-4)
    # every evaluation scores the same sample of the split (the choice of the best); the last one
    # also scores all of it, the run's result, which the last weights give
    every = (len(val) - 1) // 32
    assert every > train.PRESETS["tiny"][1].eval_windows
    assert [e["val_windows"] for e in log] == [train.PRESETS["tiny"][1].eval_windows] * len(log)
    assert log[-1]["val_windows_all"] == every
    last = load_pretrained(out)
    from model.checkpoint import load_weights

    load_weights(last, out / "last.safetensors")
    assert evaluate.evaluate_loss(last, val) == pytest.approx(log[-1]["val_loss_all"], abs=1e-4)
    state = json.loads((out / "state.json").read_text())
    assert state["step"] == train.PRESETS["tiny"][1].max_steps


class Interrupted(Exception):
    pass


def test_resume_continues_like_an_uninterrupted_run(tiny_run, tiny_data, tmp_path, monkeypatch):
    full, full_out = tiny_run
    _, tc = train.PRESETS["tiny"]
    stop = tc.eval_interval  # a checkpoint is written at each evaluation
    real_get_batch = train.get_batch

    def crash_at_stop(data, step, *args):
        if step == stop:
            raise Interrupted
        return real_get_batch(data, step, *args)

    monkeypatch.setattr(train, "get_batch", crash_at_stop)
    with pytest.raises(Interrupted):
        train.main([*EXACT, "--data", str(tiny_data), "--out", str(tmp_path)])
    monkeypatch.setattr(train, "get_batch", real_get_batch)
    assert json.loads((tmp_path / "state.json").read_text())["step"] == stop

    resumed = train.main(["--resume", "--threads", "1", "--quiet", "--data", str(tiny_data), "--out", str(tmp_path)])
    assert resumed["losses"] == pytest.approx(full["losses"][stop:], abs=1e-6)
    log, full_log = (json.loads((d / "training_log.json").read_text()) for d in (tmp_path, full_out))
    assert [e["step"] for e in log] == [e["step"] for e in full_log]
    for a, b in zip(log[1:], full_log[1:]):
        assert (a["train_loss"], a["val_loss"], a["lr"]) == pytest.approx((b["train_loss"], b["val_loss"], b["lr"]), abs=1e-4)
    last, full_last = (load_file(str(d / "last.safetensors")) for d in (tmp_path, full_out))
    for name, t in full_last.items():
        np.testing.assert_allclose(last[name].numpy(), t.numpy(), atol=1e-5, rtol=0, err_msg=name)


def test_ddp_two_processes_match_one(tiny_data, tmp_path):
    """torchrun with 2 CPU processes (gloo), each on half of the global batch, follows the same
    loss curve as one process on the whole batch: DDP averages the gradients.

    The one process is a process of its own too: in the test's process another thread's use of
    torch's global random state (a ``fork_rng`` restoring it, a background run's draws) between
    main's ``manual_seed`` and the model's initialisation gave it other weights (loss 3.631 for
    3.608, in a loaded default run)."""
    steps = ["--max_steps", "6", "--eval_interval", "3"]  # steps 0-4 use the vocabulary subset, step 5 the full softmax

    launchers = {"one": [sys.executable], "ddp": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]}
    runs = {name: subprocess.Popen([*launcher, "-m", "model.train", *EXACT, *steps, "--data", str(tiny_data), "--out",
                                    str(tmp_path / name), "--losses-json", str(tmp_path / f"{name}_losses.json")],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, launcher in launchers.items()}  # (both at once: the two start up side by side)
    for name, run in runs.items():
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        assert f"{2 if name == 'ddp' else 1} process(es)" in stdout
    one, two = (json.loads((tmp_path / f"{name}_losses.json").read_text()) for name in launchers)
    assert len(two) == len(one) == 6
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=0)
    assert one[4] < one[0]  # a real training curve (before the switch to the full softmax)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_lm_loss_matches_pytorch_cross_entropy(small_model, smoothing):
    """Full vocabulary: PyTorch's own (label-smoothed) cross-entropy; subset: the softmax over the
    chosen ids only, i.e. the full logits with every other id masked out."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 50257, (2, 16), generator=g)
    y = torch.randint(0, 50257, (2, 16), generator=g)
    logits = small_model(x).logits
    loss, nll = train.lm_loss(small_model, small_model, x, y, label_smoothing=smoothing)
    ref = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), label_smoothing=smoothing)
    assert loss.item() == pytest.approx(ref.item(), abs=1e-5)
    assert nll.item() == pytest.approx(torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).item(), abs=1e-5)

    vocab = torch.unique(torch.cat([y.flatten(), torch.arange(100)]))
    remap = torch.full((50257,), -1, dtype=torch.long)
    remap[vocab] = torch.arange(len(vocab))
    _, sub = train.lm_loss(small_model, small_model, x, y, vocab, remap, label_smoothing=smoothing)
    masked = torch.full((50257,), float("-inf"))
    masked[vocab] = 0.0
    ref_sub = torch.nn.functional.cross_entropy((logits + masked).flatten(0, 1), y.flatten())
    assert sub.item() == pytest.approx(ref_sub.item(), abs=1e-5)


def test_ship_copies_the_best_checkpoint_as_float16(tiny_run, tmp_path):
    from model.ship import ship

    _, run = tiny_run
    out = ship(run, tmp_path / "weights")
    for name in ("model.safetensors", "config.json", "training_log.json", "training_curve.png"):
        assert (out / name).is_file(), name
    assert all(t.dtype == torch.float16 for t in load_file(str(out / "model.safetensors")).values())
    json.loads((out / "training_log.json").read_text(), parse_constant=reject_nan)
    shipped, best = load_pretrained(out), load_pretrained(run)
    x = torch.randint(0, 50257, (1, 32))
    assert next(shipped.parameters()).dtype == torch.float32
    assert torch.allclose(shipped(x)[0], best(x)[0], atol=2e-2)  # float16 rounding only


def test_evaluation_builds_no_autograd_graph(tiny_data):
    """Evaluating must not record the graph (memory and time on the full validation split)."""
    torch.manual_seed(0)
    model = train.GPT(train.PRESETS["tiny"][0])
    seen = []
    model.register_forward_hook(lambda *_: seen.append(torch.is_grad_enabled()))
    val = np.fromfile(tiny_data / "val.bin", dtype=np.uint16)
    evaluate.evaluate_loss(model, val, max_windows=4)
    assert seen == [False]


def test_sampled_evaluation_spans_the_whole_split(val_tokens):
    """A periodic evaluation of 96 windows scores windows from both held-out works, evenly spread."""
    rows = evaluate.window_rows(len(val_tokens), 256, 96)
    every = (len(val_tokens) - 1) // 256
    assert len(rows) == evaluate.val_windows(len(val_tokens), 256, 96) == 96
    assert rows[0] == 0 and rows[-1] == every - 1 and np.all(np.diff(rows) >= 2)
    assert list(evaluate.window_rows(len(val_tokens), 256)) == list(range(every))
    separators = np.flatnonzero(val_tokens == get_tokenizer().eot_token)
    second_work = int(separators[0]) // 256 + 1  # the first window wholly after the separator
    assert (rows < second_work - 1).any() and (rows >= second_work).any()


def test_the_cpus_bfloat16_checks_exist():
    """cpu_has_native_bf16 reads two private checks of torch.cpu: this fails when torch moves them."""
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        assert callable(getattr(torch.cpu, name, None)), f"torch {torch.__version__} has no torch.cpu.{name}"
    assert isinstance(train.cpu_has_native_bf16(), bool)


@pytest.mark.parametrize("native, flag, expected", [(False, None, False), (True, None, True), (False, "true", True), (False, "false", False)])
def test_bf16_falls_back_to_float32_where_the_cpu_emulates_it(tiny_data, tmp_path, monkeypatch, native, flag, expected):
    """The presets' bfloat16 autocast, on a CPU without native bfloat16, trains in float32 unless
    --bf16 is given; the run's state says which it used."""
    monkeypatch.setattr(train, "cpu_has_native_bf16", lambda: native)
    args = ["--preset", "tiny", "--max_steps", "2", "--eval_interval", "2", "--threads", "1", "--quiet"]
    train.main([*args, *(["--bf16", flag] if flag else []), "--data", str(tiny_data), "--out", str(tmp_path)])
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["train_config"]["bf16"] is expected
