"""Headless Chromium on the launched app: the page's frame around the lessons. At 1280 px the nine
tabs sit in one row; in every tab the lesson sentence comes first and Copy link after it; on a
390 px phone the header is folded so that the first lesson starts near the top of the screen, and
the tab bar is one row that scrolls sideways, the open tab kept in view."""

from __future__ import annotations

import re

import pytest

from browser_pages import page, phone  # noqa: F401 -- fixtures
from test_browser import shots_dir  # noqa: F401 -- fixture reused
from test_browser_page import PHONE, TABS, open_tab

pytestmark = pytest.mark.browser

# Where a phone's first lesson must start: the title, a two-line intro and one row of tabs fit
# above it (the unfolded header and four rows of tabs put it at 658 px).
PHONE_LESSON_TOP = 350

TAB_BOXES_JS = """() => [...document.querySelectorAll('.tab-container[role=tablist] > button[role=tab]')].map((b) => {
  const r = b.getBoundingClientRect();
  return {text: b.innerText.trim(), top: Math.round(r.top), left: r.left, right: r.right};
})"""

# The open tab's lesson sentence and its Copy link: their tops, and whether the link follows the
# lesson in the page's order (what a screen reader and the Tab key meet).
LESSON_AND_LINK_JS = """() => {
  const panel = [...document.querySelectorAll('[role=tabpanel]')].find((p) => p.offsetParent !== null);
  const lesson = panel.querySelector('.pg-lesson'), link = panel.querySelector('[id$="-copy-link"]');
  const first = [...panel.querySelectorAll('.prose, button, input, textarea, .js-plotly-plot')]
    .find((e) => e.offsetParent !== null && e.getBoundingClientRect().height > 0);
  return {
    lesson: lesson && lesson.getBoundingClientRect().top, text: lesson && lesson.innerText.trim(),
    link: link && link.getBoundingClientRect().top, linkText: link && link.innerText.trim(),
    after: !!(lesson && link && lesson.compareDocumentPosition(link) & Node.DOCUMENT_POSITION_FOLLOWING),
    firstIsLesson: !!(lesson && first && lesson.contains(first)),
  };
}"""


def wait_selected_on_screen(page, name: str) -> None:
    """Until the open tab's button is within the screen's width (the row scrolls to it smoothly)."""
    box = ("(n) => { const b = [...document.querySelectorAll('button[role=tab][aria-selected=true]')].find((t) => t.innerText.includes(n));"
           " return b && b.getBoundingClientRect().toJSON(); }")
    try:
        page.wait_for_function(f"(n) => {{ const r = ({box})(n); return r && r.left >= -1 && r.right <= window.innerWidth + 1; }}",
                               arg=name, timeout=5000)
    except Exception as err:  # say where the tab was
        raise AssertionError(f"the open tab {name!r} is off screen: {page.evaluate(box, name)}") from err


def test_the_nine_tabs_sit_in_one_row_at_1280(page):
    boxes = page.evaluate(TAB_BOXES_JS)
    assert len(boxes) == 9, boxes
    assert len({b["top"] for b in boxes}) == 1, f"the tab bar wraps: {[(b['text'], b['top']) for b in boxes]}"
    assert boxes[-1]["right"] <= 1280 and boxes[0]["left"] >= 0, boxes  # all on screen, none scrolled away


def test_copy_link_comes_after_the_lesson_sentence_in_every_tab(page):
    for name, _, _ in TABS:
        open_tab(page, name)
        page.wait_for_function("() => [...document.querySelectorAll('[role=tabpanel]')].some((p) => p.offsetParent !== null && p.querySelector('.pg-lesson'))")
        where = page.evaluate(LESSON_AND_LINK_JS)
        assert where["text"] and where["linkText"] == "Copy link", (name, where)
        assert where["firstIsLesson"], f"{name}: something comes before the lesson sentence: {where}"
        assert where["after"] and where["link"] >= where["lesson"] - 1, f"{name}: Copy link before the lesson: {where}"
    assert not page.errors, page.errors


def test_a_phone_starts_each_lesson_near_the_top(phone):
    for name, _, _ in TABS:
        open_tab(phone, name)
        phone.wait_for_function("() => [...document.querySelectorAll('[role=tabpanel]')].some((p) => p.offsetParent !== null && p.querySelector('.pg-lesson'))")
        phone.evaluate("() => window.scrollTo(0, 0)")
        where = phone.evaluate(LESSON_AND_LINK_JS)
        assert where["lesson"] < PHONE_LESSON_TOP, f"{name}: the lesson starts at {where['lesson']:.0f} px"
        assert where["after"], f"{name}: Copy link before the lesson: {where}"
        # The tab bar is one row; the open tab is on screen (the row scrolls to it).
        boxes = phone.evaluate(TAB_BOXES_JS)
        assert len({b["top"] for b in boxes}) == 1, f"{name}: the tab bar wraps on a phone"
        selected = phone.get_by_role("tab", name=re.compile(re.escape(name)), selected=True)
        wait_selected_on_screen(phone, name)
        assert selected.count() == 1
    # A phone turned sideways and back: the open tab (the last) is still in view.
    phone.set_viewport_size({"width": PHONE["height"], "height": PHONE["width"]})
    wait_selected_on_screen(phone, TABS[-1][0])
    phone.set_viewport_size(PHONE)
    wait_selected_on_screen(phone, TABS[-1][0])
    # A link to the last tab: no click scrolled the row, the page does.
    phone.goto(phone.url.split("?")[0] + "?tab=learn", wait_until="domcontentloaded")
    phone.get_by_role("tab", name=re.compile("Watch it learn"), selected=True).wait_for()
    wait_selected_on_screen(phone, "Watch it learn")
    # The folded intro unfolds on a tap, with the model line; a second tap folds it again.
    model_line = phone.locator("#pg-model")
    assert not model_line.is_visible()
    phone.locator("#pg-header p").first.click()
    model_line.wait_for(state="visible")
    phone.locator("#pg-header p").first.click()
    model_line.wait_for(state="hidden")
    assert phone.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    assert not phone.errors, phone.errors
