"""Inside the model in the browser: one ONNX graph that takes the token ids AND the weights as
inputs and returns every stage of the forward pass as a named output, a second, small one for the
logit lens at one position (asked for when the learner picks a token), and the weights they run
on, 8-bit, in a file of their own.

The graphs' math is model/stages.py's functions, the Inside tab's own (``block_stages``, ``head_stages``,
``first_ranks_stages``, ``ffn_alone``, ``position_lens``, so ``layer_norm`` and ``gelu_tanh`` too),
traced by the exporter over plain tensors standing in for the model's modules: what the app shows
and what the browser shows are the same arithmetic by construction. Weights as inputs (docs/browser.md says why): the graph is a few
hundred kB whatever the weights, and the same file runs the trained model, the untrained start or
any weights of the same shape.

The weights file: every matrix a matmul reads (the embedding table E, which is also the output
head, and every Linear's weight) as int8 with one float32 scale per row (symmetric, ``round(w /
scale)``, scale = the row's max |w| / 127); everything else (LayerNorms, biases, the position
table) float32. ``weights.json`` says where each tensor lies in ``weights.bin``.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import torch

from .onnx_export import IR_VERSION, OPSET

__all__ = ["InsideGraph", "LensGraph", "STAGES", "HEAD_OUTPUTS", "PASS_EXTRAS", "LENS_OUTPUTS", "LENS_WEIGHTS", "weight_names",
           "export_inside", "export_lens", "write_weights", "read_weights", "quantize_rows", "dequantized_model", "built_graphs",
           "BROWSER_FILES", "write_browser_files"]

# LayerTrace's fields, in block_stages' order: output "layers.{i}.{name}".
STAGES = ("x_in", "ln1_mean", "ln1_std", "ln1_out", "q", "k", "v", "scores", "weights", "head_out", "concat", "attn_out",
          "x_mid", "ln2_mean", "ln2_std", "ln2_out", "fc", "gelu", "mlp_out", "x_out")
# head_stages' results, by ForwardPass's field names.
HEAD_OUTPUTS = ("lnf_mean", "lnf_std", "h", "top_ids", "top_logits", "top_probs", "logsumexp", "token_losses",
                "next_logits", "next_ranks")
# After the output's: the rank the lens after layer 0 gives each next token (first_ranks_stages,
# what the opening token's rule needs), and layer 0's FFN on each token's embedding row alone (ffn_alone).
PASS_EXTRAS = ("first_ranks", "ffn0_alone")
# The lens graph: position_lens' results, one position after every layer.
LENS_OUTPUTS = ("top_ids", "top_probs", "next_ranks", "next_probs")
LENS_WEIGHTS = ("wte.weight", "ln_f.weight", "ln_f.bias")
BLOCK_WEIGHTS = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                 "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                 "mlp.c_proj.weight", "mlp.c_proj.bias")
# Read by a matmul (E also by the embedding lookup): these go 8-bit, one scale per row.
QUANTIZED = ("wte.weight", "attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def weight_names(n_layer: int) -> list[str]:
    """The graph's weight inputs in order: the model's state_dict names, plus ``position_table``
    (model.position_table(): learned or sinusoidal, the graph does not care)."""
    blocks = [f"blocks.{i}.{name}" for i in range(n_layer) for name in BLOCK_WEIGHTS]
    return ["wte.weight", "position_table", "ln_f.weight", "ln_f.bias", *blocks]


def model_weights(model) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    out = {name: state[name] for name in weight_names(model.config.n_layer) if name != "position_table"}
    out["position_table"] = model.position_table()
    return {name: t.detach().float().cpu() for name, t in out.items()}


def _ln(weight: torch.Tensor, bias: torch.Tensor, eps: float) -> SimpleNamespace:
    return SimpleNamespace(weight=weight, bias=bias, eps=eps)


def _linear(weight: torch.Tensor, bias: torch.Tensor) -> SimpleNamespace:
    return SimpleNamespace(weight=weight, bias=bias)


class InsideGraph(torch.nn.Module):
    """(ids [T], *weights) -> every stage, as ``playground.inside.forward_pass`` computes them."""

    def __init__(self, n_layer: int, n_head: int, d_model: int, eps: float, scale_embedding: bool) -> None:
        super().__init__()
        self.n_layer, self.n_head, self.d_model, self.eps = n_layer, n_head, d_model, eps
        self.scale = math.sqrt(d_model) if scale_embedding else 1.0

    def forward(self, ids: torch.Tensor, weights: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        from model.stages import block_stages, ffn_alone, first_ranks_stages, head_stages

        w = dict(zip(weight_names(self.n_layer), weights))
        model = _head(w, self.eps)
        T = ids.shape[0]
        H, D = self.n_head, self.d_model // self.n_head
        tok = w["wte.weight"][ids] * self.scale
        pos = w["position_table"][:T]
        x = tok + pos
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        outputs: list[torch.Tensor] = [tok, pos, x]
        first: list[torch.Tensor] = []
        for i in range(self.n_layer):
            block = _block(w, i, self.eps)
            stages = block_stages(x, block, causal, H, D)
            x = stages[-1]
            outputs.extend(stages)
            if i == 0:
                first = [first_ranks_stages(x, model, ids), ffn_alone(tok, block)]
        outputs.extend(head_stages(x, model, ids))
        return (*outputs, *first)


def _head(w: dict[str, torch.Tensor], eps: float) -> SimpleNamespace:
    """The weights dressed as the modules model/stages.py reads by attribute (E, ln_f)."""
    return SimpleNamespace(wte=SimpleNamespace(weight=w["wte.weight"]), ln_f=_ln(w["ln_f.weight"], w["ln_f.bias"], eps))


def _block(w: dict[str, torch.Tensor], i: int, eps: float) -> SimpleNamespace:
    b = lambda name: w[f"blocks.{i}.{name}"]  # noqa: E731
    return SimpleNamespace(
        ln_1=_ln(b("ln_1.weight"), b("ln_1.bias"), eps), ln_2=_ln(b("ln_2.weight"), b("ln_2.bias"), eps),
        attn=SimpleNamespace(c_attn=_linear(b("attn.c_attn.weight"), b("attn.c_attn.bias")),
                             c_proj=_linear(b("attn.c_proj.weight"), b("attn.c_proj.bias"))),
        mlp=SimpleNamespace(c_fc=_linear(b("mlp.c_fc.weight"), b("mlp.c_fc.bias")),
                            c_proj=_linear(b("mlp.c_proj.weight"), b("mlp.c_proj.bias"))),
    )


class LensGraph(torch.nn.Module):
    """(x [L, C] the stream at one position after every layer, target [1], E, ln_f) -> the logit
    lens there, as ``model.stages.position_lens`` computes it."""

    def __init__(self, eps: float) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, target: torch.Tensor, weights: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        from model.stages import position_lens

        return position_lens(x, _head(dict(zip(LENS_WEIGHTS, weights)), self.eps), target)


def output_names(n_layer: int) -> list[str]:
    layers = [f"layers.{i}.{name}" for i in range(n_layer) for name in STAGES]
    return ["tok_emb", "pos_emb", "x0", *layers, *HEAD_OUTPUTS, *PASS_EXTRAS]


def _save(program: Any, path: Path) -> Path:
    proto = program.model_proto
    proto.ir_version = min(proto.ir_version, IR_VERSION)
    del proto.graph.value_info[:]  # the exporter's private dimension symbols
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(proto, str(path))
    return path


def export_inside(model, path: Path) -> Path:
    """The stage graph for models of ``model``'s shape, written to ``path`` (weights not included)."""
    cfg = model.config
    graph = InsideGraph(cfg.n_layer, cfg.n_head, cfg.d_model, cfg.layer_norm_eps, cfg.scale_embedding)
    weights = model_weights(model)
    names = weight_names(cfg.n_layer)
    ids = torch.tensor([5, 7, 11, 13, 17], dtype=torch.long)  # > 1 tokens: the exporter specialises sizes 0 and 1
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            graph, (ids, [weights[n] for n in names]), dynamo=True, external_data=False, opset_version=OPSET,
            input_names=["ids", *names], output_names=output_names(cfg.n_layer),
            dynamic_shapes=({0: torch.export.Dim("tokens", min=2, max=cfg.block_size)}, [None] * len(names)),
            optimize=True, verbose=False,
        )
    return _save(program, path)


