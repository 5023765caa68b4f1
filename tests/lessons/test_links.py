"""Links to a tab's view (playground/links.py): every tab's query parameters read as the tab
checks the same input, a bad value left out (the tab keeps its default) with a message naming the
parameter and what it accepts, and a link written by ``url`` read back unchanged."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from playground.learn import run as learn
from playground import limits
from playground import links as L
from playground.validation import InputError

ROOT = Path(__file__).resolve().parents[2]

# One good value of every parameter of every tab, not any tab's default.
GOOD = {
    "tokenization": {"text": "Hello, links & friends", "whitespace": "true", "special": "false"},
    "embeddings": {"text": "queen - woman + man", "top_k": "5", "exclude_inputs": "false", "leading_space": "no"},
    "positional": {"d_model": "64", "n_positions": "200", "base": "500", "dims": "1, 3,5"},
    "attention": {"text": "The king is dead", "layer": "3", "head": "5"},
    "inside": {"text": "To be, or not to be", "layer": "2", "head": "3", "token": "4"},
    "generation": {"text": "Romeo.\n", "max_new_tokens": "20", "temperature": "0.25", "top_k": "7", "top_p": "0.5",
                   "seed": "4294967295", "samples": "2"},
    "model": {},
    "compare": {"text": "Juliet.\nAy me", "word": "queen", "sentence": "O Romeo, Romeo", "layer": "5", "head": "7"},
    "learn": {"seed": "7", "init": "skewed", "learning_rate": "too high", "size": "small",
              "positions": "sinusoidal", "text": "KING.\n", "run_on": "server"},
}
EXPECTED = {
    "tokenization": {"text": "Hello, links & friends", "whitespace": True, "special": False},
    "embeddings": {"text": "queen - woman + man", "top_k": 5, "exclude_inputs": False, "leading_space": False},
    "positional": {"d_model": 64, "n_positions": 200, "base": 500.0, "dims": "1, 3, 5"},
    "attention": {"text": "The king is dead", "layer": 3, "head": 5},
    "inside": {"text": "To be, or not to be", "layer": 2, "head": 3, "token": 4},
    "generation": {"text": "Romeo.\n", "max_new_tokens": 20, "temperature": 0.25, "top_k": 7, "top_p": 0.5,
                   "seed": 4294967295, "samples": 2},
    "model": {},
    "compare": {"text": "Juliet.\nAy me", "word": "queen", "sentence": "O Romeo, Romeo", "layer": 5, "head": 7},
    "learn": {"seed": 7, "init": "skewed", "learning_rate": "too high", "size": "small",
              "positions": "sinusoidal", "text": "KING.\n", "run_on": "server"},
}


def test_the_tabs_are_the_pages_tabs_in_order():
    ids = re.findall(r'gr\.Tab\("[^"]+", id="(\w+)"\)', (ROOT / "app.py").read_text())
    assert tuple(ids) == L.TABS


def test_the_shipped_shape_is_the_shipped_models():
    config = json.loads((ROOT / "model" / "weights" / "config.json").read_text())
    assert L.shipped_shape() == L.Shape(config["n_layer"], config["n_head"], config["vocab_size"])


@pytest.mark.parametrize("tab", L.TABS)
def test_good_values_of_every_tab(tab):
    settings, messages = L.parse(tab, {"tab": tab, **GOOD[tab]})
    assert messages == []
    assert settings == EXPECTED[tab]
    assert [type(v) for v in settings.values()] == [type(v) for v in EXPECTED[tab].values()]
    assert set(GOOD[tab]) == {p.name for p in L.params(tab)}  # every parameter exercised


@pytest.mark.parametrize("tab", L.TABS)
def test_a_link_reads_back_as_written(tab):
    settings = EXPECTED[tab]
    link = L.url(tab, settings, base="http://127.0.0.1:7860/")
    parts = urlsplit(link)
    assert parts.path == "/" and parts.netloc == "127.0.0.1:7860"
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    assert query["tab"] == tab
    assert L.parse(tab, query) == (settings, [])
    assert L.parse_query(query) == L.Link(tab, settings, [])


def test_a_text_with_every_awkward_character_survives_the_round_trip():
    text = "a+b = c & d?\n#1 50% “quoted” <|endoftext|> \t émoji 🎭 /?tab=model"
    query = dict(parse_qsl(urlsplit(L.url("inside", {"text": text, "layer": 1})).query))
    assert L.parse("inside", query) == ({"text": text, "layer": 1}, [])


def test_the_pages_own_spelling_of_values_reads_the_same():
    """The page's Copy link writes values as the browser's String(): 0.8, 42, true."""
    query = {"temperature": "0.8", "top_k": "42", "top_p": "1", "seed": "0", "samples": "4", "max_new_tokens": "512"}
    assert L.parse("generation", query)[0] == {"max_new_tokens": 512, "temperature": 0.8, "top_k": 42, "top_p": 1.0, "seed": 0, "samples": 4}
    assert L.parse("tokenization", {"whitespace": "TRUE", "special": " off "})[0] == {"whitespace": True, "special": False}


def edges(param: L.Param) -> tuple[list[str], list[str]]:
    """Values at the edges of a numeric parameter's range, and just past them."""
    lo, hi = param.minimum, param.maximum
    if param.kind == "int":
        step = 2 if param.even else 1
        return [str(int(lo)), str(int(hi))], [str(int(lo) - step), str(int(hi) + step), "1.5", "x", ""]
    inside = [repr(float(hi))] + ([repr(float(lo))] if param.min_inclusive else [repr(lo + 1e-9)])
    return inside, [repr(float(lo) - 0.01) if param.min_inclusive else repr(float(lo)), repr(float(hi) + 0.01), "nan", "inf", "x"]


