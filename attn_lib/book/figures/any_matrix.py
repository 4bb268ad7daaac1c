"""Figures and numbers of the chapter *Any key-query matrix and multi-head attention*
(``book/12_any_matrix.ipynb``).

The weights are GPT-2 small's (read through :mod:`attn_lib.studies.gpt2`, summarised and
normalised by the helpers of :mod:`attn_lib.book.figures.gpt2`, which this module shares with
the chapter *GPT-2's weights*). :func:`real_matrix_theory` scores the any-matrix theory of each
real layer matrix (:func:`attn_lib.studies.gpt2.matrix_theory`, a Gaussian-equivalent heuristic)
against its Monte Carlo; :func:`multi_head` simulates attention per head, as GPT-2 computes it;
:func:`multi_head_theory` scores the multi-head theory (:func:`attn_lib.studies.gpt2.heads_theory`)
against the per-head Monte Carlo. Theories and Monte Carlo are cached
(:func:`attn_lib.cache.cached`). Figure functions return a :class:`~attn_lib.book.page.Figure`
whose numbers are the glue names of the chapter's prose.
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from ... import Entrywise, Setting, Softmax, theory
from ... import cache
from ...simulation.trials import standard_error
from ...studies import gpt2
from .. import style
from ..claims import Claim, Z, equivalent, exceeds, less, threshold
from ..page import Figure, markdown_table
from .gpt2 import (_COL, _all_points, _count, _draws, _gammas, _monte_carlo, _raw_matrices,
                   _renamed, _span, _summaries, _tokens)

__all__ = ["theory_vs_simulation", "real_matrix_theory", "multi_head", "multi_head_theory"]


#: Headers of the detail table (:func:`theory_vs_simulation`) in the book's notation.
_DETAIL_HEADERS = {"mu": r"$\mu$", "E real": r"$E$, real $A$ (simulation)",
                   "E fit (MC)": r"$E$, fit (simulation)", "E fit (theory)": r"$E$, fit (DE)",
                   "E ridge (theory)": r"$E_{\mathrm{ridge}}$ (DE)", "delta": r"$\delta$"}


def theory_vs_simulation(*, f: str, c: float, snrs: Sequence[float], detail_layers: Sequence[int],
                         trials: int, n_gamma: int, gamma_report: float, k_max: int,
                         seed: int) -> Figure:
    """``E`` against ``gamma / tau`` for ``detail_layers``: real ``A`` and its fit by Monte Carlo,
    the fit's theory.

    The Monte Carlo is the chapter *GPT-2's weights*' cached run (:func:`~attn_lib.book.figures.
    gpt2.layer_errors`, the same arguments): every model at its own ``gamma = g tau``, ``tau``
    measured on each draw. One panel per (layer, SNR): attention with the real matrix (open
    markers) and with the fitted ``alpha I + s_1 u_1 v_1^T`` (crosses) on the same draws, and the
    deterministic equivalent :func:`attn_lib.theory.attention_error` of the fit's
    :func:`~attn_lib.studies.gpt2.fit_setting` (lines) at ``gamma = g tau_fit``, ``tau_fit`` the
    fit's mean measured ``tau`` (its draw-to-draw spread is ``O(1/n)``), for the aligned and the
    random signal; ridge by Monte Carlo and :func:`attn_lib.theory.ridge_error` at ``g`` times its
    mean measured ``tau``. Mean ± one standard error of the mean; ``gpt2_sign_aligned``,
    ``gpt2_sign_random``: the sign claims of :func:`_sign_claim`.

    Returns
    -------
    Figure
        ``len(detail_layers) x len(snrs)`` axes. Numbers at the reported ``g``:
        ``gpt2_real_vs_fit_max`` (largest ``|E real - E fit|`` of the Monte Carlo);
        ``gpt2_fit_vs_theory_aligned``, ``gpt2_fit_vs_theory_random`` (largest
        ``|E fit - theory|`` per direction); ``gpt2_delta_max``, ``gpt2_delta_aligned``,
        ``gpt2_delta_random`` (largest coherent shift :meth:`attn_lib.Setting.delta` at ``n``);
        ``gpt2_fit_layers`` (Markdown list), ``gpt2_fit_trials``, ``gpt2_gamma_rep`` (the reported
        ``g``); ``gpt2_detail_table``: Markdown
        table of these errors and shifts.
    """
    summary = _summaries(detail_layers, k_max, seed)
    gammas, i_rep = _gammas(n_gamma, gamma_report)
    mc = _monte_carlo(summary, f, c, snrs, detail_layers, trials, gammas, seed)
    n = _tokens(c)
    curves, ridge, deltas = {}, {}, {}
    for l in detail_layers:
        for snr in snrs:
            r = mc[l, snr]
            for key, mu in (("aligned", gpt2.aligned_direction(summary[l].fit, snr)),
                            ("random", gpt2.random_direction(gpt2.P, snr, seed))):
                st = gpt2.fit_setting(summary[l].fit, mu, c, f)
                deltas[l, snr, key] = st.delta(n)
                tau = float(np.mean(r.values["scale", "fit", key]))
                curves[l, snr, key] = theory.attention_error(st, gammas * tau)
                ridge[l, snr, key] = theory.ridge_error(
                    Setting(c=c, snr=snr), gammas * float(np.mean(r.values["ridge_scale", key])))

    fig, axes = plt.subplots(len(detail_layers), len(snrs),
                             figsize=(5.2 * len(snrs), 3.6 * len(detail_layers)), sharex=True,
                             sharey=True, squeeze=False)
    for row, l in zip(axes, detail_layers):
        for ax, snr in zip(row, snrs):
            r = mc[l, snr]
            for key, mk in (("aligned", "o"), ("random", "s")):
                real, fit_ = r.attention["real"][key], r.attention["fit"][key]
                style.plot_sim(ax, gammas, real.mean, real.sem, color=_COL[key], fmt=mk,
                               label=f"real $A$, $\\mu$ {key}")
                style.plot_sim(ax, gammas, fit_.mean, fit_.sem, color=_COL[key], fmt="x",
                               markerfacecolor=_COL[key],
                               label=f"fitted $\\alpha I + s_1 u_1 v_1^\\top$, $\\mu$ {key}")
                style.plot_theory(ax, gammas, curves[l, snr, key], color=_COL[key],
                                  label=f"theory (fit), $\\mu$ {key}")
            style.plot_theory_vs_sim(ax, gammas, ridge[l, snr, "random"], r.ridge["random"].mean,
                                     r.ridge["random"].sem, label="ridge", fmt="^")
            style.label_axes(ax, r"$\gamma / \tau$" if l == detail_layers[-1] else "",
                             r"$E$" if snr == snrs[0] else "",
                             title=f"layer {l}, SNR = {snr:g}", logx=True, legend=False)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8)

    rows = []
    for l in detail_layers:
        for snr in snrs:
            for key in ("aligned", "random"):
                r = mc[l, snr]
                rows.append({"layer": l, "SNR": snr, "mu": key,
                             "E real": r.attention["real"][key].values[:, i_rep].mean(),
                             "E fit (MC)": r.attention["fit"][key].values[:, i_rep].mean(),
                             "E fit (theory)": curves[l, snr, key][i_rep],
                             "E ridge (theory)": ridge[l, snr, key][i_rep],
                             "delta": deltas[l, snr, key]})
    table = pd.DataFrame(rows).set_index(["layer", "SNR", "mu"])
    real_vs_fit = (table["E real"] - table["E fit (MC)"]).abs()
    fit_vs_th = (table["E fit (MC)"] - table["E fit (theory)"]).abs()
    numbers: dict[str, Any] = {"gpt2_real_vs_fit_max": float(real_vs_fit.max()),
                               "gpt2_delta_max": float(table["delta"].max()),
                               "gpt2_fit_layers": Markdown(", ".join(map(str, detail_layers))),
                               "gpt2_fit_trials": trials, "gpt2_gamma_rep": float(gammas[i_rep])}
    for key in ("aligned", "random"):
        numbers[f"gpt2_fit_vs_theory_{key}"] = float(fit_vs_th.xs(key, level="mu").max())
        numbers[f"gpt2_delta_{key}"] = float(table["delta"].xs(key, level="mu").max())
    formats = {c_: ".4f" for c_ in table.columns} | {"SNR": "g", "delta": ".2f"}
    numbers["gpt2_detail_table"] = markdown_table(*_renamed(table, formats, _DETAIL_HEADERS),
                                                   left=True)
    for key in ("aligned", "random"):
        numbers[f"gpt2_sign_{key}"] = _sign_claim(key, mc, curves, ridge, detail_layers, snrs,
                                                  trials, i_rep)
    return Figure(fig, numbers)


def _sign_claim(key: str, mc: dict[tuple[int, float], gpt2.MonteCarlo],
                curves: dict[tuple[int, float, str], np.ndarray],
                ridge: dict[tuple[int, float, str], np.ndarray],
                detail_layers: Sequence[int],
                snrs: Sequence[float], trials: int, i_rep: int) -> Claim:
    """Does the DE of the fit get the sign of attention minus ridge of the fit's simulation?

    Per ``(layer, SNR)`` the simulated sign is that of the paired difference
    ``E_fit - E_ridge`` over the trials (same draws, both at ``gamma = g tau``), *resolved* when
    it is beyond the Student t threshold (:func:`attn_lib.book.claims.threshold` at :data:`Z`
    with ``draws=trials``); the DE's sign is that of ``theory - ridge theory``. For the random
    direction (``delta`` small) the finding is agreement in every resolved cell; for the aligned
    one (``delta`` of order one) that the DE misses the sign in at least one. ``holds is None``
    when no cell is resolved (always with one trial).
    """
    k = threshold(Z, trials)
    resolved = wrong = 0
    for l in detail_layers:
        for snr in snrs:
            r = mc[l, snr]
            d = r.attention["fit"][key].values[:, i_rep] - r.ridge[key].values[:, i_rep]
            if np.isfinite(k) and abs(d.mean()) > k * float(standard_error(d, axis=0)):
                resolved += 1
                wrong += bool(np.sign(d.mean()) != np.sign(curves[l, snr, key][i_rep]
                                                            - ridge[l, snr, key][i_rep]))
    cells = len(detail_layers) * len(snrs)
    rule = (f"beyond {k:.3g} s.e. (t with {trials - 1} d.o.f.)" if np.isfinite(k)
            else "(not decided with fewer than 2 draws)")
    evidence = (f"{key} mu: the simulated sign of E_fit - E_ridge is resolved {rule} "
                f"in {resolved} of {cells} (layer, SNR) cells; the DE has the other sign in "
                f"{wrong} of them")
    undecided = (f"is not decided at this profile: no (layer, SNR) cell resolves the simulated "
                 f"sign at {_draws(trials)}")
    right = f"gets the sign of attention minus ridge right in {_count(resolved, resolved, 'resolved cells')}"
    wrong_ = f"gets the sign of attention minus ridge wrong in {_count(wrong, resolved, 'resolved cells')}"
    if key == "random":
        holds, wording = (None if resolved == 0 else wrong == 0), (right, wrong_, undecided)
    else:
        holds, wording = (None if resolved == 0 else wrong > 0), (wrong_, right, undecided)
    return Claim(f"gpt2_sign_{key}", holds, evidence, wording)


#: Rank-r limits of the section "The theory of the real matrix": r = 1, 8 and k_50 per layer.
_RANKS: tuple[int | str, ...] = (1, 8, "k50")
#: Margin of the equivalence claim of the any-matrix theory for a random mu (the s.e. of the
#: full profile's Monte Carlo, <= 0.0033 in benchmarks/any_matrix.py at 32 trials and about
#: 0.005 at 16, leaves room at 32 draws (t threshold 3.26 s.e.) for |theory - MC| up to about
#: 0.009; at 16 draws (3.59 s.e.) the weakest layer is not decided; 0.01 does not fit).
_MARGIN = 0.02
#: Margin of the claim that the finite-size multi-head theory is centred on the Monte Carlo for the
#: aligned mu (pooled over layers and gammas; on GPT-2's 12 layers at unit scale the limit is
#: above it by +0.0051 on average, the finite-size theory by +0.0013, benchmarks/multi_head.py).
_CENTRED = 0.005


def _setup(layers: Sequence[int], gammas: Sequence[float], k_max: int, seed: int, c: float
           ) -> tuple[list[int], np.ndarray, dict[int, gpt2.Summary], dict[int, np.ndarray], int]:
    """The common start of the GPT-2 sections: the layers (a list), the gammas (an array), the
    cached layer summaries (:func:`~attn_lib.book.figures.gpt2._summaries`), the raw matrices
    ``A = W_K W_Q^T`` and ``n = p / c``."""
    layers = list(layers)
    return (layers, np.asarray(gammas, dtype=float), _summaries(layers, k_max, seed),
            _raw_matrices(layers), _tokens(c))


def _directions(fit: gpt2.Fit, snr: float, seed: int) -> dict[str, np.ndarray]:
    """The two signals of the theory and multi-head sections: ``mu`` random
    (:func:`~attn_lib.studies.gpt2.random_direction`, ``seed``) and aligned with the leading
    spike of ``fit`` (:func:`~attn_lib.studies.gpt2.aligned_direction`), both of SNR ``snr``."""
    return {"random": gpt2.random_direction(gpt2.P, snr, seed),
            "aligned": gpt2.aligned_direction(fit, snr)}


def _words(numbers: dict[str, Any], fmt: str, ranges: Sequence[str] = (),
           counts: Sequence[tuple[str, int]] = ()) -> None:
    """Add the prose forms of ``numbers``: ``<base>_range`` (Markdown ``_min`` to ``_max`` in
    ``fmt``, one value when both print alike) for each base of ``ranges``, and ``<key>_text``
    (Markdown "k of n layers", :func:`~attn_lib.book.figures.gpt2._count`) for each
    ``(key, n)`` of ``counts``."""
    for base in ranges:
        numbers[base + "_range"] = Markdown(_span(numbers[base + "_min"], numbers[base + "_max"], fmt))
    for key, n in counts:
        numbers[key + "_text"] = Markdown(_count(numbers[key], n))


def real_matrix_theory(*, f: str, c: float, snr: float, theory_layers: Sequence[int],
                       theory_gammas: Sequence[float], theory_trials: int, k_max: int,
                       seed: int) -> Figure:
    """The any-matrix theory of each real layer against its Monte Carlo, beside the rank-r limits.

    For every layer of ``theory_layers``, the normalised real matrix ``A``, ``mu`` random
    (:func:`~attn_lib.studies.gpt2.random_direction`, ``seed``) or aligned with the leading spike
    (:func:`~attn_lib.studies.gpt2.aligned_direction`), at ``snr``, ``n = p / c`` and
    ``theory_gammas``:

    * Monte Carlo of the real kernel (:func:`~attn_lib.studies.gpt2.simulate_matrices`,
      ``theory_trials`` trials of the same seeded draws as the chapter's other runs: the first
      ``trials`` are theirs), cached;
    * the any-matrix theory of ``A`` itself (:func:`~attn_lib.studies.gpt2.matrix_theory`),
      cached (keyed by the code), and for the aligned ``mu`` also its finite-size version
      (``n`` tokens; the reduced model of ``book/derivation_finite_size.md``);
    * the rank-r limit on the fits, :func:`attn_lib.theory.attention_error` of
      :func:`~attn_lib.studies.gpt2.fit_rank_setting` for ``r`` = 1, 8 and ``k_50``.

    Returns
    -------
    Figure
        ``len(theory_gammas) x 2`` axes (rows: gamma; columns: random, aligned): ``|theory - MC|``
        per layer on a log scale, with the Monte Carlo standard error. Numbers:
        ``gpt2_mt_n_layers``, ``gpt2_mt_layers`` (Markdown list), ``gpt2_mt_n_tokens``, ``gpt2_mt_trials``, ``gpt2_mt_snr``,
        ``gpt2_mt_gammas`` (Markdown list), ``gpt2_mt_sem_max``; random mu:
        ``gpt2_mt_random_median``, ``gpt2_mt_random_max`` (``|theory - MC|`` over layers and
        gammas), ``gpt2_mt_random_n01`` (layers within 0.01 at every gamma),
        ``gpt2_mt_rank_median``, ``gpt2_mt_rank_min`` (the rank-r limits' ``|limit - MC|``, all
        r), ``gpt2_mt_rank_n01``; aligned mu: ``gpt2_mt_aligned_min``, ``gpt2_mt_aligned_max``
        (signed ``theory - MC``), ``gpt2_mt_delta_min``, ``gpt2_mt_delta_max``,
        ``gpt2_mt_fs_min``, ``gpt2_mt_fs_max`` (signed finite-size ``theory - MC``),
        ``gpt2_mt_fs_n01`` (layers within 0.01 at every gamma); the claims
        ``gpt2_mt_random_within`` (equivalence within :data:`_MARGIN` at every point),
        ``gpt2_mt_random_closer`` (closer than every rank-r limit at every point; not required),
        ``gpt2_mt_closer_n`` of ``gpt2_mt_closer_total`` such points resolved,
        ``gpt2_mt_random_closer_layers`` (per layer, the largest miss over the gammas smaller
        than every rank-r limit's),
        ``gpt2_mt_aligned_above`` (theory above MC, pooled), ``gpt2_mt_aligned_grows`` (the miss
        larger in the half of the layers with the larger ``delta``), ``gpt2_mt_fs_within``
        (the finite-size theory within :data:`_MARGIN` at every aligned point; not required: at
        32 trials the Monte Carlo cannot resolve every point); ``gpt2_mt_table``: Markdown table
        per layer and direction; ``gpt2_mt_c``; the prose forms (:func:`_words`)
        ``gpt2_mt_aligned_range``, ``gpt2_mt_fs_range``, ``gpt2_mt_delta_range``,
        ``gpt2_mt_random_miss`` ("has median .. and maximum .." of ``|theory - MC|``, random
        ``mu``; one value for one point) and
        ``gpt2_mt_{random,fs,rank}_n01_text``. Every claim is decided at the Student t threshold
        for ``theory_trials`` draws (:func:`attn_lib.book.claims.threshold`).
    """
    layers, gammas, summary, A_raw, n = _setup(theory_layers, theory_gammas, k_max, seed, c)
    keys = ("random", "aligned")
    rows, th, lim, mcs, fs = [], {}, {}, {}, {}
    for l in layers:
        sm = summary[l]
        M = A_raw[l] / sm.scale
        mus = _directions(sm.fit, snr, seed)
        mc = cache.cached(gpt2.simulate_matrices, matrices={"real": M}, mus=mus, f=f,
                          gammas=gammas, n=n, trials=theory_trials, seed=seed)
        for key in keys:
            mcs[l, key] = mc.attention["real"][key]
            th[l, key] = cache.cached(gpt2.matrix_theory, M=M, mu=mus[key], c=c, nonlinearity=f,
                                      gammas=gammas)
            for r in _RANKS:
                rr = sm.fit.k_for(0.5) if r == "k50" else int(r)
                lim[l, key, r] = theory.attention_error(
                    gpt2.fit_rank_setting(sm.fit, mus[key], c, f, rr), gammas)
            delta = abs(mus[key] @ M @ mus[key]) / np.sqrt(gpt2.P)
            row = {"layer": l, "mu": key, "delta": delta}
            for i, g in enumerate(gammas):
                d, se = th[l, key][i] - mcs[l, key].mean[i], mcs[l, key].sem[i]
                row[f"th - MC, gamma {g:g}"] = f"{d:+.4f} ± {se:.4f}"
            if key == "aligned":
                fs[l] = cache.cached(gpt2.matrix_theory, M=M, mu=mus[key], c=c, nonlinearity=f,
                                     gammas=gammas, n=n)
                row["finite-size max |th - MC|"] = f"{np.abs(fs[l] - mcs[l, key].mean).max():.4f}"
            else:
                row["finite-size max |th - MC|"] = "–"
            best = min(_RANKS, key=lambda r: np.abs(lim[l, key, r] - mcs[l, key].mean).max())
            row["best rank-r limit"] = f"r = {best}"
            row["its max |limit - MC|"] = float(np.abs(lim[l, key, best] - mcs[l, key].mean).max())
            rows.append(row)

    fig, axes = plt.subplots(len(gammas), 2, figsize=(10.4, 3.2 * len(gammas)), sharex=True,
                             sharey=True, squeeze=False)
    rank_col = dict(zip(_RANKS, style.shades("linearised", len(_RANKS))))
    for row_ax, (i, g) in zip(axes, enumerate(gammas)):
        for ax, key in zip(row_ax, keys):
            err = [abs(th[l, key][i] - mcs[l, key].mean[i]) for l in layers]
            ax.plot(layers, err, "o", color=_COL["aligned"], label="any-matrix theory of $A$")
            ax.plot(layers, [abs(fs[l][i] - mcs[l, key].mean[i]) if key == "aligned" else np.nan
                             for l in layers], "s", mfc="none", color=_COL["aligned"],
                    label="its finite-size version (aligned $\\mu$)")
            for r in _RANKS:
                ax.plot(layers, [abs(lim[l, key, r][i] - mcs[l, key].mean[i]) for l in layers],
                        "x", color=rank_col[r], label=f"rank-$r$ limit on the fit, $r$ = {r}")
            ax.plot(layers, [mcs[l, key].sem[i] for l in layers], "_", color="0.4", ms=12,
                    label="Monte Carlo standard error")
            ax.axhline(0.01, color="0.6", ls=":", lw=1)
            ax.set_xticks(layers)
            style.label_axes(ax, "layer" if i == len(gammas) - 1 else "",
                             r"$|\mathrm{theory} - \mathrm{MC}|$" if key == "random" else "",
                             title=f"$\\mu$ {key}, $\\gamma = {g:g}$", logy=True, legend=False)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8)

    def diffs(key: str, source: dict[Any, Any], r: int | str | None = None) -> np.ndarray:
        return np.array([(source[l, key] if r is None else source[l, key, r]) - mcs[l, key].mean
                         for l in layers])

    sem = {key: np.array([mcs[l, key].sem for l in layers]) for key in keys}
    d_rand, d_al = diffs("random", th), diffs("aligned", th)
    rank_rand = np.array([np.abs(diffs("random", lim, r)) for r in _RANKS])  # (R, L, G)
    numbers: dict[str, Any] = {
        "gpt2_mt_n_layers": len(layers), "gpt2_mt_layers": Markdown(", ".join(map(str, layers))),
        "gpt2_mt_n_tokens": n, "gpt2_mt_trials": theory_trials, "gpt2_mt_c": float(c),
        "gpt2_mt_snr": float(snr), "gpt2_mt_gammas": Markdown(", ".join(f"{g:g}" for g in gammas)),
        "gpt2_mt_sem_max": float(max(s.max() for s in sem.values())),
        "gpt2_mt_random_median": float(np.median(np.abs(d_rand))),
        "gpt2_mt_random_max": float(np.abs(d_rand).max()),
        "gpt2_mt_random_n01": int(np.sum(np.all(np.abs(d_rand) <= 0.01, axis=1))),
        "gpt2_mt_rank_median": float(np.median(rank_rand)),
        "gpt2_mt_rank_min": float(rank_rand.min()),
        "gpt2_mt_rank_n01": int(np.sum(np.all(rank_rand.min(axis=0) <= 0.01, axis=1))),
        "gpt2_mt_aligned_min": float(d_al.min()), "gpt2_mt_aligned_max": float(d_al.max()),
    }
    deltas = np.array([r["delta"] for r in rows if r["mu"] == "aligned"])
    numbers["gpt2_mt_delta_min"], numbers["gpt2_mt_delta_max"] = float(deltas.min()), float(deltas.max())
    d_fs = np.array([fs[l] - mcs[l, "aligned"].mean for l in layers])
    numbers["gpt2_mt_fs_min"], numbers["gpt2_mt_fs_max"] = float(d_fs.min()), float(d_fs.max())
    numbers["gpt2_mt_fs_n01"] = int(np.sum(np.all(np.abs(d_fs) <= 0.01, axis=1)))
    points = [(il, ig) for il in range(len(layers)) for ig in range(len(gammas))]
    numbers["gpt2_mt_random_within"] = _all_points("gpt2_mt_random_within", [
        equivalent("p", d_rand[p], sem["random"][p], margin=_MARGIN, draws=theory_trials,
                   wording=("", "", ""))
        for p in points], (f"within {_MARGIN:g} of the Monte Carlo at every layer and gamma",
                           f"not within {_MARGIN:g} of the Monte Carlo at every layer and gamma",
                           f"not decided within {_MARGIN:g} at every layer and gamma at this "
                           "profile"))
    numbers["gpt2_mt_fs_within"] = _all_points("gpt2_mt_fs_within", [
        equivalent("p", d_fs[p], sem["aligned"][p], margin=_MARGIN, draws=theory_trials,
                   wording=("", "", ""))
        for p in points], (f"within {_MARGIN:g} of the Monte Carlo at every layer and gamma",
                           f"not within {_MARGIN:g} of the Monte Carlo at every layer and gamma",
                           f"not decided within {_MARGIN:g} at every layer and gamma at this "
                           "profile"), required=False)
    # |theory - MC| - |limit - MC| moves by at most 2 MC standard errors when MC moves by one.
    # Point by point (a rank-r limit can cross the Monte Carlo at one gamma: reported, not
    # required) and per layer, by the largest miss over the gammas (required).
    closer = [less("p", abs(d_rand[p]), 2 * sem["random"][p], rank_rand[k][p],
                   draws=theory_trials, wording=("", "", "")) for k in range(len(_RANKS)) for p in points]
    numbers["gpt2_mt_closer_n"] = sum(c_.holds is True for c_ in closer)
    numbers["gpt2_mt_closer_total"] = len(closer)
    numbers["gpt2_mt_random_closer"] = _all_points("gpt2_mt_random_closer", closer, (
        "closer to the Monte Carlo than every rank-r limit on the fits at every layer and gamma",
        "farther from the Monte Carlo than a rank-r limit at some layer and gamma",
        "not decided as closer than every rank-r limit at every layer and gamma at this profile"), required=False,
        what="(layer, gamma, r) points")
    se_layer = 2 * sem["random"].max(axis=1)
    numbers["gpt2_mt_random_closer_layers"] = _all_points("gpt2_mt_random_closer_layers", [
        less("p", np.abs(d_rand[il]).max(), se_layer[il], rank_rand[k][il].max(),
             draws=theory_trials, wording=("", "", "")) for k in range(len(_RANKS)) for il in range(len(layers))], (
        "in every layer its largest miss over the gammas is smaller than that of every rank-r limit",
        "in some layer a rank-r limit has a smaller largest miss",
        "its largest miss per layer is not decided as smaller than every rank-r limit's at this "
        "profile"),
        what="(layer, r) pairs")
    pooled_se = float(np.sqrt(np.sum(sem["aligned"] ** 2)) / sem["aligned"].size)
    numbers["gpt2_mt_aligned_above"] = exceeds(
        "gpt2_mt_aligned_above", float(d_al.mean()), pooled_se,
        wording=("lies above the Monte Carlo on average over the layers and gammas",
                 "lies below the Monte Carlo on average over the layers and gammas",
                 "is not decided above or below the Monte Carlo on average at this profile"),
        draws=theory_trials)
    order = np.argsort(deltas)
    lo, hi = order[:len(layers) // 2], order[len(layers) - len(layers) // 2:]
    if len(layers) >= 2:
        def part(idx: np.ndarray) -> tuple[float, float]:
            return (float(d_al[idx].mean()),
                    float(np.sqrt(np.sum(sem["aligned"][idx] ** 2)) / sem["aligned"][idx].size))

        (m_hi, s_hi), (m_lo, s_lo) = part(hi), part(lo)
        numbers["gpt2_mt_aligned_grows"] = exceeds(
            "gpt2_mt_aligned_grows", m_hi, s_hi, m_lo, s_lo,
            wording=("is larger in the half of the layers with the larger delta",
                     "is smaller in the half of the layers with the larger delta",
                     "is not decided as growing with delta over the layers at this profile"),
            draws=theory_trials)
    else:
        numbers["gpt2_mt_aligned_grows"] = Claim(
            "gpt2_mt_aligned_grows", None, "one layer: no comparison across delta",
            ("", "", "cannot be compared across delta with one layer"))
    nl = len(layers)
    _words(numbers, "+.4f", ("gpt2_mt_aligned", "gpt2_mt_fs"),
           (("gpt2_mt_random_n01", nl), ("gpt2_mt_fs_n01", nl), ("gpt2_mt_rank_n01", nl)))
    numbers["gpt2_mt_delta_range"] = Markdown(_span(deltas.min(), deltas.max(), ".2f"))
    numbers["gpt2_mt_random_miss"] = Markdown(
        f"is {np.abs(d_rand).item():.4f}" if d_rand.size == 1 else
        f"has median {np.median(np.abs(d_rand)):.4f} and maximum {np.abs(d_rand).max():.4f}")
    table = pd.DataFrame(rows).set_index(["layer", "mu"])
    formats = {"delta": ".3f", "its max |limit - MC|": ".3f"}
    headers = {"mu": r"$\mu$", "delta": r"$\delta$"} | {
        f"th - MC, gamma {g:g}": rf"theory $-$ MC, $\gamma = {g:g}$" for g in gammas} | {
        "finite-size max |th - MC|": r"finite-size: max $|\mathrm{theory} - \mathrm{MC}|$"}
    numbers["gpt2_mt_table"] = markdown_table(*_renamed(table, formats, headers), left=True)
    return Figure(fig, numbers)


#: The models of :func:`multi_head`, in the table's order (GPT-2's own form last): name ->
#: (key of the simulated matrices, attention kind, legend label).
_HEAD_MODELS: dict[str, tuple[str, Entrywise | Softmax, str]] = {
    "summed": ("summed", Entrywise(), "$f$ of the summed logits (the book's model)"),
    "heads/unit": ("heads/unit", Entrywise(), "$f$ per head, unit logit variance"),
    "heads/gpt2": ("heads/gpt2", Entrywise(), "$f$ per head, GPT-2's scale $1/8$"),
    "softmax/gpt2": ("heads/gpt2", Softmax(1.0), "softmax per head, GPT-2's scale $1/8$"),
}


def multi_head(*, f: str, c: float, snr: float, head_layers: Sequence[int],
               head_gammas: Sequence[float], head_trials: int, k_max: int, seed: int) -> Figure:
    """Multi-head attention as GPT-2 computes it, beside the summed-logit model, on common draws.

    For every layer of ``head_layers``, ``mu`` random or aligned with the leading spike (as in
    :func:`real_matrix_theory`), ``snr``, ``n = p / c``, the cached Monte Carlo of
    :func:`~attn_lib.studies.gpt2.simulate_matrices` with ``relative=True`` (every model at
    ``gamma = g tau``, ``tau = ||Phi||_F^2 / n^2`` measured on the draw, ``g`` in
    ``head_gammas``: the book's equal-effective-regularisation convention) of

    * ``summed``: ``f`` of the summed logits of the normalised layer matrix (the book's model);
    * ``heads/unit``: ``f`` of each head's logits at unit variance
      (:func:`~attn_lib.studies.gpt2.heads` ``"unit"``), each head writing its block of
      ``p / 12 = 64`` feature rows;
    * ``heads/gpt2``: the same at GPT-2's own per-head scale ``1/8`` (``"gpt2"``);
    * ``softmax/gpt2``: GPT-2's own form, masked softmax of each head's logits at ``1/8``;
    * ridge regression, on the same draws (one seed: the softmax run draws the same tokens).

    Returns
    -------
    Figure
        ``len(head_gammas) x 2`` axes (rows: ``g``; columns: random, aligned): the error of each
        model per layer, mean ± one standard error. Numbers: ``gpt2_mh_layers`` (Markdown list),
        ``gpt2_mh_n_layers``, ``gpt2_mh_n_tokens``, ``gpt2_mh_trials``, ``gpt2_mh_snr``,
        ``gpt2_mh_gammas`` (Markdown list), ``gpt2_mh_sem_max``; ``gpt2_mh_sigma_min``,
        ``gpt2_mh_sigma_max`` (the heads' logit standard deviation ``||A_h||_F / 8`` at GPT-2's
        scale); the paired differences ``gpt2_mh_unit_minus_summed_min`` / ``_max`` (random
        ``mu``) and ``gpt2_mh_softmax_minus_summed_min`` / ``_max`` (both directions) over layers
        and ``g``; the claims ``gpt2_mh_unit_lower`` (per head at unit scale below the summed
        logits, random ``mu``, every layer and ``g``), ``gpt2_mh_softmax_differs`` (GPT-2's own
        form differs from the summed-logit model in every layer and direction, at the ``g``
        where the difference is largest in standard errors: its sign may change with ``g``) and
        ``gpt2_mh_above_ridge`` (every model above ridge, random ``mu``), each at :data:`Z`
        paired standard errors; ``gpt2_mh_table``: Markdown table per layer, direction and model
        (``E`` ± s.e. at each ``g`` and the mean ``tau``); the prose forms
        ``gpt2_mh_unit_minus_summed_range``, ``gpt2_mh_softmax_minus_summed_range`` and
        ``gpt2_mh_sigma_range``. Claims at the Student t threshold for ``head_trials`` draws.
    """
    layers, gammas, summary, A_raw, n = _setup(head_layers, head_gammas, k_max, seed, c)
    keys = ("random", "aligned")
    vals, tau, sigma = {}, {}, []
    for l in layers:
        W_Q, W_K = gpt2.load_qk(l)
        mats = {"summed": A_raw[l] / summary[l].scale, "heads/unit": gpt2.heads(W_Q, W_K, "unit"),
                "heads/gpt2": gpt2.heads(W_Q, W_K, "gpt2")}
        sigma.extend(np.linalg.norm(mats["heads/gpt2"], axis=(1, 2)) / np.sqrt(gpt2.P))
        mus = _directions(summary[l].fit, snr, seed)
        runs = {}
        for kind in (Entrywise(), Softmax(1.0)):
            used = {key: mats[key] for key, k, _ in _HEAD_MODELS.values() if k == kind}
            runs[kind] = cache.cached(gpt2.simulate_matrices, matrices=used, mus=mus, f=f,
                                      gammas=gammas, n=n, trials=head_trials, seed=seed,
                                      attention=kind, relative=True)
        for d in keys:
            for m, (key, kind, _) in _HEAD_MODELS.items():
                vals[l, m, d] = runs[kind].values["attention", key, d]
                tau[l, m, d] = float(np.mean(runs[kind].values["scale", key, d]))
            vals[l, "ridge", d] = runs[Entrywise()].values["ridge", d]
            tau[l, "ridge", d] = float(np.mean(runs[Entrywise()].values["ridge_scale", d]))
    models = [*_HEAD_MODELS, "ridge"]
    labels = {m: lab for m, (_, _, lab) in _HEAD_MODELS.items()} | {"ridge": "ridge regression"}
    colors = dict(zip(_HEAD_MODELS, style.shades("attention", len(_HEAD_MODELS)))) | {
        "ridge": _COL["ridge"]}
    marks = {"summed": "o", "heads/unit": "s", "heads/gpt2": "D", "softmax/gpt2": "^", "ridge": "v"}
    sem = {k: standard_error(v, axis=0) for k, v in vals.items()}

    fig, axes = plt.subplots(len(gammas), 2, figsize=(10.4, 3.0 * len(gammas)), sharex=True,
                             squeeze=False)
    x = np.arange(len(layers), dtype=float)
    for row_ax, (i, g) in zip(axes, enumerate(gammas)):
        for ax, d in zip(row_ax, keys):
            for j, m in enumerate(models):
                style.plot_sim(ax, x + 0.12 * (j - 2), [vals[l, m, d][:, i].mean() for l in layers],
                               [sem[l, m, d][i] for l in layers], label=labels[m], fmt=marks[m],
                               color=colors[m])
            ax.set_xticks(x, [str(l) for l in layers])
            style.label_axes(ax, "layer" if i == len(gammas) - 1 else "",
                             f"$E$ at $\\gamma = {g:g}\\,\\tau$" if d == "random" else "",
                             title=f"$\\mu$ {d}", legend=False)
    handles, labs = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labs, loc="outside lower center", ncol=3, fontsize=8)

    def paired(a: str, b: str, d: str) -> tuple[np.ndarray, np.ndarray]:
        """``E_a - E_b`` (layers, gammas) and its paired standard error."""
        diff = np.array([vals[l, a, d] - vals[l, b, d] for l in layers])  # (L, T, G)
        return diff.mean(axis=1), standard_error(diff, axis=1)

    points = [(il, ig) for il in range(len(layers)) for ig in range(len(gammas))]
    d_unit, s_unit = paired("heads/unit", "summed", "random")
    d_soft = {d: paired("softmax/gpt2", "summed", d) for d in keys}
    numbers: dict[str, Any] = {
        "gpt2_mh_layers": Markdown(", ".join(map(str, layers))), "gpt2_mh_n_layers": len(layers),
        "gpt2_mh_n_tokens": n, "gpt2_mh_trials": head_trials, "gpt2_mh_snr": float(snr),
        "gpt2_mh_gammas": Markdown(", ".join(f"{g:g}" for g in gammas)),
        "gpt2_mh_sem_max": float(max(s.max() for s in sem.values())),
        "gpt2_mh_sigma_min": float(min(sigma)), "gpt2_mh_sigma_max": float(max(sigma)),
        "gpt2_mh_unit_minus_summed_min": float(d_unit.min()),
        "gpt2_mh_unit_minus_summed_max": float(d_unit.max()),
        "gpt2_mh_softmax_minus_summed_min": float(min(v[0].min() for v in d_soft.values())),
        "gpt2_mh_softmax_minus_summed_max": float(max(v[0].max() for v in d_soft.values())),
    }
    _words(numbers, "+.3f", ("gpt2_mh_unit_minus_summed", "gpt2_mh_softmax_minus_summed"))
    numbers["gpt2_mh_sigma_range"] = Markdown(_span(min(sigma), max(sigma), ".1f"))
    numbers["gpt2_mh_unit_lower"] = _all_points("gpt2_mh_unit_lower", [
        less("p", d_unit[p], s_unit[p], draws=head_trials, wording=("", "", "")) for p in points], (
        "lower than the summed-logit model's at every layer and g",
        "higher than the summed-logit model's at some layer and g",
        "not decided below the summed-logit model's at every layer and g at this profile"))
    # per layer and direction, the g where GPT-2's own form is farthest from the summed logits
    # (in standard errors; the difference may change sign with g): resolved beyond Z of either sign
    farthest = []
    for d in keys:
        diff, se = d_soft[d]
        for il in range(len(layers)):
            ig = int(np.argmax(np.abs(diff[il]) / np.maximum(se[il], 1e-300)))
            c_ = exceeds("p", diff[il, ig], se[il, ig], draws=head_trials, wording=("", "", ""))
            farthest.append(Claim("p", None if c_.holds is None else True,
                                  f"layer {layers[il]}, mu {d}, g {gammas[ig]:g}: {c_.evidence}",
                                  c_.wording))
    numbers["gpt2_mh_softmax_differs"] = _all_points("gpt2_mh_softmax_differs", farthest, (
        "differs from the summed-logit model's in every layer and direction",
        "", "is not decided as different from the summed-logit model's in every layer and "
        "direction at this profile"),
        what="(layer, direction) pairs")
    above = []
    for m in _HEAD_MODELS:
        d_r, s_r = paired(m, "ridge", "random")
        above += [exceeds("p", d_r[p], s_r[p], draws=head_trials, wording=("", "", ""))
                  for p in points]
    numbers["gpt2_mh_above_ridge"] = _all_points("gpt2_mh_above_ridge", above, (
        "above ridge regression at every layer and g: the claim holds for the per-head forms "
        "too, in this regime",
        "below ridge regression at some layer and g: the claim fails there",
        "not decided above ridge regression at every layer and g at this profile"),
        what="(model, layer, g) points")
    rows = []
    for l in layers:
        for d in keys:
            for m in models:
                row = {"layer": l, "mu": d, "model": labels[m]}
                for i, g in enumerate(gammas):
                    row[f"E, g {g:g}"] = f"{vals[l, m, d][:, i].mean():.4f} ± {sem[l, m, d][i]:.4f}"
                row["tau"] = tau[l, m, d]
                rows.append(row)
    headers = {"mu": r"$\mu$", "tau": r"$\tau$"} | {
        f"E, g {g:g}": rf"$E$, $\gamma = {g:g}\,\tau$" for g in gammas}
    table = pd.DataFrame(rows).set_index(["layer", "mu", "model"])
    numbers["gpt2_mh_table"] = markdown_table(*_renamed(table, {"tau": ".3f"}, headers), left=True)
    return Figure(fig, numbers)


#: The (scale, direction) cases of :func:`multi_head_theory`: the book's unit scale with both
#: signals, GPT-2's own 1/8 with the random one (where the proportional limit applies).
_HEAD_CASES: tuple[tuple[str, str], ...] = (("unit", "random"), ("unit", "aligned"), ("gpt2", "random"))


def multi_head_theory(*, f: str, c: float, snr: float, head_layers: Sequence[int],
                      theory_gammas: Sequence[float], theory_trials: int, k_max: int,
                      seed: int) -> Figure:
    """The multi-head theory against the per-head model's Monte Carlo, beside the summed-logit theory.

    For every layer of ``head_layers`` and each case of :data:`_HEAD_CASES` (the heads' scale of
    :func:`~attn_lib.studies.gpt2.heads` and ``mu`` as in :func:`real_matrix_theory`), at
    ``snr``, ``n = p / c`` and the raw ``theory_gammas`` (theory and simulation of one model: no
    scale convention is needed):

    * the cached Monte Carlo of the per-head model (:func:`~attn_lib.studies.gpt2.simulate_matrices`
      with the stack of head matrices, ``theory_trials`` trials of the chapter's seeded draws);
    * the cached multi-head deterministic equivalent (:func:`~attn_lib.studies.gpt2.heads_theory`,
      :mod:`attn_lib.theory._heads`) and its finite-size version at ``n``, the limit plus the
      cached shift of the heads' reduced models (:func:`~attn_lib.studies.gpt2.heads_shift`);
    * the any-matrix theory of the summed logits (:func:`~attn_lib.studies.gpt2.matrix_theory`
      of the normalised layer matrix, the cached value of :func:`real_matrix_theory`), which
      describes a different model: the yardstick for how much the heads matter.

    Returns
    -------
    Figure
        ``len(theory_gammas) x 3`` axes (rows: gamma; columns: the cases): ``|theory - MC|`` per
        layer on a log scale for the multi-head theory, its finite-size version and the
        summed-logit theory, with the Monte Carlo standard error. Numbers: ``gpt2_mht_trials``,
        ``gpt2_mht_sem_max``; per case ``<scale>_<mu>`` the signed ``theory - MC`` range
        ``gpt2_mht_<case>_min`` / ``_max``, the median ``|theory - MC|``
        ``gpt2_mht_<case>_median`` and the layers within 0.01 at every gamma
        ``gpt2_mht_<case>_n01``, and the same for the finite-size theory
        (``gpt2_mht_fs_<case>_...``); ``gpt2_mht_summed_min``, the smallest
        ``|summed-logit theory - per-head MC|`` at unit scale with the random ``mu``; the claims
        ``gpt2_mht_random_within`` (the multi-head theory within :data:`_MARGIN` of the Monte
        Carlo at every layer, gamma and random-``mu`` case, an equivalence test at :data:`Z`
        standard errors; not required: at GPT-2's scale the Monte Carlo's standard error at 16
        trials is about 0.005, too large to resolve 0.02 where the theory is off by 0.006),
        ``gpt2_mht_closer`` (closer than the summed-logit theory at every
        unit-scale random-``mu`` point, at two standard errors of the difference of the two
        misses) and ``gpt2_mht_aligned_above`` (above the Monte Carlo on average for the aligned
        ``mu``, the coherent shift the limit drops; pooled), ``gpt2_mht_fs_within`` (the
        finite-size theory within :data:`_MARGIN` at every layer, gamma and case; not required)
        and ``gpt2_mht_fs_centred`` (its mean ``theory - MC`` for the aligned ``mu`` at unit
        scale within :data:`_CENTRED`, pooled; not required: at the quick profile's draws it
        cannot be decided); ``gpt2_mht_table``: Markdown table per layer and case (limit and
        finite-size theory); the prose forms ``gpt2_mht_[fs_]<case>_range`` and
        ``gpt2_mht_[fs_]<case>_n01_text``. Claims at the Student t threshold for
        ``theory_trials`` draws.
    """
    layers, gammas, summary, A_raw, n = _setup(head_layers, theory_gammas, k_max, seed, c)
    th, fs, mcs, summed = {}, {}, {}, {}
    for l in layers:
        W_Q, W_K = gpt2.load_qk(l)
        mus = _directions(summary[l].fit, snr, seed)
        stacks = {s: gpt2.heads(W_Q, W_K, s) for s in {s for s, _ in _HEAD_CASES}}
        mc = cache.cached(gpt2.simulate_matrices, matrices=stacks, mus=mus, f=f, gammas=gammas,
                          n=n, trials=theory_trials, seed=seed)
        for scale, d in _HEAD_CASES:
            mcs[l, scale, d] = mc.attention[scale][d]
            th[l, scale, d] = cache.cached(gpt2.heads_theory, W_Q=W_Q, W_K=W_K, mu=mus[d], c=c,
                                           nonlinearity=f, gammas=gammas, scale=scale)
            # the finite-size theory: the limit plus the heads' shift (gpt2.heads_theory(n=n))
            fs[l, scale, d] = th[l, scale, d] + cache.cached(
                gpt2.heads_shift, W_Q=W_Q, W_K=W_K, mu=mus[d], c=c, nonlinearity=f,
                gammas=gammas, scale=scale, n=n)
        summed[l] = cache.cached(gpt2.matrix_theory, M=A_raw[l] / summary[l].scale,
                                 mu=mus["random"], c=c, nonlinearity=f, gammas=gammas)
    diff = {case: np.array([th[(l, *case)] - mcs[(l, *case)].mean for l in layers])
            for case in _HEAD_CASES}                                       # (L, G)
    d_fs = {case: np.array([fs[(l, *case)] - mcs[(l, *case)].mean for l in layers])
            for case in _HEAD_CASES}
    sem = {case: np.array([mcs[(l, *case)].sem for l in layers]) for case in _HEAD_CASES}
    d_sum = np.array([summed[l] - mcs[l, "unit", "random"].mean for l in layers])

    fig, axes = plt.subplots(len(gammas), len(_HEAD_CASES), figsize=(12.0, 3.0 * len(gammas)),
                             sharex=True, sharey=True, squeeze=False)
    for row_ax, (i, g) in zip(axes, enumerate(gammas)):
        for ax, case in zip(row_ax, _HEAD_CASES):
            ax.plot(layers, np.abs(diff[case][:, i]), "o", color=_COL["aligned"],
                    label="multi-head theory (limit)")
            ax.plot(layers, np.abs(d_fs[case][:, i]), "s", mfc="none", color=_COL["aligned"],
                    label=f"its finite-size version ($n = {n}$)")
            if case == ("unit", "random"):
                ax.plot(layers, np.abs(d_sum[:, i]), "x", color=style.color("linearised"),
                        label="theory of the summed logits")
            ax.plot(layers, sem[case][:, i], "_", color="0.4", ms=12,
                    label="Monte Carlo standard error")
            ax.axhline(0.01, color="0.6", ls=":", lw=1)
            ax.set_xticks(layers)
            scale, d = case
            style.label_axes(ax, "layer" if i == len(gammas) - 1 else "",
                             r"$|\mathrm{theory} - \mathrm{MC}|$" if case == _HEAD_CASES[0] else "",
                             title=f"{'unit' if scale == 'unit' else 'GPT-2'} scale, $\\mu$ {d}, "
                                   f"$\\gamma = {g:g}$", logy=True, legend=False)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8)

    numbers: dict[str, Any] = {"gpt2_mht_trials": theory_trials,
                               "gpt2_mht_sem_max": float(max(s.max() for s in sem.values())),
                               "gpt2_mht_summed_min": float(np.abs(d_sum).min())}
    bases = []
    for case in _HEAD_CASES:
        for key, dd in (("gpt2_mht_" + "_".join(case), diff[case]),
                        ("gpt2_mht_fs_" + "_".join(case), d_fs[case])):
            numbers[key + "_min"], numbers[key + "_max"] = float(dd.min()), float(dd.max())
            numbers[key + "_median"] = float(np.median(np.abs(dd)))
            numbers[key + "_n01"] = int(np.sum(np.all(np.abs(dd) <= 0.01, axis=1)))
            bases.append(key)
    _words(numbers, "+.4f", bases, [(key + "_n01", len(layers)) for key in bases])
    points = [(il, ig) for il in range(len(layers)) for ig in range(len(gammas))]
    numbers["gpt2_mht_random_within"] = _all_points("gpt2_mht_random_within", [
        equivalent("p", diff[case][p], sem[case][p], margin=_MARGIN, draws=theory_trials,
                   wording=("", "", ""))
        for case in _HEAD_CASES if case[1] == "random" for p in points], (
        f"within {_MARGIN:g} of the Monte Carlo at every layer and gamma, at both scales",
        f"not within {_MARGIN:g} of the Monte Carlo at some layer and gamma",
        f"not decided within {_MARGIN:g} at every layer and gamma at this profile"),
        required=False, what="(scale, layer, gamma) points")
    # |heads - MC| - |summed - MC| moves by at most 2 MC standard errors when MC moves by one
    base = ("unit", "random")
    numbers["gpt2_mht_closer"] = _all_points("gpt2_mht_closer", [
        less("p", abs(diff[base][p]), 2 * sem[base][p], abs(d_sum[p]), draws=theory_trials,
             wording=("", "", ""))
        for p in points], (
        "closer to the per-head simulation at every layer and gamma: the heads change the error by "
        "more than the theory's error, so a theory of GPT-2's attention has to keep them apart",
        "farther from it than the theory of the summed logits at some layer and gamma",
        "not decided as closer at every layer and gamma at this profile"))
    al_ = diff["unit", "aligned"]
    se_al = sem["unit", "aligned"]
    numbers["gpt2_mht_aligned_above"] = exceeds(
        "gpt2_mht_aligned_above", float(al_.mean()), float(np.sqrt(np.sum(se_al ** 2)) / se_al.size),
        wording=("lies above the Monte Carlo on average over the layers and gammas",
                 "lies below the Monte Carlo on average over the layers and gammas",
                 "is not decided above or below the Monte Carlo on average at this profile"),
        draws=theory_trials)
    numbers["gpt2_mht_fs_within"] = _all_points("gpt2_mht_fs_within", [
        equivalent("p", d_fs[case][p], sem[case][p], margin=_MARGIN, draws=theory_trials,
                   wording=("", "", ""))
        for case in _HEAD_CASES for p in points], (
        f"within {_MARGIN:g} of the Monte Carlo at every layer, gamma and case",
        f"not within {_MARGIN:g} of the Monte Carlo at some layer, gamma and case",
        f"not decided within {_MARGIN:g} at every layer, gamma and case at this profile"),
        required=False, what="(case, layer, gamma) points")
    fs_al = d_fs["unit", "aligned"]
    numbers["gpt2_mht_fs_centred"] = equivalent(
        "gpt2_mht_fs_centred", float(fs_al.mean()), float(np.sqrt(np.sum(se_al ** 2)) / se_al.size),
        margin=_CENTRED, draws=theory_trials, required=False, wording=(
            f"is within {_CENTRED:g} of the Monte Carlo on average over the layers and gammas",
            f"is off the Monte Carlo by more than {_CENTRED:g} on average over the layers and gammas",
            f"is not decided within {_CENTRED:g} of the Monte Carlo on average at this profile"))
    rows = []
    for il, l in enumerate(layers):
        for case in _HEAD_CASES:
            row = {"layer": l, "scale": case[0], "mu": case[1]}
            for ig, g in enumerate(gammas):
                row[f"th - MC, gamma {g:g}"] = f"{diff[case][il, ig]:+.4f} ± {sem[case][il, ig]:.4f}"
            for ig, g in enumerate(gammas):
                row[f"fs - MC, gamma {g:g}"] = f"{d_fs[case][il, ig]:+.4f}"
            rows.append(row)
    headers = ({"mu": r"$\mu$"} | {f"th - MC, gamma {g:g}": rf"limit $-$ MC, $\gamma = {g:g}$"
                                   for g in gammas}
               | {f"fs - MC, gamma {g:g}": rf"finite-size $-$ MC, $\gamma = {g:g}$" for g in gammas})
    table = pd.DataFrame(rows).set_index(["layer", "scale", "mu"])
    numbers["gpt2_mht_table"] = markdown_table(*_renamed(table, {}, headers), left=True)
    return Figure(fig, numbers)
