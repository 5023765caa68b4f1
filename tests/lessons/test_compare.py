"""The Compare tab's logic (playground/compare.py): the shipped model beside its untrained
initialisation ("before and after training") or beside another model folder."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from playground import compare as cmp
from playground.resources import shipped_model
from playground.validation import InputError
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app

PROMPT = "ROMEO: What say you to"
LN_V = math.log(50257)


def test_untrained_initialisation_scores_about_ln_vocab():
    trained, untrained = cmp.compare_next_token(PROMPT)
    assert untrained.label == cmp.UNTRAINED
    # The deep-learning notes: a fresh model is close to a uniform guess, ln 50257 = 10.82 nats.
    assert abs(untrained.loss - LN_V) < 0.6 and abs(untrained.entropy - LN_V) < 0.3
    assert trained.loss < LN_V - 3 and trained.entropy < untrained.entropy - 3
    assert untrained.step.candidates[0].probability < 0.01  # nothing stands out
    assert sum(c.probability for c in trained.step.candidates) > 0.3


def test_the_untrained_side_is_the_generator_the_browser_shares():
    """Its weights are playground.initial's draws for INIT_SEED, which web/engine/init.js repeats
    (tests/model/test_initial.py; tests/browser/test_static_compare.py runs them in the browser)."""
    from playground.initial import initial_state

    model = shipped_model()
    drawn = cmp.untrained_like(model)
    want = initial_state(model.config, cmp.INIT_SEED)
    assert all(torch.equal(p.detach(), want[name]) for name, p in drawn.named_parameters())
    assert cmp.untrained_like(model) is drawn  # drawn once


def test_the_data_objects_hold_the_apps_numbers():
    """playground/compare_data.py: what the view draws, in both editions."""
    from playground.compare_data import compare_data

    data = json.loads(json.dumps(compare_data(PROMPT, "king", "hello everyone there", 1, 2)))
    trained, untrained = cmp.compare_next_token(PROMPT)
    nxt = data["next"]
    assert [s["model"] for s in nxt["sides"]] == list(data["labels"]) == ["trained model", cmp.UNTRAINED]
    assert nxt["sides"][1]["prompt_loss"] == pytest.approx(untrained.loss) and nxt["uniform_loss"] == pytest.approx(LN_V)
    assert [c["id"] for c in nxt["sides"][0]["candidates"]] == [c.token_id for c in trained.step.candidates]
    assert [n["token"] for n in data["neighbours"]["sides"][0]["neighbours"]][:8] == [n.token for n in cmp.compare_neighbours("king")[0][1].neighbours]
    att = data["attention"]
    assert (att["layer"], att["head"]) == (1, 2) and len(att["tokens"]) == 3
    w = np.array(att["sides"][1]["weights"])
    assert w.shape == (3, 3) and np.allclose(w.sum(-1), 1, atol=1e-5) and w[0, 1:].max() == 0
    opened = compare_data(PROMPT, "king", "hello everyone there")["attention"]
    where = cmp.opening_head(cmp.EXAMPLE_SENTENCE)  # the tab opens there, whatever sentence a link brings
    assert (opened["layer"], opened["head"]) == (where.layer, where.head)


def test_untrained_model_is_the_same_architecture_and_reproducible():
    model = shipped_model()
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


def test_attention_opens_on_a_head_that_training_shaped():
    """The page's first attention view: the trained model's clearest head on the sentence, whose
    rows are sharper than the untrained model's same head and than an even spread."""
    sentence = "The king is dead, long live the king"
    opening = cmp.opening_head(sentence)
    (_, trained), (_, untrained) = cmp.compare_attention(sentence, opening.layer, opening.head)

    def spread(w):  # the rows' mean entropy (the view writes it: tests/browser/test_compare_view.py)
        return float(-(w * np.log(np.clip(w, 1e-12, 1))).sum(-1).mean())

    t = len(trained.ids)
    even = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    a, b = spread(trained.weights[opening.layer, opening.head]), spread(untrained.weights[opening.layer, opening.head])
    assert a < b - 0.2 and a < spread(even) - 0.2
    assert abs(b - spread(even)) < 0.1  # untrained: close to an even spread


