"""Inside the model's view on a page, either edition (the app's tab or the static edition's): what
it shows, read from the page as a learner reads it (every stage opened with its heading), and that
against a PyTorch forward pass (playground.inside.forward_pass) on the weights the page names.

``shown(page)`` returns the numbers; ``check_against(numbers, fp, ...)`` compares them stage by
stage with ``fp``, the reference; ``compare_editions(a, b, ...)`` holds two pages' numbers together
(the app's, PyTorch on the fp32 weights, beside the static edition's, onnxruntime-web on the 8-bit
ones). Tolerances are the callers'. Used by tests/browser/test_browser_inside.py, tests/browser/test_static_inside.py
and tests/browser/test_inside_editions.py."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from playground import inside as ins
from playground.tokens import token_label, token_text, visible_whitespace

STAGES = ("embedding", "layernorm", "attention", "residual", "ffn", "lens", "output")

# Everything the view shows at its state, read from its elements (strips: their values; tables:
# their cells; the map: its boxes' numbers).
COLLECT = """() => {
  const view = document.querySelector('.ins-view');
  const text = (el) => (el ? el.textContent : '');
  const strips = {};
  for (const panel of document.querySelectorAll('.ins-view .ins-panel')) {
    strips[panel.dataset.stage] = [...panel.querySelectorAll('.ins-cells[data-v]')].map((c) => [c.dataset.name, c.dataset.v.split(',').map(Number)]);
  }
  const rows = (sel) => [...document.querySelectorAll(sel)].map((tr) => [...tr.cells].map((c) => c.textContent));
  const matrix = document.querySelector('.ins-view .ins-matrix[data-n]');
  return {
    state: {layer: Number(view.dataset.layer), head: Number(view.dataset.head), token: Number(view.dataset.token), tokens: Number(view.dataset.tokens)},
    info: text(document.querySelector('#ins-info')),
    live: Object.fromEntries([...document.querySelectorAll('#ins-map .ins-box')].map((b, i) => [i === 0 ? 'text' : b.dataset.goto.slice(6), text(b.querySelector('.ins-live'))])),
    strips,
    matrix: matrix ? {n: Number(matrix.dataset.n), w: matrix.dataset.w.split(',').map(Number)} : null,
    strongest: rows('.ins-view .ins-strongest tbody tr'),
    chart: [...document.querySelectorAll('.ins-view .ins-chart title')].map((t) => t.textContent),
    ffn: rows('#ins-b-ffn .ins-table tbody tr'),
    fired: [...document.querySelectorAll('#ins-b-ffn p')].map((p) => p.textContent).find((t) => t.includes('units fire')) || '',
    lens: [...document.querySelectorAll('#ins-b-lens .ins-lens tr')].slice(1).map((tr) => ({
      top: [...tr.querySelectorAll('.ins-cand')].map((c) => c.firstChild.textContent.trimEnd()),
      rank: tr.querySelector('td.ins-next') ? Number(tr.querySelector('td.ins-next').dataset.rank) : null,
      p: tr.querySelector('td.ins-next') ? Number(tr.querySelector('td.ins-next').dataset.p) : null,
    })),
    candidates: [...document.querySelectorAll('#ins-b-output .ins-candidates tbody tr')].map((tr) => [Number(tr.dataset.id), Number(tr.cells[1].textContent.replace('−', '-')), Number(tr.cells[2].textContent.replace('%', '')) / 100]),
    losses: [...document.querySelectorAll('#ins-b-output .ins-lt[data-t]')].slice(1).map((s) => Number(/−ln p = ([0-9.]+)/.exec(s.title)[1])),
    loss: Number(document.querySelector('#ins-loss')?.dataset.loss),
    first_ffn: text(document.querySelector('#ins-b-residual .ins-first-ffn')),
  };
}"""


def open_all(page) -> None:
    """Open every folded stage with its heading, as a learner does (a redraw keeps them open)."""
    for anchor in STAGES:
        toggle = page.locator(f"#ins-s-{anchor} .ins-toggle")
        if toggle.get_attribute("aria-expanded") != "true":
            toggle.click()
            page.wait_for_function(f"() => document.querySelector('#ins-s-{anchor} .ins-toggle').getAttribute('aria-expanded') === 'true'")
        page.locator(f"#ins-b-{anchor}").wait_for(state="visible")


def shown(page) -> dict:
    """What the view shows, every stage opened."""
    open_all(page)
    return page.evaluate(COLLECT)


def number(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def live_numbers(live: dict[str, str]) -> dict[str, list[float]]:
    """The numbers in each map box (its token labels left out)."""
    return {k: [number(x) for x in re.findall(r"−?[\d,]*\d(?:\.\d+)?", re.sub(r"token \d+|head \d+|layer \d+", "", v))] for k, v in live.items()}


@dataclass(frozen=True)
class Tolerance:
    """How far a page's numbers may be from the reference: ``value``, any shown value (a strip's
    cell, a norm, a probability); ``loss``, a loss in nats; ``ranks``: whether ranks must be equal
    (up to the near ties of the reference's logits) or only within a factor ``rank_factor``."""

    value: float
    loss: float
    rank_factor: float | None = None  # None: equal ranks (up to near ties)
    fired: int = 0  # units that may fire or not across the editions' rounding


def near_ties(logits: np.ndarray, target: int, eps: float = 1e-4) -> int:
    return int((np.abs(logits - logits[target]) <= eps).sum()) - 1


def _same_rank(got: int, want: int, slack: int, tol: Tolerance, where: str) -> None:
    if tol.rank_factor is None:
        assert abs(got - want) <= slack, f"{where}: rank {got} vs {want}"
    else:
        assert max(got, want) <= tol.rank_factor * min(got, want) + slack, f"{where}: rank {got} vs {want}"


def check_against(numbers: dict, fp: ins.ForwardPass, tol: Tolerance) -> None:
    """Every number the view shows at its state against ``fp``, stage by stage."""
    import torch

    s = numbers["state"]
    layer, head, t = s["layer"], s["head"], s["token"]
    T, tr = len(fp.ids), fp.layers[layer]
    assert s["tokens"] == T
    def close(got, want, where: str, shown_to: float = 0.0) -> None:
        """Within the tolerance, and the half step of the decimals the page writes (``shown_to``)."""
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=tol.value + shown_to, rtol=tol.value, err_msg=where)

    assert numbers["info"].startswith(f"{T} tokens; showing layer {layer}, head {head}, token {t} ({token_label(fp.ids[t])}).")
    # 1 · embedding: E[id], P[t], their sum, the three strips' every value
    emb = dict(numbers["strips"]["embedding"])
    close(emb["= x"], fp.x0[t], "x0")
    close(emb[f"+ P[{t}]"], fp.pos_emb[t], "pos_emb")
    # 2 · LayerNorm of this layer: x, (x − μ)/σ, γ, β, ln_1(x)
    ln = dict(numbers["strips"]["layernorm"])
    block = fp.model.blocks[layer]
    close(ln["x"], tr.x_in[t], f"layer {layer} x_in")
    close(ln["(x−μ)/σ"], (tr.x_in[t] - tr.ln1_mean[t]) / tr.ln1_std[t], f"layer {layer} normalised")
    close(ln["γ"], block.ln_1.weight.detach().numpy(), "gamma")
    close(ln["β"], block.ln_1.bias.detach().numpy(), "beta")
    close(ln["ln_1(x)"], tr.ln1_out[t], f"layer {layer} ln1_out")
    live = live_numbers(numbers["live"])
    close(live["layernorm"], [tr.ln1_mean[t], tr.ln1_std[t]], "the map's μ and σ")  # (three decimals)
    # 3 · attention: q, k, v of every head, the chosen head's whole matrix, its query's strongest keys, concat, c_proj
    att = dict(numbers["strips"]["attention"])
    close(att["q"], tr.q[:, t, :].reshape(-1), "q")
    close(att["k"], tr.k[:, t, :].reshape(-1), "k")
    close(att["v"], tr.v[:, t, :].reshape(-1), "v")
    close(att["concat"], tr.concat[t], "concat")
    close(att["c_proj"], tr.attn_out[t], "c_proj")
    m = numbers["matrix"]
    assert m["n"] == T
    close(m["w"], tr.weights[head][np.tril_indices(T)], f"layer {layer} head {head} weights")  # three decimals
    strongest = [int(r[0]) for r in numbers["strongest"]]
    row = tr.weights[head, t, : t + 1]
    assert strongest[0] == int(np.argmax(row)) or abs(row[strongest[0]] - row.max()) <= tol.value, (strongest, row)
    close([float(r[4]) for r in numbers["strongest"]], row[strongest], "the strongest keys' weights")
    close([number(r[3]) for r in numbers["strongest"]], tr.scores[head, t, strongest], "the strongest keys' q·k/√D", 5e-3)
    # 4 · residual: x, + attention, = x; the chart's norms at every layer
    res = dict(numbers["strips"]["residual"])
    close(res["= x"], tr.x_mid[t], "x_mid")
    norms = [float(x.split("= ")[1]) for x in numbers["chart"]]
    want = []
    for x in fp.layers:
        want += [np.linalg.norm(x.attn_out[t]), np.linalg.norm(x.mlp_out[t])]
    want += [np.linalg.norm(x.x_in[t]) for x in fp.layers]
    close(norms, want, "the residual chart's norms")
    # 5 · FFN: the units that fire, the strongest, GELU, c_proj, x out
    ffn = dict(numbers["strips"]["ffn"])
    close(ffn[f"GELU ({tr.gelu.shape[1]})"], tr.gelu[t], "gelu")
    close(ffn["x out"], tr.x_out[t], "x_out")
    fired = int(re.search(r"(\d+) of \d+ units fire", numbers["fired"]).group(1))
    assert abs(fired - int((tr.gelu[t] > 0).sum())) <= tol.fired, numbers["fired"]
    close([number(r[2]) for r in numbers["ffn"]], np.sort(tr.gelu[t])[::-1][: len(numbers["ffn"])], "the strongest units")
    # 6 · the logit lens at this token: ranks and probabilities of the next token, every layer
    with torch.inference_mode():
        x = torch.from_numpy(np.stack([lt.x_out[t] for lt in fp.layers]))
        lens_logits = ins.output_head(x, fp.model)[0].numpy()
    following = fp.lens_next(t)
    assert len(numbers["lens"]) == len(fp.layers)
    for i, row_ in enumerate(numbers["lens"]):
        if following is None:
            assert row_["rank"] is None
            continue
        rank, p = following[i]
        _same_rank(row_["rank"], rank, near_ties(lens_logits[i], fp.ids[t + 1]), tol, f"lens layer {i}")
        assert abs(row_["p"] - p) <= tol.value + 1e-6, f"lens layer {i}: p {row_['p']} vs {p}"
    if tol.rank_factor is None:  # the same weights: the lens's first choice after every layer
        for i, row_ in enumerate(fp.lens(t)):
            assert numbers["lens"][i]["top"][0] == (visible_whitespace(token_text(row_[0][0])) or "∅"), f"lens layer {i}"
    # 7 · the output: the candidates at this token, every token's loss, their mean
    got_ids = [c[0] for c in numbers["candidates"]]
    assert got_ids[:3] == fp.top_ids[t][:3].tolist(), (got_ids, fp.top_ids[t])
    close([c[2] for c in numbers["candidates"]], fp.top_probs[t][: len(got_ids)], "the candidates' probabilities")  # (two decimals of a %)
    if T > 1:
        np.testing.assert_allclose(numbers["losses"], fp.token_losses, atol=tol.loss + 5e-4)  # (three decimals)
        assert math.isclose(numbers["loss"], fp.loss, abs_tol=tol.loss)


