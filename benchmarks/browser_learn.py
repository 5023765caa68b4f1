"""Watch it learn in headless Chromium beside the server's PyTorch step, in one run (a benchmark,
not a test):

    python -m benchmarks.browser_learn [--steps 40] [--rates 1 4] [--threads 1 2] [--full] [--out DIR]

Writes the static edition (``python -m deploy.static``) into a temporary folder (or uses
``--out``), serves it from a loopback server that also sends the cross-origin isolation headers
multi-threaded WebAssembly needs, and measures, for the ``tiny`` and ``small`` sizes:

- the page's run (Start pressed on ``?tab=learn``, trained by the Web Worker): the time from the
  click to the first point drawn on the chart, then steps/s and tokens/s over the steps after the
  first two (no sample among them); with ``--threads 2``, the worker's WebAssembly on two threads
  (the page isolated);
- the same step graph run on the page's own thread, with Chromium's CPU throttled ``--rates``
  times (4x: a mid-range phone): Chromium's throttling applies to pages only ("Operation is only
  supported for pages, not workers", measured 2026-12-01), so a phone's worker is estimated as the
  worker's speed times the throttled thread's over the unthrottled one's;
- the same step graph in onnxruntime natively (this process, one thread) and the server's own
  step (``playground.learn.batched.batched_step`` of one run, PyTorch, one thread);
- with ``--full``, the page's whole 500-step ``tiny`` run (samples and the held-out score
  included) against the server's 500 steps of the same settings (its batched step, as its trainer
  takes them, without the trainer's seconds cap), timed, and how far their curves agree.

Prints a table; docs/training.md keeps the dated figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.browser_engine import ARGS, CHROMIUM, serve

SIZES = ("tiny", "small")
STATE = "() => { const s = window.pgLearn && window.pgLearn.state(); const r = s && s.run; " \
        "return r ? { step: r.step, seconds: r.seconds, running: r.running, losses: r.losses.map((p) => p[1]), " \
        "first: r.firstStepMs ?? null, stop: r.stopReason, val: r.valLoss } : null; }"
# Stamps the click on Start and the frame painted once the chart shows a point (two animation
# frames after the chart's data-points attribute changes): the learner's wait for the first point.
ARM = """() => {
  window.__drawn = null;
  let t0 = null;
  document.addEventListener('click', (e) => { if (t0 === null) t0 = e.timeStamp; }, { capture: true, once: true });
  const chart = document.querySelector('#lrn-chart');
  const obs = new MutationObserver(() => {
    if (t0 === null || Number(chart.dataset.points || 0) < 1) return;
    obs.disconnect();
    requestAnimationFrame(() => requestAnimationFrame(() => { window.__drawn = performance.now() - t0; }));
  });
  obs.observe(chart, { attributes: true });
}"""


def page_run(browser, url: str, size: str, steps: int, threads: int = 1) -> dict:
    """Start on a fresh page: ms to the first drawn point, and the worker's steps/s after step 2."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(900_000)
    page.add_init_script(f"localStorage.setItem('pg-learn-threads', '{threads}')")
    page.goto(url + f"?tab=learn&size={size}", wait_until="domcontentloaded")
    page.wait_for_selector("#panel-learn [data-ready=true]")
    page.evaluate(ARM)
    page.click("#lrn-start")
    page.wait_for_function("() => window.__drawn !== null")
    first = page.evaluate("() => window.__drawn")
    page.wait_for_function(f"(n) => {{ const s = ({STATE})(); return s && s.step >= n; }}", arg=2)
    a = page.evaluate(STATE)
    page.wait_for_function(f"(n) => {{ const s = ({STATE})(); return s && s.step >= n; }}", arg=steps)
    b = page.evaluate(STATE)
    page.click("#lrn-stop")
    page.wait_for_function(f"() => {{ const s = ({STATE})(); return s && !s.running; }}")
    isolated = page.evaluate("() => self.crossOriginIsolated")
    page.close()
    per_s = (b["step"] - a["step"]) / (b["seconds"] - a["seconds"])
    return {"first_ms": first, "steps_s": per_s, "isolated": isolated}