def test_compare_with_another_folder_clamps_layers_and_heads(tmp_path):
    from model import save_pretrained
    from model.gpt import GPT, GPTConfig

    torch.manual_seed(3)
    small = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, d_model=32)).eval()
    save_pretrained(small, tmp_path)
    tiny = cmp.Comparison(tmp_path, "tiny", "shipped")
    assert tiny.labels() == ("shipped", "tiny")
    (_, a), (_, b) = cmp.compare_attention("hello everyone there", 3, 3, tiny)
    assert (a.layer, a.head) == (3, 3) and (b.layer, b.head) == (0, 1)  # clamped to the small model


def test_choosing_another_comparison_lets_the_old_model_go(tmp_path):
    import gc
    import weakref

    from model import save_pretrained
    from model.gpt import GPT, GPTConfig

    for n_layer in (1, 2):
        torch.manual_seed(n_layer)
        save_pretrained(GPT(GPTConfig(block_size=32, n_layer=n_layer, n_head=2, d_model=32)).eval(), tmp_path / str(n_layer))
    one = cmp.Comparison(tmp_path / "1", "one")
    first = one.other()[1]
    assert one.other()[1] is first and first.config.n_layer == 1  # loaded once
    assert cmp.Comparison(tmp_path / "1", "one").other()[1] is not first  # a new comparison reads the folder again
    two = cmp.Comparison(tmp_path / "2", "two")
    assert two.labels()[1] == "two" and two.other()[1].config.n_layer == 2
    assert [t.label for t in cmp.compare_next_token(PROMPT, comparison=two)] == [cmp.TRAINED, "two"]
    gone = weakref.ref(first)
    del first, one
    gc.collect()
    assert gone() is None  # nothing outside a comparison keeps its model alive


def test_compare_all_is_json_ready():
    out = json.loads(json.dumps(cmp.compare_all(PROMPT, "king", "hello everyone")))
    assert [m["model"] for m in out["models"]] == ["trained model", cmp.UNTRAINED]
    assert out["uniform_loss"] == round(LN_V, 4)
    assert len(out["models"][0]["attention_layer0_head0"]) == 2


@pytest.mark.parametrize("args, fragment", [(("", "king", "hi"), "prompt"), ((PROMPT, "two words", "hi"), "word")])
def test_bad_input_says_which(args, fragment):
    with pytest.raises(InputError, match=fragment):
        cmp.compare_all(*args)


def test_each_app_compares_what_it_was_given(tmp_path):
    """``build_app(..., compare_with=...)`` hands its comparison to its own Compare tab: an app and
    a tab built after it in one process (as a test suite or a notebook does) each answer
    ``/compare`` with their own second side, the later one leaving the earlier one's as it was."""
    import gradio as gr

    import app
    from export import ensure_onnx
    from model import save_pretrained
    from model.gpt import GPT, GPTConfig
    from playground.model_source import resolve
    from playground.ui import compare

    torch.manual_seed(5)
    save_pretrained(GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, d_model=32)).eval(), tmp_path / "tiny")
    beside_tiny = app.build_app(ensure_onnx(), compare_with=resolve(tmp_path / "tiny"))
    with gr.Blocks() as beside_untrained:
        compare.build(comparison=cmp.Comparison(shown=RES.model()))

    def compared(demo) -> list[str]:
        api = next(fn.fn for fn in demo.fns.values() if fn.api_name == "compare")
        return [m["model"] for m in api(PROMPT, "king", "hello everyone there")["models"]]

    assert compared(beside_untrained) == [cmp.TRAINED, cmp.UNTRAINED]
    assert compared(beside_tiny) == [cmp.TRAINED, "tiny"]
