"""The Inside the model tab's panels, drawn from an :class:`playground.inside.InsideResult`.

Plain HTML built from the numbers of the pass, so that a change of layer, head or token only
redraws: a vector is a strip, one PNG image of coloured cells (blue below zero, red above, white at
zero) with its colour range at its right end and its values in a ``data-v`` attribute (the page's
script shows the value under the pointer), its first values are printed, its shape is named; a
head's attention is one image of its whole causal matrix, its axes named by the tokens. Few
elements per panel, so the browser redraws them at once. The map at the top is the overview: each
stage's box carries its live numbers and opens its panel, a ``<section id="ins-s-<stage>">`` whose
body is folded until opened (the page's script keeps which are open: a redraw does not close them),
its heading marked with where it sits in that map. No Gradio.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence

import numpy as np

from .inside import InsideResult, ffn0_of_token_alone, opening_token
from .png_image import png_data_uri
from .tokens import token_text, visible_token, visible_whitespace

__all__ = ["STAGES", "PANELS", "OPEN_FIRST", "map_html", "panels", "residual_chart", "info_markdown", "strip", "strip_colours",
           "matrix_labels", "first_ffn_note"]

# The stages in the map's order: (anchor, title, the map box's detail). Their numbers are their
# places in this list, so the map and the headings count 1, 2, 3... with no gap.
_ORDER = (
    ("embedding", "Embedding"),
    ("layernorm", "LayerNorm"),
    ("attention", "Q, K, V and attention"),
    ("residual", "Residual stream"),
    ("ffn", "Feed-forward network"),
    ("lens", "Logit lens"),
    ("output", "Output and loss"),
)
# (anchor, number, title) of the panels, in the map's order.
STAGES = tuple((anchor, i + 1, title) for i, (anchor, title) in enumerate(_ORDER))
NUMBER = {anchor: n for anchor, n, _ in STAGES}
IN_BLOCK = ("layernorm", "attention", "residual", "ffn")  # the stages repeated in every block
FIRST = 6  # values printed of a vector
STRONGEST = 5  # FFN units listed
NEGATIVE, POSITIVE, ATTENDED = (37, 99, 235), (220, 38, 38), (79, 70, 229)  # blue, red, indigo
MASKED = (226, 232, 240)  # a key after the query: no weight at all
# The stage open when the page is drawn: at the token the tab opens on (inside.opening_token) the
# logit lens shows a prediction form, layer after layer.
OPEN_FIRST = "lens"
MATRIX_LABELS = 32  # token labels per axis of the attention matrix at most (every other one past 32 tokens)
# Layer 0's feed-forward add is explained where it is at least this many times the stream it joins
# and points where the token alone sends it (cosine at least FIRST_FFN_COSINE).
FIRST_FFN_RATIO, FIRST_FFN_COSINE = 5.0, 0.5


def _f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}".replace("-", "−")


def _vec(v: np.ndarray, n: int = FIRST) -> str:
    """``[0.123, −0.456, …]``: the first ``n`` values of a vector."""
    more = ", …" if len(v) > n else ""
    return "[" + ", ".join(_f(float(x)) for x in v[:n]) + more + "]"


def strip_colours(v: np.ndarray, scale: float) -> np.ndarray:
    """``[len(v), 3]`` uint8: white at 0 towards blue (negative) or red (positive), full at
    ``|v| = scale``."""
    v = np.asarray(v, dtype=np.float64)
    a = np.clip(np.abs(v) / (scale or 1.0), 0.0, 1.0)[:, None]
    end = np.where((v < 0)[:, None], np.array(NEGATIVE, dtype=np.float64), np.array(POSITIVE, dtype=np.float64))
    return np.rint(255.0 - a * (255.0 - end)).astype(np.uint8)


def _scale_key(low: str, high: str, gradient: str = "ins-grad-div", middle: str = "") -> str:
    mid = f"<em>{middle}</em>" if middle else ""
    return f'<span class="ins-scale" title="colour scale"><em>{low}</em><i class="{gradient}"></i>{mid}<em>{high}</em></span>'


def strip(v: np.ndarray, label: str, *, scale: float | None = None, groups: int = 1, chosen: int | None = None,
          group_labels: bool = True) -> str:
    """One vector as one row of coloured cells, a single image scaled to the width (on a phone
    too); ``groups`` equal segments (the heads) are marked apart, segment ``chosen`` outlined.
    Its colour range at its right end; the value under the pointer is shown by the page's script
    from ``data-v``."""
    v = np.asarray(v, dtype=np.float64)
    scale = float(scale if scale is not None else np.abs(v).max()) or 1.0
    src = png_data_uri(strip_colours(v, scale)[None])
    n = len(v)
    overlay = ""
    if groups > 1:
        width = 100.0 / groups
        overlay += f'<span class="ins-grid" style="--ins-groups:{groups}"></span>'
        if chosen is not None:
            overlay += f'<span class="ins-seg-on" style="left:{chosen * width:.4f}%;width:{width:.4f}%"></span>'
    labels = ""
    if groups > 1 and group_labels:
        labels = '<span class="ins-heads">' + "".join(
            f'<b{" class=ins-on" if g == chosen else ""}>head {g}</b>' for g in range(groups)) + "</span>"
    values = ",".join(f"{x:.4f}" for x in v)
    smooth = " ins-smooth" if n > 512 else ""  # scaled down: averaged rather than every other cell dropped
    name = html.escape(label)
    return (
        f'<div class="ins-strip"><span class="ins-strip-label">{name}</span>'
        f'<span class="ins-cells" data-v="{values}" data-name="{name}" data-groups="{groups}">{labels}'
        f'<span class="ins-img-wrap"><img class="ins-img{smooth}" src="{src}" alt="{name}: {n} values, colour scale ±{scale:.2f}" '
        f'draggable="false">{overlay}</span></span>'
        + _scale_key(f"−{scale:.2f}", f"+{scale:.2f}")
        + "</div>"
    )


def _key() -> str:
    """How to read a panel's strips."""
    return ('<p class="ins-key">Each strip is one vector, a cell per number: '
            f'{_scale_key("−", "+", middle="0")} blue below 0, white at 0, red above; full colour at the ± range '
            "written at the strip's right end. Hover or touch a cell for its index and value.</p>")


