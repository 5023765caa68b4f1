"""A small, safe parser for embedding arithmetic such as ``king - man + woman`` or ``0.5*a + b``.

Own tokenizer and recursive descent; nothing is ever evaluated as Python. Grammar::

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/") unary)*
    unary   := ("-" | "+") unary | primary
    primary := NUMBER | WORD | "(" expr ")"

Everything the grammar can build is linear in the word vectors, so an expression reduces to a
linear combination {word: coefficient} (``king - man + woman`` -> {king: 1, man: -1, woman: 1});
the vector is then sum(coefficient * embedding(word)). Words times words, or numbers divided by
words, are not linear and are refused.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from . import limits
from .validation import InputError, validate_text

__all__ = ["LinearForm", "parse_expression"]

# Words: letters, digits, underscores and apostrophes (o'er, 'tis); numbers: 2, 0.5, .5, 1e-2.
_TOKEN_RE = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<word>[^\W\d][\w']*|'[\w']+)|(?P<op>[-+*/()]))")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num", "word", "op", "end"
    text: str
    pos: int


@dataclass(frozen=True)
class LinearForm:
    """Either a plain number (``coefs`` empty) or sum(coefs[w] * vec(w)) + 0."""

    coefs: dict[str, float]
    scalar: float = 0.0

    @property
    def is_number(self) -> bool:
        return not self.coefs

    def formula(self) -> str:
        """Readable canonical form, e.g. ``king − man + woman`` or ``0.5·a + b``."""
        parts = []
        for i, (word, c) in enumerate(self.coefs.items()):
            sign = "−" if c < 0 else "+"
            mag = abs(c)
            term = word if mag == 1 else f"{mag:g}·{word}"
            parts.append((("−" if c < 0 else "") if i == 0 else f" {sign} ") + term)
        return "".join(parts) or f"{self.scalar:g}"


def _lex(text: str) -> list[_Tok]:
    toks, pos = [], 0
    stripped_end = len(text.rstrip())
    while pos < stripped_end:
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            bad = text[pos:].lstrip()[:1]
            where = len(text) - len(text[pos:].lstrip())
            raise InputError(
                f"unexpected character {bad!r} at position {where + 1}: expressions use words, numbers, "
                "+ - * / and parentheses, e.g. king - man + woman"
            )
        kind = m.lastgroup
        toks.append(_Tok(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    toks.append(_Tok("end", "", len(text)))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _lex(text)
        self.i = 0
        self.depth = 0
        self.words = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def _nest(self) -> None:
        self.depth += 1
        if self.depth > limits.MAX_EXPRESSION_DEPTH:
            raise InputError(f"expression nested too deeply: at most {limits.MAX_EXPRESSION_DEPTH} levels of parentheses or signs")

    def expr(self) -> LinearForm:
        value = self.term()
        while self.peek().text in ("+", "-") and self.peek().kind == "op":
            op = self.take()
            right = self.term()
            if value.is_number != right.is_number:
                raise InputError(f"cannot add or subtract a number and a word vector ({op.text} at position {op.pos + 1})")
            value = _combine(value, right, 1.0 if op.text == "+" else -1.0)
        return value

    def term(self) -> LinearForm:
        value = self.unary()
        while self.peek().text in ("*", "/") and self.peek().kind == "op":
            op_tok = self.take()
            right = self.unary()
            if op_tok.text == "*":
                if not value.is_number and not right.is_number:
                    raise InputError(f"cannot multiply two word vectors (* at position {op_tok.pos + 1}); scale a word by a number, e.g. 0.5*king")
                value = _scale(right, value.scalar) if value.is_number else _scale(value, right.scalar)
            else:
                if not right.is_number:
                    raise InputError(f"cannot divide by a word vector (/ at position {op_tok.pos + 1}); divide by a number, e.g. king/2")
                if right.scalar == 0:
                    raise InputError(f"division by zero (/ at position {op_tok.pos + 1})")
                value = _scale(value, 1.0 / right.scalar)
        return value

    def unary(self) -> LinearForm:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("-", "+"):
            self.take()
            self._nest()
            inner = self.unary()
            self.depth -= 1
            return _scale(inner, -1.0) if tok.text == "-" else inner
        return self.primary()

    def primary(self) -> LinearForm:
        tok = self.take()
        if tok.kind == "num":
            value = float(tok.text)
            if not math.isfinite(value) or abs(value) > limits.MAX_COEFFICIENT:
                raise InputError(f"number {tok.text} is out of range: numbers must be within ±{limits.MAX_COEFFICIENT:g}")
            result = LinearForm({}, value)
        elif tok.kind == "word":
            self.words += 1
            if self.words > limits.MAX_EXPRESSION_TERMS:
                raise InputError(f"too many words: an expression may use at most {limits.MAX_EXPRESSION_TERMS}")
            if len(tok.text) > limits.MAX_WORD_CHARS:
                raise InputError(f"word at position {tok.pos + 1} is longer than {limits.MAX_WORD_CHARS} characters")
            result = LinearForm({tok.text: 1.0})
        elif tok.text == "(":
            self._nest()
            result = self.expr()
            close = self.take()
            if close.text != ")":
                raise InputError(f"missing ')' for the '(' at position {tok.pos + 1}")
            self.depth -= 1
        elif tok.kind == "end":
            raise InputError("expression ends too early: a word or number is missing after the last operator")
        else:
            raise InputError(f"unexpected {tok.text!r} at position {tok.pos + 1}: a word, number or '(' was expected")
        nxt = self.peek()
        if nxt.kind in ("word", "num") or nxt.text == "(":
            if nxt.text == "(" and tok.kind == "word":
                raise InputError(f"calls are not supported ({tok.text}( at position {tok.pos + 1}): combine words with + - * / only")
            raise InputError(f"missing operator before {nxt.text!r} at position {nxt.pos + 1}: write e.g. 0.5*king or king + queen")
        return result


def _combine(a: LinearForm, b: LinearForm, sign: float) -> LinearForm:
    coefs = dict(a.coefs)
    for word, c in b.coefs.items():
        coefs[word] = coefs.get(word, 0.0) + sign * c
    return LinearForm(coefs, a.scalar + sign * b.scalar)


def _scale(a: LinearForm, factor: float) -> LinearForm:
    return LinearForm({w: c * factor for w, c in a.coefs.items()}, a.scalar * factor)


def parse_expression(text: object) -> LinearForm:
    """Parse ``text`` into the linear combination of words it denotes.

    Raises :class:`InputError` for empty, too long, malformed or unbalanced expressions, code-like
    input (calls, attribute access, other symbols), non-linear use of words and pure numbers.
    Words whose coefficients cancel (``king - king``) are dropped; if none is left, an error.
    """
    text = validate_text(text, name="expression", max_chars=limits.MAX_EXPRESSION_CHARS)
    parser = _Parser(text)
    form = parser.expr()
    tail = parser.peek()
    if tail.kind != "end":
        if tail.text == ")":
            raise InputError(f"unbalanced ')' at position {tail.pos + 1}: it has no matching '('")
        raise InputError(f"unexpected {tail.text!r} at position {tail.pos + 1}")
    if form.is_number:
        raise InputError("the expression has no word: use words, e.g. king - man + woman")
    kept = {w: c for w, c in form.coefs.items() if abs(c) > 1e-12}
    if not kept:
        raise InputError("the words cancel out (e.g. king - king): the result would be the zero vector")
    for word, c in kept.items():
        if not math.isfinite(c) or abs(c) > limits.MAX_COEFFICIENT:
            raise InputError(f"the coefficient of {word!r} is {c:g}: it must be within ±{limits.MAX_COEFFICIENT:g}")
    return LinearForm(kept)
