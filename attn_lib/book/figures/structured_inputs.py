r"""Figures of the chapter *Signal and alignment* (``book/04_structured_inputs``).

The interpolation error of attention (``f = tanh`` unless stated, ``w_K = w_Q = w``) and of ridge
regression, compared at equal ``gamma / tau``: random against structured inputs (the hero figure,
:func:`hero`), against the SNR and the alignment ``cos(mu, w)``, against ``c = p/n``, and the
ridgeless error against ridge's rank bound (:func:`row_space_bound`). Lines are the deterministic
equivalents (:func:`attn_lib.studies.sweeps.equivalents`), markers Monte Carlo
(:func:`attn_lib.studies.sweeps.simulations`, cached; mean ± one standard error over trials).

:func:`theory_and_simulation` (a DE line and Monte Carlo markers along a sweep of settings) is
also used by :mod:`attn_lib.book.figures.a1_zero`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import ArrayLike

from ... import Setting
from ..._validation import check_int
from ...simulation.trials import standard_error
from ...studies import sweeps
from .. import claims, style
from ..page import Figure
from . import strong_alignment

__all__ = ["F", "VARIANTS", "theory_and_simulation", "snr", "gap_maps", "aspect_ratio", "hero",
           "row_space_bound", "BOUND_SNRS", "BOUND_G"]

#: The nonlinearity of the chapter.
F = "tanh"
#: Attention variants: weights ``w_K = w_Q = w`` with ``|w|`` and ``cos(mu, w)`` (default 1).
VARIANTS: dict[str, dict[str, Any]] = {  # keyword arguments of Setting
    "attention, $w \\perp \\mu$": dict(wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.0, cos_mu_wq=0.0),
    "attention, aligned, $\\|w\\| = 1$": dict(wk_norm=1.0, wq_norm=1.0),
    "attention, aligned, $\\|w\\| = 2$": dict(wk_norm=2.0, wq_norm=2.0),
}
_VARIANT_COLORS = dict(zip(VARIANTS, [style.color("linear"), style.color("attention"),
                                      style.color("sign")]))
#: Section of the structured-inputs sweeps: aspect ratio and ridge parameter.
C, GAMMA = 0.5, 1.0


def theory_and_simulation(ax: Any, x_th: ArrayLike, settings_th: Sequence[Setting],
                          x_mc: ArrayLike, settings_mc: Sequence[Setting],
                          gammas: Sequence[float] | np.ndarray, *, n: int, trials: int, seed: int,
                          label: str, color: str | None, k: int = 0, model: str = "attention",
                          marker: str = "o") -> tuple[np.ndarray, sweeps.SweepResult]:
    """DE line along ``settings_th`` and Monte Carlo markers along ``settings_mc`` at ``gammas[k]``.

    The simulation runs on the whole grid ``gammas`` (one draw gives every gamma), so panels
    that differ only in gamma share their cached draws; for ``model="ridge"`` only ridge
    regression is simulated. Drawn with :func:`attn_lib.book.style.plot_theory_vs_sim`
    (markers: mean ± one standard deviation over ``trials``).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    x_th, settings_th : sequences of length L
        Abscissae and settings of the theory line.
    x_mc, settings_mc : sequences of length B
        Abscissae and settings of the simulation.
    gammas : sequence of float, length G
        Ridge parameters of the simulation.
    n, trials, seed
        Tokens, draws and root seed of :func:`attn_lib.studies.sweeps.simulations`.
    label, color : str
        Legend name (``"<label> (theory)"``, ``"<label> (simulation)"``) and colour.
    k : int, default 0
        Index of the gamma drawn.
    model : {"attention", "ridge"}, default "attention"
    marker : str, default "o"

    Returns
    -------
    theory : ndarray of shape (L,)
        The DE at ``gammas[k]``.
    simulation : SweepResult
        All ``B x trials x G`` simulated errors.
    """
    th = sweeps.equivalents(settings_th, gammas[k], model=model)
    mc = sweeps.simulations(settings_mc, gammas, n=n, trials=trials, seed=seed,
                            attention=(model == "attention"))
    style.plot_theory_vs_sim(ax, x_th, th, mc.mean(model)[:, k], mc.sem(model)[:, k],
                             label=label, color=color, x_sim=x_mc, fmt=marker)
    return th, mc


def _rel(a: Any, b: Any) -> Any:
    """Relative gap in percent, ``100 (a / b - 1)``."""
    return 100 * (a / b - 1)


def snr(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against the SNR at ``c = 1/2``: ridge at ``gamma = 1`` and the :data:`VARIANTS` at
    the same ``gamma / tau`` (:func:`attn_lib.studies.sweeps.matched_gamma`).

    One axes; simulated at ``linspace(0, 4, n_points)``, theory on 81 points.

    Parameters
    ----------
    n : int
        Tokens of every simulated point.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along a sweep).
    n_points : int
        Simulated points of the sweep.

    Returns
    -------
    Figure
        Numbers (DE, relative gaps to ridge in percent): ``snr0_gap`` (orthogonal weights,
        SNR 0), ``snr4_gap_orth``, ``snr4_gap_al1`` (SNR 4, orthogonal and aligned
        ``|w| = 1``); ``min_gap_al2``, the smallest gap (percent) for aligned ``|w| = 2``, SNR in
        ``[0, 8]``; ``raw_rev_max``, the same at the raw ``gamma = 1``;
        ``g_att``, attention's matched ``gamma``; ``mc_al2_gap``, ``mc_al2_gap_sem``, the
        simulated paired gap (mean and standard error over trials, percent) for ``|w| = 2`` at
        SNR 4, and the claim ``mc_al2_below`` (the paired ratio attention / ridge below 1, its
        evidence the ratio minus 1, decided at the Student t threshold of ``trials`` draws);
        ``delta_al2``, the coherent shift there.
    """
    snr_mc = np.linspace(0.0, 4.0, check_int(n_points, "n_points"))
    snr_th = np.linspace(0.0, 4.0, 81)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    common: dict[str, Any] = dict(n=n, trials=trials, seed=seed)
    g_att = sweeps.matched_gamma(Setting(c=C, f=F), GAMMA)  # the scale convention
    th_r, mc_r = theory_and_simulation(ax, snr_th, [Setting(c=C, snr=float(s)) for s in snr_th],
                                       snr_mc, [Setting(c=C, snr=float(s), f=F) for s in snr_mc],
                                       [GAMMA], label="ridge", color=style.color("ridge"),
                                       model="ridge", marker="D", **common)
    res = {}
    for label, kw in VARIANTS.items():
        res[label] = theory_and_simulation(
            ax, snr_th, [Setting(c=C, snr=float(s), f=F, **kw) for s in snr_th],
            snr_mc, [Setting(c=C, snr=float(s), f=F, **kw) for s in snr_mc], [g_att],
            label=label, color=_VARIANT_COLORS[label], **common)
    (th_orth, _), (th_al1, _), (_, mc_al2) = res.values()
    style.label_axes(ax, r"$\mathrm{SNR} = \|\mu\|^2$", r"interpolation error $E$",
                     title=f"$c = 1/2$ ($p = {mc_al2.p[0]}$, $n = {n}$), ridge at "
                           f"$\\gamma = 1$, attention at $\\gamma = {g_att:.2f}$ (same "
                           f"$\\gamma/\\tau$)", legend=False)
    ax.legend(ncol=2, fontsize=8)
    snr_fine = np.linspace(0.0, 8.0, 161)
    al2 = list(VARIANTS.values())[2]
    fine = [Setting(c=C, snr=float(s), f=F, **al2) for s in snr_fine]
    att_fine = sweeps.equivalents(fine, g_att)
    ridge_fine = sweeps.equivalents(fine, GAMMA, model="ridge")
    raw_gap = _rel(sweeps.equivalents(fine, GAMMA), ridge_fine)
    # paired over draws: the ridge and attention runs share the seed and so the tokens
    ratio = mc_al2.values("attention")[-1, :, 0] / mc_r.values("ridge")[-1, :, 0]
    return Figure(fig, {
        "g_att": g_att, "raw_rev_max": -float(np.min(raw_gap)),
        "min_gap_al2": float(np.min(_rel(att_fine, ridge_fine))),
        "snr0_gap": _rel(th_orth[0], th_r[0]), "snr4_gap_orth": _rel(th_orth[-1], th_r[-1]),
        "snr4_gap_al1": _rel(th_al1[-1], th_r[-1]),
        "mc_al2_gap": 100 * float(ratio.mean() - 1),
        "mc_al2_gap_sem": 100 * float(standard_error(ratio, axis=0)),
        "mc_al2_below": claims.less("mc_al2_below", float(ratio.mean()),
                                    float(standard_error(ratio, axis=0)), 1.0, 0.0, draws=trials,
                                    wording=("below", "above", "not decided at this profile "
                                             "against"), required=False),
        "delta_al2": Setting(c=C, snr=4.0, f=F, **al2).delta(n)})


