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
from ...simulation.trials import standard_error
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
    Two axes: the gap at ``gamma = 1e-2`` and ``1`` (markers: mean ± one standard error over
    trials; the lower bar stops at zero, the gap being non-negative), and the residual's spectral norm over the semicircle edge ``2 sqrt(b2 n / p)``.

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
        mean = np.array([gap[n][:, k].mean() for n in n_ladder])
        sem = np.array([standard_error(gap[n][:, k], axis=0) for n in n_ladder])
        # |gap| >= 0: the lower bar stops at zero
        style.plot_sim(axes[0], n_ladder, mean, np.vstack([np.minimum(sem, mean), sem]),
                       label=f"$\\gamma = {gamma:g}$", color=f"C{k}")
    style.label_axes(axes[0], "$n$", r"$|E_{K_{\mathrm{lin}}} - E_K|$", logx=True,
                     title="error gap on the same draw")
    style.plot_sim(axes[1], n_ladder, [res[n].mean() for n in n_ladder],
                   [standard_error(res[n], axis=0) for n in n_ladder],
                   label="residual norm / semicircle edge",
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


def _crossing(gammas: np.ndarray, gap: np.ndarray) -> float:
    """First ``gamma`` where ``gap`` turns negative (log-linear interpolation); ``nan`` if never."""
    neg = np.flatnonzero(gap < 0)
    if neg.size == 0:
        return float("nan")
    k = neg[0]
    if k == 0:
        return float(gammas[0])
    t = gap[k - 1] / (gap[k - 1] - gap[k])
    return float(np.exp(np.log(gammas[k - 1]) + t * np.log(gammas[k] / gammas[k - 1])))


def interpolation_error(*, n: int, trials: int, seed: int, n_gamma: int) -> Figure:
    r"""Interpolation error of attention (``tanh``, ``cos``) and ridge: raw and rescaled ``gamma``.

    At ``c = 1/2``, SNR 1, ``w_K = w_Q = 0``. Left: against the raw ``gamma`` on
    ``logspace(-4, 1, n_gamma)``; right: against ``gamma / tau``, each model at its own
    ``gamma = tau g`` with ``tau`` its mean feature eigenvalue
    (:func:`attn_lib.studies.sweeps.feature_scale`, the book's scale convention). Markers: Monte
    Carlo (:func:`attn_lib.simulation.simulate.errors`, cached), mean ± one standard error over
    trials; lines: the deterministic equivalents of ridge and of attention with ``tanh``.

    Parameters
    ----------
    n : int
        Tokens.
    trials : int
        Draws per nonlinearity.
    seed : int
        Root seed of the draws (the same for every run).
    n_gamma : int
        Number of ridge parameters.

    Returns
    -------
    Figure
        Numbers at the smallest ``gamma`` (``gamma_min``): ``err_att_tanh``, ``err_att_cos``
        (attention, simulated mean), ``err_ridge`` (ridge, simulated mean, from the ``tanh``
        run) and ``err_ridge_theory``; ``tau_tanh``, ``tau_cos``, ``tau_ridge``;
        ``cross_raw``, ``cross_scaled``: the ``gamma`` (raw) and ``gamma / tau`` (rescaled) where
        the ``tanh`` DE drops below ridge's; claims ``tanh_wins_large_raw``,
        ``tanh_wins_large_scaled`` (simulated ``tanh`` below ridge at the largest ``gamma``,
        resp. ``gamma / tau``: the paired difference attention - ridge over the common draws,
        Student t at ``trials`` draws) with ``<name>_effect`` (that difference, ``"mean ±
        s.e."``), and ``scale_moves_crossing`` (theory: the crossing moves to larger ``gamma``
        once the scales are matched).
    """
    from ...studies.sweeps import feature_scale
    from .. import claims

    gammas = np.logspace(-4, 1, check_int(n_gamma, "n_gamma"))
    ridge_setting = Setting(c=0.5, snr=1.0)
    tau = {name: feature_scale(Setting(c=0.5, snr=1.0, f=name)) for name in ("tanh", "cos")}
    tau["ridge"] = feature_scale(ridge_setting, "ridge")

    def run(s: Setting, g: np.ndarray, att: bool = True) -> simulate.SimulationResult:
        return cache.cached(simulate.errors, setting=s, gammas=g, n=n, trials=trials, seed=seed,
                            attention=att)
    raw = {name: run(Setting(c=0.5, snr=1.0, f=name), gammas) for name in ("tanh", "cos")}
    scaled = {name: run(Setting(c=0.5, snr=1.0, f=name), tau[name] * gammas).stats("attention")
              for name in ("tanh", "cos")}
    scaled["ridge"] = run(ridge_setting, tau["ridge"] * gammas, False).ridge

    fine = np.logspace(-4, 1, 200)
    tanh = Setting(c=0.5, snr=1.0, f="tanh")
    th = {"raw": (theory.attention_error(tanh, fine), theory.ridge_error(ridge_setting, fine)),
          "scaled": (theory.attention_error(tanh, tau["tanh"] * fine),
                     theory.ridge_error(ridge_setting, tau["ridge"] * fine))}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    curves = {"raw": {**{k: v.stats("attention") for k, v in raw.items()}, "ridge": raw["tanh"].ridge},
              "scaled": scaled}
    for ax, key, xlabel in ((axes[0], "raw", r"ridge parameter $\gamma$"),
                            (axes[1], "scaled", r"rescaled $\gamma / \tau$")):
        for name, marker in (("tanh", "o"), ("cos", "s")):
            st = curves[key][name]
            style.plot_sim(ax, gammas, st.mean, st.sem, fmt=marker, color=style.color(name),
                           label=f"attention, $f = \\{name}$ (simulation)")
        style.plot_theory(ax, fine, th[key][0], color=style.color("tanh"),
                          label=r"attention, $f = \tanh$ (theory)")
        style.plot_theory_vs_sim(ax, fine, th[key][1], curves[key]["ridge"].mean,
                                 curves[key]["ridge"].sem, label="ridge", x_sim=gammas)
        style.label_axes(ax, xlabel, r"interpolation error $E(\gamma)$" if key == "raw" else "",
                         title=("raw $\\gamma$" if key == "raw" else
                                "in units of the mean feature eigenvalue $\\tau$"),
                         logx=True, legend=(key == "scaled"))
    cross = {k: _crossing(fine, a - r) for k, (a, r) in th.items()}
    wins: dict[str, Any] = {}
    for key in ("raw", "scaled"):
        # the same tokens in both runs (common seed): the paired difference attention - ridge
        d = curves[key]["tanh"].values[:, -1] - curves[key]["ridge"].values[:, -1]
        wins[key] = claims.less(
            f"tanh_wins_large_{key}", float(d.mean()), float(standard_error(d, axis=0)),
            draws=d.size, wording=("is below", "is above",
                                   "is not distinguishable, at this profile's draws, from"))
        wins[f"{key}_effect"] = f"{d.mean():+.3g} ± {float(standard_error(d, axis=0)):.2g}"
    return Figure(fig, {
        "gamma_min": float(gammas[0]),
        "err_att_tanh": float(raw["tanh"].stats("attention").mean[0]),
        "err_att_cos": float(raw["cos"].stats("attention").mean[0]),
        "err_ridge": float(raw["tanh"].ridge.mean[0]), "err_ridge_theory": float(th["raw"][1][0]),
        "tau_tanh": tau["tanh"], "tau_cos": tau["cos"], "tau_ridge": tau["ridge"],
        "cross_raw": cross["raw"], "cross_scaled": cross["scaled"],
        "tanh_wins_large_raw": wins["raw"], "tanh_wins_large_scaled": wins["scaled"],
        "tanh_wins_large_raw_effect": wins["raw_effect"],
        "tanh_wins_large_scaled_effect": wins["scaled_effect"],
        "scale_moves_crossing": claims.exact(
            "scale_moves_crossing", cross["scaled"] > 2 * cross["raw"],
            f"theory crossing at gamma = {cross['raw']:.3g} (raw), gamma/tau = "
            f"{cross['scaled']:.3g} (rescaled)",
            wording=("moves to a larger", "does not move to a larger", "(exact)")),
    })
