"""Figures and numbers of the chapter *GPT-2's weights* (``book/06_gpt2.ipynb``).

Every function reads GPT-2 small's query/key weights through :mod:`attn_lib.studies.gpt2`
(fetched once into the user cache when no local copy exists: see
:func:`attn_lib.studies.gpt2.find_source`), summarises each layer's matrix ``A = W_K W_Q^T``
with the cached :func:`attn_lib.studies.gpt2.layer_summary` (``seed=[seed, layer]``: one
shuffled copy per layer) and simulates attention with the cached
:func:`attn_lib.studies.gpt2.simulate_matrices`, every model at its own ``gamma = g tau``
(``tau = ||Phi||_F^2 / n^2`` measured on each draw: the book's equal-``gamma / tau``
convention). Figure functions return a :class:`~attn_lib.book.page.Figure`;
:func:`orientation` and :func:`fit_table` return dicts of numbers and Markdown tables. Number
names are the glue names of the chapter's prose. The private helpers (weights, summaries, the
Monte Carlo, ranges and counts in words) are shared with :mod:`attn_lib.book.figures.any_matrix`.

Error bars are one standard error of the mean over trials (none for a single trial).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence, cast

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from ... import Setting
from ...studies import gpt2
from ... import cache
from ...simulation.trials import standard_error
from .. import style
from ..claims import Claim, Z, exact, exceeds, threshold
from ..page import Figure, markdown_table

__all__ = ["LAYERS", "weights_source", "orientation", "scale", "singular_values", "eigenvalues",
           "fit_table", "shares", "layer_errors"]

#: GPT-2 small's layers, all shown by default.
LAYERS: tuple[int, ...] = tuple(range(gpt2.N_LAYERS))
#: Colours of the two signal directions (both attention: shades of its colour, the random
#: direction light), ridge and the shuffled copies.
_COL = {"aligned": style.color("attention"), "random": style.shades("attention", 2)[0],
        "ridge": style.color("ridge"), "shuffled": "0.55"}


def _layer_color(layer: int) -> Any:
    """Viridis colour of a layer (the same for a layer whichever layers are drawn)."""
    return plt.cm.viridis(np.linspace(0.0, 0.92, gpt2.N_LAYERS))[layer]


def _raw_matrices(layers: Iterable[int]) -> dict[int, np.ndarray]:
    """``A = W_K W_Q^T`` of each layer, as stored (not normalised)."""
    out = {}
    for layer in layers:
        W_Q, W_K = gpt2.load_qk(layer)
        out[layer] = gpt2.paper_matrix(W_Q, W_K)
    return out


def _summaries(layers: Sequence[int], k_max: int, seed: int) -> dict[int, gpt2.Summary]:
    """Cached :func:`~attn_lib.studies.gpt2.layer_summary` of each layer (``seed=[seed, l]``)."""
    A_raw = _raw_matrices(layers)
    return {l: cache.cached(gpt2.layer_summary, A=A_raw[l], k_max=k_max, seed=[seed, l])
            for l in layers}


def _tokens(c: float) -> int:
    """``n = round(p / c)`` tokens for GPT-2's ``p = 768``; raises unless ``round(c n) = p``."""
    n = int(round(gpt2.P / c))
    if Setting(c=c).p(n) != gpt2.P:
        raise ValueError(f"c must give p = round(c n) = {gpt2.P} for n = round({gpt2.P} / c), "
                         f"got c = {c!r}")
    return n


def _gammas(n_gamma: int, gamma_report: float) -> tuple[np.ndarray, int]:
    """``gammas = logspace(-3, 1, n_gamma)`` and the index of the grid point nearest ``gamma_report``."""
    gammas = np.logspace(-3, 1, n_gamma)
    return gammas, int(np.argmin(np.abs(np.log(gammas / gamma_report))))


