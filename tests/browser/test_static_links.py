"""The static edition's links (web/static/links.js, under Node.js) read a query as the app does
(playground/links.py): the same tab, the same settings, the same messages, on a catalogue of good
and bad links. The parameters come from the same place (deploy.static.link_params)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, quote

import pytest

from deploy.static import link_params, tabs
from playground.links import TABS, parse_query

WEB_TESTS = Path(__file__).resolve().parents[1] / "web"

CATALOGUE = [
    {"tab": "tokenization", "text": "hello everyone", "whitespace": "true", "special": "off"},
    {"tab": "tokenization", "whitespace": "maybe", "special": "1"},
    {"tab": "tokenization", "text": "x" * 20_001},
    {"tab": "tokenization", "text": "   "},
    {"tab": "embeddings", "text": "king - man + woman", "top_k": "5", "exclude_inputs": "no", "leading_space": "yes"},
    {"tab": "embeddings", "top_k": "0"},
    {"tab": "embeddings", "top_k": "51"},
    {"tab": "embeddings", "top_k": "2.5"},
    {"tab": "positional", "d_model": "64", "n_positions": "50", "base": "100", "dims": "2, 4 6"},
    {"tab": "positional", "d_model": "7", "n_positions": "1025", "base": "1"},
    {"tab": "positional", "base": "1e7", "d_model": "1024"},
    {"tab": "attention", "text": "To be, or not to be", "layer": "5", "head": "7"},
    {"tab": "attention", "layer": "6", "head": "-1"},
    {"tab": "inside", "text": "ROMEO.\nWhat say you", "layer": "2", "head": "3", "token": "4"},
    {"tab": "inside", "token": "64", "layer": "x", "head": "8"},
    {"tab": "generation", "text": "ROMEO:", "max_new_tokens": "32", "temperature": "0"},
    {"tab": "generation", "temperature": "9", "top_p": "0", "colour": "red", "top_k": "x", "max_new_tokens": "0"},
    {"tab": "generation", "top_p": "1", "seed": "4294967295", "temperature": "0.05"},
    {"tab": "generation", "seed": "4294967296", "top_k": "50257", "max_new_tokens": "512"},
    {"tab": "model"},
    {"tab": "model", "text": "x"},
    {"tab": "compare", "text": "Romeo.\nWhat say you to", "word": "king - man + woman", "sentence": "The king is dead", "layer": "3", "head": "5"},
    {"tab": "compare", "layer": "6", "head": "x", "word": "", "colour": "red"},
    {"tab": "learn", "seed": "7", "init": "skewed", "learning_rate": "too high", "size": "small", "positions": "sinusoidal",
     "text": "KING.\n", "run_on": "browser"},
    {"tab": "learn", "seed": "2147483648", "init": "weird", "size": "huge"},
    {"tab": "nope", "text": "x"},
    {"text": "no tab"},
    {},
    {"tab": "generation", "view": "api", "__theme": "dark"},
    # at the limits, counted as Python counts (code points), and the characters that tell strip() from trim()
    {"tab": "tokenization", "text": "😀" * 20_000},
    {"tab": "tokenization", "text": "😀" * 20_001},
    {"tab": "attention", "text": "\ufeff", "layer": "inf"},
    {"tab": "inside", "text": "\x1c\x85", "token": "63"},
    {"tab": "positional", "dims": "11111111111111111111", "d_model": "2", "n_positions": "1024", "base": "1000000"},
    {"tab": "generation", "top_p": "1e-9", "seed": "0", "samples": "4", "max_new_tokens": "1", "temperature": "5"},
    {"tab": "generation", "samples": "5", "max_new_tokens": "513", "temperature": "5.000001"},
]


BROWSER_TABS = tabs(learn=True)[0]  # the static edition's, Watch it learn among them when its files are written


def run_node(queries: list[str]) -> list[dict]:
    assert shutil.which("node"), "node not found: the browser edition's tests need Node.js 20"
    specs = link_params(BROWSER_TABS)
    proc = subprocess.run(["node", str(WEB_TESTS / "links.mjs")], input=json.dumps({"specs": specs, "tabs": list(TABS), "queries": queries}),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_page_reads_every_link_as_the_app_does():
    queries = ["?" + urlencode(q, quote_via=quote) for q in CATALOGUE]
    got = run_node(queries)
    for query, js in zip(CATALOGUE, got):
        py = parse_query(dict(parse_qsl(urlencode(query, quote_via=quote), keep_blank_values=True)))
        if py.tab is not None and py.tab not in BROWSER_TABS:
            continue
        assert js["tab"] == py.tab, query
        assert js["settings"] == py.settings, query
        assert js["messages"] == py.messages, query
