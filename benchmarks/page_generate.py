"""The Text generation tab's own Generate event against the ``/generate`` API, side by side: N
learners at once, each from its own loopback address (127.0.0.2, 127.0.0.3, ...) and its own
session, each asking for the same number of tokens, first through the page's event (by its event
index, with the inputs the page sends), then through ``/generate``, in turns, in one run.

    python -m benchmarks.page_generate                      # 16 learners, 32 tokens, 3 rounds; launches app.py
    python -m benchmarks.page_generate --learners 40 --rounds 1
    python -m benchmarks.page_generate --precision 8-bit     # both sides on model_int8.onnx
    python -m benchmarks.page_generate --url http://127.0.0.1:7860/

Both go through the same transport as the page (POST ``queue/join``, then read the session's
``queue/data`` stream to the event's end), so what differs is only what the server does per event.
The page's time runs to the end of the event the page runs after Generate (the chart and the
step pickers), as a learner sees it. Prints each kind's median and p95 time from the click to
the last update, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

API = "gradio_api"
PROMPT = "Romeo.\nBut soft! what light through yonder window breaks?"
SETTINGS = (0.8, 50, 0.95)  # temperature, top_k, top_p: the tab's defaults
TIMEOUT_S = 300.0


def page_event_index(config: dict) -> int:
    """The event index of the page's Generate button (the server-side listener of ``#gen-run``'s click)."""
    button = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "gen-run")
    return next(
        d["id"] for d in config["dependencies"]
        if [button, "click"] in [list(t) for t in d.get("targets", [])] and d.get("backend_fn")
    )


def follow_up_index(config: dict, index: int) -> int | None:
    """The event the page runs after event ``index`` ends (its ``.then``), if any."""
    return next((d["id"] for d in config["dependencies"] if d.get("trigger_after") == index and d.get("backend_fn")), None)


def api_event_index(config: dict) -> int:
    return next(d["id"] for d in config["dependencies"] if d.get("api_name") == "generate")


def one_event(url: str, source: str, fn_index: int, data: list, then: int | None = None) -> tuple[float, float, dict]:
    """Run one event as the page does, from ``source``, and the event the page runs after it
    (``then``, with the session's result key); (seconds from the first POST to the end of the
    last, seconds to the end of the first: the text done, the first event's final message)."""
    session = uuid.uuid4().hex[:11]
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(timeout=TIMEOUT_S, transport=transport) as http:
        t0 = time.perf_counter()
        first = _join_and_wait(http, url, session, fn_index, data)
        text_done = time.perf_counter() - t0
        if then is not None and first.get("success"):
            last = _join_and_wait(http, url, session, then, [None])
            if not last.get("success"):
                raise RuntimeError(f"the page's follow-up event failed: {str(last)[:200]}")
        return time.perf_counter() - t0, text_done, first


def _join_and_wait(http: httpx.Client, url: str, session: str, fn_index: int, data: list) -> dict:
    r = http.post(f"{url}{API}/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": session})
    r.raise_for_status()
    event_id = r.json()["event_id"]
    with http.stream("GET", f"{url}{API}/queue/data", params={"session_hash": session}) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data: "):
                continue
            msg = json.loads(line[6:])
            if msg.get("event_id") == event_id and msg.get("msg") == "process_completed":
                return msg
    raise RuntimeError("the event stream ended before the event completed")


@dataclass
class Kind:
    name: str
    seconds: list[float] = field(default_factory=list)
    text_seconds: list[float] = field(default_factory=list)  # the page's text done, before its chart
    failures: list[str] = field(default_factory=list)

    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    def p95(self) -> float:
        if len(self.seconds) < 2:
            return self.seconds[0] if self.seconds else float("nan")
        return statistics.quantiles(self.seconds, n=20, method="inclusive")[-1]


def run_round(
    url: str, kind: Kind, fn_index: int, learners: int, tokens: int, page: bool, precision: str, then: int | None = None
) -> None:
    lock = threading.Lock()

    def learner(i: int) -> None:
        args = [PROMPT, tokens, *SETTINGS, 1000 + i]
        data = [*args, 1, precision, None] if page else [*args, precision]  # the page also sends its samples, precision and result key
        try:
            seconds, text_done, msg = one_event(url, f"127.0.0.{2 + i}", fn_index, data, then)
            out = msg.get("output", {})
            if not msg.get("success"):
                raise RuntimeError(str(out)[:200])
            if page:  # the page's stats line counts the tokens it shows
                stats = out["data"][1]
                if f"**{tokens}** new tokens" not in str(stats):
                    raise RuntimeError(f"the page shows no {tokens} new tokens: {str(stats)[:200]}")
            elif out["data"][0]["new_tokens"] != tokens:
                raise RuntimeError(f"/generate gave {out['data'][0]['new_tokens']} tokens")
        except Exception as err:  # noqa: BLE001 -- counted, the others go on
            with lock:
                kind.failures.append(f"learner {i}: {type(err).__name__}: {err}")
            return
        with lock:
            kind.seconds.append(seconds)
            kind.text_seconds.append(text_done)

    with ThreadPoolExecutor(max_workers=learners) as pool:
        list(pool.map(learner, range(learners)))


def compare(url: str, learners: int = 16, tokens: int = 32, rounds: int = 3, precision: str = "full") -> tuple[Kind, Kind]:
    """``rounds`` times: all learners through the page's event, then all through ``/generate``,
    both in ``precision`` (the page's choice, /generate's last parameter)."""
    config = httpx.get(url + "config", timeout=60).json()
    page, api = Kind("page Generate"), Kind("/generate")
    page_index, api_index = page_event_index(config), api_event_index(config)
    then = follow_up_index(config, page_index)  # the chart and pickers, after the text
    run_round(url, Kind("warm-up"), api_index, 2, tokens, False, precision)
    for _ in range(rounds):
        run_round(url, page, page_index, learners, tokens, True, precision, then)
        run_round(url, api, api_index, learners, tokens, False, precision)
    return page, api


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=16, help="learners at once, each from its own address (at most 200)")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of page then API")
    parser.add_argument("--precision", choices=("full", "8-bit"), default="full", help="both sides' precision (the page's default: full)")
    parser.add_argument("--url", help="an app already running on loopback (default: launch app.py)")
    args = parser.parse_args(argv)
    if not 1 <= args.learners <= 200:
        parser.error("--learners must be from 1 to 200")
    from .app_server import launch, stop

    server = None
    if args.url:
        url = args.url if args.url.endswith("/") else args.url + "/"
    else:
        server = launch(Path(tempfile.mkdtemp()) / "app.log")
        url = server.url
        print(f"app ready in {server.startup_s:.1f} s at {url}", flush=True)
    try:
        page, api = compare(url, args.learners, args.tokens, args.rounds, args.precision)
    finally:
        if server is not None:
            stop(server)
    print(f"{args.learners} learners at once, {args.tokens} tokens each, {args.precision} precision, {args.rounds} rounds (page, then API):")
    for kind in (page, api):
        print(f"  {kind.name:14} median {kind.median():6.2f} s  p95 {kind.p95():6.2f} s  ({len(kind.seconds)} done, {len(kind.failures)} failed)")
        for failure in kind.failures[:5]:
            print(f"    {failure}")
    text = statistics.median(page.text_seconds) if page.text_seconds else float("nan")
    print(f"  page, its text done (before the chart that follows it): median {text:6.2f} s")
    print(f"  page / API (medians): {page.median() / api.median():.2f}x; the text alone {text / api.median():.2f}x")
    return 1 if page.failures or api.failures else 0


if __name__ == "__main__":
    sys.exit(main())