def _monte_carlo(summary: dict[int, gpt2.Summary], f: str, c: float, snrs: Sequence[float],
                 detail_layers: Sequence[int], trials: int, gammas: np.ndarray,
                 seed: int) -> dict[tuple[int, float], gpt2.MonteCarlo]:
    """Cached :func:`~attn_lib.studies.gpt2.simulate_matrices` per ``(layer, snr)``, at equal
    ``gamma / tau``.

    Matrices: the normalised real ``A`` ("real") and, for ``detail_layers``, its fitted
    ``alpha I + s_1 u_1 v_1^T`` ("fit"); directions "aligned" and "random". ``gammas`` are in
    units of each model's feature scale ``tau = ||Phi||_F^2 / n^2`` measured on each draw
    (``relative=True``): every model, ridge included, at its own ``gamma = g tau``.
    """
    n, A_raw = _tokens(c), _raw_matrices(summary)
    mc = {}
    for l, sm in summary.items():
        mats = {"real": A_raw[l] / sm.scale}
        if l in detail_layers:
            mats["fit"] = sm.fit.low_rank(1)
        for snr in snrs:
            mus = {"aligned": gpt2.aligned_direction(sm.fit, snr),
                   "random": gpt2.random_direction(gpt2.P, snr, seed)}
            mc[l, snr] = cache.cached(gpt2.simulate_matrices, matrices=mats, mus=mus, f=f,
                                      gammas=gammas, n=n, trials=trials, seed=seed,
                                      relative=True)
    return mc


def _gap_table(summary: dict[int, gpt2.Summary], mc: dict[tuple[int, float], gpt2.MonteCarlo],
               snrs: Sequence[float],
               i_rep: int) -> pd.DataFrame:
    """Errors at ``gammas[i_rep]`` per ``(layer, SNR)``: aligned, random, the paired differences
    aligned - random and (random ``mu``) attention - ridge with their standard errors, ridge."""
    rows = []
    for l in summary:
        for snr in snrs:
            r = mc[l, snr]
            al_ = r.attention["real"]["aligned"].values[:, i_rep]
            ra_ = r.attention["real"]["random"].values[:, i_rep]
            ri_ = r.ridge["random"].values[:, i_rep]
            rows.append({"layer": l, "SNR": snr, "E aligned": al_.mean(), "E random": ra_.mean(),
                         "E ridge": ri_.mean(),
                         "aligned - random": (al_ - ra_).mean(),
                         "se (aligned - random)": float(standard_error(al_ - ra_, axis=0)),
                         "random - ridge": (ra_ - ri_).mean(),
                         "se (random - ridge)": float(standard_error(ra_ - ri_, axis=0))})
    return pd.DataFrame(rows).set_index(["layer", "SNR"])


#: Headers of the gap table (:func:`layer_errors`) in the book's notation.
_GAP_HEADERS = {"E aligned": r"$E$, $\mu$ aligned", "E random": r"$E$, $\mu$ random",
                "E ridge": r"$E_{\mathrm{ridge}}$",
                "aligned - random": r"$E_{\mathrm{aligned}} - E_{\mathrm{random}}$",
                "se (aligned - random)": "its s.e.",
                "random - ridge": r"$E_{\mathrm{random}} - E_{\mathrm{ridge}}$",
                "se (random - ridge)": "its s.e. "}


