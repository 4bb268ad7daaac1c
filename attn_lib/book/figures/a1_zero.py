r"""Figures of the chapter *The a1 = 0 failure* (``book/05_a1_zero``).

With ``a1 = E[xi f(xi)] = 0`` the signal and the weights cannot reach attention's features:
the interpolation error depends on ``c``, ``gamma`` and ``nu`` only. Every nonlinearity here is
rescaled to ``nu = 1`` (:func:`attn_lib.model.nonlinearity.normalised`; the centred cosine is the
``theta = pi/2`` end of :func:`attn_lib.model.nonlinearity.mixture`). Unless stated otherwise
``c = 2``, ``gamma = 0.1`` and ``w_K = w_Q = w`` aligned with ``mu``. Lines are the deterministic
equivalent (:func:`attn_lib.studies.sweeps.equivalents`), markers Monte Carlo
(:func:`attn_lib.studies.sweeps.simulations`, cached; mean ± one standard error over
trials), drawn along a sweep with
:func:`attn_lib.book.figures.structured_inputs.theory_and_simulation`.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ... import Setting, hermite
from ..._validation import check_int
from ...model import nonlinearity
from ...simulation.trials import standard_error
from ...studies import sweeps
from .. import style
from ..page import Figure
from .structured_inputs import theory_and_simulation

__all__ = ["C", "GAMMA", "FUNCS", "W_FINITE", "hermite_data", "snr_and_weights", "universality", "mixture",
           "finite_size"]

C, GAMMA = 2.0, 0.1
#: The nonlinearities compared, all rescaled to ``nu = 1``; the centred cosine normalised to
#: ``nu = 1`` is the ``theta = pi/2`` end of the mixture family of :func:`mixture`.
FUNCS: dict[str, Any] = {"cos": nonlinearity.mixture(np.pi / 2, "cos"),
                         **{name: nonlinearity.normalised(name) for name in ("tanh", "sign", "relu")}}
#: Norm of the aligned weights of :func:`finite_size` (large, so that ``delta`` reaches order one).
W_FINITE = 3.0
#: Even ``a1 = 0`` nonlinearities and the contrast of :func:`finite_size`, all at ``nu = 1``.
FINITE_FUNCS: dict[str, Any] = {"cos": FUNCS["cos"], "quadratic": nonlinearity.normalised("quadratic"),
                                "tanh": FUNCS["tanh"]}


def _aligned(f: Any, snr: float, w: float = 1.0, c: float = C) -> Setting:
    """Setting with weights ``w_K = w_Q`` of norm ``w`` aligned with ``mu``."""
    return Setting(c=float(c), snr=float(snr), f=f, wk_norm=float(w), wq_norm=float(w))


def _theta(a1: float) -> float:
    """Mixture angle ``theta = arccos(a1)`` with ``a1`` clipped to ``[0, 1]``."""
    return float(np.arccos(np.clip(a1, 0.0, 1.0)))


def _a1(name: str) -> float:
    """``a1`` of ``FUNCS[name]``."""
    return hermite.coefficients(FUNCS[name]).a1


def _matched(f: Any, c: float = C) -> float:
    """Attention's ``gamma`` at the same ``gamma / tau`` as ridge's :data:`GAMMA` (the book's scale
    convention, :func:`attn_lib.studies.sweeps.matched_gamma`)."""
    return float(sweeps.matched_gamma(Setting(c=float(c), f=f), GAMMA))


def _drift(values: np.ndarray) -> Any:
    """Claim on the end-to-end drift of a sweep, ``values`` of shape ``(B, T)``, paired over draws."""
    from .. import claims

    d = values[-1] - values[0]
    return claims.exceeds("cos_drift", float(d.mean()), float(standard_error(d, axis=0)),
                          draws=d.shape[0], wording=("a rise", "a fall", "no change it can decide"),
                          required=False)


def hermite_data() -> dict[str, float]:
    """Hermite data quoted by the chapter.

    Returns
    -------
    dict
        ``a1_<name>`` for every name of :data:`FUNCS` (at ``nu = 1``) and ``a2_cos``.
    """
    out = {f"a1_{name}": _a1(name) for name in FUNCS}
    out["a2_cos"] = hermite.coefficients(FUNCS["cos"]).a2
    return out


def snr_and_weights(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Attention error of the :data:`FUNCS` against the SNR and against the weight norm.

    Two axes: the SNR (``linspace(0, 4, n_points)``) with aligned weights of norm 1, and the
    weight norm ``|w_K| = |w_Q|`` (``linspace(0, 2, n_points)``) at SNR 2; the ridge theory at
    :data:`GAMMA` (dashed) for reference, each nonlinearity at its matched ``gamma``
    (:func:`_matched`).

    Parameters
    ----------
    n : int
        Tokens (``p = c n``).
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point.
    n_points : int
        Simulated points of each sweep.

    Returns
    -------
    Figure
        Numbers: ``cos_snr_spread_th``, ``cos_w_spread_th`` (range of the cosine's DE over the
        SNR and the weight sweep), ``cos_level`` (its value), ``cos_snr_spread_mc``,
        ``cos_w_spread_mc`` (range of the simulated means), ``cos_snr_sem_mc`` (mean standard
        error of the simulated means over the SNR sweep); claim ``cos_drift``: the simulated
        cosine error at SNR 4 minus SNR 0, paired over draws (common seeds), at the Student t
        threshold of ``trials`` draws; ``tanh_snr0``, ``tanh_snr4`` (tanh's DE at SNR 0
        and 4), ``cos_over_tanh`` (their ratio at SNR 4); ``tanh_w_change``, ``sign_w_change``
        (percent change of the DE from ``|w| = 0`` to 2); ``delta_max``, the largest coherent
        shift of the sweeps; ``trials``.
    """
    n_points = check_int(n_points, "n_points")
    snr_mc, snr_th = np.linspace(0.0, 4.0, n_points), np.linspace(0.0, 4.0, 41)
    w_mc, w_th = np.linspace(0.0, 2.0, n_points), np.linspace(0.0, 2.0, 31)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3), sharey=True)
    res_snr, res_w = {}, {}
    common: dict[str, Any] = dict(n=n, trials=trials, seed=seed)
    for name, f in FUNCS.items():
        label, color = f"{name}, $a_1 = {_a1(name):.2f}$", style.color(name)
        g = [_matched(f)]
        res_snr[name] = theory_and_simulation(
            axes[0], snr_th, [_aligned(f, s) for s in snr_th], snr_mc,
            [_aligned(f, s) for s in snr_mc], g, label=label, color=color, **common)
        res_w[name] = theory_and_simulation(
            axes[1], w_th, [_aligned(f, 2.0, w) for w in w_th], w_mc,
            [_aligned(f, 2.0, w) for w in w_mc], g, label=label, color=color, **common)
    ridge_th = sweeps.equivalents([Setting(c=C, snr=float(s)) for s in snr_th], GAMMA,
                                  model="ridge")
    style.plot_theory(axes[0], snr_th, ridge_th, label="ridge (theory)",
                      color=style.color("ridge"), linestyle="--")
    style.plot_theory(axes[1], w_th, np.full(w_th.shape, ridge_th[np.argmin(abs(snr_th - 2.0))]),
                      label="ridge (theory)", color=style.color("ridge"), linestyle="--")
    style.label_axes(axes[0], r"$\mathrm{SNR} = \|\mu\|^2$", r"interpolation error $E(\gamma)$",
                     title=f"aligned $\\|w\\| = 1$, $c = {C:g}$ ($n = {n}$), "
                           f"$\\gamma = {GAMMA:g}$", legend=False)
    style.label_axes(axes[1], r"weight norm $\|w_K\| = \|w_Q\|$", "",
                     title=f"aligned, SNR $= 2$, $c = {C:g}$ ($n = {n}$), $\\gamma = {GAMMA:g}$",
                     legend=False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8)

    (th_cos, mc_cos), th_tanh = res_snr["cos"], res_snr["tanh"][0]
    numbers = {
        "cos_snr_spread_th": float(np.ptp(th_cos)), "cos_level": float(th_cos[0]),
        "cos_snr_spread_mc": float(np.ptp(mc_cos.mean("attention")[:, 0])),
        "cos_snr_sem_mc": float(mc_cos.sem("attention")[:, 0].mean()),
        "cos_drift": _drift(mc_cos.values("attention")[:, :, 0]),
        "tanh_snr0": float(th_tanh[0]), "tanh_snr4": float(th_tanh[-1]),
        "cos_over_tanh": float(th_cos[-1] / th_tanh[-1]),
        "cos_w_spread_th": float(np.ptp(res_w["cos"][0])),
        "cos_w_spread_mc": float(np.ptp(res_w["cos"][1].mean("attention")[:, 0])),
        "delta_max": max(Setting(c=C, snr=4.0, wk_norm=1.0, wq_norm=1.0).delta(n),
                         Setting(c=C, snr=2.0, wk_norm=2.0, wq_norm=2.0).delta(n)),
        "trials": trials}
    for name in ("tanh", "sign"):
        th_w = res_w[name][0]
        numbers[f"{name}_w_change"] = 100 * float(th_w[-1] / th_w[0] - 1)
    return Figure(fig, numbers)


