r"""Figures of the chapter *Deterministic equivalent* (``book/02_deterministic_equivalent``).

The three sweeps of the paper's Figure 1: the interpolation error of ridge regression and of
attention (``f = tanh``, ``W_K^T W_Q = I_p``) against ``gamma``, ``c = p/n`` and the SNR. Lines
are the deterministic equivalents (:func:`attn_lib.theory.ridge_error`,
:func:`attn_lib.theory.attention_error`, :func:`attn_lib.theory.attention_error_batch`),
markers Monte Carlo (:func:`attn_lib.studies.sweeps.simulations`, cached, the trials of all the
settings of a sweep sent at once; mean ± one standard error over trials). Attention and ridge are
simulated on the same draws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import ArrayLike

from ... import Setting, simulate, theory
from ..._validation import check_int
from ...simulation.trials import standard_error
from ...studies import sweeps
from ...studies.sweeps import SweepResult
from ... import cache
from .. import style
from ..page import Figure

__all__ = ["controls", "gamma_sweep", "c_sweep", "snr_sweep"]

#: Fine grid of the theory lines of the ``c`` and SNR sweeps.
LINE_POINTS = 200


def _run(settings: Sequence[Setting], gammas: ArrayLike, n: int, trials: int,
         seed: int) -> SweepResult:
    """Monte Carlo of attention and ridge at every setting (cached on disk, all trials sent at once)."""
    return sweeps.simulations(settings, np.atleast_1d(gammas), n, trials, seed)


def _ridge_theory(settings: Sequence[Setting], gamma: float) -> np.ndarray:
    """Ridge deterministic equivalent at one ``gamma`` for each setting, shape ``(B,)``."""
    return np.array([theory.ridge_error(s, gamma) for s in settings])


def _rel_gap(theory_values: object, sim_mean: object) -> float:
    """Largest relative gap ``max |theory - mean| / |theory|``."""
    t, m = np.asarray(theory_values), np.asarray(sim_mean)
    return float(np.max(np.abs(t - m) / np.abs(t)))


def controls(ax: object, setting: Setting, gammas: np.ndarray, fine: np.ndarray, n: int,
             trials: int, seed: int, *, at: int = 0, suffix: str = "",
             logy: bool = True, legend: bool = True) -> dict[str, object]:
    r"""Draw the random-input controls at ``gamma / tau`` and return their paired claims.

    Four models at ``setting.c, setting.snr`` (the weights of ``setting``), each at its own
    ``gamma = tau g`` (:func:`attn_lib.studies.sweeps.feature_scale`, ``g`` in ``gammas``):
    ridge regression (``Phi^T Phi / n = c S_x``, ``S_x = X^T X / p``); attention with linear
    ``f`` and the zero diagonal (``K = S_x - I`` on noise: ``c S_x (S_x - I)^2``, a root at
    ``S_x = 1`` inside the Marchenko–Pastur bulk when ``c > 1/4``); linear ``f`` with the
    diagonal kept (``K = S_x``: ``c S_x^3``, no root but a cubed lower edge; simulation only);
    and ``setting.f``. Lines: deterministic equivalents on ``fine``; markers: Monte Carlo,
    mean ± one standard error. All runs share ``seed`` and so the tokens: the claims compare
    paired draws at ``g = gammas[at]``.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    setting : Setting
        The nonlinear model (its ``c``, ``snr``, weights and ``f``).
    gammas : ndarray of shape (G,)
        Rescaled ridge parameters ``g = gamma / tau`` of the simulation.
    fine : ndarray
        Rescaled ridge parameters of the theory lines.
    n, trials, seed : int
        Monte Carlo sizes and root seed.
    at : int, default 0
        Index into ``gammas`` of the paired comparisons.
    suffix : str, default ""
        Appended to every returned name (two panels on one page).
    logy, legend : bool, default True
        Log scale of the error axis; draw the legend.

    Returns
    -------
    dict
        With ``s = suffix``: ``g_at{s}`` (``gammas[at]``); ``lin_ridge_gap{s}``,
        ``nonlin_gap{s}``: the DE of linear ``f`` minus ridge's and of ``f`` minus linear
        ``f``'s at ``g``; claims (paired over draws, 3 standard errors)
        ``linear_loses{s}`` (linear ``f``, zero diagonal, above ridge: required),
        ``diagonal_helps{s}`` (``log(E_zero / E_kept) > 0``) and ``nonlinearity_helps{s}``
        (``log(E_linear / E_f) > 0``), the last two reported either way; the exact (theory)
        claim ``nonlinearity_minor{s}``: ``|nonlin_gap| < lin_ridge_gap / 3``.
    """
    from .. import claims

    at = check_int(at, "at", low=0, high=len(gammas) - 1)
    f = setting.f
    linear = dataclasses.replace(setting, f="linear")
    models = {"ridge": (linear, "ridge", False), "linear": (linear, "attention", False),
              "linear_diagonal": (linear, "attention", True), "f": (setting, "attention", False)}
    labels = {"ridge": "ridge", "linear": "linear $f$, zero diagonal",
              "linear_diagonal": "linear $f$, diagonal kept",
              "f": f"$f = \\{f}$" if isinstance(f, str) else "$f$"}
    colors = {"ridge": style.color("ridge"), "linear": style.color("linear"),
              "linear_diagonal": style.color("linear_diagonal"),
              "f": style.color(f if isinstance(f, str) else "attention")}
    values, de = {}, {}
    for name, (s, model, keep) in models.items():
        tau = sweeps.feature_scale(s, model, keep_diagonal=keep)
        res = cache.cached(simulate.errors, setting=s, gammas=tau * gammas, n=n, trials=trials,
                           seed=seed, keep_diagonal=keep, attention=(model == "attention"))
        st = getattr(res, model)
        values[name] = st.values[:, at]
        if keep:
            style.plot_sim(ax, gammas, st.mean, st.sem, color=colors[name], fmt="D",
                           label=f"{labels[name]} (simulation)")
            continue
        error = theory.ridge_error if model == "ridge" else theory.attention_error
        style.plot_theory_vs_sim(ax, fine, error(s, tau * fine), st.mean, st.sem,
                                 label=labels[name], color=colors[name], x_sim=gammas)
        de[name] = float(error(s, tau * gammas[at : at + 1])[0])
    style.label_axes(ax, r"rescaled $\gamma / \tau$", r"interpolation error $E$",
                     title=f"controls, $c = {setting.c:g}$, in units of $\\tau$",
                     logx=True, logy=logy, legend=legend)

    def paired(name: str, d: np.ndarray, wording: tuple[str, str, str],
               required: bool) -> claims.Claim:
        return claims.exceeds(name + suffix, float(d.mean()), float(standard_error(d, axis=0)),
                              wording=wording, required=required)

    v = values
    return {
        f"g_at{suffix}": float(gammas[at]),
        f"lin_ridge_gap{suffix}": de["linear"] - de["ridge"],
        f"nonlin_gap{suffix}": de["f"] - de["linear"],
        f"linear_loses{suffix}": paired(
            "linear_loses", v["linear"] - v["ridge"],
            ("loses to", "beats", "is not distinguishable from"), True),
        f"diagonal_helps{suffix}": paired(
            "diagonal_helps", np.log(v["linear"] / v["linear_diagonal"]),
            ("is below", "is above", "is not distinguishable from"), False),
        f"nonlinearity_minor{suffix}": claims.exact(
            "nonlinearity_minor" + suffix, abs(de["f"] - de["linear"]) < (de["linear"] - de["ridge"]) / 3,
            f"DE at g = {gammas[at]:.2g}: f minus linear f {de['f'] - de['linear']:+.3g}, linear f "
            f"minus ridge {de['linear'] - de['ridge']:+.3g}",
            wording=("less than a third of", "not small against", "(exact)")),
        f"nonlinearity_helps{suffix}": paired(
            "nonlinearity_helps", np.log(v["linear"] / v["f"]),
            ("lowers", "raises", "does not measurably change"), False),
    }


def gamma_sweep(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against ``gamma`` at ``c = 4``, SNR 1, on ``gammas = logspace(-4, 2, n_points)``.

    Two axes (log-log). Left, the paper's Figure 1 (left): ridge and attention (``tanh``),
    theory and simulation against the raw ``gamma``. Right, the controls of the random-input
    mechanism against ``gamma / tau`` (:func:`controls`). Markers: mean ± one standard error.

    Parameters
    ----------
    n : int
        Tokens of every simulated point.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along the sweep).
    n_points : int
        Simulated points of the sweep.

    Returns
    -------
    Figure
        Numbers: ``gamma_sweep_p``, ``gamma_sweep_n`` (the simulated sizes);
        ``gamma_sweep_gap``, the largest relative gap (percent) between the ridge theory and
        its Monte Carlo mean; ``gamma_sweep_att_abs``, the largest absolute gap for attention;
        ``gamma_sweep_min_ratio``, the smallest theory ratio ``E_att / E_ridge`` on the grid
        at the same ``gamma / tau``, and ``gamma_sweep_cross``, the smallest ``gamma / tau`` of a
        fine grid where that ratio is below 1 (nan if none); ``gamma_sweep_min_ratio_raw``, the
        smallest ratio at the raw ``gamma``; ``slope_small``, the log-log slope of the attention DE over
        the two smallest ``gamma``; ``trials``; and the numbers and claims of :func:`controls`.
    """

    setting = Setting(c=4.0, snr=1.0)
    gammas = np.logspace(-4, 2, check_int(n_points, "n_points"))
    mc = _run([setting], gammas, n, trials, seed)
    (ridge_mean,), (att_mean,) = mc.mean("ridge"), mc.mean("attention")
    ridge_th = theory.ridge_error(setting, gammas)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    style.plot_theory_vs_sim(axes[0], gammas, ridge_th, ridge_mean, mc.sem("ridge")[0],
                             label="ridge")
    att_th = theory.attention_error(setting, gammas)
    style.plot_theory_vs_sim(axes[0], gammas, att_th, att_mean, mc.sem("attention")[0],
                             label="attention")
    style.label_axes(axes[0], r"ridge parameter $\gamma$", r"interpolation error $E(\gamma)$",
                     title=f"$p = {mc.p[0]}$, $n = {mc.n[0]}$, $\\mathrm{{SNR}} = 1$",
                     logx=True, logy=True)
    tanh = Setting(c=4.0, snr=1.0, f="tanh")
    # the paired comparisons at g ~ 1e-2: small enough for the spectral hole to dominate, large
    # enough that finite n does not (at g = 1e-4 and n = 128 the smoothed hole decides them)
    at = int(np.argmin(np.abs(np.log10(gammas) + 2)))
    ctrl = controls(axes[1], tanh, gammas, np.logspace(-4, 2, LINE_POINTS), n, trials, seed,
                    at=at)
    ctrl["controls_at_gamma"] = ctrl.pop("g_at")
    scaled_ratio = (theory.attention_error(tanh, sweeps.feature_scale(tanh) * gammas)
                    / theory.ridge_error(setting, sweeps.feature_scale(setting, "ridge") * gammas))
    fine = np.logspace(-4, 2, LINE_POINTS)
    fine_ratio = (theory.attention_error(tanh, sweeps.feature_scale(tanh) * fine)
                  / theory.ridge_error(setting, sweeps.feature_scale(setting, "ridge") * fine))
    below = fine[fine_ratio < 1]
    return Figure(fig, {
        "gamma_sweep_p": int(mc.p[0]), "gamma_sweep_n": int(mc.n[0]),
        "gamma_sweep_gap": 100 * _rel_gap(ridge_th, ridge_mean),
        "gamma_sweep_att_abs": float(np.max(np.abs(att_th - att_mean))),
        "gamma_sweep_min_ratio": float(np.min(scaled_ratio)),
        "gamma_sweep_min_ratio_raw": float(np.min(att_th / ridge_th)),
        "gamma_sweep_cross": float(below.min()) if below.size else float("nan"),
        "slope_small": float(np.log(att_th[1] / att_th[0]) / np.log(gammas[1] / gammas[0])),
        "trials": trials, **ctrl})


