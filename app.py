"""GPT Playground: see, hands on, how a GPT works.

    python app.py                  # http://127.0.0.1:7860 (GRADIO_SERVER_NAME / GRADIO_SERVER_PORT to change)
    python app.py --model DIR      # any GPT-2-family folder: a model.train run, a model.convert --from-hf
                                   # folder, a Hugging Face GPT-2 folder or an artifacts/hub folder
    python app.py --compare DIR    # the Compare tab sets DIR beside the model (default: its untrained initialisation)

The table of contents of the app: the tabs in order, each built by its own module in
playground/ui/ (the wiring) around plain functions in playground/ (the logic). On the first start
the ONNX files are built (``python -m export``), with progress on the console.
"""

from __future__ import annotations

import argparse
import os
import time

T0 = time.perf_counter()

try:  # ZeroGPU (python -m deploy.space --zerogpu): spaces sets up before torch and gradio, as its docs ask
    import spaces  # noqa: F401
except ImportError:  # anywhere else the app needs no spaces (playground/ui/serving/zerogpu.py)
    pass
import gradio as gr  # noqa: E402

from playground.ui import attention, common, embeddings, generation, model, positional, serving, tokenization  # noqa: E402
from playground.ui import compare, inside, learn, links  # noqa: E402
from playground.model_source import ModelSource, ModelSourceError, describe, resolve, shipped  # noqa: E402
from playground import limits  # noqa: E402
from playground.resources import Resources, budget_cpu  # noqa: E402
from playground.compare import TRAINED, Comparison  # noqa: E402
from playground.ui.startup import prepare_browser_files_in_background, prepare_model, warm_up_in_background  # noqa: E402

TITLE = "GPT Playground"
HEADER = (
    "# GPT Playground\n"
    "See, hands on, how a GPT works: a small decoder-only transformer this project trained on "
    "Shakespeare, served by onnxruntime. Go through the tabs in order: text becomes tokens, "
    "tokens become vectors, positions are added, attention mixes each token with those before it, one "
    "forward pass is laid open stage by stage, the model picks the next token, Compare sets the model beside its "
    "untrained self, and in the last tab you watch a small GPT learn from scratch."
)


def resources_of(source: ModelSource, onnx_files: dict) -> Resources:
    """What the tabs share for ``source``: its model, and its engines on ``onnx_files``."""
    return Resources(None if source.kind == "shipped" else source.weights_dir, onnx_files)


