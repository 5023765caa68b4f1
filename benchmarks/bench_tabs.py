"""Every tab's slowest action, timed as the server answers it: the tab's handler on the shipped
model, then its outputs serialised as Gradio sends them (a figure's JSON), median of a few runs
after one warm-up.

    python -m benchmarks.bench_tabs         # the table, each action against TARGET_S
    python -m benchmarks.bench_tabs --repeats 5

What the browser adds (the trip, drawing the plots) is not in these figures: see docs/app.md."""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

__all__ = ["TARGET_S", "Action", "actions", "serialise", "gzipped", "time_action", "main"]

TARGET_S = 1.5  # no tab keeps a learner waiting longer for one action


@dataclass(frozen=True)
class Action:
    tab: str
    name: str
    run: Callable[[], Any]


def _json(value: Any) -> str:
    if isinstance(value, go.Figure):
        return value.to_json()
    if isinstance(value, (tuple, list)) and any(isinstance(v, go.Figure) for v in value):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return json.dumps(value, default=str)


def serialise(value: Any) -> int:
    """The bytes of JSON a handler's outputs become (a figure as plotly writes it for Gradio)."""
    return len(_json(value))


def gzipped(value: Any) -> int:
    """The same JSON's bytes on the wire, gzipped as the app sends it (ui/serving/compression.py)."""
    from playground.ui.serving.compression import COMPRESS_LEVEL

    return len(gzip.compress(_json(value).encode(), COMPRESS_LEVEL))


def actions() -> list[Action]:
    """The slowest action of each tab, with the inputs a learner would use."""
    from playground import embeddings as emb
    from playground import limits
    from playground.attention import EXAMPLE_PROMPTS
    from playground.generation.params import EXAMPLE_PROMPTS as PROMPTS
    from playground.compare import Comparison
    from playground.resources import Resources
    from playground.ui import attention, compare, embeddings, generation, inside, positional, tokenization

    from .bench_inside import text_of

    res = Resources()  # the shipped model and engines, as the app's tabs share them
    cfg = res.model().config
    comparing = compare.Handlers(Comparison(shown=res.model()))  # the app's default: the model beside its untrained start
    embeddings, attention, inside = embeddings.Handlers(res), attention.Handlers(res), inside.Handlers(res)
    generation, model_table = generation.Generations(res), positional.Handlers(res).ui_model_table
    fresh = itertools.count()  # Inside keeps its last passes: each run a new text, as a learner typing
    long_text = ("Romeo.\nBut soft! what light through yonder window breaks?\n" * 400)[: limits.MAX_TEXT_CHARS]
    return [
        Action("Tokenization", f"tokenize {limits.MAX_TEXT_CHARS:,} characters",
               lambda: tokenization.ui_tokenize(long_text, True, True)),
        Action("Embeddings", "PCA 3D of the default words",
               lambda: embeddings.ui_projection(", ".join(emb.DEFAULT_WORDS), emb.DEFAULT_EXPRESSION, "3D", True)),
        Action("Positional encoding", "PE at 1024 positions x 512 dimensions",
               lambda: positional.ui_positional(512, 1024, 10000, "2, 4, 6, 8")),
        Action("Positional encoding", "the model's own table (tab opened)", model_table),
        Action("Attention", f"layer change (to layer {cfg.n_layer - 1}) on the example",
               lambda: attention.ui_attention(EXAMPLE_PROMPTS[0], cfg.n_layer - 1, 0)),
        Action("Inside the model", f"a new {limits.MAX_INSIDE_TOKENS}-token text (the whole pass)",
               lambda: inside.ui_run(text_of(limits.MAX_INSIDE_TOKENS, next(fresh)), cfg.n_layer - 1, 0)),
        Action("Text generation", "next-token chart under the settings",
               lambda: generation.ui_live(PROMPTS[0], 0.8, 50, 0.95)),
        Action("Text generation", "Next token (one step)",
               lambda: generation.ui_next_token(PROMPTS[0], 0.8, 50, 0.95, 42)),
        Action("Compare", "next tokens, both models",
               lambda: comparing.ui_compare_next_token(compare.PROMPT)),
        Action("Compare", "attention, both models",
               lambda: comparing.ui_compare_attention(compare.SENTENCE, cfg.n_layer - 1, 0)),
    ]


def time_action(action: Action, repeats: int) -> tuple[float, int, int]:
    """Median seconds of ``repeats`` runs (after one warm-up), the JSON bytes of one answer and
    those bytes gzipped."""
    answer = action.run()  # warm-up: caches, the ONNX session
    size, wire = serialise(answer), gzipped(answer)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        serialise(action.run())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), size, wire


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Every tab's slowest action, timed as the server answers it.")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    from playground.resources import budget_cpu

    threads = budget_cpu()  # the app's share of the cores for PyTorch (app.py does the same)
    rows = []
    print(f"{'tab':<20} {'action':<44} {'seconds':>8} {'JSON kB':>8} {'gzip kB':>8}")
    for action in actions():
        seconds, size, wire = time_action(action, args.repeats)
        rows.append(seconds)
        mark = "ok" if seconds <= TARGET_S else f"over {TARGET_S} s"
        print(f"{action.tab:<20} {action.name:<44} {seconds:>8.2f} {size / 1000:>8.0f} {wire / 1000:>8.0f}  {mark}", flush=True)
    print(f"median of {args.repeats} runs after a warm-up, PyTorch on {threads} thread(s) as in the app; target {TARGET_S} s per action")
    return 0 if max(rows) <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
