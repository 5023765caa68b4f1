"""The shared validators: what they accept and the messages they give for what they refuse."""

from __future__ import annotations

import math

import pytest

from playground import limits
from playground.validation import (
    InputError,
    parse_int_list,
    validate_bool,
    validate_choice,
    validate_float,
    validate_int,
    validate_text,
    validate_token_ids,
)


def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)


@pytest.mark.parametrize("text", ["hello", "  x ", "tab\tand\nnewline", "emoji 🎭", "مرحبا", "中文"])
def test_text_accepted(text):
    assert validate_text(text, max_chars=100) == text


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        (None, "empty"),
        (123, "must be text"),
        ("x" * 101, "limit is 100"),
        ("a\x00b", r"U\+0000"),
        ("bell\x07", r"U\+0007"),
        ("lone \ud800 surrogate", "surrogate"),
    ],
)
def test_text_refused(text, fragment):
    with pytest.raises(InputError, match=fragment):
        validate_text(text, max_chars=100)


def test_text_empty_allowed_when_asked():
    assert validate_text("", max_chars=5, allow_empty=True) == ""


@pytest.mark.parametrize("value, expected", [(3, 3), (3.0, 3), ("7", 7), (" -2 ", -2), ("4.0", 4)])
def test_int_accepted(value, expected):
    assert validate_int(value, name="n", minimum=-5, maximum=10) == expected


@pytest.mark.parametrize(
    "value, fragment",
    [
        (11, "from -5 to 10"),
        (-6, "from -5 to 10"),
        (2.5, "whole number"),
        (math.nan, "whole number"),
        (math.inf, "whole number"),
        ("abc", "must be a number"),
        (True, "must be a number"),
        (None, "must be a number"),
        ([1], "must be a number"),
        ("__import__('os')", "must be a number"),
    ],
)
def test_int_refused(value, fragment):
    with pytest.raises(InputError, match=fragment):
        validate_int(value, name="n", minimum=-5, maximum=10)


def test_float_bounds_exclusive_and_inclusive():
    assert validate_float(1.0, name="top_p", minimum=0.0, maximum=1.0, min_inclusive=False) == 1.0
    with pytest.raises(InputError, match=r"\(0, 1\]"):
        validate_float(0.0, name="top_p", minimum=0.0, maximum=1.0, min_inclusive=False)
    for bad in (math.nan, -math.inf, math.inf, "nan", 1e308 * 10, 1.5):
        with pytest.raises(InputError, match="top_p"):
            validate_float(bad, name="top_p", minimum=0.0, maximum=1.0, min_inclusive=False)


def test_bool_and_choice():
    assert validate_bool(False, name="flag") is False
    with pytest.raises(InputError, match="true or false"):
        validate_bool("yes", name="flag")
    assert validate_choice("2D", ["2D", "3D"], name="view") == "2D"
    with pytest.raises(InputError, match="'2D', '3D'"):
        validate_choice("4D", ["2D", "3D"], name="view")


@pytest.mark.parametrize(
    "text, expected",
    [("31373, 2506", [31373, 2506]), ("[31373, 2506]", [31373, 2506]), ("31373 2506\n1", [31373, 2506, 1]), ("-1", [-1])],
)
def test_parse_int_list(text, expected):
    assert parse_int_list(text, max_chars=100, max_count=10) == expected


@pytest.mark.parametrize(
    "text, fragment",
    [("", "empty"), ("[]", "no numbers"), ("1, two", "item 2"), ("1.5", "item 1"), ("1e3", "item 1"),
     ("__import__('os')", "not a whole number"), ("1 " * 11, "limit is 10")],
)
def test_parse_int_list_refused(text, fragment):
    with pytest.raises(InputError, match=fragment):
        parse_int_list(text, max_chars=100, max_count=10)


def test_token_ids_range():
    assert validate_token_ids([0, 50256], vocab_size=50257, max_count=5) == [0, 50256]
    with pytest.raises(InputError, match="0 to 50256"):
        validate_token_ids([50257], vocab_size=50257, max_count=5)
    with pytest.raises(InputError, match="0 to 50256"):
        validate_token_ids([-1], vocab_size=50257, max_count=5)
    with pytest.raises(InputError, match="limit is 5"):
        validate_token_ids(range(6), vocab_size=50257, max_count=5)
    with pytest.raises(InputError, match="list of whole numbers"):
        validate_token_ids("12", vocab_size=50257, max_count=5)


def test_limits_are_consistent():
    assert limits.MIN_D_MODEL % 2 == 0 and limits.MAX_D_MODEL % 2 == 0
    assert limits.MIN_NEIGHBOURS <= limits.MAX_NEIGHBOURS
    assert limits.MIN_PCA_WORDS >= 3  # a 3D projection needs three points
    assert 0 < limits.MIN_BASE < 10000 < limits.MAX_BASE
