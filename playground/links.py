"""Links to what a tab shows: ``/?tab=inside&text=...&layer=2&head=3`` reopens a tab on the same
text and settings (docs/app.md, "Links").

Each tab accepts the query parameters :func:`params` lists, each checked as the tab checks the
same input (the validators of :mod:`playground.validation`, the bounds of
:mod:`playground.limits`). :func:`parse` turns a query into the settings to apply and a message
for every value it could not use (that setting keeps the tab's default); :func:`url` writes the
query of a tab's settings, which :func:`parse` reads back unchanged. No Gradio here: the page's
wiring is playground/ui/links.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from .learn import run as learn
from . import limits
from .validation import (
    InputError,
    format_number,
    parse_int_list,
    validate_bool,
    validate_choice,
    validate_float,
    validate_int,
    validate_text,
)

__all__ = ["TABS", "Param", "Shape", "Link", "params", "parse", "parse_query", "url", "format_value"]

# The tabs' ids, as the page names them (app.py), in the page's order.
TABS = ("tokenization", "embeddings", "positional", "attention", "inside", "generation", "model", "compare", "learn")

# Query parameters the page itself or Gradio read (``?view=api``, ``?__theme=dark``...): never a
# tab's setting, never reported as unknown.
FOREIGN = frozenset({"view", "deep_link", "page", "ui", "write_token", "logs"})

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")

# The positional tab's "Dimensions to plot" box, as playground/positional.py parses it.
DIMS_MAX_CHARS = 200


@dataclass(frozen=True)
class Shape:
    """What a model-dependent setting's range depends on."""

    n_layer: int
    n_head: int
    vocab_size: int

    @classmethod
    def of(cls, config: Any) -> Shape:
        return cls(int(config.n_layer), int(config.n_head), int(config.vocab_size))


@lru_cache(maxsize=1)
def shipped_shape() -> Shape:
    """The shipped model's shape (its config.json): the ranges when the page gives none."""
    config = json.loads((Path(__file__).resolve().parent.parent / "model" / "weights" / "config.json").read_text())
    return Shape(config["n_layer"], config["n_head"], config["vocab_size"])


@dataclass(frozen=True)
class Param:
    """One query parameter of a tab. ``kind``: text, int, float, bool, choice or ints (a list of
    whole numbers as typed, e.g. ``2, 4, 6``)."""

    name: str
    kind: str
    minimum: float | None = None
    maximum: float | None = None
    min_inclusive: bool = True
    max_chars: int = 0
    choices: tuple[str, ...] = ()
    even: bool = False
    max_count: int = 0
    what: str = ""  # what it sets, as the docs' table says

    def check(self, raw: Any) -> Any:
        """The value ``raw`` (a query's string) stands for, or an :class:`InputError` saying what
        is accepted."""
        if self.kind == "text":
            return validate_text(raw, name=self.name, max_chars=self.max_chars)
        if self.kind == "int":
            value = validate_int(raw, name=self.name, minimum=int(self.minimum), maximum=int(self.maximum))
            if self.even and value % 2:
                raise InputError(f"{self.name} must be even, from {int(self.minimum)} to {int(self.maximum)}, not {value}")
            return value
        if self.kind == "float":
            return validate_float(raw, name=self.name, minimum=self.minimum, maximum=self.maximum, min_inclusive=self.min_inclusive)
        if self.kind == "bool":
            if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
                raw = raw.strip().lower() in _TRUE
            return validate_bool(raw, name=self.name)
        if self.kind == "choice":
            return validate_choice(raw, self.choices, name=self.name)
        if self.kind == "ints":
            numbers = parse_int_list(raw, name=self.name, max_chars=self.max_chars, max_count=self.max_count)
            return ", ".join(map(str, numbers))
        raise ValueError(f"unknown kind {self.kind!r}")

    def accepted(self) -> str:
        """What the parameter accepts, in words (docs/app.md's tables)."""
        if self.kind == "text":
            return f"text, 1 to {self.max_chars:,} characters"
        if self.kind == "int":
            return f"{'an even' if self.even else 'a'} whole number from {format_number(int(self.minimum))} to {format_number(int(self.maximum))}"
        if self.kind == "float":
            return f"a number in {'[' if self.min_inclusive else '('}{self.minimum:g}, {self.maximum:g}]"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return " or ".join(self.choices)
        return f"up to {self.max_count} whole numbers separated by commas"

    def narrowed(self, bounds: tuple[float, float] | None) -> Param:
        """This parameter within ``bounds`` too (a page's slider may span less than the tab's
        function accepts); never wider."""
        if bounds is None or self.kind not in ("int", "float"):
            return self
        lo, hi = bounds
        minimum, inclusive = self.minimum, self.min_inclusive
        if lo is not None and (minimum is None or lo > minimum or (lo == minimum and not inclusive)):
            minimum, inclusive = lo, True
        maximum = self.maximum if hi is None or (self.maximum is not None and hi >= self.maximum) else hi
        return replace(self, minimum=minimum, maximum=maximum, min_inclusive=inclusive)


