"""Dependencies run one way (a module can be read and changed from the bottom up): no import circle between the project's modules, and the
folders depend in one order: model/ and runtime/ on nothing of the project, the build (export/)
on them, the app (playground/, app.py) on those, the deployed editions (deploy/) on the app, and
the measurements (benchmarks/) on any."""

from __future__ import annotations

from import_graph import cycles, import_graph, module_files

# Top-level package -> the project packages it may import.
ALLOWED = {
    "model": set(),
    "runtime": set(),
    "export": {"model", "runtime"},
    "playground": {"model", "runtime", "export"},
    "app": {"model", "runtime", "export", "playground"},
    "deploy": {"model", "runtime", "export", "playground"},
    "benchmarks": {"model", "runtime", "export", "playground", "deploy"},
}


def test_no_import_circle_between_modules():
    assert cycles(import_graph()) == []


def test_the_packages_depend_one_way_with_no_exception():
    graph = import_graph()
    assert set(ALLOWED) == {name.split(".")[0] for name in module_files()}
    wrong = sorted(
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if (top := target.split(".")[0]) != module.split(".")[0] and top not in ALLOWED[module.split(".")[0]]
    )
    assert wrong == []


def test_the_browsers_graphs_are_built_from_the_models_own_stages_and_the_editions_above_the_app():
    """The Inside graphs trace model/stages.py, the stage math the app's tab computes with; the
    static edition reads the app's lessons and links from above it."""
    graph = import_graph()
    assert "model.stages" in graph["export.inside_graph"] and "model.stages" in graph["playground.inside"]
    assert any(t.startswith("playground") for t in graph["deploy.static"])
    assert not any(t.startswith("deploy") for m, targets in graph.items() if not m.startswith(("deploy", "benchmarks")) for t in targets)


def test_the_graph_sees_every_kind_of_import():
    """Module level, relative, in a function, a package's own names: the checks above look at real edges."""
    graph = import_graph()
    assert "runtime.sampling" in graph["runtime.batching"]  # from .sampling import ...
    assert "runtime.engine" in graph["export.validate"]  # from runtime.engine import ...
    assert "export.validate" in graph["export"]  # inside ensure_onnx
    assert "export" in graph["export.apart"]  # from . import ensure_onnx, inside a function


def test_a_circle_is_found_however_it_is_written(tmp_path):
    """A circle through a function-level import, and one through a package's ``__init__``."""
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "__init__.py").write_text("")
    (tmp_path / "runtime" / "engine.py").write_text("from .batching import Batch\n")
    (tmp_path / "runtime" / "batching.py").write_text("def step():\n    from .engine import Engine\n")
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "__init__.py").write_text("from .build import build\n")
    (tmp_path / "export" / "build.py").write_text("from playground import tabs\n")
    (tmp_path / "playground").mkdir()
    (tmp_path / "playground" / "__init__.py").write_text("")
    (tmp_path / "playground" / "tabs.py").write_text("from export.naming import ROOT\n")
    (tmp_path / "export" / "naming.py").write_text("ROOT = 1\n")
    (tmp_path / "app.py").write_text("import playground.tabs\n")
    found = cycles(import_graph(tmp_path))
    # playground.tabs -> export.naming runs export/__init__, which reaches playground.tabs again.
    assert found == [["export", "export.build", "playground.tabs"], ["runtime.batching", "runtime.engine"]]


def test_the_editions_commands_answer_by_their_first_names_too():
    """``python -m export.static DIR`` and ``python -m export.space USER/SPACE`` (the names earlier
    docs and scripts use) run deploy/'s modules, which nothing in export/ imports."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for name in ("static", "space"):
        proc = subprocess.run([sys.executable, "-m", f"export.{name}", "--help"], cwd=root, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0 and f"usage: python -m deploy.{name}" in proc.stdout, proc.stdout + proc.stderr
    graph = import_graph()
    assert not any(t.startswith("deploy") for t in graph["export.static"] | graph["export.space"])