def _gap_percent(settings: Sequence[Setting], gammas: Any) -> np.ndarray:
    """DE relative gap ``100 (E_att / E_ridge - 1)`` of each setting (and gamma), attention at
    the matched ``gamma`` (:func:`attn_lib.studies.sweeps.matched_gamma`; the settings share
    ``c`` and ``f``)."""
    att = sweeps.equivalents(settings, sweeps.matched_gamma(settings[0], gammas))
    ridge = sweeps.equivalents(settings, gammas, model="ridge")
    return 100 * (att / ridge - 1)


def gap_maps() -> Figure:
    r"""DE relative gap ``100 (E_att / E_ridge - 1)`` as two heat maps over the SNR (theory only).

    At ``c = 1/2``, ``|w| = 2``, attention at the same ``gamma / tau`` as ridge's ``gamma``:
    against the alignment ``cos(mu, w)`` at ``gamma = 1``, and against ``gamma`` for aligned
    weights (:func:`attn_lib.book.style.gap_map`, colour scale
    symmetric about zero). Four axes (two maps and their colour bars).

    Returns
    -------
    Figure
        Numbers: ``map_cos_best``, the largest advantage of attention on the alignment map
        (``map_cos_min``, its negative: the smallest gap);
        ``map_cos0_min``, the smallest gap without alignment; ``map_gamma_best``, the largest
        advantage on the gamma map; ``map_gamma_small``, the smallest gap for ``gamma <= 0.1``;
        ``map_gamma_cross``, the smallest ``gamma`` with a reversal at some SNR.
    """
    snr_ax = np.linspace(0.0, 6.0, 37)
    cos_ax = np.linspace(0.0, 1.0, 26)
    g_ax = np.logspace(-2, 1, 31)
    map_cos = _gap_percent([Setting(c=C, snr=float(s), f=F, wk_norm=2.0, wq_norm=2.0,
                                    cos_mu_wk=float(k), cos_mu_wq=float(k))
                            for k in cos_ax for s in snr_ax], GAMMA).reshape(cos_ax.size,
                                                                              snr_ax.size)
    map_gamma = _gap_percent([Setting(c=C, snr=float(s), f=F, wk_norm=2.0, wq_norm=2.0)
                              for s in snr_ax], g_ax).T
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, z, y, ylabel, logy in ((axes[0], map_cos, cos_ax, r"alignment $\cos(\mu, w)$", False),
                                   (axes[1], map_gamma, g_ax, r"ridge parameter $\gamma$", True)):
        lim = max(abs(z.min()), abs(z.max()), 1e-3)
        style.gap_map(ax, snr_ax, y, z, vmin=-lim, vmax=lim,
                      colorbar=r"$100\,(E_{\mathrm{att}} / E_{\mathrm{ridge}} - 1)$")
        style.label_axes(ax, r"$\mathrm{SNR} = \|\mu\|^2$", ylabel, logy=logy, legend=False)
    axes[1].set_ylabel(r"ridge parameter $\gamma$ (ridge; attention at equal $\gamma/\tau$)")
    axes[0].set_title(r"$\|w\| = 2$, $\gamma = 1$, $c = 1/2$ (theory)")
    axes[1].set_title(r"aligned, $\|w\| = 2$, $c = 1/2$ (theory)")
    return Figure(fig, {
        "map_cos_best": -float(map_cos.min()), "map_cos_min": float(map_cos.min()),
        "map_cos0_min": float(map_cos[0].min()),
        "map_gamma_best": -float(map_gamma.min()),
        "map_gamma_small": float(map_gamma[g_ax <= 0.1].min()),
        "map_gamma_cross": float(g_ax[(map_gamma < 0).any(axis=1)].min())
        if (map_gamma < 0).any() else float("nan")})


