"""Convert between this project's model folders and Hugging Face GPT-2 checkpoints.

    python -m model.convert --to-hf DIR [--model PATH]     # our weights -> GPT2LMHeadModel folder
    python -m model.convert --from-hf DIR --out OUTDIR     # any local GPT-2 checkpoint -> our format

The block layout is GPT-2's, so every tensor maps one to one. Two differences: GPT-2 stores its
projections as ``Conv1D`` with weights [in, out] where ``nn.Linear`` stores [out, in] (so they are
transposed), and GPT-2 has only learned positions, so a sinusoidal model exports its table
``positional_encoding(block_size, d_model)`` as ``wpe``. An imported checkpoint becomes a
``pos_encoding="learned"`` model. Neither direction needs transformers: only json + safetensors.

A model with ``scale_embedding`` (token embeddings times s = sqrt(d_model)) has no GPT-2 flag, but
an exact GPT-2 twin: run its residual stream divided by s. Positions become ``wpe / s``, every
projection that writes into the stream (``c_proj``, weight and bias) is divided by s, and the
LayerNorm epsilon by s^2; each LayerNorm then sees its input divided by s and gives the same
output, so the logits (computed from ln_f's output with the tied ``wte``) are unchanged.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .gpt import GPTConfig, positional_encoding
from .tokenizer import EOT_ID

# The Conv1D layers of a GPT-2 block: their weights are the transpose of our nn.Linear weights.
_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
_LAYER_NORMS = ("ln_1", "ln_2")
# Buffers some GPT-2 checkpoints carry (the causal mask); they are not weights.
_HF_BUFFERS = (".attn.bias", ".attn.masked_bias")
# Both compute GELU with the tanh approximation, as our FeedForward does.
_TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")


def name_map(n_layer: int) -> Iterator[tuple[str, str, bool]]:
    """(our name, GPT-2 name without the ``transformer.`` prefix, transpose?) for every weight
    except the positions (``wpe``) and the tied output head."""
    yield "wte.weight", "wte.weight", False
    for i in range(n_layer):
        for ln in _LAYER_NORMS:
            for p in ("weight", "bias"):
                yield f"blocks.{i}.{ln}.{p}", f"h.{i}.{ln}.{p}", False
        for layer in _CONV1D:
            yield f"blocks.{i}.{layer}.weight", f"h.{i}.{layer}.weight", True
            yield f"blocks.{i}.{layer}.bias", f"h.{i}.{layer}.bias", False
    for p in ("weight", "bias"):
        yield f"ln_f.{p}", f"ln_f.{p}", False


def residual_scale(config: GPTConfig) -> float:
    """s: how much larger our residual stream is than its GPT-2 twin's (sqrt(d_model) with
    ``scale_embedding``, else 1)."""
    return math.sqrt(config.d_model) if config.scale_embedding else 1.0


def hf_config(config: GPTConfig) -> dict:
    """A GPT2Config (as JSON) describing the same network."""
    eot = EOT_ID if config.vocab_size > EOT_ID else None
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_embd": config.d_model,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_inner": None,  # 4 * n_embd, as ours
        "activation_function": "gelu_new",
        "resid_pdrop": config.dropout,
        "embd_pdrop": config.dropout,
        "attn_pdrop": config.dropout,
        "layer_norm_epsilon": config.layer_norm_eps / residual_scale(config) ** 2,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True,
        "bos_token_id": eot,
        "eos_token_id": eot,
    }


def to_hf(model_dir: Path, out: Path, dtype: torch.dtype | None = torch.float32) -> Path:
    """Write ``config.json`` + ``model.safetensors`` that ``GPT2LMHeadModel.from_pretrained`` loads,
    in ``dtype`` (None: the dtype the weights are stored in).

    float32 by default, as the Hub folder: transformers loads a checkpoint in the dtype it is
    stored in, and the shipped weights are float16, whose matmuls on a CPU no longer reproduce
    the app's float32 logits."""
    for p in (model_dir / "config.json", model_dir / "model.safetensors"):
        if not p.is_file():
            raise FileNotFoundError(f"{p} not found: our model folder holds config.json + model.safetensors (python -m model.train writes one)")
    config = GPTConfig.from_json(model_dir / "config.json")
    ours = load_file(str(model_dir / "model.safetensors"))
    s = residual_scale(config)
    state = {}
    for our_name, hf_name, transpose in name_map(config.n_layer):
        t = ours[our_name].float()
        if ".c_proj." in our_name:
            t = t / s
        state[f"transformer.{hf_name}"] = (t.t() if transpose else t).to(ours[our_name].dtype).contiguous()
    if config.pos_encoding == "learned":
        wpe = ours["wpe.weight"].float()
    else:
        wpe = positional_encoding(config.block_size, config.d_model)
    state["transformer.wpe.weight"] = (wpe / s).to(ours["wte.weight"].dtype).contiguous()
    if dtype is not None:
        state = {k: v.to(dtype) for k, v in state.items()}
    # lm_head.weight is left out: tie_word_embeddings makes transformers share wte, as we do.
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf_config(config), indent=2) + "\n")
    return out


