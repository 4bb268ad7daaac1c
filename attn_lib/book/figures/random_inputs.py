r"""Figures of the chapter *Random inputs* (``book/03_random_inputs``).

On random tokens (``mu = 0``) the labels are independent of the features, and the interpolation
error is a spectral integral, ``E(gamma) ~ int gamma^2 / (l + gamma)^2 d rho(l)`` over the
limiting eigenvalue law ``rho`` of ``Phi^T Phi / n``. The chapter compares attention
(``f = tanh`` unless stated) with ridge regression at equal ``gamma / tau``
(:func:`attn_lib.studies.sweeps.feature_scale`, the book's scale convention): the controls that
locate the handicap in the kernel's linear part (:func:`controls`, :func:`random_inputs`), the
spectrum itself (:func:`spectrum`), and the theory of the linear part's spectral hole and of the
nonlinearity's Wigner part for several ``f`` (:func:`hole_theory`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ... import Setting, cache, hermite, simulate, theory
from ..._validation import check_int, check_seed
from ...model import data, kernel
from ...model.nonlinearity import check_nonlinearity
from ...simulation.trials import standard_error
from ...studies import sweeps
from ...theory import marchenko_pastur as mp
from .. import claims, style
from ..page import Figure, markdown_table

__all__ = ["F", "NOISE_F", "NOISE_C", "G_REPORT", "BEHIND_C", "BEHIND_G", "controls", "random_inputs", "spectrum",
           "hole_theory"]

#: The nonlinearity of the chapter.
F = "tanh"
#: Nonlinearities and aspect ratios of the theory table of the Wigner part (:func:`hole_theory`).
NOISE_F = ("tanh", "relu", "sign", "erf")
NOISE_C = (0.5, 2.0, 4.0)
#: The ``g = gamma / tau`` at which the chapter compares the models.
G_REPORT = 0.1
#: Grid of the theory check that attention is behind ridge at every ``gamma / tau``.
BEHIND_C = np.geomspace(0.1, 8.0, 9)
BEHIND_G = np.logspace(-3.0, 2.0, 11)


def _effect(d: np.ndarray) -> str:
    """``"+0.195 ± 0.010 (8 draws)"``: mean ± one standard error of paired differences ``d``."""
    return f"{d.mean():+.3g} ± {float(standard_error(d, axis=0)):.2g} ({d.size} draws)"


def controls(ax: Any, setting: Setting, gammas: np.ndarray, fine: np.ndarray, n: int,
             trials: int, seed: int, *, at: int = 0, suffix: str = "",
             logy: bool = True, legend: bool = True) -> dict[str, Any]:
    r"""Draw the random-input controls at ``gamma / tau`` and return their paired claims.

    Four models at ``setting.c, setting.snr`` (the weights of ``setting``), each at its own
    ``gamma = tau g`` (:func:`attn_lib.studies.sweeps.feature_scale`, ``g`` in ``gammas``):
    ridge regression (``Phi^T Phi / n = c S_x``, ``S_x = X^T X / p``); attention with linear
    ``f`` and the zero diagonal (``K = S_x - I`` on noise: ``c S_x (S_x - I)^2``, a root at
    ``S_x = 1`` inside the Marchenko–Pastur bulk when ``c > 1/4``); linear ``f`` with the
    diagonal kept (``K = S_x``: ``c S_x^3``, no root but a cubed lower edge; simulation only);
    and ``setting.f``. Lines: deterministic equivalents on ``fine``; markers: Monte Carlo,
    mean ± one standard error. All runs share ``seed`` and so the tokens: the claims compare
    paired draws at ``g = gammas[at]`` (``draws = trials``: Student t thresholds).

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
        ``f``'s at ``g``; ``dev{s}``, the largest relative deviation (percent) of the simulated
        mean of ``f`` from its DE; claims on paired draws (Student t at ``trials`` draws), each
        with ``<name>_effect``, the paired difference as ``"mean ± s.e. (draws)"``:
        ``linear_loses{s}`` (linear ``f``, zero diagonal, minus ridge ``> 0``: required),
        ``diagonal_kept_loses{s}`` (linear ``f`` with the diagonal kept minus ridge ``> 0``:
        required), ``diagonal_helps{s}`` (``log(E_kept / E_zero) < 0``) and
        ``nonlinearity_helps{s}`` (``log(E_f / E_linear) < 0``), the last two reported either
        way; the exact (theory) claim ``nonlinearity_minor{s}``: ``|nonlin_gap| <
        lin_ridge_gap / 3``.
    """
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
    values, de, dev = {}, {}, 0.0
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
        if name == "f":
            dev = 100 * float(np.max(np.abs(st.mean / error(s, tau * gammas) - 1)))
    style.label_axes(ax, r"rescaled $\gamma / \tau$", r"interpolation error $E$",
                     title=f"$c = {setting.c:g}$, $\\mu = 0$, in units of $\\tau$",
                     logx=True, logy=logy, legend=legend)

    v = values
    out: dict[str, Any] = {}

    def paired(name: str, d: np.ndarray, less: bool, wording: tuple[str, str, str],
               required: bool) -> None:
        test = claims.less if less else claims.exceeds
        out[name + suffix] = test(name + suffix, float(d.mean()),
                                  float(standard_error(d, axis=0)), wording=wording,
                                  draws=d.size, required=required)
        out[f"{name}_effect{suffix}"] = _effect(d)

    undecided = "is not distinguishable, at this profile's draws, from"
    paired("linear_loses", v["linear"] - v["ridge"], False,
           ("loses to", "beats", undecided), True)
    paired("diagonal_kept_loses", v["linear_diagonal"] - v["ridge"], False,
           ("loses to", "beats", undecided), True)
    paired("diagonal_helps", np.log(v["linear_diagonal"] / v["linear"]), True,
           ("lowers", "raises", "does not measurably change, at this profile's draws,"), False)
    paired("nonlinearity_helps", np.log(v["f"] / v["linear"]), True,
           ("lowers", "raises", "does not measurably change, at this profile's draws,"), False)
    lin_gap, nonlin = de["linear"] - de["ridge"], de["f"] - de["linear"]
    return {
        f"g_at{suffix}": float(gammas[at]), f"lin_ridge_gap{suffix}": lin_gap,
        f"nonlin_gap{suffix}": nonlin, f"dev{suffix}": dev, **out,
        f"nonlinearity_minor{suffix}": claims.exact(
            "nonlinearity_minor" + suffix, abs(nonlin) < lin_gap / 3,
            f"DE at g = {gammas[at]:.2g}: f minus linear f {nonlin:+.3g}, linear f "
            f"minus ridge {lin_gap:+.3g}",
            wording=("less than a third of", "not small against", "(exact)")),
    }


def random_inputs(*, n: int, n_c2: int, trials: int, seed: int) -> Figure:
    r"""The controls of :func:`controls` on random inputs (``mu = 0``) at ``c = 1/2`` and 2.

    Two axes against ``g = gamma / tau``: ``c = 1/2`` with ``n`` tokens, ``c = 2`` with
    ``n_c2``. Simulated on ``logspace(-3, 1, 9)``, compared at ``g = 0.1``; markers: mean ± one
    standard error.

    Parameters
    ----------
    n : int
        Tokens of the ``c = 1/2`` panel.
    n_c2 : int
        Tokens of the ``c = 2`` panel.
    trials : int
        Draws per point.
    seed : int
        Root seed, the same at every point (common random numbers along a sweep).

    Returns
    -------
    Figure
        Numbers: ``mu0_att_half``, ``mu0_ridge_half`` (DE of ``tanh`` attention and of ridge at
        ``g = 0.1``, ``c = 1/2``), ``mu0_att_two``, ``mu0_ridge_two`` (``c = 2``);
        ``tanh_b2`` (``nu - a1^2`` of tanh); the exact claim ``weights_drop_out`` (aligned
        weights of norm 3 change the DE at ``c = 1/2`` by less than ``1e-12``, relative);
        ``trials``; the numbers and claims of
        :func:`controls` with the suffixes ``_half`` (``c = 1/2``) and ``_two`` (``c = 2``).
    """
    g_mc = np.logspace(-3, 1, 9)
    g_th = np.logspace(-3, 1, 61)
    at = int(np.argmin(np.abs(g_mc - G_REPORT)))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    out: dict[str, Any] = {"trials": trials, "tanh_b2": hermite.coefficients(F).b2}
    for ax, c, nn, tag in zip(axes, (0.5, 2.0), (n, n_c2), ("_half", "_two")):
        s = Setting(c=c, f=F)
        out.update(controls(ax, s, g_mc, g_th, nn, trials, seed, at=at, suffix=tag,
                            logy=(c == 2.0), legend=(c == 2.0)))
        out[f"mu0_att{tag}"] = float(theory.attention_error(
            s, sweeps.feature_scale(s) * np.array([G_REPORT]))[0])
        out[f"mu0_ridge{tag}"] = float(theory.ridge_error(
            s, sweeps.feature_scale(s, "ridge") * np.array([G_REPORT]))[0])
    weighted = Setting(c=0.5, f=F, wk_norm=3.0, wq_norm=3.0)
    gamma = sweeps.feature_scale(weighted) * np.array([G_REPORT])
    diff = abs(float(theory.attention_error(weighted, gamma)[0]) / out["mu0_att_half"] - 1)
    out["weights_drop_out"] = claims.exact(
        "weights_drop_out", diff < 1e-12,
        f"relative change of the DE at c = 1/2, g = {G_REPORT:g}: {diff:.1e}",
        wording=("leave unchanged", "change", "(exact)"))
    return Figure(fig, out)


def _draw_spectra(setting: Setting, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues of ``Phi^T Phi / n`` for attention (``Phi = X K``) and ridge (``Phi = X``), one draw."""
    s = data.draw(setting, n, np.random.default_rng(seed))
    assert s.w_K is not None and s.w_Q is not None  # a Setting's draw has its weights
    K = kernel.attention_kernel(s.X, check_nonlinearity(setting.f), s.w_K, s.w_Q,
                                setting.alpha, a0=setting.hermite.a0)
    Phi = s.X @ K
    return np.linalg.eigvalsh(Phi.T @ Phi / n), np.linalg.eigvalsh(s.X.T @ s.X / n)


