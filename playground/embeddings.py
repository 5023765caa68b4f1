"""Embeddings tab: arithmetic on the model's token embeddings, similarity, PCA, static vs contextual.

Words become GPT-2 tokens with the leading-space convention (" king", as the word appears inside
a sentence). A word that splits into several tokens is represented by the mean of their
embeddings, and the result says so. Nearest neighbours are searched by cosine similarity among
the tokens that occur in the training text only (``playground/assets``): the embeddings of the
others were never trained and would be noise.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go
import torch

from model import GPT

from . import limits
from .assets import load_token_counts
from .expressions import LinearForm, parse_expression
from .memo import Memo
from .plots import base_layout, bar_plot, heatmap
from .resources import is_shipped, shipped_model
from .similarity import cosine, cosine_matrix, unit_rows
from .tokens import encode, encode_prompt, visible_token
from .validation import InputError, validate_bool, validate_choice, validate_int, validate_text

__all__ = [
    "DEFAULT_WORDS",
    "DEFAULT_EXPRESSION",
    "EXAMPLE_EXPRESSIONS",
    "CONTEXT_EXAMPLE",
    "WordVector",
    "Neighbour",
    "ArithmeticResult",
    "SimilarityResult",
    "ProjectionResult",
    "ContextResult",
    "word_vector",
    "word_or_expression",
    "embedding_arithmetic",
    "word_similarity",
    "pca_projection",
    "contextual_embeddings",
]

DEFAULT_EXPRESSION = "king - man + woman"
EXAMPLE_EXPRESSIONS = (DEFAULT_EXPRESSION, "0.5*king + 0.5*queen", "father - man + woman", "lord - man + lady")
DEFAULT_WORDS = (
    "king", "queen", "man", "woman", "lord", "lady", "prince", "princess", "father", "mother",
    "son", "daughter", "brother", "sister", "husband", "wife", "boy", "girl", "uncle", "sir",
)
# The same word in two senses (Shakespeare's most famous stage direction for the second).
CONTEXT_EXAMPLE = ("bear", "I cannot bear this grief any longer.", "Exit, pursued by a bear.")


@dataclass(frozen=True)
class _Index:
    """The model's embedding matrix and the unit vectors of the tokens seen in training."""

    matrix: np.ndarray  # [V, C] float32 token embeddings (wte)
    seen_ids: np.ndarray  # [S] ids that occur in the training text
    seen_unit: np.ndarray  # [S, C] their embeddings divided by their norms
    counts: np.ndarray  # [V] occurrences in training


# One index per model searched: the model shown and the Compare tab's second one. Keyed by a weak
# reference, so that an index never keeps a model alive (a comparison model let go is freed; its
# index, which holds no reference to it, leaves as soon as the two models in use are searched).
_indexes: Memo[weakref.ref[GPT], _Index] = Memo(size=2)


def _build_index(ref: weakref.ref[GPT]) -> _Index:
    model = ref()
    assert model is not None  # the caller holds it
    matrix = model.wte.weight.detach().float().cpu().numpy().copy()
    counts = load_token_counts()[: matrix.shape[0]]
    seen = np.flatnonzero(counts > 0)
    vecs = matrix[seen]
    return _Index(matrix, seen, unit_rows(vecs).astype(np.float32), counts)


def _index(model: GPT) -> _Index:
    return _indexes.get(weakref.ref(model), _build_index)


def searched_text(model: GPT) -> str:
    """Where the searched tokens come from, as far as the app knows the model: the shipped
    model's own training text, or, for any other model, this project's Shakespeare text, which
    that model may never have seen."""
    if is_shipped(model):
        return "its training text (Shakespeare)"
    return ("this project's Shakespeare text (the shipped model's training text; what this model was "
            "trained on, the app does not know)")


