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
# 6: model_quantized.onnx is the weight-only format, the integer one moved to model_int8.onnx.
EXPORT_FORMAT = "6"
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
