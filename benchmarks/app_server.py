"""Launch ``python app.py`` as a user would, on a free loopback port, and wait until it serves.

Used by the session-scoped ``app_server`` fixture (conftest.py): the app starts once per test
session and is shared by the API, robustness and browser tests.
"""

from __future__ import annotations

import os
import tempfile
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class AppServer:
    url: str
    process: subprocess.Popen
    startup_s: float  # from process start to the first HTTP 200 on "/"
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Gradio's launch asks its own page once it serves (a HEAD of "/", 3 s at most, networking.url_ok)
# and exits when that fails ("When localhost is not accessible, a shareable link must be created"):
# on a machine at load 10-15 the first page (built on first demand, beside the start's background
# warm-up) can take longer. A start that ends so is tried again; one that passes says so in its log.
GRADIO_CHECK_FAILED = "When localhost is not accessible"
GRADIO_CHECK_PASSED = ("To create a public link", "Running on public URL")
GRADIO_CHECK_S = 20.0  # the most url_ok takes (5 tries of 3 s, 0.5 s apart), and some
LAUNCH_TRIES = 3


def launch(
    log_path: Path, timeout_s: float = 600.0, extra_env: dict[str, str] | None = None, args: list[str] | None = None,
    cwd: Path = ROOT,
) -> AppServer:
    """Start ``cwd``/app.py (default this checkout's); raise with its log if it exits or does not
    answer within ``timeout_s`` (a first start builds the ONNX files, a minute or two on a CPU).
    A start that Gradio's own check of its page ended on a loaded machine is tried again
    (:data:`GRADIO_CHECK_FAILED`, up to :data:`LAUNCH_TRIES` times)."""
    for attempt in range(1, LAUNCH_TRIES + 1):
        server = _launch_once(log_path, timeout_s, extra_env, args, cwd)
        deadline = time.perf_counter() + GRADIO_CHECK_S
        while server.process.poll() is None and time.perf_counter() < deadline and not any(
                text in server.log() for text in GRADIO_CHECK_PASSED):
            time.sleep(0.2)
        if server.process.poll() is None:
            return server
        if GRADIO_CHECK_FAILED not in server.log() or attempt == LAUNCH_TRIES:
            raise RuntimeError(f"app.py exited with {server.process.returncode}:\n{server.log()}")
        print(f"app.py: Gradio's check of its own page timed out (start {attempt} of {LAUNCH_TRIES}); starting again", flush=True)
    raise AssertionError("unreachable")


def _launch_once(log_path: Path, timeout_s: float, extra_env: dict[str, str] | None, args: list[str] | None,
                 cwd: Path) -> AppServer:
    port = free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",  # extra_env may say 0.0.0.0, as a Space does: it still answers on loopback
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_ANALYTICS_ENABLED": "False",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    url = f"http://127.0.0.1:{port}/"
    log = open(log_path, "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "app.py", *(args or [])], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {proc.returncode}:\n{log_path.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return AppServer(url, proc, time.perf_counter() - t0, log_path)
        except OSError:
            pass
        if time.perf_counter() - t0 > timeout_s:
            stop(AppServer(url, proc, 0.0, log_path))
            raise RuntimeError(f"app.py did not answer on {url} within {timeout_s:.0f} s:\n{log_path.read_text()}")
        time.sleep(0.2)


def stop(server: AppServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@contextmanager
def app_url(url: str | None = None) -> Iterator[str]:
    """A benchmark's app: ``url`` when one is running already, else ``python app.py`` launched
    on a free loopback port for the ``with`` block (its log in a temporary folder)."""
    if url is not None:
        yield url
        return
    server = launch(Path(tempfile.mkdtemp()) / "app.log")
    try:
        yield server.url
    finally:
        stop(server)