def _gpt_config_from_hf(hf: dict) -> GPTConfig:
    """Our GPTConfig for a GPT-2 config, refusing variants our network does not compute."""
    d_model = hf["n_embd"]
    checks = {
        "activation_function": (hf.get("activation_function", "gelu_new") in _TANH_GELU, "a tanh GELU"),
        "n_inner": (hf.get("n_inner") in (None, 4 * d_model), f"None or {4 * d_model}"),
        "scale_attn_weights": (hf.get("scale_attn_weights", True), "true"),
        "scale_attn_by_inverse_layer_idx": (not hf.get("scale_attn_by_inverse_layer_idx", False), "false"),
        "tie_word_embeddings": (hf.get("tie_word_embeddings", True), "true"),
        "add_cross_attention": (not hf.get("add_cross_attention", False), "false"),
    }
    bad = [f"{k}={hf.get(k)!r} (need {need})" for k, (ok, need) in checks.items() if not ok]
    if bad:
        raise ValueError("this GPT-2 variant does not fit our network: " + ", ".join(bad))
    return GPTConfig(
        vocab_size=hf["vocab_size"],
        block_size=hf["n_positions"],
        n_layer=hf["n_layer"],
        n_head=hf["n_head"],
        d_model=d_model,
        dropout=0.0,
        pos_encoding="learned",
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5),
    )


def _load_hf_weights(hf_dir: Path) -> dict[str, torch.Tensor]:
    """A GPT-2 state dict from safetensors (one file or shards), names without ``transformer.``."""
    single, index = hf_dir / "model.safetensors", hf_dir / "model.safetensors.index.json"
    if single.is_file():
        files = [single]
    elif index.is_file():
        files = [hf_dir / f for f in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    elif any(hf_dir.glob("*.bin")) or any(hf_dir.glob("*.pt")) or any(hf_dir.glob("*.pth")):
        raise FileNotFoundError(
            f"{hf_dir} holds only pickled PyTorch weights (e.g. pytorch_model.bin); safetensors is required "
            "(model.safetensors): this project never unpickles weights. Convert it once where you trust the file, "
            "e.g. GPT2LMHeadModel.from_pretrained(DIR).save_pretrained(DIR2), or download the safetensors version."
        )
    else:
        raise FileNotFoundError(f"{hf_dir}: no model.safetensors (a Hugging Face GPT-2 folder holds config.json + model.safetensors)")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        for k, v in load_file(str(f)).items():
            state[k.removeprefix("transformer.")] = v
    return state


def from_hf(hf_dir: Path, out: Path) -> Path:
    """Import a local GPT-2 checkpoint as a learned-position model folder that
    ``model.load_pretrained(out)`` loads."""
    config_path = hf_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} not found: a Hugging Face GPT-2 folder holds config.json + model.safetensors")
    hf = json.loads(config_path.read_text())
    if hf.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"{config_path}: model_type {hf.get('model_type')!r}, expected 'gpt2'")
    config = _gpt_config_from_hf(hf)
    state = _load_hf_weights(hf_dir)
    head = state.pop("lm_head.weight", None)
    if head is not None and not torch.equal(head, state["wte.weight"]):
        raise ValueError(f"{hf_dir}: lm_head.weight differs from wte.weight; our output head is tied to the embedding")

    ours = {}
    for our_name, hf_name, transpose in name_map(config.n_layer):
        if hf_name not in state:
            raise KeyError(f"{hf_dir}: weight {hf_name!r} missing")
        t = state.pop(hf_name)
        ours[our_name] = (t.t() if transpose else t).contiguous()
    ours["wpe.weight"] = state.pop("wpe.weight").contiguous()
    leftover = [k for k in state if not k.endswith(_HF_BUFFERS)]
    if leftover:
        raise ValueError(f"{hf_dir}: weights with no place in our network: {leftover[:5]}")

    out.mkdir(parents=True, exist_ok=True)
    config.to_json(out / "config.json")
    save_file(ours, str(out / "model.safetensors"))
    return out


def main(argv: list[str] | None = None) -> None:
    from . import WEIGHTS_DIR

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    way = ap.add_mutually_exclusive_group(required=True)
    way.add_argument("--to-hf", type=Path, metavar="DIR", help="write a GPT2LMHeadModel folder here")
    way.add_argument("--from-hf", type=Path, metavar="DIR", help="import this local GPT-2 folder")
    ap.add_argument("--model", type=Path, default=WEIGHTS_DIR, help="our model folder for --to-hf (default: the shipped one)")
    ap.add_argument("--out", type=Path, help="output model folder for --from-hf")
    ap.add_argument(
        "--dtype", choices=("float32", "float16", "bfloat16", "stored"), default="float32",
        help="dtype of the --to-hf weights (default float32; 'stored': as our folder stores them)",
    )
    args = ap.parse_args(argv)
    try:
        if args.to_hf:
            if args.model.is_file():  # a path to model.safetensors names its folder
                args.model = args.model.parent
            dtype = None if args.dtype == "stored" else getattr(torch, args.dtype)
            print(f"wrote {to_hf(args.model, args.to_hf, dtype)} (load it with GPT2LMHeadModel.from_pretrained)")
        else:
            if args.out is None:
                ap.error("--from-hf needs --out OUTDIR")
            print(f"wrote {from_hf(args.from_hf, args.out)} (load it with model.load_pretrained)")
    except (FileNotFoundError, KeyError, ValueError) as e:
        raise SystemExit(f"model.convert: {e}") from None


if __name__ == "__main__":
    main()