@dataclass(frozen=True)
class WordVector:
    """A word as the model sees it: its tokens and the (mean) embedding."""

    word: str
    ids: list[int]
    pieces: list[str]
    vector: np.ndarray = field(repr=False)
    expression: bool = False  # an expression's result (queen + man - woman), not one word

    @property
    def multi_token(self) -> bool:
        return len(self.ids) > 1 and not self.expression

    def describe(self) -> str:
        if self.expression:
            return f"{self.word} → a vector computed from its words' embeddings"
        shown = " + ".join(f"'{p}' ({i})" for p, i in zip(self.pieces, self.ids))
        if self.multi_token:
            return f"{self.word} → {len(self.ids)} tokens {shown}: the mean of their embeddings"
        return f"{self.word} → token {shown}"


def word_vector(word: Any, *, leading_space: bool = True, model: GPT | None = None) -> WordVector:
    """The embedding of ``word``: its token's row of the embedding table, or the mean of its
    tokens' rows when it splits into several. Words whose tokens never occur in the training
    text are refused (their embeddings were never trained)."""
    word = validate_text(word, name="word", max_chars=limits.MAX_WORD_CHARS).strip()
    if any(ch.isspace() for ch in word):
        raise InputError(f"{word!r} is more than one word: give a single word (no spaces)")
    model = model or shipped_model()
    index = _index(model)
    ids = encode((" " if leading_space else "") + word, special=False)
    if len(ids) > limits.MAX_WORD_TOKENS:
        raise InputError(f"{word!r} splits into {len(ids)} tokens; at most {limits.MAX_WORD_TOKENS} are averaged")
    pieces = [visible_token(i) for i in ids]
    unseen = [p for p, i in zip(pieces, ids) if index.counts[i] == 0]
    if unseen:
        why = ("training text (Shakespeare), so their embeddings were never trained" if is_shipped(model)
               else "Shakespeare text the shipped model was trained on, the tokens this tab compares")
        raise InputError(
            f"{word!r} is unknown to the model: its token(s) {', '.join(map(repr, unseen))} never occur in the "
            f"{why}; try another word"
        )
    return WordVector(word, ids, pieces, index.matrix[ids].mean(axis=0))


@dataclass(frozen=True)
class Neighbour:
    id: int
    token: str  # the token's text, whitespace visible (⋅queen)
    similarity: float
    count: int  # occurrences in the training text


def _neighbours(index: _Index, vector: np.ndarray, top_k: int, exclude: set[int]) -> list[Neighbour]:
    sims = index.seen_unit @ unit_rows(vector).astype(np.float32)
    if exclude:
        sims = np.where(np.isin(index.seen_ids, list(exclude)), -np.inf, sims)
    k = min(top_k, int(np.isfinite(sims).sum()))
    # A whole stable sort (a millisecond for the seen tokens): equally near tokens come lowest id
    # first, as the static edition keeps them, where a partial sort takes whichever it reaches.
    best = np.argsort(-sims, kind="stable")[:k]
    out = []
    for j in best:
        tid = int(index.seen_ids[j])
        out.append(Neighbour(tid, visible_token(tid), float(sims[j]), int(index.counts[tid])))
    return out


@dataclass(frozen=True)
class ArithmeticResult:
    expression: str
    formula: str  # canonical linear form, e.g. "king − man + woman"
    coefficients: dict[str, float]
    words: list[WordVector]
    vector: np.ndarray = field(repr=False)
    neighbours: list[Neighbour]
    excluded_inputs: bool
    notice: str
    figure: go.Figure = field(repr=False)

    def rows(self) -> list[list[Any]]:
        """Table rows: rank, token, id, cosine similarity, count in training."""
        return [[r + 1, n.token, n.id, round(n.similarity, 4), n.count] for r, n in enumerate(self.neighbours)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "formula": self.formula,
            "words": [{"word": w.word, "ids": w.ids, "tokens": w.pieces, "mean_of_tokens": w.multi_token} for w in self.words],
            "neighbours": [{"token": n.token, "id": n.id, "similarity": round(n.similarity, 6), "count": n.count} for n in self.neighbours],
            "excluded_inputs": self.excluded_inputs,
            "notice": self.notice,
        }


