"""Embeddings tab: the safe expression parser, arithmetic and nearest tokens, similarity, PCA,
static vs contextual embeddings. Expected values come from the embedding table itself, computed
independently here, and from geometry (cos(v, v) = 1, PCA of 3 points in 2D is exact)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from playground import limits
from playground.assets import load_token_counts
from playground.embeddings import (
    DEFAULT_WORDS,
    contextual_embeddings,
    embedding_arithmetic,
    pca_projection,
    word_similarity,
    word_vector,
)
from playground.expressions import parse_expression
from playground.resources import get_encoding, shipped_model
from playground.validation import InputError
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app


def wte(token: str) -> np.ndarray:
    (tid,) = get_encoding().encode(token)
    return shipped_model().wte.weight[tid].detach().numpy().astype(np.float64)


# --- parser -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, coefs",
    [
        ("king - man + woman", {"king": 1, "man": -1, "woman": 1}),
        ("0.5*a + b", {"a": 0.5, "b": 1}),
        ("-(king - man)/2 + 2*woman", {"king": -0.5, "man": 0.5, "woman": 2}),
        ("3 * (a + b) - a", {"a": 2, "b": 3}),
        ("--a", {"a": 1}),
        ("a - a + b", {"b": 1}),
        ("o'er + thee", {"o'er": 1, "thee": 1}),
        ("  king\t-\nman  ", {"king": 1, "man": -1}),
        ("1.5e1 * a", {"a": 15}),
    ],
)
def test_parser_linear_forms(text, coefs):
    assert parse_expression(text).coefs == pytest.approx(coefs)


def test_parser_formula_text():
    assert parse_expression("king - man + woman").formula() == "king − man + woman"
    assert parse_expression("0.5*a + b").formula() == "0.5·a + b"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("king -", "ends too early"),
        ("(king + man", "missing '\\)'"),
        ("king + man)", "unbalanced"),
        ("()", "unexpected '\\)'"),
        ("__import__('os')", "calls are not supported|unexpected character"),
        ("open('x')", "calls are not supported"),
        ("king.__class__", "unexpected character '.'"),
        ("os.system('ls')", "unexpected character '.'"),
        ("lambda: 0", "unexpected character ':'"),
        ("a; b", "unexpected character ';'"),
        ("a ** 2", "unexpected '\\*'"),
        ("[king]", "unexpected character"),
        ("king * queen", "multiply two word vectors"),
        ("2 / king", "divide by a word"),
        ("king / 0", "division by zero"),
        ("king + 1", "number and a word"),
        ("1 + 2", "no word"),
        ("king king", "missing operator"),
        ("2king", "missing operator"),
        ("king - king", "cancel"),
        ("1e400 * king", "out of range"),
        ("5000 * king", "out of range"),
        ("-" * 20 + "king", "nested too deeply"),
        ("(" * 20 + "king" + ")" * 20, "nested too deeply"),
        ("a" + " + a" * limits.MAX_EXPRESSION_TERMS, "too many words"),
        ("k" * (limits.MAX_EXPRESSION_CHARS + 1), "limit"),
        ("king\x00", "control character"),
        (None, "empty"),
        (12, "must be text"),
    ],
)
def test_parser_refuses(text, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_expression(text)


# --- words and arithmetic ----------------------------------------------------------------------

def test_word_uses_leading_space_token():
    w = word_vector("king")
    assert w.ids == get_encoding().encode(" king") and len(w.ids) == 1
    np.testing.assert_allclose(w.vector, wte(" king"), atol=1e-6)
    assert word_vector("king", leading_space=False).ids == get_encoding().encode("king")


def test_multi_token_word_is_the_mean_and_says_so():
    ids = get_encoding().encode(" duchess")
    assert len(ids) > 1  # GPT-2 splits it
    w = word_vector("duchess")
    expected = shipped_model().wte.weight[ids].detach().numpy().mean(axis=0)
    np.testing.assert_allclose(w.vector, expected, atol=1e-6)
    assert w.multi_token and "mean" in w.describe()
    r = embedding_arithmetic("duchess - woman + man", 3)
    assert "duchess" in r.notice and "mean" in r.notice


def test_unknown_word_is_refused():
    counts = load_token_counts()
    enc = get_encoding()
    unseen = next(
        text for tid in np.flatnonzero(counts == 0)
        if (text := enc.decode([int(tid)])).startswith(" ") and text[1:].isalpha() and enc.encode(text) == [int(tid)]
    )
    with pytest.raises(InputError, match="unknown to the model"):
        word_vector(unseen.strip())
    with pytest.raises(InputError, match="unknown to the model"):
        embedding_arithmetic(f"king - {unseen.strip()}")


def test_arithmetic_vector_and_neighbours_by_brute_force():
    r = embedding_arithmetic("king - man + woman", top_k=8)
    expected = wte(" king") - wte(" man") + wte(" woman")
    np.testing.assert_allclose(r.vector, expected, atol=1e-5)
    # brute force over every token seen in training, input words excluded
    counts = load_token_counts()
    matrix = shipped_model().wte.weight.detach().numpy().astype(np.float64)
    sims = matrix @ expected / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(expected))
    inputs = {get_encoding().encode(w)[0] for w in (" king", " man", " woman")}
    candidates = [i for i in np.argsort(-sims) if counts[i] > 0 and i not in inputs][:8]
    assert [n.id for n in r.neighbours] == [int(i) for i in candidates]
    np.testing.assert_allclose([n.similarity for n in r.neighbours], sims[candidates], atol=1e-5)
    assert all(n.count > 0 for n in r.neighbours)
    assert r.formula == "king − man + woman" and len(r.rows()) == 8
    assert len(r.figure.data[0].x) == 8


def test_a_word_is_its_own_nearest_token_when_not_excluded():
    r = embedding_arithmetic("queen", top_k=3, exclude_inputs=False)
    assert r.neighbours[0].token == "⋅queen" and r.neighbours[0].similarity == pytest.approx(1.0, abs=1e-5)
    r = embedding_arithmetic("queen", top_k=3)
    assert all(n.token != "⋅queen" for n in r.neighbours)


def test_scaling_does_not_change_the_neighbours():
    # cosine similarity ignores length: 0.5*a + 0.5*b points where a + b does
    a = embedding_arithmetic("0.5*king + 0.5*queen", 5)
    b = embedding_arithmetic("king + queen", 5)
    assert [n.id for n in a.neighbours] == [n.id for n in b.neighbours]


def test_tokens_equally_near_come_in_id_order_as_the_page_gives_them():
    """Among tokens exactly as near (ties: equal rows), the nearest come lowest id first, as the
    static edition's search (tabs/embeddings.js) keeps them, whichever of them a partial sort
    would reach first: 30 tied rows between untied ones, 5 asked for."""
    from playground.embeddings import _Index, _neighbours

    C = 4
    matrix = np.zeros((40, C), np.float32)
    matrix[:, 1] = 1.0  # not near
    matrix[5:35] = [1.0, 0.0, 0.0, 0.0]  # 30 rows as near as can be
    counts = np.ones(40, np.int64)
    index = _Index(matrix, np.arange(40), matrix / np.linalg.norm(matrix, axis=1, keepdims=True), counts)
    query = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    assert [n.id for n in _neighbours(index, query, 5, set())] == [5, 6, 7, 8, 9]
    assert [n.id for n in _neighbours(index, query, 5, {5, 7})] == [6, 8, 9, 10, 11]
    assert [n.id for n in _neighbours(index, query, 40, set())][:31] == [*range(5, 35), 0]


@pytest.mark.parametrize("top_k", [0, limits.MAX_NEIGHBOURS + 1, -3, float("nan"), "ten", 2.5, None])
def test_top_k_refused(top_k):
    with pytest.raises(InputError, match="top_k"):
        embedding_arithmetic("king", top_k)


def test_similarity():
    assert word_similarity("king", "king").similarity == pytest.approx(1.0, abs=1e-6)
    s = word_similarity("king", "queen")
    a, b = wte(" king"), wte(" queen")
    assert s.similarity == pytest.approx(float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), abs=1e-5)
    assert word_similarity("queen", "king").similarity == pytest.approx(s.similarity, abs=1e-7)
    with pytest.raises(InputError, match="more than one word"):
        word_similarity("king queen", "man")
    with pytest.raises(InputError, match="empty"):
        word_similarity("", "man")


# --- PCA --------------------------------------------------------------------------------------

def test_default_words_are_single_tokens_seen_in_training():
    """The PCA's default list works as it opens: each word is one token the model trained on
    (none averaged over pieces, none refused as unknown), and its vector is that token's row."""
    counts = load_token_counts()
    matrix = shipped_model().wte.weight.detach().numpy()
    for w in DEFAULT_WORDS:
        ids = get_encoding().encode(" " + w)
        assert len(ids) == 1 and counts[ids[0]] > 0, f"{w}: tokens {ids}, seen {counts[ids].tolist()} times"
        v = word_vector(w)
        assert v.ids == ids and not v.multi_token
        np.testing.assert_array_equal(v.vector, matrix[ids[0]])