def _text(max_chars: int, what: str = "the text") -> Param:
    return Param("text", "text", max_chars=max_chars, what=what)


def _layer_head(shape: Shape) -> tuple[Param, Param]:
    return (
        Param("layer", "int", 0, shape.n_layer - 1, what="the layer (0-based)"),
        Param("head", "int", 0, shape.n_head - 1, what="the head (0-based)"),
    )


def params(tab: str, shape: Shape | None = None) -> tuple[Param, ...]:
    """The query parameters ``tab`` accepts besides ``tab``, in the order a link writes them."""
    shape = shape or shipped_shape()
    layer, head = _layer_head(shape)
    table: dict[str, tuple[Param, ...]] = {
        "tokenization": (
            _text(limits.MAX_TEXT_CHARS),
            Param("whitespace", "bool", what="show whitespace (⋅ → ↵)"),
            Param("special", "bool", what="<|endoftext|> is one special token"),
        ),
        "embeddings": (
            _text(limits.MAX_EXPRESSION_CHARS, "the expression, e.g. king - man + woman"),
            Param("top_k", "int", limits.MIN_NEIGHBOURS, limits.MAX_NEIGHBOURS, what="how many nearest tokens"),
            Param("exclude_inputs", "bool", what="leave out the input words"),
            Param("leading_space", "bool", what="words get GPT-2's leading space"),
        ),
        "positional": (
            Param("d_model", "int", limits.MIN_D_MODEL, limits.MAX_D_MODEL, even=True, what="dimensions of the table"),
            Param("n_positions", "int", limits.MIN_POSITIONS, limits.MAX_POSITIONS, what="positions (rows)"),
            Param("base", "float", limits.MIN_BASE, limits.MAX_BASE, what="the base (the paper's: 10000)"),
            Param("dims", "ints", max_chars=DIMS_MAX_CHARS, max_count=limits.MAX_PLOT_DIMS, what="the dimensions plotted over positions"),
        ),
        "attention": (_text(limits.MAX_ATTENTION_CHARS), layer, head),
        "inside": (
            _text(limits.MAX_INSIDE_CHARS), layer, head,
            Param("token", "int", 0, limits.MAX_INSIDE_TOKENS - 1, what="the token shown (0-based; past the text's end: its last)"),
        ),
        "generation": (
            _text(limits.MAX_PROMPT_CHARS, "the prompt"),
            Param("max_new_tokens", "int", limits.MIN_NEW_TOKENS, limits.MAX_NEW_TOKENS, what="max new tokens"),
            Param("temperature", "float", limits.MIN_TEMPERATURE, limits.MAX_TEMPERATURE, what="temperature (0 = greedy)"),
            Param("top_k", "int", limits.MIN_TOP_K, shape.vocab_size, what="top-k (0 = no cut)"),
            Param("top_p", "float", limits.MIN_TOP_P, limits.MAX_TOP_P, min_inclusive=False, what="top-p (1 = no cut)"),
            Param("seed", "int", limits.MIN_SEED, limits.MAX_SEED, what="the seed"),
            Param("samples", "int", limits.MIN_SAMPLES, limits.MAX_SAMPLES, what="samples generated at once"),
        ),
        "model": (),
        "compare": (
            _text(limits.MAX_PROMPT_CHARS, "the prompt whose next token both models predict"),
            Param("word", "text", max_chars=limits.MAX_EXPRESSION_CHARS, what="the word whose neighbours are compared"),
            Param("sentence", "text", max_chars=limits.MAX_ATTENTION_CHARS, what="the sentence whose attention is compared"),
            layer, head,
        ),
        "learn": (
            Param("seed", "int", 0, learn.MAX_SEED, what="the seed"),
            Param("init", "choice", choices=learn.INITS, what="the initialisation"),
            Param("learning_rate", "choice", choices=tuple(learn.LEARNING_RATES), what="the learning rate"),
            Param("size", "choice", choices=tuple(learn.SIZES), what="the model's size"),
            Param("positions", "choice", choices=learn.POSITIONS, what="learned or sinusoidal positions"),
            _text(learn.MAX_PROMPT_CHARS, "the prompt your model continues once trained"),
            Param("run_on", "choice", choices=("browser", "server"), what="where the run trains: this browser or the server"),
        ),
    }
    if tab not in table:
        raise InputError(_unknown_tab(tab))
    return table[tab]


