"""Checks every export must pass: onnx.checker, logits parity with PyTorch (a left-padded batch
included), cached decoding against a full pass, the runtime's logits at every decode step and its
greedy text against PyTorch's with its cache, and the quantized
models' validation losses against fp32's (both 8-bit files: "quantized", weight-only, and
"int8", integer products)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch

from model import GPT, get_tokenizer, load_pretrained
from model.evaluate import val_windows, window_batches
from runtime.batching import Request
from runtime.engine import Engine, left_pad
from runtime.generate import decode, generate
from runtime.params import SamplingParams

from .build import Progress

LOGIT_TOL = 1e-4  # max |logit difference| allowed between ORT fp32 and PyTorch
# The 8-bit file: 0.33 on the shipped model; a broken graph (e.g. a fusion that misreads the
# per-row scales, docs/export.md) is off by several. The loss check is the finer bound.
INT8_LOGIT_TOL = 1.0
# A padded row of the 8-bit file: activations are quantized per row, so the batch changes nothing
# but the fp32 attention's summation order (~1e-6), which can move an activation across a rounding
# boundary: one quantization step, ~1e-2 on a logit. Per-tensor quantization
# would move every row with its neighbours.
INT8_PAD_TOL = 0.1
EIGHT_BIT = ("quantized", "int8")  # the keys of export.build.artifact_paths holding 8-bit files
INT8_LOSS_TOL = 0.05  # nats: an 8-bit file's validation loss may exceed fp32's by this much
INT8_SIZE_SHARE = 0.35  # an 8-bit file's size may be at most this share of fp32's
# The padded-batch bound per 8-bit file: model_quantized.onnx computes in float32 (fp32's bound),
# model_int8.onnx quantizes activations per row (one rounding step).
PAD_TOL = {"quantized": LOGIT_TOL, "int8": INT8_PAD_TOL}
PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?\n"


@dataclass(frozen=True)
class Check:
    name: str
    value: str  # what was measured, formatted
    limit: str  # what it had to be
    ok: bool


class ValidationError(RuntimeError):
    """An exported file failed a check; the message lists the failures."""


def _full_logits(engine: Engine, ids: np.ndarray) -> np.ndarray:
    """All-position logits [B, T, V] from one graph call with an empty cache."""
    return engine.run(ids, engine.empty_cache(len(ids)))[0]


def _shapes(block_size: int, quick: bool) -> list[tuple[int, int]]:
    shapes = [(1, 1), (3, 17)] if quick else [(1, 1), (1, 17), (3, 64), (2, block_size)]
    return [(b, min(t, block_size)) for b, t in shapes]


def check_onnx_file(path: Path) -> Check:
    try:
        onnx.checker.check_model(str(path), full_check=True)
        return Check(f"onnx.checker {path.name}", "valid", "valid", True)
    except onnx.checker.ValidationError as e:
        return Check(f"onnx.checker {path.name}", str(e).splitlines()[0][:60], "valid", False)


@torch.no_grad()
def check_parity(model: GPT, engine: Engine, shapes: list[tuple[int, int]], tol: float) -> Check:
    """Max |logit difference| between the engine's graph and PyTorch over several shapes."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for batch, length in shapes:
        ids = rng.integers(0, engine.vocab_size, (batch, length), dtype=np.int64)
        ref = model(torch.from_numpy(ids)).logits.numpy()
        worst = max(worst, float(np.abs(_full_logits(engine, ids) - ref).max()))
    shape_text = ", ".join(f"{b}x{t}" for b, t in shapes)
    name = f"{engine.path.name} vs PyTorch logits ({shape_text})"
    return Check(name, f"{worst:.2e}", f"<= {tol:.0e}", worst <= tol)


@torch.no_grad()
def check_padded_batch(engine: Engine, tol: float = LOGIT_TOL) -> Check:
    """Prompts of different lengths, left-padded into one batch, then 8 tokens through the cache:
    every row's logits equal those of the row run alone (padding gets no attention weight)."""
    rng = np.random.default_rng(2)
    lengths = [min(n, engine.block_size - 8) for n in (3, 11, 7)]
    prompts = [rng.integers(0, engine.vocab_size, n).tolist() for n in lengths]
    ids, mask, positions = left_pad(prompts)
    continuation = rng.integers(0, engine.vocab_size, (len(prompts), 8))
    batch, past = engine.run(ids, engine.empty_cache(len(prompts)), mask, positions)
    steps = [batch[:, -1]]
    for t in range(continuation.shape[1]):
        mask = np.concatenate([mask, np.ones((len(prompts), 1), np.int64)], axis=1)
        logits, past = engine.forward(continuation[:, t : t + 1], past, mask, positions[:, -1:] + t + 1)
        steps.append(logits)
    worst = 0.0
    for row, prompt in enumerate(prompts):
        alone = _full_logits(engine, np.array([prompt + continuation[row].tolist()]))[0]
        worst = max(worst, float(np.abs(batch[row, -len(prompt):] - alone[: len(prompt)]).max()))
        for t, logits in enumerate(steps[1:]):
            worst = max(worst, float(np.abs(logits[row] - alone[len(prompt) + t]).max()))
    name = f"{engine.path.name}: left-padded batch vs each row alone (lengths {', '.join(map(str, lengths))})"
    return Check(name, f"{worst:.2e}", f"<= {tol:.0e}", worst <= tol)


