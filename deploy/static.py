"""python -m deploy.static DIR: the static edition, a folder any plain web server (or a static
Hugging Face Space, free on every account) serves with no Python behind it.

The page runs the model in the learner's browser (onnxruntime-web, WebAssembly) with the project's
browser engine (web/engine/): Tokenization, Embeddings, Positional encoding, Attention, Inside the
model (its stage graph and 8-bit weights, export/inside_graph.py), Text generation, Model (the
export's facts, playground/model_data.py) and Compare (the trained model beside its untrained start,
which the page draws itself from the app's seed and playground.initial's rules), computed there;
Watch it learn, which trains a model on a server, says so and links to a Gradio Space when one is
named (``--app-space USER/NAME``). The views the tabs draw with are the app's own (web/views/).
Everything it runs is in the folder: the engine, the page (web/static/), onnxruntime-web and
plotly.js (export/vendor.py: they come with the repository and the Python install, no npm), the Hub
folder's 8-bit ONNX file with each layer's attention weights as extra outputs, the tokenizer, the
trained token embeddings of the tokens seen in training (float16) and the lessons' texts
(playground/lessons.py, the same words as the app). ``--model-repo USER/NAME``: the Model tab links
that model repository's files beside the folder's own.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from export import vendor
from export.naming import QUANTIZED_NAME, ROOT, hub_dir

WEB = ROOT / "web"
# The large libraries go gzipped (the wasm 14.3 -> 3.7 MB, plotly.js 4.8 -> 1.4 MB), whatever the
# host: a static host may not compress, and the page unpacks them itself (DecompressionStream) and
# keeps them in Cache Storage. onnxruntime-web's two small modules are imported by address, as they are.
ORT_WASM_FILE = f"vendor/ort/{vendor.ORT_WASM}{vendor.GZ}"
PLOTLY_FILE = f"vendor/plotly/{vendor.PLOTLY_FILE}{vendor.GZ}"
MODEL_FILE = "model/model.onnx"
ATTENTION_OUTPUT = "attentions.{}"
# The tabs the browser computes, and those that need a server, in the app's order. Watch it learn
# trains in the browser when its files could be written (the Shakespeare texts are there).
BROWSER_TABS = ("tokenization", "embeddings", "positional", "attention", "inside", "generation", "model", "compare")
SERVER_TABS = ("learn",)
LEARN = "learn"


def tabs(learn: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the browser's tabs, the server's), Watch it learn among the browser's when ``learn``."""
    if not learn:
        return BROWSER_TABS, SERVER_TABS
    return (*BROWSER_TABS, LEARN), tuple(t for t in SERVER_TABS if t != LEARN)
# Inside the model: the stage graph (weights as inputs) and the trained weights, 8-bit
# (export/inside_graph.py); downloaded only when the tab opens.
INSIDE_GRAPH = "inside/graph.onnx"
INSIDE_LENS = "inside/lens.onnx"  # the logit lens at one position, run when a token is chosen
INSIDE_WEIGHTS = "inside/weights.bin"
INSIDE_INDEX = "inside/weights.json"
# The Model tab's data (playground/model_data.py) and Compare's untrained start: its seed and the
# rule of every weight (playground/initial.init_spec), which the page draws itself (web/engine/init.js).
MODEL_DATA = "data/model.json"
COMPARE_DATA = "data/compare.json"
# What the Model tab offers to download from the folder itself (a static host serves files, no zip).
FOLDER_DOWNLOADS = (
    (MODEL_FILE, "the 8-bit model this page runs: model_quantized.onnx with each layer's attention weights as extra outputs"),
    ("model/config.json", "its shape, as a GPT2Config"),
    ("model/tokenizer.json", "GPT-2's tokenizer"),
)
# With a model repository named: its files, from the Hub (the folder python -m export --publish uploads).
HUB_DOWNLOADS = (
    ("onnx/model_quantized.onnx", "8-bit weights, for browsers (transformers.js dtype \"q8\")"),
    ("onnx/model.onnx", "fp32, the reference"),
    ("onnx/model_int8.onnx", "8-bit integer products, for native CPUs"),
    ("model.safetensors", "the PyTorch weights"),
    ("config.json", "its shape, as a GPT2Config"),
    ("tokenizer.json", "GPT-2's tokenizer"),
)