def _here(anchor: str, layer: int | None = None) -> str:
    """A small copy of the map beside a panel's heading, this stage filled: where it sits in the
    data flow (click: the map)."""
    def cell(a: str) -> str:
        return f'<i class="ins-on">{NUMBER[a]}</i>' if a == anchor else f"<i>{NUMBER[a]}</i>"

    inner = "".join(cell(a) for a in IN_BLOCK)
    before = "".join(cell(a) for a, _, _ in STAGES if NUMBER[a] < NUMBER[IN_BLOCK[0]])
    after = "".join(cell(a) for a, _, _ in STAGES if NUMBER[a] > NUMBER[IN_BLOCK[-1]])
    where = f", inside block {layer}" if layer is not None and anchor in IN_BLOCK else ""
    return (f'<a class="ins-here ins-up" href="#ins-map" data-goto="ins-map" '
            f'title="Stage {NUMBER[anchor]} of {len(STAGES)} in the map{where} (click: the map)">'
            f'<span class="ins-here-text">text</span>{before}<span class="ins-here-block">{inner}</span>{after}'
            f'<span class="ins-here-up">↑ map</span></a>')


def _section(anchor: str, body: str, layer: int | None = None) -> str:
    """A stage's panel: its heading a button that folds or opens the body (the open ones are kept by
    the page's script across redraws; ``aria-expanded`` here is the state before any click)."""
    number, title = NUMBER[anchor], next(t for a, _, t in STAGES if a == anchor)
    first = anchor == OPEN_FIRST
    return (f'<section class="ins-panel{" ins-open-first" if first else ""}" id="ins-s-{anchor}" data-stage="{anchor}">'
            f'<h3><button type="button" class="ins-toggle" data-stage="{anchor}" aria-controls="ins-b-{anchor}" '
            f'aria-expanded="{"true" if first else "false"}"><span>{number} · {html.escape(title)}</span></button> '
            f'{_here(anchor, layer)}</h3><div class="ins-body" id="ins-b-{anchor}">{body}</div></section>')


def _code(text: str) -> str:
    return f'<p class="ins-code"><code>{html.escape(text)}</code></p>'


def _p(text: str) -> str:
    return f"<p>{text}</p>"


def _tok(r: InsideResult, i: int) -> str:
    return f'<span class="ins-tok">{html.escape(r.fp.tokens[i])}</span>'


def _shape(*dims: int | str) -> str:
    return "<code>(" + ", ".join(str(d) for d in dims) + ")</code>"


# --- the map ------------------------------------------------------------------------------------


def _n(v: np.ndarray) -> str:
    return _f(float(np.linalg.norm(v)), 2)


def _choosers(kind: str, n: int, chosen: int) -> str:
    """Buttons 0..n-1 that choose a layer or a head (the page's script sets that slider)."""
    return (f'<span class="ins-chips" role="group" aria-label="choose the {kind}">' + "".join(
        f'<button type="button" class="ins-chip{" ins-on" if i == chosen else ""}" data-{kind}="{i}" '
        f'aria-pressed="{"true" if i == chosen else "false"}" title="{kind} {i}">{i}</button>' for i in range(n)) + "</span>")