# In the page: the step graph of `key` run on the page's own thread for `steps` steps after two
# unseen ones, from the run's seed-0 weights and batches (web/engine/learn.js), steps/s.
THREAD_STEPS = """async ([key, steps]) => {
  const { loadOrt } = await import('./engine/engine.js');
  const { LearnModel, batch, lrAt, startWeights } = await import('./engine/learn.js');
  const site = await (await fetch('./data/site.json')).json();
  const f = await (await fetch(site.files['learn/learn.json'])).json();
  const bytes = async (u) => new Uint8Array(await (await fetch(u)).arrayBuffer());
  const ort = await loadOrt('./vendor/ort/', { wasm: site.files['vendor/ort/ort-wasm-simd-threaded.wasm.gz'] });
  const e = f.models[key];
  const m = await LearnModel.create(ort, e, await bytes(e.step), await bytes(e.forward));
  const gz = new Uint8Array(await new Response((await fetch(f.corpus.train)).body.pipeThrough(new DecompressionStream('gzip'))).arrayBuffer());
  m.trainer.start(startWeights(e.spec, 0, 'proper', f.training.skew));
  const t = f.training;
  const one = (k) => { const { idx, targets } = batch(gz, 0, k, m.block, t.batch_size); return m.trainer.train(idx, targets, [t.batch_size, m.block], lrAt(k, 3e-3, t.warmup_steps)); };
  await one(0); await one(1);
  const t0 = performance.now();
  for (let k = 2; k < 2 + steps; k++) await one(k);
  return steps / ((performance.now() - t0) / 1000);
}"""


def thread_steps(browser, url: str, size: str, rate: int, steps: int) -> float:
    page = browser.new_page()
    page.set_default_timeout(1_800_000)
    page.goto(url + "?tab=tokenization", wait_until="domcontentloaded")
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": rate})
    speed = page.evaluate(THREAD_STEPS, [f"{size}-learned", steps])
    page.close()
    return speed


def native_steps(size: str, steps: int) -> tuple[float, float]:
    """(onnxruntime's step graph natively, the server's PyTorch step) in steps/s, one thread each,
    on the same run's batches: the first ``steps`` of seed 0."""
    import onnxruntime as ort
    import torch

    from playground.learn.files import learn_graphs
    from export.train_step import step_names
    from model.train import adamw, lr_at
    from playground.learn import run as learn_run
    from playground.learn.batched import Learner, batched_step
    from playground.learn.batches import batch
    from playground.learn.corpus import load_corpus

    corpus = load_corpus("char")
    s = learn_run.settings(seed=0, size=size)
    tc = learn_run.train_config(s)
    model = learn_run.build_model(s, corpus.vocab_size)
    graph = learn_graphs(corpus.vocab_size, progress=lambda text: None)["step", size, s.positions]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    inputs, outputs = step_names(model)
    feeds = {name: p.detach().numpy().copy() for name, p in model.named_parameters()}
    for name in list(feeds):
        feeds[f"m.{name}"], feeds[f"v.{name}"] = np.zeros_like(feeds[name]), np.zeros_like(feeds[name])
    start = time.perf_counter()
    for step in range(steps):
        x, y = batch(corpus.train, s.seed, step, model.config.block_size, tc.batch_size)
        feeds.update(idx=x.numpy(), targets=y.numpy(), lr=np.array(lr_at(step, tc), dtype=np.float32), step=np.array(step))
        result = dict(zip(outputs, session.run(outputs, feeds)))
        for name in outputs[2:]:
            feeds[name.removeprefix("new.")] = result[name]
    onnx_s = steps / (time.perf_counter() - start)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        learner = Learner(model.train(), adamw(model, tc), tc)
        start = time.perf_counter()
        for _ in range(steps):
            batched_step([learner], corpus.train)
        torch_s = steps / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return onnx_s, torch_s


def server_curve(steps: int) -> tuple[list[float], float]:
    """The server's run of the page's default settings (seed 0), ``steps`` steps alone
    (``playground.learn.batched.alone``): the losses and the seconds."""
    from playground.learn import run as learn_run
    from playground.learn.batched import alone
    from playground.learn.corpus import load_corpus

    corpus = load_corpus("char")
    start = time.perf_counter()
    losses, _ = alone(learn_run.settings(seed=0), corpus.train, corpus.vocab_size, steps)
    return losses, time.perf_counter() - start


