"""The next token, as the Text generation tab shows it: the live
distribution under the sampling settings (playground/next_token.py), the candidates chart of a
generated step (legend, the drawn token's bar, a token drawn from outside the top candidates),
its caption, whitespace made visible, and one token at a time with "Next token".

On the real onnxruntime engine; expected values come from definitions (softmax, top-k, top-p)
and from the engine's own reports of the distribution it sampled."""

from __future__ import annotations

import numpy as np
import pytest

from playground import next_token as nt
from playground import resources
from playground.generation import figures, streaming, views
from playground.generation.params import DEFAULTS, EXAMPLE_PROMPTS
from playground.generation.state import GeneratedStep, TokenChoice, drawn_rank
from playground.tokens import encode
from playground.validation import InputError
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app


@pytest.fixture(scope="module")
def engine():
    from export import ensure_onnx

    ensure_onnx()
    return RES.engine()


@pytest.fixture(scope="module")
def dist(engine):
    return nt.next_token_distribution(encode("ROMEO:\nBut soft,"), engine)


def settings(temperature=1.0, top_k=0, top_p=1.0):
    return nt.validate_sampling(temperature, top_k, top_p, vocab_size=50257)


def run(prompt="HAMLET:\n", n=16, temperature=1.5, top_k=50, top_p=0.95, seed=3):
    final = None
    for final in streaming.run(RES, streaming.prepare(RES, prompt, n, temperature, top_k, top_p, seed, 1)):
        pass
    return final


# --- the distribution and the settings --------------------------------------------------------


def test_the_model_distribution_is_a_probability_over_the_vocabulary(dist):
    p = dist.probabilities()
    assert p.shape == (50257,) and np.all(p >= 0) and p.sum() == pytest.approx(1.0, abs=1e-4)


def test_temperature_reshapes_as_softmax_of_logits_over_t(dist):
    p = dist.probabilities()
    for t in (0.5, 2.0):
        expected = p ** (1 / t) / (p ** (1 / t)).sum()  # softmax(log p / T)
        np.testing.assert_allclose(dist.probabilities(settings(t)), expected, rtol=1e-4, atol=1e-9)
    sharp, flat = dist.probabilities(settings(0.5)), dist.probabilities(settings(2.0))
    top = int(np.argmax(p))
    assert sharp[top] > p[top] > flat[top]


def test_greedy_top_k_and_top_p_cut_as_defined(dist):
    p = dist.probabilities()
    top = int(np.argmax(p))
    for s in (settings(0.0), settings(1.0, top_k=1)):  # temperature 0 and top-k 1: the most likely only
        q = dist.probabilities(s)
        assert q[top] == pytest.approx(1.0) and np.count_nonzero(q) == 1
    q = dist.probabilities(settings(1.0, top_k=5))
    kept = np.argsort(-p)[:5]
    assert np.count_nonzero(q) == 5 and q[kept].sum() == pytest.approx(1.0)
    np.testing.assert_allclose(q[kept], p[kept] / p[kept].sum(), rtol=1e-5)
    # top-p: the smallest set of most likely tokens whose mass reaches p.
    q = dist.probabilities(settings(1.0, top_p=0.5))
    order = np.argsort(-p)
    n_kept = int(np.searchsorted(np.cumsum(p[order]), 0.5) + 1)
    assert np.count_nonzero(q) == n_kept


def test_the_conventions_of_other_tools_and_what_is_refused():
    assert settings(0.0).greedy and settings(0.0).label() == "temperature 0 (greedy)"
    assert settings(0.8, 50, 0.95).label() == "temperature 0.8, top-k 50, top-p 0.95"
    assert settings(1.0, 0, 1.0).engine_args(50257) == {"temperature": 1.0, "top_k": None, "top_p": None}
    for bad, says in (({"temperature": -0.1}, "temperature"), ({"top_k": -1}, "top_k"), ({"top_p": 0}, "top_p")):
        with pytest.raises(InputError, match=says):
            settings(**bad)


def test_the_live_chart_says_how_many_tokens_can_be_drawn(dist):
    fig = nt.distribution_figure(dist, settings(0.0))
    assert "greedy" in fig.layout.title.text and "always the most likely" in fig.layout.title.text.replace("<br>", " ")
    model, sampled = fig.data
    assert model.name == "model (temperature 1)" and sampled.name == "drawn from, with these settings"
    assert len(model.y) == nt.SHOWN and list(sampled.text).count("cut") == nt.SHOWN - 1
    fig = nt.distribution_figure(dist, settings(1.0, top_k=3))
    assert "3 tokens can be drawn" in fig.layout.title.text.replace("<br>", " ")


