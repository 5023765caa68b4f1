"""The Compare tab's logic (playground/compare.py): the shipped model beside its untrained
initialisation ("before and after training") or beside another model folder."""

from __future__ import annotations

import math

import numpy as np
import pytest

from playground import compare as cmp
from playground.resources import get_model
from playground.validation import InputError

PROMPT = "ROMEO: What say you to"
LN_V = math.log(50257)


@pytest.fixture(autouse=True)
def _default_comparison():
    cmp.set_comparison(None)
    yield
    cmp.set_comparison(None)


def test_untrained_initialisation_scores_about_ln_vocab():
    trained, untrained = cmp.compare_next_token(PROMPT)
    assert untrained.label == cmp.UNTRAINED
    # The deep-learning notes: a fresh model is close to a uniform guess, ln 50257 = 10.82 nats.
    assert abs(untrained.loss - LN_V) < 0.6 and abs(untrained.entropy - LN_V) < 0.3
    assert trained.loss < LN_V - 3 and trained.entropy < untrained.entropy - 3
    assert untrained.step.candidates[0].probability < 0.01  # nothing stands out
    assert sum(c.probability for c in trained.step.candidates) > 0.3
    assert "10.82" in cmp.loss_summary([trained, untrained])


def test_both_next_token_charts_share_one_log_probability_axis():
    """A 0.01 % bar and a 15 % one on axes of their own looked alike: both charts share one log
    axis, from a decade at or below the smallest bar to past the largest, and say so."""
    trained, untrained = cmp.compare_next_token(PROMPT)
    a, b = trained.figure.layout.xaxis, untrained.figure.layout.xaxis
    assert a.type == b.type == "log" and tuple(a.range) == tuple(b.range)
    ps = [c.probability for r in (trained, untrained) for c in r.step.candidates]
    assert a.range[0] <= math.log10(min(ps)) - math.log10(2) and a.range[1] > math.log10(max(ps))
    assert list(a.tickvals) == [10.0**e for e in range(math.ceil(a.range[0]), 1) if e <= a.range[1]]
    assert cmp.SHARED_AXIS_TITLE in (a.title.text, b.title.text) and "log scale" in cmp.SHARED_AXIS_TITLE
    summary = cmp.loss_summary([trained, untrained])
    top_a, top_b = trained.step.candidates[0].probability, untrained.step.candidates[0].probability
    assert "share one probability axis, on a log scale" in summary and f"a factor of {top_a / top_b:,.0f}" in summary


def test_untrained_model_is_the_same_architecture_and_reproducible():
    model = get_model()
    a, b = cmp.untrained_like(model), cmp.untrained_like(model)
    assert a.config == model.config
    assert all((p == q).all() for p, q in zip(a.parameters(), b.parameters()))
    assert not (a.wte.weight == model.wte.weight).all()


def test_nearest_neighbours_have_meaning_only_after_training():
    (_, trained), (_, untrained) = cmp.compare_neighbours("king")
    assert "⋅queen" in [n.token for n in trained.neighbours]
    assert "⋅queen" not in [n.token for n in untrained.neighbours]
    assert trained.neighbours[0].similarity > untrained.neighbours[0].similarity


def test_attention_side_by_side_rows_sum_to_one():
    sides = cmp.compare_attention("The king is dead, long live the king", 1, 2)
    assert [label for label, _ in sides] == ["trained model", cmp.UNTRAINED]
    for _, r in sides:
        assert (r.layer, r.head) == (1, 2)
        w = r.weights[1, 2]
        assert abs(w.sum(axis=-1) - 1).max() < 1e-4 and abs(w[0, 1:]).max() == 0


def test_head_spread_is_each_rows_entropy_and_the_weight_just_before():
    """Against the definitions, on hand-made heads: one that puts everything on the token just
    before (after the first row), and one that spreads evenly (the baseline the summary prints)."""
    t = 6
    previous = np.zeros((t, t))
    previous[0, 0] = 1.0
    previous[np.arange(1, t), np.arange(t - 1)] = 1.0
    assert cmp.head_spread(previous) == cmp.HeadSpread(0.0, 1.0)
    even = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    spread = cmp.head_spread(even)
    assert spread.entropy == pytest.approx(sum(math.log(q + 1) for q in range(t)) / t)
    assert spread.previous == pytest.approx(sum(1 / (q + 1) for q in range(1, t)) / (t - 1))
    for n in (2, 3, 9):  # the baseline the summary prints, against the same definitions
        uniform = cmp._uniform_spread(n)
        assert uniform.entropy == pytest.approx(sum(math.log(q + 1) for q in range(n)) / n)
        assert uniform.previous == pytest.approx(sum(1 / (q + 1) for q in range(1, n)) / (n - 1))
    assert cmp.head_spread(np.ones((1, 1))) == cmp.HeadSpread(0.0, None)  # one token: no token before it