def check_size(fp32: Path, eight_bit: Path) -> Check:
    """The 8-bit file is at most INT8_SIZE_SHARE of the fp32 file's size."""
    share = eight_bit.stat().st_size / fp32.stat().st_size
    name = f"{eight_bit.name} size {eight_bit.stat().st_size / 1e6:.1f} MB vs fp32 {fp32.stat().st_size / 1e6:.1f} MB"
    return Check(name, f"{share:.1%}", f"<= {INT8_SIZE_SHARE:.0%}", share <= INT8_SIZE_SHARE)


def check_cached_decoding(engine: Engine, length: int) -> Check:
    """Feeding tokens one at a time through the cache gives the logits of one full pass."""
    ids = np.random.default_rng(1).integers(0, engine.vocab_size, (2, length), dtype=np.int64)
    full = _full_logits(engine, ids)
    past, worst = engine.empty_cache(2), 0.0
    for t in range(length):
        logits, past = engine.forward(ids[:, t : t + 1], past)
        worst = max(worst, float(np.abs(logits - full[:, t]).max()))
    return Check(f"cached vs full pass, {length} steps", f"{worst:.2e}", f"<= {LOGIT_TOL:.0e}", worst <= LOGIT_TOL)


def check_greedy_text(model: GPT, engine: Engine, n_tokens: int) -> Check:
    """Greedy continuations from the engine and from PyTorch ``GPT.generate`` are identical."""
    prompt = get_tokenizer().encode(PROMPT)[-engine.block_size // 4 :]
    shift, engine.context_shift = engine.context_shift, 1  # slide one token at a time, as PyTorch does
    try:
        ours = generate(engine, prompt, SamplingParams(n_tokens, stop_at_eot=False))
    finally:
        engine.context_shift = shift
    ref = model.generate(torch.tensor([prompt]), n_tokens, temperature=0.0)[0, len(prompt) :].tolist()
    same = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), len(ref))
    return Check(f"greedy text vs PyTorch, {n_tokens} tokens", f"{same} identical", f"{n_tokens} identical", same == n_tokens)