def test_a_bar_near_100_percent_keeps_room_for_its_label():
    axis = nt.probability_axis(0.999)
    assert axis["range"][1] > 1.1 and axis["tickvals"][-1] == 1.0  # "100.0%" fits right of the bar
    assert nt.probability_axis(0.2)["range"][1] > 0.2 * 1.2


# --- the candidates chart of a generated step --------------------------------------------------


def _step(drawn: int, sample_p: float | None = 0.3) -> GeneratedStep:
    cands = [TokenChoice(i, f"t{i}", 0.5 / (i + 1), 0.6 / (i + 1)) for i in range(10)]
    token = next((c for c in cands if c.token_id == drawn), TokenChoice(drawn, "\n\n", 0.001, sample_p))
    return GeneratedStep(4, token, cands)


def test_the_legend_has_one_colour_per_meaning_whichever_token_was_drawn():
    legends = []
    for drawn in (0, 3, 99):
        fig = figures.candidates_figure(_step(drawn, 0.01), settings=settings(0.8, 50, 0.95))
        legends.append([(t.name, t.marker.color) for t in fig.data])
    assert legends[0] == legends[1] == legends[2]
    assert [name for name, _ in legends[0]] == [
        "model (temperature 1)", "drawn from (temperature 0.8, top-k 50, top-p 0.95)", "the token drawn",
    ]
    assert legends[0][2][1] == nt.DRAWN_COLOUR


def test_the_drawn_token_has_its_own_bar_with_its_probability():
    fig = figures.candidates_figure(_step(3))
    drawn = fig.data[2]
    assert list(drawn.y) == ["t3  #3"] and drawn.x[0] == pytest.approx(0.15) and drawn.text[0] == "15.0%"
    assert "t3  #3" not in fig.data[1].y  # not twice
    assert "(p = 15.0%)" in fig.layout.title.text


def test_a_token_drawn_from_outside_the_top_candidates_still_shows_with_its_probability():
    fig = figures.candidates_figure(_step(99, 0.0123))
    drawn = fig.data[2]
    assert list(drawn.y) == ["↵↵  #99"]  # whitespace drawn visibly
    assert drawn.x[0] == pytest.approx(0.0123) and drawn.text[0] == "1.2%"
    assert "(p = 1.2%)" in fig.layout.title.text and len(fig.data[0].y) == 11
    caption = figures.step_caption(_step(99), settings(0.8))
    assert "outside the model's top 10" in caption and "at random" in caption


def test_a_token_from_outside_the_top_comes_with_its_sampling_probability(engine):
    """The engine reports the sampling probability of every drawn token, from inside the top
    candidates or not, equal to a fresh forward pass's distribution, and the step's chart shows it."""
    final = run(n=40, temperature=2.0, top_k=0, top_p=1.0, seed=7)
    steps = final.steps[0]
    outside = [i for i, s in enumerate(steps) if drawn_rank(s) is None]
    inside = [i for i, s in enumerate(steps) if drawn_rank(s) is not None]
    assert outside and inside  # at temperature 2 some draws come from far down the list
    s = settings(2.0)
    for i in (inside[-1], *outside[:3]):
        seen = final.params.prompt_ids + final.sample_ids(0)[:i]  # the prompt and the tokens drawn before step i
        p = nt.next_token_distribution(seen, RES.engine()).probabilities(s)[steps[i].token.token_id]
        assert p == pytest.approx(steps[i].token.sample_probability, rel=1e-3)
    fig, caption = figures.step_figure(final, 0, outside[0] + 1)
    assert fig.data[2].x[0] == pytest.approx(steps[outside[0]].token.sample_probability) and "outside" in caption
    assert f"Step {outside[0] + 1}:" in fig.layout.title.text


def test_captions_and_stats_say_why_a_less_likely_token_came_out(engine):
    final = run(n=24, temperature=1.5)
    ranks = [drawn_rank(s) for s in final.steps[0]]
    others = sum(r != 1 for r in ranks)
    assert others > 0
    assert f"{others} of the 24 tokens" in views.stats_markdown(final)
    first_likely = ranks.index(1)
    assert figures.step_caption(final.steps[0][first_likely], settings(1.5)) == "The token drawn is the model's most likely one."
    greedy = run(n=8, temperature=0.0)
    assert all(drawn_rank(s) == 1 for s in greedy.steps[0]) and "not the model's most likely" not in views.stats_markdown(greedy)