def _renamed(table: pd.DataFrame, formats: dict[str, str],
             headers: dict[str, str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """``table`` and ``formats`` with the columns (and index levels) renamed by ``headers``."""
    out = table.rename(columns=headers)
    out.index.names = [headers.get(cast(str, n), n) for n in table.index.names]
    return out, {headers.get(k, k): v for k, v in formats.items()}


def _span(lo: float, hi: float, fmt: str) -> str:
    """``"lo to hi"`` in the format ``fmt``, or the single value when both print alike."""
    a, b = format(lo, fmt), format(hi, fmt)
    return a if a == b else f"{a} to {b}"


def _draws(trials: int) -> str:
    """``"one draw"`` or ``"4 draws"``."""
    return "one draw" if trials == 1 else f"{trials} draws"


def _count(k: int, n: int, noun: str = "layers") -> str:
    """``k`` of ``n`` things in words: "all 12 layers", "none of the 12 layers", "5 of 12
    layers"; with ``n = 1``, "the one layer" or "no layer" (``noun`` singular: drop the s)."""
    one = noun[:-1] if noun.endswith("s") else noun
    if n == 1:
        return f"the one {one}" if k == 1 else f"no {one}"
    return f"all {n} {noun}" if k == n else f"none of the {n} {noun}" if k == 0 else f"{k} of {n} {noun}"


def weights_source() -> str:
    """One line naming the weights file read and whether it came from ``$ATTN_BOOK_GPT2``."""
    source = gpt2.find_source()
    return f"weights: {source.name} ({gpt2.source_label(source)})"


def orientation(*, seed: int, layers: Sequence[int] = LAYERS) -> dict[str, float]:
    """Check the orientation of ``A`` on layer 0 and return the asymmetry of every layer.

    On random ``x_key, x_query ~ N(0, I_p)`` (``default_rng(seed)``) the sum of GPT-2's 12
    per-head logits ``(x_query W_Q^h) . (x_key W_K^h)`` must equal ``x_key^T A x_query`` and not
    ``x_query^T A x_key``.

    Returns
    -------
    dict
        ``gpt2_asym_min``, ``gpt2_asym_max``, ``gpt2_asym_mean``: range and mean over ``layers``
        of ``||A - A^T||_F / ||A||_F`` (:func:`attn_lib.studies.gpt2.asymmetry`).

    Raises
    ------
    RuntimeError
        If the per-head logits do not match ``A``'s orientation.
    """
    A_raw = _raw_matrices(layers)
    L0, hd, p = gpt2.load_layer(0), gpt2.HEAD_DIM, gpt2.P
    rng = np.random.default_rng(seed)
    x_key, x_query = rng.standard_normal((2, p))
    per_head = sum((x_query @ L0.W_Q[:, hd * h:hd * (h + 1)]) @ (x_key @ L0.W_K[:, hd * h:hd * (h + 1)])
                   for h in range(gpt2.N_HEADS))
    A0 = A_raw[0] if 0 in A_raw else gpt2.paper_matrix(L0.W_Q, L0.W_K)
    if not np.isclose(x_key @ A0 @ x_query, per_head, rtol=1e-10) \
            or np.isclose(x_query @ A0 @ x_key, per_head, rtol=1e-3):
        raise RuntimeError("the per-head logits of layer 0 do not match A = W_K W_Q^T")
    asym = np.array([gpt2.asymmetry(A_raw[l]) for l in layers])
    return {"gpt2_asym_min": float(asym.min()), "gpt2_asym_max": float(asym.max()),
            "gpt2_asym_mean": float(asym.mean())}


def scale(*, k_max: int, seed: int, layers: Sequence[int] = LAYERS) -> Figure:
    """Raw scale ``||A||_F / sqrt(p)`` (left) and the identity's signed norm ratio (right).

    The right panel shows ``alpha sqrt(p) / ||A||_F`` (``alpha = tr(A)/p``, bars) and the same
    ratio for ``diag(g) A diag(g)`` with the ``ln_1`` gain ``g`` folded in (diamonds).

    Returns
    -------
    Figure
        Two axes. Numbers: ``gpt2_scale_min``, ``gpt2_scale_max``, ``gpt2_scale_argmax`` (raw
        scale range and its layer); ``gpt2_idratio_max``, ``gpt2_idratio_argmax``,
        ``gpt2_idratio_absmin`` (identity ratio); ``gpt2_n_alpha_neg`` and
        ``gpt2_alpha_neg_layers`` (Markdown list) of the layers with ``alpha < 0``;
        ``gpt2_idratio_ln_maxdiff``, ``gpt2_idratio_ln_max``, ``gpt2_ln_sign_changes`` (the
        ratio with the gain folded in: largest change, largest value, sign changes).
    """
    layers = list(layers)
    summary = _summaries(layers, k_max, seed)
    A_raw = _raw_matrices(layers)
    scale_ = np.array([summary[l].scale for l in layers])
    id_ratio = np.array([summary[l].fit.identity_norm_ratio for l in layers])
    ratios_ln = []
    for l in layers:
        g = gpt2.load_layer(l).ln_weight
        A_ln = g[:, None] * A_raw[l] * g[None, :]
        ratios_ln.append(np.trace(A_ln) / (np.sqrt(gpt2.P) * np.linalg.norm(A_ln)))
    id_ratio_ln = np.array(ratios_ln)

    colors = [_layer_color(l) for l in layers]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax1.bar(layers, scale_, color=colors)
    style.label_axes(ax1, "layer", r"$\|A\|_F / \sqrt{p}$", title="Raw scale of $A = W_K W_Q^\\top$")
    ax2.bar(layers, id_ratio, color=colors, label=r"$A$")
    ax2.plot(layers, id_ratio_ln, "kD", ms=5, markerfacecolor="white",
             label=r"$\mathrm{diag}(g)\,A\,\mathrm{diag}(g)$ (ln_1 gain folded in)")
    ax2.axhline(0.0, color="k", lw=0.8)
    style.label_axes(ax2, "layer", r"$\alpha\sqrt{p}/\|A\|_F$",
                     title=r"Identity part: $\alpha = \mathrm{tr}(A)/p$, signed norm ratio")
    for ax in (ax1, ax2):
        ax.set_xticks(layers)
    neg = [l for l, r in zip(layers, id_ratio) if r < 0]
    return Figure(fig, {
        "gpt2_scale_min": float(scale_.min()), "gpt2_scale_max": float(scale_.max()),
        "gpt2_scale_argmax": layers[int(np.argmax(scale_))],
        "gpt2_idratio_max": float(id_ratio.max()),
        "gpt2_idratio_argmax": layers[int(np.argmax(id_ratio))],
        "gpt2_idratio_absmin": float(np.abs(id_ratio).min()),
        "gpt2_n_alpha_neg": int(np.sum(id_ratio < 0)),
        "gpt2_alpha_neg_layers": Markdown(", ".join(str(l) for l in neg) or "none"),
        "gpt2_idratio_ln_maxdiff": float(np.max(np.abs(id_ratio_ln - id_ratio))),
        "gpt2_idratio_ln_max": float(np.max(id_ratio_ln)),
        "gpt2_ln_sign_changes": int(np.sum(np.sign(id_ratio_ln) != np.sign(id_ratio))),
    })


def _spectrum_grid(layers: Sequence[int], summary: dict[int, gpt2.Summary], values: str,
                   ylabel: str, xlabel: str, suptitle: str, alpha_line: bool) -> Any:
    """One panel per layer (3 x 4 for 12): ``values`` of the real and the shuffled spectrum."""
    k = np.arange(1, gpt2.P + 1)
    ncols = min(4, len(layers))
    fig, axes = plt.subplots(-(-len(layers) // ncols), ncols, figsize=(12, 8), sharex=True,
                             sharey=True, squeeze=False)
    for l, ax in zip(layers, axes.flat):
        sm = summary[l]
        ax.plot(k, getattr(sm.shuffled_spectrum, values), color=_COL["shuffled"], lw=1.4,
                label="shuffled copy")
        ax.plot(k, getattr(sm.spectrum, values), color=_layer_color(l), lw=1.8, label="GPT-2")
        if alpha_line:
            ax.axhline(sm.fit.alpha, color="k", ls=":", lw=1.0, label=r"$\alpha = \mathrm{tr}(A)/p$")
        ax.set_title(f"layer {l}")
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    axes.flat[0].legend(loc="lower left")
    fig.suptitle(suptitle)
    return fig, axes


def singular_values(*, k_max: int, seed: int, layers: Sequence[int] = LAYERS) -> Figure:
    """Singular values of each normalised layer matrix next to those of its shuffled copy (log-log).

    Returns
    -------
    Figure
        One axis per layer. Numbers: ``gpt2_top_ratio_min``, ``gpt2_top_ratio_max``: range over
        layers of the leading singular value over the shuffled copy's.
    """
    summary = _summaries(layers, k_max, seed)
    fig, axes = _spectrum_grid(layers, summary, "singular_values", r"singular value $\sigma_k(A)$",
                               "index $k$", r"Singular values of the normalised $A = W_K W_Q^\top$ "
                               r"($\|A\|_F^2/p = 1$)", alpha_line=False)
    for ax in axes.flat:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(1e-3, 30)
    top_ratio = np.array([summary[l].spectrum.singular_values[0]
                          / summary[l].shuffled_spectrum.singular_values[0] for l in layers])
    return Figure(fig, {"gpt2_top_ratio_min": float(top_ratio.min()),
                        "gpt2_top_ratio_max": float(top_ratio.max())})


def eigenvalues(*, k_max: int, seed: int, layers: Sequence[int] = LAYERS) -> Figure:
    """Eigenvalues of the symmetric part ``(A + A^T)/2`` of each normalised layer matrix.

    Drawn in descending order (symlog rank axis) with the shuffled copy's and the level ``alpha``.

    Returns
    -------
    Figure
        One axis per layer. Numbers: ``gpt2_sym_skew_min``, ``gpt2_sym_skew_max``,
        ``gpt2_sym_skew_argmax``: range over layers of the largest eigenvalue over minus the
        smallest, and the layer of the largest.
    """
    layers = list(layers)
    summary = _summaries(layers, k_max, seed)
    fig, axes = _spectrum_grid(layers, summary, "sym_eigenvalues", r"eigenvalue of $(A + A^\top)/2$",
                               "rank (descending)",
                               r"Eigenvalues of the symmetric part of the normalised $A$",
                               alpha_line=True)
    for ax in axes.flat:
        ax.set_xscale("symlog", linthresh=10)
    sym_pos = np.array([summary[l].spectrum.sym_eigenvalues[0] for l in layers])
    sym_neg = np.array([-summary[l].spectrum.sym_eigenvalues[-1] for l in layers])
    skew = sym_pos / sym_neg
    return Figure(fig, {"gpt2_sym_skew_min": float(skew.min()),
                        "gpt2_sym_skew_max": float(skew.max()),
                        "gpt2_sym_skew_argmax": layers[int(np.argmax(skew))]})


def fit_table(*, k_max: int, seed: int, layers: Sequence[int] = LAYERS) -> dict[str, Any]:
    """Ranks of one head and of a whole layer, and the per-layer table of the fit.

    Returns
    -------
    dict
        ``gpt2_head_rank``, ``gpt2_layer_rank``: numerical rank (singular values above
        ``1e-9`` of the largest) of head 0 of layer 0 and of layer 0's normalised matrix;
        ``gpt2_fit_table``: Markdown table per layer of the scale, asymmetry, ``alpha``, the
        shares of ``alpha I`` with 0, 1, 8, 64 spikes, ``s_1..s_3``, ``u_1 . v_1``, ``k_50``
        (real and shuffled) and the verdict.
    """
    layers = list(layers)
    summary = _summaries(layers, k_max, seed)
    L0 = gpt2.load_layer(0)
    s_head = np.linalg.svd(gpt2.head_matrix(L0.W_Q, L0.W_K, 0), compute_uv=False)
    sm0 = summary[0] if 0 in summary else _summaries([0], k_max, seed)[0]
    s_layer = sm0.spectrum.singular_values
    rows = []
    for l in layers:
        ft, sm = summary[l].fit, summary[l]
        rows.append({
            "layer": l, r"$\lVert A\rVert_F/\sqrt{p}$": sm.scale,
            r"$\lVert A-A^\top\rVert/\lVert A\rVert$": sm.asymmetry,
            r"$\alpha$": ft.alpha, r"share $\alpha I$": ft.share(0),
            "$s_1$": ft.s[0], "$s_2$": ft.s[1], "$s_3$": ft.s[2], r"$u_1 \cdot v_1$": ft.cos_uv,
            "share +1": ft.share(1), "share +8": ft.share(8), "share +64": ft.share(64),
            "$k_{50}$": ft.k_for(0.5),
            "$k_{50}$ shuffled": int(np.searchsorted(sm.shuffled_shares, 0.5 - 1e-12)),
            "verdict": sm.verdict})
    table = pd.DataFrame(rows).set_index("layer")
    formats = {c_: ".3f" for c_ in table.columns if table[c_].dtype.kind == "f"}
    formats[r"$\lVert A\rVert_F/\sqrt{p}$"] = ".1f"
    return {"gpt2_head_rank": int(np.sum(s_head > 1e-9 * s_head[0])),
            "gpt2_layer_rank": int(np.sum(s_layer > 1e-9 * s_layer[0])),
            "gpt2_fit_table": markdown_table(table, formats, left=True)}


def shares(*, k_max: int, seed: int, layers: Sequence[int] = LAYERS) -> Figure:
    """Share of ``||A||_F^2`` explained by ``alpha I`` plus the top ``k`` spikes.

    Left: against ``k`` for every layer and the mean of the shuffled copies. Right: stacked bars
    per layer of ``alpha I``, spike 1, spikes 2-8, spikes 9-64 and the rest.

    Returns
    -------
    Figure
        Two axes. Numbers: ``gpt2_share{0,1,8,64}_{min,max}`` (range over layers of the share with
        0, 1, 8, 64 spikes); ``gpt2_k50_min``, ``gpt2_k50_max`` (spikes needed for half the norm)
        and ``gpt2_k50_shuf_min`` (the same for the shuffled copies, smallest); ``gpt2_n_hold``,
        ``gpt2_n_fail``: layers passing and failing :func:`attn_lib.studies.gpt2.verdict`, of
        ``gpt2_n_layers``; ``gpt2_k50_range``, ``gpt2_share{1,8,64}_range`` (Markdown ranges,
        a single value when both ends print alike); the claim ``gpt2_verdict`` (no layer passes
        the rule, :func:`attn_lib.book.claims.exact`).
    """
    layers = list(layers)
    summary = _summaries(layers, k_max, seed)
    fits = {l: summary[l].fit for l in layers}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.0), gridspec_kw={"width_ratios": [1.1, 1]})
    kk = np.arange(1, gpt2.P + 1)
    for l in layers:
        ax1.semilogx(kk, fits[l].share(kk), color=_layer_color(l), label=f"{l}")
    shuf = np.mean([summary[l].shuffled_shares for l in layers], axis=0)
    ax1.semilogx(kk, shuf[1:], color="k", ls="--", label="shuffled\n(mean)")
    ax1.axhline(0.5, color="0.4", lw=0.8, ls=":")
    ax1.axvline(8, color="0.4", lw=0.8, ls=":")
    style.label_axes(ax1, "number of spikes $k$", r"share of $\|A\|_F^2$ explained by $\alpha I$ + top $k$",
                     title="Full-plus-low-rank fit, all layers")
    ax1.legend(title="layer", ncol=2, fontsize=8)
    parts = {"$\\alpha I$": [fits[l].share(0) for l in layers],
             "spike 1": [fits[l].share(1) - fits[l].share(0) for l in layers],
             "spikes 2–8": [fits[l].share(8) - fits[l].share(1) for l in layers],
             "spikes 9–64": [fits[l].share(64) - fits[l].share(8) for l in layers],
             "rest": [1 - fits[l].share(64) for l in layers]}
    bottom = np.zeros(len(layers))
    for (name, vals), colr in zip(parts.items(), ["k", "#0173b2", "#56b4e9", "#ece133", "0.85"]):
        ax2.bar(layers, vals, bottom=bottom, color=colr, label=name)
        bottom += np.asarray(vals)
    ax2.set_xticks(layers)
    style.label_axes(ax2, "layer", r"share of $\|A\|_F^2$", title="Where the norm sits")
    ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))

    numbers: dict[str, Any] = {}
    for k in (0, 1, 8, 64):
        arr = np.array([fits[l].share(k) for l in layers])
        numbers[f"gpt2_share{k}_min"], numbers[f"gpt2_share{k}_max"] = float(arr.min()), float(arr.max())
    k50 = np.array([fits[l].k_for(0.5) for l in layers])
    k50_shuf = np.array([int(np.searchsorted(summary[l].shuffled_shares, 0.5 - 1e-12)) for l in layers])
    n_hold = sum(summary[l].verdict.startswith("holds") for l in layers)
    nl = len(layers)
    numbers.update({"gpt2_k50_min": int(k50.min()), "gpt2_k50_max": int(k50.max()),
                    "gpt2_k50_shuf_min": int(k50_shuf.min()), "gpt2_n_hold": n_hold,
                    "gpt2_n_fail": nl - n_hold, "gpt2_n_layers": nl,
                    "gpt2_k50_range": Markdown(_span(k50.min(), k50.max(), "d")),
                    "gpt2_share1_range": Markdown(_span(numbers["gpt2_share1_min"],
                                                        numbers["gpt2_share1_max"], ".2f")),
                    "gpt2_share8_range": Markdown(_span(numbers["gpt2_share8_min"],
                                                        numbers["gpt2_share8_max"], ".2f")),
                    "gpt2_share64_range": Markdown(_span(numbers["gpt2_share64_min"],
                                                         numbers["gpt2_share64_max"], ".2f"))})
    numbers["gpt2_verdict"] = exact(
        "gpt2_verdict", n_hold == 0, f"{n_hold} of {nl} layers pass the verdict rule", wording=(
            f"{_count(0, nl)} is identity plus low rank",
            f"{_count(n_hold, nl)} {'is' if n_hold == 1 else 'are'} identity plus low rank", ""))
    return Figure(fig, numbers)


