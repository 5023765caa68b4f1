"""python -m deploy.space USER/SPACE: deploy the app as a Hugging Face Space, in one command.

    python -m deploy.space USER/SPACE                  # create the Space if needed and upload the app
    python -m deploy.space USER/SPACE --dry-run DIR    # write exactly the same files into DIR instead
    python -m deploy.space USER/SPACE --no-artifacts   # leave the built ONNX files out (the Space builds them)
    python -m deploy.space USER/SPACE --gpu            # for GPU hardware: CUDA torch and onnxruntime-gpu
    python -m deploy.space USER/SPACE --zerogpu        # for ZeroGPU hardware (free on a personal account, 2 Spaces)
    python -m deploy.space USER/SPACE --static         # the static edition (deploy/static.py): free on every account

What goes up is an explicit list (:data:`SPACE_FILES`, matched against the files git tracks), the
README and what it links to, and the built Hub folder (``artifacts/hub/``, built first if missing
or stale) so that no start of the Space rebuilds it; plus a ``.gitattributes`` that stores the
binary files with LFS, for whoever later clones the Space and pushes with git. Nothing else: no
tests, no corpus, no git history. The Space's ``requirements.txt`` is the repository's with the CPU
wheels of torch and onnxruntime (:func:`space_requirements`, also the repository's
``requirements-cpu.txt``) unless ``--gpu``; with ``--zerogpu`` (:func:`zerogpu_requirements`) a
PyTorch and a Python that ZeroGPU supports and the ``spaces`` package, whose ``@spaces.GPU`` the app
applies to its PyTorch passes (playground/ui/serving/zerogpu.py).

With ``--static`` the Space is the static edition instead (``python -m deploy.static``): a static
Space, which the Hub hosts free on every account, where Gradio Spaces need a paid plan to create.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from export.naming import HUB_DIRNAME, ROOT
from export.publish import MODEL_REPO_ENV, check_repo_id, upload, upload_failed

# What the app imports and reads at run time, as globs relative to the repository root.
SPACE_FILES = (
    "app.py",
    "requirements.txt",
    "playground/**/*.py",
    "playground/assets/*.npz",
    "model/**/*.py",
    "model/gpt2.tiktoken",
    "model/ranks/*.tiktoken",
    "model/weights/config.json",
    "model/weights/model.safetensors",
    "model/weights/training_log.json",
    "model/weights/evaluation.json",  # the ONNX files' measured losses, for the model card of a --no-artifacts build
    "export/**/*.py",
    "runtime/**/*.py",
    "web/app/*",  # the page's own scripts and style
    "web/engine/*.js",  # Text generation's "Run on: this browser", with onnxruntime-web (export/vendor.py)
    "web/views/*",  # the views both editions mount (Watch it learn's "this browser" among them)
    "web/vendor/vendor.json",
    "web/vendor/onnxruntime-web/*",
)
CARD = "README.md"  # the Space's configuration (front matter) and its page
LFS_LIMIT = 10 * 1000 * 1000  # the Hub refuses plain-git files past 10 MB, and binary files of any size
REQUIREMENTS = "requirements.txt"
CPU_REQUIREMENTS = "requirements-cpu.txt"  # README's CPU install line: space_requirements() of requirements.txt
# ZeroGPU runs PyTorch 2.8 to 2.11 on Python 3.10.13 or 3.12.12 (the Hub's ZeroGPU page, read
# 2026-11-28): the newest of each, PyPI's CUDA build of torch (the GPU is lent to @spaces.GPU calls),
# onnxruntime's CPU package for generation, which runs in the Space's own process.
ZEROGPU_TORCH = "2.11.0"
ZEROGPU_PYTHON = "3.12.12"
ZEROGPU_HARDWARE = "zero-a10g"  # the Hub's name for ZeroGPU hardware in a card's suggested_hardware
SPACES_PIN = "spaces==0.51.3"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Pins swapped for their CPU builds on a CPU Space: PyPI's Linux torch wheel pulls CUDA, cuDNN, NCCL and
# triton (gigabytes with onnxruntime-gpu, many times the CPU builds: docs/space.md), none of which a CPU uses.
CPU_SWAPS = {"torch": ("torch", "+cpu"), "onnxruntime-gpu": ("onnxruntime", "")}


def space_requirements(text: str, gpu: bool = False) -> str:
    """The Space's requirements.txt made from the repository's ``text``: the same pins, except torch
    from PyTorch's CPU index (``torch==X+cpu``) and onnxruntime's CPU package for onnxruntime-gpu.
    ``gpu``: ``text`` as it is (the CUDA torch brings the NVIDIA libraries onnxruntime-gpu loads)."""
    if gpu:
        return text
    lines, swapped = [], set()
    for line in text.splitlines():
        pin = re.match(r"([A-Za-z0-9._-]+)==([^\s;#]+)(.*)$", line)
        if pin and pin.group(1).lower() in CPU_SWAPS:
            name, local = CPU_SWAPS[pin.group(1).lower()]
            line = f"{name}=={pin.group(2)}{local}{pin.group(3)}"
            swapped.add(pin.group(1).lower())
        lines.append(line)
    if missing := sorted(set(CPU_SWAPS) - swapped):  # a renamed pin would otherwise ship the CUDA stack unnoticed
        raise ValueError(f"{REQUIREMENTS} pins no {', '.join(missing)}: cannot swap in the CPU wheels (or use --gpu)")
    # An extra index, not --index-url: that would apply to every line, and PyTorch's index has no gradio.
    # The +cpu pin is on no other index, so a build fails rather than fall back to PyPI's CUDA wheel.
    header = ["# requirements.txt with the CPU wheels of torch and onnxruntime: a CPU Space's (python -m deploy.space)",
              "# and README's CPU install line (requirements-cpu.txt); --gpu keeps onnxruntime-gpu and the CUDA torch.",
              f"--extra-index-url {TORCH_CPU_INDEX}"]
    return "\n".join(header + lines) + "\n"


def zerogpu_requirements(text: str) -> str:
    """A ZeroGPU Space's requirements.txt made from the repository's ``text``: the same pins, except
    torch at :data:`ZEROGPU_TORCH` (PyPI's CUDA build), onnxruntime's CPU package for
    onnxruntime-gpu, and the ``spaces`` package."""
    lines, swapped = [], set()
    for line in text.splitlines():
        pin = re.match(r"([A-Za-z0-9._-]+)==([^\s;#]+)(.*)$", line)
        name = pin.group(1).lower() if pin else None
        if name == "torch":
            line, _ = f"torch=={ZEROGPU_TORCH}{pin.group(3)}", swapped.add(name)
        elif name == "onnxruntime-gpu":
            line, _ = f"onnxruntime=={pin.group(2)}{pin.group(3)}", swapped.add(name)
        lines.append(line)
    if missing := sorted({"torch", "onnxruntime-gpu"} - swapped):
        raise ValueError(f"{REQUIREMENTS} pins no {', '.join(missing)}: cannot write ZeroGPU's requirements")
    header = [f"# requirements.txt for ZeroGPU (python -m deploy.space --zerogpu): torch {ZEROGPU_TORCH}, the newest",
              "# ZeroGPU runs; onnxruntime's CPU package (generation runs in the Space's process); spaces."]
    return "\n".join(header + lines + [SPACES_PIN]) + "\n"


def zerogpu_card(card: str) -> str:
    """The README's front matter for ZeroGPU: a Python ZeroGPU lists, its hardware suggested."""
    head, sep, body = card.partition("\n---\n")
    if not head.startswith("---\n") or not sep:
        raise ValueError(f"{CARD} has no front matter")
    head = re.sub(r'^python_version:.*$', f'python_version: "{ZEROGPU_PYTHON}"', head, flags=re.M)
    head = re.sub(r"^suggested_hardware:.*\n?", "", head, flags=re.M)
    return f"{head}\nsuggested_hardware: {ZEROGPU_HARDWARE}{sep}{body}"


def tracked_files(root: Path = ROOT) -> set[str]:
    """The files git tracks under ``root`` (POSIX paths); every file under it when it is no git
    checkout (an unpacked archive)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
        return {name for name in out.decode().split("\0") if name}
    except (OSError, subprocess.CalledProcessError):
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}


def card_links(card: str, tracked: set[str]) -> set[str]:
    """The tracked files the README's Markdown links and pictures point at (``](path)``, anchors dropped)."""
    targets = {m.group(1).split("#")[0] for m in re.finditer(r"\]\(([^)\s]+)\)", card)}
    return {t for t in targets if t in tracked}


def app_files(root: Path = ROOT) -> list[str]:
    """The repository's part of the Space: the tracked files :data:`SPACE_FILES` matches, the README
    and the tracked files it links to, sorted."""
    tracked = tracked_files(root)
    chosen = {p.relative_to(root).as_posix() for pattern in SPACE_FILES for p in root.glob(pattern) if p.is_file()}
    chosen = {name for name in chosen if name in tracked and "__pycache__" not in name}
    return sorted(chosen | {CARD} | card_links((root / CARD).read_text(), tracked))


def is_binary(path: Path) -> bool:
    """git's own test: a NUL byte among the first 8000 bytes."""
    with open(path, "rb") as f:
        return b"\0" in f.read(8000)


def gitattributes(folder: Path, files: list[str]) -> str:
    """One LFS line per extension of the binary or large files among ``files`` (of ``folder``):
    what a git push to a Space needs (the Hub rejects them stored in plain git)."""
    kinds = sorted({Path(name).suffix for name in files
                    if Path(name).suffix and (is_binary(folder / name) or (folder / name).stat().st_size > LFS_LIMIT)})
    return "".join(f"*{kind} filter=lfs diff=lfs merge=lfs -text\n" for kind in kinds)


def stage(out: Path, artifacts: bool = True, root: Path = ROOT, gpu: bool = False, zerogpu: bool = False) -> list[str]:
    """Write the Space's files into ``out`` (empty or absent) and return them (sorted POSIX paths,
    ``.gitattributes`` included). ``artifacts``: also the built Hub folder, as artifacts/hub/.
    ``gpu``: requirements.txt as it is, not :func:`space_requirements`' CPU one; ``zerogpu``:
    :func:`zerogpu_requirements` and :func:`zerogpu_card`."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} is not an empty folder: give a new or empty one")
    text = (root / REQUIREMENTS).read_text()
    requirements = zerogpu_requirements(text) if zerogpu else space_requirements(text, gpu)
    files = app_files(root)
    sources = {name: root / name for name in files}
    if artifacts:
        from export import ensure_onnx, hub_dir, stale_files
        from export.publish import hub_upload_files

        if stale_files():
            print(f"building {hub_dir()} first (python -m export's build and checks, a minute or two) ...", flush=True)
        ensure_onnx()  # current and checked: the Space then never rebuilds them
        hub = hub_dir()
        sources |= {f"artifacts/{HUB_DIRNAME}/{name}": hub / name for name in hub_upload_files(hub)}
    for name, src in sources.items():
        dst = out / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)  # mtimes kept: the Hub folder stays newer than nothing it was built from
    (out / REQUIREMENTS).write_text(requirements)
    if zerogpu:
        (out / CARD).write_text(zerogpu_card((root / CARD).read_text()))
    (out / ".gitattributes").write_text(gitattributes(out, list(sources)))
    return sorted([*sources, ".gitattributes"])


def stage_static(out: Path, app_space: str | None = None, threads: bool = False, model_repo: str | None = None) -> list[str]:
    """Write the static edition into ``out`` (empty or absent) as a static Space's files, with the
    ``.gitattributes`` a git push needs; returns them (sorted POSIX paths). ``model_repo``: its
    Model tab links that repository's files too."""
    from .static import write_static

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} is not an empty folder: give a new or empty one")
    files = sorted(write_static(out, app_space, threads, progress=lambda text: print(text, flush=True), model_repo=model_repo))
    (out / ".gitattributes").write_text(gitattributes(out, files))
    return sorted([*files, ".gitattributes"])


