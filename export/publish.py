"""Put a folder on the Hugging Face Hub: the Hub folder as a model repository
(``python -m export --publish USER/NAME``), or the app's files as a Space (``python -m deploy.space``).

Both upload an explicit list of files through ``huggingface_hub``'s HTTP API, never with git: the
Hub stores the binaries (weights, ONNX files, pictures) itself, so this repository's history and
files stay plain git.
"""

from __future__ import annotations

import re
from pathlib import Path

from .naming import FP32_NAME, INT8_NAME, QUANTIZED_NAME

# The setting that names the published model repository (USER/NAME); the Model tab links it.
MODEL_REPO_ENV = "PLAYGROUND_MODEL_REPO"
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` if it reads USER/NAME (letters, digits, ``-``, ``_``, ``.``), else ValueError."""
    if not _REPO_ID.match(repo_id or "") or ".." in repo_id or repo_id.endswith(".git"):
        raise ValueError(f"a repository id reads USER/NAME (letters, digits, '-', '_', '.'), not {repo_id!r}")
    return repo_id


def hub_upload_files(folder: Path) -> list[str]:
    """The files of a built Hub folder that make the model repository: every file but unfinished
    exports (``*.tmp.onnx``), as sorted POSIX paths relative to ``folder``; FileNotFoundError when an
    ONNX file or the card is missing (build it with ``python -m export`` first)."""
    from .hub import HUB_FILES

    missing = [name for name in (*HUB_FILES, FP32_NAME, QUANTIZED_NAME, INT8_NAME) if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}: build it with `python -m export`")
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".tmp.onnx"))


def upload(folder: Path, repo_id: str, files: list[str], repo_type: str, message: str, **create: object) -> str:
    """Create ``repo_id`` if needed and upload exactly ``files`` of ``folder``,
    deleting what an earlier upload left there and this one no longer has; returns the repo's URL.
    The token is huggingface_hub's usual one (``hf auth login`` or ``HF_TOKEN``)."""
    from huggingface_hub import HfApi

    api = HfApi()
    url = api.create_repo(check_repo_id(repo_id), repo_type=repo_type, exist_ok=True, **create)
    api.upload_folder(
        repo_id=repo_id, repo_type=repo_type, folder_path=folder, allow_patterns=files,
        delete_patterns=["*", "**/*"], commit_message=message,
    )
    return str(url)


PAYMENT_REQUIRED = 402


def upload_failed(repo_id: str, err: Exception, gradio_space: bool = False) -> str:
    """What to print when an upload fails (no token, no network, no right to the name). A Gradio
    Space refused with 402 Payment Required (creating one needs a paid plan) gets the way out in
    plain words: the static edition, which the Hub hosts free."""
    status = getattr(getattr(err, "response", None), "status_code", None)
    if gradio_space and status == PAYMENT_REQUIRED:
        return (f"error: the Hub refused to create the Gradio Space {repo_id}: 402 Payment Required.\n"
                "Gradio and Docker Spaces run on the Hub's computers and need a paid plan to create; a static Space is "
                "free on every account. Deploy the static edition there instead (the model runs in each visitor's "
                "browser; Watch it learn then links to a Gradio app, if you have one):\n"
                f"  python -m deploy.space {repo_id} --static")
    return (f"error: uploading to {repo_id} failed: {type(err).__name__}: {err}\n"
            "(it needs a token with write access: `hf auth login` or HF_TOKEN)")


def publish_model(folder: Path, repo_id: str) -> str:
    """Upload the Hub folder ``folder`` (artifacts/hub) as the model repository ``repo_id``."""
    return upload(folder, repo_id, hub_upload_files(folder), "model", "GPT Playground: the ONNX model and its card")