def with_attention_outputs(src: Path, dst: Path, n_layer: int) -> Path:
    """``src`` (a decoder exported by export.onnx_export) with every layer's softmaxed attention
    weights as outputs ``attentions.{i}`` [batch, n_head, seq, past + seq]: the graph already
    computes them, so the file is the same size and gives the same logits.

    The softmaxes are the graph's only ones, one per layer, in the order the nodes run."""
    import onnx
    from onnx import TensorProto, helper

    proto = onnx.load(str(src))
    graph = proto.graph
    softmaxes = [node for node in graph.node if node.op_type == "Softmax"]
    if len(softmaxes) != n_layer:
        raise RuntimeError(f"{src.name} has {len(softmaxes)} Softmax nodes, expected one per layer ({n_layer})")
    dims = ("batch_size", "num_heads", "sequence_length", "total_sequence_length")
    for i, node in enumerate(softmaxes):
        name = ATTENTION_OUTPUT.format(i)
        graph.node.append(helper.make_node("Identity", [node.output[0]], [name], name=f"attention_output_{i}"))
        graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
    onnx.checker.check_model(proto)
    dst.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(proto, str(dst))
    return dst


def embedding_table(model) -> tuple[bytes, dict]:
    """The token embeddings the Embeddings tab compares: the rows of the tokens seen in training
    (as the app searches them), float16, and their ids and counts."""
    from playground.assets import load_token_counts

    matrix = model.wte.weight.detach().float().cpu().numpy()
    counts = load_token_counts()[: matrix.shape[0]]
    seen = np.flatnonzero(counts > 0)
    rows = matrix[seen].astype("<f2")
    meta = {
        "rows": int(len(seen)),
        "d_model": int(matrix.shape[1]),
        "dtype": "float16",
        "ids": seen.astype(int).tolist(),
        "counts": counts[seen].astype(int).tolist(),
    }
    return rows.tobytes(), meta


def link_params(browser_tabs: tuple[str, ...] = BROWSER_TABS) -> dict[str, list[dict]]:
    """Every browser tab's link parameters, as playground/links.py checks them."""
    from playground.links import params

    out = {}
    for tab in browser_tabs:
        out[tab] = [{**asdict(p), "accepted": p.accepted()} for p in params(tab)]
    return out


def examples_and_defaults(model) -> dict:
    """Each browser tab's examples and opening settings, from the modules the app's tabs use."""
    from playground import attention, compare, embeddings, inside, tokenization
    from playground.generation.params import DEFAULTS, EXAMPLE_PROMPTS

    return {
        "examples": {
            "tokenization": list(tokenization.EXAMPLES),
            "embeddings": list(embeddings.EXAMPLE_EXPRESSIONS),
            "attention": list(attention.EXAMPLE_PROMPTS),
            "inside": list(inside.EXAMPLE_TEXTS),
            "generation": list(EXAMPLE_PROMPTS),
        },
        "defaults": {
            "generation": {"text": EXAMPLE_PROMPTS[0], **DEFAULTS},
            "attention": {"cell_values_max_tokens": attention.CELL_VALUES_MAX_TOKENS},
            "inside": {"text": inside.EXAMPLE_TEXTS[0], "lens_k": inside.LENS_K, "top_k": inside.TOP_K},
            "compare": {"text": compare.EXAMPLE_PROMPT, "word": compare.EXAMPLE_WORD, "sentence": compare.EXAMPLE_SENTENCE,
                        **compare_opening(model), "top_k": compare.TOP_K, "neighbours_k": compare.NEIGHBOURS_K},
        },
    }


