r"""Figures of the chapter *Deterministic equivalent* (``book/02_deterministic_equivalent``).

The three sweeps of the paper's Figure 1: the interpolation error of ridge regression and of
attention (``f = tanh``, ``W_K^T W_Q = I_p``) against ``gamma``, ``c = p/n`` and the SNR. Lines
are the deterministic equivalents (:func:`attn_lib.theory.ridge_error`,
:func:`attn_lib.theory.attention_error`, :func:`attn_lib.theory.attention_error_batch`),
markers Monte Carlo (:func:`attn_lib.simulation.simulate.errors`, cached; mean ± one standard
deviation over trials). Attention and ridge are simulated on the same draws.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ... import Setting, simulate, theory
from ..._validation import check_int
from ... import cache
from .. import style
from ..page import Figure

__all__ = ["gamma_sweep", "c_sweep", "snr_sweep"]

#: Fine grid of the theory lines of the ``c`` and SNR sweeps.
LINE_POINTS = 200


def _run(setting: Setting, gammas: object, n: int, trials: int,
         seed: int) -> simulate.SimulationResult:
    """Monte Carlo of attention and ridge at one setting (cached on disk)."""
    return cache.cached(simulate.errors, setting=setting, gammas=np.atleast_1d(gammas),
                        n=n, trials=trials, seed=seed)


def _at_gamma(results: Sequence[simulate.SimulationResult],
              model: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std over trials of one model, one value per result (single gamma)."""
    stats = [getattr(r, model) for r in results]
    return np.array([s.mean[0] for s in stats]), np.array([s.std[0] for s in stats])


def _ridge_theory(settings: Sequence[Setting], gamma: float) -> np.ndarray:
    """Ridge deterministic equivalent at one ``gamma`` for each setting, shape ``(B,)``."""
    return np.array([theory.ridge_error(s, gamma) for s in settings])


def _rel_gap(theory_values: object, sim_mean: object) -> float:
    """Largest relative gap ``max |theory - mean| / |theory|``."""
    t, m = np.asarray(theory_values), np.asarray(sim_mean)
    return float(np.max(np.abs(t - m) / np.abs(t)))


def gamma_sweep(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error against ``gamma`` at ``c = 4``, SNR 1, on ``gammas = logspace(-4, 2, n_points)``.

    One axes (log-log): ridge and attention, theory and simulation.

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
        ``gamma_sweep_min_ratio``, the smallest theory ratio ``E_att / E_ridge`` on the grid;
        ``trials``.
    """
    setting = Setting(c=4.0, snr=1.0)
    gammas = np.logspace(-4, 2, check_int(n_points, "n_points"))
    res = _run(setting, gammas, n, trials, seed)
    ridge_th = theory.ridge_error(setting, gammas)
    fig, ax = plt.subplots()
    style.plot_theory_vs_sim(ax, gammas, ridge_th, res.ridge.mean, res.ridge.std,
                             label="ridge")
    att_th = theory.attention_error(setting, gammas)
    style.plot_theory_vs_sim(ax, gammas, att_th, res.attention.mean, res.attention.std,
                             label="attention")
    style.label_axes(ax, r"ridge parameter $\gamma$", r"interpolation error $E(\gamma)$",
                     title=f"$p = {res.p}$, $n = {res.n}$, $\\mathrm{{SNR}} = 1$",
                     logx=True, logy=True)
    return Figure(fig, {
        "gamma_sweep_p": res.p, "gamma_sweep_n": res.n,
        "gamma_sweep_gap": 100 * _rel_gap(ridge_th, res.ridge.mean),
        "gamma_sweep_att_abs": float(np.max(np.abs(att_th - res.attention.mean))),
        "gamma_sweep_min_ratio": float(np.min(att_th / ridge_th)), "trials": trials})


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
    sims = [_run(s, gamma, n, trials, seed) for s in settings]
    ridge_mean, ridge_std = _at_gamma(sims, "ridge")
    att_mean, att_std = _at_gamma(sims, "attention")
    c_grid = np.geomspace(cs[0], cs[-1], LINE_POINTS)
    ridge_th = _ridge_theory([Setting(c=float(c), snr=1.0) for c in c_grid], gamma)

    fig, ax = plt.subplots()
    style.plot_theory_vs_sim(ax, c_grid, ridge_th, ridge_mean, ridge_std, label="ridge",
                             x_sim=cs)
    att_th = theory.attention_error_batch([Setting(c=float(c), snr=1.0) for c in c_grid], gamma)
    style.plot_theory_vs_sim(ax, c_grid, att_th, att_mean, att_std, label="attention",
                             x_sim=cs)
    ax.axvline(1.0, color="0.5", linestyle=":", linewidth=1)
    style.label_axes(ax, r"$c = p / n$", r"interpolation error $E(\gamma)$", logx=True,
                     title=f"$n = {n}$, $\\gamma = 10^{{-5}}$, $\\mathrm{{SNR}} = 1$")
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
    sims = [_run(s, gamma, n, trials, seed) for s in settings]
    ridge_mean, ridge_std = _at_gamma(sims, "ridge")
    att_mean, att_std = _at_gamma(sims, "attention")
    snr_grid = np.linspace(snrs[0], snrs[-1], LINE_POINTS)
    ridge_th = _ridge_theory([Setting(c=c, snr=float(s)) for s in snr_grid], gamma)

    fig, ax = plt.subplots()
    style.plot_theory_vs_sim(ax, snr_grid, ridge_th, ridge_mean, ridge_std, label="ridge",
                             x_sim=snrs)
    att_th = theory.attention_error_batch([Setting(c=c, snr=float(s)) for s in snr_grid], gamma)
    style.plot_theory_vs_sim(ax, snr_grid, att_th, att_mean, att_std, label="attention",
                             x_sim=snrs)
    style.label_axes(ax, r"$\mathrm{SNR} = \|\mu\|^2$", r"interpolation error $E(\gamma)$",
                     title=f"$p = {sims[0].p}$, $n = {n}$, $\\gamma = 10^{{-5}}$")
    att_at = theory.attention_error_batch(settings, gamma)
    return Figure(fig, {
        "snr_sweep_gap": 100 * _rel_gap(_ridge_theory(settings, gamma), ridge_mean),
        "snr1_limit": (1 - c) / (1 + 1.0),
        "snr1_theory": float(theory.ridge_error(Setting(c=c, snr=1.0), gamma)),
        "snr_sweep_att_abs": float(np.max(np.abs(att_at - att_mean)))})