def spectrum(*, n: int, n_c2: int, seed: int, eta: float = 1e-2) -> Figure:
    r"""The feature spectrum at ``mu = 0`` in units of ``tau``, and the weight that makes it an error.

    Two axes, ``c = 1/2`` (``n`` tokens) and ``c = 2`` (``n_c2``), ``f = tanh``: histograms of
    ``log10(l / tau)`` over the eigenvalues ``l > 0`` of one draw of ``Phi^T Phi / n`` for
    attention and for ridge (the same ``X``), as densities per unit of ``log10``; lines: the
    limiting densities, for ridge the Marchenko–Pastur law of ``c S`` (:mod:`attn_lib.theory.
    marchenko_pastur`), for attention :func:`attn_lib.theory.gram_spectrum` (smoothed at
    ``eta``, the atom ``(1 - c)^+`` at zero taken out of it). Twin axis: the weight
    ``w_g(x) = g^2 / (x + g)^2`` of ``E = int w_g d rho`` at ``g = 0.1`` and ``0.01``. The
    atom at zero (``c < 1``) has weight one in both models.

    Parameters
    ----------
    n, n_c2 : int
        Tokens of the two panels.
    seed : int
        Seed of the draws.
    eta : float, default 1e-2
        Smoothing of the attention density, relative to ``tau``.

    Returns
    -------
    Figure
        Numbers, with ``t`` = ``_half`` or ``_two``: ``spec_draw_att{t}``,
        ``spec_draw_ridge{t}``, the error ``mean_i w_g(l_i / tau)`` of the draw's spectrum
        (zero eigenvalues included) at ``g = 0.1``; ``spec_de_att{t}``, ``spec_de_ridge{t}``,
        the deterministic equivalents there; ``spec_low_att{t}``, ``spec_low_ridge{t}``, the
        fraction of the draw's eigenvalues in ``(0, 0.01 tau)`` (the zeros of ``c < 1`` left
        out); ``spec_n_half``, ``spec_n_two``.
    """
    n, n_c2, seed = check_int(n, "n", low=4), check_int(n_c2, "n_c2", low=4), check_seed(seed)
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.0), sharey=True)
    out: dict[str, Any] = {"spec_n_half": n, "spec_n_two": n_c2}
    u = np.linspace(-3.0, 1.5, 91)             # log10(l / tau)
    x = 10.0 ** u
    for ax, c, nn, tag in zip(axes, (0.5, 2.0), (n, n_c2), ("_half", "_two")):
        s = Setting(c=c, f=F)
        tau_a, tau_r = sweeps.feature_scale(s), sweeps.feature_scale(s, "ridge")
        eig = dict(zip(("att", "ridge"), _draw_spectra(s, nn, seed)))
        atom = max(1.0 - c, 0.0)
        zero = int(round(atom * nn))                   # the rank deficit of c < 1
        dens_r = np.log(10) * x * mp.density(x, c)     # l = tau_r x = c x: x ~ S
        z = tau_a * x
        smooth_atom = atom * (tau_a * eta) / (np.pi * (z ** 2 + (tau_a * eta) ** 2))
        dens_a = np.log(10) * z * (theory.gram_spectrum(s, z, eta=tau_a * eta) - smooth_atom)
        bins = np.linspace(u[0], u[-1], 46)
        for key, tau, dens, label in (("att", tau_a, dens_a, r"attention, $f = \tanh$"),
                                      ("ridge", tau_r, dens_r, "ridge")):
            ev = np.sort(eig[key])[zero:] / tau
            color = style.color("tanh" if key == "att" else "ridge")
            ax.hist(np.log10(np.maximum(ev, 10.0 ** (u[0] - 1))), bins=bins,
                    weights=np.full(ev.size, 1.0 / nn / (bins[1] - bins[0])), alpha=0.4,
                    color=color, label=f"{label}, one draw")
            ax.plot(u, dens, color=color, linewidth=1.6, label=f"{label}, limit")
            w = G_REPORT ** 2 / (np.sort(eig[key]) / tau + G_REPORT) ** 2
            w[:zero] = 1.0
            out[f"spec_draw_{key}{tag}"] = float(w.mean())
            out[f"spec_low_{key}{tag}"] = float(np.mean(ev < 1e-2) * ev.size / nn)
        out[f"spec_de_att{tag}"] = float(theory.attention_error(s, np.array([tau_a * G_REPORT]))[0])
        out[f"spec_de_ridge{tag}"] = float(theory.ridge_error(s, np.array([tau_r * G_REPORT]))[0])
        twin = ax.twinx()
        for g, ls in ((G_REPORT, "--"), (G_REPORT / 10, ":")):
            twin.plot(u, g ** 2 / (x + g) ** 2, color="0.3", linestyle=ls,
                      label=f"weight $g^2/(l/\\tau + g)^2$, $g = {g:g}$")
        twin.set_ylim(0, 1.05)
        twin.grid(False)
        twin.set_ylabel("weight" if c == 2.0 else "")
        style.label_axes(ax, r"$\log_{10}(l / \tau)$, $l$ an eigenvalue of $\Phi^\top\Phi/n$",
                         "density per unit of $\\log_{10}$" if c == 0.5 else "",
                         title=f"$c = {c:g}$, $\\mu = 0$" + (" (atom $1 - c$ at zero)"
                                                            if atom else ""), legend=False)
        if c == 2.0:
            handles: list[list[Any]] = [sum(pair, []) for pair in zip(ax.get_legend_handles_labels(),
                                                      twin.get_legend_handles_labels())]
            fig.legend(*handles, loc="outside lower center", ncol=3, fontsize="small")
    return Figure(fig, out)


