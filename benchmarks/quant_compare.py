"""python -m benchmarks.quant_compare: the 8-bit formats side by side, natively and in onnxruntime-web.

Builds each candidate from artifacts/hub/onnx/model.onnx, then measures, in one run:

- the file's size against fp32's;
- the validation loss against fp32's (windows spread over the split; ``--loss-windows 0``: all);
- greedy tokens/s with native onnxruntime on 1 thread (CPU time, so a busy machine does not skew
  it; alternating repetitions, medians);
- greedy tokens per CPU-second with onnxruntime-web's WebAssembly build under Node.js, 1 thread
  (what a browser page runs; tests/clients/ort_web_greedy.mjs, needs ``npm ci`` in tests/);
- whether the web ids equal the native ids of the same file, and the fp32 file's.

Candidates: the two shipped formats (int8 weights, the tied table stored once; model_int8.onnx:
activations quantized per token, MatMulInteger; model_quantized.onnx: weight-only, folded into
float weights at load), the integer one with DynamicQuantizeLinear (activations per tensor),
weight-only DequantizeLinear + MatMul, and MatMulNBits 8-bit with accuracy_level 4 (onnxruntime's
contrib op, the project's first format; the table stays fp32 for the embedding).

``--shipped``: the three files of artifacts/hub/onnx/ as they are, plus transformers.js under
Node.js and Optimum (in the client tests' venv, when made) on the folder (wall-clock tokens/s per
file), each speed also as a ratio to fp32's: the numbers of README.md's clients table, from one run.

``--precision``: the Text generation tab's two precisions, model.onnx and model_int8.onnx: tokens
per CPU-second, and how far their greedy texts agree (tokens before the first different one, the
most likely token over the same contexts, the largest logit difference, fp32's top-two gap where
they differ) on windows of the validation split.

``--real-text``: both 8-bit files against fp32 over windows of the validation split itself (real
text, not a model's own greedy text, whose confident continuations hide near ties): the most likely
token the same at every position of each window, the largest logit difference, fp32's top-two gap
where they differ.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from export import ensure_onnx
from export.metadata import read_metadata, set_metadata
from export.naming import ROOT
from export.quantize import folded_matmul, quantize_int8
from export.validate import onnx_loss
from runtime.engine import Engine
from runtime.generate import generate
from runtime.params import SamplingParams


def per_tensor_matmul(x: str, w_q: str, w_scale: str, out: str) -> list[onnx.NodeProto]:
    """DynamicQuantizeLinear (uint8, one scale and zero point per tensor) + MatMulInteger."""
    return [
        helper.make_node("DynamicQuantizeLinear", [x], [f"{out}.x_q", f"{out}.x_scale", f"{out}.x_zero"]),
        helper.make_node("MatMulInteger", [f"{out}.x_q", w_q, f"{out}.x_zero"], [f"{out}.int32"]),
        helper.make_node("Cast", [f"{out}.int32"], [f"{out}.sum"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [f"{out}.x_scale", w_scale], [f"{out}.scale"]),
        helper.make_node("Mul", [f"{out}.sum", f"{out}.scale"], [out]),
    ]


def dequantize_matmul(x: str, w_q: str, w_scale: str, out: str) -> list[onnx.NodeProto]:
    """Weight-only: DequantizeLinear(W_q, per-column scale) + a float MatMul."""
    return [
        helper.make_node("DequantizeLinear", [w_q, w_scale], [f"{out}.w"], axis=1),
        helper.make_node("MatMul", [x, f"{out}.w"], [out]),
    ]


def matmul_nbits(fp32: Path, out: Path, metadata: dict[str, str]) -> Path:
    """The previous format: every MatMul (the head untied from the embedding's fp32 table) as
    8-bit MatMulNBits, blocks of 256 inputs, accuracy_level 4 (int8 activations natively)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    finally:  # the module configures the root logger on import: undo it
        root.handlers[:] = handlers
        root.setLevel(level)
    proto = onnx.load(str(fp32))
    inits = {t.name: t for t in proto.graph.initializer}
    producers = {o: n for n in proto.graph.node for o in n.output}
    for node in proto.graph.node:  # MatMul(x, Transpose(table)) -> MatMul(x, table^T)
        src = producers.get(node.input[1]) if node.op_type == "MatMul" else None
        if src is not None and src.op_type == "Transpose" and src.input[0] in inits:
            table = numpy_helper.to_array(inits[src.input[0]])
            proto.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(table.T), f"{src.input[0]}.T"))
            node.input[1] = f"{src.input[0]}.T"
    used = {i for n in proto.graph.node for i in n.input}
    for n in [n for n in proto.graph.node if n.op_type == "Transpose" and not set(n.output) & used]:
        proto.graph.node.remove(n)
    quantizer = MatMulNBitsQuantizer(proto, bits=8, block_size=256, is_symmetric=True, accuracy_level=4, op_types_to_quantize=("MatMul",))
    logging.getLogger(quantizer.__module__).setLevel(logging.WARNING)
    quantizer.process()
    result = quantizer.model.model
    result.ir_version = proto.ir_version
    set_metadata(result, metadata)
    onnx.save_model(result, str(out))
    return out


