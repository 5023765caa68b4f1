"""The words a learner reads in the tabs that both editions have (Tokenization, Embeddings,
Positional encoding, Attention, Inside the model, Text generation): each tab's opening explanation, its fixed notes and
captions, and the sentence that leads on to the next tab.

One source for two pages: the Gradio tabs (playground/ui/<tab>.py) show these strings as they
are, and the static browser edition shows them rendered by :func:`to_html` (all at once:
:func:`lessons_json`). Text a tab computes from a result stays in its module; only fixed text is
here. No Gradio, and nothing heavy (no model, no torch): the static export reads this alone.

Two kinds of text: ``intro`` and ``notes`` are Markdown (the app shows them in ``gr.Markdown``);
``captions`` and ``next_sentence`` are plain text (section titles, table labels, a hint under a
figure, the closing line), shown as written and escaped wherever they go into HTML.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["Lesson", "LESSONS", "slowest_wavelength", "markdown_html", "to_html", "lessons_json"]


@dataclass(frozen=True)
class Lesson:
    """One tab's words. ``tab``: its id on the page and in a link (``?tab=``, playground/links.py);
    ``title``: its label without the number; ``next_tab``: the label of the tab the closing
    sentence leads to, ``next_key`` that tab's id."""

    tab: str
    title: str
    intro: str
    next_sentence: str
    next_tab: str
    next_key: str
    notes: Mapping[str, str] = field(default_factory=dict)
    captions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only views: a caller changing a note would change every page built after it.
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))
        object.__setattr__(self, "captions", MappingProxyType(dict(self.captions)))


def slowest_wavelength(d_model: int = 512, base: float = 10000) -> float:
    """Positions per turn of the last pair of dimensions, the slowest: 2π · base^((d_model − 2) /
    d_model), as playground.positional.wavelength computes it (a test holds the two equal; that
    module loads the model, which this one must not)."""
    return 2 * math.pi * base ** ((d_model - 2) / d_model)


# The lesson's own table (the Transformer tutorial's 1024 x 512, base 10000): the number the
# positional tab quotes against the lesson's backwards sentence.
LESSON_D_MODEL, LESSON_BASE = 512, 10000