def test_pca_of_three_words_keeps_their_distances():
    words = ["king", "queen", "man"]
    r = pca_projection(words, expression="king", dims="2D")
    x = np.stack([wte(" " + w) for w in words])
    for i in range(3):
        for j in range(3):
            assert np.linalg.norm(r.coords[i] - r.coords[j]) == pytest.approx(np.linalg.norm(x[i] - x[j]), rel=1e-4)
    np.testing.assert_allclose(r.result_coords, r.coords[0], atol=1e-4)  # "king" lands on king
    assert sum(r.explained_variance) == pytest.approx(1.0, abs=1e-3)


def test_pca_default_list_2d_and_3d():
    r2 = pca_projection()
    assert r2.coords.shape == (len(DEFAULT_WORDS), 2) and r2.result_coords.shape == (2,)
    assert r2.explained_variance == sorted(r2.explained_variance, reverse=True)
    assert any("★" in str(t.name) for t in r2.figure.data)  # the star, named in the legend
    r3 = pca_projection("king, queen, man, woman", expression="", dims="3D")
    assert r3.coords.shape == (4, 3) and r3.result_coords is None
    assert r3.figure.data[0].type == "scatter3d"
    assert json.loads(json.dumps(r2.to_dict()))["words"][0] == "king"


@pytest.mark.parametrize(
    "words, dims, fragment",
    [
        ("king, queen", "2D", "give 3 to"),
        (", ".join(f"w{i}" for i in range(limits.MAX_PCA_WORDS + 1)), "2D", "give 3 to"),
        ("king, queen, man", "4D", "projection"),
        (42, "2D", "word list"),
        ("", "2D", "empty"),
    ],
)
def test_pca_refuses(words, dims, fragment):
    with pytest.raises(InputError, match=fragment):
        pca_projection(words, dims=dims)