def layer_errors(*, f: str, c: float, snrs: Sequence[float], detail_layers: Sequence[int],
                 trials: int, n_gamma: int, gamma_report: float, k_max: int, seed: int,
                 layers: Sequence[int] = LAYERS) -> Figure:
    """Interpolation error at the reported ``gamma / tau`` per layer: attention with the real
    ``A`` (signal aligned with the leading spike, or a random direction) and ridge, one panel per
    SNR.

    Monte Carlo with :func:`attn_lib.studies.gpt2.simulate_matrices` (``n = p / c`` tokens; every
    model at its own ``gamma = g tau``, ``tau = ||Phi||_F^2 / n^2`` measured on each draw,
    ``g`` in ``logspace(-3, 1, n_gamma)``, the point nearest ``gamma_report``); mean ± one
    standard error of the mean over trials. The differences are paired over the common draws and
    decided at the Student t threshold of :func:`attn_lib.book.claims.threshold` with
    ``draws=trials``.

    Returns
    -------
    Figure
        One axis per SNR. Numbers: ``gpt2_gamma_rep`` (the reported ``g = gamma / tau``),
        ``gpt2_n_tokens``, ``gpt2_trials``, ``gpt2_snrs`` (Markdown list); ``gpt2_tau_att``,
        ``gpt2_tau_ridge`` (Markdown: range of the measured ``tau`` of attention with the real
        ``A`` and of ridge); ``gpt2_att_minus_ridge`` (Markdown: range over layers and SNRs of
        the paired ``E_random - E_ridge`` with the largest standard error) and the claim
        ``gpt2_above_ridge`` (attention with a random ``mu`` above ridge in every (layer, SNR)
        cell); ``gpt2_aligned_minus_random`` (Markdown range of the paired ``E_aligned -
        E_random``) and ``gpt2_aligned_verdict`` (Markdown: in how many cells alignment lowers or
        raises the error beyond the threshold, or that the draws cannot decide);
        ``gpt2_gap_table``: Markdown table per layer and SNR.
    """
    layers = list(layers)
    summary = _summaries(layers, k_max, seed)
    gammas, i_rep = _gammas(n_gamma, gamma_report)
    mc = _monte_carlo(summary, f, c, snrs, detail_layers, trials, gammas, seed)
    table = _gap_table(summary, mc, snrs, i_rep)
    n = _tokens(c)
    fig, axes = plt.subplots(1, len(snrs), figsize=(5.2 * len(snrs), 3.8), sharey=True, squeeze=False)
    for ax, snr in zip(axes[0], snrs):
        sub = table.xs(snr, level="SNR")
        for key, name, mk in (("aligned", "attention, $\\mu$ aligned", "o"),
                              ("random", "attention, $\\mu$ random", "s")):
            se = [mc[l, snr].attention["real"][key].sem[i_rep] for l in layers]
            style.plot_sim(ax, layers, sub[f"E {key}"], se, color=_COL[key], fmt=mk, label=name)
        se = [mc[l, snr].ridge["random"].sem[i_rep] for l in layers]
        style.plot_sim(ax, layers, sub["E ridge"], se, color=_COL["ridge"], fmt="^", label="ridge")
        ax.set_xticks(layers)
        style.label_axes(ax, "layer", rf"$E$ at $\gamma = {gammas[i_rep]:.3g}\,\tau$",
                         title=f"SNR = {snr:g}, $n = {n}$, $p = {gpt2.P}$, {trials} trial(s)")
    tau_att = [float(np.mean(mc[l, s].values["scale", "real", d])) for l in layers for s in snrs
               for d in ("aligned", "random")]
    tau_ridge = [float(np.mean(mc[l, s].values["ridge_scale", d])) for l in layers for s in snrs
                 for d in ("aligned", "random")]
    k = threshold(Z, trials)
    cells = len(table)
    above = [exceeds("p", row["random - ridge"], row["se (random - ridge)"], draws=trials,
                     wording=("", "", "")) for _, row in table.iterrows()]
    undecided = f"is not decided above ridge regression at this profile ({_draws(trials)} per layer)"
    numbers: dict[str, Any] = {
        "gpt2_gamma_rep": float(gammas[i_rep]), "gpt2_n_tokens": n, "gpt2_trials": trials,
        "gpt2_snrs": Markdown(", ".join(f"{s:g}" for s in snrs)),
        "gpt2_tau_att": Markdown(_span(min(tau_att), max(tau_att), ".3f")),
        "gpt2_tau_ridge": Markdown(_span(min(tau_ridge), max(tau_ridge), ".3f")),
        "gpt2_att_minus_ridge": Markdown(_difference_span(table["random - ridge"],
                                                          table["se (random - ridge)"], trials)),
        "gpt2_aligned_minus_random": Markdown(_difference_span(
            table["aligned - random"], table["se (aligned - random)"], trials)),
    }
    wording = (f"lies above ridge regression in {_count(cells, cells, 'cells')}",
               "lies below ridge regression in some cell", undecided)
    numbers["gpt2_above_ridge"] = (
        _all_points("gpt2_above_ridge", above, wording, what="(layer, SNR) cells") if trials > 1
        else Claim("gpt2_above_ridge", None, "one draw per (layer, SNR) cell: not decided", wording))
    if np.isfinite(k):
        d_ar, se_ar = table["aligned - random"], table["se (aligned - random)"]
        lower, higher = int(np.sum(d_ar < -k * se_ar)), int(np.sum(d_ar > k * se_ar))
        numbers["gpt2_aligned_verdict"] = Markdown(
            f"lowers the error in {_count(lower, cells, 'cells')} and raises it in "
            f"{_count(higher, cells, 'cells')} (beyond {k:.3g} paired standard errors, the t "
            f"threshold at {trials} draws)")
    else:
        numbers["gpt2_aligned_verdict"] = Markdown(
            "cannot be decided at this profile (one draw per layer)")
    if trials < 2:  # one draw has no standard error
        table = table.drop(columns=["se (aligned - random)", "se (random - ridge)"])
    formats = {c_: ".4f" for c_ in table.columns} | {"SNR": "g"}
    numbers["gpt2_gap_table"] = markdown_table(*_renamed(table, formats, _GAP_HEADERS), left=True)
    return Figure(fig, numbers)