def _combine(form: LinearForm, leading_space: bool, model: GPT) -> tuple[list[WordVector], np.ndarray]:
    words = [word_vector(w, leading_space=leading_space, model=model) for w in form.coefs]
    vector = sum(c * w.vector for c, w in zip(form.coefs.values(), words))
    return words, np.asarray(vector, dtype=np.float32)


def embedding_arithmetic(
    expression: Any = DEFAULT_EXPRESSION,
    top_k: Any = 10,
    exclude_inputs: Any = True,
    leading_space: Any = True,
    model: GPT | None = None,
) -> ArithmeticResult:
    """Evaluate ``expression`` on the token embeddings and list the ``top_k`` nearest tokens by
    cosine similarity among those seen in training (the input words' tokens left out by default)."""
    form = parse_expression(expression)
    top_k = validate_int(top_k, name="top_k", minimum=limits.MIN_NEIGHBOURS, maximum=limits.MAX_NEIGHBOURS)
    exclude_inputs = validate_bool(exclude_inputs, name="exclude input words")
    leading_space = validate_bool(leading_space, name="leading space")
    model = model or shipped_model()
    words, vector = _combine(form, leading_space, model)
    if not np.any(vector):
        raise InputError("the result is the zero vector (the words' embeddings cancel): nothing to compare with")
    exclude = {i for w in words for i in w.ids} if exclude_inputs else set()
    neighbours = _neighbours(_index(model), vector, top_k, exclude)
    notes = [w.describe() for w in words if w.multi_token]
    notes.append(
        f"Searched the {_index(model).seen_ids.size:,} tokens that occur in {searched_text(model)}"
        + (", leaving out the input words' tokens." if exclude_inputs else ".")
    )
    fig = bar_plot(
        [n.token for n in neighbours], [n.similarity for n in neighbours],
        f"Nearest tokens to {form.formula()} (cosine similarity)", x_title="cosine similarity",
        hover="%{x:.4f}<extra></extra>", height=max(320, 26 * len(neighbours) + 120),
    )
    return ArithmeticResult(expression, form.formula(), dict(form.coefs), words, vector, neighbours, exclude_inputs, " ".join(notes), fig)


@dataclass(frozen=True)
class SimilarityResult:
    a: WordVector
    b: WordVector
    similarity: float
    notice: str

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.word, "b": self.b.word, "similarity": self.similarity, "notice": self.notice}


def word_or_expression(text: Any, *, leading_space: bool = True, model: GPT | None = None) -> WordVector:
    """A word's embedding, or an expression's vector (``queen + man - woman``: the Transformer tutorial's
    cos(queen + man − woman, king)) when ``text`` holds an operator."""
    model = model or shipped_model()
    if isinstance(text, str) and any(op in text for op in "+-*"):
        form = parse_expression(text)
        words, vector = _combine(form, leading_space, model)
        return WordVector(form.formula(), [i for w in words for i in w.ids], [p for w in words for p in w.pieces], vector, True)
    return word_vector(text, leading_space=leading_space, model=model)


def word_similarity(a: Any, b: Any, leading_space: Any = True, model: GPT | None = None) -> SimilarityResult:
    """Cosine similarity of two words' embeddings (multi-token words: the mean of their tokens;
    either may be an expression such as ``queen + man - woman``)."""
    leading_space = validate_bool(leading_space, name="leading space")
    model = model or shipped_model()
    wa = word_or_expression(a, leading_space=leading_space, model=model)
    wb = word_or_expression(b, leading_space=leading_space, model=model)
    notice = " ".join(w.describe() for w in (wa, wb) if w.multi_token)
    return SimilarityResult(wa, wb, cosine(wa.vector, wb.vector), notice)