def build_app(onnx_files: dict, source: ModelSource | None = None, compare_with: ModelSource | None = None,
              browser: serving.BrowserFiles | None = None, res: Resources | None = None) -> gr.Blocks:
    """The page for ``source`` (default: the shipped model), whose Compare tab sets
    ``compare_with`` beside it (default: the untrained initialisation of the same architecture);
    ``browser``: the files its Text generation tab's "Run on: this browser" loads (default: those
    of ``onnx_files``, which ``serving.launch_options`` must then be given too); ``res``: what its
    tabs share (default: :func:`resources_of` the source; ``launch_options`` reads the decoding
    loops' load from the same)."""
    source = source or shipped()
    res = res if res is not None else resources_of(source, onnx_files)
    browser = browser if browser is not None else serving.BrowserFiles.for_model(onnx_files)
    comparison = Comparison(  # what the Compare tab sets beside the model
        None if compare_with is None else compare_with.weights_dir,
        None if compare_with is None else compare_with.name,
        TRAINED if source.kind == "shipped" else source.name,
        shown=res.model(),
    )
    with gr.Blocks(title=TITLE, analytics_enabled=False) as demo:
        gr.Markdown(HEADER, elem_id="pg-header")
        gr.Markdown(describe(source), elem_id="pg-model")
        link = links.Links(res.model().config)  # a link's message shows here; each tab gets a Copy link button (playground/ui/links.py)
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # every tab one tap away, on a phone too (one row that scrolls sideways: page.css)
            with gr.Tab("1 · Tokenization", id="tokenization"):
                link.tab("tokenization", tokenization.build)
            with gr.Tab("2 · Embeddings", id="embeddings"):
                link.tab("embeddings", lambda: embeddings.build(res))
            with gr.Tab("3 · Positional encoding", id="positional") as tab:
                link.tab("positional", lambda: positional.build(res, tab))  # its heavy figures drawn when the tab first opens
            with gr.Tab("4 · Attention", id="attention") as tab:
                link.tab("attention", lambda: attention.build(res, tab))  # as the PE tab: the opening figures drawn when the tab first opens
            with gr.Tab("5 · Inside the model", id="inside") as tab:
                link.tab("inside", lambda: inside.build(res, tab, browser))  # drawn by the view both editions share (web/views/)
            with gr.Tab("6 · Text generation", id="generation"):
                link.tab("generation", lambda: generation.build(res, browser))
            with gr.Tab("7 · Model", id="model"):
                link.tab("model", lambda: model.build(res, onnx_files, training_log=source.weights_dir / "training_log.json", browser=browser))
            with gr.Tab("8 · Compare", id="compare"):
                link.tab("compare", lambda: compare.build(browser, comparison))
            with gr.Tab("9 · Watch it learn", id="learn"):
                link.tab("learn", lambda: learn.build(browser))
        link.wire(demo, tabs)  # a page opened from a link (/?tab=inside&text=...&layer=2) opens on that tab, so set
    # A small Space: each concurrency group (see playground/ui/common.py) has its own cap
    # (playground/limits.py), so light tabs never queue behind generations; past QUEUE_MAX_SIZE
    # waiting, "queue is full".
    # api_open=False: every call goes through the queue and its caps (Gradio opens the queue-less
    # /gradio_api/run/<endpoint> routes whenever the app runs outside a Space).
    serving.before_queue()
    demo.queue(max_size=limits.QUEUE_MAX_SIZE, default_concurrency_limit=limits.LIGHT_CONCURRENCY, api_open=False)
    # ... generations alone may not take more than MAX_WAITING_GENERATIONS places of it, heavy passes
    # and training runs likewise; session ids and requests per client address checked, and a full
    # group's places shared out per visitor (serving/admission.py).
    serving.harden(demo, max_waiting={common.GENERATE: limits.MAX_WAITING_GENERATIONS, common.FORWARD: limits.MAX_WAITING_FORWARD,
                                      learn.LEARN: limits.MAX_WAITING_LEARNERS})
    return demo


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="GPT Playground: see, hands on, how a GPT works.")
    ap.add_argument("--model", metavar="DIR", help="show this GPT-2-family model folder instead of the shipped model")
    ap.add_argument("--compare", metavar="DIR", help="the model the Compare tab sets beside it (default: its untrained initialisation)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        source = resolve(args.model)
        compare_with = None if args.compare is None else resolve(args.compare)
    except ModelSourceError as err:
        raise SystemExit(f"GPT Playground cannot start: {err}") from None
    onnx_files = prepare_model(source)  # builds the ONNX files on the first start, with progress
    budget_cpu()  # after the export, which may use every core
    browser = serving.BrowserFiles.for_model(onnx_files)  # the engine, onnxruntime-web and the 8-bit model, by hash
    # Inside the model's stage graph and Watch it learn's step graphs for "this browser", written meanwhile
    other = source.kind != "shipped"
    prepare_browser_files_in_background(browser, source.weights_dir if other else None, source.out_dir if other else None)
    res = resources_of(source, onnx_files)  # what every tab shares: the model shown, its engines
    demo = build_app(onnx_files, source, compare_with, browser, res)
    warm_up_in_background(res)  # the ONNX session opens while the server starts
    print(f"GPT Playground built in {time.perf_counter() - T0:.1f} s; starting the server", flush=True)
    demo.launch(
        # None: Gradio reads GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860).
        server_name=os.environ.get("GRADIO_SERVER_NAME") or None,
        server_port=int(os.environ["GRADIO_SERVER_PORT"]) if os.environ.get("GRADIO_SERVER_PORT") else None,
        theme=common.THEME,
        css=common.CSS + inside.CSS + links.CSS,
        js=common.JS,
        footer_links=["api", "gradio"],
        # Hardening for a public Space: no tab takes a file, so uploads (which Gradio accepts on
        # /gradio_api/upload whatever the components) are refused past 0 bytes, and the run
        # history (stored runs, Hugging Face buckets) is off: the app keeps nothing and calls out to nothing.
        max_file_size=limits.MAX_UPLOAD_BYTES,
        run_history=False,
        # Bounded memory and requests whatever the traffic: lean sessions, unread results
        # dropped, bodies capped, no file from Gradio's shared folders, monitoring off (playground/ui/serving/).
        **serving.launch_options(demo, browser=browser, res=res),
    )


if __name__ == "__main__":
    main()
