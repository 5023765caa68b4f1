"""The words of the eight tabs both editions have come from one place (playground/lessons.py): the Gradio page
shows them as written, the static edition as HTML rendered from them, and neither holds a copy."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from import_graph import import_graph
from playground import links
from playground.lessons import LESSONS, Lesson, lessons_json, markdown_html, slowest_wavelength, to_html
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app

ROOT = Path(__file__).resolve().parents[2]
FIVE = ("tokenization", "embeddings", "positional", "attention", "inside", "generation")  # built alone by these tests
BOTH = (*FIVE, "model", "compare")  # the tabs both editions have


def _texts(lesson: Lesson) -> Iterator[tuple[str, str]]:
    """(where, text) for every text of a lesson."""
    yield "intro", lesson.intro
    yield from ((f"notes[{name}]", text) for name, text in lesson.notes.items())
    yield from ((f"captions[{name}]", text) for name, text in lesson.captions.items())
    yield "next_sentence", lesson.next_sentence
    yield "next_tab", lesson.next_tab


def _ui_module(tab: str):
    import importlib

    return importlib.import_module(f"playground.ui.{tab}")


def _build(tab: str, module=None):
    """One tab's page, built as app.py builds it (inside its ``gr.Tab``)."""
    import gradio as gr

    module = module or _ui_module(tab)
    with gr.Blocks() as demo:
        with gr.Tab(tab) as page:
            takes = inspect.signature(module.build).parameters  # (res, tab) where the tab reads the model
            module.build(*[arg for name, arg in (("res", RES), ("tab", page)) if name in takes])
    return demo


def _shown(blocks) -> list[str]:
    """Every string the components show: Markdown and HTML values, labels (accordions, tables)."""
    return [v for b in blocks for v in (getattr(b, "value", None), getattr(b, "label", None)) if isinstance(v, str)]


def _descendants(block) -> Iterator:
    for child in getattr(block, "children", []):
        yield child
        yield from _descendants(child)


def test_every_tab_has_its_lesson():
    assert tuple(LESSONS) == BOTH
    for tab, lesson in LESSONS.items():
        assert lesson.tab == tab and tab in links.TABS
        assert lesson.next_key in links.TABS and lesson.next_key != tab
        for where, text in _texts(lesson):
            assert text.strip() == text and text, f"{tab}: {where} is empty or padded"
        assert lesson.intro.count(" ") > 10 and lesson.next_sentence.endswith(".")
    # in the page's order, each leading on to a later tab
    order = [links.TABS.index(tab) for tab in LESSONS]
    assert order == sorted(order)
    assert all(links.TABS.index(lesson.next_key) > links.TABS.index(tab) for tab, lesson in LESSONS.items())