@dataclass(frozen=True)
class ProjectionResult:
    words: list[str]
    coords: np.ndarray = field(repr=False)  # [n_words, dims]
    result_coords: np.ndarray | None = field(repr=False)  # [dims] for the expression, if any
    explained_variance: list[float]  # fraction of variance per component
    figure: go.Figure = field(repr=False)
    notice: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "words": self.words,
            "coords": np.round(self.coords, 5).tolist(),
            "result": None if self.result_coords is None else np.round(self.result_coords, 5).tolist(),
            "explained_variance": self.explained_variance,
            "notice": self.notice,
        }


def _word_list(words: Any) -> list[str]:
    if isinstance(words, str):
        words = validate_text(words, name="word list", max_chars=limits.MAX_WORD_LIST_CHARS)
        words = [w for w in words.replace(",", " ").split() if w]
    if not isinstance(words, (list, tuple)):
        raise InputError("word list must be words separated by commas or spaces, e.g. king, queen, man, woman")
    unique = list(dict.fromkeys(str(w).strip() if isinstance(w, str) else w for w in words))
    if not limits.MIN_PCA_WORDS <= len(unique) <= limits.MAX_PCA_WORDS:
        raise InputError(f"word list has {len(unique)} different words; give {limits.MIN_PCA_WORDS} to {limits.MAX_PCA_WORDS}")
    return unique