# --- static vs contextual ----------------------------------------------------------------------

def test_static_vs_contextual():
    r = contextual_embeddings("bear", "I cannot bear this grief.", "Exit, pursued by a bear.")
    assert r.static_similarity == pytest.approx(1.0, abs=1e-6)  # one row of the table, twice
    assert r.contextual_similarity < 0.999  # the last hidden states depend on the context
    enc = get_encoding()
    ids_a = enc.encode("I cannot bear this grief.")
    pos = r.positions[0][0]
    assert ids_a[pos] == enc.encode(" bear")[0]
    with torch.no_grad():
        hidden = shipped_model()(torch.tensor([ids_a]), head=False).hidden[0, pos].numpy()
    static = wte(" bear")
    cos = float(hidden @ static / np.linalg.norm(hidden) / np.linalg.norm(static))
    assert r.static_vs_contextual[0] == pytest.approx(cos, abs=1e-5)
    assert r.matrix.shape == (4, 4) and np.allclose(np.diag(r.matrix), 1.0, atol=1e-5)


def test_word_at_sentence_start_is_found_without_space():
    r = contextual_embeddings("Bear", "Bear with me.", "The Bear is here.")
    assert r.positions[0] == [0]
    assert "tokenized differently" in r.notice


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("bear", "No such word here.", "a bear"), "does not contain"),
        (("", "a", "b"), "empty"),
        (("bear", "", "a bear"), "empty"),
        (("bear", "x" * (limits.MAX_SENTENCE_CHARS + 1), "a bear"), "limit"),
    ],
)
def test_contextual_refuses(args, fragment):
    with pytest.raises(InputError, match=fragment):
        contextual_embeddings(*args)


