"""The pages' libraries come with the repository and the Python install (export/vendor.py): the
copy is the pinned npm package file for file, it unpacks whole or not at all, nothing a user runs
looks for node_modules, and the static edition builds with Node.js and npm out of reach."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from export import vendor
from static_site import npm_ci

ROOT = Path(__file__).resolve().parents[2]


def test_the_copy_is_the_package_the_tests_lock_file_pins():
    """Content, not form: each vendored file (the wasm unpacked) equals the one npm installs from
    tests/package-lock.json, and plotly's Python package ships the very plotly.js it pins."""
    node_modules = npm_ci()
    lock = json.loads((ROOT / "tests" / "package-lock.json").read_text())["packages"]
    pins = vendor.pins()
    for package in (vendor.ORT_PACKAGE, vendor.PLOTLY_PACKAGE):
        assert pins[package]["version"] == lock[f"node_modules/{package}"]["version"], package
    folder = vendor.ort_dir()
    for name in vendor.ORT_FILES:
        assert (folder / name).read_bytes() == (node_modules / vendor.ORT_PACKAGE / "dist" / name).read_bytes(), name
    assert vendor.plotly_js().read_bytes() == (node_modules / vendor.PLOTLY_PACKAGE / vendor.PLOTLY_FILE).read_bytes()


def test_unpacking_checks_every_file_and_replaces_a_stale_one(tmp_path):
    out = tmp_path / "ort"
    folder = vendor.ort_dir(out)
    wasm = folder / vendor.ORT_WASM
    assert wasm.stat().st_size > 10e6 and wasm.read_bytes()[:4] == b"\0asm"
    wasm.write_bytes(b"\0asm stale")  # an older version left behind
    vendor.ort_dir(out)
    assert vendor.sha256(wasm) == vendor.pins()[vendor.ORT_PACKAGE]["files"][vendor.ORT_WASM]
    # a repository copy that is not the pinned file is refused, and nothing half-written is left
    bad = tmp_path / "vendor"
    (bad / vendor.ORT_PACKAGE).mkdir(parents=True)
    (bad / "vendor.json").write_text(vendor.VENDOR_JSON.read_text())
    for name in vendor.ORT_FILES:
        src = vendor.VENDOR_DIR / vendor.ORT_PACKAGE / vendor.stored_name(name)
        (bad / vendor.ORT_PACKAGE / vendor.stored_name(name)).write_bytes(src.read_bytes())
    (bad / vendor.ORT_PACKAGE / vendor.stored_name(vendor.ORT_WASM)).write_bytes(gzip.compress(b"\0asm not it"))
    with pytest.raises(vendor.VendorError, match="is not the onnxruntime-web file"):
        vendor.ort_dir(tmp_path / "out", vendor_dir=bad)
    assert not (tmp_path / "out" / vendor.ORT_WASM).exists()
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]
    (bad / vendor.ORT_PACKAGE / vendor.stored_name(vendor.ORT_WASM)).unlink()
    with pytest.raises(vendor.VendorError, match="is missing"):
        vendor.ort_dir(tmp_path / "out", vendor_dir=bad)


def test_nothing_a_user_runs_looks_for_node_modules():
    """The app, the build, the editions and the pages: no path into node_modules/ (npm is the tests')."""
    users = [ROOT / "app.py", *[p for folder in ("export", "playground", "runtime", "model", "web")
                                for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".js", ".mjs", ".html")]]
    assert len(users) > 50
    found = [str(p.relative_to(ROOT)) for p in users if p.parts[-3:-1] != ("web", "vendor") and "vendor" not in p.parts
             and re.search(r"node_modules|npm ci", p.read_text())]
    assert found == ["export/vendor.py"]  # its maintainer's command, renewing the copy from npm


@pytest.mark.slow  # a whole static edition built in a child process (the Inside graph too): a minute on 2 cores
def test_the_static_edition_builds_with_node_and_npm_out_of_reach(tmp_path):
    """`python -m deploy.static DIR` as README gives it, with a PATH where neither node nor npm is."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "sh"):  # what a bare system has; node and npm left out
        for folder in ("/usr/bin", "/bin"):
            if Path(folder, tool).exists():
                os.symlink(Path(folder, tool), bin_dir / tool)
                break
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{bin_dir}"}
    for tool in ("node", "npm"):
        assert subprocess.run(["sh", "-c", f"command -v {tool}"], env=env, capture_output=True).returncode != 0
    out = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "deploy.static", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "vendor" / "ort" / "ort.wasm.min.mjs").is_file()
    assert gzip.decompress((out / "vendor" / "ort" / "ort-wasm-simd-threaded.wasm.gz").read_bytes())[:4] == b"\0asm"
    assert gzip.decompress((out / "vendor" / "plotly" / "plotly.min.js.gz").read_bytes()) == vendor.plotly_js().read_bytes()
    files = json.loads((out / "data" / "site.json").read_text())["files"]
    for name in ("vendor/ort/ort-wasm-simd-threaded.wasm.gz", "vendor/plotly/plotly.min.js.gz", "model/model.onnx"):
        assert files[name] == f"{name}?v={vendor.sha256(out / name)[:16]}"  # the address names the content