def universality(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""The ``a1 = 0`` error depends on ``c`` but not on the SNR, and only on ``a1`` and ``nu``.

    Two axes. Left: the cosine's error against ``c`` (``geomspace(1/4, 4, n_points)``) for
    SNR 0, 2, 4 (one DE curve for all), with tanh's DE at SNR 0 and 4, each at the ``gamma``
    matching ridge's :data:`GAMMA` (:func:`_matched`). Right: three ``a1 = 0``
    nonlinearities at ``nu = 1`` (the centred cosine, the centred ``|t|`` and tanh minus its
    linear part, :func:`~attn_lib.model.nonlinearity.mixture` at ``theta = pi/2``) against
    ``gamma`` (simulated on ``logspace(-2, 1, 7)``) at SNR 2, sharing one DE curve.

    Parameters
    ----------
    n : int
        Tokens (``p = c n``).
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point.
    n_points : int
        Simulated values of ``c``.

    Returns
    -------
    Figure
        Numbers: ``cos_c_lo``, ``cos_c_hi`` (the cosine's DE at ``c = 1/4`` and 4);
        ``cos_below_lo``, ``cos_below_hi`` (the range of ``c`` where the cosine's DE is below
        tanh's at SNR 0; ``raw_below_lo``, ``raw_below_hi`` the same at the raw ``gamma``);
        ``cos_c_snr_diff`` (largest difference between its SNR curves); ``univ_th_diff``
        (largest spread of the three DEs); ``univ_a2_cos``, ``univ_a2_abs`` (``a2`` of the
        cosine and of ``|t|``); ``univ_mc_dev``, ``univ_mc_dev_small`` (largest relative
        deviation, percent, of the simulated means from the DE for ``gamma >= 0.1`` and below).
    """
    c_mc = np.geomspace(0.25, 4.0, check_int(n_points, "n_points"))
    c_th = np.geomspace(0.25, 4.0, 41)
    snr_set = (0.0, 2.0, 4.0)
    shades = dict(zip(snr_set, ("#fdae6b", "#e6550d", "#7f2704")))
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3))
    ax = axes[0]
    res_c = {}
    # each c at its own matched gamma (tau depends on c): one setting per call

    def de(name: str, snr: float, cs: np.ndarray) -> np.ndarray:
        return np.array([
            sweeps.equivalents([_aligned(FUNCS[name], snr, c=c)], _matched(FUNCS[name], c))[0]
            for c in cs])
    for k, snr in enumerate(snr_set):
        mc = [sweeps.simulations([_aligned(FUNCS["cos"], snr, c=c)], _matched(FUNCS["cos"], c),
                                 n=n, trials=trials, seed=seed) for c in c_mc]
        res_c[snr] = (de("cos", snr, c_th), mc)
        style.plot_sim(ax, c_mc, [m.mean("attention")[0, 0] for m in mc],
                       [m.sem("attention")[0, 0] for m in mc],
                       color=shades[snr], fmt="osD"[k], label=f"cos, SNR {snr:g} (simulation)")
    style.plot_theory(ax, c_th, res_c[0.0][0], label="cos, any SNR (theory)",
                      color=style.color("cos"))
    tanh_th = {}
    for snr, ls in ((0.0, ":"), (4.0, "--")):
        tanh_th[snr] = de("tanh", snr, c_th)
        style.plot_theory(ax, c_th, tanh_th[snr], label=f"tanh, SNR {snr:g} (theory)",
                          color=style.color("tanh"), linestyle=ls)
    below = c_th[res_c[0.0][0] < tanh_th[0.0]]
    raw_cos = sweeps.equivalents([_aligned(FUNCS["cos"], 0.0, c=c) for c in c_th], GAMMA)
    raw_tanh = sweeps.equivalents([_aligned(FUNCS["tanh"], 0.0, c=c) for c in c_th], GAMMA)
    raw_below = c_th[raw_cos < raw_tanh]
    style.label_axes(ax, r"$c = p / n$", r"interpolation error $E$", logx=True,
                     title=f"aligned $\\|w\\| = 1$, $n = {n}$, ridge's $\\gamma = {GAMMA:g}$")
    ax.legend(fontsize=8)
    style.plain_ticks(ax.xaxis, [0.25, 0.5, 1, 2, 4])

    ax = axes[1]
    zero_a1 = {"centred cos": nonlinearity.mixture(np.pi / 2, "cos"),
               "centred $|t|$": nonlinearity.mixture(np.pi / 2, "relu"),
               "tanh minus linear part": nonlinearity.mixture(np.pi / 2, "tanh")}
    g_mc, g_th = np.logspace(-2, 1, 7), np.logspace(-2, 1, 61)
    res_u = {}
    for k, (label, f) in enumerate(zero_a1.items()):
        s = _aligned(f, 2.0)
        mc_u = sweeps.simulations([s], g_mc, n=n, trials=trials, seed=seed)
        res_u[label] = (sweeps.equivalents([s], g_th)[0], mc_u, hermite.coefficients(f))
        style.plot_sim(ax, g_mc, mc_u.mean("attention")[0], mc_u.sem("attention")[0],
                       color=("#d55e00", "#029e73", "#0173b2")[k], fmt="osD"[k],
                       label=f"{label} (simulation)")
    style.plot_theory(ax, g_th, res_u["centred cos"][0],
                      label="any $a_1 = 0$, $\\nu = 1$ (theory)", color="0.2")
    style.label_axes(ax, r"ridge parameter $\gamma$", r"interpolation error $E(\gamma)$",
                     title=f"$a_1 = 0$, SNR $= 2$, aligned $\\|w\\| = 1$, $c = {C:g}$", logx=True,
                     logy=True)
    style.plain_ticks(ax.yaxis, [0.05, 0.1, 0.2, 0.5, 1.0])

    th0 = res_c[0.0][0]
    theories = np.array([v[0] for v in res_u.values()])
    means = np.array([v[1].mean("attention")[0] for v in res_u.values()])
    th_at_mc = sweeps.equivalents([_aligned(zero_a1["centred cos"], 2.0)], g_mc)[0]
    rel_dev = np.abs(means / th_at_mc - 1)
    return Figure(fig, {
        "cos_c_lo": float(th0[0]), "cos_c_hi": float(th0[-1]),
        "cos_below_lo": float(below.min()) if below.size else float("nan"),
        "cos_below_hi": float(below.max()) if below.size else float("nan"),
        "raw_below_lo": float(raw_below.min()) if raw_below.size else float("nan"),
        "raw_below_hi": float(raw_below.max()) if raw_below.size else float("nan"),
        "cos_c_snr_diff": float(max(np.max(np.abs(res_c[s][0] - th0)) for s in snr_set)),
        "univ_th_diff": float(np.max(np.ptp(theories, axis=0))),
        "univ_a2_cos": float(res_u["centred cos"][2].a2),
        "univ_a2_abs": float(res_u["centred $|t|$"][2].a2),
        "univ_mc_dev": 100 * float(np.max(rel_dev[:, g_mc >= 0.1])),
        "univ_mc_dev_small": 100 * float(np.max(rel_dev[:, g_mc < 0.1]))})


def mixture(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""Error of ``f_theta = t cos(theta) + h(t) sin(theta)`` against ``a1 = cos(theta)``.

    ``h`` is the normalised non-linear part of the cosine
    (:func:`~attn_lib.model.nonlinearity.mixture`), so ``nu = 1`` for every ``theta``. One axes
    (``a1`` decreasing to the right) with SNR 0, 1 and 4, aligned ``|w| = 1``; simulated at
    ``linspace(0, 1, n_points)``.

    Parameters
    ----------
    n : int
        Tokens (``p = c n``).
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point.
    n_points : int
        Simulated values of ``a1``.

    Returns
    -------
    Figure
        Numbers: ``mix_a1_err``, ``mix_nu_err`` (largest ``|a1 - cos(theta)|`` and ``|nu - 1|``
        of the simulated mixtures, from :func:`attn_lib.model.hermite.coefficients`);
        ``mix_spread_lin``, ``mix_spread_zero`` (range of the DE over the SNRs at ``a1 = 1`` and
        0); ``mix_a1_half`` (largest ``a1`` where that range is at most half of
        ``mix_spread_lin``); ``mix_mc_spread_lin``, ``mix_mc_spread_zero`` (the same ranges of
        the simulated means); ``mix_snr0_range``, the range of the SNR-0 DE over ``a1``. Each
        ``f_theta`` is evaluated at its matched ``gamma`` (:func:`_matched`).
    """
    a1_mc = np.linspace(0.0, 1.0, check_int(n_points, "n_points"))
    a1_th = np.linspace(0.0, 1.0, 41)
    check = [hermite.coefficients(nonlinearity.mixture(_theta(a))) for a in a1_mc]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    res_m = {}
    snr_mix = (0.0, 1.0, 4.0)
    # each f_theta at its own matched gamma (tau = 1 + a1^2 / c varies along the sweep)

    def point(a: float, snr: float) -> tuple[Setting, float]:
        return (_aligned(nonlinearity.mixture(_theta(a)), snr),
                _matched(nonlinearity.mixture(_theta(a))))
    for k, snr in enumerate(snr_mix):
        th = np.array([sweeps.equivalents([s_], g_)[0] for s_, g_ in
                       (point(a, snr) for a in a1_th)])
        mc = [sweeps.simulations([s_], g_, n=n, trials=trials, seed=seed).values("attention")[0, :, 0]
              for s_, g_ in (point(a, snr) for a in a1_mc)]
        mc_mean = np.array([v.mean() for v in mc])
        style.plot_theory_vs_sim(ax, a1_th, th, mc_mean,
                                 [float(standard_error(v, axis=0)) for v in mc],
                                 label=f"SNR {snr:g}", color=("#9ecae1", "#3182bd", "#08306b")[k],
                                 x_sim=a1_mc, fmt="osD"[k])
        res_m[snr] = (th, mc_mean)
    ax.invert_xaxis()
    style.label_axes(ax, r"linear Hermite coefficient $a_1 = \cos\theta$ (at $\nu = 1$)",
                     r"interpolation error $E(\gamma)$",
                     title=f"$f_\\theta$, aligned $\\|w\\| = 1$, $c = {C:g}$ ($n = {n}$), "
                           f"ridge's $\\gamma = {GAMMA:g}$")

    spread = np.ptp(np.array([res_m[s][0] for s in snr_mix]), axis=0)  # over SNR, per a1
    half = a1_th[spread <= spread[-1] / 2]
    mc_spread = np.ptp(np.array([res_m[s][1] for s in snr_mix]), axis=0)
    return Figure(fig, {
        "mix_a1_err": float(max(abs(h.a1 - a) for h, a in zip(check, a1_mc))),
        "mix_nu_err": float(max(abs(h.nu - 1.0) for h in check)),
        "mix_spread_lin": float(spread[-1]), "mix_spread_zero": float(spread[0]),
        "mix_a1_half": float(half.max()) if half.size else float("nan"),
        "mix_mc_spread_zero": float(mc_spread[0]), "mix_mc_spread_lin": float(mc_spread[-1]),
        "mix_snr0_range": float(np.ptp(res_m[0.0][0]))})


def finite_size(*, n: int, trials: int, seed: int, n_points: int) -> Figure:
    r"""The ``a1 = 0`` error against the coherent shift ``delta``: finite-size theory, limit, simulation.

    Aligned weights of norm :data:`W_FINITE`, ``c = 2``, each ``f`` of :data:`FINITE_FUNCS` at its
    matched ``gamma`` (:func:`_matched`); the SNR is set by ``delta``:
    ``snr = delta sqrt(p) / (1 + W^2)`` (``delta`` from 0 to 2.5, ``p = c n``). Solid lines: the
    finite-size theory at this ``n`` (:func:`attn_lib.theory.attention_error` with ``n``); dotted:
    the proportional limit, flat for ``a1 = 0``; markers: simulation (mean ± one standard error).

    Parameters
    ----------
    n, trials, seed, n_points
        Tokens, draws per point, root seed and simulated points along ``delta``.

    Returns
    -------
    Figure
        Numbers, for ``<f>`` in ``cos``, ``quadratic``: ``<f>_fs_drop``, ``<f>_mc_drop`` (percent
        fall of the finite-size theory and of the simulated mean from ``delta = 0`` to 2.5),
        ``<f>_lim_spread`` (range of the limit over ``delta``), claims ``<f>_uses_signal`` (the
        simulated error at ``delta = 2.5`` below that at ``delta = 0``, paired over draws, its
        evidence the difference at 2.5 minus at 0, at the Student t threshold of ``trials``
        draws) and ``<f>_fs_above`` (the finite-size theory
        above the simulated mean at ``delta = 2.5``, reported only); ``fs_mc_max`` (largest ``|finite-size - simulation|`` over the ``a1 = 0``
        points) and ``fs_mc_sem`` (the mean standard error of those points).
    """
    from ...theory import attention_error
    from .. import claims

    n, n_points = check_int(n, "n"), check_int(n_points, "n_points")
    root_p = np.sqrt(Setting(c=C).p(n))
    d_th, d_mc = np.linspace(0.0, 2.5, 26), np.linspace(0.0, 2.5, n_points)

    def at(f: Any, d: np.ndarray) -> list[Setting]:
        return [_aligned(f, x * root_p / (1 + W_FINITE ** 2), W_FINITE) for x in d]

    fig, ax = plt.subplots(figsize=(6.4, 4.3))
    numbers: dict[str, Any] = {}
    gaps, sems = [], []
    for name, f in FINITE_FUNCS.items():
        g = _matched(f)
        color = style.color(name)
        fs = np.array([attention_error(s, [g], n=n)[0] for s in at(f, d_th)])
        lim = sweeps.equivalents(at(f, d_th), g)
        mc = sweeps.simulations(at(f, d_mc), [g], n=n, trials=trials, seed=seed)
        style.plot_theory_vs_sim(ax, d_th, fs, mc.mean("attention")[:, 0], mc.sem("attention")[:, 0],
                                 label=f"{name}, $a_1 = {hermite.coefficients(f).a1:.2f}$",
                                 color=color, x_sim=d_mc)
        style.plot_theory(ax, d_th, lim, color=color, linestyle=":")
        if name == "tanh":
            continue
        v = mc.values("attention")[:, :, 0]              # (points, trials), common seeds
        drop = v[0] - v[-1]
        numbers[f"{name}_fs_drop"] = 100 * float(1 - fs[-1] / fs[0])
        numbers[f"{name}_mc_drop"] = 100 * float(1 - v[-1].mean() / v[0].mean())
        numbers[f"{name}_lim_spread"] = float(np.ptp(lim))
        numbers[f"{name}_uses_signal"] = claims.less(
            f"{name}_uses_signal", float(-drop.mean()), float(standard_error(drop, axis=0)),
            draws=trials, wording=("falls", "rises", "does not move beyond the noise at this profile"))
        fs_mc = np.array([attention_error(s, [g], n=n)[0] for s in at(f, d_mc)])
        gaps.append(np.abs(fs_mc - v.mean(axis=1)))
        sems.append(mc.sem("attention")[:, 0])
        numbers[f"{name}_fs_above"] = claims.exceeds(
            f"{name}_fs_above", float(fs_mc[-1]), 0.0, float(v[-1].mean()), float(sems[-1][-1]),
            draws=trials, wording=("lies above", "lies below", "is within the noise of"),
            required=False)
    numbers["fs_mc_max"] = float(np.max(gaps))
    numbers["fs_mc_sem"] = float(np.mean(sems))
    style.plot_theory(ax, [], [], color="0.4", linestyle=":", label="proportional limit (theory)")
    style.label_axes(ax, r"coherent shift $\delta = |\mu^\top M \mu| / \sqrt{p}$",
                     r"interpolation error $E(\gamma)$",
                     title=f"aligned $\\|w\\| = {W_FINITE:g}$, $c = {C:g}$ ($n = {n}$), "
                           f"$\\gamma/\\tau$ of ridge's $\\gamma = {GAMMA:g}$", legend=False)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8)
    return Figure(fig, numbers)
