"""The browser libraries the pages serve, with the Python install: no Node.js, no npm, no network.

- **onnxruntime-web** (runs the model in the learner's browser): the three files a page needs of its
  WebAssembly build live in the repository, ``web/vendor/onnxruntime-web/`` (its two ``.mjs`` as they
  are, its 14 MB ``.wasm`` gzipped to 3.7 MB); :data:`VENDOR_JSON` pins its version and each file's
  sha256. No Python package ships them, and a download at install or first start would need a
  registry the app's "no network once installed" start cannot count on.
- **plotly.js** (the static edition's charts): the ``plotly`` Python package, which the app already
  installs (requirements.txt), ships the same ``plotly.min.js`` as the npm package of that version.

:func:`ort_dir` gives a folder with onnxruntime-web's files as the page loads them (the ``.wasm``
unpacked once into ``artifacts/vendor/``, checked against its sha256); :func:`plotly_js` the
plotly file. Maintainers renew the copy from npm's install of the tests' JavaScript package
(``tests/``): ``python -m export.vendor --update-from tests/node_modules``; a default-run test
holds the copy equal, file by file, to the package the tests' lock file pins.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from .naming import ARTIFACTS_DIR, ROOT

VENDOR_DIR = ROOT / "web" / "vendor"
VENDOR_JSON = VENDOR_DIR / "vendor.json"
ORT_PACKAGE = "onnxruntime-web"
# What a page needs of onnxruntime-web to run the model: its WebAssembly build, one thread.
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
ORT_WASM = ORT_FILES[2]
GZ = ".gz"
PLOTLY_PACKAGE = "plotly.js-dist-min"
PLOTLY_FILE = "plotly.min.js"


class VendorError(RuntimeError):
    """A vendored file is missing or is not the one :data:`VENDOR_JSON` pins."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def pins(vendor_json: Path = VENDOR_JSON) -> dict:
    """:data:`VENDOR_JSON`: ``{package: {"version", "files": {name: sha256 of the unpacked file}}}``."""
    return json.loads(vendor_json.read_text())


def stored_name(name: str) -> str:
    """The name a file of onnxruntime-web has in the repository (the ``.wasm`` is kept gzipped)."""
    return name + GZ if name == ORT_WASM else name


def ort_dir(out: Path | None = None, vendor_dir: Path = VENDOR_DIR) -> Path:
    """A folder holding :data:`ORT_FILES` as the page loads them: ``out`` (default
    ``artifacts/vendor/onnxruntime-web``), written from the repository's copy when missing or not the
    pinned content. Raises :class:`VendorError` when the repository's copy is incomplete."""
    out = Path(out) if out is not None else ARTIFACTS_DIR / "vendor" / ORT_PACKAGE
    src = vendor_dir / ORT_PACKAGE
    expected = pins(vendor_dir / VENDOR_JSON.name)[ORT_PACKAGE]["files"]
    for name in ORT_FILES:
        target = out / name
        if target.is_file() and sha256(target) == expected[name]:
            continue
        stored = src / stored_name(name)
        if not stored.is_file():
            raise VendorError(f"{stored} is missing: it comes with the repository (git checkout it again)")
        out.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{name}.{os.getpid()}")
        with (gzip.open(stored) if stored.suffix == GZ else open(stored, "rb")) as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        if sha256(tmp) != expected[name]:
            tmp.unlink()
            raise VendorError(f"{stored} is not the {ORT_PACKAGE} file {VENDOR_JSON.name} pins")
        os.replace(tmp, target)  # whole or absent: two starts at once never serve a half-written file
    return out


def plotly_js() -> Path:
    """plotly.min.js as the ``plotly`` Python package ships it, checked against the pinned digest."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / PLOTLY_FILE
    expected = pins()[PLOTLY_PACKAGE]
    if not path.is_file() or sha256(path) != expected["files"][PLOTLY_FILE]:
        raise VendorError(f"{path} is not plotly.js {expected['version']}: install requirements.txt's plotly")
    return path


def update_from(node_modules: Path, vendor_dir: Path = VENDOR_DIR) -> dict:
    """Copy onnxruntime-web's files from an npm install (``node_modules``) into ``vendor_dir`` and
    pin them and plotly.js (versions from the packages' package.json); returns the pins."""
    ort_src = node_modules / ORT_PACKAGE
    plotly_src = node_modules / PLOTLY_PACKAGE
    meta = lambda folder: json.loads((folder / "package.json").read_text())  # noqa: E731
    dest = vendor_dir / ORT_PACKAGE
    dest.mkdir(parents=True, exist_ok=True)
    for name in ORT_FILES:
        src = ort_src / "dist" / name
        if name == ORT_WASM:  # mtime 0: the same bytes from the same file, whenever it is renewed
            with open(src, "rb") as fin, open(dest / stored_name(name), "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        else:
            shutil.copyfile(src, dest / name)
    pinned = {
        ORT_PACKAGE: {"version": meta(ort_src)["version"], "license": meta(ort_src).get("license"), "files": {n: sha256(ort_src / "dist" / n) for n in ORT_FILES}},
        PLOTLY_PACKAGE: {"version": meta(plotly_src)["version"], "license": meta(plotly_src).get("license"), "files": {PLOTLY_FILE: sha256(plotly_src / PLOTLY_FILE)},
                         "from": "the plotly Python package (package_data/plotly.min.js)"},
    }
    (vendor_dir / VENDOR_JSON.name).write_text(json.dumps(pinned, indent=1) + "\n")
    return pinned


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m export.vendor", description=__doc__.split("\n\n")[0])
    ap.add_argument("--update-from", metavar="NODE_MODULES", type=Path,
                    help="renew web/vendor/ from an npm install (npm ci in tests/ first)")
    args = ap.parse_args(argv)
    try:
        if args.update_from:
            pinned = update_from(args.update_from)
            print("pinned: " + ", ".join(f"{k} {v['version']}" for k, v in pinned.items()))
        folder = ort_dir()
        print(f"{ORT_PACKAGE} {pins()[ORT_PACKAGE]['version']}: {folder}")
        print(f"plotly.js {pins()[PLOTLY_PACKAGE]['version']}: {plotly_js()}")
    except (VendorError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
