"""Every default and example prompt, in the tabs and in the docs, is written in the corpus's own
style: each of its lines begins a line of the training text (a speaker as the edition writes it,
``Romeo.`` or ``KING HENRY.`` alone on its line, then the speech), and no speaker is written
``NAME:``, which the model never saw (it costs ~2 nats on the next words)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from model import get_tokenizer
from playground import attention, inside
from playground.generation.params import EXAMPLE_PROMPTS as GENERATION_PROMPTS
from playground.ui import compare, learn

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "app.md", ROOT / "export" / "hub.py"]
# A prompt handed to the app or a model in the docs' code: predict("..."), submit("..."),
# encode("..."), generate("..."), tok("...") or tok(["...", "..."]).
DOC_CALL = re.compile(r'(?:predict|submit|encode|generate|tok)\(\[?((?:"[^"\n]*"(?:, )?)+)')
SPEAKER_COLON = re.compile(r"^[A-Z][A-Za-z ]*[A-Za-z]:(\s|$)")


def tab_prompts() -> list[str]:
    return [*GENERATION_PROMPTS, *attention.EXAMPLE_PROMPTS, *inside.EXAMPLE_TEXTS, compare.PROMPT, learn.PROMPT]


def doc_prompts() -> list[str]:
    found = []
    for path in DOCS:
        for match in DOC_CALL.finditer(path.read_text()):
            for literal in re.findall(r'"([^"\n]*)"', match.group(1)):
                # The docs write a new line as \n (and \\n inside the Hub card's f-strings).
                found.append(literal.replace("\\\\n", "\n").replace("\\n", "\n"))
    return [p for p in found if p and p not in ("hello everyone", "king - man + woman", "pt")]


@pytest.fixture(scope="module")
def training_lines(data_dir: Path) -> set[str]:
    """Every line of the training text (train.bin decoded), stripped of surrounding blanks."""
    text = get_tokenizer().decode(np.fromfile(data_dir / "train.bin", dtype=np.uint16).tolist())
    return {line.strip() for line in text.split("\n")}


def line_starts_training_line(line: str, training_lines: set[str]) -> bool:
    return line in training_lines or any(t.startswith(line) for t in training_lines)


def test_doc_prompts_found():
    prompts = doc_prompts()
    # README's generate, the two in docs/app.md, the Hub card's four clients (five prompts).
    assert len(prompts) >= 7, prompts
    assert any(p.startswith("Romeo.\n") for p in prompts)


@pytest.mark.parametrize("where", ["tabs", "docs"])
def test_prompts_in_the_corpus_style(where, training_lines):
    prompts = tab_prompts() if where == "tabs" else doc_prompts()
    for prompt in prompts:
        lines = [line.strip() for line in prompt.split("\n") if line.strip()]
        assert lines, prompt
        for line in lines:
            assert not SPEAKER_COLON.match(line), f"{prompt!r}: a speaker is written NAME. on its own line, not {line!r}"
            assert line_starts_training_line(line, training_lines), f"{prompt!r}: {line!r} begins no line of the training text"
    # A prompt that names a speaker puts the name alone on its first line, as the corpus does.
    speakers = [p for p in prompts if "\n" in p]
    assert speakers and all(p.split("\n")[0] in training_lines for p in speakers)


def test_the_old_style_fails_the_check(training_lines):
    """The check can fail: the style the app used before is refused."""
    for line in ("ROMEO:", "ROMEO: What say you to", "HAMLET:"):
        assert SPEAKER_COLON.match(line) or not line_starts_training_line(line, training_lines)
    assert not line_starts_training_line("ROMEO:", training_lines)