NUMERIC = [(tab, p) for tab in L.TABS for p in L.params(tab) if p.kind in ("int", "float")]


@pytest.mark.parametrize(("tab", "param"), NUMERIC, ids=[f"{t}-{p.name}" for t, p in NUMERIC])
def test_numbers_at_their_edges_and_past_them(tab, param):
    good, bad = edges(param)
    for value in good:
        settings, messages = L.parse(tab, {param.name: value})
        assert messages == [] and param.name in settings, (value, messages)
    for value in bad:
        settings, messages = L.parse(tab, {param.name: value}, defaults={param.name: 1})
        assert settings == {}, value
        (message,) = messages
        assert message.startswith(f"{param.name} must be"), message  # names the parameter and what it accepts
        assert message.endswith("so the tab keeps its default (1)"), message


def test_the_ranges_are_the_tabs_own_limits():
    by = {(tab, p.name): p for tab in L.TABS for p in L.params(tab)}
    assert (by["inside", "token"].maximum, by["attention", "layer"].maximum, by["attention", "head"].maximum) == (
        limits.MAX_INSIDE_TOKENS - 1, L.shipped_shape().n_layer - 1, L.shipped_shape().n_head - 1)
    assert (by["generation", "temperature"].minimum, by["generation", "temperature"].maximum) == (limits.MIN_TEMPERATURE, limits.MAX_TEMPERATURE)
    assert (by["generation", "top_p"].min_inclusive, by["generation", "seed"].maximum) == (False, limits.MAX_SEED)
    assert by["positional", "d_model"].maximum == limits.MAX_D_MODEL and by["positional", "d_model"].even
    assert by["learn", "init"].choices == learn.INITS and by["learn", "size"].choices == tuple(learn.SIZES)
    assert by["learn", "learning_rate"].choices == tuple(learn.LEARNING_RATES)
    assert by["learn", "seed"].maximum == learn.MAX_SEED
    shape = L.Shape(12, 12, 50257)  # another model (--model DIR): its own layers and heads
    layer, head = L.params("attention", shape)[1:]
    assert (layer.maximum, head.maximum) == (11, 11)
    assert L.parse("attention", {"layer": "11"}, shape=shape)[0] == {"layer": 11}


def test_an_odd_d_model_is_refused_as_the_tab_refuses_it():
    settings, (message,) = L.parse("positional", {"d_model": "63"})
    assert settings == {} and message.startswith("d_model must be even")


def test_the_pages_controls_narrow_a_range_never_widen_it():
    bounds = {"d_model": (2, 512), "base": (2, 20000), "top_p": (0.01, 1)}
    assert L.parse("positional", {"d_model": "512", "base": "20000"}, bounds=bounds)[0] == {"d_model": 512, "base": 20000.0}
    settings, messages = L.parse("positional", {"d_model": "514", "base": "20001"}, bounds=bounds)
    assert settings == {} and messages[0].startswith("d_model must be from 2 to 512, not 514")
    assert messages[1].startswith("base must be a number in [2, 20000], not 20001")
    settings, (message,) = L.parse("generation", {"top_p": "0.005"}, bounds=bounds)
    assert settings == {} and message.startswith("top_p must be a number in [0.01, 1]")
    # a page control wider than the tab's function: the function's limit stays
    assert L.parse("inside", {"token": "64"}, bounds={"token": (0, 1000)})[0] == {}


@pytest.mark.parametrize(("tab", "limit"), [("tokenization", limits.MAX_TEXT_CHARS), ("inside", limits.MAX_INSIDE_CHARS),
                                              ("attention", limits.MAX_ATTENTION_CHARS), ("generation", limits.MAX_PROMPT_CHARS),
                                              ("embeddings", limits.MAX_EXPRESSION_CHARS), ("learn", learn.MAX_PROMPT_CHARS)])
def test_a_text_past_the_tabs_limit_is_refused_with_the_limit(tab, limit):
    assert L.parse(tab, {"text": "a" * limit})[0] == {"text": "a" * limit}
    settings, (message,) = L.parse(tab, {"text": "a" * (limit + 1)})
    assert settings == {}
    assert message == f"text is {limit + 1:,} characters long; the limit is {limit:,} characters, so the tab keeps its default"


