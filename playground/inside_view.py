"""The Inside the model tab's panels, drawn from an :class:`playground.inside.InsideResult`.

Plain HTML (and one plotly figure) built from the numbers of the pass, so that a change of
layer, head or token only redraws: a vector is a strip of coloured cells (blue below zero, red
above, white at zero; the hover gives each value), its first values are printed, its shape is
named. Each panel is a ``<section id="ins-s-<stage>">`` the map at the top links to. No Gradio.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from model import GPTConfig

from .inside import InsideResult
from .plots import base_layout
from .tokens import token_text, visible_token, visible_whitespace

__all__ = ["STAGES", "PANELS", "map_html", "panels", "residual_figure", "info_markdown"]

# (anchor, number, title) of the panels, in the map's order.
STAGES = (
    ("embedding", 1, "Embedding"),
    ("layernorm", 2, "LayerNorm"),
    ("attention", 3, "Q, K, V and attention"),
    ("residual", 4, "Residual stream"),
    ("ffn", 5, "Feed-forward network"),
    ("lens", 7, "Logit lens"),
    ("output", 8, "Output and loss"),
)
FIRST = 6  # values printed of a vector
STRONGEST = 5  # FFN units listed


def _f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}".replace("-", "−")


def _vec(v: np.ndarray, n: int = FIRST) -> str:
    """``[0.123, −0.456, …]``: the first ``n`` values of a vector."""
    more = ", …" if len(v) > n else ""
    return "[" + ", ".join(_f(float(x)) for x in v[:n]) + more + "]"


def _colours(v: np.ndarray, scale: float) -> list[str]:
    """Blue (negative) — white — red (positive) as hex, saturated at ``|v| = scale``."""
    a = np.clip(np.abs(v) / (scale or 1.0), 0.0, 1.0)
    neg = v < 0
    # white (255) towards blue (37, 99, 235) or red (220, 38, 38)
    r = np.where(neg, 255 - a * (255 - 37), 255 - a * (255 - 220))
    g = np.where(neg, 255 - a * (255 - 99), 255 - a * (255 - 38))
    b = np.where(neg, 255 - a * (255 - 235), 255 - a * (255 - 38))
    return [f"#{int(x):02x}{int(y):02x}{int(z):02x}" for x, y, z in zip(r, g, b)]


def strip(v: np.ndarray, label: str, *, scale: float | None = None, groups: int = 1, chosen: int | None = None,
          first: int = 0, group_labels: bool = True) -> str:
    """One vector as a row of cells (wrapping on a narrow screen); ``groups`` equal segments
    (the heads) are marked apart, segment ``chosen`` outlined. Hover: index and value."""
    v = np.asarray(v, dtype=np.float64)
    scale = scale if scale is not None else float(np.abs(v).max())
    colours = _colours(v, scale)
    size = len(v) // groups
    cells = []
    for g in range(groups):
        part = "".join(
            f'<i style="background:{colours[i]}" title="{first + i}: {v[i]:.4f}"></i>' for i in range(g * size, (g + 1) * size)
        )
        cls = "ins-seg ins-on" if chosen == g else "ins-seg"
        tag = f'<b class="ins-seg-label">head {g}</b>' if groups > 1 and group_labels else ""
        cells.append(f'<span class="{cls}">{tag}{part}</span>')
    return f'<div class="ins-strip"><span class="ins-strip-label">{html.escape(label)}</span><span class="ins-cells">{"".join(cells)}</span></div>'


def _section(anchor: str, body: str) -> str:
    number, title = next((n, t) for a, n, t in STAGES if a == anchor)
    return (f'<section class="ins-panel" id="ins-s-{anchor}"><h3>{number} · {html.escape(title)} '
            f'<a class="ins-up" href="#ins-map" data-goto="ins-map">↑ map</a></h3>{body}</section>')


def _code(text: str) -> str:
    return f'<p class="ins-code"><code>{html.escape(text)}</code></p>'


def _p(text: str) -> str:
    return f"<p>{text}</p>"


def _tok(r: InsideResult, i: int) -> str:
    return f'<span class="ins-tok">{html.escape(r.fp.tokens[i])}</span>'


def _shape(*dims: int | str) -> str:
    return "<code>(" + ", ".join(str(d) for d in dims) + ")</code>"


# --- 9 · the map --------------------------------------------------------------------------------


def map_html(cfg: GPTConfig, layer: int, head: int, n_tokens: int) -> str:
    """The data flow of the model, drawn from its config: each box links to its panel; the
    chosen layer and head are highlighted."""
    C, H, D, F, V = cfg.d_model, cfg.n_head, cfg.head_dim, 4 * cfg.d_model, cfg.vocab_size

    def box(anchor: str, title: str, detail: str) -> str:
        return (f'<a class="ins-box" href="#ins-s-{anchor}" data-goto="ins-s-{anchor}">'
                f"<b>{html.escape(title)}</b><span>{detail}</span></a>")

    arrow = '<span class="ins-arrow" aria-hidden="true">→</span>'
    layers = "".join(f'<span class="ins-chip{" ins-on" if i == layer else ""}">{i}</span>' for i in range(cfg.n_layer))
    heads = "".join(f'<span class="ins-chip{" ins-on" if i == head else ""}">{i}</span>' for i in range(H))
    block = (
        f'<div class="ins-block"><div class="ins-block-title">block × {cfg.n_layer}: layer {layers}</div>'
        f'<div class="ins-flow">'
        + box("layernorm", "2 · LayerNorm", "ln_1: mean 0, std 1, × γ + β")
        + arrow
        + box("attention", "3 · Q, K, V", f"{H} heads × {D}: {heads}<br>softmax(q·k/√{D}) @ V")
        + arrow
        + box("residual", "4 · + residual", "x + attention(x)")
        + arrow
        + box("ffn", "5 · FFN", f"ln_2 → {C} → {F} → GELU → {C}, + x")
        + "</div></div>"
    )
    return (
        '<nav class="ins-map" aria-label="The data flow of one forward pass">'
        + box("output", "text", f"{n_tokens} tokens")
        + arrow
        + box("embedding", "1 · Embedding", f"E[ids] + P → ({n_tokens}, {C})")
        + arrow
        + block
        + arrow
        + box("lens", "7 · Logit lens", "ln_f + head after each layer")
        + arrow
        + box("output", "8 · Output", f"ln_f → h·Eᵀ ({V:,}) → softmax → loss")
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
    ))


def _attention(r: InsideResult) -> str:
    fp, tr, t, h, L = r.fp, r.trace, r.token, r.head, r.layer
    cfg = fp.model.config
    T, C, H, D = len(fp.ids), cfg.d_model, cfg.n_head, cfg.head_dim
    # [C] each: head h's D values are columns h*D .. h*D+D-1 of the projection
    q_row, k_row, v_row = (m[:, t, :].reshape(-1) for m in (tr.q, tr.k, tr.v))
    scores, weights = tr.scores[h, t], tr.weights[h, t]
    dots = scores * math.sqrt(D)
    rows = []
    for j in range(t + 1):
        w = float(weights[j])
        rows.append(
            f'<tr><td>{j}</td><td>{html.escape(fp.tokens[j])}</td><td>{_f(float(dots[j]), 2)}</td><td>{_f(float(scores[j]), 2)}</td>'
            f'<td class="ins-bar"><span style="width:{100 * w:.1f}%"></span><em>{w:.3f}</em></td></tr>'
        )
    future = T - 1 - t
    if future:
        rows.append(f'<tr class="ins-masked"><td>{t + 1}–{T - 1}</td><td colspan="2">{future} later token{"s" if future > 1 else ""}: masked</td>'
                    f"<td>−inf</td><td>0</td></tr>")
    concat = tr.concat[t]
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
        + _p(f"Layer {L}, head {h}: token {t}'s query against the key of every token. The dot product q·k, divided by "
             f"√{D} = {math.sqrt(D):.2f}, then the causal mask hides the later tokens (−inf), and softmax turns the row "
             "into weights that sum to 1:")
        + '<div class="ins-table-wrap"><table class="ins-table"><thead><tr><th>key</th><th>token</th><th>q·k</th>'
          f"<th>÷ √{D}</th><th>weight</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
        + _p(f"The head's output is the weighted sum of the value vectors: {_shape(D)} = {_vec(tr.head_out[h, t])}")
        + strip(tr.head_out[h, t], f"head {h} out", scale=float(np.abs(concat).max()))
        + _p(f"The {H} heads' outputs side by side (concatenated) make {C} values again; the output projection "
             f"<code>c_proj</code> ({C} → {C}) mixes them:")
        + strip(concat, "concat", groups=H, chosen=h)
        + strip(tr.attn_out[t], "c_proj", scale=float(np.abs(tr.attn_out[t]).max()))
    ))


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
    ))


def residual_figure(r: InsideResult) -> go.Figure:
    """Per layer, for the chosen token: the norm of the stream entering it, and of what attention
    and the feed-forward network add."""
    fp, t = r.fp, r.token
    layers = np.arange(len(fp.layers))
    norm = lambda a: [float(np.linalg.norm(x)) for x in a]  # noqa: E731
    fig = go.Figure([
        go.Bar(x=layers, y=norm(tr.attn_out[t] for tr in fp.layers), name="‖attention added‖", marker_color="#6366f1"),
        go.Bar(x=layers, y=norm(tr.mlp_out[t] for tr in fp.layers), name="‖FFN added‖", marker_color="#f97316"),
        go.Scatter(x=layers, y=norm(tr.x_in[t] for tr in fp.layers), name="‖x‖ entering", mode="lines+markers",
                   line={"color": "#0f172a"}),
    ])
    base_layout(fig, f"Token {t} ({fp.tokens[t]}): the residual stream layer by layer", height=320,
                xaxis_title="layer", yaxis_title="norm")
    fig.update_xaxes(tickmode="array", tickvals=layers.tolist())
    fig.update_layout(barmode="group")
    return fig


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
    ))


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
    target = token_text(fp.ids[t + 1]) if t + 1 < len(fp.ids) else None
    rows = []
    n = len(fp.layers)
    for i, row in enumerate(r.lens(t)):
        label = f"after layer {i}" + (" = the output" if i == n - 1 else "")
        cls = ' class="ins-row-on"' if i == r.layer else ""
        rows.append(f'<tr{cls}><td>{label}</td><td>{_chips(row, target)}</td></tr>')
    came = (f"The token that really came next, {_tok(r, t + 1)}, is outlined where it appears." if target is not None
            else "This is the text's last token: the model's guess for what comes after the text.")
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
             f"embedding matrix E {_shape(f'{V:,}', C)} as stage 1 (weight tying): {_shape(T, f'{V:,}')}, one score "
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


def info_markdown(r: InsideResult) -> str:
    fp = r.fp
    return (
        f"{len(fp.ids)} tokens; showing layer {r.layer}, head {r.head}, token {r.token} ({fp.tokens[r.token]}). "
        f"Check: the last hidden state computed here stage by stage matches the model's own forward pass to "
        f"{fp.hidden_max_diff:.1e}."
    )
