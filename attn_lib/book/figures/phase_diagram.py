"""Figures and numbers of the chapter *Phase diagram* (``book/09_phase_diagram.ipynb``).

Two planes of settings built by :func:`attn_lib.studies.phase.symmetric_weights`
(``w_K = w_Q = w`` at angle ``theta`` to ``mu``), mapped with the deterministic equivalents of
:func:`attn_lib.studies.phase.phase_map` (``Delta = E_att - E_ridge`` at :data:`GAMMA`, ``f =
tanh``) and spot-checked by Monte Carlo with :func:`attn_lib.studies.phase.spot_checks` (cached).
Every comparison is at the book's scale convention: ridge at ``gamma``, attention at the same
``gamma / tau`` (:func:`attn_lib.studies.sweeps.matched_gamma`); the raw comparison (attention at
the same ``gamma``) is computed beside it, to say which conclusions the convention changes:

1. SNR (0 to 8) against the angle (0 to 90 degrees) at ``c = 1/2``, ``||w|| = 2``
   (:func:`snr_angle`);
2. ``c`` (0.1 to 4, logarithmic) against ``||w||`` (0 to 4) at SNR 2, aligned (:func:`aspect_norm`).

:func:`win_fraction` follows the share of each plane where attention wins as ``gamma`` varies,
for ``tanh``, ReLU and sign; :func:`delta_check` summarises the spot checks against the coherent
shift ``delta(n)``. Number names are the glue names of the chapter's prose (a ``_raw`` suffix:
the same number at the raw ``gamma``). Spot checks are reported as mean paired gap ± one
standard error over the draws.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FormatStrFormatter

from ... import Setting, hermite
from ...studies import phase, sweeps
from .. import style
from ..claims import Z, Claim, exact, threshold
from ..page import Figure

__all__ = ["F", "GAMMA", "C1", "NORM1", "SNR2", "DELTA_MAX", "FUNCS", "POINTS1", "POINTS2",
           "snr_angle", "aspect_norm", "win_fraction", "delta_check"]

#: Nonlinearity and ridge parameter of the two maps.
F, GAMMA = "tanh", 1.0
#: Plane 1 (SNR x angle) at ``c = 1/2`` and ``||w|| = 2``.
C1, NORM1 = 0.5, 2.0
#: Plane 2 (``c`` x ``||w||``) at SNR 2 with aligned weights.
SNR2 = 2.0
#: Coherent shift beyond which the deterministic equivalent is not trusted
#: (``book/07_strong_alignment``).
DELTA_MAX = 0.3
#: Nonlinearities of the win-fraction summary.
FUNCS = ("tanh", "relu", "sign")
#: Spot-checked cells ``(SNR, angle in degrees)`` of plane 1 and ``(c, ||w||)`` of plane 2.
POINTS1 = ((0.0, 0.0), (0.5, 60.0), (1.0, 0.0), (2.5, 0.0), (2.5, 45.0), (6.0, 0.0), (6.0, 80.0))
POINTS2 = ((0.1, 0.0), (0.2, 2.0), (0.5, 0.5), (0.5, 3.0), (1.0, 1.0), (2.0, 0.0), (3.0, 3.0))

_LABEL = r"$\Delta = E_{\mathrm{att}} - E_{\mathrm{ridge}}$"


def _plane1(f: str = F) -> Callable[[float, float], Setting]:
    """``(SNR, angle in degrees) -> Setting`` of plane 1."""
    return lambda snr, deg: phase.symmetric_weights(C1, snr, NORM1, float(np.radians(deg)), f)


def _plane2(f: str = F) -> Callable[[float, float], Setting]:
    """``(c, ||w||) -> Setting`` of plane 2 (aligned weights)."""
    return lambda c, w: phase.symmetric_weights(c, SNR2, w, 0.0, f)


def _axes1(grid: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """SNR in ``[0, 8]`` (``grid[0]`` values) and angle in ``[0, 90]`` degrees (``grid[1]``)."""
    return np.linspace(0.0, 8.0, grid[0]), np.linspace(0.0, 90.0, grid[1])


def _axes2(grid: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``c`` in ``[0.1, 4]`` (geometric, ``grid[0]`` values) and ``||w||`` in ``[0, 4]`` (``grid[1]``)."""
    return np.geomspace(0.1, 4.0, grid[0]), np.linspace(0.0, 4.0, grid[1])