def site(app_space: str | None, files: dict[str, str], model, learn: bool = False) -> dict:
    """What the page needs to know besides its lessons: the model, the files (by content hash,
    so a browser's cached copy is never stale), the limits and each tab's defaults."""
    from playground import limits
    from playground.links import TABS

    cfg = model.config
    browser_tabs, server_tabs = tabs(learn)
    return {
        "title": "GPT Playground",
        "model": {
            "name": "GPT Playground's Shakespeare GPT",
            "n_layer": cfg.n_layer, "n_head": cfg.n_head, "d_model": cfg.d_model, "block_size": cfg.block_size,
            "vocab_size": cfg.vocab_size, "parameters": model.num_parameters(),
            "file": "8-bit weights (model_quantized.onnx with attention outputs)",
        },
        "files": files,
        "app_space": app_space,
        "app_url": f"https://huggingface.co/spaces/{app_space}" if app_space else None,
        "tabs": list(TABS),
        "browser_tabs": list(browser_tabs),
        "server_tabs": list(server_tabs),
        "links": link_params(browser_tabs),
        **examples_and_defaults(model),
        "limits": limits.for_browser(),
    }


# The addresses a page's code spells out: its modules' imports (``from "./x.js"``, ``import("./x.js")``)
# and index.html's ``src``/``href``. (A template such as app.js's ``./tabs/${tab}.js`` is
# :func:`missing_files`'s to spell out.)
_IMPORT = re.compile(r"""(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""")
_HTML_REF = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"'#:?]+)["']""")
# Folders of the page's sources that are not the page: the modules' own unit tests (node --test).
_NOT_SHIPPED = shutil.ignore_patterns("*.md", ".*", "test")


def missing_files(out: Path) -> list[str]:
    """The files a page of the static edition in ``out`` loads that are not there (paths in
    ``out``), so that a build that left one out fails at once, naming it, rather than as a
    page that never gets ready: the files index.html names, every module the page's modules
    import, each browser tab's module, every file of the pinned libraries (web/vendor/vendor.json)
    and every file site.json lists."""
    root = out.resolve()
    needed: set[str] = {"index.html", "data/site.json"} | {f"tabs/{tab}.js" for tab in BROWSER_TABS}

    def inside(base: Path, ref: str) -> str:
        return os.path.relpath(os.path.normpath(base / ref), root)

    for page in root.glob("*.html"):
        needed |= {inside(root, ref) for ref in _HTML_REF.findall(page.read_text(encoding="utf-8"))}
    for module in root.rglob("*.js"):
        if "vendor" not in module.relative_to(root).parts:  # the libraries: by their pins, below
            needed |= {inside(module.parent, ref) for ref in _IMPORT.findall(module.read_text(encoding="utf-8"))}
    pinned = vendor.pins()
    needed |= {f"vendor/ort/{vendor.stored_name(name)}" for name in pinned[vendor.ORT_PACKAGE]["files"]}
    needed |= {f"vendor/plotly/{name}{vendor.GZ}" for name in pinned[vendor.PLOTLY_PACKAGE]["files"]}
    site_json = root / "data" / "site.json"
    if site_json.is_file():
        needed |= set(json.loads(site_json.read_text(encoding="utf-8"))["files"])
    return sorted(name for name in needed if not (root / name).is_file())


def model_downloads(out: Path, model_repo: str | None) -> list[dict]:
    """The Model tab's downloads: the folder's own files (a static host serves files as they are),
    then, with ``model_repo``, the model repository's on the Hub, sized from artifacts/hub/ (the
    folder ``python -m export --publish`` uploads)."""
    from playground.hub_link import HUB_URL
    from playground.model_data import download

    rows = [download(f"{Path(path).name}: {what}", path, (out / path).stat().st_size) for path, what in FOLDER_DOWNLOADS]
    if model_repo:
        hub = hub_dir()
        rows += [download(f"{Path(path).name} from {model_repo}: {what}", f"{HUB_URL}/{model_repo}/resolve/main/{path}",
                          (hub / path).stat().st_size) for path, what in HUB_DOWNLOADS]
    return rows