def _difference_span(d: pd.Series, se: pd.Series, trials: int) -> str:
    """The range of paired differences over cells with their largest standard error, e.g.
    ``"+0.012 to +0.054 (standard error at most 0.003, 4 draws)"``; a single value when they
    print alike, and the undecided case for one draw."""
    text = _span(float(d.min()), float(d.max()), "+.3f")
    if trials < 2:
        return f"{text} (one draw per cell: not decided at this profile)"
    return f"{text} (standard error at most {float(se.max()):.3f}, {trials} draws)"


def _all_points(name: str, claims: list[Claim], wording: tuple[str, str, str],
                required: bool = True, what: str = "(layer, gamma) points") -> Claim:
    """One claim from point claims: ``True`` if all hold, ``False`` if one is contradicted,
    ``None`` otherwise; the evidence counts them and quotes the first contradicted point, else
    the first undecided one, else the first point."""
    n_true = sum(c.holds is True for c in claims)
    n_false = sum(c.holds is False for c in claims)
    holds = True if n_true == len(claims) else False if n_false else None
    worst = next((c for c in claims if c.holds is False), next(
        (c for c in claims if c.holds is None), None))
    label = ("first contradicted" if n_false else "first undecided") if worst else "first"
    evidence = (f"{n_true} of {len(claims)} {what} hold, {n_false} contradicted; "
                f"{label}: {(worst or claims[0]).evidence}")
    return Claim(name, holds, evidence, wording, required)