@torch.no_grad()
def check_decoded_logits(model: GPT, engine: Engine, n_tokens: int, tol: float = LOGIT_TOL) -> Check:
    """The logits the runtime draws every greedy token from (``runtime.generate``, its window
    sliding by one token as ``GPT.generate``'s once the context is full) against PyTorch's through
    its key/value cache, fed the same tokens: the worst step. Greedy ids alone miss bugs that leave
    a model's argmax in place, as a random tiny model's mostly does (a hidden token, a position
    off by one, a wrong attention scale)."""
    block = engine.block_size
    window = get_tokenizer().encode(PROMPT)[-block // 4 :]
    shift, engine.context_shift = engine.context_shift, 1
    try:
        steps = list(decode(engine, Request.new(np.array(window), SamplingParams(n_tokens, stop_at_eot=False), block)))
    finally:
        engine.context_shift = shift
    out = model(torch.tensor([window]), use_cache=True)
    worst = 0.0
    for step in steps:
        worst = max(worst, float(np.abs(step.logits[0] - out.logits[0, -1].numpy()).max()))
        window.append(int(step.tokens[0]))
        if len(window) > block:  # full: the oldest token leaves and the window is read anew
            window = window[1:]
            out = model(torch.tensor([window]), use_cache=True)
        else:
            out = model(torch.tensor([window[-1:]]), past_key_values=out.past_key_values, use_cache=True)
    return Check(f"decoded logits vs PyTorch's cache, {n_tokens} steps", f"{worst:.2e}", f"<= {tol:.0e}", worst <= tol)


def onnx_loss(
    engine: Engine, tokens: np.ndarray, windows: int = 0, batch: int = 4, progress: Callable[[float], None] | None = None
) -> float:
    """Mean next-token cross-entropy (nats) of the graph over the validation windows that
    training scores too (``model.evaluate.window_rows``: 0 = all, else N spread over the split).
    ``progress(fraction)`` is called after every batch."""
    total, count = 0.0, 0
    n = val_windows(len(tokens), engine.block_size, windows)
    for x, y in window_batches(tokens, engine.block_size, windows, batch):
        logits = _full_logits(engine, x)
        top = logits.max(axis=-1, keepdims=True)
        log_z = np.log(np.exp(logits - top, dtype=np.float32).sum(axis=-1, dtype=np.float64)) + top[..., 0]
        total += float((log_z - np.take_along_axis(logits, y[..., None], axis=-1)[..., 0]).sum())
        count += y.size
        if progress:
            progress(count / y.shape[1] / n)
    return total / count


def check_int8_loss(
    fp32: Engine, int8: Engine, tokens: np.ndarray, windows: int = 0, progress: Callable[[float], None] | None = None,
    label: str = "quantized", fp32_loss: float | None = None,
) -> tuple[Check, float, float]:
    """An 8-bit file's validation loss against fp32's (``windows`` as in :func:`onnx_loss`);
    ``fp32_loss`` when already measured on the same windows."""
    report = progress or (lambda fraction: None)
    if fp32_loss is None:
        a = onnx_loss(fp32, tokens, windows, progress=lambda f: report(f / 2))
        b = onnx_loss(int8, tokens, windows, progress=lambda f: report(0.5 + f / 2))
    else:
        a, b = fp32_loss, onnx_loss(int8, tokens, windows, progress=report)
    n = val_windows(len(tokens), fp32.block_size, windows)
    check = Check(
        f"{label} val loss {b:.4f} vs fp32 {a:.4f} ({n} windows)", f"{b - a:+.4f}", f"<= {INT8_LOSS_TOL}", b - a <= INT8_LOSS_TOL
    )
    return check, a, b


def run_checks(
    paths: dict[str, Path],
    model: GPT,
    quick: bool = False,
    greedy_tokens: int = 200,
    val_tokens: np.ndarray | None = None,
    loss_windows: int = 0,
    progress: Progress | None = None,
    losses: dict[str, float] | None = None,
) -> list[Check]:
    """Every check on the files in ``paths`` ("fp32", "quantized", "int8", any of them), in order,
    with progress.

    ``loss_windows``: validation windows for the loss checks (0: the whole split). The measured
    losses are put into ``losses`` ({"fp32": ..., "quantized": ..., "int8": ...}) when a dict is given.
    """
    engines = {key: Engine.load(path, provider="cpu") for key, path in paths.items()}
    steps: list[tuple[str, Callable[[], Check]]] = []
    for key, path in paths.items():
        steps.append((f"onnx.checker {path.name}", lambda p=path: check_onnx_file(p)))
    shapes = _shapes(model.config.block_size, quick)
    if "fp32" in engines:
        fp32 = engines["fp32"]
        steps += [
            ("fp32 logits vs PyTorch", lambda: check_parity(model, fp32, shapes, LOGIT_TOL)),
            ("fp32 left-padded batch", lambda: check_padded_batch(fp32, LOGIT_TOL)),
            ("cached decoding", lambda: check_cached_decoding(fp32, min(16 if quick else 48, model.config.block_size))),
            ("decoded logits vs PyTorch", lambda: check_decoded_logits(model, fp32, greedy_tokens)),
            ("greedy text vs PyTorch", lambda: check_greedy_text(model, fp32, greedy_tokens)),
        ]
    eight_bit = [key for key in EIGHT_BIT if key in engines]
    for key in eight_bit:
        steps.append((f"{key} logits vs PyTorch", lambda k=key: check_parity(model, engines[k], shapes, INT8_LOGIT_TOL)))
        steps.append((f"{key} left-padded batch", lambda k=key: check_padded_batch(engines[k], PAD_TOL[k])))
        if "fp32" in paths:
            steps.append((f"{key} size", lambda k=key: check_size(paths["fp32"], paths[k])))
    if "fp32" in engines and val_tokens is not None and eight_bit:
        measured: dict[str, float] = {}  # fp32's loss, measured once for both 8-bit files

        def loss_check(key: str) -> Check:
            i = next(j for j, (name, _) in enumerate(steps) if name == f"validation loss, {key}")
            at, share = i / len(steps), 1 / len(steps)
            text = f"validation loss, fp32 and {key} ({val_windows(len(val_tokens), model.config.block_size, loss_windows)} windows)"
            check, a, b = check_int8_loss(engines["fp32"], engines[key], val_tokens, loss_windows,
                                          lambda f: report(at + share * f, text), label=key, fp32_loss=measured.get("fp32"))
            measured["fp32"] = a
            if losses is not None:
                losses.update({"fp32": a, key: b})
            return check

        for key in eight_bit:
            steps.append((f"validation loss, {key}", lambda k=key: loss_check(k)))
    report = progress or (lambda fraction, text: None)
    results = []
    for i, (text, step) in enumerate(steps):
        report(i / len(steps), text)
        results.append(step())
    report(1.0, "checks done")
    return results


def raise_on_failure(results: list[Check]) -> None:
    failed = [c for c in results if not c.ok]
    if failed:
        lines = "; ".join(f"{c.name}: {c.value} (needs {c.limit})" for c in failed)
        raise ValidationError(f"exported ONNX failed {len(failed)} check(s): {lines}")


def quick_check(paths: dict[str, Path], weights_dir: Path | None = None, progress: Progress | None = None) -> None:
    """The checks run by ``ensure_onnx`` after a build (seconds); raises ValidationError."""
    results = run_checks(paths, load_pretrained(weights_dir), quick=True, greedy_tokens=32, progress=progress)
    raise_on_failure(results)


def format_table(results: list[Check]) -> str:
    """A plain-text summary table of the checks."""
    rows = [("check", "measured", "required", "")] + [(c.name, c.value, c.limit, "ok" if c.ok else "FAIL") for c in results]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