def _first(a: np.ndarray) -> float:
    """First crossing, NaN when the sign never changes."""
    return float(a[0]) if a.size else float("nan")


def _last(a: np.ndarray) -> float:
    """Last crossing, NaN when the sign never changes."""
    return float(a[-1]) if a.size else float("nan")


def _draw_map(ax: Any, m: phase.PhaseMap, raw: phase.PhaseMap, spots: phase.SpotChecks, n: int,
              xlabel: str, ylabel: str, logx: bool = False) -> None:
    """The DE gap (:func:`attn_lib.book.style.gap_map`), hatching where ``delta(n) > DELTA_MAX``,
    the zero contour of the raw-``gamma`` map ``raw`` (dashed) and the numbered spot checks
    coloured by their simulated gap on the map's scale."""
    # one symmetric linear scale per map: the colour of a cell is proportional to |Delta|, so a
    # shallow pocket is painted pale (the black zero contour shows where it is)
    v = float(max(np.abs(m.gap).max(), np.abs(spots.gap_mean).max()))
    mesh = style.gap_map(ax, m.x, m.y, m.gap, vmin=-v, vmax=v, shading="nearest",
                         rasterized=True)
    norm = mesh.norm
    if raw.gap.min() < 0 < raw.gap.max():
        ax.contour(raw.x, raw.y, raw.gap, levels=[0.0], colors="0.15", linewidths=1.3,
                   linestyles=":")
    d = m.delta(n)
    if d.max() > DELTA_MAX:
        ax.contourf(m.x, m.y, d, levels=[DELTA_MAX, np.inf], colors="none", hatches=["//"])
        ax.contour(m.x, m.y, d, levels=[DELTA_MAX], colors="0.3", linewidths=1.0,
                   linestyles="--")
    for k in range(len(spots.x)):
        big = spots.delta[k] > DELTA_MAX
        ax.scatter(spots.x[k], spots.y[k], c=[spots.gap_mean[k]], cmap="RdBu_r", norm=norm,
                   marker="s" if big else "o", s=90, edgecolors="k", linewidths=1.2, zorder=4,
                   clip_on=False)
        ax.annotate(str(k + 1), (spots.x[k], spots.y[k]), xytext=(6, 5),
                    textcoords="offset points", fontsize=9, fontweight="bold", zorder=5,
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none",
                              alpha=0.85), annotation_clip=False)
    cbar = ax.get_figure().colorbar(mesh, ax=ax, label=_LABEL)
    cbar.set_ticks(np.linspace(-v, v, 5))
    cbar.ax.yaxis.set_major_formatter(FormatStrFormatter("%+.3g"))
    style.label_axes(ax, xlabel, ylabel, logx=logx, legend=False)
    if logx:  # label the decades' steps: a log axis from 0.1 to 4 has only one major tick
        lo, hi = ax.get_xlim()
        style.plain_ticks(ax.xaxis, [t for t in (0.1, 0.2, 0.5, 1, 2, 4) if lo <= t <= hi])
    ax.get_figure().legend(
        handles=[Line2D([], [], color="k", lw=1.5, label=r"$\Delta = 0$ (theory)"),
                 Line2D([], [], color="0.15", lw=1.3, ls=":",
                        label=r"$\Delta = 0$ at the raw $\gamma$"),
                 Patch(facecolor="none", edgecolor="0.3", hatch="//",
                       label=fr"$\delta(n) > {DELTA_MAX:g}$ at $n = {n}$"),
                 Line2D([], [], marker="o", ls="", mfc="w", mec="k",
                        label=fr"simulated, $\delta \leq {DELTA_MAX:g}$"),
                 Line2D([], [], marker="s", ls="", mfc="w", mec="k",
                        label=fr"simulated, $\delta > {DELTA_MAX:g}$")],
        fontsize=8, loc="outside lower center", ncol=3)


