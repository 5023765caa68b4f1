"""Small random 2-layer GPT-2-family folders in every format ``python app.py --model DIR`` takes:
a ``model.train`` run (sinusoidal positions), a ``model.convert --from-hf`` folder and a Hugging
Face GPT-2 folder (learned positions), and an ``artifacts/hub`` folder exported by this project."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from model import save_pretrained
from model.gpt import GPT, GPTConfig

# Sizes unlike the shipped model's (4 layers, 4 heads, d_model 256, 256 tokens) so a tab that did
# not adapt shows it.
RUN = GPTConfig(vocab_size=50257, block_size=48, n_layer=2, n_head=2, d_model=32, pos_encoding="sinusoidal")
LEARNED = GPTConfig(vocab_size=50257, block_size=40, n_layer=2, n_head=4, d_model=48, pos_encoding="learned")
FORMATS = ("run", "converted", "hf", "hub")


def make_model_dirs(base: Path) -> dict[str, Path]:
    """{format: folder} under ``base`` (the hub folder's ONNX files are exported here: seconds)."""
    from export import ensure_onnx
    from model.convert import from_hf, to_hf

    torch.manual_seed(1)
    run = save_pretrained(GPT(RUN).eval(), base / "run-sinusoidal")
    # A training log as model.train writes it: the Model tab draws its curves.
    log = [{"step": s, "tokens": s * 1000, "train_loss": 10.8 - s / 10, "val_loss": 10.9 - s / 10} for s in (0, 10, 20)]
    (run / "training_log.json").write_text(json.dumps(log))
    torch.manual_seed(2)
    learned = save_pretrained(GPT(LEARNED).eval(), base / "learned-src")
    hf = to_hf(learned, base / "hf-gpt2", dtype=torch.float32)
    converted = from_hf(hf, base / "converted-from-hf")
    ensure_onnx(weights_dir=run, out_dir=base / "exported")
    return {"run": run, "converted": converted, "hf": hf, "hub": base / "exported" / "hub"}