def _unknown_tab(tab: Any) -> str:
    shown = repr(tab) if len(repr(tab)) <= 40 else repr(tab)[:37] + "..."
    return f"tab must be one of {', '.join(TABS)}, not {shown}"


def format_value(value: Any) -> str:
    """A setting as a link writes it (the page's Copy link writes the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


@dataclass
class Link:
    """What a page's query asks for: the tab (None: none, or not a tab), the settings to apply
    (only valid ones) and a message for each value not used."""

    tab: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)


def parse(
    tab: str,
    query: Mapping[str, Any],
    *,
    shape: Shape | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The settings of ``tab`` in ``query`` (its other keys: ``tab`` and Gradio's own are
    skipped) and the messages: a bad value is left out of the settings, so the tab keeps its
    default (named from ``defaults`` when given), and its message says what was wrong and what is
    accepted; an unknown parameter is named with the ones the tab takes. ``bounds``: the page's
    controls' ranges, which narrow a parameter's (a slider spanning less than its function)."""
    spec = {p.name: p.narrowed((bounds or {}).get(p.name)) for p in params(tab, shape)}
    defaults = defaults or {}
    settings: dict[str, Any] = {}
    messages: list[str] = []
    for key, raw in query.items():
        if key == "tab" or key in FOREIGN or key.startswith("_"):
            continue
        param = spec.get(key)
        if param is None:
            takes = ", ".join(spec) if spec else "no settings"
            messages.append(f"{_shown_key(key)} is not a setting of the {tab} tab, left out (it takes {takes})")
            continue
        try:
            settings[key] = param.check(raw)
        except InputError as err:
            kept = f" ({format_value(defaults[key])})" if key in defaults and param.kind != "text" else ""
            messages.append(f"{err}, so the tab keeps its default{kept}")
    return {name: settings[name] for name in spec if name in settings}, messages


def _shown_key(key: str) -> str:
    shown = repr(key)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def parse_query(
    query: Mapping[str, Any],
    *,
    shape: Shape | None = None,
    bounds: Callable[[str], Mapping[str, tuple[float, float]]] | None = None,
    defaults: Callable[[str], Mapping[str, Any]] | None = None,
) -> Link:
    """The tab a page's whole query names, and its settings (:func:`parse`). A query with no
    ``tab`` and none of a tab's settings (``?page=``, nothing) is no link: no message."""
    tab = query.get("tab")
    if tab is None:
        own = [k for k in query if k not in FOREIGN and not k.startswith("_")]
        return Link(messages=[f"this link names no tab, so its {', '.join(own)} {'was' if len(own) == 1 else 'were'} left out: add tab=one of {', '.join(TABS)}"] if own else [])
    if tab not in TABS:
        return Link(messages=[_unknown_tab(tab) + ": the page opened on its first tab"])
    settings, messages = parse(
        tab, query, shape=shape, bounds=bounds(tab) if bounds else None, defaults=defaults(tab) if defaults else None
    )
    return Link(tab, settings, messages)


def url(tab: str, settings: Mapping[str, Any], base: str = "") -> str:
    """``base`` followed by the query that reopens ``tab`` with ``settings`` (in the tab's order;
    names the tab does not take are refused)."""
    names = [p.name for p in params(tab)]
    unknown = [name for name in settings if name not in names]
    if unknown:
        raise InputError(f"{', '.join(unknown)}: not a setting of the {tab} tab (it takes {', '.join(names) or 'no settings'})")
    pairs = [("tab", tab)] + [(name, format_value(settings[name])) for name in names if name in settings]
    return f"{base}?{urlencode(pairs, quote_via=quote)}"