def compare_json(model) -> dict:
    """Compare's untrained side as the page draws it: the app's seed and every weight's rule
    (playground.initial.init_spec, the same draws as playground.compare.untrained_like), and the
    two sides' names."""
    from playground import compare
    from playground.initial import init_spec

    return {"seed": compare.INIT_SEED, "spec": [p.to_json() for p in init_spec(model.config)],
            "labels": [compare.TRAINED, compare.UNTRAINED]}


def compare_opening(model) -> dict:
    """The layer and head the app's Compare opens on (its sliders, whatever sentence a link
    brings): the trained model's clearest head on the tab's own sentence, measured here on the
    app's weights, since the page's 8-bit ones may order two heads within 0.001 of each other the
    other way (measured: layer 3's heads 5 and 6 on that sentence)."""
    import torch

    from playground import compare
    from playground.attention import attention_weights, salient_head
    from playground.tokens import encode

    ids = encode(compare.EXAMPLE_SENTENCE)
    with torch.inference_mode():
        opening = salient_head(attention_weights(model, ids), ids)
    return {"layer": opening.layer, "head": opening.head}


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def space_readme(app_space: str | None, threads: bool) -> str:
    """The folder's README.md: a static Space's front matter, then what it is."""
    headers = ("custom_headers:\n  cross-origin-embedder-policy: require-corp\n"
               "  cross-origin-opener-policy: same-origin\n  cross-origin-resource-policy: cross-origin\n") if threads else ""
    app = f"\nWatch it learn, which trains a model on a server, is in the Gradio app: https://huggingface.co/spaces/{app_space}\n" if app_space else ""
    return (
        "---\ntitle: GPT Playground (in your browser)\nemoji: 🎭\ncolorFrom: indigo\ncolorTo: pink\n"
        f"sdk: static\napp_file: index.html\n{headers}pinned: false\nlicense: mit\n---\n\n"
        "# GPT Playground, in your browser\n\n"
        "A small GPT trained on Shakespeare, run in the visitor's browser by onnxruntime-web: tokenization, "
        "embeddings, positional encoding, attention, every stage of a forward pass, text generation, the model "
        "itself and its untrained start beside it, computed on the visitor's own machine, so one free static "
        "Space serves any class.\n" + app
    )


