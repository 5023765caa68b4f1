"""Plain onnxruntime on an exported GPT file: the graph, its inputs and numpy, no project code.
What the runtime's tests and the browser's are compared with (the runtime run a second way would
agree with any bug it has: docs/testing.md), and what the browser benchmark times.

    greedy = onnxruntime_greedy(path, prompt_ids, 32)            # the loop a browser page runs
    rows, logits = plain_decode(session(path), prompt_ids, 2, 40, block_size=32, shift=8,
                                choose=lambda logits: logits.argmax(-1))

:func:`onnxruntime_greedy` feeds the cache back (the prompt, then one token at a time);
:func:`plain_decode` keeps no cache at all: every step reads each row's whole window anew, one row
at a time, so nothing of the runtime's padding, cache or batching is in it.

``benchmarks.browser_engine`` imports this module as ``tests.plain_onnx``, the tests as ``plain_onnx``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort


def session(path: str | Path, threads: int = 1) -> ort.InferenceSession:
    """An onnxruntime session on ``path`` on the CPU (``threads``: intra-op threads, 0 for
    onnxruntime's default)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _empty_cache(sess: ort.InferenceSession) -> dict[str, np.ndarray]:
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    return {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts}


def onnxruntime_greedy(path: Path, prompt: list[int], tokens: int, threads: int = 0) -> list[int]:
    """Greedy ids from plain onnxruntime on ``path``: the loop the browser runs (the prompt, then
    one token at a time with the cache fed back). ``threads``: intra-op threads (0: onnxruntime's
    default)."""
    sess = session(path, threads)
    pasts = [i for i in sess.get_inputs() if i.name.startswith("past_key_values.")]
    presents = [i.name.replace("past_key_values", "present") for i in pasts]
    feeds = _empty_cache(sess)
    x, seen, out = np.array([prompt]), 0, []
    for _ in range(tokens):
        k = x.shape[1]
        logits, *present = sess.run(["logits", *presents], {
            "input_ids": x, "attention_mask": np.ones((1, seen + k), np.int64),
            "position_ids": np.arange(seen, seen + k)[None], **feeds})
        feeds, seen = {i.name: p for i, p in zip(pasts, present)}, seen + k
        x = logits[:, -1:].argmax(-1)
        out.append(int(x[0, 0]))
    return out


def read(sess: ort.InferenceSession, window: Sequence[int]) -> np.ndarray:
    """The next-token logits [V] after ``window``, read whole from an empty cache (positions 0..)."""
    x = np.array([list(window)], dtype=np.int64)
    (logits,) = sess.run(["logits"], {
        "input_ids": x, "attention_mask": np.ones_like(x), "position_ids": np.arange(x.shape[1])[None],
        **_empty_cache(sess)})
    return logits[0, -1]


def plain_decode(
    sess: ort.InferenceSession, prompt: Sequence[int], rows: int, max_new_tokens: int, *, block_size: int, shift: int,
    choose: Callable[[np.ndarray], np.ndarray], eot: int | None = None,
) -> tuple[list[list[int]], list[list[np.ndarray]]]:
    """``rows`` samples of one prompt, each row's window read whole at every step: the window is
    the prompt's last ``block_size`` tokens, and when a new token overflows it the oldest ``shift``
    leave. ``choose(logits [rows, V]) -> tokens [rows]`` is called once per step for every row, a
    finished one included (so a sampler draws its random numbers as for a batch of ``rows``). A
    row ends after ``max_new_tokens`` or after emitting ``eot`` (None: never).

    Returns each row's tokens (the last one ``eot`` when it stopped there) and the logits each of
    them was drawn from."""
    windows = [list(prompt[-block_size:]) for _ in range(rows)]
    tokens: list[list[int]] = [[] for _ in range(rows)]
    seen: list[list[np.ndarray]] = [[] for _ in range(rows)]
    done = [False] * rows
    for _ in range(max_new_tokens):
        logits = np.stack([read(sess, w) for w in windows])
        drawn = choose(logits)
        for r in range(rows):
            if done[r]:
                continue
            token = int(drawn[r])
            tokens[r].append(token)
            seen[r].append(logits[r])
            done[r] = token == eot
            windows[r].append(token)
            if len(windows[r]) > block_size:
                windows[r] = windows[r][shift:]
        if all(done):
            break
    return tokens, seen
