"""The vendored tiktoken encodings (model/encodings.py, model/ranks/): the files are tiktoken's own
(sha256), they split text exactly as tiktoken's registered encodings do, and the Tokenization tab
compares them side by side."""

from __future__ import annotations

import hashlib
import shutil

import pytest
import tiktoken

from model.encodings import ENCODINGS, convert_js_ranks, get_encoding
from playground.tokenization import compare_encodings
from playground.validation import InputError

TEXTS = [
    "hello everyone",
    "Attention isallyou need",
    "   indented\n\n\tcode = f(x) + 12345678;  // naïve 🙂 東京",
    "I'm we'LL they've <|endoftext|> done",
]

URLS = {name: f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken" for name in ENCODINGS}


@pytest.fixture(scope="module")
def tiktoken_own(tmp_path_factory):
    """tiktoken's registered encodings (tiktoken_ext/openai_public.py: its own patterns and
    special tokens), fed from a cache directory holding the vendored files under the names
    tiktoken looks for, so nothing is downloaded (tiktoken checks the same sha256)."""
    from model.tokenizer import RANKS_PATH

    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name, spec in ENCODINGS.items():
        src = RANKS_PATH if name == "r50k_base" else spec.path
        shutil.copy(src, cache / hashlib.sha1(URLS[name].encode()).hexdigest())
    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    encs = {name: tiktoken.get_encoding(name) for name in ENCODINGS}
    mp.undo()
    return encs


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_vendored_file_is_tiktokens(name):
    spec = ENCODINGS[name]
    if name == "r50k_base":
        from model.tokenizer import RANKS_PATH as path
    else:
        path = spec.path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256


@pytest.mark.parametrize("name", list(ENCODINGS))
@pytest.mark.parametrize("text", TEXTS)
def test_splits_match_tiktoken(name, text, tiktoken_own):
    ours, theirs = get_encoding(name), tiktoken_own[name]
    assert ours.n_vocab == theirs.n_vocab
    assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all")
    assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=())


def test_known_splits():
    """Counts a user can check on tiktokenizer: the newer vocabularies merge more."""
    got = {c.name: c for c in compare_encodings("Attention isallyou need", include_gpt2=True)}
    assert got["gpt2"].pieces == ["Att", "ention", " is", "ally", "ou", " need"]
    assert got["r50k_base"].ids == got["p50k_base"].ids == got["gpt2"].ids == [8086, 1463, 318, 453, 280, 761]
    assert got["cl100k_base"].pieces == ["Attention", " is", "ally", "ou", " need"]
    assert got["cl100k_base"].ids == [70429, 374, 750, 283, 1205]
    assert got["o200k_base"].ids == [80207, 382, 2146, 283, 1309]
    # Code: p50k_base (Codex) has tokens for runs of spaces, GPT-2 does not.
    code = "def f():\n        return 1"
    counts = {c.name: c.n_tokens for c in compare_encodings(code)}
    assert counts["p50k_base"] < counts["r50k_base"]
    # Numbers: cl100k/o200k cut digits in threes.
    pieces = {c.name: c.pieces for c in compare_encodings("12345678")}
    assert pieces["cl100k_base"] == ["123", "456", "78"] == pieces["o200k_base"]


def test_special_token_switch():
    on = {c.name: c.ids for c in compare_encodings("a<|endoftext|>b", True)}
    off = {c.name: c.ids for c in compare_encodings("a<|endoftext|>b", False)}
    assert 100257 in on["cl100k_base"] and 199999 in on["o200k_base"] and 50256 in on["p50k_base"]
    assert 100257 not in off["cl100k_base"] and len(off["cl100k_base"]) > len(on["cl100k_base"])


def test_the_apis_comparison_without_spans_has_the_same_ids_and_pieces():
    """The API's answer skips the coloured spans (its pieces in one tiktoken call): the same ids
    and pieces as the tab's, on text whose tokens split characters (emoji, CJK), a special token,
    a carriage return and an empty text."""
    for text in ["héllo 🙂🙂 世界\r\n<|endoftext|> x", "\ufeff  tabs\tand  spaces", ""]:
        for special in (True, False):
            tab = compare_encodings(text, special, include_gpt2=True)
            api = compare_encodings(text, special, include_gpt2=True, with_html=False)
            assert [c.to_dict() for c in api] == [c.to_dict() for c in tab]
            assert all(c.html == "" for c in api) and all(c.html for c in tab if c.ids)
    split = compare_encodings("🙂", include_gpt2=True, with_html=False)[0]
    assert split.pieces and all("\ufffd" in p for p in split.pieces)  # a character cut across tokens shows as U+FFFD


def test_every_comparison_decodes_back():
    text = TEXTS[2]
    for c in compare_encodings(text):
        assert c.available and get_encoding(c.name).decode(c.ids) == text
        assert 'class="gpt-token"' in c.html


def test_corrupt_file_is_reported_not_raised(tmp_path, monkeypatch):
    import model.encodings as me

    bad = tmp_path / "cl100k_base.tiktoken"
    bad.write_bytes(me.ENCODINGS["cl100k_base"].path.read_bytes()[:-10])
    monkeypatch.setattr(me, "RANKS_DIR", tmp_path)
    me.get_encoding.cache_clear()
    try:
        got = {c.name: c for c in compare_encodings("hello")}
        assert not got["cl100k_base"].available and "corrupt" in got["cl100k_base"].note
        assert "python -m model.encodings" in got["cl100k_base"].note
        assert not got["o200k_base"].available and "missing" in got["o200k_base"].note
        assert got["p50k_base"].available is False and got["r50k_base"].available
    finally:
        me.get_encoding.cache_clear()


def test_bad_text_refused():
    with pytest.raises(InputError):
        compare_encodings("bad\x00text")


def test_converter_round_trip():
    """js-tiktoken's compact form ("! <first rank> tok tok ...") back to tiktoken's lines."""
    js = 'export default {"bpe_ranks":"! 0 IQ== Ig==\\n! 5 Iw=="};'
    assert convert_js_ranks(js) == b"IQ== 0\nIg== 1\nIw== 5\n"


def test_tab_draws_splits_for_short_texts_and_counts_long_ones():
    from playground.ui.tokenization import SPLITS_MAX_CHARS, ui_tokenize

    *_, table, splits = ui_tokenize("Attention isallyou need", True, False)
    assert [row[0] for row in table] == ["gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
    assert [row[2] for row in table] == ["6", "6", "6", "5", "5"]
    assert splits.count('class="pg-enc"') == 5 and splits.count('class="gpt-token"') == 6 + 6 + 6 + 5 + 5
    long_text = "to be or not to be " * (SPLITS_MAX_CHARS // 10)
    *_, table, splits = ui_tokenize(long_text, True, False)
    assert all(row[2] != "–" for row in table) and "gpt-token" not in splits and "2,000" in splits
