"""Security: the launched app serves no file outside artifacts/, takes no uploads, and the code
never evaluates what a user sends, loads weights only from safetensors, pins its dependencies,
and escapes user text in the HTML it draws."""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
# The project's own code: not test files, data, run folders, nor any hidden folder (.git, .venv,
# CI's .ci/venv) or installed package, wherever a virtual environment was made.
SKIP_PARTS = {"data", "runs", "tests", "node_modules", "site-packages", "artifacts"}
SOURCES = sorted(
    p
    for p in ROOT.rglob("*.py")
    if not SKIP_PARTS & set(parts := p.relative_to(ROOT).parts)
    and not any(part.startswith(".") for part in parts)
)

# --- files served over HTTP -----------------------------------------------------------------------

PROJECT_FILES = ["app.py", "model/weights/model.safetensors", "model/weights/config.json", "requirements.txt"]


def _refused_paths() -> list[str]:
    root = str(ROOT)
    art = f"{root}/artifacts"
    return [
        "/etc/passwd",
        "/proc/self/environ",  # the server's environment: tokens, paths
        *(f"{root}/{f}" for f in PROJECT_FILES),
        *PROJECT_FILES,  # relative to the server's working directory, the project root
        f"{art}/../app.py",  # traversal out of the allowed folder
        f"{art}/../model/weights/model.safetensors",
        "artifacts/../app.py",
        "artifacts/../../../../etc/passwd",
        f"{art}/%2e%2e/app.py",  # URL-encoded dots
        f"{art}%2F..%2Fapp.py",  # URL-encoded slashes
        quote(f"{art}/../app.py", safe=""),  # all of it encoded
        f"{art}/..%5capp.py",  # a backslash
        f"{art}/hub/config.json",  # artifacts/ itself is not served: only the Model tab's downloads
        "artifacts/hub/tokenizer.json",
        "file:///etc/passwd",
        "http://127.0.0.1:1/",  # the server fetching a loopback URL for us (SSRF)
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    ]


URL_REFUSAL = "never a URL"  # the app's own refusal (serving/middleware.py's RouteGuard), not Gradio's


@pytest.mark.parametrize("path", _refused_paths())
@pytest.mark.parametrize("route", ["gradio_api/file=", "gradio_api/file/"])  # Gradio 6's two file routes
def test_no_file_outside_artifacts_is_served(app_server, route, path):
    r = httpx.get(app_server.url + route + path, timeout=30)
    assert r.status_code in (403, 404), f"{route}{path} -> {r.status_code}: {r.text[:200]}"
    assert "root:" not in r.text and "import gradio" not in r.text


def test_gradios_shared_cache_is_not_served(app_server):
    """Gradio serves any file in its upload folder (shared by every Gradio app on the machine, and
    holding other users' files on a public server) unless told not to: ``launch(blocked_paths=...)``."""
    import secrets

    from gradio.utils import get_upload_folder

    folder = Path(get_upload_folder()) / f"pg-test-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    secret = folder / "secret.txt"
    secret.write_text("someone else's file")
    try:
        for route in ("gradio_api/file=", "gradio_api/file/"):
            r = httpx.get(app_server.url + route + str(secret), timeout=30)
            assert r.status_code == 403 and "File not allowed" in r.text, f"{route} -> {r.status_code}: {r.text[:200]}"
            assert "someone else" not in r.text
    finally:
        secret.unlink()
        folder.rmdir()


@pytest.mark.parametrize("url", ["https://example.com/", "http://example.com/x.onnx", "https://huggingface.co/gpt2/raw/main/config.json"])
def test_public_urls_are_not_fetched_for_a_client(app_server, url):
    """Gradio fetches any public http(s) URL asked of its file route and streams it back: a free
    proxy on the app's address. The app refuses before Gradio sees it (without the guard this
    machine, offline, would answer Gradio's own 403 or 502, without these words)."""
    for route in ("gradio_api/file=", "gradio_api/file/"):
        r = httpx.get(app_server.url + route + url, timeout=30)
        assert r.status_code == 403 and URL_REFUSAL in r.text, f"{route}{url} -> {r.status_code}: {r.text[:200]}"


def _absolute_paths_of_the_server() -> set[str]:
    """The repository's folder (as started, and resolved) and the Python environment's."""
    import sys

    return {str(ROOT), str(ROOT.resolve()), sys.prefix, str(Path(sys.prefix).resolve())}


@pytest.mark.parametrize("page", ["config", "", "gradio_api/info"])
def test_the_page_shows_no_absolute_path_of_the_server(app_server, page):
    """The page's config (``/config``, also inlined in ``/``) named each download by its absolute
    path; it names it relative to the app's working directory, which Gradio resolves."""
    text = httpx.get(app_server.url + page, timeout=60).text
    for path in _absolute_paths_of_the_server():
        assert path not in text, f"/{page} shows {path}"


def test_the_downloads_the_page_names_are_served(app_server):
    """The control: every download button's URL in /config serves its file."""
    config = httpx.get(app_server.url + "config", timeout=60).json()
    urls = [c["props"]["value"]["url"] for c in config["components"]
            if c.get("type") == "downloadbutton" and (c.get("props") or {}).get("value")]
    assert len(urls) >= 5, urls  # the browser and whole-folder zips, three ONNX files
    for url in urls:
        name = url.split("file=", 1)[1]
        assert not name.startswith("/") and name.startswith("artifacts/"), url
        r = httpx.head(url, timeout=30)
        assert r.status_code == 200 and int(r.headers["content-length"]) == (ROOT / name).stat().st_size, url