def export_lens(model, path: Path) -> Path:
    """The lens graph for models of ``model``'s shape (x [n_layer, d_model], target [1], then
    LENS_WEIGHTS), written to ``path``."""
    cfg = model.config
    weights = model_weights(model)
    x = torch.randn(cfg.n_layer, cfg.d_model)
    target = torch.tensor([11], dtype=torch.long)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            LensGraph(cfg.layer_norm_eps), (x, target, [weights[n] for n in LENS_WEIGHTS]), dynamo=True,
            external_data=False, opset_version=OPSET, input_names=["x", "target", *LENS_WEIGHTS],
            output_names=list(LENS_OUTPUTS), optimize=True, verbose=False,
        )
    return _save(program, path)


# --- the weights file -----------------------------------------------------------------------------


def quantize_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 [R, K], float32 scales [R]): each row symmetric, scale = max |w| / 127 (1 for a zero row)."""
    w = np.asarray(w, dtype=np.float32)
    scale = np.abs(w).max(axis=1) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


@dataclass(frozen=True)
class TensorEntry:
    name: str
    shape: list[int]
    dtype: str  # "int8" (with per-row float32 scales at scales_offset) or "float32"
    offset: int  # bytes into weights.bin
    scales_offset: int | None = None


def _quantized(name: str) -> bool:
    return any(name.endswith(q) for q in QUANTIZED)


def write_weights(model, bin_path: Path, json_path: Path) -> dict[str, Any]:
    """``model``'s weights in the graph's input order: bin_path the bytes, json_path the index."""
    parts: list[bytes] = []
    entries: list[TensorEntry] = []
    at = 0

    def put(data: bytes) -> int:
        nonlocal at
        start = at
        pad = (-len(data)) % 4  # every float32 block 4-byte aligned, so JS reads it in place
        parts.append(data + b"\0" * pad)
        at += len(data) + pad
        return start

    for name, t in model_weights(model).items():
        a = t.numpy()
        if _quantized(name):
            q, scale = quantize_rows(a)
            offset = put(q.tobytes())
            entries.append(TensorEntry(name, list(a.shape), "int8", offset, put(scale.astype("<f4").tobytes())))
        else:
            entries.append(TensorEntry(name, list(a.shape), "float32", put(a.astype("<f4").tobytes())))
    bin_path.parent.mkdir(parents=True, exist_ok=True)
    bin_path.write_bytes(b"".join(parts))
    cfg = model.config
    index = {"n_layer": cfg.n_layer, "n_head": cfg.n_head, "d_model": cfg.d_model, "vocab_size": cfg.vocab_size,
             "block_size": cfg.block_size, "bytes": at, "tensors": [asdict(e) for e in entries]}
    json_path.write_text(json.dumps(index, indent=1))
    return index


def read_weights(bin_path: Path, json_path: Path) -> dict[str, np.ndarray]:
    """The float32 weights a weights file stands for (the int8 rows times their scales)."""
    data = bin_path.read_bytes()
    out = {}
    for e in json.loads(json_path.read_text())["tensors"]:
        n = int(np.prod(e["shape"]))
        if e["dtype"] == "int8":
            q = np.frombuffer(data, np.int8, n, e["offset"]).reshape(e["shape"]).astype(np.float32)
            scale = np.frombuffer(data, "<f4", e["shape"][0], e["scales_offset"])
            out[e["name"]] = q * scale[:, None]
        else:
            out[e["name"]] = np.frombuffer(data, "<f4", n, e["offset"]).reshape(e["shape"]).copy()
    return out


def dequantized_model(model, weights: dict[str, np.ndarray]):
    """A copy of ``model`` holding ``weights`` (read_weights'), for PyTorch to run on exactly what
    the browser runs on."""
    import copy

    clone = copy.deepcopy(model)
    with torch.no_grad():
        state = clone.state_dict()
        for name, a in weights.items():
            if name == "position_table":
                table = clone.wpe.weight if clone.config.pos_encoding == "learned" else clone.pe
                table.copy_(torch.from_numpy(a))
            else:
                state[name].copy_(torch.from_numpy(a))
    return clone


# --- the graph, built once per model shape and version of its code --------------------------------

GRAPH_DIR = "inside"  # under artifacts/


def graph_key(model) -> str:
    """What the graph depends on: the model's shape (not its weights) and the code it is traced from."""
    import hashlib

    from model import stages

    h = hashlib.sha256(json.dumps(asdict(model.config), sort_keys=True).encode())
    for source in (Path(stages.__file__), Path(__file__)):
        h.update(source.read_bytes())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def built_graphs(model, out_dir: Path | None = None) -> tuple[Path, Path]:
    """(the stage graph, the lens graph) for ``model``'s shape under ``out_dir`` (default
    artifacts/)/inside/, exported when missing (10 s on a 2-core machine, 2026-12-02), each under
    a temporary name and renamed; the graphs of earlier code or shapes removed."""
    import os

    from .naming import ARTIFACTS_DIR

    folder = (Path(out_dir) if out_dir is not None else ARTIFACTS_DIR) / GRAPH_DIR
    key = graph_key(model)
    paths = []
    for kind, export in (("graph", export_inside), ("lens", export_lens)):
        path = folder / f"{kind}-{key}.onnx"
        if not path.is_file():
            tmp = path.with_suffix(f".{os.getpid()}.tmp.onnx")  # the app's child and a static build may race
            export(model, tmp)
            os.replace(tmp, path)
            for old in folder.glob(f"{kind}-*.onnx"):
                if old != path and not old.name.endswith(".tmp.onnx"):
                    old.unlink()
        paths.append(path)
    return paths[0], paths[1]


def built_graph(model, out_dir: Path | None = None) -> Path:
    """The stage graph of :func:`built_graphs`."""
    return built_graphs(model, out_dir)[0]


# What a page loads to run Inside the model (the static edition's inside/ folder, and the app's
# for its "Run on: this browser"), by the names both give them.
BROWSER_FILES = ("graph.onnx", "lens.onnx", "weights.bin", "weights.json")


def write_browser_files(model, folder: Path, graphs_dir: Path | None = None) -> dict[str, Path]:
    """``folder``/graph.onnx, lens.onnx, weights.bin and weights.json for ``model``: the graphs of
    :func:`built_graphs` (``graphs_dir``: where they are kept) copied, the weights written; each
    file under a temporary name and renamed, so a server reading the folder meanwhile never serves
    half a file. Returns {name: path}."""
    import os
    import shutil

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    graph, lens = built_graphs(model, graphs_dir)
    tmp = {name: folder / f".{name}.{os.getpid()}.tmp" for name in BROWSER_FILES}
    shutil.copyfile(graph, tmp["graph.onnx"])
    shutil.copyfile(lens, tmp["lens.onnx"])
    write_weights(model, tmp["weights.bin"], tmp["weights.json"])
    for name in BROWSER_FILES:  # the index last (BROWSER_FILES' order): a reader that finds it finds the rest
        os.replace(tmp[name], folder / name)
    return {name: folder / name for name in BROWSER_FILES}


def main(argv: list[str] | None = None) -> None:
    """``python -m export.inside_graph DIR [--weights MODEL_DIR]``: Inside the model's browser files
    for the shipped model (or MODEL_DIR's) into DIR (what the app serves; a first start builds
    the graphs, seconds)."""
    import argparse

    from model import load_pretrained

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--weights", type=Path, default=None, help="a model folder (config.json + model.safetensors)")
    args = ap.parse_args(argv)
    files = write_browser_files(load_pretrained(args.weights).eval(), args.folder)
    print(f"wrote {', '.join(str(p) for p in files.values())}")


if __name__ == "__main__":
    main()