def folder_size(folder: Path, files: list[str]) -> int:
    return sum((folder / name).stat().st_size for name in files)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m deploy.space", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("space", help="the Space, USER/SPACE (created as a Gradio Space if it does not exist)")
    ap.add_argument("--dry-run", metavar="DIR", type=Path, help="write the files into DIR (new or empty) instead of uploading")
    ap.add_argument("--no-artifacts", action="store_true",
                    help="leave artifacts/hub/ out: a smaller upload; the Space builds the ONNX files at its first start "
                         "(into /data when it has persistent storage, else at every start)")
    ap.add_argument("--model-repo", metavar="USER/NAME",
                    help=f"the published model repository (python -m export --publish): the Model tab links it ({MODEL_REPO_ENV})")
    ap.add_argument("--gpu", action="store_true",
                    help="for GPU hardware: requirements.txt as it is (PyTorch's CUDA wheel and onnxruntime-gpu, 3.1 GB to "
                         "install); the default installs their CPU wheels from PyTorch's CPU index (0.33 GB)")
    ap.add_argument("--zerogpu", action="store_true",
                    help=f"for ZeroGPU hardware, which a free personal account may use for 2 Gradio Spaces: torch {ZEROGPU_TORCH}, "
                         f"Python {ZEROGPU_PYTHON}, the spaces package; Inside the model and Compare run in @spaces.GPU calls "
                         "(each visitor has a daily GPU quota), generation on the Space's CPU")
    ap.add_argument("--static", action="store_true",
                    help="deploy the static edition (python -m deploy.static) as a static Space, free on every account: "
                         "the model runs in each visitor's browser; Watch it learn, which needs a server, links to --app-space")
    ap.add_argument("--app-space", metavar="USER/NAME", help="with --static: the Gradio Space its server tab links to")
    ap.add_argument("--threads", action="store_true", help="with --static: the card asks for cross-origin isolation (docs/browser.md)")
    ap.add_argument("--private", action="store_true", help="create the Space private")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_repo_id(args.space)
        for other in (args.model_repo, args.app_space):
            if other:
                check_repo_id(other)
        if args.gpu and args.zerogpu or args.static and (args.gpu or args.zerogpu):
            raise ValueError("choose one of --gpu, --zerogpu and --static")
        space_requirements((ROOT / REQUIREMENTS).read_text(), args.gpu)
        zerogpu_requirements((ROOT / REQUIREMENTS).read_text())
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="space-") as tmp:
        out = args.dry_run or Path(tmp)
        try:
            if args.static:
                files = stage_static(out, args.app_space, args.threads, args.model_repo)
            else:
                files = stage(out, artifacts=not args.no_artifacts, gpu=args.gpu, zerogpu=args.zerogpu)
        except (FileExistsError, FileNotFoundError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        size = folder_size(out, files)
        print(f"{len(files)} files, {size / 1e6:.1f} MB")
        if args.static:
            print("a static Space: the model runs in each visitor's browser, nothing runs on the Hub")
        else:
            print("requirements.txt: " + (
                "PyTorch's CUDA wheel and onnxruntime-gpu, for GPU hardware" if args.gpu else
                f"torch {ZEROGPU_TORCH}, onnxruntime (CPU) and spaces, for ZeroGPU hardware (Python {ZEROGPU_PYTHON}: "
                f"choose ZeroGPU in the Space's settings if the Hub does not take the card's suggestion)" if args.zerogpu else
                "the CPU wheels of torch (PyTorch's CPU index) and onnxruntime; --gpu for GPU hardware, --zerogpu for ZeroGPU"))
        if args.dry_run:
            print(f"written to {out} (nothing uploaded)")
            if args.model_repo and not args.static:  # the static edition has the links in its files
                print(f"the Space needs the variable {MODEL_REPO_ENV}={args.model_repo} (Settings → Variables)")
            return 0
        try:
            sdk, what = ("static", "the static edition") if args.static else ("gradio", "the app")
            url = upload(out, args.space, files, "space", f"GPT Playground: {what}", space_sdk=sdk, private=args.private or None)
            if args.model_repo and not args.static:
                from huggingface_hub import HfApi

                HfApi().add_space_variable(args.space, MODEL_REPO_ENV, args.model_repo)
        except Exception as err:  # noqa: BLE001 -- no token, no network, no right to the name: say it, no traceback
            print(upload_failed(args.space, err, gradio_space=not args.static), file=sys.stderr)
            return 1
        print(f"uploaded to {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
