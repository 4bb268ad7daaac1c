r"""Figures and tables of the chapter *Hermite linearisation* (``book/01_hermite_linearisation``).

The chapter compares the attention kernel ``K = f(X^T W_K^T W_Q X / sqrt(p)) / sqrt(p)`` with
its Gaussian equivalent ``K_lin`` (:mod:`attn_lib.studies.hermite_linearisation`): the Hermite
data ``a0, a1, a2, nu, b2 = nu - a1^2`` of the registered nonlinearities, the eigenvalue
spectra of ``K`` and ``K_lin`` against the limiting density, the gap between the two kernels
along ``n``, and the interpolation error of attention and ridge regression against ``gamma``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown

from ... import Setting, hermite, simulate, theory
from ..._validation import check_int, check_seed
from ...model import nonlinearity
from ...studies import hermite_linearisation
from ...theory.kernel_spectrum import kernel_density
from ... import cache
from .. import style
from ..page import Figure

__all__ = ["coefficient_table", "nonlinearities", "spectra", "kernel_gap",
           "interpolation_error"]

#: Nonlinearities whose ``a1``, ``nu`` and ``b2`` the prose quotes.
QUOTED = ("tanh", "cos", "relu")


def coefficient_table() -> dict[str, Any]:
    r"""Hermite data of every nonlinearity of :data:`attn_lib.model.nonlinearity.REGISTRY`.

    Returns
    -------
    dict
        ``coef_table``: Markdown table of ``a0, a1, a2, nu, b2 = nu - a1^2`` (4 decimals), one
        row per registered name; ``a1_<f>``, ``nu_<f>``, ``b2_<f>`` for ``f`` in
        :data:`QUOTED` (floats).
    """
    coef = {name: hermite.coefficients(name) for name in nonlinearity.REGISTRY}
    rows = ["| $f$ | $a_0$ | $a_1$ | $a_2$ | $\\nu$ | $b_2 = \\nu - a_1^2$ |",
            "|:---|---:|---:|---:|---:|---:|"]
    rows += [f"| {name} | " + " | ".join(f"{v:.4f}" for v in (h.a0, h.a1, h.a2, h.nu, h.b2)) + " |"
             for name, h in coef.items()]
    out: dict[str, Any] = {"coef_table": Markdown("\n".join(rows))}
    for name in QUOTED:
        for field in ("a1", "nu", "b2"):
            out[f"{field}_{name}"] = getattr(coef[name], field)
    return out


def nonlinearities() -> Figure:
    """Centred nonlinearities ``f(t) - a0`` on ``[-3, 3]`` over the (shifted) Gaussian density.

    One axes; no numbers.
    """
    t = np.linspace(-3, 3, 601)
    fig, ax = plt.subplots()
    for name in ("linear", "tanh", "relu", "sign", "cos", "erf"):
        ax.plot(t, hermite.centered(name)(t), label=name, color=style.color(name))
    gauss = np.exp(-t ** 2 / 2) / np.sqrt(2 * np.pi)
    ax.fill_between(t, -2.0, -2.0 + 2 * gauss, color="0.85",
                    label=r"$\mathcal{N}(0, 1)$ density (shifted)")
    ax.set_ylim(-2.0, 2.5)
    style.label_axes(ax, r"logit $t$", r"centred $f(t) - a_0$", legend=False,
                     title="Nonlinearities (centred)")
    ax.legend(ncol=2)
    return Figure(fig, {})


def spectra(*, n: int, seed: int) -> Figure:
    r"""Eigenvalue histograms of ``K`` and ``K_lin`` (same ``X``) and the limiting density.

    Two axes, ``f = tanh`` and ``f = cos``, at ``c = 1``, SNR 1, ``w_K = w_Q = 0``; each panel
    draws its kernel pair (:func:`~attn_lib.studies.hermite_linearisation.kernel_pair`) from
    ``numpy.random.default_rng(seed)``; the line is
    :func:`~attn_lib.theory.kernel_spectrum.kernel_density`.

    Parameters
    ----------
    n : int
        Tokens (``n = p``).
    seed : int
        Seed of both panels' draws.

    Returns
    -------
    Figure
        Numbers: ``n_spectrum`` (``n``) and ``ks_tanh``, ``ks_cos``, the Kolmogorov distance
        between the empirical eigenvalue distribution of ``K`` and the limiting law (the
        density's cumulative sum on the plotting grid).
    """
    n, seed = check_int(n, "n", low=2), check_seed(seed)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    numbers: dict[str, Any] = {"n_spectrum": n}
    for ax, name in zip(axes, ("tanh", "cos")):
        setting = Setting(c=1.0, snr=1.0, f=name)
        pair = hermite_linearisation.kernel_pair(setting, n, np.random.default_rng(seed))
        eig, eig_lin = np.linalg.eigvalsh(pair.K), np.linalg.eigvalsh(pair.K_lin)
        x = np.linspace(min(eig.min(), eig_lin.min()) - 0.2, max(eig.max(), eig_lin.max()) + 0.2,
                        600)
        dens = kernel_density(setting, x)
        bins = np.linspace(x[0], x[-1], 61)
        ax.hist(eig, bins=bins, density=True, color=style.color(name), alpha=0.55,
                label=r"eigenvalues of $K$")
        ax.hist(eig_lin, bins=bins, density=True, histtype="step", color="0.2",
                label=r"eigenvalues of $K_{\mathrm{lin}}$")
        ax.plot(x, dens, color="black", linewidth=1.5, label="limiting density")
        numbers[f"ks_{name}"] = float(np.max(np.abs(np.cumsum(dens) * (x[1] - x[0])
                                                    - np.searchsorted(np.sort(eig), x) / eig.size)))
        style.label_axes(ax, r"eigenvalue $\lambda$", "density" if name == "tanh" else "",
                         title=f"$f = \\{name}$, $n = p = {n}$", legend=(name == "cos"))
    return Figure(fig, numbers)


def kernel_gap(*, n_ladder: Sequence[int], trials: int, seed: int) -> Figure:
    r"""Error gap ``|E_{K_lin} - E_K|`` and residual norm against ``n``.

    At ``c = 1/2``, SNR 1, ``tanh``, aligned weights of norm 1; the draws at each ``n`` are
    :func:`~attn_lib.studies.hermite_linearisation.error_gap` with ``trials`` spawned streams
    of ``seed`` (cached).
    Two axes: the gap at ``gamma = 1e-2`` and ``1`` (markers: mean ± one standard deviation
    over trials), and the residual's spectral norm over the semicircle edge ``2 sqrt(b2 n / p)``.

    Parameters
    ----------
    n_ladder : sequence of int
        Token counts.
    trials : int
        Draws per ``n``.
    seed : int
        Seed of the first draw.

    Returns
    -------
    Figure
        Numbers: ``gap_n_small``, ``gap_n_large`` (first and last ``n``); ``gap_small``,
        ``gap_large``, the mean gap at ``gamma = 1e-2`` there; ``res_large``, the mean residual
        ratio at the last ``n``; ``trials``.
    """
    n_ladder = [check_int(k, "n_ladder", low=2) for k in n_ladder]
    trials, seed = check_int(trials, "trials"), check_seed(seed)
    setting = Setting(c=0.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=1.0)
    gammas = np.array([1e-2, 1.0])
    draws = {n: cache.cached(hermite_linearisation.error_gap, setting=setting, gammas=gammas,
                             n=n, trials=trials, seed=seed) for n in n_ladder}
    gap = {n: np.abs(d["gap"]) for n, d in draws.items()}
    res = {n: d["op_residual"] / d["semicircle_edge"] for n, d in draws.items()}

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for k, gamma in enumerate(gammas):
        style.plot_sim(axes[0], n_ladder, [gap[n][:, k].mean() for n in n_ladder],
                       [gap[n][:, k].std() for n in n_ladder], label=f"$\\gamma = {gamma:g}$",
                       color=f"C{k}")
    style.label_axes(axes[0], "$n$", r"$|E_{K_{\mathrm{lin}}} - E_K|$", logx=True,
                     title="error gap on the same draw")
    style.plot_sim(axes[1], n_ladder, [res[n].mean() for n in n_ladder],
                   [res[n].std() for n in n_ladder], label="residual norm / semicircle edge",
                   color="C2")
    axes[1].axhline(1.0, color="0.5", linestyle=":")
    style.label_axes(axes[1], "$n$", "ratio", logx=True, title="Wigner-like residual")
    for ax in axes:
        ax.set_xticks(n_ladder, [str(n) for n in n_ladder])
    return Figure(fig, {
        "gap_n_small": n_ladder[0], "gap_n_large": n_ladder[-1],
        "gap_small": float(gap[n_ladder[0]][:, 0].mean()),
        "gap_large": float(gap[n_ladder[-1]][:, 0].mean()),
        "res_large": float(res[n_ladder[-1]].mean()), "trials": trials})


def interpolation_error(*, n: int, trials: int, seed: int, n_gamma: int) -> Figure:
    r"""Interpolation error ``E(gamma)`` of attention (``tanh``, ``cos``) and ridge regression.

    At ``c = 1/2``, SNR 1, ``w_K = w_Q = 0``, on ``gammas = logspace(-4, 1, n_gamma)``:
    Monte Carlo (:func:`attn_lib.simulation.simulate.errors`, cached; markers: mean ± one
    standard deviation over trials) and the ridge theory (:func:`attn_lib.theory.ridge_error`,
    line). One axes.

    Parameters
    ----------
    n : int
        Tokens.
    trials : int
        Draws per nonlinearity.
    seed : int
        Root seed of the draws (the same for both nonlinearities).
    n_gamma : int
        Number of ridge parameters.

    Returns
    -------
    Figure
        Numbers at the smallest ``gamma`` (``gamma_min``): ``err_att_tanh``, ``err_att_cos``
        (attention, simulated mean), ``err_ridge`` (ridge, simulated mean, from the ``tanh``
        run) and ``err_ridge_theory``.
    """
    gammas = np.logspace(-4, 1, check_int(n_gamma, "n_gamma"))
    results = {}
    fig, ax = plt.subplots()
    for name, marker in (("tanh", "o"), ("cos", "s")):
        setting = Setting(c=0.5, snr=1.0, f=name)
        results[name] = res = cache.cached(simulate.errors, setting=setting, gammas=gammas,
                                           n=n, trials=trials, seed=seed)
        style.plot_sim(ax, gammas, res.attention.mean, res.attention.std, fmt=marker,
                       color=style.color(name), label=f"attention, $f = \\{name}$ (simulation)")
    ridge_th = theory.ridge_error(Setting(c=0.5, snr=1.0), gammas)
    ridge = results["tanh"].ridge  # the ridge error does not depend on f
    style.plot_theory_vs_sim(ax, gammas, ridge_th, ridge.mean, ridge.std, label="ridge")
    style.label_axes(ax, r"ridge parameter $\gamma$", r"interpolation error $E(\gamma)$",
                     title=f"$c = 1/2$, $\\mathrm{{SNR}} = 1$, $n = {n}$, {trials} trials",
                     logx=True)
    return Figure(fig, {
        "gamma_min": float(gammas[0]),
        "err_att_tanh": float(results["tanh"].attention.mean[0]),
        "err_att_cos": float(results["cos"].attention.mean[0]),
        "err_ridge": float(ridge.mean[0]), "err_ridge_theory": float(ridge_th[0])})
