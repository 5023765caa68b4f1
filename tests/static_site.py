"""The static edition for the tests: ``python -m deploy.static`` into a temporary folder once per
session, served by ``python -m http.server`` (as a teacher would try it) on a free loopback port,
and headless Chromium pages on it. Import the fixtures by name."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import wait_for
from test_browser import ARGS, CHROMIUM, TIMEOUT_MS  # the app's browser tests' Chromium, as they start it

ROOT = Path(__file__).resolve().parent.parent
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


TESTS = ROOT / "tests"


def npm_ci() -> Path:
    """``npm ci`` of the tests' JavaScript package (tests/package.json, tests/package-lock.json) when
    tests/node_modules/ is missing or older than the lock file: the Node.js clients the tests run
    (users need none of it: the pages' libraries come with the repository). tests/.npmrc turns
    install scripts off, so it needs nothing but the npm registry."""
    for tool in ("node", "npm"):
        assert shutil.which(tool), f"{tool} not found: the JavaScript client tests need Node.js 20 and npm"
    folder = TESTS / "node_modules"
    marker = folder / ".package-lock.json"  # written by npm; newer than package-lock.json when current
    if not marker.is_file() or marker.stat().st_mtime < (TESTS / "package-lock.json").stat().st_mtime:
        proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TESTS, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"npm ci failed:\n{proc.stderr[-3000:]}"
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    folder: Path
    url: str
    proc: subprocess.Popen

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def serve(folder: Path) -> Served:
    """``python -m http.server`` on ``folder``, once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"

    def answers() -> bool:
        assert proc.poll() is None, f"python -m http.server exited with {proc.returncode}"
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return True
        except OSError:
            return False

    try:
        wait_for(answers, 30, 0.1, message=f"python -m http.server to answer on {url}")
    except AssertionError:
        proc.kill()
        raise
    return Served(folder, url, proc)


@pytest.fixture(scope="session")
def static_site(tmp_path_factory) -> Path:
    """The static edition, written once per session by deploy.static (as `python -m deploy.static DIR`)."""
    from deploy.static import write_static

    out = tmp_path_factory.mktemp("static")
    write_static(out, app_space="teacher/gpt-playground", progress=lambda text: None)
    return out


@pytest.fixture(scope="session")
def static_server(static_site) -> Iterator[Served]:
    served = serve(static_site)
    yield served
    served.stop()


# One Chromium for the static tests of a module, a fresh context (its own cache and storage: a first
# visit) for each page: launching Chromium cost a few seconds a test. Stopped after the module's last
# test (tests/conftest.py), so that no Playwright loop outlives the module into another's asyncio.run
# or sync_playwright.
_SHARED: dict[str, Any] = {}


def _browser() -> Any:
    browser = _SHARED.get("browser")
    if browser is None or not browser.is_connected():
        from playwright.sync_api import sync_playwright

        close_browser()
        _SHARED["playwright"] = sync_playwright().start()
        _SHARED["browser"] = _SHARED["playwright"].chromium.launch(executable_path=CHROMIUM, args=ARGS)
    return _SHARED["browser"]


def close_browser() -> None:
    """Stop the module's Chromium and Playwright, if started."""
    browser, playwright = _SHARED.pop("browser", None), _SHARED.pop("playwright", None)
    try:
        if browser is not None and browser.is_connected():
            browser.close()
    finally:
        if playwright is not None:
            playwright.stop()


@contextmanager
def static_page(url: str, **context: Any) -> Iterator[Any]:
    """A page of headless Chromium on ``url``, in a context of its own; the page collects its
    JavaScript errors (``page.errors``) and the 404s of its own files (``page.missing``)."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (apt-get install chromium)")
    ctx = _browser().new_context(device_scale_factor=1, **context)
    try:
        pg = ctx.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.errors = errors
        missing: list[str] = []  # the page's own files it asked for and was told 404 (ready() fails at once on one)
        pg.on("response", lambda r: r.status == 404 and r.url.startswith(url.split("?")[0])
              and not r.url.endswith("/favicon.ico") and missing.append(r.url))
        pg.missing = missing
        pg.goto(url, wait_until="domcontentloaded")
        yield pg
    finally:
        ctx.close()


def ready(page, timeout_s: float = TIMEOUT_MS / 1000) -> None:
    """Wait until the page has opened its first tab; fail at once, naming it, when a file the page
    loads is missing (a module that never loads would leave the page unready for the whole timeout)."""
    def opened() -> bool:
        missing = getattr(page, "missing", [])
        assert not missing, f"the page could not load {', '.join(missing)} (404): the static edition lacks it"
        return page.evaluate("document.body?.dataset.ready === 'true'")

    wait_for(opened, timeout_s, 0.1, message="the static edition's page to open its first tab (body[data-ready=true])")


HEAVY = ("model.onnx", ".wasm", "plotly")  # what a page should fetch only once a tab needs it


def first_tab_requests(page) -> list[str]:
    """Every address the page requests as it loads again and opens its first tab (Tokenization,
    its ids shown)."""
    loaded: list[str] = []
    page.on("request", lambda r: loaded.append(r.url))
    page.reload(wait_until="domcontentloaded")
    ready(page)
    page.wait_for_function("document.querySelector('#tok-ids')?.textContent.startsWith('[')")
    return loaded
