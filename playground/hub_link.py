"""The Model tab's link to the published model repository, when the ``PLAYGROUND_MODEL_REPO``
setting names one (``python -m export --publish USER/NAME`` publishes it; ``python -m export.space
--model-repo USER/NAME`` sets the setting on a Space). Plain functions; no Gradio."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from export.publish import MODEL_REPO_ENV, check_repo_id

log = logging.getLogger("playground")

HUB_URL = "https://huggingface.co"


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