def _spot_table(spots: phase.SpotChecks, xname: str, yname: str, xfmt: str,
                yfmt: str) -> Markdown:
    """Markdown table of the spot checks: cell, ``p``, ``delta(n)``, DE and simulated gap, sign."""
    rows = [f"| # | {xname} | {yname} | $p$ | $\\delta(n)$ | $\\Delta$, DE | "
            "$\\Delta$, simulation (± s.e.) | same sign |",
            "|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    agree, resolved = spots.sign_agrees(), spots.resolved()
    for k in range(len(spots.x)):
        mark = "yes" if agree[k] else "**no**"
        mark += "" if resolved[k] else " (within 2 s.e. of 0)"
        rows.append(f"| {k + 1} | {spots.x[k]:{xfmt}} | {spots.y[k]:{yfmt}} | {spots.p[k]} "
                    f"| {spots.delta[k]:.2f} | {spots.gap_theory[k]:+.4f} "
                    f"| {spots.gap_mean[k]:+.4f} ± {spots.gap_sem[k]:.4f} "
                    f"| {mark} |")
    return Markdown("\n".join(rows))


def _maps(plane: int, grid: Sequence[int]) -> tuple[phase.PhaseMap, phase.PhaseMap]:
    """Plane 1 or 2 at :data:`GAMMA`: the matched map and the raw one."""
    make, axes = (_plane1(), _axes1(grid)) if plane == 1 else (_plane2(), _axes2(grid))
    return (phase.phase_map(make, *axes, GAMMA, scale="matched"),
            phase.phase_map(make, *axes, GAMMA, scale="raw"))


def _spots(plane: int, n: int, trials: int, seed: int) -> phase.SpotChecks:
    """Spot checks of plane 1 or 2 (:data:`POINTS1`, :data:`POINTS2`) at ``n`` tokens."""
    make, points = (_plane1(), POINTS1) if plane == 1 else (_plane2(), POINTS2)
    return phase.spot_checks(make, points, GAMMA, n=n, trials=trials, seed=seed)


def _gamma_over_tau(gamma: float, c: float) -> float:
    """Ridge's ``gamma / tau`` at aspect ratio ``c`` (``tau_ridge = c``); NaN for a NaN ``c``."""
    if not np.isfinite(c):
        return float("nan")
    return float(gamma / sweeps.feature_scale(Setting(c=float(c)), "ridge"))


def _cell(m: phase.PhaseMap, k: int) -> tuple[float, float]:
    """``(x, y)`` of the flat cell index ``k`` of ``m``."""
    i, j = np.unravel_index(k, m.gap.shape)
    return float(m.x[j]), float(m.y[i])


def snr_angle(*, grid: Sequence[int], n: int, trials: int, seed: int) -> Figure:
    """Plane 1: the DE gap over SNR and the angle between ``w`` and ``mu``, with spot checks.

    Heat map of ``Delta`` at the matched ``gamma`` on a ``grid[0] x grid[1]`` grid (zero contour
    in black; dotted: the zero contour at the raw ``gamma``), hatched where ``delta(n) >
    DELTA_MAX``, and the simulated mean paired gap of :data:`POINTS1` (``trials`` draws of ``n``
    tokens, at the matched ``gamma``) as numbered markers on the same colour scale.

    Returns
    -------
    Figure
        One map axis (and its colour bar). Numbers: ``gamma``, ``n``, ``trials``, ``delta_max``
        (the chapter's constants); ``g_att1`` (attention's matched ``gamma`` at ``c = 1/2``);
        ``gt1`` (ridge's ``gamma / tau`` there);
        ``cells1``, ``seconds1`` (cells and compute time of the map); ``win1``, ``win1_raw`` (%
        of cells with ``Delta < 0``); ``least1``, ``least1_snr``, ``least1_deg`` (smallest gap
        and its cell); ``best1_raw``, ``best1_snr_raw``, ``best1_deg_raw`` (largest lead of
        attention at the raw ``gamma`` and its cell); ``snr_win_lo_raw``, ``snr_win_hi_raw``
        (SNR range of the raw win along ``theta = 0``); ``random_gap_min``,
        ``random_gap_min_raw`` (smallest gap at SNR 0), ``orth_gap_min`` (at 90 degrees),
        ``worst1`` (largest gap), ``gap_snr_max`` (aligned gap at the largest SNR ``snr_max``);
        the claims ``pocket1`` (the raw pocket closes at the matched ``gamma``) and
        ``behind_edges1`` (attention behind on the SNR-0 and 90-degree edges); ``table1``
        (Markdown table of the spot checks).
    """
    m1, r1 = _maps(1, grid)
    assert m1.gamma_attention is not None  # a matched map
    s1 = _spots(1, n, trials, seed)
    fig, ax = plt.subplots(figsize=(7.6, 5.2))
    _draw_map(ax, m1, r1, s1, n, r"$\mathrm{SNR} = \|\mu\|^2$",
              r"angle $\varphi$ between $w$ and $\mu$ (degrees)")
    g_att = float(m1.gamma_attention[0, 0])
    ax.set_title(fr"$c = {C1:g}$, $\|w\| = {NORM1:g}$, $f = \tanh$: ridge at $\gamma = {GAMMA:g}$, "
                 fr"attention at $\gamma = {g_att:.2f}$" "\n"
                 fr"(same $\gamma/\tau$; {m1.x.size} $\times$ {m1.y.size} grid)")
    least_snr, least_deg = _cell(m1, int(np.argmin(m1.gap)))
    best_snr, best_deg = _cell(r1, int(np.argmin(r1.gap)))
    aligned = r1.crossings(0)                                   # along theta = 0, raw gamma
    win, win_raw = 100 * m1.win_fraction(), 100 * r1.win_fraction()
    random_min, orth_min = float(m1.gap[:, 0].min()), float(m1.gap[-1].min())
    return Figure(fig, {
        "gamma": GAMMA, "n": n, "trials": trials, "delta_max": DELTA_MAX, "g_att1": g_att,
        "gt1": _gamma_over_tau(GAMMA, C1),
        "cells1": m1.x.size * m1.y.size, "seconds1": m1.seconds,
        "win1": win, "win1_raw": win_raw,
        "least1": float(m1.gap.min()), "least1_snr": least_snr, "least1_deg": least_deg,
        "best1_raw": float(-r1.gap.min()), "best1_snr_raw": best_snr, "best1_deg_raw": best_deg,
        "snr_win_lo_raw": _first(aligned), "snr_win_hi_raw": _last(aligned),
        "random_gap_min": random_min,                           # SNR = 0: every angle
        "random_gap_min_raw": float(r1.gap[:, 0].min()),
        "orth_gap_min": orth_min,                               # theta = 90 degrees: every SNR
        "worst1": float(m1.gap.max()), "gap_snr_max": float(m1.gap[0, -1]),
        "snr_max": float(m1.x[-1]),
        "pocket1": exact(
            "pocket1", win == 0 and win_raw > 0,
            f"cells with Delta < 0: {win:.1f}% at the matched gamma, {win_raw:.1f}% at the raw "
            f"gamma = {GAMMA:g}",
            wording=(f"closes: at the same γ/τ attention is behind ridge in every "
                     f"cell of the plane, by at least {m1.gap.min():.4f}",
                     f"does not simply close: at the same γ/τ attention is ahead on "
                     f"{win:.1f}% of the plane (raw γ: {win_raw:.1f}%)",
                     "cannot be told apart")),
        "behind_edges1": exact(
            "behind_edges1", random_min > 0 and orth_min > 0,
            f"smallest gap at SNR 0: {random_min:.4g}; at 90 degrees: {orth_min:.4g}",
            wording=("attention is behind", "attention is not behind everywhere",
                     "cannot be told apart")),
        "table1": _spot_table(s1, "SNR", "$\\varphi$ (°)", ".1f", ".0f"),
    })


def aspect_norm(*, grid: Sequence[int], n: int, trials: int, seed: int) -> Figure:
    """Plane 2: the DE gap over ``c = p/n`` and the weight norm ``||w||``, with spot checks.

    As :func:`snr_angle` for :data:`POINTS2`; ``c`` on a logarithmic axis. Attention's matched
    ``gamma`` now varies with ``c`` (``tau_att / tau_ridge = (a1^2 (1 + 1/c) + b2) / c``).

    Returns
    -------
    Figure
        One map axis (and its colour bar). Numbers: ``cells2``, ``seconds2``, ``win2``,
        ``win2_raw`` (as for plane 1); ``g_att2_lo``, ``g_att2_hi`` (attention's matched
        ``gamma`` at the smallest and the largest ``c``); ``c_star_w0``, ``c_star_wmax`` (``c``
        of the zero contour at ``||w|| = 0`` and at the largest norm ``w_max``) and their
        ``_raw`` values; ``worst2``, ``c_worst2`` (largest gap and its ``c``),
        ``worst2_raw``; ``c_star_random_raw`` (zero crossing in ``c`` on random inputs, SNR 0
        and no weights, at the raw ``gamma``) and ``random_gap_min2`` (smallest gap there at the
        matched ``gamma``); ``gt2_lo``, ``gt2_hi`` (ridge's ``gamma / tau`` at the largest and
        the smallest ``c``); ``gt_star_w0``, ``gt_star_wmax``: ridge's ``gamma / tau = gamma / c``
        at the two zero crossings (``tau_ridge = c``, :func:`~attn_lib.studies.sweeps.feature_scale`);
        the claim ``random_corner`` (the raw small-``c`` win on random inputs is gone at the
        matched ``gamma``); ``table2`` (Markdown table of the spot checks).
    """
    m2, r2 = _maps(2, grid)
    assert m2.gamma_attention is not None  # a matched map
    s2 = _spots(2, n, trials, seed)
    fig, ax = plt.subplots(figsize=(7.6, 5.2))
    _draw_map(ax, m2, r2, s2, n, r"$c = p / n$", r"weight norm $\|w\|$", logx=True)
    ax.set_title(fr"SNR $= {SNR2:g}$, aligned, $f = \tanh$: ridge at $\gamma = {GAMMA:g}$, "
                 fr"attention at the same $\gamma/\tau$" "\n"
                 fr"($\gamma = {m2.gamma_attention[0, 0]:.1f}$ to "
                 fr"${m2.gamma_attention[0, -1]:.2f}$; {m2.x.size} $\times$ {m2.y.size} grid)")
    # the same boundary without weights, on random inputs (SNR 0), under both conventions

    def random(c: float, snr: float) -> Setting:
        return phase.symmetric_weights(c, snr, 0.0, 0.0)
    m0, r0 = (phase.phase_map(random, _axes2(grid)[0], [0.0, SNR2], GAMMA, scale=sc)
              for sc in ("matched", "raw"))
    random_min = float(m0.gap[0].min())
    c_random_raw = _first(r0.crossings(0))
    return Figure(fig, {
        "cells2": m2.x.size * m2.y.size, "seconds2": m2.seconds,
        "win2": 100 * m2.win_fraction(), "win2_raw": 100 * r2.win_fraction(),
        "g_att2_lo": float(m2.gamma_attention[0, 0]), "g_att2_hi": float(m2.gamma_attention[0, -1]),
        "c_star_w0": _first(m2.crossings(0)),                   # |w| = 0: no weights at all
        "c_star_wmax": _first(m2.crossings(-1)),                # largest norm
        "c_star_w0_raw": _first(r2.crossings(0)), "c_star_wmax_raw": _first(r2.crossings(-1)),
        "gt2_lo": _gamma_over_tau(GAMMA, float(m2.x[-1])),
        "gt2_hi": _gamma_over_tau(GAMMA, float(m2.x[0])),
        "gt_star_w0": _gamma_over_tau(GAMMA, _first(m2.crossings(0))),
        "gt_star_wmax": _gamma_over_tau(GAMMA, _first(m2.crossings(-1))),
        "w_max": float(m2.y[-1]),
        "worst2": float(m2.gap.max()), "worst2_raw": float(r2.gap.max()),
        "c_worst2": _cell(m2, int(np.argmax(m2.gap)))[0],
        "c_star_random_raw": c_random_raw, "random_gap_min2": random_min,
        "random_corner": exact(
            "random_corner", random_min > 0 and bool(np.isfinite(c_random_raw)),
            f"SNR 0, no weights, c in [{m0.x[0]:.2g}, {m0.x[-1]:.2g}]: smallest gap "
            f"{random_min:.4g} at the matched gamma; zero crossing at c = {c_random_raw:.3g} at "
            f"the raw gamma",
            wording=("is a scale effect: at the same γ/τ attention is behind ridge "
                     f"on random inputs at every c of the plane, by at least {random_min:.3f}",
                     "is not only a scale effect: at the same γ/τ attention is "
                     "still ahead somewhere on random inputs",
                     "cannot be told apart")),
        "table2": _spot_table(s2, "$c$", "$\\|w\\|$", ".2f", ".1f"),
    })


def win_fraction(*, summary_grid: Sequence[int], n_gamma: int) -> Figure:
    """Share of each plane where attention wins against ``gamma``, for :data:`FUNCS`.

    Coarse maps of ``summary_grid[0] x summary_grid[1]`` cells at ridge's ``gammas =
    logspace(-3, 1, n_gamma)``, attention at the same ``gamma / tau`` (solid) and at the raw
    ``gamma`` (dashed); plane 1 (left, with its SNR = 0 edge for ``tanh``, dotted) and plane 2
    (right).

    Returns
    -------
    Figure
        Two axes. Numbers (percentages of cells; a ``_raw`` suffix: at the raw ``gamma``):
        ``summary_cells``; ``g_small``, ``frac1_small``, ``frac1_small_raw`` (largest plane-1
        share over ``gamma <= 0.1`` and the functions); ``g_min``, ``g_max`` (the gamma range);
        ``frac2_small_tanh``, ``frac2_gmax``, ``frac2_gmax_raw`` (plane 2, ``tanh``, at ``g_min``
        and ``g_max``); ``frac1_gmax``, ``frac1_gmax_raw``, ``frac1_g1``, ``frac1_g1_raw``
        (plane 1, ``tanh``, at ``g_max`` and ``gamma = 1``); ``random_gmax``, ``random_gmax_raw``
        (SNR = 0 edge at ``g_max``); ``frac1_g1_sign_raw``, ``frac1_g1_relu_raw`` (plane 1 at
        ``gamma = 1``); ``spread1_g1``, ``spread1_g1_raw``, ``spread2_g1``, ``spread2_g1_raw``
        (range of the shares over the functions at ``gamma = 1``); ``nu_sign``, ``nu_tanh``
        (``nu = E f(xi)^2 - a0^2``); ``gt_small1``, ``gt_one1``, ``gt_max1``: ridge's
        ``gamma / tau`` on plane 1 (``c = 1/2``) at ``g_small``, ``g_one`` and ``g_max``; the
        claims ``random_edge`` (the SNR-0 win at ``g_max`` is a
        scale effect), ``funcs_scale`` (the functions' differences at ``gamma = 1`` shrink under
        the convention) and ``ridgeless_agree`` (both conventions agree for ``gamma <= 0.1`` on
        plane 1).
    """
    gammas = np.logspace(-3, 1, n_gamma)
    snr_s, deg_s = np.linspace(0.0, 8.0, summary_grid[0]), np.linspace(0.0, 90.0, summary_grid[1])
    c_s, w_s = np.geomspace(0.1, 4.0, summary_grid[0]), np.linspace(0.0, 4.0, summary_grid[1])
    frac1, frac2, frac_random = {}, {}, {}
    for f in FUNCS:
        for sc in phase.SCALES:
            maps1 = [phase.phase_map(_plane1(f), snr_s, deg_s, g, scale=sc) for g in gammas]
            maps2 = [phase.phase_map(_plane2(f), c_s, w_s, g, scale=sc) for g in gammas]
            frac1[f, sc] = np.array([100 * m.win_fraction() for m in maps1])
            frac2[f, sc] = np.array([100 * m.win_fraction() for m in maps2])
            frac_random[f, sc] = np.array([100 * np.mean(m.gap[:, 0] < 0) for m in maps1])

    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3), sharey=True)
    for f in FUNCS:
        h = hermite.coefficients(f)
        label = f"{f}, $a_1^2/\\nu = {h.a1 ** 2 / h.nu:.2f}$"
        for ax, frac in ((axes[0], frac1), (axes[1], frac2)):
            style.plot_theory(ax, gammas, frac[f, "matched"], label=label, color=style.color(f),
                              marker="o")
            style.plot_theory(ax, gammas, frac[f, "raw"], color=style.color(f), linestyle="--",
                              marker=".", alpha=0.8)
    for sc, ls, col in (("matched", ":", "k"), ("raw", "-.", "0.5")):
        style.plot_theory(axes[0], gammas, frac_random["tanh", sc], color=col, linestyle=ls)
    style.label_axes(axes[0], r"ridge's $\gamma$ (attention at the same $\gamma/\tau$)",
                     r"cells where attention wins (%)",
                     title=fr"plane 1: SNR $\times$ angle, $c = {C1:g}$, $\|w\| = {NORM1:g}$",
                     logx=True, legend=False)
    style.label_axes(axes[1], r"ridge's $\gamma$ (attention at the same $\gamma/\tau$)", "",
                     title=fr"plane 2: $c \times \|w\|$, SNR $= {SNR2:g}$, aligned", logx=True,
                     legend=False)
    handles = [*axes[0].get_legend_handles_labels()[0],
               Line2D([], [], color="0.3", linestyle="-", label=r"same $\gamma/\tau$"),
               Line2D([], [], color="0.3", linestyle="--", label=r"raw $\gamma$"),
               Line2D([], [], color="k", linestyle=":", label=r"tanh, SNR $= 0$ edge, same $\gamma/\tau$"),
               Line2D([], [], color="0.5", linestyle="-.", label=r"tanh, SNR $= 0$ edge, raw $\gamma$")]
    fig.legend(handles=handles, fontsize=8, loc="outside lower center", ncol=4)

    small = gammas <= 0.1 + 1e-12
    i1 = int(np.argmin(np.abs(gammas - 1.0)))

    def spread(frac: dict[tuple[str, str], np.ndarray], sc: str) -> float:
        return float(np.ptp([frac[f, sc][i1] for f in FUNCS]))

    out: dict[str, Any] = {
        "summary_cells": summary_grid[0] * summary_grid[1],
        "g_small": float(gammas[small].max()), "g_min": float(gammas[0]),
        "g_max": float(gammas[-1]), "g_one": float(gammas[i1]),
        "frac2_small_tanh": float(frac2["tanh", "matched"][0]),
        "frac1_g1_sign_raw": float(frac1["sign", "raw"][i1]),
        "frac1_g1_relu_raw": float(frac1["relu", "raw"][i1]),
        "nu_sign": hermite.coefficients("sign").nu, "nu_tanh": hermite.coefficients("tanh").nu,
        "gt_small1": _gamma_over_tau(float(gammas[small].max()), C1),
        "gt_one1": _gamma_over_tau(float(gammas[i1]), C1),
        "gt_max1": _gamma_over_tau(float(gammas[-1]), C1),
    }
    for sc, suffix in (("matched", ""), ("raw", "_raw")):
        out.update({
            f"frac1_small{suffix}": float(max(frac1[f, sc][small].max() for f in FUNCS)),
            f"frac1_gmax{suffix}": float(frac1["tanh", sc][-1]),
            f"frac2_gmax{suffix}": float(frac2["tanh", sc][-1]),
            f"frac1_g1{suffix}": float(frac1["tanh", sc][i1]),
            f"random_gmax{suffix}": float(frac_random["tanh", sc][-1]),
            f"spread1_g1{suffix}": spread(frac1, sc), f"spread2_g1{suffix}": spread(frac2, sc)})
    out["random_edge"] = exact(
        "random_edge", out["random_gmax"] == 0 < out["random_gmax_raw"],
        f"tanh, SNR 0 edge at gamma = {gammas[-1]:g}: {out['random_gmax']:.0f}% of the cells at "
        f"the same gamma/tau, {out['random_gmax_raw']:.0f}% at the raw gamma",
        wording=("at the same γ/τ attention wins on none of it: the raw win was the "
                 "scale of the features, not their quality",
                 f"at the same γ/τ attention still wins on "
                 f"{out['random_gmax']:.0f}% of it", "cannot be told apart"))
    out["funcs_scale"] = exact(
        "funcs_scale", out["spread1_g1"] < out["spread1_g1_raw"],
        f"range of the plane-1 shares over {', '.join(FUNCS)} at gamma = {gammas[i1]:g}: "
        f"{out['spread1_g1']:.1f} points at the same gamma/tau, {out['spread1_g1_raw']:.1f} at "
        f"the raw gamma",
        wording=("shrink", "do not shrink", "cannot be told apart"))
    out["ridgeless_agree"] = exact(
        "ridgeless_agree", out["frac1_small"] == out["frac1_small_raw"],
        f"largest plane-1 share for gamma <= {out['g_small']:g}: {out['frac1_small']:.1f}% "
        f"(same gamma/tau) and {out['frac1_small_raw']:.1f}% (raw)",
        wording=("agree", "differ", "cannot be told apart"))
    return Figure(fig, out)


