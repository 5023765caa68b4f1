"""Inside the model in the browser's engine (web/engine/inside.js) under Node.js, with
onnxruntime-web's WebAssembly as a page runs it: every stage of its data object against
playground.inside.forward_pass, which computes them by hand in PyTorch (itself checked against
the model's own forward pass by tests/lessons/test_tab_inside.py).

Two references: PyTorch on the weights the browser runs on (the 8-bit file read back by numpy,
export.inside_graph.read_weights), where only float rounding separates them (bound 1e-3, measured
far below it), and PyTorch on the fp32 weights, where the 8-bit rounding shows (bounds measured
2026-11-28 and written below)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from export import hub_dir
from export.inside_graph import HEAD_OUTPUTS, STAGES, built_graphs, dequantized_model, read_weights, write_weights
from model import get_tokenizer, load_pretrained
from playground import inside as ins
from playground.inside_data import inside_data
from playground.wire import plain
from static_site import npm_ci

WEB_TESTS = Path(__file__).resolve().parents[1] / "web"
TEXTS = ("ROMEO.\nWhat say you", ins.EXAMPLE_TEXTS[0], "Romeo")  # the text, the tab's first example, one token
SAME_WEIGHTS = 1e-3  # wasm against PyTorch on the same (dequantized) weights: rounding only
# Against the fp32 model (the 8-bit rounding of every matrix), measured 2026-11-28 on these texts:
# the mean loss moved by at most 0.0133 nats, a top probability by 0.0085.
FP32_LOSS = 0.03
FP32_PROB = 0.03


def run_inside(graphs: tuple[Path, Path], bin_path: Path, index: Path, texts: list[list[int]]) -> list[dict]:
    """The browser engine's data object of each text, its logit lens asked for at every position."""
    npm_ci()
    doc = {"graph": str(graphs[0]), "lens": str(graphs[1]), "weights": str(bin_path), "index": str(index),
           "tokenizer": str(hub_dir() / "tokenizer.json"), "texts": texts}
    proc = subprocess.run(["node", str(WEB_TESTS / "inside_pass.mjs")], input=json.dumps(doc), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["passes"]


@pytest.fixture(scope="module")
def model():
    return load_pretrained()


@pytest.fixture(scope="module")
def files(model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("inside")
    bin_path, index = folder / "weights.bin", folder / "weights.json"
    write_weights(model, bin_path, index)
    return built_graphs(model), bin_path, index


@pytest.fixture(scope="module")
def passes(model, files):
    """(ids, the browser's data, PyTorch's pass on the dequantized weights, on the fp32 weights) per text."""
    graphs, bin_path, index = files
    tok = get_tokenizer()
    ids = [tok.encode(t) for t in TEXTS]
    got = run_inside(graphs, bin_path, index, ids)
    same = dequantized_model(model, read_weights(bin_path, index))
    return [(i, js, ins.forward_pass(same, i), ins.forward_pass(model, i)) for i, js in zip(ids, got)]


def max_diff(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a - b).max()) if a.size else 0.0


def test_every_stage_matches_pytorch_on_the_same_weights(passes):
    worst: dict[str, float] = {}
    for ids, js, fp, _ in passes:
        assert js["ids"] == ids
        for name in ("tok_emb", "pos_emb", "x0"):
            worst[name] = max(worst.get(name, 0), max_diff(js[name], getattr(fp, name)))
        assert len(js["layers"]) == len(fp.layers)
        for layer, (got, want) in enumerate(zip(js["layers"], fp.layers)):
            for name in STAGES:
                d = max_diff(got[name], getattr(want, name))
                assert d <= SAME_WEIGHTS, f"layer {layer} {name}: {d:.2e}"
                worst[name] = max(worst.get(name, 0), d)
        for name in HEAD_OUTPUTS:
            if name in ("top_ids", "next_ranks"):
                continue  # ids and ranks: below, with their near ties
            d = max_diff(js[name], getattr(fp, name))
            assert d <= SAME_WEIGHTS, f"{name}: {d:.2e}"
            worst[name] = max(worst.get(name, 0), d)
        if fp.loss is None:
            assert js["loss"] is None
        else:
            assert abs(js["loss"] - fp.loss) <= SAME_WEIGHTS
    print("largest difference per stage:", {k: f"{v:.1e}" for k, v in worst.items()})


def near_ties(logits: np.ndarray, target: int, eps: float = 1e-4) -> int:
    """How many other tokens score within ``eps`` of ``target``: a rank may move by that many under rounding."""
    return int((np.abs(logits - logits[target]) <= eps).sum()) - 1


def assert_same_tops(got_ids, got_probs, want_ids, want_probs, all_probs: np.ndarray, where: str) -> None:
    assert max_diff(got_probs, want_probs) <= SAME_WEIGHTS, where
    for a, b in zip(got_ids, want_ids):
        # a different id only where the two are tied to within rounding
        assert a == b or abs(all_probs[a] - all_probs[b]) <= 1e-5, f"{where}: {got_ids} vs {want_ids}"


def test_the_logit_lens_and_the_output_match_pytorch_at_every_position(passes, model):
    import torch

    for ids, js, fp, _ in passes:
        T = len(ids)
        logits = fp.logits()
        probs = torch.softmax(torch.from_numpy(logits), -1).numpy()
        for t in range(T):
            assert_same_tops(js["top_ids"][t], js["top_probs"][t], fp.top_ids[t], fp.top_probs[t], probs[t], f"output at {t}")
        for t in range(T - 1):
            assert abs(js["next_ranks"][t] - int(fp.next_ranks[t])) <= near_ties(logits[t], ids[t + 1]), f"output rank at {t}"
        # the lens, one position at a time as the app's tab asks for it (ForwardPass.lens, lens_next)
        for t in range(T):
            with torch.inference_mode():
                x = torch.from_numpy(np.stack([layer.x_out[t] for layer in fp.layers]))
                lens_logits = ins.output_head(x, fp.model)[0].numpy()
            lens_probs = torch.softmax(torch.from_numpy(lens_logits), -1).numpy()
            for layer, row in enumerate(fp.lens(t)):
                want_ids, want_p = zip(*row)
                assert_same_tops(js["lens"]["top_ids"][layer][t], js["lens"]["top_probs"][layer][t], want_ids, want_p,
                                 lens_probs[layer], f"lens layer {layer} at {t}")
            nxt = fp.lens_next(t)
            if nxt is None:
                continue
            for layer, (rank, p) in enumerate(nxt):
                assert abs(js["lens"]["next_ranks"][layer][t] - rank) <= near_ties(lens_logits[layer], ids[t + 1]), f"lens rank {layer} at {t}"
                assert abs(js["lens"]["next_probs"][layer][t] - p) <= SAME_WEIGHTS
            # the opening rule's ranks after layer 0, computed for every position by the stage graph
            assert abs(js["first_ranks"][t] - nxt[0][0]) <= near_ties(lens_logits[0], ids[t + 1]), f"first rank at {t}"
        assert js["opening_token"] == ins.opening_token(fp)


def test_the_8bit_weights_stay_close_to_the_fp32_model(passes):
    """What the 8-bit download costs, against PyTorch on the fp32 weights."""
    worst_loss = worst_prob = 0.0
    for ids, js, _, fp32 in passes:
        if fp32.loss is not None:
            worst_loss = max(worst_loss, abs(js["loss"] - fp32.loss))
        worst_prob = max(worst_prob, max_diff(np.sort(js["top_probs"], -1), np.sort(fp32.top_probs, -1)))
    print(f"8-bit against fp32: mean loss {worst_loss:.4f} nats, top probability {worst_prob:.4f}")
    assert worst_loss <= FP32_LOSS
    assert worst_prob <= FP32_PROB


def test_the_weights_file_holds_the_models_weights_to_half_a_step(model, files):
    """Each int8 row within half its scale of the fp32 row (numpy reading the file, not the JS)."""
    _, bin_path, index = files
    weights = read_weights(bin_path, index)
    state = model.state_dict()
    for entry in json.loads(index.read_text())["tensors"]:
        name = entry["name"]
        want = (model.position_table() if name == "position_table" else state[name]).detach().numpy()
        got = weights[name]
        if entry["dtype"] == "int8":
            step = np.abs(want).max(axis=1, keepdims=True) / 127
            assert np.all(np.abs(got - want) <= step / 2 + 1e-7), name
        else:
            assert np.array_equal(got, want), name
    assert math.isclose(sum(w.size for w in weights.values()), model.num_parameters(), rel_tol=0.01)


# Ids and ranks: equal up to near ties, checked with them above; the rest of the object here.
TIED = {"top_ids", "next_ranks", "top_tokens", "first_ranks", "hidden_max_diff"}  # the last: the app's own check


def same_shape_and_numbers(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert set(got) == set(want), f"{where}: {sorted(set(got) ^ set(want))}"
        for key in want:
            if key not in TIED:
                same_shape_and_numbers(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want)):
            same_shape_and_numbers(a, b, f"{where}[{i}]")
    elif isinstance(want, float):
        assert abs(got - want) <= SAME_WEIGHTS, f"{where}: {got} vs {want}"
    else:
        assert got == want, f"{where}: {got!r} vs {want!r}"


def test_the_browsers_data_object_is_the_apps_in_shape_and_numbers(passes):
    """One shape between the editions: the object web/engine/inside.js gives and the one the app's
    Python writes (playground.inside_data), on the same weights."""
    for _, js, fp, _ in passes:
        want = plain(inside_data(fp))
        same_shape_and_numbers(js, want, "data")
        json.dumps(want)  # plain lists and numbers