_LESSONS = (
    Lesson(
        tab="tokenization",
        title="Tokenization",
        intro=(
            "A GPT never sees letters: text is cut into **tokens** by byte-pair encoding (GPT-2's 50,257 "
            "tokens), and each token becomes an **id**. Common words are one token, often with their "
            "leading space (` everyone`); rare words split into pieces."
        ),
        captions={
            "compare": "The same text in other tiktoken encodings: newer, larger vocabularies need fewer tokens",
            "splits": "How each encoding splits the text",
            "decode": "Ids → text",
        },
        next_sentence="Each id now picks one row of a table of learned numbers: the token's vector.",
        next_tab="Embeddings",
        next_key="embeddings",
    ),
    Lesson(
        tab="embeddings",
        title="Embeddings",
        intro=(
            "Each token id picks one row of the embedding table: a vector of numbers the model learned. "
            "Directions in that space carry meaning, so vectors can be added and subtracted. Nearest "
            "tokens are searched only among the tokens the model saw in training."
        ),
        notes={
            "context": (
                "The input embedding of a word is the same in every sentence (one row of the table); the "
                "model's last hidden state at that word depends on the words before it."
            ),
        },
        captions={
            "similarity": "Cosine similarity of two words",
            "projection": "PCA projection of a word list",
            "context": "Static vs contextual embeddings",
        },
        next_sentence="These vectors say which token, not where it stands: the model still needs each token's position.",
        next_tab="Positional encoding",
        next_key="positional",
    ),
    Lesson(
        tab="positional",
        title="Positional encoding",
        # The app shows the formula (playground.positional.PAGE_FORMULA_LINES, LaTeX) right after.
        intro=(
            "Attention by itself ignores word order, so each position gets a vector added to its token "
            "embedding. The lesson's formula (from *Attention Is All You Need*) uses sines and cosines of "
            "decreasing frequency:"
        ),
        notes={
            "lesson_fix": (
                f"f_i falls as i grows: the **first dimensions turn fastest** (dimensions 0 and 1 a full turn every "
                f"2π ≈ 6.3 positions) and the last ones slowest (at d_model {LESSON_D_MODEL}, base {LESSON_BASE}: a turn every "
                f"{slowest_wavelength(LESSON_D_MODEL, LESSON_BASE):,.0f} positions). The lesson says the "
                "opposite, “lower dimensions of the embedding vector (e.g., dimensions 0, 2, 4) will vary more "
                "slowly (lower frequency)”: **that sentence is backwards**, as the table and the frequency plot "
                "below show.\n\nIts worked example mixes up i and 2i too: “For dimension i = 256: the exponent would be "
                "256/512 = 0.5 … 10000^0.5 = 100”. The exponent is 2i/d_model, so 256/512 = 0.5 belongs to "
                f"**dimension 2i = 256**, the pair **i = 128**; i = 256 itself would give 2i/d_model = 512/512 = 1, "
                f"{LESSON_BASE}^1, and at d_model {LESSON_D_MODEL} the pairs stop at i = {LESSON_D_MODEL // 2 - 1}."
            ),
        },
        captions={
            "table_hint": (
                "Every cell is drawn: one column per dimension, one row per "
                "position. Hover a cell for its position, dimension and value; drag a box to zoom in."
            ),
            "model_table": "The model's own table",
        },
        next_sentence=(
            "Token vector plus position vector is what each layer reads: there, every token gathers "
            "information from itself and the tokens before it, weighted by attention."
        ),
        next_tab="Attention",
        next_key="attention",
    ),
    Lesson(
        tab="attention",
        title="Attention",
        intro=(
            "Each token's query is compared with the keys of the tokens up to and including itself; a "
            "softmax turns the scores into weights (each row sums to 1) and the token takes the weighted "
            "average of their values. A decoder hides the future: everything above the diagonal is zero."
        ),
        captions={
            "steps": "Step by step: the chosen head, from its queries and keys to its output",
        },
        next_sentence=(
            "One head is one part of one layer: the next tab opens the whole forward pass, stage by stage, "
            "on your own text."
        ),
        next_tab="Inside the model",
        next_key="inside",
    ),
    Lesson(
        tab="inside",
        title="Inside the model",
        intro=(
            "One forward pass of the model on your text, stage by stage, with its real numbers: the token and "
            "position rows, each layer's attention heads, the residual stream, the feed-forward network, and the "
            "logit lens, which applies the output head after every layer to show where a prediction forms. A new "
            "text is computed once; choosing a layer, a head or a token only redraws it."
        ),
        next_sentence=(
            "The last stage gave a probability for every token of the vocabulary: drawing one, appending it and "
            "running the pass again is how the model writes."
        ),
        next_tab="Text generation",
        next_key="generation",
    ),
    Lesson(
        tab="generation",
        title="Text generation",
        intro=(
            "The model writes one token at a time: it turns the context into a probability for every "
            "token of the vocabulary, **temperature** sharpens (<1) or flattens (>1) that distribution, "
            "**top-k** keeps the k most probable tokens, **top-p** keeps the smallest set whose "
            "probabilities add up to p, and one token is drawn at random from what is left. Same **seed**, "
            "same text, on one engine and file: the server's `model.onnx` and `model_int8.onnx` and the "
            "browser's `model_quantized.onnx` each round the logits their own way, so each writes its own."
        ),
        notes={
            "precision": (
                "**8 bits** keeps each weight as one of 256 levels instead of a 32-bit number (a quarter of the "
                "size) and rounds each token's activations the same way, so the products run on fast 8-bit "
                "integer instructions. The price: every logit moves a little, and where the two most likely "
                "tokens are nearly tied the 8-bit model can pick the other one; from there its text goes its "
                "own way. Inside the model and Compare compute in full precision."
            ),
            "live_chart": (
                "The chart above is what the model would draw next after the prompt: move the temperature, "
                "top-k or top-p and watch the bars reshape, no generation needed. A low temperature "
                "makes the most likely token win almost always, but not always: a draw is still random. "
                "Only temperature 0 (greedy) or top-k 1 always take it."
            ),
            "shading": (
                "Each generated token is shaded by how unlikely it was when drawn (darker = less "
                "likely; hover or tap for its id and probabilities). Click a token, or pick a step, to see "
                "what the model hesitated between."
            ),
        },
        next_sentence=(
            "Tokens, vectors, positions, attention and the next token are all in one file you can download, "
            "with how well the model learned them."
        ),
        next_tab="Model",
        next_key="model",
    ),
    Lesson(
        tab="model",
        title="Model",
        intro=(
            "The model every tab runs, laid open: its network with the parameters of each part, how its loss fell "
            "while it trained, and its files, to download and run yourself."
        ),
        next_sentence=(
            "Training is what gave all these numbers their meaning: see the same architecture before it, beside "
            "the trained model."
        ),
        next_tab="Compare",
        next_key="compare",
    ),
    Lesson(
        tab="compare",
        title="Compare",
        intro=(
            "The trained model (left) beside its untrained initialisation (right): the same architecture, before "
            "training. Untrained, a GPT gives every next token about the same probability (a loss of about "
            "ln 50257 ≈ 10.8 nats), its embeddings have no meaning and its attention is nearly uniform: training "
            "is what gives them structure."
        ),
        next_sentence=(
            "The untrained model spreads its bets evenly, a loss of ln V; training is what moves it. In the next "
            "tab you start a small GPT from random weights and watch its loss fall."
        ),
        next_tab="Watch it learn",
        next_key="learn",
    ),
)

# By tab id, in the page's order.
LESSONS: Mapping[str, Lesson] = MappingProxyType({lesson.tab: lesson for lesson in _LESSONS})


# CommonMark with raw HTML off: the texts need none, and a static page inserts the result as HTML,
# so a tag in a text must arrive as text. markdown-it also refuses javascript: and data: links.
_MARKDOWN = MarkdownIt("commonmark", {"html": False})


def markdown_html(text: str) -> str:
    """``text`` (Markdown) as safe HTML: every ``<`` of the text escaped, no raw HTML."""
    return _MARKDOWN.render(text)


def to_html(lesson: Lesson) -> dict[str, Any]:
    """A lesson's texts as HTML fragments for a page without Gradio: ``intro`` and each of
    ``notes`` rendered from Markdown, ``title``, ``captions``, ``next_sentence`` and ``next_tab``
    escaped plain text; ``tab`` and ``next_key`` are ids."""
    return {
        "tab": lesson.tab,
        "title": html.escape(lesson.title),
        "intro": markdown_html(lesson.intro),
        "notes": {name: markdown_html(text) for name, text in lesson.notes.items()},
        "captions": {name: html.escape(text) for name, text in lesson.captions.items()},
        "next_sentence": html.escape(lesson.next_sentence),
        "next_tab": html.escape(lesson.next_tab),
        "next_key": lesson.next_key,
    }


def lessons_json() -> dict[str, dict[str, Any]]:
    """Every tab's rendered texts (:func:`to_html`) by tab id, in the page's order: what the static
    edition's export writes (plain dicts and strings, ready for ``json.dumps``)."""
    return {tab: to_html(lesson) for tab, lesson in LESSONS.items()}
