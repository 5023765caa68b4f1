"""Tokenization tab: the lessons' examples, the switches, ids -> text and bad input."""

from __future__ import annotations

import pytest

from playground import limits
from playground.tokenization import EXAMPLES, compare_encodings, decode_ids, tokenize
from playground.validation import InputError


def test_seed_hello_everyone():
    # The Transformer tutorial: encoder.encode("hello everyone") -> [31373, 2506]; pieces ['hello', ' everyone'].
    r = tokenize("hello everyone")
    assert r.ids == [31373, 2506]
    assert [t.text for t in r.tokens] == ["hello", " everyone"]
    assert (r.n_tokens, r.n_characters) == (2, 14)
    assert r.chars_per_token == pytest.approx(7.0)
    assert r.highlighted == [("hello", "31373"), (" everyone", "2506")]


def test_seed_hi_my_name_is_moussa():
    # The Transformer tutorial, embedding layer section: tokenizer.encode("Hi my name is Moussa").
    assert tokenize("Hi my name is Moussa").ids == [17250, 616, 1438, 318, 42436, 11400]


def test_seed_attention_isallyou_need_splits_the_glued_words():
    # The Transformer tutorial: "isallyou" is three words glued together; BPE still splits it into known pieces.
    r = tokenize("Attention isallyou need")
    assert "".join(s.text for s in r.spans) == "Attention isallyou need"
    covering = [t.text for t in r.tokens if t.text.strip() and t.text.strip() in "isallyou"]
    assert len(covering) >= 2
    assert r.tokens[-1].text == " need"


def test_examples_are_the_transformer_tutorials():
    assert set(EXAMPLES) == {"hello everyone", "Hi my name is Moussa", "Attention isallyou need"}


def test_endoftext_switch():
    special = tokenize("<|endoftext|>", special_as_token=True)
    assert special.ids == [50256] and special.tokens[0].special
    assert "single special token 50256" in special.notice
    plain = tokenize("<|endoftext|>", special_as_token=False)
    assert 50256 not in plain.ids and plain.n_tokens > 1
    assert "".join(t.text for t in plain.tokens) == "<|endoftext|>"
    assert "plain text" in plain.notice


def test_visible_whitespace_keeps_the_lines():
    r = tokenize("to be\nor", show_whitespace=True)
    assert "".join(text for text, _ in r.highlighted) == "to⋅be↵\nor"
    assert ">to<" in r.html and ">⋅be<" in r.html and "↵\n" in r.html
    assert "⋅" not in tokenize("to be\nor").html  # the switch off: the text as typed
    # the ids do not change with the view
    assert r.ids == tokenize("to be\nor").ids


@pytest.mark.parametrize("text", ["🎭 emoji", "中文字符", "مرحبا بالعالم", "naïve café", "tabs\tand\r\nlines"])
def test_spans_cover_the_text_exactly(text):
    r = tokenize(text)
    assert "".join(s.text for s in r.spans) == text
    assert sum(len(s.ids) for s in r.spans) == r.n_tokens
    assert decode_ids(r.ids).text == text
    assert r.n_bytes == len(text.encode("utf-8"))


def test_emoji_is_one_span_of_several_tokens():
    r = tokenize("🎭")
    assert len(r.spans) == 1 and len(r.spans[0].ids) == r.n_tokens > 1
    assert not r.tokens[0].complete  # its first token is only part of the emoji's 4 bytes
    assert "part of a character" in r.notice


def test_html_escapes_user_text():
    from html.parser import HTMLParser

    text = '<script>alert("x")</script> & <b>'
    r = tokenize(text)

    class Collect(HTMLParser):
        tags: list[str] = []
        data: list[str] = []
        ids: list[str] = []
        in_id = False

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self.in_id = tag == "sub"

        def handle_endtag(self, tag):
            self.in_id = False

        def handle_data(self, data):
            (self.ids if self.in_id else self.data).append(data)

    parser = Collect(convert_charrefs=True)
    parser.feed(r.html)
    assert set(parser.tags) == {"div", "span", "sub"}  # no tag from the user's text survives (sub: the ids)
    assert "".join(parser.data) == text  # and the text itself is shown as typed
    assert " ".join(parser.ids) == " ".join(map(str, r.ids))  # each token's id under it, in order


def test_empty_text_is_a_notice_not_an_error():
    r = tokenize("")
    assert r.n_tokens == 0 and r.ids == [] and "Empty" in r.notice


@pytest.mark.parametrize(
    "bad, fragment",
    [("x" * (limits.MAX_TEXT_CHARS + 1), "limit"), ("nul\x00byte", "control character"), ("\udc80", "surrogate"), (42, "must be text")],
)
def test_tokenize_refuses(bad, fragment):
    with pytest.raises(InputError, match=fragment):
        tokenize(bad)


def test_tokenize_refuses_non_bool_switches():
    with pytest.raises(InputError, match="true or false"):
        tokenize("hi", special_as_token="maybe")


