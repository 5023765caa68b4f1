"""The GPT this project trains: model, tokenizer and the shipped weights."""

from __future__ import annotations

from pathlib import Path

from .gpt import GPT, GPTConfig, GPTOutput, positional_encoding
from .tokenizer import EOT_ID, get_tokenizer

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"

__all__ = ["GPT", "GPTConfig", "GPTOutput", "positional_encoding", "get_tokenizer", "load_pretrained", "save_pretrained", "EOT_ID", "WEIGHTS_DIR"]


def load_pretrained(path: str | Path | None = None, device: str = "cpu") -> GPT:
    """Load a model folder (``config.json`` + ``model.safetensors``), the shipped one by default.

    Weights are read with safetensors only (no pickle). Returns the model in eval mode with its
    :class:`GPTConfig` at ``model.config``.
    """
    from .checkpoint import load_weights  # one loader for training checkpoints and shipped weights

    folder = Path(path) if path is not None else WEIGHTS_DIR
    if folder.is_file():
        folder = folder.parent
    config_path, weights_path = folder / "config.json", folder / "model.safetensors"
    for p in (config_path, weights_path):
        if not p.is_file():
            raise FileNotFoundError(
                f"{p} not found: a model folder holds config.json and model.safetensors "
                "(train one with `python -m model.train`, or restore the shipped one with `git checkout model/weights`)"
            )
    model = GPT(GPTConfig.from_json(config_path))
    load_weights(model, weights_path)
    return model.to(device).eval()


def save_pretrained(model: GPT, path: str | Path) -> Path:
    """Write a model folder that :func:`load_pretrained` reads back: ``config.json`` and
    ``model.safetensors`` (the tied head stored once). Returns the folder."""
    from .checkpoint import save_weights

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    model.config.to_json(folder / "config.json")
    save_weights(model, folder / "model.safetensors")
    return folder