def c_sweep(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against ``c = p/n`` at fixed ``n``, ``gamma = 1e-5``, SNR 1.

    Simulated at ``c = geomspace(1/8, 2, n_points)``; theory on a fine grid. One axes (log
    ``c``), with the interpolation threshold ``c = 1`` dotted.

    Parameters
    ----------
    n : int
        Tokens of every simulated point.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along the sweep).
    n_points : int
        Simulated points of the sweep.

    Returns
    -------
    Figure
        Numbers: ``p_sweep_n`` (``n``); ``p_sweep_gap``, the largest relative gap (percent) of
        the ridge theory to its Monte Carlo mean for ``c < 0.9``; ``p_sweep_max_above``, the
        largest simulated ridge error for ``c > 1.1``; ``p_sweep_att_abs``, the largest
        absolute gap of the attention theory to its Monte Carlo mean.
    """
    gamma = 1e-5
    cs = np.geomspace(1 / 8, 2, check_int(n_points, "n_points"))
    settings = [Setting(c=float(c), snr=1.0) for c in cs]
    mc = _run(settings, gamma, n, trials, seed)
    (ridge_mean, ridge_sem), (att_mean, att_sem) = ((mc.mean(m)[:, 0], mc.sem(m)[:, 0])
                                                    for m in ("ridge", "attention"))
    c_grid = np.geomspace(cs[0], cs[-1], LINE_POINTS)
    ridge_th = _ridge_theory([Setting(c=float(c), snr=1.0) for c in c_grid], gamma)

    fig, ax = plt.subplots()
    style.plot_theory_vs_sim(ax, c_grid, ridge_th, ridge_mean, ridge_sem, label="ridge",
                             x_sim=cs)
    att_th = theory.attention_error_batch([Setting(c=float(c), snr=1.0) for c in c_grid], gamma)
    style.plot_theory_vs_sim(ax, c_grid, att_th, att_mean, att_sem, label="attention",
                             x_sim=cs)
    ax.axvline(1.0, color="0.5", linestyle=":", linewidth=1)
    style.label_axes(ax, r"$c = p / n$", r"interpolation error $E(\gamma)$", logx=True,
                     title=f"$n = {n}$, $\\gamma = 10^{{-5}}$, $\\mathrm{{SNR}} = 1$")
    style.plain_ticks(ax.xaxis, [0.125, 0.25, 0.5, 1, 2])
    below = cs < 0.9
    att_at = theory.attention_error_batch(settings, gamma)
    return Figure(fig, {
        "p_sweep_n": n,
        "p_sweep_gap": 100 * _rel_gap(_ridge_theory(settings, gamma)[below], ridge_mean[below]),
        "p_sweep_max_above": float(ridge_mean[cs > 1.1].max()),
        "p_sweep_att_abs": float(np.max(np.abs(att_at - att_mean)))})


def snr_sweep(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against the SNR at ``c = 1/4``, ``gamma = 1e-5``.

    Simulated at ``snr = linspace(0, 4, n_points)``; theory on a fine grid. One axes.

    Parameters
    ----------
    n : int
        Tokens of every simulated point.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along the sweep).
    n_points : int
        Simulated points of the sweep.

    Returns
    -------
    Figure
        Numbers: ``snr_sweep_gap``, the largest relative gap (percent) of the ridge theory to
        its Monte Carlo mean; ``snr1_limit``, the ridgeless limit ``(1 - c)/(1 + snr)`` at SNR 1;
        ``snr1_theory``, the ridge theory there; ``snr_sweep_att_abs``, the largest absolute gap
        of the attention theory to its Monte Carlo mean.
    """
    gamma, c = 1e-5, 0.25
    snrs = np.linspace(0.0, 4.0, check_int(n_points, "n_points"))
    settings = [Setting(c=c, snr=float(s)) for s in snrs]
    mc = _run(settings, gamma, n, trials, seed)
    (ridge_mean, ridge_sem), (att_mean, att_sem) = ((mc.mean(m)[:, 0], mc.sem(m)[:, 0])
                                                    for m in ("ridge", "attention"))
    snr_grid = np.linspace(snrs[0], snrs[-1], LINE_POINTS)
    ridge_th = _ridge_theory([Setting(c=c, snr=float(s)) for s in snr_grid], gamma)

    fig, ax = plt.subplots()
    style.plot_theory_vs_sim(ax, snr_grid, ridge_th, ridge_mean, ridge_sem, label="ridge",
                             x_sim=snrs)
    att_th = theory.attention_error_batch([Setting(c=c, snr=float(s)) for s in snr_grid], gamma)
    style.plot_theory_vs_sim(ax, snr_grid, att_th, att_mean, att_sem, label="attention",
                             x_sim=snrs)
    style.label_axes(ax, r"$\mathrm{SNR} = \|\mu\|^2$", r"interpolation error $E(\gamma)$",
                     title=f"$p = {mc.p[0]}$, $n = {n}$, $\\gamma = 10^{{-5}}$")
    att_at = theory.attention_error_batch(settings, gamma)
    return Figure(fig, {
        "snr_sweep_gap": 100 * _rel_gap(_ridge_theory(settings, gamma), ridge_mean),
        "snr1_limit": (1 - c) / (1 + 1.0),
        "snr1_theory": float(theory.ridge_error(Setting(c=c, snr=1.0), gamma)),
        "snr_sweep_att_abs": float(np.max(np.abs(att_at - att_mean)))})
