"""A fresh browser page per test, at a laptop's size (``page``) or a phone's (``phone``), for the
browser test modules that drive a page through many states: import the fixtures by name.

One browser per test: Playwright's sync API runs one at a time, so a laptop and a phone fixture
alive together in one module would nest them."""

from __future__ import annotations

import pytest

from test_browser import browser_page
from test_browser_page import PHONE

LAPTOP = {"width": 1280, "height": 900}


@pytest.fixture
def page(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=LAPTOP) as pg:
        yield pg


@pytest.fixture
def phone(app_server, shots_dir):
    with browser_page(app_server, shots_dir, viewport=PHONE, is_mobile=True, has_touch=True) as pg:
        yield pg