def test_attention_opens_on_a_head_that_training_shaped():
    """The page's first attention view: the trained model's clearest head on the sentence, whose
    rows are sharper than the untrained model's same head and than an even spread; the summary
    prints the numbers of the very weights drawn."""
    sentence = "The king is dead, long live the king"
    opening = cmp.opening_head(sentence)
    sides = cmp.compare_attention(sentence, opening.layer, opening.head)
    (_, trained), (_, untrained) = sides
    a = cmp.head_spread(trained.weights[opening.layer, opening.head])
    b = cmp.head_spread(untrained.weights[opening.layer, opening.head])
    even = cmp._uniform_spread(len(trained.ids))
    assert a.entropy < b.entropy - 0.2 and a.entropy < even.entropy - 0.2
    assert abs(b.entropy - even.entropy) < 0.1  # untrained: close to an even spread
    if opening.kind == "previous-token":
        assert a.previous > even.previous + 0.1
    summary = cmp.head_summary(sides)
    assert summary.startswith(f"Layer {opening.layer}, head {opening.head}:")
    assert f"**trained model** {a.entropy:.2f} nats, {100 * a.previous:.0f} %" in summary
    assert f"**{cmp.UNTRAINED}** {b.entropy:.2f} nats" in summary and f"an even spread {even.entropy:.2f} nats" in summary


def test_compare_with_another_folder_clamps_layers_and_heads(tmp_path):
    import torch

    from model import save_pretrained
    from model.gpt import GPT, GPTConfig

    torch.manual_seed(3)
    small = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, d_model=32)).eval()
    save_pretrained(small, tmp_path)
    cmp.set_comparison(tmp_path, "tiny", "shipped")
    assert cmp.labels() == ("shipped", "tiny")
    (_, a), (_, b) = cmp.compare_attention("hello everyone there", 3, 3)
    assert (a.layer, a.head) == (3, 3) and (b.layer, b.head) == (0, 1)  # clamped to the small model


def test_choosing_another_comparison_lets_the_old_model_go(tmp_path):
    import gc
    import weakref

    import torch

    from model import save_pretrained
    from model.gpt import GPT, GPTConfig

    for n_layer in (1, 2):
        torch.manual_seed(n_layer)
        save_pretrained(GPT(GPTConfig(block_size=32, n_layer=n_layer, n_head=2, d_model=32)).eval(), tmp_path / str(n_layer))
    cmp.set_comparison(tmp_path / "1", "one")
    first = cmp.comparison_model()[1]
    assert cmp.comparison_model()[1] is first and first.config.n_layer == 1  # loaded once
    cmp.set_comparison(tmp_path / "1", "one")
    assert cmp.comparison_model()[1] is not first  # the same folder is read again: it may have been rewritten
    cmp.set_comparison(tmp_path / "2", "two")
    assert cmp.labels()[1] == "two" and cmp.comparison_model()[1].config.n_layer == 2
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None and len(cmp._other) == 1  # nothing keeps an earlier comparison alive


def test_compare_all_is_json_ready():
    import json

    out = json.loads(json.dumps(cmp.compare_all(PROMPT, "king", "hello everyone")))
    assert [m["model"] for m in out["models"]] == ["trained model", cmp.UNTRAINED]
    assert out["uniform_loss"] == round(LN_V, 4)
    assert len(out["models"][0]["attention_layer0_head0"]) == 2


@pytest.mark.parametrize("args, fragment", [(("", "king", "hi"), "prompt"), ((PROMPT, "two words", "hi"), "word")])
def test_bad_input_says_which(args, fragment):
    with pytest.raises(InputError, match=fragment):
        cmp.compare_all(*args)