def aspect_ratio(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against ``c = p/n`` at fixed ``n``, SNR 2: ridge at ``gamma = 0.1`` and ``1``,
    attention at the same ``gamma / tau``.

    Two axes (one per ridge ``gamma``): ridge, attention with orthogonal weights and with
    aligned ``|w| = 1``, each attention point at its own matched ``gamma``
    (:func:`attn_lib.studies.sweeps.matched_gamma`; ``tau`` depends on ``c``); simulated at
    ``linspace(0.1, 0.9, n_points)``.

    Parameters
    ----------
    n : int
        Tokens of every simulated point.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along a sweep).
    n_points : int
        Simulated points of the sweep.

    Returns
    -------
    Figure
        Numbers: ``c_spread_ridge``, ``c_spread_att`` (range of the DE over ``c`` in
        ``[0.1, 0.9]`` at ridge's ``gamma = 1``, ridge and aligned attention),
        ``c_spread_ridge_01``, ``c_spread_att_01`` (the same at ``gamma = 0.1``),
        ``c_spread_ridge_mc``, ``c_spread_att_mc`` (range of the simulated means at
        ``gamma = 1``).
    """
    snr_ = 2.0
    c_mc = np.linspace(0.1, 0.9, check_int(n_points, "n_points"))
    c_th = np.linspace(0.08, 0.95, 60)
    labels = list(VARIANTS)
    c_gammas = np.array([0.1, 1.0])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    ridge_vals: dict[int, tuple[np.ndarray, sweeps.SweepResult]] = {}
    att_vals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for k, ax in enumerate(axes):
        ridge_vals[k] = theory_and_simulation(
            ax, c_th, [Setting(c=float(x), snr=snr_) for x in c_th], c_mc,
            [Setting(c=float(x), snr=snr_, f=F) for x in c_mc], c_gammas, n=n, trials=trials,
            seed=seed, label="ridge", k=k, color=style.color("ridge"), model="ridge", marker="D")
    for label in labels[:2]:
        def at(x: float, label: str = label) -> Setting:
            return Setting(c=float(x), snr=snr_, f=F, **VARIANTS[label])

        th = np.array([sweeps.equivalents([at(x)], sweeps.matched_gamma(at(x), c_gammas))[0]
                       for x in c_th])                                      # (L, 2)
        mc = np.array([sweeps.simulations([at(x)], sweeps.matched_gamma(at(x), c_gammas), n=n,
                                          trials=trials, seed=seed).values("attention")[0]
                       for x in c_mc])                                      # (B, T, 2)
        for k, ax in enumerate(axes):
            style.plot_theory_vs_sim(ax, c_th, th[:, k], mc[:, :, k].mean(axis=1),
                                     standard_error(mc[:, :, k], axis=1), label=label,
                                     color=_VARIANT_COLORS[label], x_sim=c_mc)
        att_vals[label] = (th, mc)
    for k, ax in enumerate(axes):
        style.label_axes(ax, r"$c = p / n$", r"interpolation error $E(\gamma)$",
                         title=f"ridge at $\\gamma = {c_gammas[k]:g}$, attention at equal "
                               f"$\\gamma/\\tau$ (SNR 2, $n = {n}$)", legend=(k == 1))
    inside = (c_th >= 0.1) & (c_th <= 0.9)

    def spread(v: ArrayLike) -> float:
        return float(np.ptp(np.asarray(v)[inside]))

    th_al, mc_al = att_vals[labels[1]]
    return Figure(fig, {
        "c_spread_ridge": spread(ridge_vals[1][0]), "c_spread_att": spread(th_al[:, 1]),
        "c_spread_ridge_01": spread(ridge_vals[0][0]), "c_spread_att_01": spread(th_al[:, 0]),
        "c_spread_att_mc": float(np.ptp(mc_al[:, :, 1].mean(axis=1))),
        "c_spread_ridge_mc": float(np.ptp(ridge_vals[1][1].mean("ridge")[:, 1]))})


#: The hero figure's settings: random tokens, and a signal with aligned weights (both ``c = 1/2``).
HERO: dict[str, dict[str, Any]] = {
    "random": dict(snr=0.0),
    "structured": dict(snr=1.0, wk_norm=1.0, wq_norm=1.0),
}
#: ``g = gamma / tau`` of the hero figure's Monte Carlo, and the two values its prose quotes.
HERO_G = np.logspace(-3, 2, 11)
HERO_SMALL, HERO_LARGE = 1e-2, 10.0


def hero(*, n: int, trials: int, seed: int) -> Figure:
    r"""Attention and ridge against ``gamma / tau``, on random and on structured inputs.

    ``c = 1/2``, ``f = tanh``; left ``mu = 0``, right ``SNR = 1`` with weights of norm 1 aligned
    with ``mu`` (:data:`HERO`; coherent shift ``delta = 2 / sqrt(p)``, 0.09 at ``p = 512``, where
    the limit theory applies). Each model at its own ``gamma = g tau``
    (:func:`attn_lib.studies.sweeps.feature_scale`), ``g`` on :data:`HERO_G`. Lines: the
    deterministic equivalents; markers: Monte Carlo (mean ± one standard error).

    Parameters
    ----------
    n : int
        Tokens (``p = n / 2``).
    trials : int
        Draws per point (attention and ridge share them).
    seed : int
        Root seed.

    Returns
    -------
    Figure
        Numbers: ``hero_gap_small_random``, ``hero_gap_small_structured`` (theory, attention minus
        ridge at ``g =`` :data:`HERO_SMALL`), ``hero_gap_large_structured`` (theory, at
        :data:`HERO_LARGE`), ``hero_cross`` (the ``g`` where the structured theory gap changes
        sign), ``hero_mc_small_random``, ``hero_mc_small_random_sem`` (Monte Carlo, attention minus
        ridge on common draws of random tokens at :data:`HERO_SMALL`), ``hero_mc_large``,
        ``hero_mc_large_sem`` (the same with signal at :data:`HERO_LARGE`) and the claim ``hero_mc_large_below`` (that difference is
        negative, at the Student t threshold of ``trials`` draws), ``hero_delta``, ``hero_p``,
        ``trials``.
    """
    n, trials = check_int(n, "n"), check_int(trials, "trials")
    g_th = np.logspace(-3, 2, 101)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    out: dict[str, Any] = {}
    for ax, (name, geometry) in zip(axes, HERO.items()):
        s = Setting(c=0.5, f=F, **geometry)
        tau_att, tau_ridge = sweeps.feature_scale(s), sweeps.feature_scale(s, "ridge")
        att = sweeps.equivalents([s], g_th * tau_att)[0]
        ridge = sweeps.equivalents([s], g_th * tau_ridge, model="ridge")[0]
        mc_att = sweeps.simulations([s], HERO_G * tau_att, n=n, trials=trials, seed=seed)
        mc_ridge = sweeps.simulations([s], HERO_G * tau_ridge, n=n, trials=trials, seed=seed,
                                      attention=False)
        style.plot_theory_vs_sim(ax, g_th, att, mc_att.mean("attention")[0],
                                 mc_att.sem("attention")[0], label="attention", x_sim=HERO_G)
        style.plot_theory_vs_sim(ax, g_th, ridge, mc_ridge.mean("ridge")[0],
                                 mc_ridge.sem("ridge")[0], label="ridge", x_sim=HERO_G)
        title = ("random tokens ($\\mu = 0$)" if name == "random" else
                 "signal, aligned weights (SNR 1, $\\|w\\| = 1$)")
        style.label_axes(ax, r"$\gamma/\tau$ (each model's own feature scale)",
                         r"interpolation error $E$", title=title, logx=True,
                         legend=(name == "random"))
        gap = att - ridge
        small = float(np.interp(np.log(HERO_SMALL), np.log(g_th), gap))
        out[f"hero_gap_small_{name}"] = small
        if name == "random":
            i = int(np.argmin(np.abs(HERO_G - HERO_SMALL)))
            paired = mc_att.values("attention")[0, :, i] - mc_ridge.ridge[0, :, i]
            out["hero_mc_small_random"] = float(paired.mean())
            out["hero_mc_small_random_sem"] = float(standard_error(paired, axis=0))
        if name == "structured":
            out["hero_gap_large_structured"] = float(np.interp(np.log(HERO_LARGE), np.log(g_th), gap))
            k = int(np.flatnonzero(np.diff(np.sign(gap)) != 0)[-1])
            out["hero_cross"] = float(np.exp(np.interp(0.0, gap[[k + 1, k]],
                                                       np.log(g_th[[k + 1, k]]))))
            j = int(np.argmin(np.abs(HERO_G - HERO_LARGE)))
            paired = mc_att.values("attention")[0, :, j] - mc_ridge.ridge[0, :, j]
            out["hero_mc_large"] = float(paired.mean())
            out["hero_mc_large_sem"] = float(standard_error(paired, axis=0))
            out["hero_mc_large_below"] = claims.less(
                "hero_mc_large_below", float(paired.mean()), float(standard_error(paired, axis=0)),
                draws=trials, wording=("below", "above", "not decided at this profile against"),
                required=False)
            out["hero_delta"] = s.delta(n)
            out["hero_p"] = int(mc_att.p[0])
    out["trials"] = trials
    return Figure(fig, out)


#: SNRs of the row-space section, in the geometry of the book's worked example
#: (:func:`attn_lib.book.figures.strong_alignment.example`: ``f = sign``, ``c = 0.3``, aligned
#: ``|w_K| = 2``, ``|w_Q| = 3.5``).
BOUND_SNRS = np.array([0.5, 1.0, 2.0, 4.0, 6.0])
#: The ``gamma`` at which the limit theory stands for ``gamma -> 0`` (the scale convention drops
#: out there). ``E`` does not decrease with ``gamma``, so ``E(BOUND_G)`` bounds the limit from
#: above; below about ``1e-6`` the solver loses precision for the strongest label spikes of
#: :func:`_bound_grid` (``c = 0.1``, SNR 6: ``E(1e-7)`` falls 0.002 below ``E(1e-5)``, which no
#: spectrum bounded away from zero allows).
BOUND_G = 1e-5


def _bound_grid() -> list[Setting]:
    """The settings over which the limit theory is checked against the rank bound: ``c`` in
    {0.1, 0.3, 0.5, 0.8}, SNR in {0, 0.5, 1, 2, 4, 6}, ``f`` in {tanh, sign, ReLU, cos} and the
    weights orthogonal to ``mu`` (norm 2), aligned (norm 1) or those of the worked example
    (:func:`attn_lib.book.figures.strong_alignment.example`)."""
    weights: tuple[dict[str, Any], ...] = (dict(wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.0, cos_mu_wq=0.0),
               dict(wk_norm=1.0, wq_norm=1.0), dict(wk_norm=2.0, wq_norm=3.5))
    return [Setting(c=c, snr=s, f=f, **w) for c in (0.1, 0.3, 0.5, 0.8)
            for s in (0.0, 0.5, 1.0, 2.0, 4.0, 6.0) for f in ("tanh", "sign", "relu", "cos")
            for w in weights]


def row_space_bound(*, n: int, trials: int, seed: int) -> Figure:
    r"""The ridgeless error of attention against ridge regression's rank bound ``(1 - c)/(1 + SNR)``.

    Two axes. Left: the limit theory at ``gamma =`` :data:`BOUND_G` against the bound over
    :func:`_bound_grid` (every point on or above the diagonal), with the simulated ridgeless
    errors (:func:`attn_lib.studies.row_space.ridgeless_errors`) of the proportional-limit model
    and of the attention kernel along :data:`BOUND_SNRS`. Right: the same along the SNR at the
    geometry of the worked example (:func:`attn_lib.book.figures.strong_alignment.example`),
    with the error ``1 - (1 - 2 q)^2`` of a probe that outputs
    ``sign(mu^T x_i)`` (``q = Phi(-sqrt(SNR))``, the fraction of tokens it mislabels).

    Parameters
    ----------
    n : int
        Tokens of the simulation (``p = 0.3 n``).
    trials : int
        Draws per SNR (every model on the same draws).
    seed : int
        Root seed.

    Returns
    -------
    Figure
        Numbers: ``rsb_grid`` (settings checked), ``rsb_de_min`` (smallest limit theory minus
        bound over them), ``rsb_de_snr0`` (largest ``|E - (1 - c)|`` at SNR 0), the exact claim
        ``rsb_never_below`` (``rsb_de_min > -1e-9``), ``rsb_de_excess`` (the limit theory minus the
        bound at the worked example, SNR 6); ``rsb_linear_max`` (largest ``|linear part - ridge|``
        over the draws); ``rsb_eq_gap``, ``rsb_eq_gap_sem`` (proportional-limit model minus ridge
        at SNR 6, paired); ``rsb_att``, ``rsb_att_sem`` (attention kernel at SNR 6),
        ``rsb_ridge`` (simulated ridge there), ``rsb_bound`` (its rank bound), ``rsb_att_gap``,
        ``rsb_att_gap_sem`` (attention minus ridge, paired) and the claim ``rsb_att_below``;
        ``rsb_sign`` (simulated fraction of tokens with ``y_i = sign(mu^T x_i)`` at SNR 6),
        ``rsb_sign_th`` (``Phi(sqrt 6)``), ``rsb_sign_floor`` (``1 - (1 - 2 q)^2`` there);
        ``rsb_delta`` (the coherent shift at SNR 6 and ``n``); ``rsb_n``, ``rsb_p``, ``rsb_trials``.
    """
    from scipy.stats import norm

    from ...studies import row_space

    n, trials = check_int(n, "n"), check_int(trials, "trials")
    grid = _bound_grid()
    de = sweeps.equivalents(grid, BOUND_G)  # at gamma -> 0 the scale convention drops out
    bound = np.array([(1 - s.c) / (1 + s.snr) for s in grid])
    settings = [strong_alignment.example(float(s)) for s in BOUND_SNRS]
    sims = [row_space.ridgeless_errors(s, n, trials=trials, seed=seed) for s in settings]
    mean = {m: np.array([r.mean(m) for r in sims]) for m in (*row_space.MODELS, "sign_agreement")}
    sem = {m: np.array([r.sem(m) for r in sims]) for m in row_space.MODELS}
    b_sim = (1 - strong_alignment.C) / (1 + BOUND_SNRS)
    de_sim = sweeps.equivalents(settings, BOUND_G)

    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3))
    ax = axes[0]
    ax.plot([0, 1], [0, 1], color="0.3", linewidth=1, label="rank bound $(1 - c)/(1 + \\mathrm{SNR})$")
    ax.scatter(bound, de, s=10, color=style.color("attention"), alpha=0.5,
               label=f"limit theory, {len(grid)} settings")
    style.plot_sim(ax, b_sim, mean["equivalent"], sem["equivalent"], color=style.color("linear"),
                   fmt="s", label="linear part + Wigner (simulation)")
    style.plot_sim(ax, b_sim, mean["attention"], sem["attention"], color=style.color("sign"),
                   label="attention kernel, sign (simulation)")
    style.label_axes(ax, "ridge's ridgeless error (rank bound)",
                     r"attention's ridgeless error $E(\gamma \to 0)$",
                     title="$c < 1$: theory on or above the bound", legend=True)
    ax.legend(fontsize=8)
    ax = axes[1]
    snr_th = np.linspace(0.3, 6.5, 60)
    q = norm.cdf(-np.sqrt(snr_th))
    style.plot_theory(ax, snr_th, (1 - strong_alignment.C) / (1 + snr_th),
                      label="ridge's rank bound", color=style.color("ridge"))
    style.plot_theory(ax, snr_th, 1 - (1 - 2 * q) ** 2, color="0.4", linestyle="--",
                      label=r"the one feature $\mathrm{sign}(\mu^\top x_i)$")
    style.plot_theory(ax, snr_th, sweeps.equivalents(
        [strong_alignment.example(float(s)) for s in snr_th], BOUND_G),
        color=style.color("attention"), linestyle=":", zorder=2.5,
        label="attention, limit theory")
    style.plot_sim(ax, BOUND_SNRS, mean["ridge"], sem["ridge"], color=style.color("ridge"),
                   fmt="D", label="ridge (simulation)")
    style.plot_sim(ax, BOUND_SNRS, mean["attention"], sem["attention"],
                   color=style.color("sign"), label="attention kernel (simulation)")
    p = int(sims[0].p)
    style.label_axes(ax, r"$\mathrm{SNR} = \|\mu\|^2$", r"ridgeless error $E(\gamma \to 0)$",
                     title=f"sign, $c = 0.3$ ($n = {n}$, $p = {p}$), aligned weights",
                     logy=True, legend=True)
    ax.legend(fontsize=8)

    last = sims[-1]
    gap_eq = last["equivalent"] - last["ridge"]
    gap_att = last["attention"] - last["ridge"]
    q6 = float(norm.cdf(-np.sqrt(BOUND_SNRS[-1])))
    snr0 = np.array([s.snr == 0 for s in grid])
    return Figure(fig, {
        "rsb_grid": len(grid), "rsb_de_min": float(np.min(de - bound)),
        "rsb_de_snr0": float(np.max(np.abs(de - bound)[snr0])),
        "rsb_never_below": claims.exact(
            "rsb_never_below", bool(np.min(de - bound) > -1e-9),
            f"smallest limit theory minus bound {np.min(de - bound):+.2e} over {len(grid)} settings",
            wording=("never below", "below", "(exact)")),
        "rsb_de_excess": float(de_sim[-1] - b_sim[-1]),
        "rsb_linear_max": float(max(np.max(np.abs(r["linear_part"] - r["ridge"])) for r in sims)),
        "rsb_eq_gap": float(gap_eq.mean()), "rsb_eq_gap_sem": float(standard_error(gap_eq, 0)),
        "rsb_att": float(mean["attention"][-1]), "rsb_att_sem": float(sem["attention"][-1]),
        "rsb_ridge": float(mean["ridge"][-1]), "rsb_bound": float(b_sim[-1]),
        "rsb_att_gap": float(gap_att.mean()), "rsb_att_gap_sem": float(standard_error(gap_att, 0)),
        "rsb_att_below": claims.less(
            "rsb_att_below", float(gap_att.mean()), float(standard_error(gap_att, 0)),
            draws=trials, wording=("below", "above", "not decided at this profile against")),
        "rsb_sign": float(mean["sign_agreement"][-1]), "rsb_sign_th": 1 - q6,
        "rsb_sign_floor": 1 - (1 - 2 * q6) ** 2, "rsb_delta": settings[-1].delta(n),
        "rsb_n": n, "rsb_p": p, "rsb_trials": trials})