def test_whitespace_tokens_are_drawn_visibly(engine):
    final = run(prompt="HAMLET:", n=12, temperature=0.0)  # greedy: a new line comes first
    html = views.tokens_html(final)
    assert '<span class="gen-ws">↵' in html
    for step in final.steps[0]:
        if not step.token.text.strip():
            assert views._token_html(step.token.text).startswith('<span class="gen-ws">')


# --- one token at a time -------------------------------------------------------------------------


def test_next_token_appends_one_drawn_token_and_repeats_with_the_seed(engine):
    from playground.ui.generation import Generations, step_seed

    ui_next_token = Generations(RES).ui_next_token

    prompt = "ROMEO:\nBut soft,"
    out = ui_next_token(prompt, 0.8, 50, 0.95, 42)
    new_prompt, html, stats, state = out[:4]
    assert new_prompt.startswith(prompt) and len(new_prompt) > len(prompt) and state.new_tokens == 1
    assert "**1** new token" in stats and html.count('class="gen-tok"') == 1
    assert ui_next_token(prompt, 0.8, 50, 0.95, 42)[0] == new_prompt  # same prompt, same seed: same token
    fig, caption = out[6:8]
    assert fig.layout.title.text.startswith("Step 1:") and caption.startswith("The token drawn is")
    # The next step draws with another seed (the prompt grew), not the same random number.
    assert step_seed(42, 5) != step_seed(42, 6)
    greedy = ui_next_token(new_prompt, 0.0, 0, 1.0, 42)
    assert drawn_rank(greedy[3].steps[0][0]) == 1


def _shown_percent(text: str) -> float:
    """A bar's label ("12.3%", "0.12%") as a probability."""
    assert text.endswith("%"), text
    return float(text[:-1]) / 100


def test_the_candidates_chart_shows_what_pytorch_and_the_sampling_definitions_give(engine):
    """What a learner reads on each step's chart, against PyTorch's forward on the whole text so
    far (``GPT2LMHeadModel``'s weights, no cache) and the definitions of temperature, top-k and
    top-p: the model's 10 most likely tokens, most likely at the top, each labelled with its text
    (whitespace drawn) and id; their model probabilities; the distribution drawn from; the drawn
    token's own bar and the title's "p = ...". Generated on the fp32 file (the PyTorch weights
    exactly; the app's CPU file is 8-bit). The chart is built without plotly's validators (fast
    for many learners at once): plotly's own accept it."""
    import plotly.graph_objects as go
    import torch

    from export import artifact_paths
    from model import get_tokenizer  # tiktoken's gpt2 encoding, read offline
    from playground.tokens import decode, token_text

    T, K, P = 1.5, 50, 0.95
    fp32 = resources.open_engine(artifact_paths()["fp32"])
    for final in streaming.generate(fp32, streaming.prepare(RES, "HAMLET:\n", 6, T, K, P, 3, 1), token_text, decode):
        pass
    tok, model = get_tokenizer(), RES.model()
    whitespace = {" ": "⋅", "\t": "→", "\n": "↵", "\r": "␍"}

    def label(i: int) -> str:
        text = tok.decode_single_token_bytes(i).decode("utf-8", errors="replace")
        return "".join(whitespace.get(ch, ch) for ch in text) + f"  #{i}"

    outside = 0
    for i, step in enumerate(final.steps[0]):
        seen = final.params.prompt_ids + final.sample_ids(0)[:i]
        with torch.no_grad():
            logits = model(torch.tensor([seen])).logits[0, -1].double().numpy()
        p = np.exp(logits - logits.max())
        p /= p.sum()
        q = np.exp((logits - logits.max()) / T)  # drawn from: softmax(logits / T), ...
        q /= q.sum()
        kept = np.argsort(-q, kind="stable")[:K]  # ... its K most likely, renormalised, ...
        w = q[kept] / q[kept].sum()
        kept = kept[(np.cumsum(w) - w) < P]  # ... the fewest whose mass reaches P, renormalised
        drawn_from = np.zeros_like(q)
        drawn_from[kept] = q[kept] / q[kept].sum()

        drawn = step.token.token_id
        top = [int(t) for t in np.argsort(-p, kind="stable")[:10]]
        rows = ([drawn] if drawn not in top else []) + top[::-1]  # bottom to top: the most likely at the top
        outside += drawn not in top
        fig = figures.candidates_figure(step, settings=settings(T, K, P))
        go.Figure(fig.to_dict())  # plotly's validators raise on a property it does not know
        model_bars, sampled_bars, drawn_bar = fig.data
        assert [model_bars.name, sampled_bars.name, drawn_bar.name] == [
            "model (temperature 1)", "drawn from (temperature 1.5, top-k 50, top-p 0.95)", "the token drawn"]
        assert list(model_bars.y) == [label(t) for t in rows] == list(fig.layout.yaxis.categoryarray)
        np.testing.assert_allclose(model_bars.x, p[rows], atol=1e-4)
        others = [t for t in rows if t != drawn]
        assert list(sampled_bars.y) == [label(t) for t in others]
        np.testing.assert_allclose(sampled_bars.x, drawn_from[others], atol=1e-4)
        for text, t in zip(sampled_bars.text, others):
            assert _shown_percent(text) == pytest.approx(drawn_from[t], abs=max(5e-4, drawn_from[t] * 0.05) + 1e-4), (text, t)
        assert list(drawn_bar.y) == [label(drawn)] and drawn_bar.x[0] == pytest.approx(drawn_from[drawn], abs=1e-4)
        assert drawn_from[drawn] > 0  # it could be drawn at all
        title = fig.layout.title.text.replace("<br>", " ")
        assert title.startswith(f"Step {i + 1}: drew “{label(drawn).rsplit('  #', 1)[0]}” (p = ")
        assert _shown_percent(title.rsplit("(p = ", 1)[1].rstrip(")")) == pytest.approx(drawn_from[drawn], abs=5e-4)
    assert 0 < outside < len(final.steps[0])  # both kinds of chart checked: seed 3 draws one token from outside the top 10


