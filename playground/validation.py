"""Input validation shared by every tab: one error type and the checks that raise it.

Every public function of the playground validates what it is given with these helpers, so a bad
request always ends in an :class:`InputError` whose message says what was wrong and what is
accepted (the UI shows it as a ``gr.Error``), never in a stack trace.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "InputError",
    "validate_text",
    "validate_int",
    "validate_float",
    "validate_bool",
    "validate_choice",
    "validate_token_ids",
    "parse_int_list",
    "format_number",
    "validate_layer_head",
]

# Whitespace control characters are ordinary text; every other C0/C1 control character (NUL
# included) is refused because it is invisible in the UI and never in the training corpus.
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_INT_RE = re.compile(r"[+-]?\d+")


class InputError(ValueError):
    """Bad user input; the message is meant to be shown to the user as is."""


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Python refuses to turn a longer digit string into an int (sys.get_int_max_str_digits()).
_MAX_INT_DIGITS = 4_300


def format_number(number: float | int) -> str:
    """A number as a message shows it: short whatever its size (``1e+308``, not 309 digits)."""
    if isinstance(number, float):
        shown = f"{number:g}"
        return shown if float(shown) == number else repr(number)  # 1.0000001, not "1"
    digits = str(abs(number))
    if len(digits) <= 15:
        return str(number)
    mantissa = (digits[0] + "." + digits[1:6]).rstrip("0").rstrip(".")
    return f"{'-' if number < 0 else ''}{mantissa}e+{len(digits) - 1}"


def validate_text(
    text: Any,
    *,
    name: str = "text",
    max_chars: int,
    allow_empty: bool = False,
) -> str:
    """Return ``text`` if it is a string of at most ``max_chars`` characters, with no control
    character (other than tab, newline, carriage return) and no lone surrogate; empty or
    whitespace-only text is refused unless ``allow_empty``."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InputError(f"{name} must be text, not {type(text).__name__}")
    if not allow_empty and not text.strip():
        raise InputError(f"{name} is empty: type some text (1 to {max_chars:,} characters)")
    if len(text) > max_chars:
        raise InputError(f"{name} is {len(text):,} characters long; the limit is {max_chars:,} characters")
    for i, ch in enumerate(text):
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            raise InputError(
                f"{name} contains a lone surrogate U+{code:04X} at character {i}: "
                "only valid Unicode text is accepted"
            )
        if ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) == "Cc":
            raise InputError(
                f"{name} contains the control character U+{code:04X} at character {i}: "
                "only printable text, tabs and newlines are accepted"
            )
    return text


def _number(value: Any, name: str) -> float | int:
    """A real number from an int, float or numeric string; bool and everything else refused."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"{name} must be a number, not {_describe(value)}")
    if isinstance(value, (int, float)):
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return _number(value.item(), name)
        except (TypeError, ValueError):
            pass
    if isinstance(value, str):
        s = value.strip()
        if _INT_RE.fullmatch(s) and len(s) <= _MAX_INT_DIGITS:
            return int(s)
        if len(s) <= 64:  # float() on a huge string is cheap, but the message would not be
            try:
                return float(s)
            except ValueError:
                pass
    raise InputError(f"{name} must be a number, not {_describe(value)}")


def validate_int(value: Any, *, name: str, minimum: int, maximum: int) -> int:
    """Return ``value`` as an int in [minimum, maximum]; integral floats (3.0) and numeric
    strings are accepted, NaN, inf, fractions and non-numbers are not."""
    given = _number(value, name)
    if isinstance(given, float):
        if not math.isfinite(given) or not given.is_integer():
            raise InputError(f"{name} must be a whole number from {minimum} to {maximum}, not {format_number(given)}")
    if not minimum <= given <= maximum:
        raise InputError(f"{name} must be from {minimum} to {maximum}, not {format_number(given)}")
    return int(given)


def validate_float(
    value: Any,
    *,
    name: str,
    minimum: float,
    maximum: float,
    min_inclusive: bool = True,
    max_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float within the range (bounds inclusive or not)."""
    given = _number(value, name)
    lo, hi = ("[" if min_inclusive else "("), ("]" if max_inclusive else ")")
    accepted = f"a number in {lo}{minimum:g}, {maximum:g}{hi}"
    try:
        number = float(given)
    except OverflowError:  # an int past 1e308: out of any range
        raise InputError(f"{name} must be {accepted}, not {format_number(given)}") from None
    if not math.isfinite(number):
        raise InputError(f"{name} must be {accepted}, not {number}")
    below = number < minimum or (not min_inclusive and number == minimum)
    above = number > maximum or (not max_inclusive and number == maximum)
    if below or above:
        raise InputError(f"{name} must be {accepted}, not {format_number(number)}")
    return number


def validate_bool(value: Any, *, name: str) -> bool:
    """Return ``value`` if it is a bool (a checkbox); anything else is refused."""
    if isinstance(value, bool):
        return value
    raise InputError(f"{name} must be true or false, not {_describe(value)}")


def validate_choice(value: Any, choices: Sequence[str], *, name: str) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if isinstance(value, str) and value in choices:
        return value
    raise InputError(f"{name} must be one of {', '.join(map(repr, choices))}, not {_describe(value)}")


def validate_token_ids(ids: Iterable[Any], *, vocab_size: int, max_count: int, name: str = "token ids") -> list[int]:
    """Return ``ids`` as a list of ints, each in [0, vocab_size), at most ``max_count`` of them."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise InputError(f"{name} must be a list of whole numbers, not {_describe(ids)}")
    out: list[int] = []
    for i, value in enumerate(ids):
        if len(out) >= max_count:
            raise InputError(f"too many {name}: the limit is {max_count:,}")
        try:
            out.append(validate_int(value, name=f"{name}[{i}]", minimum=0, maximum=vocab_size - 1))
        except InputError as err:
            raise InputError(f"{err} (the vocabulary has ids 0 to {vocab_size - 1})") from None
    return out


def parse_int_list(text: Any, *, name: str = "token ids", max_chars: int, max_count: int) -> list[int]:
    """Parse a typed list of whole numbers such as ``"31373, 2506"`` or ``"[31373 2506]"``.

    Separators are commas and/or whitespace, optionally inside one pair of square brackets.
    Returns the ints unchecked against a range (see :func:`validate_token_ids`).
    """
    text = validate_text(text, name=name, max_chars=max_chars)
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    items = [item for item in re.split(r"[\s,]+", body) if item]
    if not items:
        raise InputError(f"{name}: no numbers found; type ids separated by commas or spaces, e.g. 31373, 2506")
    if len(items) > max_count:
        raise InputError(f"{name}: {len(items):,} numbers given; the limit is {max_count:,}")
    for position, item in enumerate(items, start=1):
        if not _INT_RE.fullmatch(item):
            raise InputError(
                f"{name}: item {position} ({_describe(item)}) is not a whole number; "
                "type ids separated by commas or spaces, e.g. 31373, 2506"
            )
        if len(item) > _MAX_INT_DIGITS:
            raise InputError(f"{name}: item {position} is a number of {len(item):,} digits, far out of range")
    return [int(item) for item in items]


def validate_layer_head(layer: Any, head: Any, *, n_layer: int, n_head: int) -> tuple[int, int]:
    """A layer and a head of a model with ``n_layer`` layers of ``n_head`` heads, both 0-based."""
    return (
        validate_int(layer, name="layer", minimum=0, maximum=n_layer - 1),
        validate_int(head, name="head", minimum=0, maximum=n_head - 1),
    )
