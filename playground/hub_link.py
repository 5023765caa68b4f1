"""The published model repository, when the ``PLAYGROUND_MODEL_REPO`` setting names one
(``python -m export --publish USER/NAME`` publishes it; ``python -m deploy.space --model-repo
USER/NAME`` sets the setting on a Space): the Model tab's link to it, and the address of its 8-bit
file, which "Run on: this browser" downloads from the Hub instead of the Space (the same file,
checked by its digest; the Space's copy when the Hub cannot give it). ``PLAYGROUND_HUB_URL`` moves
the Hub (a mirror; a local server in the tests). Plain functions; no Gradio."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping

from export.publish import MODEL_REPO_ENV, check_repo_id

log = logging.getLogger("playground")

HUB_URL = "https://huggingface.co"
HUB_URL_ENV = "PLAYGROUND_HUB_URL"
BROWSER_MODEL = "onnx/model_quantized.onnx"  # the repository's file the browser runs (export/publish.py uploads it)


def hub_url(environ: Mapping[str, str] = os.environ) -> str:
    """Where the Hub is: ``PLAYGROUND_HUB_URL`` when it is an http(s) address of a host (and
    port), without a path; else, said on the console, :data:`HUB_URL`."""
    value = environ.get(HUB_URL_ENV, "").strip().rstrip("/")
    if not value:
        return HUB_URL
    if re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?", value):
        return value
    log.warning("%s=%r is not an http(s) address of a host: using %s", HUB_URL_ENV, value[:80], HUB_URL)
    return HUB_URL


def model_address(repo: str, hub: str = HUB_URL) -> str:
    """The address of repository ``repo``'s browser model on the Hub (its main branch)."""
    return f"{hub}/{repo}/resolve/main/{BROWSER_MODEL}"


def published_repo(environ: Mapping[str, str] = os.environ) -> str | None:
    """The model repository (USER/NAME) the setting names; None when unset, or not a repository id
    (said on the console: the page then shows no link rather than a broken one)."""
    value = environ.get(MODEL_REPO_ENV, "").strip()
    if not value:
        return None
    try:
        return check_repo_id(value)
    except ValueError as err:
        log.warning("%s: %s; the Model tab shows no link", MODEL_REPO_ENV, err)
        return None


def published_markdown(environ: Mapping[str, str] = os.environ) -> str:
    """One line for the Model tab: where the same files are published ('' when nowhere)."""
    repo = published_repo(environ)
    return "" if repo is None else repo_markdown(repo)


def repo_markdown(repo: str) -> str:
    """The Model tab's line for the model repository ``repo`` (USER/NAME)."""
    return (
        f"**On the Hugging Face Hub:** [{repo}]({HUB_URL}/{repo}): the same folder as the zip below, "
        f'for `from_pretrained("{repo}")` (Optimum, transformers) or `pipeline("text-generation", "{repo}")` '
        "(transformers.js)."
    )