def _rate_coefficient(c: float, a1: float) -> float:
    r"""``(E - (1 - c)^+) / gamma^{1/2}`` as ``gamma -> 0`` for linear attention (``b2 = 0``):

    ``pi/2 rho_MP(1) / (|a1| sqrt(c)) = sqrt(4 - 1/c) / (4 |a1|)`` for ``c > 1/4``.
    """
    return float(np.sqrt(4.0 - 1.0 / c) / (4.0 * abs(a1)))


def hole_theory() -> dict[str, Any]:
    r"""Theory of the spectral hole and of the Wigner part, at ``mu = 0`` (deterministic equivalents).

    * The rate: for linear ``f`` (``b2 = 0``, ``a1 = 1``) and ``c > 1/4`` the feature Gram
      ``c S (S - I)^2`` vanishes at ``S = 1`` inside the Marchenko–Pastur support of ``S``,
      its density near zero is ``rho_MP(1) / sqrt(c l)``, and
      ``E - (1 - c)^+ ~ sqrt(4 - 1/c) / 4 * gamma^{1/2}``; compared with the attention DE at
      ``gamma = 1e-7``. The log-log slopes of ``E - (1 - c)^+`` of the tanh DE over ``gamma``
      from ``1e-6`` to ``1e-5`` at ``c = 2`` and ``c = 1/2``.
    * The Wigner part for the ``f`` of :data:`NOISE_F` at the ``c`` of :data:`NOISE_C`, all at
      ``g = gamma / tau =`` :data:`G_REPORT`: ``(E_f - E_linear) / (E_linear - E_ridge)``.
    * Attention (``linear`` and the ``f`` of :data:`NOISE_F`) against ridge on the grid
      :data:`BEHIND_C` x :data:`BEHIND_G` of ``c`` and ``g``, each model at its own
      ``gamma = tau g``.

    Returns
    -------
    dict
        ``noise_table`` (Markdown, one row per ``f``: its ``a1``, ``b2`` and the ratio in
        percent at each ``c``); ``rate_coef_two``, ``rate_de_two`` (predicted and DE
        coefficient at ``c = 2``); ``slope_tanh_two``, ``slope_tanh_half``; ``noise_max_above``,
        the largest ``|ratio|`` for ``c > 1`` (percent); ``noise_range_half`` (minus the ratios
        at ``c = 1/2``, the share of the gap the Wigner part closes, as ``"a % to b %"``); exact claims ``rate_matches`` (relative
        difference below ``1e-3``), ``noise_minor_above_one`` (``|ratio| < 1/3`` at every
        ``c > 1``), ``noise_helps_below_one`` (``E_f < E_linear`` at ``c = 1/2`` for every ``f``)
        and ``attention_behind`` (``E_f > E_ridge`` at every point of the grid with ``c > 1/4``);
        ``small_c_excess``, the largest ``100 (E_f / E_ridge - 1)`` (percent) at the grid's
        ``c <= 1/4`` and ``g = 0.01``.
    """
    def de(setting: Setting, model: str = "attention") -> float:
        gamma = sweeps.feature_scale(setting, model) * np.array([G_REPORT])
        err = theory.ridge_error if model == "ridge" else theory.attention_error
        return float(err(setting, gamma)[0])

    ratio = {}
    for c in NOISE_C:
        ridge, lin = de(Setting(c=c), "ridge"), de(Setting(c=c, f="linear"))
        for f in NOISE_F:
            ratio[f, c] = (de(Setting(c=c, f=f)) - lin) / (lin - ridge)
    excess, small = np.inf, 0.0
    for c in BEHIND_C:
        ridge_curve = theory.ridge_error(Setting(c=c), c * BEHIND_G)
        for f in ("linear", *NOISE_F):
            s = Setting(c=c, f=f)
            r = theory.attention_error(s, sweeps.feature_scale(s) * BEHIND_G) / ridge_curve - 1
            if c > 0.25:
                excess = min(excess, float(r.min()))
            else:
                small = max(small, float(np.interp(-2.0, np.log10(BEHIND_G), r)))
    rows = [{"$f$": f, "$a_1$": hermite.coefficients(f).a1, "$b_2$": hermite.coefficients(f).b2,
             **{f"$c = {c:g}$": f"{100 * ratio[f, c]:+.0f} %" for c in NOISE_C}}
            for f in NOISE_F]
    g = np.array([1e-7])
    rate_de = float(theory.attention_bulk(Setting(c=2.0, f="linear"), g).error[0] / np.sqrt(g[0]))
    rate = _rate_coefficient(2.0, 1.0)

    def slope(c: float) -> float:
        e = theory.attention_bulk(Setting(c=c, f=F), np.array([1e-6, 1e-5])).error - max(1 - c, 0)
        return float(np.log10(e[1] / e[0]))

    above = [abs(ratio[f, c]) for f in NOISE_F for c in NOISE_C if c > 1]
    half = [100 * ratio[f, 0.5] for f in NOISE_F]
    return {
        "noise_table": markdown_table(rows, formats={"$a_1$": ".3f", "$b_2$": ".3f"}),
        "rate_coef_two": rate, "rate_de_two": rate_de,
        "slope_tanh_two": slope(2.0), "slope_tanh_half": slope(0.5),
        "noise_max_above": 100 * max(above),
        "noise_range_half": f"{-max(half):.0f} % to {-min(half):.0f} %",
        "rate_matches": claims.exact(
            "rate_matches", abs(rate_de / rate - 1) < 1e-3,
            f"sqrt(4 - 1/c)/4 = {rate:.5f}, DE at gamma = 1e-7: {rate_de:.5f}",
            wording=("matches", "does not match", "(exact)")),
        "noise_minor_above_one": claims.exact(
            "noise_minor_above_one", max(above) < 1 / 3,
            f"largest |E_f - E_linear| / (E_linear - E_ridge) at c > 1: {max(above):.3f}",
            wording=("changes the error by less than a third of",
                     "changes the error by more than a third of", "(exact)")),
        "noise_helps_below_one": claims.exact(
            "noise_helps_below_one", all(ratio[f, 0.5] < 0 for f in NOISE_F),
            "ratios at c = 1/2: " + ", ".join(f"{f} {ratio[f, 0.5]:+.3f}" for f in NOISE_F),
            wording=("lowers", "does not lower", "(exact)")),
        "small_c_excess": 100 * small,
        "attention_behind": claims.exact(
            "attention_behind", excess > 0,
            f"smallest E_att / E_ridge - 1 over c in (1/4, {BEHIND_C[-1]:g}], "
            f"g in [{BEHIND_G[0]:g}, {BEHIND_G[-1]:g}], f in linear, {', '.join(NOISE_F)}: "
            f"{excess:.2g}", wording=("is behind", "is not behind", "(exact)")),
    }