def test_the_candidates_chart_has_the_look_of_every_chart():
    """Written as plotly's JSON, the chart still gets ``plots.base_layout``'s template, title,
    margins, legend and height, whether its title takes one line or several."""
    import json

    import plotly.graph_objects as go

    from playground.plots import base_layout, base_layout_dict

    for title in ("Step 1", "A title long enough to be wrapped onto a second line and onto a third one"):
        assert base_layout_dict(title, height=345) == json.loads(base_layout(go.Figure(), title, height=345).to_json())["layout"]
    ours = json.loads(figures.candidates_figure(_step(3)).to_json())["layout"]
    reference = json.loads(base_layout(go.Figure(), ours["title"]["text"].replace("<br>", " "), height=ours["height"]).to_json())["layout"]
    for key in ("template", "title", "legend", "height"):
        assert ours[key] == reference[key], key


def test_next_token_keeps_the_earlier_steps_newest_first_and_bounded(wired, monkeypatch):
    """Each "Next token" click through the page's own wiring (the session's result key carried
    from click to click): the steps so far stay listed under the chart, newest first, each with
    the token drawn and the model's candidates then; at most HISTORY_STEPS of them; a prompt typed
    anew starts the list again."""
    import re

    from playground.ui.generation import Generations

    monkeypatch.setattr("playground.generation.state.HISTORY_STEPS", 3)
    step = wired[Generations.ui_next_token]
    prompt, key, drawn = "ROMEO:\nBut soft,", None, []
    for _ in range(5):
        out = step(prompt, 0.0, 0, 1.0, 42, "full", key)  # greedy: the drawn token is the first candidate
        new_prompt, key, history = out[0], out[3], out[8]
        drawn.append(new_prompt[len(prompt):])
        prompt = new_prompt
    assert out[-1] == ""  # no error
    rows = re.findall(r"<tr><td>(\d+)</td><td><code>(.*?)</code>", history)
    assert [int(n) for n, _ in rows] == [5, 4, 3]  # newest first, the last 3, numbered on past the cut
    from playground.tokens import visible_whitespace

    assert [t for _, t in rows] == [html_escape(visible_whitespace(t)) for t in drawn[::-1][:3]]
    assert "the last 3" in history and history.count("gen-hist-drawn") == 3
    fresh = step("KING HENRY.\n", 0.0, 0, 1.0, 42, "full", key)
    assert len(re.findall(r"<tr><td>", fresh[8])) == 1 and "the last" not in fresh[8]


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_next_token_from_the_default_prompt_adds_a_word_and_says_what_it_appended(engine):
    """The tab opens on a prompt cut mid-sentence: its first Next token, at the page's settings,
    adds a word, not a line break, and the stats say what joined the prompt."""
    from playground.ui.generation import Generations

    ui_next_token = Generations(RES).ui_next_token
    prompt = EXAMPLE_PROMPTS[0]
    d = DEFAULTS
    out = ui_next_token(prompt, d["temperature"], d["top_k"], d["top_p"], d["seed"])
    appended = out[0][len(prompt):]
    assert out[0].startswith(prompt) and appended.strip(), repr(appended)
    assert f"appended “{appended.replace(' ', '⋅')}”" in out[2]
    greedy = ui_next_token(prompt, 0.0, 0, 1.0, 0)[0][len(prompt):]
    assert greedy.strip(), repr(greedy)
