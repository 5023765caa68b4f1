"""What Watch it learn needs to train in the learner's browser, written into the static edition's
``learn/`` folder (and served by the app for its "Run on: this browser"):

- the step graph of every size and position kind (export/train_step.py: forward, backward, clipping
  and AdamW of one batch) and its forward graph (export/forward_graph.py: the logits, for samples,
  the held-out score and a prompt's continuation), built once per shape and version of their code
  under ``artifacts/learn/`` (about a minute of CPU each);
- ``train.bin.gz``: the training plays as character ids, one byte each, gzipped (the browser
  unpacks it: web/engine/fetch.js), from which the browser draws the same batches as the server
  (playground/learn/batches.py);
- ``heldout.bin``: the held-out windows the server scores at a run's end (model.evaluate's
  windows, 64 of 65 ids);
- ``learn.json``: the vocabulary, the reference losses, the settings and their words (the tab's
  paragraphs as HTML, the app's own), the training constants, and per size and position kind the model's shape, its initialisation spec
  (playground/initial.py: the browser draws the same weights) and its files.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from export.naming import ARTIFACTS_DIR

__all__ = ["GRAPH_DIR", "LEARN_DIR", "APP_DIR", "app_folder", "learn_graphs", "write_learn"]

GRAPH_DIR = "learn"  # under artifacts/
LEARN_DIR = "learn"  # in the static folder
APP_DIR = "browser-learn"  # under artifacts/: the folder the app writes and serves (its learn/ inside)
ROOT = Path(__file__).resolve().parents[2]


def _models() -> list[tuple[str, str]]:
    from .run import POSITIONS, SIZES

    return [(size, positions) for size in SIZES for positions in POSITIONS]



def _key(kind: str, config, tc) -> str:
    """What a graph depends on: the model's shape, the step's settings, the code it is traced from."""
    import torch

    sources = ["model/gpt.py", "export/forward_graph.py"] if kind == "forward" else [
        "model/gpt.py", "model/train.py", "export/train_step.py"]
    step = {k: getattr(tc, k) for k in ("batch_size", "grad_clip", "beta2", "weight_decay", "label_smoothing")}
    h = hashlib.sha256(json.dumps([kind, asdict(config), step if kind == "step" else None], sort_keys=True).encode())
    for source in sources:
        h.update((ROOT / source).read_bytes())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def learn_graphs(vocab_size: int, out_dir: Path | None = None, progress: Callable[[str], None] = print) -> dict[tuple[str, str, str], Path]:
    """Every size and position kind's step and forward graph for a vocabulary of ``vocab_size``,
    under ``out_dir`` (default artifacts/)/learn/, exported when missing: {(kind, size, positions): path}."""
    from export.forward_graph import export_forward
    from export.train_step import export_step

    from .run import learn_model

    folder = (Path(out_dir) if out_dir is not None else ARTIFACTS_DIR) / GRAPH_DIR
    paths, wanted = {}, set()
    for size, positions in _models():
        model, tc = learn_model(size, positions, vocab_size)
        for kind, export in (("step", lambda p: export_step(model, tc, p)), ("forward", lambda p: export_forward(model, p))):
            path = folder / f"{kind}-{size}-{positions}-{_key(kind, model.config, tc)}.onnx"
            if not path.is_file():
                progress(f"Watch it learn's {kind} graph for {size}, {positions} positions (once: about a minute)")
                mine = path.with_name(f"{path.stem}.{os.getpid()}.part.onnx")  # the app's child and a static build may race
                export(mine)
                os.replace(mine, path)
            paths[kind, size, positions] = path
            wanted.add(path)
    for old in folder.glob("*.onnx"):  # graphs of earlier code or shapes
        if old not in wanted and ".tmp." not in old.name and ".part." not in old.name:
            old.unlink()
    return paths


def app_folder(out_dir: Path | None = None) -> Path:
    """Where the app writes its copy (``write_learn(app_folder())``) and serves it from."""
    return (Path(out_dir) if out_dir is not None else ARTIFACTS_DIR) / APP_DIR


def _write_if_changed(path: Path, data: bytes, gzipped: bool = False) -> None:
    """``data`` into ``path`` (gzipped when asked), unless it holds them already: the app writes the
    folder at every start, and a file left as it was keeps its date (and the browsers' caches their copy)."""
    if path.is_file():
        old = path.read_bytes()
        if (gzip.decompress(old) if gzipped else old) == data:
            return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(data, 9, mtime=0) if gzipped else data)
    os.replace(tmp, path)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def write_learn(out: Path, progress: Callable[[str], None] = print, graphs_dir: Path | None = None) -> dict[str, str]:
    """Write the ``learn/`` folder into the static folder ``out``; returns {file: its address with
    ?v=<content hash>}, relative to ``out``. Raises :class:`playground.resources.ResourceError` when
    the Shakespeare texts are missing and cannot be downloaded."""
    from model.evaluate import window_batches
    from .. import limits
    from ..initial import init_spec
    from ..lessons import markdown_html
    from . import run
    from .corpus import load_corpus
    from .refs import references
    from .view import READING_WORDS, intro_words

    corpus = load_corpus("char", progress=progress)
    if corpus.vocab_size > 256:
        raise ValueError("the character vocabulary no longer fits in a byte")
    folder = out / LEARN_DIR
    folder.mkdir(parents=True, exist_ok=True)
    graphs = learn_graphs(corpus.vocab_size, graphs_dir, progress)
    files: dict[str, str] = {}

    def add(name: str) -> str:
        files[name] = f"{name}?v={_digest(out / name)}"
        return files[name]

    _write_if_changed(folder / "train.bin.gz", corpus.train.astype(np.uint8).tobytes(), gzipped=True)
    x, y = next(window_batches(corpus.val, run.SIZES["tiny"].block_size, run.VAL_WINDOWS, batch_size=run.VAL_WINDOWS))
    if any(c.block_size != run.SIZES["tiny"].block_size for c in run.SIZES.values()):
        raise ValueError("the held-out windows are written for one block size")
    _write_if_changed(folder / "heldout.bin", np.concatenate([x, y[:, -1:]], axis=1).astype(np.uint8).tobytes())
    models = {}
    for size, positions in _models():
        s = run.settings(size=size, positions=positions)
        config = run.model_config(s, corpus.vocab_size)
        entry = {"config": asdict(config), "parameters": run.build_model(s, corpus.vocab_size).num_parameters(),
                 "spec": [p.to_json() for p in init_spec(config)]}
        for kind in ("step", "forward"):
            name = f"{LEARN_DIR}/{kind}-{size}-{positions}.onnx"
            _write_if_changed(out / name, graphs[kind, size, positions].read_bytes())
            entry[kind] = add(name)
            entry[f"{kind}_bytes"] = (out / name).stat().st_size
        models[f"{size}-{positions}"] = entry
    r = references(corpus)
    d = run.LearnSettings()
    facts = {
        "vocabulary": {"itos": list(corpus.itos), "size": corpus.vocab_size, "start_id": corpus.start_id},
        "references": {"ln_vocab_size": r.ln_v, "unigram": r.unigram, "bigram": r.bigram, "shipped_model": r.shipped},
        "corpus": {"train": add(f"{LEARN_DIR}/train.bin.gz"), "train_ids": int(len(corpus.train)),
                   "train_bytes": (folder / "train.bin.gz").stat().st_size, "heldout": add(f"{LEARN_DIR}/heldout.bin"),
                   "heldout_windows": int(len(x)), "val_chars": corpus.val_chars},
        "settings": {
            "inits": list(run.INITS), "learning_rates": run.LEARNING_RATES, "sizes": list(run.SIZES),
            "positions": list(run.POSITIONS), "defaults": {k: v for k, v in asdict(d).items() if k != "seconds"},
            "min_steps": run.MIN_STEPS, "max_steps": run.MAX_STEPS,
        },
        "limits": limits.for_browser(),  # the one route of limits into a page (the seed's, the prompt's...)
        "words": {"intro": markdown_html(intro_words("in this browser")), "reading": markdown_html(READING_WORDS)},
        "why": {"init": run.INIT_WHY, "learning_rate": run.LR_WHY, "size": run.SIZE_WHY, "positions": run.POSITION_WHY},
        "training": {
            "batch_size": run.BATCH_SIZE, "warmup_steps": run.WARMUP_STEPS, "skew": run.SKEW, "sample_every": run.SAMPLE_EVERY,
            "sample_chars": run.SAMPLE_CHARS, "recent_steps": run.RECENT_STEPS, "val_windows": run.VAL_WINDOWS,
            "continue_chars": run.CONTINUE_CHARS,
        },
        "models": models,
    }
    _write_if_changed(folder / "learn.json", json.dumps(facts, ensure_ascii=False, separators=(",", ":")).encode())
    add(f"{LEARN_DIR}/learn.json")
    return files


def main(argv: list[str] | None = None) -> int:
    """``python -m playground.learn.files DIR``: write DIR/learn/ (the app runs this in a child process at
    every start, so that building the graphs, the first time, leaves the server's memory as it was)."""
    import argparse
    import sys

    from ..resources import ResourceError

    ap = argparse.ArgumentParser(prog="python -m playground.learn.files", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, nargs="?", default=None, help="the folder (default: the app's, artifacts/browser-learn)")
    args = ap.parse_args(argv)
    out = args.out or app_folder()
    try:
        files = write_learn(out, progress=lambda text: print(text, file=sys.stderr, flush=True))
    except ResourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"wrote {len(files)} files of Watch it learn's browser run to {out / LEARN_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