@pytest.mark.parametrize(("query", "fragment"), [
    ({"text": ""}, "text is empty"),
    ({"text": "a\x00b"}, "control character U+0000"),
    ({"whitespace": "maybe"}, "whitespace must be true or false, not 'maybe'"),
    ({"special": "2"}, "special must be true or false"),
])
def test_bad_text_and_switches(query, fragment):
    settings, (message,) = L.parse("tokenization", query)
    assert settings == {} and fragment in message and message.endswith("keeps its default")


def test_bad_choices_and_lists_name_what_is_accepted():
    settings, messages = L.parse("learn", {"init": "weird", "size": "small"})
    assert settings == {"size": "small"}
    assert messages == ["init must be one of 'proper', 'skewed', not 'weird', so the tab keeps its default"]
    settings, (message,) = L.parse("positional", {"dims": "1, x"})
    assert settings == {} and message.startswith("dims: item 2 ('x') is not a whole number")
    settings, (message,) = L.parse("positional", {"dims": ",".join(["1"] * (limits.MAX_PLOT_DIMS + 1))})
    assert settings == {} and f"the limit is {limits.MAX_PLOT_DIMS}" in message


def test_unknown_parameters_are_named_with_the_ones_the_tab_takes():
    settings, (message,) = L.parse("attention", {"tab": "attention", "layers": "2", "layer": "2"})
    assert settings == {"layer": 2}
    assert message == "'layers' is not a setting of the attention tab, left out (it takes text, layer, head)"
    assert L.parse("model", {"text": "x"})[1] == ["'text' is not a setting of the model tab, left out (it takes no settings)"]


def test_the_page_and_gradio_parameters_are_not_a_tabs():
    assert L.parse_query({"page": ""}) == L.Link()  # tests/serving/test_page_cache.py's query: no link, no message
    assert L.parse_query({"view": "api", "__theme": "dark"}) == L.Link()
    assert L.parse("inside", {"tab": "inside", "__theme": "dark", "deep_link": "x", "layer": "1"}) == ({"layer": 1}, [])


def test_a_bad_or_missing_tab():
    link = L.parse_query({"tab": "insides", "layer": "2"})
    assert link.tab is None and link.settings == {}
    assert link.messages == [f"tab must be one of {', '.join(L.TABS)}, not 'insides': the page opened on its first tab"]
    link = L.parse_query({"text": "hello", "layer": "2"})
    assert link.tab is None and link.messages[0].startswith("this link names no tab, so its text, layer were left out")
    with pytest.raises(InputError, match="tab must be one of"):
        L.params("Inside")


def test_parse_query_uses_the_pages_bounds_and_defaults():
    link = L.parse_query({"tab": "positional", "d_model": "1024", "n_positions": "5"},
                         bounds=lambda tab: {"d_model": (2, 512)}, defaults=lambda tab: {"d_model": 20})
    assert link == L.Link("positional", {"n_positions": 5},
                          ["d_model must be from 2 to 512, not 1024, so the tab keeps its default (20)"])


def test_url_keeps_the_tabs_order_and_refuses_other_names():
    assert L.url("inside", {"token": 4, "text": "a b", "layer": 2}) == "?tab=inside&text=a%20b&layer=2&token=4"
    assert L.url("model", {}) == "?tab=model"
    assert L.url("generation", {"temperature": 1.0, "top_p": 0.95}) == "?tab=generation&temperature=1&top_p=0.95"
    with pytest.raises(InputError, match="temperature: not a setting of the inside tab"):
        L.url("inside", {"temperature": 1})


def test_every_parameter_says_what_it_accepts():
    for tab in L.TABS:
        for p in L.params(tab):
            assert p.accepted() and p.what, (tab, p.name)
    assert L.params("positional")[0].accepted() == "an even whole number from 2 to 1024"
    assert L.params("generation")[4].accepted() == "a number in (0, 1]"


def test_docs_list_every_tabs_parameters():
    """docs/app.md's Links section: a row per parameter, under its tab, as the contract says."""
    docs = (ROOT / "docs" / "app.md").read_text()
    section = docs.split("## Links\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ")][1:]
    listed, tab = [], None
    for first, second in rows:
        tab = first.strip().strip("`") or tab
        listed.append((tab, second.strip().strip("`")))
    assert listed == [(t, name) for t in L.TABS for name in ([p.name for p in L.params(t)] or ["–"])]  # Model: none


def test_the_pages_note_shows_a_links_words_as_text_and_its_plan_as_data():
    """What a link's author typed reaches the page escaped: never markup."""
    from html.parser import HTMLParser

    from playground.ui.links import note_html

    link = L.parse_query({"tab": "inside", "<img src=x onerror=alert(1)>": "1", "layer": "9"})
    plan = {"tab": "inside", "run": ["ins-run"], "after": {"id": "ins-token", "value": 4, "waiting": "Token \"…\" '<b>'"}}
    shown = note_html(link, plan)
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown

    class Read(HTMLParser):
        tags: list = []
        plan = None

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self.plan = dict(attrs).get("data-plan", self.plan)

    read = Read()
    read.feed(shown)
    assert json.loads(read.plan) == plan and set(read.tags) == {"div", "b", "ul", "li"}
    assert note_html(L.Link(), None) == "<div></div>"  # no link: nothing shown, no plan
