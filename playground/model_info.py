"""Model tab: the architecture and its parameter counts, the training curves, the ONNX graph
(inputs, outputs, operator counts), the downloadable files and a snippet for each client.

Plain functions of a model / a file path; no Gradio.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from model import WEIGHTS_DIR, GPT

__all__ = [
    "TRAINING_LOG",
    "architecture_rows",
    "architecture_markdown",
    "parameter_counts",
    "load_training_log",
    "training_figure",
    "training_note",
    "weight_bytes",
    "size_note",
    "onnx_summary",
    "onnx_markdown",
    "client_snippets",
    "architecture_parts",
]

TRAINING_LOG = WEIGHTS_DIR / "training_log.json"


def parameter_counts(model: GPT) -> list[tuple[str, int]]:
    """Parameters per part, in the order data flows through the network. The output head is tied
    to the token embedding (GPT-2's weight tying) and so adds none of its own."""
    c = model.config
    n = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    rows: list[tuple[str, int]] = [(f"token embedding wte [{c.vocab_size} × {c.d_model}]", model.wte.weight.numel())]
    if c.pos_encoding == "learned":
        rows.append((f"learned positions wpe [{c.block_size} × {c.d_model}]", model.wpe.weight.numel()))
    else:
        rows.append((f"sinusoidal positions [{c.block_size} × {c.d_model}] (a fixed buffer)", 0))
    blocks = model.blocks
    rows += [
        (f"{c.n_layer} × LayerNorm before attention", sum(n(b.ln_1) for b in blocks)),
        (f"{c.n_layer} × attention W_Q, W_K, W_V [{c.d_model} × {3 * c.d_model}]", sum(n(b.attn.c_attn) for b in blocks)),
        (f"{c.n_layer} × attention output W_O [{c.d_model} × {c.d_model}]", sum(n(b.attn.c_proj) for b in blocks)),
        (f"{c.n_layer} × LayerNorm before the MLP", sum(n(b.ln_2) for b in blocks)),
        (f"{c.n_layer} × MLP up [{c.d_model} × {4 * c.d_model}]", sum(n(b.mlp.c_fc) for b in blocks)),
        (f"{c.n_layer} × MLP down [{4 * c.d_model} × {c.d_model}]", sum(n(b.mlp.c_proj) for b in blocks)),
        ("final LayerNorm", n(model.ln_f)),
        (f"output head [{c.d_model} × {c.vocab_size}] (tied to wte)", 0),
    ]
    return rows


def architecture_rows(model: GPT) -> list[list[Any]]:
    """[part, parameters, share of the total] rows, with a total row last."""
    rows = parameter_counts(model)
    total = model.num_parameters()
    def share(count: int) -> str:
        return "–" if count == 0 else f"{count / total:.1%}" if count >= total / 1000 else "<0.1%"

    out = [[name, f"{count:,}", share(count)] for name, count in rows]
    out.append(["total", f"{total:,}", "100%"])
    return out


def _m(count: int) -> str:
    return f"{count / 1e6:.2f} M" if count >= 10_000 else f"{count:,}"


def architecture_parts(model: GPT) -> list[dict[str, Any]]:
    """The network as a picture's parts, top to bottom as the data flows: each box a ``title``, the
    ``shape`` of what it holds or outputs, its parameters as shown (``count``: "0.79 M", "no
    parameters", or None where no count belongs) and its ``kind`` (its colour); the repeated block a
    ``title`` and its ``boxes``. Both editions draw these with web/views/model.js."""
    c = model.config
    counts = [count for _, count in parameter_counts(model)]
    wte, pos, ln1, qkv, proj, ln2, up, down, lnf, _ = counts
    per_block = (ln1 + qkv + proj + ln2 + up + down) // c.n_layer
    positions = "learned positions wpe" if c.pos_encoding == "learned" else "sinusoidal positions (fixed)"

    def box(title: str, shape: str, params: int | None = None, kind: str = "") -> dict[str, Any]:
        count = None if params is None else _m(params) if params else "no parameters"
        return {"title": title, "shape": shape, "params": params, "count": count, "kind": kind}

    block = {
        "title": f"× {c.n_layer} blocks, {_m(per_block)} parameters each",
        "boxes": [
            box("LayerNorm", f"[T × {c.d_model}]", ln1 // c.n_layer),
            box(f"masked self-attention, {c.n_head} heads × {c.head_dim}",
                f"W_Q, W_K, W_V [{c.d_model} × {3 * c.d_model}] · W_O [{c.d_model} × {c.d_model}]", (qkv + proj) // c.n_layer, "attn"),
            box("+ residual", f"[T × {c.d_model}]", None, "add"),
            box("LayerNorm", f"[T × {c.d_model}]", ln2 // c.n_layer),
            box("MLP, GELU", f"[{c.d_model} → {4 * c.d_model} → {c.d_model}]", (up + down) // c.n_layer, "mlp"),
            box("+ residual", f"[T × {c.d_model}]", None, "add"),
        ],
    }
    return [
        box("token ids", "[T]", None, "io"),
        box(f"token embedding wte + {positions}", f"[{c.vocab_size:,} × {c.d_model}] + [{c.block_size} × {c.d_model}] → [T × {c.d_model}]",
            wte + pos, "emb"),
        block,
        box("final LayerNorm", f"[T × {c.d_model}]", lnf),
        box("output head: wte transposed (tied)", f"[{c.d_model} × {c.vocab_size:,}] → logits [T × {c.vocab_size:,}]", 0, "emb"),
        box("softmax", f"next-token probabilities [{c.vocab_size:,}]", None, "io"),
    ]


def architecture_markdown(model: GPT) -> str:
    c = model.config
    total = model.num_parameters()
    return (
        f"A decoder-only transformer laid out like GPT-2: **{c.n_layer} layers**, **{c.n_head} heads** of "
        f"{c.head_dim} dimensions, **d_model = {c.d_model}**, MLP width {4 * c.d_model}, a context of "
        f"**{c.block_size} tokens**, GPT-2's vocabulary of **{c.vocab_size:,}** tokens, "
        f"**{c.pos_encoding}** positional encoding. **{total / 1e6:.2f} M parameters** "
        f"({model.num_parameters(non_embedding=True) / 1e6:.2f} M outside the embedding).\n\n"
        "Data flow: token ids → token embedding + positional encoding → "
        f"{c.n_layer} × [LayerNorm → masked multi-head self-attention → + residual → LayerNorm → "
        "MLP (GELU) → + residual] → final LayerNorm → output head (the embedding matrix, transposed) → "
        "softmax over the vocabulary."
    )


def load_training_log(path: str | Path = TRAINING_LOG) -> list[dict[str, Any]]:
    """The evaluations written by ``python -m model.train`` (empty if the file is missing)."""
    path = Path(path)
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else []


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def training_figure(log: list[dict[str, Any]]) -> go.Figure:
    """Train and validation loss (nats per token) against training tokens seen."""
    fig = go.Figure()
    whole = _whole_set_points(log)  # a line joins only points scored on the same windows
    sample_n, whole_n = _window_counts(log, whole)
    traces = [("train_loss", train_label(log), "#6366f1"),
              ("val_loss", f"validation, a sample of {sample_n} windows" if sample_n else "validation loss", "#e4572e"),
              ("val_loss_all", f"validation, all {whole_n} windows (the result)" if whole_n else "validation, every window (the result)", "#16a34a")]

    def points(key: str, keep: Any = lambda e: True) -> list[tuple[float, float]]:
        return [(e["tokens"], e[key]) for e in log if _finite(e.get(key)) and _finite(e.get("tokens")) and keep(e)]

    series = {
        "train_loss": points("train_loss"),
        "val_loss": points("val_loss", lambda e: id(e) not in whole),
        "val_loss_all": sorted(points("val_loss_all") + points("val_loss", lambda e: id(e) in whole)),
    }
    for key, name, color in traces:
        xy = series[key]
        if xy:
            fig.add_scatter(
                x=[p[0] for p in xy],
                y=[p[1] for p in xy],
                mode="lines+markers",
                name=name,
                line={"color": color, "width": 2},
                marker={"color": color, "size": 11 if key == "val_loss_all" else 6},
                hovertemplate="%{x:,} tokens<br>" + name + " %{y:.3f}<extra></extra>",
            )
    # The chart tells its own story: the line's last sample point and the final score on the whole
    # split, each named where it is drawn (a learner saw the line end near 5.4 beside a "result" of
    # 4.42 and found why only in the paragraph below).
    if series["val_loss_all"] and series["val_loss"]:
        x, y = series["val_loss_all"][-1]
        fig.add_annotation(
            x=x, y=y, ax=-120, ay=4, xanchor="right",  # left of the point, between the two lines showarrow=True, arrowcolor="#16a34a", font={"color": "#166534", "size": 12},
            text=f"final: <b>{y:.2f}</b> on {f'all {whole_n}' if whole_n else 'every'} window{'s' if whole_n != 1 else ''}<br>of the held-out text (the result)",
            bgcolor="rgba(255,255,255,0.85)", name="final-evaluation",
        )
        sx, sy = series["val_loss"][-1]
        fig.add_annotation(
            x=sx, y=sy, ax=-20, ay=-45, xanchor="right",  # above the line's end showarrow=True, arrowcolor="#e4572e", font={"color": "#9a3412", "size": 12},
            text=f"{sy:.2f} on a sample of {sample_n or 'the'} windows", bgcolor="rgba(255,255,255,0.85)", name="last-sample",
        )
    if not fig.data:
        fig.add_annotation(text="No training log shipped with these weights", showarrow=False, font={"size": 15})
    fig.update_layout(
        title="Training curves",
        xaxis={"title": "training tokens seen"},
        yaxis={"title": "cross-entropy loss (nats / token)"},
        template="plotly_white",
        height=380,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
    )
    return fig


def _whole_set_points(log: list[dict[str, Any]]) -> set[int]:
    """The entries (by ``id``) whose ``val_loss`` was scored on more windows than the others
    (``val_windows``): an older run's log scored a sample at each evaluation and every window at
    the last step in the same field, and a line through both would draw a drop that is only the
    change of sample."""
    scored = [e for e in log if _finite(e.get("val_loss")) and isinstance(e.get("val_windows"), int)]
    counts = Counter(e["val_windows"] for e in scored)
    if len(counts) < 2:
        return set()
    sample = min(counts, key=lambda n: (-counts[n], n))  # the most common count: the sample
    return {id(e) for e in scored if e["val_windows"] > sample}


def _window_counts(log: list[dict[str, Any]], whole: set[int]) -> tuple[int | None, int | None]:
    """How many held-out windows the validation line's points and the final points were scored on
    (``val_windows``; None where the log does not say)."""
    def count(keep: Any) -> int | None:
        ns = [e["val_windows"] for e in log if isinstance(e.get("val_windows"), int) and _finite(e.get("val_loss")) and keep(e)]
        return ns[-1] if ns else None

    return count(lambda e: id(e) not in whole), count(lambda e: id(e) in whole)


def train_label(log: list[dict[str, Any]]) -> str:
    """The training curve's name, saying what its softmax ran over when the log records it
    (``train_softmax_tokens``): a loss over the training text's tokens only reads lower than the
    validation loss over all of them, a gap that is not overfitting."""
    sizes = [e["train_softmax_tokens"] for e in log if isinstance(e.get("train_softmax_tokens"), int)]
    if not sizes or min(sizes) == max(sizes):
        return "train loss" if not sizes else f"train loss (softmax over {sizes[0]:,} tokens)"
    until = max(e["step"] for e in log if e.get("train_softmax_tokens") == min(sizes))
    return f"train loss (softmax over the {min(sizes):,} training tokens until step {until:,}, then {max(sizes):,})"


def training_note(log: list[dict[str, Any]], *, shipped: bool = False) -> str:
    """Why the last validation point can sit well below the others: ``model.train`` scores a
    sample of the held-out windows at each evaluation and all of them at the last step (the
    log says how many, ``val_windows``). ``shipped``: the shipped run's own reasons too."""
    points = [e for e in log if _finite(e.get("val_loss"))]
    if len(points) < 2:
        return ""
    last, before = points[-1], points[-2]
    n_last, n_before = last.get("val_windows"), before.get("val_windows")
    drop = before["val_loss"] - last["val_loss"]
    if not (isinstance(n_last, int) and isinstance(n_before, int) and n_last > n_before):
        return ""
    note = (
        f"The green point ({last['val_loss']:.2f}) is scored on all {n_last} windows of the held-out text, the "
        f"validation line on a sample of {n_before}: the line's points are comparable with each other, the "
        f"green point is the model's real held-out loss"
    )
    if shipped and drop > 0.3:
        note += (
            ". In the shipped run the sample was the first 96 windows, all from *Pericles*, harder than the "
            "rest (4.72 on those 96 after training, 4.42 on all 255), and its last 10 % of steps trained the "
            "softmax over the whole vocabulary instead of only the tokens seen in training, which moves "
            "probability away from the 31,038 never-seen ids (docs/training.md)"
        )
    return note + "."


def weight_bytes(path: str | Path) -> dict[str, tuple[int, int]]:
    """{dtype name: (number of values, bytes)} over the file's stored tensors (initializers)."""
    import onnx
    from onnx import helper

    out: dict[str, tuple[int, int]] = {}
    for t in onnx.load(str(path)).graph.initializer:
        n = math.prod(t.dims)
        dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
        count, size = out.get(dtype.name, (0, 0))
        out[dtype.name] = (count + n, size + n * dtype.itemsize)
    return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))


def size_note(weights: dict[str, tuple[int, int]], size_mb: float) -> str:
    """Where a file's megabytes go: one line per kind of number stored (a quarter of fp32's size
    for an 8-bit file: one byte per weight instead of four; a little float32 stays)."""
    parts = []
    for dtype, (count, size) in weights.items():
        if size < 10_000:
            continue
        per = {"float32": "4 bytes", "float16": "2 bytes", "int8": "1 byte", "uint8": "1 byte"}.get(dtype, f"{size // max(count, 1)} bytes")
        parts.append(f"{count / 1e6:.2f} M {dtype} numbers ({per} each: {size / 1e6:.1f} MB)")
    if not parts:
        return ""
    text = f"Where its {size_mb:.1f} MB go: " + " + ".join(parts)
    if "int8" in weights or "uint8" in weights:
        text += (
            ". The weight matrices are stored as 8-bit integers with one float32 scale per output channel, "
            "so the file is about a quarter of the fp32 one; the small tensors (LayerNorms, biases, the "
            "scales, a learned position table) stay float32"
        )
    return text + "."


def onnx_summary(path: str | Path) -> dict[str, Any]:
    """The graph's inputs, outputs and operator counts (``export.inspect_onnx``)."""
    from export import inspect_onnx

    summary = dict(inspect_onnx(path))
    summary["weight_bytes"] = weight_bytes(path)
    return summary


def _shape(shape: list[int | str]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def onnx_markdown(summary: dict[str, Any]) -> str:
    """Inputs and outputs as tables (per-layer caches folded), then the file's vital numbers."""

    def table(rows: list[dict[str, Any]]) -> str:
        lines = ["| name | type | shape |", "|---|---|---|"]
        if len(rows) > 8:  # the per-layer key/value caches: the first and last, the rest counted
            shown = rows[:3] + [None] + rows[-2:]
        else:
            shown = rows
        for r in shown:
            if r is None:
                lines.append(f"| … {len(rows) - 5} more like these … | | |")
            else:
                lines.append(f"| `{r['name']}` | {r['dtype']} | {_shape(r['shape'])} |")
        return "\n".join(lines)

    meta = summary.get("metadata", {})
    quant = meta.get("quantization", "")
    trained = (
        f", weights from training step {meta['training_step']} (validation loss {meta['val_loss']})"
        if meta.get("training_step", "unknown") != "unknown"
        else ""
    )
    return (
        f"**{Path(summary['path']).name}**: {summary['size_mb']:.1f} MB, opset {summary['opset']}, "
        f"{summary['n_nodes']:,} nodes, {summary['n_weights']:,} weights in {summary['n_initializers']} tensors"
        + (f", quantization: {quant}" if quant and quant != "none" else "")
        + trained
        + (f"\n\n{size_note(summary['weight_bytes'], summary['size_mb'])}" if summary.get("weight_bytes") else "")
        + f"\n\n**Inputs** ({len(summary['inputs'])})\n\n{table(summary['inputs'])}\n\n"
        f"**Outputs** ({len(summary['outputs'])})\n\n{table(summary['outputs'])}"
    )


def operators_figure(summary: dict[str, Any], top: int = 20) -> go.Figure:
    """Bar chart of the graph's most frequent operators (node counts)."""
    ops = list(summary["op_counts"].items())[:top][::-1]
    fig = go.Figure(
        go.Bar(
            x=[n for _, n in ops],
            y=[op for op, _ in ops],
            orientation="h",
            marker_color="#6366f1",
            text=[str(n) for _, n in ops],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x} nodes<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Operators: {len(summary['op_counts'])} kinds, {summary['n_nodes']:,} nodes",
        xaxis={"title": "nodes"},
        yaxis={"automargin": True},
        template="plotly_white",
        height=max(300, 24 * len(ops) + 100),
        margin={"l": 10, "r": 30, "t": 50, "b": 40},
    )
    return fig


def client_snippets() -> dict[str, tuple[str, str]]:
    """{client: (language, code)}: greedy generation from the downloaded folder (the zip unpacks to
    ``gpt-playground/``) with onnxruntime, Optimum, transformers.js and transformers, no project
    code: the same snippets as the folder's model card."""
    from export.hub import client_snippets as snippets

    return snippets()