def delta_check(*, grid: Sequence[int], n: int, trials: int, seed: int) -> dict[str, Any]:
    """The spot checks of both planes against the coherent shift ``delta(n)``.

    Recomputes the maps of :func:`snr_angle` and :func:`aspect_norm` (deterministic) and reads
    their spot checks from the cache.

    Returns
    -------
    dict
        Counts over the spots of both planes: ``n_spots``, ``n_resolved`` (simulated sign resolved
        at two standard errors), ``n_agree`` (simulated sign equals the DE's); at ``delta <=
        DELTA_MAX``: ``n_small``, ``n_agree_small``, ``n_flip_small``, ``dev_small_max`` (largest
        ``|simulated - DE|``); beyond: ``n_large``, ``n_agree_large``, ``n_below_large``
        (simulated gap below the DE's), ``dev_large_min`` (most negative difference);
        ``n_red_to_blue`` (DE positive, simulation negative). Shares (%) of hatched cells:
        ``map1_large_delta``, ``map2_large_delta``, ``pocket_large_delta`` (of the win pocket
        of plane 1 at the raw ``gamma``); ``n_needed``: tokens (to the hundred) for the deepest
        point of that pocket to reach ``delta = DELTA_MAX`` at ``c = 1/2``; ``finite_better``:
        the claim of :func:`_finite_better` (``draws = trials``).
    """
    m1, r1 = _maps(1, grid)
    m2, _ = _maps(2, grid)
    spots = (_spots(1, n, trials, seed), _spots(2, n, trials, seed))
    agree = np.concatenate([s.sign_agrees() for s in spots])
    delta = np.concatenate([s.delta for s in spots])
    dev = np.concatenate([s.gap_mean - s.gap_theory for s in spots])
    gap_de = np.concatenate([s.gap_theory for s in spots])
    gap_mc = np.concatenate([s.gap_mean for s in spots])
    sem = np.concatenate([s.gap_sem for s in spots])
    small = delta <= DELTA_MAX
    pocket = r1.gap < 0
    deepest = r1.settings[int(np.argmin(r1.gap))]
    p_needed = ((deepest.snr + deepest.mu_wk * deepest.mu_wq) / DELTA_MAX) ** 2  # delta = shift / sqrt(p)
    return {
        "n_spots": agree.size, "n_resolved": int(sum(s.resolved().sum() for s in spots)),
        "n_agree": int(agree.sum()), "n_small": int(small.sum()),
        "n_agree_small": int(agree[small].sum()), "n_flip_small": int((~agree[small]).sum()),
        "n_large": int((~small).sum()), "n_agree_large": int(agree[~small].sum()),
        "n_below_large": int(np.sum(dev[~small] < 0)),
        "n_red_to_blue": int(np.sum((gap_de > 0) & (gap_mc < 0))),
        "dev_small_max": float(np.max(np.abs(dev[small]))) if small.any() else float("nan"),
        "dev_large_min": float(np.min(dev[~small])) if (~small).any() else float("nan"),
        "pocket_large_delta": (100 * float(np.mean(r1.delta(n)[pocket] > DELTA_MAX))
                               if pocket.any() else float("nan")),
        "map1_large_delta": 100 * float(np.mean(m1.delta(n) > DELTA_MAX)),
        "map2_large_delta": 100 * float(np.mean(m2.delta(n) > DELTA_MAX)),
        "n_needed": 100 * round(p_needed / C1 / 100),
        "finite_better": _finite_better(dev[~small], sem[~small], trials),
    }


