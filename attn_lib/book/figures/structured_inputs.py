r"""Figures and the worked example of the chapter *Random versus structured inputs*.

``book/04_structured_inputs``: the interpolation error of attention (``f = tanh`` unless stated,
``w_K = w_Q = w``) and of ridge regression on random inputs (``mu = 0``), against the SNR and
the alignment ``cos(mu, w)``, against ``c = p/n``, and where the proportional-limit
deterministic equivalent (DE) fails: the coherent shift ``delta`` of the kernel argument
(:meth:`attn_lib.model.setting.Setting.delta`). Lines are the DE
(:func:`attn_lib.studies.sweeps.equivalents`), markers Monte Carlo
(:func:`attn_lib.studies.sweeps.simulations`, cached; mean ± one standard deviation over trials).

:func:`theory_and_simulation` (a DE line and Monte Carlo markers along a sweep of settings) is
also used by :mod:`attn_lib.book.figures.a1_zero`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown
from scipy.special import erf

from ... import Setting, hermite
from ..._validation import check_int
from ...simulation.trials import standard_error
from ...studies import sweeps
from .. import claims, style
from ..page import Figure

__all__ = ["F", "VARIANTS", "EXAMPLE", "theory_and_simulation", "snr",
           "gap_maps", "aspect_ratio", "worked_example", "coherent_shift", "hero"]

#: The nonlinearity of the chapter.
F = "tanh"
#: Attention variants: weights ``w_K = w_Q = w`` with ``|w|`` and ``cos(mu, w)`` (default 1).
VARIANTS: dict[str, dict[str, float]] = {
    "attention, $w \\perp \\mu$": dict(wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.0, cos_mu_wq=0.0),
    "attention, aligned, $\\|w\\| = 1$": dict(wk_norm=1.0, wq_norm=1.0),
    "attention, aligned, $\\|w\\| = 2$": dict(wk_norm=2.0, wq_norm=2.0),
}
_VARIANT_COLORS = dict(zip(VARIANTS, [style.color("linear"), style.color("attention"),
                                      style.color("sign")]))
#: Geometry of the worked example (SNR :data:`EXAMPLE_SNR`) and of the coherent-shift sweep.
EXAMPLE: dict[str, Any] = dict(c=0.3, f="sign", wk_norm=2.0, wq_norm=3.5)
EXAMPLE_SNR = 6.0
#: Ridge parameters of the worked example; the coherent-shift figure is drawn at the first.
EXAMPLE_GAMMAS = np.array([1e-3, 1e-1, 1.0])
#: Section of the structured-inputs sweeps: aspect ratio and ridge parameter.
C, GAMMA = 0.5, 1.0


def theory_and_simulation(ax: Any, x_th: Sequence[float], settings_th: Sequence[Setting],
                          x_mc: Sequence[float], settings_mc: Sequence[Setting],
                          gammas: Sequence[float], *, n: int, trials: int, seed: int,
                          label: str, color: str, k: int = 0, model: str = "attention",
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


def _equivalent(setting: Setting, gamma: float, model: str = "attention") -> float:
    """DE of one setting at one gamma."""
    return float(sweeps.equivalents([setting], gamma, model=model)[0])


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
        ``|w| = 1``); ``rev_lo``, ``rev_hi``, the SNR range in ``[0, 8]`` where attention with
        aligned ``|w| = 2`` is below ridge (nan if none), and ``rev_max``, its largest advantage
        (negative: the smallest gap); ``min_gap_al2``, the smallest gap (percent) for
        ``|w| = 2``, SNR in ``[0, 8]``; ``raw_rev_max``, the same at the raw ``gamma = 1``;
        ``g_att``, attention's matched ``gamma``; ``mc_al2_gap``, ``mc_al2_gap_sem``, the
        simulated paired gap (mean and standard error over trials, percent) for ``|w| = 2`` at
        SNR 4, and the claim ``mc_al2_below`` (attention below ridge there, 3 s.e.);
        ``delta_al2``, the coherent shift there.
    """
    snr_mc = np.linspace(0.0, 4.0, check_int(n_points, "n_points"))
    snr_th = np.linspace(0.0, 4.0, 81)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    common = dict(n=n, trials=trials, seed=seed)
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
    neg = snr_fine[att_fine < ridge_fine]
    raw_gap = _rel(sweeps.equivalents(fine, GAMMA), ridge_fine)
    # paired over draws: the ridge and attention runs share the seed and so the tokens
    ratio = mc_al2.values("attention")[-1, :, 0] / mc_r.values("ridge")[-1, :, 0]
    return Figure(fig, {
        "g_att": g_att, "raw_rev_max": -float(np.min(raw_gap)),
        "min_gap_al2": float(np.min(_rel(att_fine, ridge_fine))),
        "snr0_gap": _rel(th_orth[0], th_r[0]), "snr4_gap_orth": _rel(th_orth[-1], th_r[-1]),
        "snr4_gap_al1": _rel(th_al1[-1], th_r[-1]),
        "rev_lo": float(neg.min()) if neg.size else float("nan"),
        "rev_hi": float(neg.max()) if neg.size else float("nan"),
        "rev_max": -float(np.min(_rel(att_fine, ridge_fine))),
        "mc_al2_gap": 100 * float(ratio.mean() - 1),
        "mc_al2_gap_sem": 100 * float(standard_error(ratio, axis=0)),
        "mc_al2_below": claims.exceeds("mc_al2_below", 1.0, 0.0, float(ratio.mean()),
                                       float(standard_error(ratio, axis=0)),
                                       wording=("below", "above", "not distinguishable from"),
                                       required=False),
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
    r"""Error against ``c = p/n`` at fixed ``n``, SNR 2, for ``gamma = 0.1`` and ``gamma = 1``.

    Two axes (one per gamma): ridge, attention with orthogonal weights and with aligned
    ``|w| = 1``; simulated at ``linspace(0.1, 0.9, n_points)``.

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
        ``[0.1, 0.9]`` at ``gamma = 1``, ridge and aligned attention), ``c_spread_ridge_01``,
        ``c_spread_att_01`` (the same at ``gamma = 0.1``), ``c_spread_ridge_mc``,
        ``c_spread_att_mc`` (range of the simulated means at ``gamma = 1``).
    """
    snr_ = 2.0
    c_mc = np.linspace(0.1, 0.9, check_int(n_points, "n_points"))
    c_th = np.linspace(0.08, 0.95, 60)
    labels = list(VARIANTS)
    shown = {"ridge": None, labels[0]: VARIANTS[labels[0]], labels[1]: VARIANTS[labels[1]]}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    vals = {}
    c_gammas = [0.1, 1.0]
    for k, (ax, gamma) in enumerate(zip(axes, c_gammas)):
        for label, kw in shown.items():
            ridge = kw is None
            kw = kw or {}
            vals[(gamma, label)] = theory_and_simulation(
                ax, c_th, [Setting(c=float(x), snr=snr_, f=F, **kw) for x in c_th],
                c_mc, [Setting(c=float(x), snr=snr_, f=F, **kw) for x in c_mc], c_gammas,
                n=n, trials=trials, seed=seed, label=label, k=k,
                color=style.color("ridge") if ridge else _VARIANT_COLORS[label],
                model="ridge" if ridge else "attention", marker="D" if ridge else "o")
        style.label_axes(ax, r"$c = p / n$", r"interpolation error $E(\gamma)$",
                         title=f"SNR $= 2$, $n = {n}$, $\\gamma = {gamma:g}$",
                         legend=(gamma == 1.0))
    inside = (c_th >= 0.1) & (c_th <= 0.9)
    spread = lambda v: float(np.ptp(np.asarray(v)[inside]))  # noqa: E731
    return Figure(fig, {
        "c_spread_ridge": spread(vals[(1.0, "ridge")][0]),
        "c_spread_att": spread(vals[(1.0, labels[1])][0]),
        "c_spread_ridge_01": spread(vals[(0.1, "ridge")][0]),
        "c_spread_att_01": spread(vals[(0.1, labels[1])][0]),
        "c_spread_att_mc": float(np.ptp(vals[(1.0, labels[1])][1].mean("attention")[:, 1])),
        "c_spread_ridge_mc": float(np.ptp(vals[(1.0, "ridge")][1].mean("ridge")[:, 1]))})


def worked_example(*, n: int, trials: int, seed: int) -> dict[str, Any]:
    r"""The worked example of the coherent shift: ``f = sign``, ``c = 0.3``, SNR 6, aligned weights.

    ``|w_K| = 2``, ``|w_Q| = 3.5`` (:data:`EXAMPLE`), at ``n`` tokens and the ridge parameters
    :data:`EXAMPLE_GAMMAS`.

    Parameters
    ----------
    n : int
        Tokens of every simulated point.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along a sweep).

    Returns
    -------
    dict
        ``we_table``: Markdown table of simulated (mean ± standard error over trials) and DE errors of
        attention and ridge at each gamma; ``we_n``, ``we_p`` (sizes), ``we_trials``; ``we_delta`` (the
        coherent shift at ``n``) and ``we_delta_2048`` (at ``n = 2048``); at
        ``gamma = 1e-3``: ``we_mc`` (simulated attention), ``we_de`` (its DE), ``we_ridge``
        (ridge DE), ``we_factor = we_de / we_mc``; ``we_erf = erf(delta / sqrt 2)`` against
        ``we_lin = a1 delta`` (sign's linearised mean), and the exact claim ``we_block_smaller``
        (``we_erf < we_lin``: the saturated coherent block is weaker than the linearised one).
    """
    ex = Setting(snr=EXAMPLE_SNR, **EXAMPLE)
    g_ex = EXAMPLE_GAMMAS
    mc_ex = sweeps.simulations([ex], g_ex, n=n, trials=trials, seed=seed)
    th_ex = sweeps.equivalents([ex], g_ex)[0]
    rth_ex = sweeps.equivalents([ex], g_ex, model="ridge")[0]
    rows = ["| $\\gamma$ | attention, simulation | attention, DE | ridge, simulation | ridge, DE |",
            "|---:|---:|---:|---:|---:|"]
    att_m, att_s = mc_ex.mean("attention")[0], mc_ex.sem("attention")[0]
    ridge_m, ridge_s = mc_ex.mean("ridge")[0], mc_ex.sem("ridge")[0]
    for k, g in enumerate(g_ex):
        rows.append(f"| {g:g} | {att_m[k]:.4f} ± {att_s[k]:.4f} | {th_ex[k]:.4f} "
                    f"| {ridge_m[k]:.4f} ± {ridge_s[k]:.4f} | {rth_ex[k]:.4f} |")
    return {
        "we_table": Markdown("\n".join(rows)), "we_n": n, "we_trials": trials, "we_p": int(mc_ex.p[0]),
        "we_delta": ex.delta(n), "we_mc": float(att_m[0]), "we_de": float(th_ex[0]),
        "we_ridge": float(rth_ex[0]), "we_factor": float(th_ex[0] / att_m[0]),
        "we_delta_2048": ex.delta(2048), "we_erf": float(erf(ex.delta(n) / np.sqrt(2))),
        "we_lin": float(hermite.coefficients("sign").a1 * ex.delta(n)),
        "we_block_smaller": claims.exact(
            "we_block_smaller",
            erf(ex.delta(n) / np.sqrt(2)) < hermite.coefficients("sign").a1 * ex.delta(n),
            f"erf(delta/sqrt 2) = {erf(ex.delta(n) / np.sqrt(2)):.3f}, a1 delta = "
            f"{hermite.coefficients('sign').a1 * ex.delta(n):.3f} at delta = {ex.delta(n):.3f}",
            wording=("smaller than", "not smaller than", "(exact)"))}


def coherent_shift(*, n: int, n_ladder: Sequence[int], trials: int, seed: int,
                   n_points: int) -> Figure:
    r"""Simulation against the DE as the coherent shift ``delta`` grows, at ``gamma = 1e-3``.

    The geometry of :func:`worked_example` with the SNR swept (``geomspace(0.25, 6, n_points)``)
    at ``n`` tokens, and the worked example at the sizes ``n_ladder``. Two axes: the error
    (ridge and attention, theory and simulation) against ``delta``, and the ratio
    ``E_sim / E_DE`` (mean ± standard error over trials) for the SNR sweep, the ladder and ridge (control).

    Parameters
    ----------
    n : int
        Tokens of the SNR sweep (and of the worked example).
    n_ladder : sequence of int
        Token counts of the worked example's ladder.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along a sweep).
    n_points : int
        Simulated points of the sweep.

    Returns
    -------
    Figure
        Numbers: ``d_first``, ``d_first_dev`` (smallest shift of the sweep and the attention
        ratio's deviation from 1 there, percent); ``d_large``, ``d_large_delta`` (the same, signed,
        at the largest shift); ``d_ridge_dev`` (largest deviation of ridge, percent);
        ``ladder_n0``, ``ladder_n1``, ``ladder_r0``, ``ladder_r1``, ``ladder_d0``, ``ladder_d1``
        (first and last size of the ladder, their ratio and shift); ``n_needed``, the tokens that
        bring ``delta`` down to 0.3; claim ``sim_below_de``: the simulated attention error is
        below its DE at the largest shift of the sweep (3 s.e.).
    """
    ex = Setting(snr=EXAMPLE_SNR, **EXAMPLE)
    g_ex = EXAMPLE_GAMMAS
    gamma = g_ex[0]
    n_ladder = [check_int(k, "n_ladder") for k in n_ladder]
    snr_d_mc = np.geomspace(0.25, 6.0, check_int(n_points, "n_points"))
    snr_d_th = np.geomspace(0.2, 6.5, 80)
    delta_of = lambda snrs, nn: np.array([Setting(snr=float(s), **EXAMPLE).delta(nn)  # noqa: E731
                                          for s in snrs])
    sweep_th = [Setting(snr=float(s), **EXAMPLE) for s in snr_d_th]
    sweep_mc = [Setting(snr=float(s), **EXAMPLE) for s in snr_d_mc]
    att_th = sweeps.equivalents(sweep_th, gamma)
    ridge_th = sweeps.equivalents(sweep_th, gamma, model="ridge")
    mc_d = sweeps.simulations(sweep_mc, g_ex, n=n, trials=trials, seed=seed)
    mc_n = sweeps.simulations([ex] * len(n_ladder), g_ex, n=list(n_ladder), trials=trials,
                              seed=seed)
    att_th_mc = sweeps.equivalents(sweep_mc, gamma)
    ridge_th_mc = sweeps.equivalents(sweep_mc, gamma, model="ridge")
    th_ex = sweeps.equivalents([ex], g_ex)[0]
    d_th, d_mc = delta_of(snr_d_th, n), delta_of(snr_d_mc, n)
    d_n = np.array([ex.delta(k) for k in n_ladder])
    ratio = lambda mc, model, th: mc.values(model)[:, :, 0] / th[:, None]  # noqa: E731
    r_att = ratio(mc_d, "attention", att_th_mc)
    r_ladder = ratio(mc_n, "attention", np.full(len(n_ladder), th_ex[0]))
    r_ridge = ratio(mc_d, "ridge", ridge_th_mc)

    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2))
    ax = axes[0]
    style.plot_theory_vs_sim(ax, d_th, ridge_th, mc_d.mean("ridge")[:, 0],
                             mc_d.sem("ridge")[:, 0], label="ridge", x_sim=d_mc)
    # the attention DE is almost on top of ridge's here: dashed, drawn above it
    style.plot_theory(ax, d_th, att_th, label="attention (theory)",
                      color=style.color("attention"), linestyle="--", zorder=2.5)
    style.plot_sim(ax, d_mc, mc_d.mean("attention")[:, 0], mc_d.sem("attention")[:, 0],
                   color=style.color("attention"), label="attention (simulation)")
    style.label_axes(ax, r"coherent shift $\delta$ (SNR swept)",
                     r"interpolation error $E(\gamma)$",
                     title=f"sign, $c = 0.3$, $n = {n}$, $\\gamma = 10^{{-3}}$",
                     logx=True, logy=True)
    ax = axes[1]
    for y, x, label, color, fmt in (
            (r_att, d_mc, f"attention, SNR swept ($n = {n}$)", style.color("attention"), "o"),
            (r_ladder, d_n, "attention, SNR 6, $n$ = " + ", ".join(map(str, n_ladder)),
             style.color("sign"), "s"),
            (r_ridge, d_mc, "ridge (control)", style.color("ridge"), "D")):
        style.plot_sim(ax, x, y.mean(axis=1), standard_error(y, axis=1), color=color, fmt=fmt,
                       label=label)
    ax.axhline(1.0, color="0.3", linewidth=1)
    style.label_axes(ax, r"coherent shift $\delta$", r"$E_{\mathrm{sim}} / E_{\mathrm{DE}}$",
                     title=r"departure from the proportional limit", logx=True, logy=True)
    for ax in axes:
        style.plain_ticks(ax.xaxis, [0.05, 0.1, 0.2, 0.5, 1, 2, 5])

    dev_d = r_att.mean(axis=1) - 1
    dev_r = r_ridge.mean(axis=1) - 1
    ladder = r_ladder.mean(axis=1)
    return Figure(fig, {
        "d_first": float(d_mc[0]), "d_first_dev": float(abs(dev_d[0])) * 100,
        "d_ridge_dev": float(np.max(np.abs(dev_r))) * 100,
        "d_large": float(dev_d[-1]) * 100, "d_large_delta": float(d_mc[-1]),
        "sim_below_de": claims.exceeds("sim_below_de", 1.0, 0.0, float(r_att[-1].mean()),
                                       float(standard_error(r_att[-1], axis=0)),
                                       wording=("below", "above", "not distinguishable from")),
        "ladder_n0": int(n_ladder[0]), "ladder_n1": int(n_ladder[-1]),
        "ladder_r0": float(ladder[0]), "ladder_r1": float(ladder[-1]),
        "ladder_d0": float(d_n[0]), "ladder_d1": float(d_n[-1]),
        "n_needed": 1000 * round((ex.snr + ex.mu_wk * ex.mu_wq) ** 2 / 0.3 ** 2 / ex.c / 1000)})


#: The hero figure's settings: random tokens, and a signal with aligned weights (both ``c = 1/2``).
HERO: dict[str, dict[str, float]] = {
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
        sign), ``hero_mc_large``, ``hero_mc_large_sem`` (Monte Carlo, attention minus ridge on common
        draws at :data:`HERO_LARGE`), ``hero_delta``, ``hero_p``, ``trials``.
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
        if name == "structured":
            out["hero_gap_large_structured"] = float(np.interp(np.log(HERO_LARGE), np.log(g_th), gap))
            k = int(np.flatnonzero(np.diff(np.sign(gap)) != 0)[-1])
            out["hero_cross"] = float(np.exp(np.interp(0.0, gap[[k + 1, k]],
                                                       np.log(g_th[[k + 1, k]]))))
            j = int(np.argmin(np.abs(HERO_G - HERO_LARGE)))
            paired = mc_att.attention[0, :, j] - mc_ridge.ridge[0, :, j]
            out["hero_mc_large"] = float(paired.mean())
            out["hero_mc_large_sem"] = float(standard_error(paired, axis=0))
            out["hero_delta"] = s.delta(n)
            out["hero_p"] = int(mc_att.p[0])
    out["trials"] = trials
    return Figure(fig, out)