def write_static(out: Path, app_space: str | None = None, threads: bool = False, progress=print,
                 model_repo: str | None = None) -> dict[str, int]:
    """Write the static edition into ``out`` (created; files already there are replaced); the Model
    tab links ``model_repo``'s files when one is named. Returns the size in bytes of every file
    written, by relative path."""
    from model import load_pretrained
    from playground.lessons import lessons_json

    from export.build import build, stale_files

    try:
        ort, plotly = vendor.ort_dir(), vendor.plotly_js()
    except vendor.VendorError as err:
        raise FileNotFoundError(str(err)) from err
    if stale_files():
        progress("building artifacts/hub/ (the ONNX files) first")
        build()
    out.mkdir(parents=True, exist_ok=True)
    hub = hub_dir()
    model = load_pretrained()

    progress("the page and the engine")
    # the views (web/views/) are the app's too: one module per view for both editions
    for folder, target in ((WEB / "static", out), (WEB / "engine", out / "engine"), (WEB / "views", out / "views")):
        shutil.copytree(folder, target, dirs_exist_ok=True, ignore=_NOT_SHIPPED)
    (out / "vendor" / "ort").mkdir(parents=True, exist_ok=True)
    (out / "vendor" / "plotly").mkdir(parents=True, exist_ok=True)
    for name in vendor.ORT_FILES:
        if name != vendor.ORT_WASM:
            shutil.copy2(ort / name, out / "vendor" / "ort" / name)
    shutil.copy2(vendor.VENDOR_DIR / vendor.ORT_PACKAGE / vendor.stored_name(vendor.ORT_WASM), out / ORT_WASM_FILE)
    (out / PLOTLY_FILE).write_bytes(gzip.compress(plotly.read_bytes(), 9, mtime=0))

    progress("the 8-bit ONNX file with attention outputs")
    with_attention_outputs(hub / QUANTIZED_NAME, out / MODEL_FILE, model.config.n_layer)
    for name in ("tokenizer.json", "config.json"):
        shutil.copy2(hub / name, out / "model" / name)

    progress("Inside the model: the stage graph and its 8-bit weights")
    from export.inside_graph import write_browser_files

    write_browser_files(model, out / "inside")  # the app's "Run on: this browser" serves the same four files

    progress("Watch it learn: its step and forward graphs, the training text")
    from playground.resources import ResourceError

    from playground.learn.files import write_learn

    try:
        learn_files = write_learn(out, progress=progress)
    except ResourceError as err:  # no texts and no PyPI: the tab says it needs a server
        progress(f"Watch it learn stays a server tab: {err}")
        learn_files = {}

    progress("the token embeddings, the lessons and the site's facts")
    rows, meta = embedding_table(model)
    (out / "data").mkdir(exist_ok=True)
    (out / "data" / "embeddings.bin").write_bytes(rows)
    (out / "data" / "embeddings.json").write_text(json.dumps(meta, separators=(",", ":")))
    (out / "data" / "lessons.json").write_text(json.dumps(lessons_json(), ensure_ascii=False, indent=1))

    progress("the Model tab's facts and Compare's untrained start")
    from playground.model_data import model_data
    from playground.model_info import TRAINING_LOG, load_training_log

    data = model_data(model, load_training_log(TRAINING_LOG), model_downloads(out, model_repo), hub_repo=model_repo)
    (out / MODEL_DATA).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    (out / COMPARE_DATA).write_text(json.dumps(compare_json(model), separators=(",", ":")))
    versioned = ("model/model.onnx", "model/tokenizer.json", "model/config.json", "data/embeddings.bin", "data/embeddings.json",
                 INSIDE_GRAPH, INSIDE_LENS, INSIDE_WEIGHTS, INSIDE_INDEX, ORT_WASM_FILE, PLOTLY_FILE, MODEL_DATA,
                 COMPARE_DATA)
    files = {name: f"{name}?v={_digest(out / name)}" for name in versioned} | learn_files
    sizes = {"bytes": {name: (out / name).stat().st_size for name in files}}  # what a download costs, said before it starts
    (out / "data" / "site.json").write_text(json.dumps(site(app_space, files, model, bool(learn_files)) | sizes, ensure_ascii=False, indent=1))
    (out / "README.md").write_text(space_readme(app_space, threads))
    if missing := missing_files(out):
        raise RuntimeError(f"the static edition in {out} is incomplete: its page loads {', '.join(missing)}, "
                           "which the build did not write")
    return {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m deploy.static", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the folder to write (serve it with any web server, e.g. python -m http.server -d DIR)")
    ap.add_argument("--app-space", metavar="USER/NAME", help="a Gradio Space with the tab that needs a server (Watch it learn), linked from it")
    ap.add_argument("--model-repo", metavar="USER/NAME",
                    help="the model repository published by python -m export --publish: the Model tab links its files too")
    ap.add_argument("--threads", action="store_true",
                    help="the Space's front matter asks for cross-origin isolation (custom_headers), which multi-threaded "
                         "WebAssembly needs; measured slower than one thread for this model (docs/browser.md)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from export.publish import check_repo_id

    for repo in (args.app_space, args.model_repo):
        if repo:
            try:
                check_repo_id(repo)
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
    try:
        sizes = write_static(args.out, args.app_space, args.threads, model_repo=args.model_repo)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    total = sum(sizes.values())
    print(f"wrote {len(sizes)} files, {total / 1e6:.1f} MB, to {args.out}")
    print(f"serve it: python -m http.server -d {args.out} 8000, then open http://127.0.0.1:8000/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
