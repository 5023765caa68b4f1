"""The hosted Space: the deploy command's file set (deploy/space.py), the folder it
writes started the way a Space starts it, where the built files live (export/naming.py), the
published model repository (export/publish.py, playground/hub_link.py), and what the page says
when CUDA was asked for and cannot be used (runtime/providers.py). No network: nothing is uploaded."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from deploy import space
from export import naming, publish
from export.naming import FP32_NAME, INT8_NAME, QUANTIZED_NAME
from export.publish import MODEL_REPO_ENV, check_repo_id, hub_upload_files
from import_graph import import_graph, module_files, reachable
from runtime import providers

ROOT = Path(__file__).resolve().parents[2]
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def git_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name]


# --- this repository stays plain git ------------------------------------------------------------


def test_every_tracked_file_is_a_real_file_and_the_weights_load():
    """No Git LFS anywhere: a clone with plain git has every byte (the Space's binaries go up through
    the Hub's HTTP API instead)."""
    from safetensors import safe_open

    from model import WEIGHTS_DIR, load_pretrained

    files = git_files()
    assert len(files) > 100
    pointers = [name for name in files if (ROOT / name).is_file() and (ROOT / name).read_bytes()[:len(LFS_POINTER)] == LFS_POINTER]
    assert not pointers, pointers
    attrs = subprocess.run(["git", "check-attr", "filter", "--", *files], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "lfs" not in attrs
    with safe_open(WEIGHTS_DIR / "model.safetensors", "np") as f:
        n_stored = sum(f.get_tensor(key).size for key in f.keys())
    assert n_stored == load_pretrained().num_parameters() > 10_000_000  # every stored number, loaded


# --- the file set -------------------------------------------------------------------------------


def test_the_space_takes_the_app_and_leaves_the_rest():
    files = space.app_files()
    tracked = set(git_files())
    assert set(files) <= tracked | {"README.md"}
    for needed in ("app.py", "requirements.txt", "README.md", "model/weights/model.safetensors", "model/weights/config.json",
                   "model/weights/training_log.json", "model/gpt2.tiktoken", "playground/assets/train_token_counts.npz"):
        assert needed in files, needed
    # Every module of the four packages the app imports, whatever their layout becomes.
    packages = {name for name in tracked if name.endswith(".py") and name.split("/")[0] in ("playground", "model", "export", "runtime")}
    assert packages <= set(files), sorted(packages - set(files))
    # And every module the app can import (at module level or in a function) wherever it lives.
    needed = {module_files()[name].relative_to(ROOT).as_posix() for name in reachable(import_graph(), "app")}
    assert {"runtime/engine.py", "export/build.py", "model/gpt.py"} <= needed
    assert needed <= set(files), sorted(needed - set(files))
    for left_out in ("tests/", "data/", ".ci/", "package", "requirements-dev.txt", "pytest.ini", "artifacts/"):
        assert not [name for name in files if name.startswith(left_out)], left_out
    # The README is the Space's page: the pictures and pages it links to go with it.
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", (ROOT / "README.md").read_text()))
    assert linked and linked <= set(files)


def test_the_dry_run_writes_exactly_that_set(tmp_path, capsys):
    out = tmp_path / "space"
    assert space.main(["someone/gpt-playground", "--dry-run", str(out), "--no-artifacts"]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == sorted([*space.app_files(), ".gitattributes"])
    # onnxruntime-web for "Run on: this browser" is part of the app's files (the repository's copy)
    assert "web/engine/engine.js" in written and "web/vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.gz" in written
    assert "web/vendor/vendor.json" in written
    for name in space.app_files():
        if name != "requirements.txt":  # made from the repository's: the test below
            assert (out / name).read_bytes() == (ROOT / name).read_bytes(), name
    size = sum((out / name).stat().st_size for name in written)
    assert f"{len(written)} files, {size / 1e6:.1f} MB" in capsys.readouterr().out
    assert size < 75e6  # the app, its weights and tokenizers, onnxruntime-web; no corpus, no tests


def _pins(text: str) -> dict[str, str]:
    from packaging.requirements import Requirement

    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    reqs = [Requirement(line) for line in lines if line and not line.startswith("-")]
    return {req.name: str(req.specifier) for req in reqs}


def test_a_cpu_space_installs_the_cpu_wheels_and_every_other_pin_of_requirements_txt(tmp_path):
    """PyPI's Linux torch pulls NVIDIA's CUDA libraries, GBs the app never uses on a CPU Space: the staged
    requirements.txt takes torch from PyTorch's CPU index and onnxruntime's CPU package, and is
    otherwise the repository's pin for pin; --gpu stages the repository's file as it is."""
    ours = (ROOT / "requirements.txt").read_text()
    cpu, gpu = tmp_path / "cpu", tmp_path / "gpu"
    assert space.main(["someone/gpt-playground", "--dry-run", str(cpu), "--no-artifacts"]) == 0
    assert space.main(["someone/gpt-playground", "--dry-run", str(gpu), "--no-artifacts", "--gpu"]) == 0
    staged = (cpu / "requirements.txt").read_text()
    options = [line.strip() for line in staged.splitlines() if line.strip().startswith("-")]
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]  # an extra index: gradio is on PyPI only
    pins, repo = _pins(staged), _pins(ours)
    assert pins["torch"] == repo["torch"] + "+cpu"  # only PyTorch's CPU index has it: no silent fall-back to CUDA
    assert pins["onnxruntime"] == repo["onnxruntime-gpu"] and "onnxruntime-gpu" not in pins
    rest = lambda d: {name: spec for name, spec in d.items() if name not in ("torch", "onnxruntime", "onnxruntime-gpu")}  # noqa: E731
    assert rest(pins) == rest(repo) and len(rest(repo)) >= 8
    assert (gpu / "requirements.txt").read_bytes() == (ROOT / "requirements.txt").read_bytes()
    with pytest.raises(ValueError, match="onnxruntime-gpu"):  # a renamed pin is refused, not shipped as CUDA
        space.space_requirements(ours.replace("onnxruntime-gpu==", "onnxruntime-directml=="))


def test_readmes_cpu_install_line_is_the_cpu_spaces_requirements():
    """README's first install line takes requirements-cpu.txt: what a CPU Space installs, onnxruntime's
    CPU package with it, never onnxruntime-gpu (its 340 MB serve no CPU)."""
    cpu = (ROOT / space.CPU_REQUIREMENTS).read_text()
    assert cpu == space.space_requirements((ROOT / "requirements.txt").read_text())
    assert "onnxruntime" in _pins(cpu) and "onnxruntime-gpu" not in _pins(cpu)
    readme = (ROOT / "README.md").read_text()
    assert f"pip install -r {space.CPU_REQUIREMENTS} && python app.py" in readme
    assert "pip install -r requirements.txt && python app.py" in readme


def _front_matter(card: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in card.split("---")[1].strip().splitlines())


def test_a_zerogpu_space_takes_a_python_and_torch_zerogpu_runs_and_the_spaces_package(tmp_path, capsys):
    """ZeroGPU runs PyTorch 2.8 to 2.11 on Python 3.10.13 or 3.12.12 (the Hub's page, 2026-11-28): the
    card and requirements say so; every other pin is the repository's; the rest of the folder is the
    same as a CPU Space's."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    zero = tmp_path / "zero"
    assert space.main(["someone/gpt-playground", "--dry-run", str(zero), "--no-artifacts", "--zerogpu"]) == 0
    said = capsys.readouterr().out
    assert "for ZeroGPU hardware" in said
    card = _front_matter((zero / "README.md").read_text())
    assert card["sdk"] == "gradio" and card["app_file"] == "app.py"
    assert card["python_version"].strip('"') in ("3.10.13", "3.12.12")
    assert card["suggested_hardware"] == "zero-a10g"
    pins, repo = _pins((zero / "requirements.txt").read_text()), _pins((ROOT / "requirements.txt").read_text())
    torch = Version(pins["torch"].removeprefix("=="))
    assert Version("2.8") <= torch < Version("2.12") and "+" not in str(torch)  # PyPI's CUDA build: ZeroGPU lends a GPU
    assert SpecifierSet(pins["spaces"]).contains(Version("0.51.3")) and pins["spaces"].startswith("==")
    assert pins["onnxruntime"] == repo["onnxruntime-gpu"] and "onnxruntime-gpu" not in pins
    rest = lambda d: {n: v for n, v in d.items() if n not in ("torch", "onnxruntime", "onnxruntime-gpu", "spaces")}  # noqa: E731
    assert rest(pins) == rest(repo)
    body = lambda text: text.split("\n---\n", 1)[1]  # noqa: E731
    assert body((zero / "README.md").read_text()) == body((ROOT / "README.md").read_text())
    assert space.main(["someone/x", "--zerogpu", "--gpu", "--dry-run", str(tmp_path / "both")]) == 2
    assert "choose one of --gpu, --zerogpu and --static" in capsys.readouterr().err


def test_the_dry_run_gitattributes_store_every_binary_with_lfs(tmp_path):
    """What `git push` to a Space needs: git itself, asked about each file of the folder, says LFS
    for every file with a NUL byte (the Hub's test for binary) or over 10 MB."""
    out = tmp_path / "space"
    space.main(["someone/gpt-playground", "--dry-run", str(out), "--no-artifacts"])
    subprocess.run(["git", "init", "-q"], cwd=out, check=True)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts)
    attrs = subprocess.run(["git", "check-attr", "filter", "--", *files], cwd=out, capture_output=True, text=True, check=True).stdout
    lfs = {line.split(": filter:")[0] for line in attrs.splitlines() if line.endswith(": lfs")}
    binary = {name for name in files if b"\0" in (out / name).read_bytes()[:8000] or (out / name).stat().st_size > 10e6}
    assert "model/weights/model.safetensors" in binary and any(name.endswith(".png") for name in binary)
    assert binary <= lfs, sorted(binary - lfs)
    assert not {name for name in lfs if name.endswith(".py")}


def test_the_card_configures_a_gradio_space_on_the_pinned_gradio():
    import gradio

    front = (ROOT / "README.md").read_text().split("---")[1]
    card = dict(line.split(": ", 1) for line in front.strip().splitlines())
    assert card["sdk"] == "gradio" and card["app_file"] == "app.py" and "app.py" in space.app_files()
    assert card["sdk_version"] == gradio.__version__
    assert f"gradio=={gradio.__version__}" in (ROOT / "requirements.txt").read_text()


@pytest.mark.parametrize("argv, says", [
    (["not a repo id", "--dry-run", "x"], "USER/NAME"),
    (["someone/x", "--model-repo", "../etc", "--dry-run", "x"], "USER/NAME"),
])
def test_bad_arguments_are_refused_with_the_form_expected(argv, says, capsys):
    assert space.main(argv) == 2
    assert says in capsys.readouterr().err


def test_an_upload_that_cannot_reach_the_hub_says_so_without_a_traceback():
    """The real upload path, with huggingface_hub told it is offline (as this machine is)."""
    import os
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_TOKEN": ""}
    run = subprocess.run([sys.executable, "-m", "deploy.space", "someone/gpt-playground", "--no-artifacts"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert "uploading to someone/gpt-playground failed" in run.stderr and "hf auth login" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_dry_run_refuses_a_folder_with_files(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert space.main(["someone/x", "--dry-run", str(tmp_path), "--no-artifacts"]) == 2
    assert "not an empty folder" in capsys.readouterr().err and (tmp_path / "keep.txt").read_text() == "mine"


# --- where the built files live --------------------------------------------------------------------


def test_artifacts_go_to_persistent_storage_only_on_a_space_that_has_it(tmp_path):
    root, storage = tmp_path / "repo", tmp_path / "data"
    root.mkdir()
    storage.mkdir()
    where = lambda env: naming.artifacts_dir(env, root, storage)  # noqa: E731
    assert where({}) == root / "artifacts"  # a clone: beside the code
    assert where({"SPACE_ID": "someone/x"}) == storage / "gpt-playground" / "artifacts"  # reused by every later start
    assert where({"SPACE_ID": "someone/x", naming.ARTIFACTS_ENV: str(tmp_path / "mine")}) == tmp_path / "mine"
    shipped = root / "artifacts" / "hub" / FP32_NAME  # uploaded with the Space: used as they are
    shipped.parent.mkdir(parents=True)
    shipped.write_bytes(b"onnx")
    assert where({"SPACE_ID": "someone/x"}) == root / "artifacts"
    assert naming.artifacts_dir({"SPACE_ID": "someone/x"}, tmp_path / "other", tmp_path / "absent") == tmp_path / "other" / "artifacts"


# --- the published model repository --------------------------------------------------------------


def test_the_model_repository_is_the_built_hub_folder_with_its_card(shipped_onnx, tmp_path):
    from huggingface_hub import ModelCard

    folder = shipped_onnx["fp32"].parent.parent
    files = hub_upload_files(folder)
    assert files == sorted(["README.md", "config.json", "generation_config.json", "model.safetensors",
                            "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
                            FP32_NAME, QUANTIZED_NAME, INT8_NAME])
    from export.hub import write_model_card
    from model import WEIGHTS_DIR, load_pretrained

    model = load_pretrained()  # the card as a build writes it now (the built one may predate this code)
    card = ModelCard.load(write_model_card(tmp_path, model.config, model.num_parameters(), WEIGHTS_DIR))
    assert card.data.license == "mit" and card.data.pipeline_tag == "text-generation"
    assert card.data.library_name == "transformers.js" and "onnx" in card.data.tags
    assert "python -m export --publish" in card.text and "hf upload" in card.text


def test_publishing_an_incomplete_folder_names_what_is_missing(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"onnx/model.onnx.*python -m export"):
        hub_upload_files(tmp_path)


def test_publish_refuses_a_bad_repository_id_before_building(capsys):
    from export.__main__ import main

    assert main(["--publish", "no slash here"]) == 2
    assert "USER/NAME" in capsys.readouterr().err


@pytest.mark.parametrize("repo", ["someone/gpt-playground", "Org-1/model.v2_x"])
def test_repository_ids(repo):
    assert check_repo_id(repo) == repo


@pytest.mark.parametrize("repo", ["", "a", "a/b/c", "a/../b", "/x", "a/b.git", "a b/c", "a/" + "x" * 97])
def test_bad_repository_ids(repo):
    with pytest.raises(ValueError, match="USER/NAME"):
        check_repo_id(repo)


def test_the_model_tab_links_the_repository_the_setting_names(caplog):
    from playground.hub_link import published_markdown

    assert published_markdown({}) == ""
    line = published_markdown({MODEL_REPO_ENV: " someone/gpt-playground "})
    assert "[someone/gpt-playground](https://huggingface.co/someone/gpt-playground)" in line
    assert published_markdown({MODEL_REPO_ENV: "javascript:alert(1)"}) == ""  # no broken or hostile link
    assert MODEL_REPO_ENV in caplog.text


# --- CUDA asked for where it cannot run ------------------------------------------------------------


def test_the_reason_cuda_cannot_run_here_is_this_machines(monkeypatch):
    reason = providers.cuda_unusable_reason()
    if reason is None:
        pytest.skip("CUDA is usable on this machine")
    assert not providers.cuda_usable()
    expected = ("onnxruntime-gpu" if providers.CUDA not in providers.ort.get_available_providers()
                else "NVIDIA driver" if providers._libcuda() is None or providers.cuda_device_count() == 0
                else "CUDA")
    assert expected in reason
    monkeypatch.setattr(providers.ort, "get_available_providers", lambda: [providers.CPU])
    assert "install onnxruntime-gpu" in providers.cuda_unusable_reason()


def test_the_page_says_why_cuda_was_not_used(monkeypatch):
    from playground import resources
    from playground.generation.views import provider_markdown

    monkeypatch.setattr(providers, "cuda_unusable_reason", lambda: "the NVIDIA driver reports no CUDA device")
    monkeypatch.setenv(resources.PROVIDER_ENV, "cuda")
    line = provider_markdown(*resources.planned_provider())
    assert "runs on **CPU**" in line and "CUDA was requested" in line and "reports no CUDA device" in line
    monkeypatch.setenv(resources.PROVIDER_ENV, "auto")  # not asked for: the CPU, and no warning
    assert provider_markdown(*resources.planned_provider()) == "Generation runs on **CPU** (onnxruntime)."
    monkeypatch.setattr(providers, "cuda_unusable_reason", lambda: None)
    assert "**CUDA (GPU)**" in provider_markdown(*resources.planned_provider())


# --- the folder started as a Space starts it --------------------------------------------------------


def _first_greedy_token(onnx_file: Path, ids: list[int]) -> int:
    """The most probable next token, from plain onnxruntime (no project code)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    feeds = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts}
    logits = sess.run(["logits"], {"input_ids": np.array([ids]), "attention_mask": np.ones((1, len(ids)), np.int64),
                                   "position_ids": np.arange(len(ids))[None], **feeds})[0]
    return int(logits[0, -1].argmax())


def _check_answers(server, hub: Path) -> None:
    """/tokenize gives the ids of the Space's own tokenizer.json read by Hugging Face tokenizers;
    /generate's greedy text starts with the token plain onnxruntime picks from the Space's
    8-bit file, whatever the seed."""
    from gradio_client import Client
    from tokenizers import Tokenizer

    client = Client(server.url, verbose=False)
    tok = Tokenizer.from_file(str(hub / "tokenizer.json"))
    text = "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?"
    assert client.predict(text, api_name="/tokenize")["ids"] == tok.encode(text).ids
    prompt = "KING HENRY:\nOnce more unto the breach, dear friends,"
    out = client.predict(prompt, 8, 1.0, 1, 1.0, 0, api_name="/generate")  # top-k 1: greedy
    again = client.predict(prompt, 8, 1.0, 1, 1.0, 99, api_name="/generate")
    assert out["finished"] and out["new_tokens"] == len(out["token_ids"]) >= 1
    assert out["token_ids"] == again["token_ids"] and tok.decode(out["token_ids"]) == out["completion"]
    assert out["provider"] == "CPUExecutionProvider" and out["model_file"] == Path(INT8_NAME).name
    assert out["token_ids"][0] == _first_greedy_token(hub / INT8_NAME, tok.encode(prompt).ids)


def _assert_served(server, path: Path) -> None:
    import urllib.request

    request = urllib.request.Request(f"{server.url}gradio_api/file={path}", headers={"Range": "bytes=0-15"})
    with urllib.request.urlopen(request, timeout=30) as r:
        assert r.status == 206 and r.read() == path.read_bytes()[:16]


def _page(server) -> str:
    import urllib.request

    with urllib.request.urlopen(server.url + "config", timeout=30) as r:
        return r.read().decode()


@pytest.mark.slow  # three starts of the app and one ONNX build: a few minutes on 2 cores
def test_the_dry_run_folder_starts_as_a_space(tmp_path):
    from benchmarks.app_server import launch, stop

    from playground.resources import PROVIDER_ENV

    space_env = {"GRADIO_SERVER_NAME": "0.0.0.0", "SPACE_ID": "someone/gpt-playground", "PYTHONPATH": "",
                 naming.ARTIFACTS_ENV: ""}
    # Shipped with the built files (the default): no start builds anything. CUDA asked for on this
    # CPU machine, and a published model repository named: the page says both.
    shipped = tmp_path / "shipped"
    assert space.main(["someone/gpt-playground", "--dry-run", str(shipped)]) == 0
    env = {**space_env, PROVIDER_ENV: "cuda", MODEL_REPO_ENV: "someone/gpt-playground"}
    server = launch(tmp_path / "shipped.log", extra_env=env, cwd=shipped)
    try:
        print(f"\nshipped: ready in {server.startup_s:.1f} s")
        assert "building the ONNX files" not in server.log()
        _check_answers(server, shipped / "artifacts" / "hub")
        page = _page(server)
        if providers.cuda_unusable_reason() is not None:
            assert "CUDA was requested" in page and providers.cuda_unusable_reason().split(" (")[0] in page
        assert "https://huggingface.co/someone/gpt-playground" in page
    finally:
        stop(server)
    # Without them, on a Space with persistent storage: the first start builds into it, later ones reuse it.
    bare, data = tmp_path / "bare", tmp_path / "data"
    assert space.main(["someone/gpt-playground", "--dry-run", str(bare), "--no-artifacts"]) == 0
    for start, builds in (("first", True), ("later", False)):
        server = launch(tmp_path / f"{start}.log", extra_env={**space_env, naming.ARTIFACTS_ENV: str(data)}, cwd=bare)
        try:
            print(f"no artifacts, {start} start: ready in {server.startup_s:.1f} s")
            assert ("building the ONNX files" in server.log()) is builds, server.log()
            assert (data / "hub" / INT8_NAME).is_file() and not (bare / "artifacts").exists()
            if not builds:
                _check_answers(server, data / "hub")
                _assert_served(server, data / "hub" / INT8_NAME)  # the Model tab's download, from the storage
        finally:
            stop(server)


@pytest.mark.slow  # a start of the app from the folder: a minute on 2 cores
def test_the_zerogpu_folder_starts_here_with_spaces_gpu_present(tmp_path):
    """The ZeroGPU folder's app starts on this CPU machine with the spaces package imported and
    Inside's and Compare's handlers passed through spaces.GPU (a no-op off ZeroGPU), and answers."""
    import spaces  # noqa: F401 -- requirements-dev.txt has it: the decorator is present, not skipped
    from benchmarks.app_server import launch, stop
    from gradio_client import Client

    zero = tmp_path / "zero"
    assert space.main(["someone/gpt-playground", "--dry-run", str(zero), "--zerogpu"]) == 0
    env = {"GRADIO_SERVER_NAME": "0.0.0.0", "SPACE_ID": "someone/gpt-playground", "PYTHONPATH": "", naming.ARTIFACTS_ENV: ""}
    server = launch(tmp_path / "zero.log", extra_env=env, cwd=zero)
    try:
        _check_answers(server, zero / "artifacts" / "hub")
        inside = Client(server.url, verbose=False).predict("ROMEO.\nWhat say you", 0, 0, api_name="/inside")
        assert abs(inside["loss"] - np.mean(inside["token_losses"])) < 1e-4
        assert "Traceback" not in server.log()
    finally:
        stop(server)


# --- the static edition as a static Space ---------------------------------------------------------


def payment_required() -> Exception:
    """The error huggingface_hub raises when the Hub answers a create call with 402."""
    import httpx
    from huggingface_hub.errors import HfHubHTTPError

    response = httpx.Response(402, request=httpx.Request("POST", "https://huggingface.co/api/repos/create"),
                              json={"error": "Creating a Gradio Space requires a paid plan"})
    return HfHubHTTPError("402 Client Error: Payment Required for url: https://huggingface.co/api/repos/create", response=response)


def test_a_free_account_refused_a_gradio_space_is_offered_the_static_edition(monkeypatch, capsys):
    from huggingface_hub import HfApi

    created = []

    def refuse(self, repo_id, **kwargs):
        created.append(kwargs.get("space_sdk"))
        raise payment_required()

    monkeypatch.setattr(HfApi, "create_repo", refuse)
    assert space.main(["someone/gpt-playground", "--no-artifacts"]) == 1
    err = capsys.readouterr().err
    assert created == ["gradio"]
    assert "402 Payment Required" in err and "paid plan" in err
    assert "python -m deploy.space someone/gpt-playground --static" in err
    assert "Traceback" not in err
    # any other refusal keeps the token hint, and a static Space refused with 402 is not told to try --static
    assert "--static" not in publish.upload_failed("someone/x", payment_required(), gradio_space=False)
    assert "hf auth login" in publish.upload_failed("someone/x", RuntimeError("no network"), gradio_space=True)


def test_the_static_space_is_the_static_edition_and_uploads_as_static(tmp_path, monkeypatch, capsys):
    sent = {}

    def fake_upload(folder, repo_id, files, repo_type, message, **create):
        sent.update(folder=folder, repo_id=repo_id, files=files, repo_type=repo_type, **create)
        return f"https://huggingface.co/spaces/{repo_id}"

    monkeypatch.setattr(space, "upload", fake_upload)
    assert space.main(["someone/gpt-playground-static", "--static", "--app-space", "someone/gpt-playground"]) == 0
    assert sent["repo_type"] == "space" and sent["space_sdk"] == "static"
    assert {"index.html", "README.md", "model/model.onnx", "vendor/ort/ort-wasm-simd-threaded.wasm.gz"} <= set(sent["files"])
    assert not any(name.endswith(".py") for name in sent["files"])

    out = tmp_path / "static"
    assert space.main(["someone/gpt-playground-static", "--static", "--dry-run", str(out)]) == 0
    said = capsys.readouterr().out
    assert "a static Space" in said and "written to" in said
    front = (out / "README.md").read_text().split("---")[1]
    assert "sdk: static" in front and "app_file: index.html" in front
    lfs = (out / ".gitattributes").read_text()
    assert "*.onnx filter=lfs" in lfs and "*.gz filter=lfs" in lfs and "*.bin filter=lfs" in lfs
