"""Train the GPT on the prepared corpus.

    python -m model.data                              # once: writes data/shakespeare/
    python -m model.train --preset cpu                # this project's 2-core CPU recipe
    python -m model.train --preset gpu                # a larger model for one GPU
    python -m model.train --resume                    # continue the run in --out
    torchrun --nproc_per_node=2 -m model.train ...    # DistributedDataParallel (gloo on CPU, nccl on GPU)

Writes into ``--out`` (default runs/<preset>): ``model.safetensors`` + ``config.json`` (the best
checkpoint by validation loss), ``last.safetensors`` + ``optimizer.safetensors`` + ``state.json``
(for ``--resume``) and ``training_log.json`` (one entry per evaluation).

Speed on a CPU: the output head over 50,257 tokens dominates a step. ``--vocab-subset`` computes
the softmax only over the tokens that occur in the training data (about 19k of 50k for
Shakespeare); the last ``--full-vocab-frac`` of the steps go back to the full softmax, so the
shipped model also pushes down the tokens it never saw.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F
from tqdm import tqdm

from .checkpoint import load_optimizer, load_weights, save_optimizer, save_weights
from .evaluate import evaluate_loss, val_windows
from .gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "data" / "shakespeare"


@dataclass
class TrainConfig:
    batch_size: int = 16  # sequences per optimizer step (global, across all processes)
    max_steps: int = 3000
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_interval: int = 250
    eval_windows: int = 0  # validation windows per evaluation (0: all); the last one uses all
    seed: int = 1337
    vocab_subset: bool = True
    full_vocab_frac: float = 0.1
    label_smoothing: float = 0.0
    bf16: bool = True  # autocast matmuls to bfloat16 (fast on CPUs with AVX512-BF16 / AMX, and GPUs; a CPU without them gets float32 unless --bf16 is given)


PRESETS: dict[str, tuple[GPTConfig, TrainConfig]] = {
    # Sized for 2 CPU cores (docs/training.md gives its time, its losses and the side-by-side runs
    # behind each choice): learned positions, batches of 2,048 tokens (more updates for the same
    # tokens from a small corpus), the softmax over the training text's tokens until the last 10 %.
    "cpu": (
        GPTConfig(block_size=256, n_layer=6, n_head=8, d_model=256, dropout=0.1, pos_encoding="learned"),
        TrainConfig(
            batch_size=8, max_steps=5400, lr=1.5e-3, min_lr=1.5e-4, eval_interval=600, eval_windows=96,
            full_vocab_frac=0.1,
            # About 0.8 % of a training work's tokens never occur in the other works (leave one
            # work out), so new text holds tokens the model never saw: smoothing 0.01 leaves
            # 0.01 * 31k/50k = 0.6 % of the probability on the 31k ids the corpus never shows.
            label_smoothing=0.01,
        ),
    ),
    # One GPU: wider, full softmax, more epochs in minutes.
    "gpu": (
        GPTConfig(block_size=256, n_layer=6, n_head=6, d_model=384, dropout=0.2, pos_encoding="learned"),
        TrainConfig(batch_size=64, max_steps=5000, lr=1e-3, min_lr=1e-4, eval_interval=250, vocab_subset=False),
    ),
    # A few seconds: for tests and smoke runs.
    "tiny": (
        GPTConfig(block_size=32, n_layer=2, n_head=2, d_model=32, dropout=0.0),
        TrainConfig(batch_size=8, max_steps=20, lr=3e-3, warmup_steps=2, eval_interval=10, eval_windows=8),
    ),
}


PRINT_EVERY = 10  # steps between progress-bar updates (each one waits for the device)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matmuls natively (AVX512-BF16 or AMX). Without either,
    autocast to bfloat16 runs several times slower than float32 (see docs/training.md).

    torch has no public query for this: the two private checks of ``torch.cpu`` are read here
    only, and tests/model/test_train.py fails if they move."""
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(check() for check in checks if check is not None)


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warmup, then cosine decay from lr to min_lr."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    progress = min(1.0, (step - tc.warmup_steps) / max(1, tc.max_steps - tc.warmup_steps))
    return tc.min_lr + 0.5 * (tc.lr - tc.min_lr) * (1.0 + math.cos(math.pi * progress))


