"""The benchmark command's list: every tab's slowest action, those a learner waited longest for (PCA 3D, the
1024 x 512 positional table, a layer change) included."""

from __future__ import annotations

from benchmarks.bench_tabs import TARGET_S, actions, serialise, time_action


def test_every_tab_has_its_slowest_action():
    acts = actions()
    assert {a.tab for a in acts} >= {"Tokenization", "Embeddings", "Positional encoding", "Attention", "Text generation", "Compare"}
    names = " | ".join(a.name for a in acts)
    assert "PCA 3D" in names and "1024 positions x 512" in names and "layer change" in names


def test_an_action_is_timed_with_its_answer_serialised():
    pca = next(a for a in actions() if "PCA 3D" in a.name)
    seconds, size, wire = time_action(pca, repeats=1)
    assert 0 < seconds and size == serialise(pca.run()) > 1000 > 0 < wire < size and TARGET_S == 1.5