def test_cosine_box_takes_the_tutorials_expression_and_shows_the_vectors():
    """cos(queen + man - woman, king), the Transformer tutorial's own, against the embedding table by hand."""
    from model import get_tokenizer
    from playground.embeddings import word_similarity
    from playground.resources import shipped_model
    from playground.ui.embeddings import Handlers

    wte = shipped_model().wte.weight.detach().numpy().astype(np.float64)
    enc = get_tokenizer()
    (queen,), (man,), (woman,), (king,) = (enc.encode(" " + w) for w in ("queen", "man", "woman", "king"))
    v = wte[queen] + wte[man] - wte[woman]
    expected = v @ wte[king] / np.linalg.norm(v) / np.linalg.norm(wte[king])
    r = word_similarity("queen + man - woman", "king")
    assert r.similarity == pytest.approx(expected, abs=1e-5) and r.a.expression
    text = Handlers(RES).ui_similarity("king", "queen", True)
    assert f"wte.weight[{king}]" in text and f"{wte[king][0]:.3f}" in text and "(256 numbers)" in text


def test_pca_star_is_a_point_named_in_the_legend_not_a_label_over_queen():
    from playground.embeddings import pca_projection

    fig = pca_projection().figure
    star = fig.data[-1]
    assert star.mode == "markers" and star.name.startswith("★") and star.text is None
    words = fig.data[0]
    assert "queen" in list(words.text)


def test_the_searched_tokens_are_worded_by_what_the_app_knows_of_the_model(tmp_path):
    """The shipped model: "its training text"; a model given with --model DIR (here the shipped
    weights copied elsewhere: the app cannot tell what it was trained on) is not said to have
    been trained on it."""
    import shutil

    from model import WEIGHTS_DIR
    from playground.embeddings import embedding_arithmetic
    from playground.resources import load_model

    shipped = embedding_arithmetic("king - man + woman", top_k=3)
    assert "occur in its training text (Shakespeare)" in shipped.notice
    folder = tmp_path / "other"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(WEIGHTS_DIR / name, folder / name)
    model = load_model(folder)
    other = embedding_arithmetic("king - man + woman", top_k=3, model=model)
    assert "its training text" not in other.notice and "the app does not know" in other.notice
    assert f"the {shipped.notice.split('Searched the ')[1].split(' ')[0]} tokens" in other.notice  # the same count
    counts, enc = load_token_counts(), get_encoding()
    unseen = next(text for tid in np.flatnonzero(counts == 0)
                  if (text := enc.decode([int(tid)])).startswith(" ") and text[1:].isalpha() and enc.encode(text) == [int(tid)])
    with pytest.raises(InputError, match="the shipped model was trained on") as err:
        embedding_arithmetic(f"king - {unseen.strip()}", model=model)
    assert "were never trained" not in str(err.value)
    assert "its training text" in embedding_arithmetic("king - man + woman", top_k=3).notice


def test_the_projections_caption_gives_the_variance_as_the_chart_title_does():
    """One precision for one number: the caption once said PC1 15 % under a title saying 14.7 %."""
    import re

    from playground.ui.embeddings import Handlers

    fig, caption = Handlers(RES).ui_projection(DEFAULT_WORDS, "", "2D", True)
    explained = pca_projection(DEFAULT_WORDS, "", "2D", True).explained_variance
    want = [f"PC{i + 1} {100 * v:.1f}%" for i, v in enumerate(explained)]  # one decimal, from the projection itself
    assert re.findall(r"PC\d \d+\.\d%", fig.layout.title.text) == want
    assert re.findall(r"PC\d \d+\.\d%", caption) == want, caption