@pytest.mark.parametrize("name", ["hub/onnx/model.onnx", "hub/onnx/model_quantized.onnx", "gpt-playground-hub.zip"])
def test_the_onnx_downloads_are_served(app_server, name):
    """The control: the allowed folder's files do come through (so the refusals above are not
    simply a broken route)."""
    r = httpx.head(f"{app_server.url}gradio_api/file={ROOT / 'artifacts' / name}", timeout=30)
    assert r.status_code == 200
    assert int(r.headers["content-length"]) == (ROOT / "artifacts" / name).stat().st_size


def test_uploads_are_refused(app_server):
    """No tab takes a file, so Gradio's upload route must not let anyone store files on the server."""
    files = {"files": ("note.html", b"<script>alert(1)</script>" * 40, "text/html")}
    r = httpx.post(app_server.url + "gradio_api/upload", files=files, timeout=30)
    assert r.status_code == 413, r.text[:200]


def test_run_history_is_off(app_server):
    assert httpx.get(app_server.url + "gradio_api/runs", timeout=30).status_code == 404


# --- the code itself ------------------------------------------------------------------------------

DYNAMIC_CODE = {"eval", "exec", "compile", "__import__"}
PICKLE_MODULES = {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib", "cloudpickle"}


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def test_the_sources_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"app.py", "playground/expressions.py", "runtime/engine.py", "model/gpt.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_eval_exec_or_pickle_in_the_code(path):
    """Builtin eval/exec/compile/__import__ (a method such as model.eval() is fine), pickle-based
    loaders, torch.load and np.load(allow_pickle=True) are all absent: nothing a user sends is run
    as code, and weights come only from safetensors."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for call in _calls(tree):
        name = _dotted(call.func)
        if isinstance(call.func, ast.Name) and name in DYNAMIC_CODE:
            found.append(f"{name}() at line {call.lineno}")
        if name == "torch.load":  # unpickles: weights come from safetensors instead
            found.append(f"{name}() at line {call.lineno}")
        for kw in call.keywords:
            if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"{name}(allow_pickle=...) at line {call.lineno}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name} at line {node.lineno}" for a in node.names if a.name.split(".")[0] in PICKLE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PICKLE_MODULES:
            found.append(f"from {node.module} import at line {node.lineno}")
    assert not found, f"{path.relative_to(ROOT)}: {found}"


def test_weights_are_read_with_safetensors(tmp_path, monkeypatch):
    """load_pretrained reads the shipped safetensors without pickle, and a folder that holds only
    a pickled checkpoint is refused with a message, its pickle never opened."""
    import pickle

    import torch

    from model import WEIGHTS_DIR, load_pretrained

    def no_pickle(*args, **kwargs):
        raise AssertionError("pickle used to load weights")

    monkeypatch.setattr(torch, "load", no_pickle)
    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    assert load_pretrained(WEIGHTS_DIR).num_parameters() > 0
    (tmp_path / "config.json").write_text((WEIGHTS_DIR / "config.json").read_text())
    for name in ("pytorch_model.bin", "model.pt"):
        (tmp_path / name).write_bytes(b"not opened")
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_pretrained(tmp_path)


# --- dependencies ---------------------------------------------------------------------------------

PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[A-Za-z0-9.+!-]+$")


@pytest.mark.parametrize("path", sorted(ROOT.glob("requirements*.txt")), ids=lambda p: p.name)
def test_requirements_are_pinned(path):
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    entries = [line for line in lines if line]
    assert entries
    # the CPU line's one option: PyTorch's own index over https, for its +cpu wheel (pinned, on no other index)
    index = r"--extra-index-url https://download\.pytorch\.org/whl/cpu"
    loose = [e for e in entries if not (PINNED.match(e) or re.fullmatch(r"-r\s+\S+\.txt", e) or re.fullmatch(index, e))]
    assert not loose, f"{path.name}: not pinned to one version: {loose}"


# --- user text in the HTML the app draws ----------------------------------------------------------

ATTACK = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


class _Page(HTMLParser):
    """The elements a browser would build from an HTML fragment, and the text it would show."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.text = ""
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text += data


def test_user_text_is_escaped_in_the_tokenization_view():
    from playground.tokenization import tokenize

    r = tokenize(ATTACK)
    page = _Page(re.sub(r"<sub class=\"gpt-id\">[0-9 ]+</sub>", "", r.html))  # each token's id, set aside
    assert page.tags == {"div", "span"}  # no <img>, no <script>: only the view's own elements
    assert page.text == ATTACK  # and the user sees exactly what they typed, as text
    assert r.html.count('<sub class="gpt-id">') == len(r.spans)  # one id label per token span


def test_user_text_is_escaped_in_the_generation_view():
    from playground.generation.params import GenerationParams
    from playground.generation.state import GeneratedStep, GenerationState, TokenChoice
    from playground.generation.views import tokens_html

    params = GenerationParams(ATTACK, [1], 1, 1.0, 1, 1.0, 0, 1)
    state = GenerationState(params=params, provider="CPUExecutionProvider", decode=lambda ids: "")
    state.steps = [[GeneratedStep(0, TokenChoice(1, ATTACK, 0.5, 0.5), [])]]
    page = _Page(tokens_html(state))
    assert page.tags == {"div", "span"}
    assert page.text == ATTACK + ATTACK  # the prompt, then the generated token's text