def _live(r: InsideResult) -> dict[str, str]:
    """Each stage's numbers for the map's boxes, at the chosen layer, head and token."""
    fp, tr, t, h = r.fp, r.trace, r.token, r.head
    T, F = len(fp.ids), tr.gelu.shape[1]
    weights = tr.weights[h, t, : t + 1]
    top = int(np.argmax(weights))
    live = {
        "text": f"token {t} {_tok(r, t)}",
        "embedding": f"‖x‖ = {_n(fp.x0[t])}",
        "layernorm": f"layer {r.layer}: μ {_f(float(tr.ln1_mean[t]))}, σ {_f(float(tr.ln1_std[t]))}",
        "attention": f"head {h}: most to {_tok(r, top)} {float(weights[top]):.2f}",
        "residual": f"‖x‖ {_n(tr.x_in[t])} → {_n(tr.x_out[t])}",
        "ffn": f"{int((tr.gelu[t] > 0).sum())} of {F} fire, add ‖{_n(tr.mlp_out[t])}‖",
    }
    if t + 1 < T:
        ranks = [k for k, _ in r.lens_next(t)]
        p = math.exp(-float(fp.token_losses[t]))
        live["lens"] = f"{_tok(r, t + 1)}: rank {ranks[0]:,} → {ranks[-1]:,}"
        live["output"] = f"p({_tok(r, t + 1)}) = {100 * p:.1f}%, −ln p = {float(fp.token_losses[t]):.2f}"
    else:
        lens = r.lens(t)
        live["lens"] = f"top: {html.escape(visible_token_text(lens[0][0][0]))} → {html.escape(visible_token_text(lens[-1][0][0]))}"
        live["output"] = f"top: {html.escape(visible_token(int(fp.top_ids[t, 0])))} {100 * float(fp.top_probs[t, 0]):.1f}%"
    return live


def map_html(r: InsideResult) -> str:
    """The data flow of the model, drawn from its config, and the overview of the pass: each box
    gives its stage's numbers at the chosen layer, head and token and opens its panel (the text's
    box the first, where the tokens become vectors); the layer and head chips choose them."""
    cfg = r.fp.model.config
    n_tokens = len(r.fp.ids)
    C, H, D, F, V = cfg.d_model, cfg.n_head, cfg.head_dim, 4 * cfg.d_model, cfg.vocab_size
    live = _live(r)

    def box(anchor: str, title: str, detail: str, now: str, numbered: bool = True, extra: str = "") -> str:
        label = f"{NUMBER[anchor]} · {title}" if numbered else title
        return (f'<div class="ins-box" data-goto="ins-s-{anchor}"><button type="button" class="ins-open" '
                f'data-goto="ins-s-{anchor}" aria-controls="ins-b-{anchor}"><b>{html.escape(label)}</b>'
                f'<span>{detail}</span><em class="ins-live">{now}</em></button>{extra}</div>')

    arrow = '<span class="ins-arrow" aria-hidden="true">→</span>'
    block = (
        f'<div class="ins-block"><div class="ins-block-title">block × {cfg.n_layer}: layer '
        f'{_choosers("layer", cfg.n_layer, r.layer)}</div>'
        f'<div class="ins-flow">'
        + box("layernorm", "LayerNorm", "ln_1: mean 0, std 1, × γ + β", live["layernorm"])
        + arrow
        + box("attention", "Q, K, V", f"{H} heads × {D}: softmax(q·k/√{D}) @ V", live["attention"],
              extra=f'<span class="ins-head-chips">head {_choosers("head", H, r.head)}</span>')
        + arrow
        + box("residual", "+ residual", "x + attn(ln_1(x))", live["residual"])
        + arrow
        + box("ffn", "FFN", f"x + mlp(ln_2(x))<br>ln_2 → {C} → {F} → GELU → {C}", live["ffn"])
        + "</div></div>"
    )
    return (
        '<nav class="ins-map" aria-label="The data flow of one forward pass: each box opens its stage">'
        + box("embedding", "text", f"{n_tokens} tokens", live["text"], numbered=False)
        + arrow
        + box("embedding", "Embedding", f"E[ids] + P → ({n_tokens}, {C})", live["embedding"])
        + arrow
        + block
        + arrow
        + box("lens", "Logit lens", "ln_f + head after each layer", live["lens"])
        + arrow
        + box("output", "Output", f"ln_f → h·Eᵀ ({V:,}) → softmax → loss", live["output"])
        + "</nav>"
    )


# --- the panels ---------------------------------------------------------------------------------


def _embedding(r: InsideResult) -> str:
    fp, t = r.fp, r.token
    cfg = fp.model.config
    T, C = len(fp.ids), cfg.d_model
    scale = float(np.abs(fp.x0[t]).max())
    kind = ("the learned position table (a row per position, trained with the model)" if cfg.pos_encoding == "learned"
            else "the sinusoidal table (sin and cos of pos / 10000^(2i/d_model))")
    if cfg.scale_embedding:  # "Attention Is All You Need", section 3.4
        code, row, times = "x = wte(idx) * sqrt(d_model) + pos_table[:T]    # (T, d_model)", f"√{C} · E[{fp.ids[t]}]", (
            f", multiplied by √d_model = {math.sqrt(C):.0f} as in “Attention Is All You Need” (so that it is not drowned "
            f"by the position row it is added to)")
    else:
        code, row, times = "x = wte(idx) + pos_table[:T]    # (T, d_model)", f"E[{fp.ids[t]}]", ""
    return _section("embedding", (
        _code(code)
        + _p(f"Token {t} {_tok(r, t)} is id <b>{fp.ids[t]}</b>: its vector is row {fp.ids[t]} of the embedding table E "
             f"{_shape(f'{cfg.vocab_size:,}', C)}{times}. Position {t} adds row {t} of {kind}. Every token of the text "
             f"gets one row: the block's input has shape {_shape(T, C)}.")
        + _key()
        + strip(fp.tok_emb[t], row, scale=scale)
        + strip(fp.pos_emb[t], f"+ P[{t}]", scale=scale)
        + strip(fp.x0[t], "= x", scale=scale)
        + _p(f"First values: {row} = {_vec(fp.tok_emb[t])}, P[{t}] = {_vec(fp.pos_emb[t])}, "
             f"x = {_vec(fp.x0[t])}")
    ))