def test_decode_seed_ids():
    assert decode_ids("31373, 2506").text == "hello everyone"
    assert decode_ids([31373, 2506]).text == "hello everyone"
    assert decode_ids("[17250 616 1438 318 42436 11400]").text == "Hi my name is Moussa"
    assert "special token" in decode_ids("50256").notice


def test_decode_partial_character_says_so():
    r = decode_ids(tokenize("🎭").ids[:1])
    assert "\ufffd" in r.text and "valid UTF-8" in r.notice


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("50257", "0 to 50256"),
        ("-1", "0 to 50256"),
        ("1, 2.5", "item 2"),
        ("hello", "item 1"),
        ("", "empty"),
        ("[]", "no numbers"),
        ("__import__('os').system('ls')", "not a whole number"),
        ([1, "x"], "must be a number"),
        ([], "empty"),
        ([10**30], "0 to 50256"),
        (", ".join(["1"] * (limits.MAX_IDS + 1)), "limit"),
    ],
)
def test_decode_refuses(bad, fragment):
    with pytest.raises(InputError, match=fragment):
        decode_ids(bad)


def test_every_other_encoding_loads_offline():
    """The ranks files ship with the project (model/ranks, sha256-checked in test_encodings), so
    every encoding must load with no network and give its published ids for a known text."""
    results = {c.name: c for c in compare_encodings("hello everyone")}
    assert set(results) == {"r50k_base", "p50k_base", "cl100k_base", "o200k_base"}
    assert all(c.available and c.n_tokens == len(c.ids) for c in results.values()), {n: c.note for n, c in results.items()}
    # r50k_base is GPT-2's ranks file under another name; p50k adds code tokens above GPT-2's ranks.
    assert results["r50k_base"].ids == results["p50k_base"].ids == [31373, 2506]
    assert results["cl100k_base"].ids == [15339, 5127]
    assert results["o200k_base"].ids == [24912, 6524]


def test_to_dict_is_json_ready():
    import json

    d = tokenize("hello everyone").to_dict()
    assert json.loads(json.dumps(d))["ids"] == [31373, 2506]
    assert json.loads(json.dumps(decode_ids("31373").to_dict()))["text"] == "hello"


def test_a_long_text_is_coloured_up_to_a_cap_and_counted_whole():
    from playground.tokenization import MAX_COLOURED_TOKENS

    text = "to be or not to be " * 1000  # 6,000 tokens, 19,000 characters
    r = tokenize(text)
    assert r.n_tokens == len(r.ids) > 1.4 * MAX_COLOURED_TOKENS
    assert r.html.count('class="gpt-token"') == MAX_COLOURED_TOKENS
    assert 'class="gpt-rest"' in r.html and f"first {MAX_COLOURED_TOKENS:,} tokens are coloured" in r.notice
    # The spans plus the plain rest are the whole text, nothing lost.
    import html as html_lib
    import re

    shown = html_lib.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<sub[^>]*>[^<]*</sub>", "", r.html)))  # the ids aside
    assert shown == text
    assert 'class="gpt-rest"' not in tokenize("short").html


def test_the_page_refuses_a_text_past_the_limit_by_its_typed_length_with_the_browsers_words():
    from playground.ui.tokenization import LENGTH_CHECK_JS, ui_tokenize
    from playground.ui.widgets import error_html

    n = limits.MAX_TEXT_CHARS + 10_000
    with pytest.raises(InputError) as err:
        ui_tokenize("", True, False, n)  # what the page sends for a long paste: no text, its length
    assert str(err.value) == f"text is {n:,} characters long; the limit is {limits.MAX_TEXT_CHARS:,} characters"
    # The page shows the same message before the server answers (LENGTH_CHECK_JS fills in the number).
    server = error_html("Invalid input", str(err.value))
    browser = error_html("Invalid input", str(err.value).replace(f"{n:,}", "{N}"))
    assert browser.replace("{N}", f"{n:,}") == server
    assert f"n > {limits.MAX_TEXT_CHARS}" in LENGTH_CHECK_JS and "['', special, whitespace, n]" in LENGTH_CHECK_JS
    # Within the limit the typed length changes nothing.
    assert ui_tokenize("hello everyone", True, False, 14)[2] == "[31373, 2506]"


@pytest.mark.parametrize("text", ["Hello, my name is Moussa", "hello everyone", "abcd efgh", "to be or not to be"])
def test_the_cards_characters_per_token_are_the_static_editions(text):
    """Two decimals, trailing zeros dropped, as the static edition's card writes it
    (web/static/tabs/tokenization.js: +(chars / tokens).toFixed(2)); the app once showed 3.333
    where the static edition showed 3.33 for the same text."""
    import re

    from playground.ui.tokenization import _counts

    r = tokenize(text)
    cards = dict((what, n) for n, what in re.findall(r"<b>([^<]*)</b>\s*<span>([^<]*)</span>", _counts(r)))
    assert cards["characters / token"] == f"{len(text) / r.n_tokens:.2f}".rstrip("0").rstrip("."), cards