def compare_editions(a: dict, b: dict, tol: Tolerance) -> dict[str, float]:
    """Two pages' numbers at the same state: the same text, tokens and state, every value within
    ``tol``. Returns (and prints) the largest differences seen, by kind."""
    assert a["state"] == b["state"], (a["state"], b["state"])
    assert a["info"].split(").")[0] == b["info"].split(").")[0]  # "N tokens; showing layer L, head H, token T (label"
    seen = {"vectors": 0.0, "weights": float(np.abs(np.subtract(a["matrix"]["w"], b["matrix"]["w"])).max()),
            "probabilities": max(abs(x["p"] - y["p"]) for x, y in zip(a["lens"], b["lens"]) if x["p"] is not None),
            "losses": float(np.abs(np.subtract(a["losses"], b["losses"])).max()), "loss": abs(a["loss"] - b["loss"]),
            "rank factor": max(max(x["rank"], y["rank"]) / min(x["rank"], y["rank"]) for x, y in zip(a["lens"], b["lens"]) if x["rank"])}
    for stage in ("embedding", "layernorm", "attention", "residual", "ffn"):
        got, want = dict(a["strips"][stage]), dict(b["strips"][stage])
        assert got.keys() == want.keys(), stage
        for name in got:
            seen["vectors"] = max(seen["vectors"], float(np.abs(np.subtract(got[name], want[name])).max()))
            np.testing.assert_allclose(got[name], want[name], atol=tol.value, rtol=tol.value, err_msg=f"{stage} {name}")
    print("\nthe editions' largest differences:", {k: round(v, 4) for k, v in seen.items()})
    np.testing.assert_allclose(a["matrix"]["w"], b["matrix"]["w"], atol=tol.value)
    for i, (x, y) in enumerate(zip(a["lens"], b["lens"])):
        if x["rank"] is not None:
            _same_rank(x["rank"], y["rank"], 2, tol, f"lens layer {i}")
            assert abs(x["p"] - y["p"]) <= tol.value, f"lens layer {i}"
    np.testing.assert_allclose(a["losses"], b["losses"], atol=tol.loss)
    assert math.isclose(a["loss"], b["loss"], abs_tol=tol.loss)
    assert [c[0] for c in a["candidates"]][:1] == [c[0] for c in b["candidates"]][:1]
    return seen