def _layernorm(r: InsideResult) -> str:
    tr, t, L = r.trace, r.token, r.layer
    ln = r.fp.model.blocks[L].ln_1
    x = tr.x_in[t]
    gamma, beta = ln.weight.detach().numpy(), ln.bias.detach().numpy()
    return _section("layernorm", (
        _code("ln_1(x) = (x − mean) / √(var + ε) · γ + β    # over the d_model values of one token")
        + _p(f"Layer {L}, token {t} {_tok(r, t)}: before, mean <b>{_f(float(tr.ln1_mean[t]))}</b> and standard "
             f"deviation <b>{_f(float(tr.ln1_std[t]))}</b> (ε = {ln.eps:g}); after the division every token's vector has "
             "mean 0 and standard deviation 1, then the learned γ (scale) and β (shift) of each dimension apply.")
        + strip(x, "x", scale=float(np.abs(x).max()))
        + strip((x - tr.ln1_mean[t]) / tr.ln1_std[t], "(x−μ)/σ", scale=3.0)
        + strip(gamma, "γ", scale=float(np.abs(gamma).max()))
        + strip(beta, "β", scale=float(np.abs(beta).max()))
        + strip(tr.ln1_out[t], "ln_1(x)", scale=float(np.abs(tr.ln1_out[t]).max()))
        + _p(f"First values: x = {_vec(x)}, γ = {_vec(gamma)}, β = {_vec(beta)}, ln_1(x) = {_vec(tr.ln1_out[t])}")
    ), L)


def attention_image(weights: np.ndarray) -> np.ndarray:
    """``[T, T, 3]`` uint8: a head's causal attention, white (weight 0) to indigo (weight 1);
    the cells above the diagonal (later keys, masked) grey."""
    T = weights.shape[0]
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, 1.0)[..., None]
    rgb = np.rint(255.0 - w * (255.0 - np.array(ATTENDED, dtype=np.float64))).astype(np.uint8)
    rgb[np.triu(np.ones((T, T), dtype=bool), k=1)] = MASKED
    return rgb