def pca_projection(
    words: Any = DEFAULT_WORDS,
    expression: Any = DEFAULT_EXPRESSION,
    dims: Any = "2D",
    leading_space: Any = True,
    model: GPT | None = None,
) -> ProjectionResult:
    """Project the words' embeddings on their first 2 or 3 principal components (PCA of the
    centred vectors, by SVD) and mark the expression's result, projected the same way.
    ``expression`` may be empty/None for no marked result."""
    dims = validate_choice(dims, ["2D", "3D"], name="projection")
    leading_space = validate_bool(leading_space, name="leading space")
    model = model or shipped_model()
    word_list = _word_list(words)
    vectors = [word_vector(w, leading_space=leading_space, model=model) for w in word_list]
    x = np.stack([v.vector for v in vectors]).astype(np.float64)
    k = 2 if dims == "2D" else 3
    mean = x.mean(axis=0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
    components = vt[:k]
    coords = (x - mean) @ components.T
    variance = s**2 / max(float((s**2).sum()), 1e-12)
    explained = [round(float(v), 4) for v in variance[:k]]

    result_coords, formula = None, None
    if expression is not None and str(expression).strip():
        form = parse_expression(expression)
        _, rvec = _combine(form, leading_space, model)
        result_coords = (rvec.astype(np.float64) - mean) @ components.T
        formula = form.formula()

    hover = [v.describe() for v in vectors]
    if k == 2:
        placed = coords if result_coords is None else np.vstack([coords, result_coords[None, :]])
        positions = _label_positions(placed, [*word_list, *([""] if formula else [])])  # the star: a point, no label
        traces = [go.Scatter(x=coords[:, 0], y=coords[:, 1], mode="markers+text", text=word_list,
                             textposition=positions[: len(word_list)], hovertext=hover, hoverinfo="text", name="words",
                             marker={"size": 9})]
        if result_coords is not None:
            # The star named in the legend and the hover, not beside it: it lands next to the word
            # it is about (queen) and its label covered that word.
            traces.append(go.Scatter(x=[result_coords[0]], y=[result_coords[1]], mode="markers", name=f"★ {formula}",
                                     hovertext=[f"★ {formula}"], hoverinfo="text",
                                     marker={"size": 16, "symbol": "star", "color": "crimson"}))
    else:
        # 3D labels cannot be placed apart (the view turns): small text on a large scene.
        traces = [go.Scatter3d(x=coords[:, 0], y=coords[:, 1], z=coords[:, 2], mode="markers+text", text=word_list,
                               textfont={"size": 11}, hovertext=hover, hoverinfo="text", name="words", marker={"size": 4})]
        if result_coords is not None:
            traces.append(go.Scatter3d(x=[result_coords[0]], y=[result_coords[1]], z=[result_coords[2]], mode="markers+text",
                                       text=[f"★ {formula}"], textfont={"size": 12, "color": "crimson"}, name=formula,
                                       marker={"size": 7, "symbol": "diamond", "color": "crimson"}))
    fig = go.Figure(traces)
    pct = ", ".join(f"PC{i + 1} {100 * v:.1f}%" for i, v in enumerate(explained))
    base_layout(fig, f"PCA of {len(word_list)} token embeddings ({pct} of the variance)", height=560 if k == 2 else 680)
    if k == 2:
        fig.update_layout(xaxis_title="PC1", yaxis_title="PC2")
    else:
        fig.update_layout(
            # The camera close in (the cloud fills the box) and the scene above the legend.
            scene={"xaxis_title": "PC1", "yaxis_title": "PC2", "zaxis_title": "PC3", "aspectmode": "cube",
                   "camera": {"eye": {"x": 1.25, "y": 1.25, "z": 0.8}}, "domain": {"x": [0, 1], "y": [0.06, 1]}},
            margin={"l": 0, "r": 0, "b": 10},
            legend={"y": 0, "yanchor": "bottom"},
        )
    multi = [v.describe() for v in vectors if v.multi_token]
    notice = ("Multi-token words: " + "; ".join(multi) + ".") if multi else ""
    return ProjectionResult(word_list, coords, result_coords, explained, fig, notice)


# Where a 2D label goes relative to its point, tried in this order.
_LABEL_SIDES = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom left")


def _label_positions(points: np.ndarray, labels: list[str], width_px: float = 560, height_px: float = 440) -> list[str]:
    """A side for each point's label so that labels overlap each other and the points as little
    as possible: greedy, densest first, on boxes estimated in pixels (7 px a character, 14 px
    high) for a plot of about ``width_px`` × ``height_px``."""
    xy = np.asarray(points, dtype=np.float64)[:, :2]
    span = np.maximum(xy.max(axis=0) - xy.min(axis=0), 1e-9)
    px = (xy - xy.min(axis=0)) / span * np.array([width_px, height_px])  # y grows upwards
    char_w, line_h, gap = 7.0, 14.0, 6.0

    def box(i: int, side: str) -> tuple[float, float, float, float]:
        w, (x, y) = char_w * len(labels[i]), px[i]
        if side.startswith("top"):
            y0 = y + gap
        elif side.startswith("bottom"):
            y0 = y - gap - line_h
        else:
            y0 = y - line_h / 2
        if side.endswith("center"):
            x0 = x - w / 2
        elif side.endswith("right"):
            x0 = x + gap
        else:
            x0 = x - gap - w
        return x0, y0, x0 + w, y0 + line_h

    def overlap(a: tuple, b: tuple) -> float:
        return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

    dots = [(x - 5, y - 5, x + 5, y + 5) for x, y in px]
    crowd = np.argsort([-np.sum(np.hypot(*(px - p).T) < 60) for p in px], kind="stable")
    placed: list[tuple] = []
    sides = [_LABEL_SIDES[0]] * len(xy)
    for i in crowd:
        cost = {side: sum(overlap(box(i, side), b) for b in placed) + sum(overlap(box(i, side), d) for d in dots)
                for side in _LABEL_SIDES}
        sides[i] = min(_LABEL_SIDES, key=lambda side: cost[side])  # ties keep the earlier side
        placed.append(box(i, sides[i]))
    return sides


@dataclass(frozen=True)
class ContextResult:
    word: str
    sentences: tuple[str, str]
    ids: tuple[list[int], list[int]]  # the word's token ids found in each sentence
    positions: tuple[list[int], list[int]]  # their positions in each sentence
    static_similarity: float  # input embeddings, sentence A vs B: 1 (the same table row)
    contextual_similarity: float  # last hidden states, A vs B
    static_vs_contextual: tuple[float, float]  # in A, in B
    matrix: np.ndarray = field(repr=False)  # 4x4 cosine similarities
    labels: list[str]
    figure: go.Figure = field(repr=False)
    notice: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "word": self.word,
            "static_similarity": self.static_similarity,
            "contextual_similarity": self.contextual_similarity,
            "static_vs_contextual": list(self.static_vs_contextual),
            "labels": self.labels,
            "matrix": np.round(self.matrix, 6).tolist(),
            "notice": self.notice,
        }