def full_run(browser, url: str) -> dict:
    """The page's whole 500-step tiny run (seed 0, the defaults), timed, and the server's 500 steps;
    their curves' largest gap at every 50th step and anywhere."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(1_800_000)
    page.goto(url + "?tab=learn", wait_until="domcontentloaded")
    page.wait_for_selector("#panel-learn [data-ready=true]")
    start = time.perf_counter()
    page.click("#lrn-start")
    page.wait_for_function(f"() => {{ const s = ({STATE})(); return s && !s.running && s.stop; }}")
    browser_s = time.perf_counter() - start
    got = page.evaluate(STATE)
    page.close()
    ref, server_s = server_curve(len(got["losses"]))
    gaps = [abs(a - b) for a, b in zip(got["losses"], ref)]
    return {"browser_s": browser_s, "server_s": server_s, "every_50": max(gaps[::50]), "anywhere": max(gaps),
            "final": (float(np.mean(got["losses"][-20:])), float(np.mean(ref[-20:]))), "val": got["val"],
            "steps": len(got["losses"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="steps each page trains before Stop (from step 2 timed)")
    ap.add_argument("--rates", type=int, nargs="+", default=[1, 4], help="Chromium CPU throttling rates")
    ap.add_argument("--threads", type=int, nargs="+", default=[1], help="WebAssembly threads of the worker")
    ap.add_argument("--full", action="store_true", help="also the page's whole 500-step tiny run against the server's")
    ap.add_argument("--out", type=Path, help="write the static edition here (default: a temporary folder)")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from deploy.static import write_static

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp)
        write_static(folder, progress=lambda text: None)
        server, url = serve(folder)
        rows = []
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for size in SIZES:
                    native, torch_s = native_steps(size, args.steps)
                    thread = {rate: thread_steps(browser, url, size, rate, max(4, args.steps // 4)) for rate in args.rates}
                    for threads in args.threads:
                        r = page_run(browser, url, size, args.steps, threads)
                        rows.append((size, threads, r, thread, native, torch_s))
                        print(f"{size:5s} {threads} thread(s){' (isolated)' if r['isolated'] else ''}: first point {r['first_ms'] / 1000:.2f} s, "
                              f"worker {r['steps_s']:.2f} steps/s; the page's thread {', '.join(f'{k}x {v:.2f}' for k, v in thread.items())} "
                              f"steps/s; natively: onnxruntime {native:.2f}, PyTorch (the server's step) {torch_s:.2f} steps/s", flush=True)
                full = full_run(browser, url) if args.full else None
                browser.close()
        finally:
            server.shutdown()
    load = os.getloadavg()
    slow = max(args.rates)
    print(f"\nWatch it learn, {time.strftime('%Y-%m-%d')}, load average {load[0]:.1f} / {load[1]:.1f} on {os.cpu_count()} cores "
          f"(steps/s after step 2; a step is 16 x 64 = 1,024 tokens; Chromium throttles a page's thread, not its workers):")
    print(f"| size | threads | Start to first point | page (worker) steps/s | tokens/s | the step on the page's thread, 1x | {slow}x | "
          f"a {slow}x phone's worker, estimated | onnxruntime natively | PyTorch (the server) | page / PyTorch |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size, threads, r, thread, native, torch_s in rows:
        est = r["steps_s"] * thread[slow] / thread[1] if 1 in thread else float("nan")
        print(f"| {size} | {threads} | {r['first_ms'] / 1000:.2f} s | {r['steps_s']:.2f} | {r['steps_s'] * 1024:,.0f} | {thread.get(1, float('nan')):.2f} | "
              f"{thread[slow]:.2f} | {est:.2f} | {native:.2f} | {torch_s:.2f} | {r['steps_s'] / torch_s:.2f} |")
    if full:
        print(f"\nThe page's 500-step tiny run (seed 0): {full['browser_s']:.0f} s in Chromium (Start to the end: {full['steps']} steps, "
              f"samples and the held-out score); the server's step for the same steps {full['server_s']:.0f} s (samples aside); curves apart "
              f"by at most {full['every_50']:.2e} at every 50th step, {full['anywhere']:.2e} anywhere; last 20 steps "
              f"{full['final'][0]:.4f} / {full['final'][1]:.4f}; held-out (page) {full['val']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