def _finite_better(dev: np.ndarray, sem: np.ndarray, draws: int | None = None) -> Claim:
    """The finding that at large ``delta`` simulated attention does better than the DE says.

    ``dev`` is the simulated minus the DE's gap at the spots beyond :data:`DELTA_MAX`, ``sem``
    its standard error over ``draws`` paired draws (the DE has none). A spot is resolved when
    ``|dev| > k sem``, ``k = threshold(Z, draws)`` (the Student t quantile of
    :func:`attn_lib.book.claims.threshold`). ``holds`` is ``True`` when some spot is resolved
    below and none above, ``False`` when some spot is resolved above, ``None`` when none is
    resolved.
    """
    k = threshold(Z, draws)
    below = int(np.sum(dev < -k * sem))
    above = int(np.sum(dev > k * sem))
    holds = None if below + above == 0 else above == 0
    rule = f"{k:.3g} s.e." + ("" if draws is None else f", t with {int(draws) - 1} d.o.f.")
    return Claim("finite_better", holds,
                 f"of {dev.size} spots with delta > {DELTA_MAX:g}, simulated minus DE gap below "
                 f"-{rule} at {below}, above at {above}",
                 (f"attention does better than the limit theory predicts: the simulated gap is "
                  f"below the DE's beyond the noise at {below} of these spots and above it at none",
                  f"attention is not uniformly better than the limit theory predicts: at {above} "
                  f"of these spots the simulated gap is above the DE's beyond the noise",
                  "the simulated gaps cannot be told from the DE's: not decided at this "
                  "profile's draws"))
