"""Which model the playground shows: the shipped one, or any GPT-2-family folder given with
``python app.py --model DIR``.

DIR may be
- a run of ``python -m model.train`` or a folder written by ``python -m model.convert --from-hf``:
  ``config.json`` (our GPTConfig) + ``model.safetensors``; its ONNX files are exported once into
  ``artifacts/models/<name>-<hash>/hub/`` (rebuilt when the weights change);
- a Hugging Face GPT-2 folder (``config.json`` with ``model_type: gpt2`` + ``model.safetensors``,
  e.g. GPT-2 small saved with ``save_pretrained``), or an ``artifacts/hub`` folder that this
  project exported (the same, plus ``onnx/``): the weights are converted once into
  ``artifacts/models/<name>-<hash>/weights/`` (our layout, learned positions) for the tabs that
  look inside the network; a hub folder's own ONNX files are served as they are.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from model import WEIGHTS_DIR, GPTConfig

__all__ = ["ModelSource", "ModelSourceError", "resolve", "shipped", "prepare_onnx_files", "describe"]


class ModelSourceError(ValueError):
    """DIR is not a model folder the playground can show; the message says what it needs."""


@dataclass(frozen=True)
class ModelSource:
    kind: str  # "shipped", "run" (model.train or model.convert --from-hf), "hf" (a Hugging Face GPT-2 folder), "hub"
    folder: Path  # the folder as the user named it
    weights_dir: Path  # config.json (GPTConfig) + model.safetensors, what model.load_pretrained reads
    out_dir: Path | None  # where its hub/ folder (ONNX files) is written; None: artifacts/
    onnx_dir: Path | None = None  # a hub folder whose own onnx/ files are served as they are

    @property
    def name(self) -> str:
        if self.kind == "shipped":
            return "the shipped model"
        # "hub" alone says little: name the folder it sits in too (e.g. my-run/hub).
        return f"{self.folder.parent.name}/{self.folder.name}" if self.folder.name == "hub" else self.folder.name

    @property
    def config(self) -> GPTConfig:
        return GPTConfig.from_json(self.weights_dir / "config.json")


def shipped() -> ModelSource:
    return ModelSource("shipped", WEIGHTS_DIR, WEIGHTS_DIR, None)


# Where converted weights and exported ONNX files of other models go (default artifacts/models/).
CACHE_ENV = "PLAYGROUND_MODELS_DIR"


def _cache_dir(folder: Path) -> Path:
    import os

    from export import ARTIFACTS_DIR

    root = Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else ARTIFACTS_DIR / "models"
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:10]
    return root / f"{folder.resolve().name}-{digest}"


def _is_hf_config(config: dict) -> bool:
    return config.get("model_type") == "gpt2" or "n_embd" in config


def _convert_hf(folder: Path, target: Path) -> Path:
    """Our layout of a Hugging Face GPT-2 folder, converted once (again when its weights change)."""
    from model.convert import from_hf

    source = folder / "model.safetensors"
    stamp = target / "source.json"
    key = {"source": str(source.resolve()), "size": source.stat().st_size, "mtime": source.stat().st_mtime}
    if stamp.is_file() and (target / "model.safetensors").is_file():
        try:
            if json.loads(stamp.read_text()) == key:
                return target
        except ValueError:
            pass
    from_hf(folder, target)
    stamp.write_text(json.dumps(key))
    return target


def resolve(path: str | Path | None) -> ModelSource:
    """The model folder ``path`` names (None: the shipped model), converted if needed.

    Raises :class:`ModelSourceError` with what a model folder must hold."""
    if path is None:
        return shipped()
    folder = Path(path).expanduser()
    if folder.is_file():  # a path to model.safetensors or config.json names its folder
        folder = folder.parent
    if not folder.is_dir():
        raise ModelSourceError(f"{folder} is not a folder")
    config_path = folder / "config.json"
    if not config_path.is_file() or not (folder / "model.safetensors").is_file():
        raise ModelSourceError(
            f"{folder} holds no config.json + model.safetensors: give a run folder of `python -m model.train`, "
            "a folder written by `python -m model.convert --from-hf`, a Hugging Face GPT-2 folder or an artifacts/hub folder"
        )
    try:
        config = json.loads(config_path.read_text())
    except ValueError as err:
        raise ModelSourceError(f"{config_path} is not valid JSON ({err})") from None
    if folder.resolve() == WEIGHTS_DIR.resolve():
        return shipped()
    cache = _cache_dir(folder)
    try:
        if _is_hf_config(config):
            weights = _convert_hf(folder, cache / "weights")
            from export.naming import FP32_NAME, INT8_NAME

            has_onnx = (folder / FP32_NAME).is_file() and (folder / INT8_NAME).is_file()
            return ModelSource("hub" if has_onnx else "hf", folder, weights, cache, folder if has_onnx else None)
        GPTConfig.from_json(config_path)  # a bad config (d_model not divisible by n_head...) fails here
    except (KeyError, ValueError, TypeError, FileNotFoundError) as err:
        raise ModelSourceError(f"{folder}: {err}") from None
    return ModelSource("run", folder, folder, cache)


def prepare_onnx_files(source: ModelSource, apart: bool = False) -> dict[str, Path]:
    """{"fp32", "int8" (and "quantized" where there is one): path} of ``source``: a hub folder's
    own files, else exported (once); ``apart``: a build, when needed, in a child process that
    prints its progress on the console (a server's start)."""
    from export import ensure_onnx
    from export.apart import ensure_onnx_apart

    if source.onnx_dir is not None:
        from export.naming import FP32_NAME, INT8_NAME, QUANTIZED_NAME

        files = {"fp32": FP32_NAME, "quantized": QUANTIZED_NAME, "int8": INT8_NAME}
        return {key: source.onnx_dir / name for key, name in files.items() if (source.onnx_dir / name).is_file()}
    where = {} if source.kind == "shipped" else {"weights_dir": source.weights_dir, "out_dir": source.out_dir}
    if apart:
        return ensure_onnx_apart(**where)
    return ensure_onnx(**where)


def describe(source: ModelSource) -> str:
    """One line for the page: which model, where from, and its size."""
    c = source.config
    where = {
        "shipped": "trained by this project on Shakespeare (model/weights)",
        "run": f"from `{source.folder}`",
        "hf": f"a Hugging Face GPT-2 folder, `{source.folder}`",
        "hub": f"an exported Hub folder, `{source.folder}`",
    }[source.kind]
    return (
        f"**Model shown: {source.name}** ({where}): {c.n_layer} layers, {c.n_head} heads, d_model {c.d_model}, "
        f"context {c.block_size} tokens, {c.pos_encoding} positions."
    )
