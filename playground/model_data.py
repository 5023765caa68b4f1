"""The Model tab's data object: what web/views/model.js draws, written by the export for the static
edition (``data/model.json``, deploy/static.py) from the same functions the app's tab reads
(:mod:`playground.model_info`), so that the page shows the app's numbers and nothing is
recomputed in JavaScript. Its fields: docs/browser.md ("Model and Compare in the browser").
"""

from __future__ import annotations

import json
from typing import Any

from model import GPT

from .hub_link import HUB_URL, repo_markdown
from .lessons import markdown_html
from .model_info import architecture_markdown, architecture_parts, architecture_rows, training_figure, training_note

__all__ = ["model_data", "download"]


def download(label: str, href: str, size: int) -> dict[str, Any]:
    """One download: what it is, where (a path in the folder or an address) and its size in bytes."""
    return {"label": label, "href": href, "bytes": int(size)}


def model_data(model: GPT, log: list[dict[str, Any]], downloads: list[dict[str, Any]], *, shipped: bool = True,
               hub_repo: str | None = None) -> dict[str, Any]:
    """The data object of ``model`` trained as ``log`` says (``model_info.load_training_log``),
    offering ``downloads`` (:func:`download`), and the model repository ``hub_repo`` when one is
    named. Plain lists, numbers and strings (HTML only where rendered from Markdown)."""
    c = model.config
    return {
        "config": {"n_layer": c.n_layer, "n_head": c.n_head, "d_model": c.d_model, "head_dim": c.head_dim,
                   "block_size": c.block_size, "vocab_size": c.vocab_size, "pos_encoding": c.pos_encoding},
        "parameters": model.num_parameters(),
        "non_embedding": model.num_parameters(non_embedding=True),
        "architecture": architecture_parts(model),
        "summary_html": markdown_html(architecture_markdown(model)),
        "rows": architecture_rows(model),  # [part, parameters, share], the total last
        # The app's chart as plotly's JSON: the same traces, names and marks (the final evaluation).
        "curves": json.loads(training_figure(log).to_json()),
        "curves_note_html": markdown_html(training_note(log, shipped=shipped)),
        "downloads": downloads,
        "hub": None if hub_repo is None else {"repo": hub_repo, "url": f"{HUB_URL}/{hub_repo}", "html": markdown_html(repo_markdown(hub_repo))},
    }
