"""What an exported file says about itself (``metadata_props``), and how to tell it is stale."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:
    from model import GPTConfig

# Bump when the exported graph changes, so that files from an older exporter are rebuilt.
# 5: Optimum decoder inputs (attention_mask, position_ids), int8 with standard ops, hub folder;
# 6: model_quantized.onnx is the weight-only format, the integer one moved to model_int8.onnx;
# 7: generation_config.json without max_length (every generate(max_new_tokens=...) warned).
EXPORT_FORMAT = "7"
TOKENIZER_NAME = "gpt2"  # tiktoken's GPT-2 BPE (model/tokenizer.py)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def training_summary(weights_dir: Path) -> dict[str, str]:
    """Training step and validation loss of the shipped checkpoint, from its training log.

    ``model.safetensors`` is the best checkpoint, so the log entry with the lowest validation
    loss describes it. Missing log -> "unknown" (the weights alone do not say).
    """
    log_path = weights_dir / "training_log.json"
    try:
        log = json.loads(log_path.read_text())
        best = min((e for e in log if e.get("val_loss") is not None), key=lambda e: e["val_loss"])
        return {"training_step": str(best["step"]), "val_loss": f"{best['val_loss']:.4f}"}
    except (OSError, ValueError, KeyError, TypeError):
        return {"training_step": "unknown", "val_loss": "unknown"}


# Beside the weights: the held-out losses `python -m export` measured on their ONNX files (whole
# validation split), so that every later build's model card carries them.
EVALUATION_NAME = "evaluation.json"


def record_losses(weights_dir: Path, losses: dict[str, float], windows: int | None = None) -> Path:
    """Write {"fp32", "quantized", "int8": nats} measured on the whole validation split to
    ``weights_dir/evaluation.json``, with the weights' SHA-256 (new weights make it stale)."""
    path = weights_dir / EVALUATION_NAME
    doc = {
        "source_weights_sha256": sha256_file(weights_dir / "model.safetensors"),
        "split": "val",
        "windows": windows if windows is not None else "all",
        "val_loss": {key: round(float(value), 6) for key, value in losses.items()},
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def recorded_losses(weights_dir: Path) -> dict[str, float]:
    """The losses of ``record_losses`` for these very weights; {} when none are recorded, the
    record is unreadable, or it was made for other weights."""
    try:
        doc = json.loads((weights_dir / EVALUATION_NAME).read_text())
        if doc["source_weights_sha256"] != sha256_file(weights_dir / "model.safetensors"):
            return {}
        return {str(key): float(value) for key, value in doc["val_loss"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def build_metadata(config: "GPTConfig", weights_path: Path, quantization: str) -> dict[str, str]:
    from model import EOT_ID

    return {
        "gpt_config": json.dumps(asdict(config)),
        "tokenizer": TOKENIZER_NAME,
        "eot_token_id": str(EOT_ID),
        **training_summary(weights_path.parent),
        "source_weights_sha256": sha256_file(weights_path),
        "quantization": quantization,
        "export_format": EXPORT_FORMAT,
    }


def set_metadata(model: onnx.ModelProto, metadata: dict[str, str]) -> None:
    # Replace ours, keep nothing else: the exporter's own props are not about this model.
    del model.metadata_props[:]
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)


def read_metadata(path: Path) -> dict[str, str]:
    """metadata_props of an ONNX file; {} if the file is missing or unreadable."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # a truncated or foreign file is simply stale
        return {}
    return {p.key: p.value for p in model.metadata_props}


def is_current(path: Path, weights_sha256: str) -> bool:
    meta = read_metadata(path)
    return meta.get("source_weights_sha256") == weights_sha256 and meta.get("export_format") == EXPORT_FORMAT