def _find(haystack: list[int], needle: list[int]) -> int:
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start : start + len(needle)] == needle:
            return start
    return -1


@torch.inference_mode()
def contextual_embeddings(
    word: Any = CONTEXT_EXAMPLE[0],
    sentence_a: Any = CONTEXT_EXAMPLE[1],
    sentence_b: Any = CONTEXT_EXAMPLE[2],
    model: GPT | None = None,
) -> ContextResult:
    """The same word in two sentences: its input embedding (static, one row of the table,
    identical in both) against the model's last hidden state at the word (contextual)."""
    word = validate_text(word, name="word", max_chars=limits.MAX_WORD_CHARS).strip()
    model = model or shipped_model()
    sentences, id_lists, positions, static, contextual = [], [], [], [], []
    for name, sentence in (("sentence A", sentence_a), ("sentence B", sentence_b)):
        ids = encode_prompt(sentence, name=name, max_chars=limits.MAX_SENTENCE_CHARS, max_tokens=model.config.block_size)
        # The word may open the sentence ("Bear ...") or follow a space (" bear").
        for variant in (" " + word, word):
            needle = encode(variant, special=False)
            start = _find(ids, needle)
            if start >= 0:
                break
        if start < 0:
            raise InputError(f"{name} does not contain the word {word!r} as whole tokens; use the word exactly as written there")
        span = list(range(start, start + len(needle)))
        hidden = model(torch.tensor([ids]), head=False).hidden[0]  # [T, C] after ln_f
        sentences.append(sentence)
        id_lists.append(needle)
        positions.append(span)
        static.append(model.wte.weight[needle].float().mean(dim=0).numpy())
        contextual.append(hidden[span].float().mean(dim=0).numpy())
    vectors = [static[0], static[1], contextual[0], contextual[1]]
    labels = ["input embedding, A", "input embedding, B", "last hidden state, A", "last hidden state, B"]
    matrix = cosine_matrix(np.stack(vectors))
    short = ["input A", "input B", "hidden A", "hidden B"]  # axis labels that fit a phone; the hover has the full names
    pairs = np.array([[f"{a} / {b}" for b in labels] for a in labels], dtype=object)
    fig = heatmap(matrix, f"Cosine similarity of {word!r}: static (input embedding) vs contextual (last hidden state)",
                  x_labels=short, y_labels=short, colorscale="RdBu", zmin=-1.0, zmax=1.0, zmid=0.0, cells=".2f",
                  height=420, hover="%{customdata}<br>cosine %{z:.4f}<extra></extra>", customdata=pairs)
    notes = []
    if id_lists[0] != id_lists[1]:
        notes.append("The word is tokenized differently in the two sentences (with and without a leading space), "
                     "so even its input embeddings differ.")
    if any(len(p) > 1 for p in positions):
        notes.append("The word spans several tokens: each vector is the mean over them.")
    notes.append("The last hidden state is the model's output at the word after all layers (after the final LayerNorm); "
                 "it can only use the words before it (causal attention).")
    return ContextResult(
        word, (sentences[0], sentences[1]), (id_lists[0], id_lists[1]), (positions[0], positions[1]),
        static_similarity=float(matrix[0, 1]), contextual_similarity=float(matrix[2, 3]),
        static_vs_contextual=(float(matrix[0, 2]), float(matrix[1, 3])),
        matrix=matrix, labels=labels, figure=fig, notice=" ".join(notes),
    )