CANDIDATES = {
    "per-token MatMulInteger (model_int8.onnx)": quantize_int8,
    "DynamicQuantizeLinear + MatMulInteger (per tensor)": lambda src, dst, meta: quantize_int8(src, dst, meta, per_tensor_matmul),
    "DequantizeLinear + MatMul (weight-only)": lambda src, dst, meta: quantize_int8(src, dst, meta, dequantize_matmul),
    "Cast + Mul folded at load (weight-only, model_quantized.onnx)": lambda src, dst, meta: quantize_int8(src, dst, meta, folded_matmul),
    "MatMulNBits 8-bit, accuracy_level 4 (first format)": matmul_nbits,
}


def native_rates(paths: dict[str, Path], prompt: list[int], tokens: int, reps: int) -> tuple[dict[str, float], dict[str, list[int]]]:
    """Greedy tokens per CPU-second on 1 thread (median of alternating reps), and the ids."""
    engines = {name: Engine.load(path, provider="cpu", threads=1) for name, path in paths.items()}
    times: dict[str, list[float]] = {name: [] for name in engines}
    ids = {}
    for engine in engines.values():
        generate(engine, prompt, SamplingParams(4, stop_at_eot=False))
    for _ in range(reps):
        for name, engine in engines.items():
            start = time.process_time()
            ids[name] = generate(engine, prompt, SamplingParams(tokens, stop_at_eot=False))
            times[name].append(time.process_time() - start)
    return {name: tokens / statistics.median(t) for name, t in times.items()}, ids


