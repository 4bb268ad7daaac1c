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

__all__ = ["gamma_sweep", "c_sweep", "snr_sweep"]

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


def gamma_sweep(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against ``gamma`` at ``c = 4``, SNR 1, on ``gammas = logspace(-4, 2, n_points)``.

    Two axes (log-log). Left, the setting of the paper's Figure 1 (left): ridge and attention
    (``tanh``, ``W_K^T W_Q = I_p``), theory and simulation against the raw ``gamma``. Right, the
    same two models against ``g = gamma / tau``, each at its own ``gamma = tau g``
    (:func:`attn_lib.studies.sweeps.feature_scale`, the book's scale convention), simulated on
    the same tokens (common seed). Markers: mean ± one standard error.

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
        fine grid where that ratio is below 1 (nan if none); ``slope_small``, the log-log slope
        of the attention DE over the two smallest ``gamma``; ``trials``; ``g_small``, the grid
        point nearest ``g = 1e-2``, with the claim ``att_above_ridge`` (attention minus ridge
        ``> 0`` there, paired over the draws, Student t) and ``att_above_ridge_effect`` (the
        paired difference, ``"mean ± s.e. (draws)"``).
    """
    from .. import claims
    from .random_inputs import _effect

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
    fine = np.logspace(-4, 2, LINE_POINTS)
    # ridge as the zero-diagonal linear control (same cached draws as the chapter on random inputs)
    models = {"ridge": (dataclasses.replace(setting, f="linear"), theory.ridge_error),
              "attention": (setting, theory.attention_error)}
    scaled, lines = {}, {}
    for name, (s, error) in models.items():
        tau = sweeps.feature_scale(s, name)
        st = getattr(cache.cached(simulate.errors, setting=s, gammas=tau * gammas, n=n,
                                  trials=trials, seed=seed, keep_diagonal=False,
                                  attention=(name == "attention")), name)
        lines[name] = error(s, tau * fine)
        style.plot_theory_vs_sim(axes[1], fine, lines[name], st.mean, st.sem, label=name,
                                 x_sim=gammas)
        scaled[name] = (st, error(s, tau * gammas))
    style.label_axes(axes[1], r"rescaled $\gamma / \tau$", "", logx=True, logy=True,
                     title="in units of the mean feature eigenvalue $\\tau$")
    at = int(np.argmin(np.abs(np.log10(gammas) + 2)))
    d = scaled["attention"][0].values[:, at] - scaled["ridge"][0].values[:, at]
    ratio = lines["attention"] / lines["ridge"]
    below = fine[ratio < 1]
    grid_ratio = scaled["attention"][1] / scaled["ridge"][1]
    return Figure(fig, {
        "gamma_sweep_p": int(mc.p[0]), "gamma_sweep_n": int(mc.n[0]),
        "gamma_sweep_gap": 100 * _rel_gap(ridge_th, ridge_mean),
        "gamma_sweep_att_abs": float(np.max(np.abs(att_th - att_mean))),
        "gamma_sweep_min_ratio": float(np.min(grid_ratio)),
        "gamma_sweep_cross": float(below.min()) if below.size else float("nan"),
        "slope_small": float(np.log(att_th[1] / att_th[0]) / np.log(gammas[1] / gammas[0])),
        "trials": trials, "g_small": float(gammas[at]),
        "att_above_ridge": claims.exceeds(
            "att_above_ridge", float(d.mean()), float(standard_error(d, axis=0)),
            draws=d.size, wording=("is above", "is below",
                                   "is not distinguishable, at this profile's draws, from")),
        "att_above_ridge_effect": _effect(d)})


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