def get_batch(data: np.ndarray, step: int, tc: TrainConfig, block_size: int, rank: int, world: int):
    """The global batch of a step depends only on (seed, step): the same with 1 or N processes
    and after a resume. Each process takes its own contiguous slice of the rows."""
    g = np.random.default_rng([tc.seed, step])
    starts = g.integers(0, len(data) - block_size - 1, size=tc.batch_size)
    per = tc.batch_size // world
    starts = starts[rank * per : (rank + 1) * per]
    x = np.stack([data[s : s + block_size] for s in starts]).astype(np.int64)
    y = np.stack([data[s + 1 : s + 1 + block_size] for s in starts]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def lm_loss(
    forward,
    model: GPT,
    x: torch.Tensor,
    y: torch.Tensor,
    vocab: torch.Tensor | None = None,
    remap: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token cross-entropy: returns (loss to minimise, plain cross-entropy to report).

    With ``vocab`` the softmax runs over those token ids only (the tokens the training data
    contains; ``remap`` maps a token id to its index in ``vocab``). ``label_smoothing`` mixes the
    one-hot target with a uniform one, as "Attention Is All You Need" does; over the full
    vocabulary it also keeps a little probability on tokens the training data never shows.
    ``forward`` is the model or its DDP wrapper (which all-reduces the gradients).
    """
    h = forward(x, head=False).hidden  # [B, T, C]
    if vocab is None:
        logits, targets = model.lm_head(h), y  # [B, T, V]
    else:
        logits, targets = h @ model.wte.weight[vocab].t(), remap[y]  # [B, T, |vocab|]
    logp = F.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, targets.unsqueeze(-1)).mean()
    if not label_smoothing:
        return nll, nll
    return (1 - label_smoothing) * nll - label_smoothing * logp.mean(), nll


ADAM_BETA1 = 0.9  # AdamW's first-moment decay (the second's is TrainConfig.beta2)
ADAM_EPS = 1e-8  # added to the second moment's square root (torch's default)
CLIP_EPS = 1e-6  # clip_grad_norm_'s max_norm / (norm + CLIP_EPS)


def decays(p: torch.Tensor) -> bool:
    """Whether AdamW decays a parameter: matrices (matmuls, embeddings) yes, biases and LayerNorm
    gains no."""
    return p.dim() >= 2


def param_groups(model: GPT, weight_decay: float):
    """Weight decay on matrices (matmuls, embeddings), none on biases and LayerNorm gains."""
    decay = [p for p in model.parameters() if decays(p)]
    no_decay = [p for p in model.parameters() if not decays(p)]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def adamw(model: GPT, tc: TrainConfig, **kwargs) -> torch.optim.AdamW:
    """The optimizer of every training run (``main`` and Watch it learn): AdamW with ``tc``'s
    learning rate, betas (:data:`ADAM_BETA1`, ``tc.beta2``) and weight decay on :func:`decays`."""
    return torch.optim.AdamW(
        param_groups(model, tc.weight_decay), lr=tc.lr, betas=(ADAM_BETA1, tc.beta2), eps=ADAM_EPS, **kwargs
    )


def clipped_adamw(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    m: list[torch.Tensor],
    v: list[torch.Tensor],
    step: torch.Tensor,
    lr: torch.Tensor,
    tc: TrainConfig,
    eps: float | torch.Tensor = ADAM_EPS,
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """:func:`train_step`'s update as a pure function of tensors: ``clip_grad_norm_(...,
    tc.grad_clip)`` then one step of :func:`adamw`, written out so that it can be traced into a
    graph (export/train_step.py). ``step`` counts the updates made before this one (0 for the
    first: the bias corrections use step + 1), ``lr`` is :func:`lr_at`'s, ``eps`` AdamW's (a
    tensor where a graph must keep it: export/train_step.py). Returns (new
    parameters, new first moments, new second moments, the gradients' norm before clipping).

    The optimizer itself stays ``torch.optim.AdamW``: the tests compare this function, traced and
    run by onnxruntime, with it."""
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2) for g in grads]), 2)
    scale = torch.clamp(tc.grad_clip / (norm + CLIP_EPS), max=1.0)
    t = (step + 1).to(torch.float32)
    correction1 = 1 - ADAM_BETA1**t  # bias corrections: the moments start at zero
    correction2 = 1 - tc.beta2**t
    new_p, new_m, new_v = [], [], []
    for p, g, m_i, v_i in zip(params, grads, m, v):
        g = g * scale
        m_i = ADAM_BETA1 * m_i + (1 - ADAM_BETA1) * g
        v_i = tc.beta2 * v_i + (1 - tc.beta2) * g * g
        if decays(p):
            p = p * (1 - lr * tc.weight_decay)
        p = p - (lr / correction1) * m_i / (torch.sqrt(v_i) / torch.sqrt(correction2) + eps)
        new_p.append(p)
        new_m.append(m_i)
        new_v.append(v_i)
    return new_p, new_m, new_v, norm


def train_step(
    forward,
    model: GPT,
    opt: torch.optim.Optimizer,
    data: np.ndarray,
    step: int,
    tc: TrainConfig,
    device: str = "cpu",
    rank: int = 0,
    world: int = 1,
    vocab: torch.Tensor | None = None,
    remap: torch.Tensor | None = None,
    subset_until: int = 0,
    batch: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """One optimizer step, the only one in the project (``main`` and the app's "Watch it learn"
    tab both call it): the learning rate of ``step``, its batch, the forward pass under bf16
    autocast, the loss, backward, gradient clipping and the AdamW update.

    ``batch``: (inputs, targets) drawn elsewhere (Watch it learn draws its own, alike in the
    browser: playground/learn/batches.py); default :func:`get_batch`'s for ``step``.

    The softmax runs over ``vocab`` for steps before ``subset_until`` (see :func:`lm_loss`).
    Returns the step's plain cross-entropy (detached): the loss of the model *before* this
    update on this step's batch, so the first call gives the untrained model's loss.
    """
    lr = lr_at(step, tc)
    for group in opt.param_groups:
        group["lr"] = lr
    x, y = batch if batch is not None else get_batch(data, step, tc, model.config.block_size, rank, world)
    x, y = x.to(device), y.to(device)
    with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=tc.bf16):
        subset = vocab is not None and step < subset_until
        loss, nll = lm_loss(forward, model, x, y, vocab if subset else None, remap, label_smoothing=tc.label_smoothing)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), tc.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return nll.detach()


@dataclass
class Run:
    """What an evaluation reads and updates: the model and its optimizer, the run folder, the log."""

    model: GPT
    opt: torch.optim.Optimizer
    tc: TrainConfig
    val: np.ndarray
    out: Path
    log: list[dict]
    best: float = float("inf")  # lowest validation estimate so far (its weights are model.safetensors)
    softmax_tokens: int = 0  # the widest softmax of the training loss's steps since the last evaluation


def evaluate(run: Run, step: int, train_loss: float, tok_s: float, elapsed_s: float) -> None:
    """Score the held-out split, append to the log and save the checkpoints (the best one too).

    The best checkpoint is chosen on the same ``eval_windows`` windows at every evaluation, so
    that like is compared with like; the last evaluation also scores every window of the split
    (``val_loss_all``), the run's result, which chooses nothing."""
    mc, tc = run.model.config, run.tc
    windows = val_windows(len(run.val), mc.block_size, tc.eval_windows)
    val_loss = evaluate_loss(run.model, run.val, windows)
    entry = {
        "step": step,
        "tokens": step * tc.batch_size * mc.block_size,
        "train_loss": None if math.isnan(train_loss) else round(train_loss, 4),  # JSON has no NaN
        # The training loss's softmax (the widest of the window's steps): over the tokens the
        # training text contains, a subset whose loss reads lower than the full vocabulary's, or
        # over all of them.
        "train_softmax_tokens": run.softmax_tokens or None,
        "val_loss": round(val_loss, 4),
        "val_windows": windows,
        "lr": lr_at(max(step - 1, 0), tc),
        "tokens_per_s": round(tok_s, 1),
        "elapsed_s": round(elapsed_s, 1),
    }
    if step == tc.max_steps:
        entry["val_loss_all"] = round(evaluate_loss(run.model, run.val), 4)
        entry["val_windows_all"] = val_windows(len(run.val), mc.block_size)
    run.log.append(entry)
    if val_loss < run.best:
        run.best = val_loss
        save_weights(run.model, run.out / "model.safetensors")
    save_weights(run.model, run.out / "last.safetensors")
    save_optimizer(run.opt, run.model, run.out / "optimizer.safetensors")
    (run.out / "training_log.json").write_text(json.dumps(run.log, indent=1) + "\n")
    state = {"step": step, "best_val_loss": run.best, "elapsed_s": entry["elapsed_s"], "train_config": asdict(tc)}
    (run.out / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    every = f", all windows {entry['val_loss_all']:.3f}" if "val_loss_all" in entry else ""
    tqdm.write(f"step {step}: train {train_loss:.3f}  val {val_loss:.3f}{every}  ({tok_s:.0f} tok/s)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with train.bin/val.bin")
    ap.add_argument("--out", type=Path, help="run folder (default: runs/<preset>)")
    ap.add_argument("--resume", action="store_true", help="continue from the run folder's last checkpoint")
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--threads", type=int, default=0, help="torch threads per process (0: all cores / processes)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--losses-json", type=Path, help="write every step's training loss here (to compare runs, e.g. under torchrun)")
    # Any field of GPTConfig / TrainConfig can be overridden, e.g. --d_model 384 --max_steps 500.
    for dc in (GPTConfig(), TrainConfig()):
        for k, v in asdict(dc).items():
            kind = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(v, bool) else type(v)
            ap.add_argument(f"--{k}", type=kind, default=None)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if world > 1:
        dist.init_process_group("nccl" if device == "cuda" else "gloo")
        if device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            device = f"cuda:{torch.cuda.current_device()}"
    if device == "cpu":
        torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    else:  # nanoGPT's GPU set-up: TF32 matmuls and convolutions on Ampere and later
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    master = rank == 0

    mc, tc = PRESETS[args.preset]
    out = args.out or ROOT / "runs" / args.preset
    if args.resume:
        mc = GPTConfig.from_json(out / "config.json")
        tc = TrainConfig(**json.loads((out / "state.json").read_text())["train_config"])
    mc = replace(mc, **{k: getattr(args, k) for k in asdict(mc) if getattr(args, k) is not None})
    tc = replace(tc, **{k: getattr(args, k) for k in asdict(tc) if getattr(args, k) is not None})
    if device == "cpu" and tc.bf16 and args.bf16 is None and not cpu_has_native_bf16():
        # The presets ask for bfloat16 autocast; on a CPU that emulates it, float32 is faster.
        tc = replace(tc, bf16=False)
        if master:
            print("this CPU has no native bfloat16 (AVX512-BF16 or AMX): training in float32 (--bf16 true to force it)")
    if tc.batch_size % world:
        raise SystemExit(f"batch_size {tc.batch_size} is not divisible by {world} processes")

    train = np.fromfile(args.data / "train.bin", dtype=np.uint16)
    val = np.fromfile(args.data / "val.bin", dtype=np.uint16)
    torch.manual_seed(tc.seed)
    model = GPT(mc).to(device)
    # Fused AdamW (one kernel for every parameter) where the device has it: CUDA.
    fused = {"fused": True} if device.startswith("cuda") else {}
    opt = adamw(model, tc, **fused)
    step, log, best, elapsed0 = 0, [], float("inf"), 0.0
    if args.resume:
        load_weights(model, out / "last.safetensors")
        load_optimizer(opt, model, out / "optimizer.safetensors")
        state = json.loads((out / "state.json").read_text())
        step, best, elapsed0 = state["step"], state["best_val_loss"], state["elapsed_s"]
        log = json.loads((out / "training_log.json").read_text())
        torch.manual_seed(tc.seed + step)  # fresh dropout masks, reproducible per resume point
    ddp = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    vocab = torch.from_numpy(np.unique(train).astype(np.int64)).to(device)
    remap = torch.full((mc.vocab_size,), -1, dtype=torch.long, device=device)
    remap[vocab] = torch.arange(len(vocab), device=device)
    full_from = int(tc.max_steps * (1 - tc.full_vocab_frac)) if tc.vocab_subset else 0
    tokens_per_step = tc.batch_size * mc.block_size
    if master:
        out.mkdir(parents=True, exist_ok=True)
        mc.to_json(out / "config.json")
        print(
            f"GPT {model.num_parameters() / 1e6:.1f}M parameters ({model.num_parameters(True) / 1e6:.2f}M non-embedding), "
            f"{len(train):,} training tokens, {world} process(es) on {device}, "
            f"softmax over {len(vocab) if tc.vocab_subset else mc.vocab_size:,} tokens until step {full_from if tc.vocab_subset else 0}"
        )

    model.train()
    t_start = time.time()
    bar = tqdm(total=tc.max_steps, initial=step, disable=args.quiet or not master, unit="step", dynamic_ncols=True)
    window_loss, window_n, window_t = torch.zeros((), device=device), 0, time.time()
    losses: list[torch.Tensor] = []  # on the device: read back only at evaluations and every PRINT_EVERY steps
    run = Run(model, opt, tc, val, out, log, best)

    def elapsed() -> float:
        return elapsed0 + time.time() - t_start

    if master and step == 0:
        evaluate(run, step, float("nan"), 0.0, elapsed())
    while step < tc.max_steps:
        lr = lr_at(step, tc)
        nll = train_step(ddp, model, opt, train, step, tc, device, rank, world, vocab, remap, subset_until=full_from)
        run.softmax_tokens = max(run.softmax_tokens, len(vocab) if step < full_from else mc.vocab_size)
        step += 1
        loss_value = nll
        if world > 1:
            dist.all_reduce(loss_value)
            loss_value /= world
        losses.append(loss_value)
        window_loss += loss_value
        window_n += 1
        bar.update(1)
        # .item() waits for the device: once every PRINT_EVERY steps, not at every step.
        if step % PRINT_EVERY == 0:
            tok_s = window_n * tokens_per_step / max(1e-9, time.time() - window_t)
            bar.set_postfix(loss=f"{loss_value.item():.3f}", lr=f"{lr:.1e}", tok_s=f"{tok_s:.0f}")
        if master and (step % tc.eval_interval == 0 or step == tc.max_steps):
            tok_s = window_n * tokens_per_step / max(1e-9, time.time() - window_t)
            evaluate(run, step, (window_loss / window_n).item(), tok_s, elapsed())
            window_loss, window_n, window_t = torch.zeros((), device=device), 0, time.time()
            run.softmax_tokens = 0
    bar.close()
    losses = torch.stack(losses).tolist() if losses else []
    if master and args.losses_json:
        args.losses_json.write_text(json.dumps(losses) + "\n")
    if world > 1:
        # Leave together, and let the group go while Python is whole: a process whose gloo threads
        # still held work at interpreter exit aborted ("terminate called", SIGABRT).
        dist.barrier()
        del ddp  # DDP's reducer holds the group; collected here, not at exit
        gc.collect()
        dist.destroy_process_group()
    return {"losses": losses, "best_val_loss": run.best, "out": str(out)}


if __name__ == "__main__":
    main()