def matrix_labels(tokens: Sequence[str], chosen: int) -> tuple[str, str]:
    """The attention matrix's axes as (keys across, queries down): each token's label (whitespace
    visible, cut short, as the other figures' axes) centred on its column or row; every other one
    past ``MATRIX_LABELS`` tokens; the chosen query's marked."""
    T = len(tokens)
    step = max(1, -(-T // MATRIX_LABELS))
    keys, queries = [], []
    for i in range(0, T, step):
        at, label = f"{(i + 0.5) * 100.0 / T:.4f}%", html.escape(tokens[i])
        on = ' class="ins-on"' if i == chosen else ""
        keys.append(f'<span style="left:{at}" title="key {i}">{label}</span>')
        queries.append(f'<span{on} style="top:{at}" title="query {i}">{label}</span>')
    return (f'<div class="ins-xlabels" aria-hidden="true">{"".join(keys)}</div>',
            f'<div class="ins-ylabels" aria-hidden="true">{"".join(queries)}</div>')


def _matrix(r: InsideResult) -> str:
    """The chosen head's whole attention matrix, queries down and keys across, both named by their
    tokens, the chosen query's row outlined; its weights (lower triangle, row by row) in
    ``data-w`` for the hover."""
    fp, tr, t, h = r.fp, r.trace, r.token, r.head
    T = len(fp.ids)
    w = tr.weights[h]
    rows = np.tril_indices(T)
    values = ",".join(f"{x:.3f}" for x in w[rows])
    tokens = html.escape(json.dumps(fp.tokens, ensure_ascii=False), quote=True)
    row = 100.0 / T
    keys, queries = matrix_labels(fp.tokens, t)
    return (
        '<div class="ins-matrix-wrap"><div class="ins-matrix-axes"><span class="ins-axis-x">keys (attended to) →</span>'
        f'<span class="ins-axis-y">queries ↓</span>{keys}{queries}'
        f'<div class="ins-matrix" data-w="{values}" data-n="{T}" data-tokens="{tokens}">'
        f'<img class="ins-img" src="{png_data_uri(attention_image(w))}" draggable="false" '
        f'alt="layer {r.layer}, head {h}: attention of every query (rows) to every key (columns)">'
        f'<span class="ins-qrow" style="top:{t * row:.4f}%;height:{row:.4f}%"></span></div></div>'
        + _scale_key("0", "1", "ins-grad-att")
        + '<span class="ins-masked-key"><i></i> masked (a later key)</span></div>'
    )


def _attention(r: InsideResult) -> str:
    fp, tr, t, h, L = r.fp, r.trace, r.token, r.head, r.layer
    cfg = fp.model.config
    T, C, H, D = len(fp.ids), cfg.d_model, cfg.n_head, cfg.head_dim
    # [C] each: head h's D values are columns h*D .. h*D+D-1 of the projection
    q_row, k_row, v_row = (m[:, t, :].reshape(-1) for m in (tr.q, tr.k, tr.v))
    scores, weights = tr.scores[h, t], tr.weights[h, t]
    dots = scores * math.sqrt(D)

    def row(j: int) -> str:
        w = float(weights[j])
        return (f'<tr><td>{j}</td><td>{html.escape(fp.tokens[j])}</td><td>{_f(float(dots[j]), 2)}</td><td>{_f(float(scores[j]), 2)}</td>'
                f'<td class="ins-bar"><span style="width:{100 * w:.1f}%"></span><em>{w:.3f}</em></td></tr>')

    head_row = f"<thead><tr><th>key</th><th>token</th><th>q·k</th><th>÷ √{D}</th><th>weight</th></tr></thead>"
    strongest = np.argsort(-weights[: t + 1], kind="stable")[:STRONGEST]
    rows = [row(j) for j in range(t + 1)]
    future = T - 1 - t
    if future:
        rows.append(f'<tr class="ins-masked"><td>{t + 1}–{T - 1}</td><td colspan="2">{future} later token{"s" if future > 1 else ""}: masked</td>'
                    f"<td>−inf</td><td>0</td></tr>")
    concat = tr.concat[t]
    top = int(np.argmax(weights[: t + 1]))
    return _section("attention", (
        _code(f"q, k, v = c_attn(ln_1(x)).split({C}, dim=-1)    # each (T, {C})")
        + _code(f"q = q.view(T, {H}, {D}).transpose(0, 1)    # ({T}, {C}) → ({H}, {T}, {D}): {H} heads of {D}")
        + _p(f"One matrix multiplication gives every token its query, key and value ({C} values each); the {C} values "
             f"are cut into {H} heads of {D}, and each head attends on its own. Token {t} {_tok(r, t)}'s query, key "
             f"and value, split (head {h} outlined):")
        + strip(q_row, "q", groups=H, chosen=h)
        + strip(k_row, "k", groups=H, chosen=h, group_labels=False)
        + strip(v_row, "v", groups=H, chosen=h, group_labels=False)
        + _code(f"wei = q @ k.transpose(-2, -1) / √{D};  wei.masked_fill(tril == 0, −inf);  softmax;  out = wei @ v")
        + _p(f"Layer {L}, head {h}: every query against every key at once, a {_shape(T, T)} matrix per head. The dot "
             f"product q·k, divided by √{D} = {math.sqrt(D):.2f}; the causal mask hides each query's later keys (−inf, "
             f"grey above the diagonal) and softmax turns each row into weights that sum to 1. Query {t} {_tok(r, t)} "
             f"is the outlined row; it attends most to key {top} {_tok(r, top)} ({float(weights[top]):.3f}). Hover a "
             "cell for its weight; click a row to choose that token.")
        + _matrix(r)
        + _p(f"Query {t}'s strongest keys, the row's numbers step by step:")
        + f'<div class="ins-table-wrap"><table class="ins-table ins-strongest">{head_row}<tbody>'
        + "".join(row(int(j)) for j in strongest) + "</tbody></table></div>"
        + f'<details class="ins-details"><summary>Query {t}\'s whole row, key by key ({t + 1} keys'
        + (", then the masked later ones" if future else "") + ")</summary>"
        + f'<div class="ins-table-wrap"><table class="ins-table">{head_row}<tbody>' + "".join(rows)
        + "</tbody></table></div></details>"
        + _p(f"The head's output is the weighted sum of the value vectors: {_shape(D)} = {_vec(tr.head_out[h, t])}")
        + strip(tr.head_out[h, t], f"head {h} out", scale=float(np.abs(concat).max()))
        + _p(f"The {H} heads' outputs side by side (concatenated) make {C} values again; the output projection "
             f"<code>c_proj</code> ({C} → {C}) mixes them:")
        + strip(concat, "concat", groups=H, chosen=h)
        + strip(tr.attn_out[t], "c_proj", scale=float(np.abs(tr.attn_out[t]).max()))
    ), L)


def _residual(r: InsideResult) -> str:
    tr, t, L = r.trace, r.token, r.layer
    scale = float(np.abs(tr.x_mid[t]).max())
    n = lambda v: _f(float(np.linalg.norm(v)), 2)  # noqa: E731
    return _section("residual", (
        _code("x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))")
        + _p(f"Each block adds to the token's vector rather than replacing it: the residual stream. Layer {L}, token {t} "
             f"{_tok(r, t)}: ‖x‖ = <b>{n(tr.x_in[t])}</b>, attention adds a vector of norm <b>{n(tr.attn_out[t])}</b> "
             f"(‖x + attention‖ = {n(tr.x_mid[t])}), the feed-forward network one of norm <b>{n(tr.mlp_out[t])}</b> "
             f"(‖x‖ after the block = {n(tr.x_out[t])}).")
        + strip(tr.x_in[t], "x", scale=scale)
        + strip(tr.attn_out[t], "+ attention", scale=scale)
        + strip(tr.x_mid[t], "= x", scale=scale)
        + _p(f"Token {t} {_tok(r, t)}'s stream over all {len(r.fp.layers)} layers (layer {L} marked):")
        + residual_chart(r)
        + first_ffn_note(r)
    ), L)


def first_ffn_note(r: InsideResult) -> str:
    """Why layer 0's feed-forward add dwarfs the stream, where it does: it is mostly the token's
    own (what the network writes from the token's embedding row alone points the same way), a
    second embedding for the layers above. Empty where the add is not large or not the token's."""
    fp, t = r.fp, r.token
    first = fp.layers[0]
    add, stream = float(np.linalg.norm(first.mlp_out[t])), float(np.linalg.norm(first.x_in[t]))
    alone = ffn0_of_token_alone(fp, t)
    cosine = float(alone @ first.mlp_out[t] / (np.linalg.norm(alone) * add or 1.0))
    if add < FIRST_FFN_RATIO * stream or cosine < FIRST_FFN_COSINE:
        return ""
    return _p(f"Why layer 0's feed-forward add dwarfs the stream (‖{add:.2f}‖ on ‖{stream:.2f}‖): it writes a second, larger "
              f"embedding of the token, set mostly by the token itself (run on {_tok(r, t)}'s embedding row alone, without "
              f"its position or attention, it gives a vector at cosine <b>{cosine:.2f}</b> to the one it adds here), and "
              "the layers above read the stream through LayerNorms, which undo its size.")


def _nice_step(top: float) -> float:
    """A round tick step giving 3 to 6 ticks up to ``top``."""
    raw = top / 4 or 1.0
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def residual_norms(r: InsideResult) -> dict[str, list[float]]:
    """Per layer, for the chosen token: the norm of the stream entering it, and of what attention
    and the feed-forward network add."""
    t = r.token
    norm = lambda a: [float(np.linalg.norm(x)) for x in a]  # noqa: E731
    return {
        "attention": norm(tr.attn_out[t] for tr in r.fp.layers),
        "ffn": norm(tr.mlp_out[t] for tr in r.fp.layers),
        "entering": norm(tr.x_in[t] for tr in r.fp.layers),
    }


def residual_chart(r: InsideResult) -> str:
    """The residual stream layer by layer as an inline SVG (a few dozen shapes, drawn with the
    panel): bars for the norms attention and the FFN add, a line for the norm entering each
    layer; the chosen layer shaded. Each shape's tooltip gives its value."""
    norms = residual_norms(r)
    n = len(norms["entering"])
    W, Hh, left, right, top, bottom = 640, 230, 44, 10, 28, 30
    top_value = max(max(v) for v in norms.values()) * 1.08 or 1.0
    step = _nice_step(top_value)
    y = lambda v: top + (Hh - top - bottom) * (1 - v / top_value)  # noqa: E731
    slot = (W - left - right) / n
    bar = slot * 0.3
    parts = [f'<svg class="ins-chart" viewBox="0 0 {W} {Hh}" role="img" '
             f'aria-label="Token {r.token}: the residual stream layer by layer">']
    tick = 0.0
    while tick <= top_value:
        parts.append(f'<line x1="{left}" x2="{W - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="ins-gridline"/>'
                     f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
        tick += step
    line = []
    for i in range(n):
        x0 = left + i * slot
        if i == r.layer:
            parts.append(f'<rect x="{x0:.1f}" y="{top}" width="{slot:.1f}" height="{Hh - top - bottom}" class="ins-chart-on"/>')
        for k, (key, cls, what) in enumerate((("attention", "ins-c-att", "attention added"), ("ffn", "ins-c-ffn", "FFN added"))):
            v = norms[key][i]
            bx = x0 + slot / 2 - bar + k * bar
            parts.append(f'<rect x="{bx:.1f}" y="{y(v):.1f}" width="{bar:.1f}" height="{y(0) - y(v):.1f}" class="{cls}">'
                         f"<title>layer {i}: ‖{what}‖ = {v:.3f}</title></rect>")
        line.append((x0 + slot / 2, y(norms["entering"][i])))
        parts.append(f'<text x="{x0 + slot / 2:.1f}" y="{Hh - bottom + 16}" text-anchor="middle">layer {i}</text>')
    parts.append('<polyline class="ins-c-line" points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in line) + '"/>')
    for i, (a, b) in enumerate(line):
        parts.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="4" class="ins-c-dot"><title>layer {i}: ‖x‖ entering = '
                     f'{norms["entering"][i]:.3f}</title></circle>')
    legend = (("ins-c-att", "‖attention added‖"), ("ins-c-ffn", "‖FFN added‖"), ("ins-c-dot", "‖x‖ entering"))
    for k, (cls, text) in enumerate(legend):
        lx = left + k * 170
        parts.append(f'<rect x="{lx}" y="6" width="12" height="12" class="{cls}"/><text x="{lx + 17}" y="16">{text}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _ffn(r: InsideResult) -> str:
    tr, t, L = r.trace, r.token, r.layer
    C = r.fp.model.config.d_model
    F = tr.gelu.shape[1]
    act, pre = tr.gelu[t], tr.fc[t]
    fired = int((act > 0).sum())
    top = np.argsort(-act)[:STRONGEST]
    rows = "".join(f"<tr><td>{u}</td><td>{_f(float(pre[u]))}</td><td>{_f(float(act[u]))}</td></tr>" for u in top)
    return _section("ffn", (
        _code(f"mlp(x) = c_proj(gelu(c_fc(ln_2(x))))    # {C} → {F} → {C}, each token on its own")
        + _p(f"Layer {L}, token {t} {_tok(r, t)}: ln_2 (mean {_f(float(tr.ln2_mean[t]))}, std {_f(float(tr.ln2_std[t]))}), "
             f"then the up-projection to {F} units. GELU (tanh form: 0.5·u·(1 + tanh(√(2/π)(u + 0.044715u³)))) lets "
             f"positive values through and squashes negative ones to near 0: <b>{fired} of {F}</b> units fire (> 0) for "
             "this token. The strongest:")
        + '<div class="ins-table-wrap"><table class="ins-table"><thead><tr><th>unit</th><th>before GELU</th><th>after</th>'
          f"</tr></thead><tbody>{rows}</tbody></table></div>"
        + strip(act, f"GELU ({F})", scale=float(np.abs(act).max()))
        + _p(f"The down-projection brings the {F} values back to {C}, added to the stream (‖added‖ = "
             f"{_f(float(np.linalg.norm(tr.mlp_out[t])), 2)}):")
        + strip(tr.mlp_out[t], "c_proj", scale=float(np.abs(tr.x_out[t]).max()))
        + strip(tr.x_out[t], "x out", scale=float(np.abs(tr.x_out[t]).max()))
    ), L)


def _chips(row: Sequence[tuple[str, float]], target: str | None = None) -> str:
    out = []
    for text, p in row:
        cls = "ins-cand ins-hit" if target is not None and text == target else "ins-cand"
        out.append(f'<span class="{cls}">{html.escape(visible_token_text(text))} <em>{100 * p:.1f}%</em></span>')
    return "".join(out)


def visible_token_text(text: str) -> str:
    """A token's text as the other tabs show it: whitespace visible (⋅ → ↵)."""
    return visible_whitespace(text) or "∅"


def _lens(r: InsideResult) -> str:
    fp, t = r.fp, r.token
    V = fp.model.config.vocab_size
    target = token_text(fp.ids[t + 1]) if t + 1 < len(fp.ids) else None
    following = r.lens_next(t)
    n = len(fp.layers)
    head = "<tr><th>stop after</th><th>top 5 next tokens</th>"
    if following is not None:
        head += f"<th>{_tok(r, t + 1)}: rank, probability</th>"
    rows = [head + "</tr>"]
    for i, row in enumerate(r.lens(t)):
        label = f"after layer {i}" + (" = the output" if i == n - 1 else "")
        cls = ' class="ins-row-on"' if i == r.layer else ""
        cell = ""
        if following is not None:
            rank, p = following[i]
            top = " ins-top" if rank == 1 else ""
            cell = (f'<td class="ins-next{top}" data-rank="{rank}" data-p="{p:.6g}">rank <b>{rank:,}</b> '
                    f"<em>{100 * p:.2f}%</em></td>")
        rows.append(f'<tr{cls}><td>{label}</td><td>{_chips(row, target)}</td>{cell}</tr>')
    if target is not None:
        ranks = [k for k, _ in following]
        came = (f"The token that really came next, {_tok(r, t + 1)}, is outlined where it is in a top 5; the last "
                f"column gives its rank among all {V:,} tokens (1 = the lens's first choice) and its probability "
                f"after every layer: rank {ranks[0]:,} after layer 0, {ranks[-1]:,} at the output.")
    else:
        came = "This is the text's last token: the model's guess for what comes after the text."
    return _section("lens", (
        _code("lens(x_ℓ) = softmax(ln_f(x_ℓ) @ E.T)    # stop after layer ℓ")
        + _p(f"If the model stopped after each layer (the final LayerNorm and the output head applied to the stream "
             f"there), what would it predict after token {t} {_tok(r, t)}? The prediction forms layer by layer. {came}")
        + '<div class="ins-table-wrap"><table class="ins-table ins-lens">' + "".join(rows) + "</table></div>"
    ))


def _surprise(loss: float, scale: float) -> str:
    a = min(loss / scale, 1.0)
    return f"rgba(234, 88, 12, {0.06 + 0.8 * a:.2f})"


def _loss_text(r: InsideResult) -> str:
    fp = r.fp
    V = fp.model.config.vocab_size
    scale = math.log(V)
    # data-t: the position whose prediction the token was (a click shows that position)
    spans = [f'<span class="ins-lt ins-first" data-t="0" title="0: the first token (nothing predicts it)">'
             f"{html.escape(_text_of(fp.ids[0]))}</span>"]
    for i, loss in enumerate(fp.token_losses, start=1):
        p = math.exp(-loss)
        cls = "ins-lt ins-on" if i == r.token + 1 else "ins-lt"
        spans.append(f'<span class="{cls}" data-t="{i - 1}" style="background:{_surprise(float(loss), scale)}" '
                     f'title="{i}: −ln p = {loss:.3f} nats (p = {100 * p:.2f}%)">{html.escape(_text_of(fp.ids[i]))}</span>')
    mean = "–" if fp.loss is None else f"{fp.loss:.3f}"
    return (
        f'<div class="ins-loss-text">{"".join(spans)}</div>'
        f'<div class="pg-cards"><div class="pg-card"><b>{mean}</b><span>loss: the mean of {len(fp.token_losses)} values (nats)</span></div>'
        f'<div class="pg-card"><b>{scale:.3f}</b><span>ln {V:,}: a model that knows nothing</span></div>'
        f'<div class="pg-card"><b>{math.exp(fp.loss) if fp.loss is not None else float("nan"):,.1f}</b><span>perplexity e^loss</span></div></div>'
    )


def _text_of(token_id: int) -> str:
    return token_text(token_id).replace("\n", "↵\n")


def _output(r: InsideResult) -> str:
    fp, t = r.fp, r.token
    cfg = fp.model.config
    T, C, V = len(fp.ids), cfg.d_model, cfg.vocab_size
    lse = float(fp.logsumexp[t])
    target = fp.ids[t + 1] if t + 1 < T else None
    bars = []
    for i, lg, p in zip(fp.top_ids[t], fp.top_logits[t], fp.top_probs[t]):
        cls = ' class="ins-hit"' if target is not None and int(i) == target else ""
        bars.append(f'<tr{cls}><td>{html.escape(visible_token(int(i)))}</td><td>{_f(float(lg), 2)}</td>'
                    f'<td class="ins-bar"><span style="width:{100 * p:.1f}%"></span><em>{100 * p:.2f}%</em></td></tr>')
    if target is not None:
        k = t  # token_losses[k] predicts ids[k + 1]
        loss = float(fp.token_losses[k])
        came = (f"What really came next, {_tok(r, t + 1)} (id {target}): logit {_f(float(fp.next_logits[k]), 2)}, "
                f"p = {100 * math.exp(-loss):.2f}%, rank {int(fp.next_ranks[k])} of {V:,}; its loss −ln p = <b>{loss:.3f}</b> nats.")
    else:
        came = "This is the last token: nothing in the text came next, so it adds no loss."
    return _section("output", (
        _code("h = ln_f(x);  logits = h @ E.T;  p = softmax(logits);  loss = −ln p[next]")
        + _p(f"After the last block the final LayerNorm (token {t}: mean {_f(float(fp.lnf_mean[t]))}, std "
             f"{_f(float(fp.lnf_std[t]))}) gives h {_shape(T, C)}. The logits are h times the transpose of the same "
             f"embedding matrix E {_shape(f'{V:,}', C)} as stage {NUMBER['embedding']} (weight tying): {_shape(T, f'{V:,}')}, one score "
             f"per token of the vocabulary. Softmax: p = e^logit / Σ e^logit (here Σ = e^{lse:.2f}). After "
             f"{_tok(r, t)} the most probable next tokens:")
        + '<div class="ins-table-wrap"><table class="ins-table"><thead><tr><th>token</th><th>logit</th><th>probability</th></tr>'
          f"</thead><tbody>{''.join(bars)}</tbody></table></div>"
        + _p(came)
        + _p("The loss of every token of the text, −ln p of the token that really came next, given those before it "
             "(the darker, the more it surprised the model; hover for the numbers, click a token to see the prediction "
             "that led to it; the chosen token's next is outlined):")
        + _loss_text(r)
    ))


# Each stage's panel, by its anchor in STAGES.
PANELS = {
    "embedding": _embedding, "layernorm": _layernorm, "attention": _attention, "residual": _residual,
    "ffn": _ffn, "lens": _lens, "output": _output,
}


def panels(r: InsideResult) -> tuple[str, ...]:
    """The HTML of the panels in the order of :data:`STAGES`."""
    return tuple(PANELS[anchor](r) for anchor, _, _ in STAGES)


def opening_line(r: InsideResult) -> str:
    """Why the tab opens on this token, while it shows it: its next token climbs through the logit
    lens more than any other's (empty at another token, or where none climbs)."""
    fp, t = r.fp, r.token
    if len(fp.ids) < 2 or t != opening_token(fp):
        return ""
    first, last = int(fp.first_layer_ranks()[t]), int(fp.next_ranks[t])
    if first <= last:
        return ""
    return (f" Opened here: of the text's tokens, this one's next ({fp.tokens[t + 1]}) climbs most through the logit lens, "
            f"rank {first:,} after layer 0 → {last:,} at the output.")


def info_markdown(r: InsideResult) -> str:
    fp = r.fp
    return (
        f"{len(fp.ids)} tokens; showing layer {r.layer}, head {r.head}, token {r.token} ({fp.tokens[r.token]}).{opening_line(r)} "
        f"Check: the last hidden state computed here stage by stage matches the model's own forward pass to "
        f"{fp.hidden_max_diff:.1e}."
    )