def test_lessons_are_read_only():
    lesson = LESSONS["tokenization"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        lesson.intro = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        lesson.captions["decode"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        LESSONS["tokenization"] = lesson  # type: ignore[index]


def test_captions_are_plain_text():
    """Captions go into labels and escaped HTML as written: no Markdown or HTML that one page
    would render and the other show raw."""
    for lesson in LESSONS.values():
        for name, text in lesson.captions.items():
            assert not set(text) & set("*`<>[]#_\\"), f"{lesson.tab}: captions[{name}]"


def test_lessons_import_no_gradio_and_no_model():
    """The static export reads the lessons alone: no page, no Gradio, no torch."""
    assert not any(target.startswith("playground.ui") for target in import_graph()["playground.lessons"])
    code = "import sys, playground.lessons; print(sorted(m for m in ('gradio', 'torch', 'playground.ui') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_wavelength_quoted_is_the_tabs_own():
    from playground import positional as pe

    assert slowest_wavelength(512, 10000) == pe.wavelength(510, 512, 10000)
    assert f"a turn every {pe.wavelength(510, 512, 10000):,.0f} positions" in LESSONS["positional"].notes["lesson_fix"]


def test_the_positional_note_corrects_the_worked_examples_i_and_2i():
    """The lesson's example calls the dimension whose exponent is 256/512 "i = 256"; in
    base^(2i/d_model) that exponent is 2i = 256, the pair i = 128 (i = 256 would give base^1)."""
    from playground import positional as pe

    note = LESSONS["positional"].notes["lesson_fix"]
    d_model, base = 512, 10000
    i = next(i for i in range(d_model // 2) if 2 * i / d_model == 0.5)
    assert pe.frequencies(d_model, base)[i] == pytest.approx(1 / base**0.5)
    assert "“For dimension i = 256: the exponent would be 256/512 = 0.5 … 10000^0.5 = 100”" in note
    assert f"**dimension 2i = {2 * i}**, the pair **i = {i}**" in note and "mixes up i and 2i" in note
    assert f"i = 256 itself would give 2i/d_model = 512/512 = 1, {base}^1" in note


def _string_literals(path: Path) -> list[str]:
    """The strings a module's code writes (pieces written side by side joined, as Python joins
    them), its docstrings left out: they may describe the tab in the same words."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("tab", BOTH)
def test_the_tab_module_holds_no_copy(tab):
    """Each text's opening words (all of a short caption) are written in lessons.py only, not in
    a string of the tab's module."""
    module = _ui_module(tab)
    assert module.LESSON is LESSONS[tab]
    literals = _string_literals(Path(module.__file__))
    for where, text in _texts(LESSONS[tab]):
        if where != "next_tab":  # a tab's name may well appear in its own module
            assert not any(text[:25] in s for s in literals), f"{tab}: {where} is written in playground/ui/{tab}.py too"


@pytest.mark.parametrize("tab", FIVE)
def test_the_tab_shows_whatever_the_lesson_says(tab, monkeypatch):
    """Every text of the lesson replaced by a marker: the built tab shows each marker, so every
    text on the page is read from the lesson when the tab is built."""
    module = _ui_module(tab)
    lesson = LESSONS[tab]
    marked = dataclasses.replace(
        lesson,
        intro=f"MARK {tab} intro",
        notes={name: f"MARK {tab} note {name}" for name in lesson.notes},
        captions={name: f"MARK {tab} caption {name}" for name in lesson.captions},
        next_sentence=f"MARK {tab} next.",
        next_tab=f"MARK {tab} tab",
    )
    monkeypatch.setattr(module, "LESSON", marked)
    if hasattr(module, "TABLE_HINT"):  # built when the module loads
        monkeypatch.setattr(module, "TABLE_HINT", module.TABLE_HINT.replace(lesson.captions["table_hint"], marked.captions["table_hint"]))
    shown = _shown(_build(tab, module).blocks.values())
    for where, text in _texts(marked):
        assert any(text in s for s in shown), f"{tab}: {where} not shown"
    assert f"MARK {tab} intro" in shown  # the opening note is the intro itself, nothing around it
    assert not any(lesson.intro in s for s in shown)


def test_markdown_is_rendered_and_html_is_escaped():
    evil = Lesson(
        tab="x",
        title="<script>alert(1)</script>",
        intro="**Bold** <script>alert(1)</script> [link](javascript:alert(1)) <img src=x onerror=alert(1)>",
        notes={"n": "<iframe src=//example.com></iframe>\n\n<script>"},
        captions={"c": '<b onclick="alert(1)">'},
        next_sentence="</p><script>alert(1)</script>",
        next_tab='"><script>',
        next_key="y",
    )
    out = to_html(evil)
    text = json.dumps(out)
    assert "<script" not in text and "<img" not in text and "<iframe" not in text and "<b " not in text
    assert 'href="javascript' not in text
    assert "<strong>Bold</strong>" in out["intro"] and "&lt;script&gt;" in out["intro"]
    assert out["next_tab"] == "&quot;&gt;&lt;script&gt;"
    # the app's texts: a '<' of the text arrives as text
    assert "(&lt;1)" in to_html(LESSONS["generation"])["intro"]


def test_no_text_needs_raw_html():
    """The texts render the same with raw HTML allowed or not: turning it off loses nothing."""
    with_html = MarkdownIt("commonmark", {"html": True})
    for lesson in LESSONS.values():
        for text in [lesson.intro, *lesson.notes.values()]:
            assert markdown_html(text) == with_html.render(text)


def test_lessons_json_has_every_tab_rendered():
    data = lessons_json()
    assert list(data) == list(LESSONS)
    assert json.loads(json.dumps(data)) == data
    for tab, page in data.items():
        lesson = LESSONS[tab]
        assert page["intro"].startswith("<p>") and "**" not in page["intro"]
        assert set(page["notes"]) == set(lesson.notes) and set(page["captions"]) == set(lesson.captions)
        assert page["next_sentence"] and page["next_key"] == lesson.next_key
    assert "<strong>tokens</strong>" in data["tokenization"]["intro"]
    assert "<code> everyone</code>" in data["tokenization"]["intro"]


@pytest.fixture(scope="module")
def app_tabs(built_app) -> dict:
    """{tab id: its gr.Tab} of the app's own page."""
    import gradio as gr

    return {b.id: b for b in built_app.blocks.values() if isinstance(b, gr.Tab)}


def test_the_app_shows_the_lessons(app_tabs):
    import html

    for tab, lesson in LESSONS.items():
        page = app_tabs[tab]
        assert page.label.endswith(f" · {lesson.title}")
        blocks = list(_descendants(page))
        markdown = [b.value for b in blocks if type(b).__name__ == "Markdown"]
        assert markdown[0] == lesson.intro  # the tab opens on its explanation
        for name, note in lesson.notes.items():
            assert note in markdown, f"{tab}: notes[{name}]"
        shown = _shown(blocks)
        for name, caption in lesson.captions.items():
            assert any(caption in s or html.escape(caption) in s for s in shown), f"{tab}: captions[{name}]"
        closing = [b.value for b in blocks if type(b).__name__ == "HTML" and 'class="pg-next"' in (b.value or "")]
        assert len(closing) == 1 and html.escape(lesson.next_sentence) in closing[0]
        assert f'data-next-tab="{html.escape(lesson.next_tab)}"' in closing[0]
        assert app_tabs[lesson.next_key].label.endswith(f" · {lesson.next_tab}")
