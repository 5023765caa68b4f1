"""Time each control change of the Inside the model tab on a 64-token text (a benchmark, not a test):

    python -m benchmarks.bench_inside [--repeats 5]

A new text computes the whole pass (a cache miss: each repeat changes the text's last word) and
packs what the view draws; a new token packs that token's rows (every layer's, and its logit lens)
from the kept pass. A new layer or head asks the server nothing: the view both editions share
(web/views/inside.js) draws it from the rows it holds. The times are those of the page's own
handlers (``playground.ui.inside``), with PyTorch on the cores the app gives it
(``resources.budget_cpu``). docs/app.md keeps the measured figures.
"""

from __future__ import annotations

import argparse
import statistics
import time

from playground import limits, resources
from playground.tokens import decode, encode

BASE = (
    "Romeo.\nBut soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun!--\n"
    "Arise, fair sun, and kill the envious moon,\nWho is already sick and pale with grief,\n"
    "That thou her maid art far more fair than she:\n"
)


def text_of(n_tokens: int, variant: int) -> str:
    """A text of exactly ``n_tokens`` tokens whose last token changes with ``variant``."""
    ids = encode(BASE * (1 + n_tokens // 40))[: n_tokens - 1]
    return decode(ids) + f" {variant % 10}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=limits.MAX_INSIDE_TOKENS)
    args = ap.parse_args(argv)
    threads = resources.budget_cpu()
    from types import SimpleNamespace

    from playground.resources import Resources
    from playground.ui.inside import Handlers

    tab = Handlers(Resources())  # the shipped model, as the app's tab computes with it
    ui_run, ui_rows = tab.ui_run, tab.ui_rows
    ui_run(text_of(args.tokens, 9), 0, 0)  # load the model and warm up
    times: dict[str, list[float]] = {"text": [], "token": []}
    for r in range(args.repeats):
        text = text_of(args.tokens, r)
        assert len(encode(text)) == args.tokens, len(encode(text))
        steps = [
            ("text", lambda: ui_run(text, 0, 0)),
            ("token", lambda: ui_rows(text, SimpleNamespace(_data={"token": args.tokens // 2}))),
        ]
        for name, step in steps:
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    print(f"Inside the model, {args.tokens}-token text, {args.repeats} repeats, PyTorch on {threads} thread(s):")
    for name, ts in times.items():
        print(f"  {name:6s} change: median {statistics.median(ts) * 1000:6.0f} ms   max {max(ts) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