def check_one_screen(page) -> None:
    """Each stage opened from the map, alone: the map (not covered by a sticky bar) and the whole
    open stage on the screen at once."""
    height = page.viewport_size["height"]
    for anchor in STAGES:
        page.locator(f'#ins-map .ins-open[data-goto="ins-s-{anchor}"]').last.click()  # (the text's box opens the embedding too)
        page.wait_for_function(f"() => {{ const b = document.querySelector('#ins-b-{anchor}'); return b && !b.hidden && b.childElementCount > 0; }}")
        where = page.evaluate("""(anchor) => {
            const map = document.querySelector('#ins-map').getBoundingClientRect();
            const body = document.querySelector('#ins-b-' + anchor).getBoundingClientRect();
            const seen = document.elementFromPoint(map.left + 6, map.top + 6);
            return {mapTop: map.top, bodyTop: body.top, bodyBottom: body.bottom, mapSeen: Boolean(seen && seen.closest('#ins-map'))};
        }""", anchor)
        assert where["mapTop"] >= -1 and where["mapSeen"], f"{anchor}: the map is off the screen or covered: {where}"
        assert where["bodyBottom"] <= height + 1, f"{anchor}: the stage ends below the screen ({where['bodyBottom']:.0f} > {height}): {where}"
        assert [page.locator(f"#ins-b-{a}").is_visible() for a in STAGES] == [a == anchor for a in STAGES]