def web_rates(paths: dict[str, Path], prompt: list[int], tokens: int, reps: int) -> dict[str, tuple[float, list[int]]] | None:
    """onnxruntime-web (WebAssembly, 1 thread) under Node.js: (tokens per CPU-second, ids) per
    file, alternating repetitions, medians."""
    script = ROOT / "tests" / "clients" / "ort_web_greedy.mjs"
    if not (ROOT / "tests" / "node_modules" / "onnxruntime-web").is_dir() or shutil.which("node") is None:
        return None
    out = subprocess.run(["node", str(script), str(tokens), json.dumps(prompt), *map(str, paths.values()), "--reps", str(reps)],
                         cwd=ROOT, capture_output=True, text=True, timeout=1800, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return {name: (report[str(p)]["tokens_per_cpu_s"], report[str(p)]["ids"]) for name, p in paths.items()}


def agreement(paths: dict[str, Path], prompts: list[list[int]], tokens: int) -> dict[str, tuple[int, float]] | None:
    """Native onnxruntime against onnxruntime-web on many prompts: (prompts whose greedy ids agree
    for all ``tokens``, share of tokens generated before the first disagreement) per file."""
    script = ROOT / "tests" / "clients" / "ort_web_greedy.mjs"
    if not (ROOT / "tests" / "node_modules" / "onnxruntime-web").is_dir() or shutil.which("node") is None:
        return None
    out = subprocess.run(["node", str(script), str(tokens), json.dumps(prompts), *map(str, paths.values())],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600, check=True)
    web = json.loads(out.stdout.strip().splitlines()[-1])
    result = {}
    for name, path in paths.items():
        engine = Engine.load(path, provider="cpu")
        agree = [next((i for i, (a, b) in enumerate(zip(generate(engine, p, SamplingParams(tokens, stop_at_eot=False)), w)) if a != b), tokens)
                 for p, w in zip(prompts, web[str(path)]["ids"])]
        result[name] = (sum(a == tokens for a in agree), sum(agree) / (tokens * len(prompts)))
    return result


@dataclass
class PrecisionAgreement:
    """The 8-bit file against fp32 on the same prompts, as the Text generation tab's two
    precisions generate: greedy texts side by side, and both files read over fp32's greedy text."""

    prompts: int
    tokens: int
    first_divergence: list[int]  # per prompt: greedy tokens equal before the first different one (``tokens``: none)
    top1_agree: int  # positions of fp32's greedy texts where both files' most likely token is the same
    positions: int
    max_logit_diff: float  # the largest |logit_int8 - logit_fp32| over every position and token
    tie_gaps: list[float]  # fp32's gap between its two most likely logits where the files' top-1 differ

    def rows(self) -> list[tuple[str, str]]:
        same = sum(d == self.tokens for d in self.first_divergence)
        return [
            (f"prompts whose {self.tokens} greedy tokens are all the same", f"{same} of {self.prompts}"),
            ("greedy tokens the same before the first different one (median, min)",
             f"{statistics.median(self.first_divergence):.0f}, {min(self.first_divergence)}"),
            ("most likely token the same, over fp32's greedy texts", f"{100 * self.top1_agree / self.positions:.2f} % of {self.positions} positions"),
            ("largest logit difference", f"{self.max_logit_diff:.3f}"),
            ("fp32's gap between its top two logits where they differ (max)",
             f"{max(self.tie_gaps):.3f}" if self.tie_gaps else "n/a (never differ)"),
        ]


def precision_agreement(fp32: Path, int8: Path, prompts: list[list[int]], tokens: int) -> PrecisionAgreement:
    """Greedy ``tokens`` after each prompt with each file (the decoding loop the app runs), then
    one pass of each file over fp32's whole greedy text (prompt + tokens) comparing the logits at
    every generated position."""
    engines = [Engine.load(path, provider="cpu", threads=2) for path in (fp32, int8)]
    params = SamplingParams(tokens, stop_at_eot=False)
    first, agree, positions, worst, gaps = [], 0, 0, 0.0, []
    for prompt in prompts:
        ref, other = (generate(e, prompt, params) for e in engines)
        first.append(next((i for i, (a, b) in enumerate(zip(ref, other)) if a != b), tokens))
        text = (prompt + ref)[-engines[0].block_size :]
        start = len(text) - len(ref) - 1  # the logits that chose the first generated token
        ids = np.asarray([text], dtype=np.int64)
        a, b = (e.run(ids, e.empty_cache(1))[0][0, start:-1].astype(np.float64) for e in engines)
        top_a, top_b = a.argmax(axis=1), b.argmax(axis=1)
        agree += int((top_a == top_b).sum())
        positions += len(top_a)
        worst = max(worst, float(np.abs(a - b).max()))
        two = np.sort(a, axis=1)[:, -2:]
        gaps += (two[:, 1] - two[:, 0])[top_a != top_b].tolist()
    return PrecisionAgreement(len(prompts), tokens, first, agree, positions, worst, gaps)


def precision_report(fp32: Path, int8: Path, prompts: int, tokens: int, reps: int, val: Path) -> str:
    """The Text generation tab's two precisions: tokens per CPU-second and the agreement, a
    Markdown table (docs/export.md, "Precision on the page")."""
    from model import get_tokenizer

    if not val.is_file():
        raise SystemExit(f"{val} is missing: `python -m model.data` prepares it")
    data = np.fromfile(val, dtype=np.uint16)
    starts = np.random.default_rng(0).integers(0, len(data) - 24, prompts)
    texts = [data[s : s + 24].astype(int).tolist() for s in starts]
    rates, _ = native_rates({"full": fp32, "8-bit": int8}, get_tokenizer().encode("ROMEO:"), 128, reps)
    result = precision_agreement(fp32, int8, texts, tokens)
    lines = [
        f"{len(texts)} prompts (24-token windows of the validation split), {tokens} greedy tokens each; speed: 128 "
        f"greedy tokens after 'ROMEO:', 1 thread, CPU time, {reps} alternating repetitions, medians",
        "",
        "| | |",
        "|---|---|",
        f"| full precision (`{fp32.name}`), tokens per CPU-second | {rates['full']:.0f} |",
        f"| 8 bits (`{int8.name}`), tokens per CPU-second | {rates['8-bit']:.0f} ({rates['8-bit'] / rates['full']:.2f}× full) |",
    ]
    lines += [f"| {name} | {value} |" for name, value in result.rows()]
    return "\n".join(lines)


def real_text_agreement(fp32: Path, other: Path, windows: list[list[int]]) -> tuple[int, int, float, list[float]]:
    """One pass of each file over every window: (positions whose most likely token is fp32's,
    positions, the largest |logit - fp32's logit|, fp32's top-two gap where the top tokens differ)."""
    engines = [Engine.load(path, provider="cpu", threads=2) for path in (fp32, other)]
    agree, positions, worst, gaps = 0, 0, 0.0, []
    for window in windows:
        ids = np.asarray([window], dtype=np.int64)
        a, b = (e.run(ids, e.empty_cache(1))[0][0].astype(np.float64) for e in engines)
        top_a, top_b = a.argmax(axis=1), b.argmax(axis=1)
        agree += int((top_a == top_b).sum())
        positions += len(top_a)
        worst = max(worst, float(np.abs(a - b).max()))
        two = np.sort(a, axis=1)[:, -2:]
        gaps += (two[:, 1] - two[:, 0])[top_a != top_b].tolist()
    return agree, positions, worst, gaps


def real_text_report(shipped: dict[str, Path], windows: int, window: int, val: Path) -> str:
    """model_quantized.onnx and model_int8.onnx against model.onnx on ``windows`` windows of
    ``window`` tokens spread evenly over the validation split, a Markdown table."""
    if not val.is_file():
        raise SystemExit(f"{val} is missing: `python -m model.data` prepares it")
    data = np.fromfile(val, dtype=np.uint16)
    window = min(window, json.loads(read_metadata(shipped["fp32"])["gpt_config"])["block_size"], len(data))
    starts = np.linspace(0, len(data) - window, windows).astype(int)
    texts = [data[s : s + window].astype(int).tolist() for s in starts]
    lines = [
        f"{windows} windows of {window} tokens spread evenly over the validation split ({len(data):,} tokens), "
        f"every position of each, one pass per file",
        "",
        "| file | most likely token the same as fp32's | largest logit difference | fp32's top-two gap where they differ (max) |",
        "|---|---|---|---|",
    ]
    for key in ("quantized", "int8"):
        agree, positions, worst, gaps = real_text_agreement(shipped["fp32"], shipped[key], texts)
        lines.append(f"| `{shipped[key].name}` | {100 * agree / positions:.2f} % of {positions} positions ({positions - agree} differ) "
                     f"| {worst:.3f} | {f'{max(gaps):.3f}' if gaps else 'n/a (never differ)'} |")
    return "\n".join(lines)


def transformers_js_rates(folder: Path, prompt: str, tokens: int) -> dict[str, float] | None:
    """transformers.js under Node.js (onnxruntime-node) on the Hub folder: wall-clock greedy
    tokens/s per dtype, its own generation loop included (tests/clients/transformers_node.mjs)."""
    script = ROOT / "tests" / "clients" / "transformers_node.mjs"
    if not (ROOT / "tests" / "node_modules" / "@huggingface" / "transformers").is_dir() or shutil.which("node") is None:
        return None
    out = subprocess.run(["node", str(script), str(folder), str(tokens), prompt], cwd=ROOT, capture_output=True,
                         text=True, timeout=1800, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return {dtype: report[dtype]["tokens_per_s"] for dtype in ("fp32", "q8", "int8")}


def optimum_rates(folder: Path, prompt: str, tokens: int) -> dict[str, float] | None:
    """Optimum's ORTModelForCausalLM.generate on the folder, wall-clock greedy tokens/s per file
    name, in the venv the client tests make (.cache/clients/optimum-venv; None without it)."""
    python = ROOT / ".cache" / "clients" / "optimum-venv" / "bin" / "python"
    if not python.is_file():
        return None
    out = subprocess.run([str(python), str(ROOT / "tests" / "clients" / "optimum_generate.py"), str(folder), str(tokens), prompt],
                         cwd=ROOT, capture_output=True, text=True, timeout=1800, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return {name: report[name]["tokens_per_s"] for name in ("model.onnx", "model_quantized.onnx", "model_int8.onnx")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.quant_compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=128, help="greedy tokens per run")
    ap.add_argument("--reps", type=int, default=3, help="alternating native repetitions")
    ap.add_argument("--loss-windows", type=int, default=32, help="validation windows, spread (0: all)")
    ap.add_argument("--skip-loss", action="store_true", help="speed and ids only")
    ap.add_argument("--prompts", type=int, default=24, help="validation prompts (12 tokens) for native-vs-web agreement")
    ap.add_argument("--agreement-tokens", type=int, default=64, help="greedy tokens per agreement prompt")
    ap.add_argument("--val", type=Path, default=ROOT / "data" / "shakespeare" / "val.bin")
    ap.add_argument("--precision", action="store_true",
                    help="instead: the Text generation tab's two precisions (model.onnx, model_int8.onnx): speed and agreement")
    ap.add_argument("--precision-prompts", type=int, default=40, help="with --precision: prompts (validation windows)")
    ap.add_argument("--precision-tokens", type=int, default=100, help="with --precision: greedy tokens per prompt")
    ap.add_argument("--real-text", action="store_true",
                    help="instead: both 8-bit files' agreement with fp32 over windows of the validation split")
    ap.add_argument("--windows", type=int, default=8, help="with --real-text: validation windows, spread evenly")
    ap.add_argument("--window-tokens", type=int, default=250, help="with --real-text: tokens per window (at most the context)")
    ap.add_argument("--shipped", action="store_true",
                    help="measure the three shipped files (and transformers.js on the folder) instead of building candidates")
    args = ap.parse_args(argv)
    from model import get_tokenizer


    shipped = ensure_onnx()
    fp32 = shipped["fp32"]
    if args.precision:
        print(precision_report(fp32, shipped["int8"], args.precision_prompts, args.precision_tokens, args.reps, args.val))
        return 0
    if args.real_text:
        print(real_text_report(shipped, args.windows, args.window_tokens, args.val))
        return 0
    prompt = get_tokenizer().encode("ROMEO:")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"fp32 (reference)": fp32}
        if args.shipped:
            paths |= {f"{key} ({path.name})": path for key, path in shipped.items() if key != "fp32"}
        for i, (name, make) in enumerate(CANDIDATES.items() if not args.shipped else []):
            print(f"building {name} ...", flush=True)
            paths[name] = make(fp32, Path(tmp) / f"candidate{i}.onnx", read_metadata(fp32))
        print("native onnxruntime, 1 thread ...", flush=True)
        native, native_ids = native_rates(paths, prompt, args.tokens, args.reps)
        print("onnxruntime-web (WebAssembly) under Node.js, 1 thread ...", flush=True)
        web = web_rates(paths, prompt, args.tokens, args.reps)
        print(f"native vs web agreement on {args.prompts} prompts ...", flush=True)
        agree = None
        if args.val.is_file() and args.prompts:
            val = np.fromfile(args.val, dtype=np.uint16)
            starts = np.random.default_rng(0).integers(0, len(val) - 12, args.prompts)
            agree = agreement(paths, [val[s : s + 12].astype(int).tolist() for s in starts], args.agreement_tokens)
        js = optimum = None
        if args.shipped:
            print("transformers.js under Node.js ...", flush=True)
            js = transformers_js_rates(shipped["fp32"].parent.parent, "ROMEO:", args.tokens)
            print("Optimum ...", flush=True)
            optimum = optimum_rates(shipped["fp32"].parent.parent, "ROMEO:", args.tokens)
        losses = {}
        if args.val.is_file() and not args.skip_loss:
            val = np.fromfile(args.val, dtype=np.uint16)
            for name, path in paths.items():
                print(f"validation loss: {name} ...", flush=True)
                losses[name] = onnx_loss(Engine.load(path, provider="cpu", threads=2), val, args.loss_windows)
        base = paths["fp32 (reference)"].stat().st_size
        ref = native_ids["fp32 (reference)"]
        header = ["file", "MB", "% of fp32", "loss Δ (nats)", "native tok/CPU-s, 1 thread", "web tok/CPU-s (WASM, 1 thread)",
                  "web ids = native ids", "native ids = fp32's",
                  f"prompts with web = native ids for {args.agreement_tokens} tokens", "tokens before a disagreement"]
        if js:
            header.append("transformers.js (Node) tok/s")
        if optimum:
            header.append("Optimum tok/s")
        rows = []
        ratio = lambda rates, name: f"{rates[name]:.0f} ({rates[name] / rates['fp32 (reference)']:.2f}× fp32)"  # noqa: E731
        dtypes = dict(zip(paths, ("fp32", "q8", "int8")))  # --shipped: fp32, quantized, int8 in this order
        for name, path in paths.items():
            same = lambda a, b: "yes" if a == b else f"no (from token {next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)})"  # noqa: E731
            rows.append([
                name, f"{path.stat().st_size / 1e6:.1f}", f"{100 * path.stat().st_size / base:.0f} %",
                f"{losses[name] - losses['fp32 (reference)']:+.4f}" if losses else "n/a",
                ratio(native, name), ratio({k: v[0] for k, v in web.items()}, name) if web else "n/a (npm ci)",
                same(web[name][1], native_ids[name]) if web else "n/a", same(native_ids[name], ref),
                f"{agree[name][0]} of {args.prompts}" if agree else "n/a", f"{100 * agree[name][1]:.0f} %" if agree else "n/a",
            ] + ([f"{js[dtypes[name]]:.0f} ({js[dtypes[name]] / js['fp32']:.2f}× fp32)"] if js else [])
              + ([f"{optimum[path.name]:.0f} ({optimum[path.name] / optimum['model.onnx']:.2f}× fp32)"] if optimum else []))
    loss_text = "" if not losses else f"; loss on {args.loss_windows or 'all'} validation windows"
    print(f"\n{args.tokens} greedy tokens after 'ROMEO:', {args.reps} alternating repetitions, medians{loss_text}")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    print("\n".join("| " + " | ".join(r) + " |" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
