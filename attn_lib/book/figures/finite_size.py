r"""Figures and numbers of the chapter *Finite-size convergence* (``book/08_finite_size``).

Five settings at ``c = 1/2`` (:data:`SETTINGS`) are simulated at a ladder of sizes ``n`` through
:func:`attn_lib.studies.convergence.run` (cached :func:`~attn_lib.studies.sweeps.simulations`,
attention and ridge on the same draws) at ``gamma`` in ``{0.01, 0.1, 1, gamma}``. For every
series the bias ``b_n = mean E_n - E_DE`` and the fluctuation ``s_n = std E_n`` are fitted by
power laws (:class:`~attn_lib.studies.convergence.Series`). Ridge depends on ``(c, snr)`` only,
so it is shown once per SNR: the first setting of each SNR stands for it.

Every public function takes the chapter's parameters ``n_ladder``, ``trials``, ``gamma`` and
``seed`` (keyword-only); the study behind them is computed once per parameter set.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .. import style
from ..claims import Claim, Z, equivalent, less, rule, threshold
from ..page import Figure, markdown_table
from ...model.setting import Setting
from ...model import nonlinearity
from ...simulation.trials import standard_error
from ...studies import convergence, sweeps
from ...theory import attention_error, conditional_error

__all__ = ["C", "SETTINGS", "TARGET", "SMALL_N", "SMALL_N_GAMMAS", "overview", "bias_fluctuation",
           "slope_tables", "bias_shift", "slowest", "small_n"]

#: Aspect ratio ``p / n`` of every setting.
C = 0.5
#: The chapter's settings by display name (``f = tanh`` unless stated; aligned ``w_K = w_Q``).
SETTINGS: dict[str, Setting] = {
    "random": Setting(c=C),
    "SNR 1": Setting(c=C, snr=1.0),
    "aligned, |w| = 1": Setting(c=C, snr=4.0, wk_norm=1.0, wq_norm=1.0),
    "aligned, |w| = 2": Setting(c=C, snr=4.0, wk_norm=2.0, wq_norm=2.0),
    "cos (a1 = 0)": Setting(c=C, snr=4.0, f=nonlinearity.mixture(np.pi / 2), wk_norm=1.0, wq_norm=1.0),
}
#: Bias at which the slowest setting's extrapolations are read off (:func:`slowest`).
TARGET = 0.01
#: The small-n setting (:func:`small_n`): the quadratic at ``c = 1/2`` with partly aligned weights,
#: ``delta = 0.30`` at ``n = 512``, where the finite-size theory misses most on the grid of
#: ``benchmarks/small_n.py``.
SMALL_N = Setting(c=C, snr=2.4, f="quadratic", wk_norm=5 / 3, wq_norm=5 / 3, cos_mu_wk=0.6,
                  cos_mu_wq=0.6, cos_wk_wq=1.0)
#: The ridge parameters of :func:`small_n`.
SMALL_N_GAMMAS = (1e-4, 1.0)

_NAMES = list(SETTINGS)
_KEYS = dict(zip(_NAMES, ("random", "snr1", "al1", "al2", "cos")))  # suffixes of glued names
# one colour per model: the tanh settings in shades of attention's colour (light: no signal,
# full: aligned |w| = 2), the a1 = 0 mixture in the colour of cos
_COLORS = dict(zip(_NAMES, (*style.shades("attention", 4), style.color("cos"))))
_MARKERS = dict(zip(_NAMES, "osD^p"))
_FLAT = ("random", "SNR 1")  # no or a small coherent shift
_AL1, _AL2, _COS = "aligned, |w| = 1", "aligned, |w| = 2", "cos (a1 = 0)"


@dataclass(frozen=True)
class _Chapter:
    study: convergence.Study
    gammas: list[float]
    k: int  # index of the reported gamma in ``gammas``
    att: dict[str, convergence.Series]  # setting name -> attention series at gammas[k]
    ridge: dict[str, convergence.Series]  # "ridge, SNR s" -> ridge series at gammas[k]
    delta: dict[str, np.ndarray]  # setting name -> delta(n)

    @property
    def n(self) -> np.ndarray:
        return self.study.n


@functools.lru_cache(maxsize=2)
def _chapter(n_ladder: tuple[int, ...], trials: tuple[int, ...] | int, gamma: float,
             seed: int) -> _Chapter:
    gammas = sorted({0.01, 0.1, 1.0, float(gamma)})
    k = gammas.index(float(gamma))
    study = convergence.run(list(SETTINGS.values()), list(n_ladder),
                            list(trials) if isinstance(trials, tuple) else trials, gammas, seed=seed)
    ridge = {f"ridge, SNR {s.snr:g}": _NAMES.index(name) for name, s in reversed(SETTINGS.items())}
    ridge = dict(sorted(ridge.items(), key=lambda kv: kv[1]))
    return _Chapter(study=study, gammas=gammas, k=k,
                    att={name: study.series("attention", b, k) for b, name in enumerate(_NAMES)},
                    ridge={name: study.series("ridge", b, k) for name, b in ridge.items()},
                    delta={name: study.delta(b) for b, name in enumerate(_NAMES)})


def _load(n_ladder: Sequence[int], trials: Sequence[int] | int, gamma: float,
          seed: int) -> _Chapter:
    t = tuple(int(v) for v in trials) if isinstance(trials, (list, tuple, np.ndarray)) else trials
    return _chapter(tuple(int(v) for v in n_ladder), t, float(gamma), seed)


def _ridge_style(ch: _Chapter) -> tuple[dict[str, str], dict[str, str]]:
    names = list(ch.ridge)
    return dict(zip(names, style.shades("ridge", len(names)))), dict(zip(names, "osD"))


def _delta_fits(ch: _Chapter) -> dict[str, convergence.PowerLawFit | None]:
    """Bias law ``|b| ~ A delta^k`` of every setting with a shift (resolved points only)."""
    return {name: ch.att[name].bias_fit(ch.delta[name]) for name in _NAMES
            if ch.delta[name][0] > 0}


def _jitter(n: np.ndarray, i: int, m: int) -> np.ndarray:
    """Small multiplicative offset along ``n`` for series ``i`` of ``m``."""
    return n * 1.04 ** (i - (m - 1) / 2)


def _bias_points(ax: Any, x: np.ndarray, s: convergence.Series, name: str, color: str | None,
                 marker: str) -> None:
    """Resolved biases as filled markers (± one se), unresolved ones as upper limits (v)."""
    r = s.resolved
    if r.any():
        style.plot_sim(ax, x[r], np.abs(s.bias[r]), s.bias_se[r], color=color, fmt=marker,
                       markerfacecolor=color, label=name)
    if (~r).any():
        style.plot_sim(ax, x[~r], s.bias_bound[~r], color=color, fmt="v",
                       label=None if r.any() else f"{name} (upper limits only)")


def _fit_line(ax: Any, x: np.ndarray, fit: convergence.PowerLawFit | None, color: str | None) -> None:
    if fit is not None:
        ax.plot(x, fit(x), color=color, linestyle="--", linewidth=1.0)


def _pm(fit: convergence.PowerLawFit | None) -> str:
    return "—" if fit is None else f"{fit.slope:+.2f} ± {fit.slope_se:.2f}"


def _chi(fit: convergence.PowerLawFit | None) -> str:
    return "—" if fit is None or fit.dof == 0 else f"{fit.chi2 / fit.dof:.1f}"


def _nan_if_none(fit: convergence.PowerLawFit | None, attr: str) -> float:
    return float("nan") if fit is None else getattr(fit, attr)


def _misfit_text(fit: convergence.PowerLawFit) -> str:
    """``"chi²/dof = 81.6"``, or that a line through two points has no misfit measure."""
    if fit.dof > 0:
        return f"χ²/dof = {fit.chi2 / fit.dof:.1f}"
    return "no χ²: a line through two points"


def _exponent_text(fit: convergence.PowerLawFit | None) -> str:
    """``"1.17 ± 0.14"``, or that no exponent was fitted."""
    if fit is None:
        return "not fitted (fewer than two resolved points)"
    return f"{fit.slope:.2f} ± {fit.slope_se:.2f}"


def _fitted(fit: convergence.PowerLawFit | None, what: str) -> convergence.PowerLawFit:
    """``fit``, which the figure needs: ``ValueError`` naming ``what`` when there is none."""
    if fit is None:
        raise ValueError(f"{what}: no power law (fewer than two resolved points of one sign); "
                         "a longer n_ladder or more trials")
    return fit


def overview(*, n_ladder: Sequence[int], trials: Sequence[int] | int, gamma: float,
             seed: int = 0) -> dict[str, Any]:
    r"""Numbers of the introduction: the settings' shift coefficients and the ladder.

    Returns
    -------
    dict
        ``dcoef_<key>`` (``delta sqrt(p)``, ``n``-free, for ``key`` in random, snr1, al1, al2,
        cos), ``ladder`` (Markdown: sizes, draws per size and the gammas), ``gamma``,
        ``n_min`` and ``n_max``.
    """
    ch = _load(n_ladder, trials, gamma, seed)
    from IPython.display import Markdown

    out: dict[str, Any] = {f"dcoef_{_KEYS[name]}": s.delta(1) * np.sqrt(s.p(1))
                           for name, s in SETTINGS.items()}
    out["ladder"] = Markdown(", ".join(f"n = {n} ({t} draws)" for n, t in zip(ch.n, ch.study.trials))
                             + f", γ ∈ {{{', '.join(f'{g:g}' for g in ch.gammas)}}}")
    out.update(gamma=float(gamma), n_min=int(ch.n[0]), n_max=int(ch.n[-1]))
    return out


def bias_fluctuation(*, n_ladder: Sequence[int], trials: Sequence[int] | int, gamma: float,
                     seed: int = 0) -> Figure:
    r"""Bias ``|b_n|`` (top) and fluctuation ``s_n`` (bottom) against ``n``, attention and ridge.

    Four panels (attention left, ridge right) at the reported ``gamma``: resolved biases as
    filled markers ± one standard error, unresolved ones as open triangles at the upper limit
    ``|b_n| + 2 se``, fluctuations ± their standard error, fitted power laws dashed.

    Returns
    -------
    Figure
        Numbers: ``fl_min``, ``fl_max``, ``fl_mean`` (range and inverse-variance weighted mean of
        the fluctuation slopes), ``fl_count`` (number of series), ``fl_half`` (slopes within two
        standard errors of -1/2); ``ridge_resolved``/``ridge_points`` (resolved and all ridge
        points), ``ridge_bound_max`` (largest ridge bias bound at the largest ``n``),
        ``ridge_fl_min`` (smallest ridge fluctuation there); ``att_neg``, ``att_pos``,
        ``att_count`` (attention settings with all-negative, all-positive resolved biases, and
        all); ``flat_resolved``/``flat_points`` and ``al_resolved``/``al_points`` (resolved and
        all attention points without or with a small shift, and with signal and weights).
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    ch = _load(n_ladder, trials, gamma, seed)
    n = ch.n
    ridge_colors, ridge_markers = _ridge_style(ch)
    fig, axes = plt.subplots(2, 2, figsize=(10.5, 8), sharex=True)
    panels: tuple[tuple[dict[str, convergence.Series], dict[str, str | None], dict[str, str]], ...] = (
        (ch.att, _COLORS, _MARKERS), (ch.ridge, dict(ridge_colors), ridge_markers))
    for col, (series, colors, markers) in enumerate(panels):
        for i, (name, s) in enumerate(series.items()):
            x, c = _jitter(n, i, len(series)), colors[name]
            _bias_points(axes[0, col], x, s, name, c, markers[name])
            _fit_line(axes[0, col], n, s.bias_fit(), c)
            style.plot_sim(axes[1, col], x, s.fluctuation, s.fluctuation_se, color=c,
                           fmt=markers[name], markerfacecolor=c, label=name)
            _fit_line(axes[1, col], n, s.fluctuation_fit(), c)
    for ax, title in zip(axes[0], ("attention", "ridge")):
        style.label_axes(ax, "", r"$|b_n| = |\bar E_n - E_{\mathrm{DE}}|$", logx=True, logy=True,
                         title=f"{title}: bias, $\\gamma = {gamma:g}$", legend=False)
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes[1]:
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    proxies = {"unresolved: upper limit $|b_n| + 2\\,\\mathrm{se}$":
               Line2D([], [], marker="v", linestyle="none", color="0.4", markerfacecolor="white"),
               "fitted power law": Line2D([], [], color="0.4", linestyle="--", linewidth=1.0)}
    fig.legend(handles + list(proxies.values()), labels + list(proxies), loc="outside lower center",
               ncol=4, fontsize=8)
    for ax, title in zip(axes[1], ("attention", "ridge")):
        style.label_axes(ax, r"tokens $n$ ($p = n/2$)", r"fluctuation $s_n = \mathrm{std}\,E_n$",
                         logx=True, logy=True, title=f"{title}: fluctuation", legend=False)
    _ladder_ticks(axes.ravel(), n)
    for ax in axes.ravel():  # a narrow range (the ridge bias) would carry no label
        style.log_ticks(ax.yaxis)
    return Figure(fig, _bias_fluctuation_numbers(ch))


def _ladder_ticks(axes: Any, n: np.ndarray) -> None:
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    for ax in axes:
        ax.xaxis.set_major_locator(FixedLocator(n.tolist()))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.xaxis.set_minor_formatter(NullFormatter())


def _bias_fluctuation_numbers(ch: _Chapter) -> dict[str, Any]:
    att, ridge = ch.att, ch.ridge
    fl = {**{f"attention, {k}": _fitted(s.fluctuation_fit(), k) for k, s in att.items()},
          **{k: _fitted(s.fluctuation_fit(), k) for k, s in ridge.items()}}
    slopes = np.array([f.slope for f in fl.values()])
    ses = np.array([f.slope_se for f in fl.values()])
    out: dict[str, Any] = {
        "fl_min": slopes.min(), "fl_max": slopes.max(), "fl_count": len(fl),
        "fl_half": int(np.sum(np.abs(slopes + 0.5) <= 2 * ses)),
        "fl_mean": float(np.average(slopes, weights=ses ** -2)),
        "ridge_resolved": int(sum(s.resolved.sum() for s in ridge.values())),
        "ridge_points": int(sum(s.n.size for s in ridge.values())),
        "ridge_bound_max": float(max(s.bias_bound[-1] for s in ridge.values())),
        "ridge_fl_min": float(min(s.fluctuation[-1] for s in ridge.values())),
        "att_neg": len([k for k, s in att.items() if s.sign < 0]),
        "att_pos": sum(s.sign > 0 for s in att.values()),
        "att_count": len(att),
    }
    for key, names in (("flat", _FLAT), ("al", [k for k in _NAMES if k not in _FLAT])):
        out[f"{key}_resolved"] = int(sum(att[k].resolved.sum() for k in names))
        out[f"{key}_points"] = int(sum(att[k].n.size for k in names))
    return out


def slope_tables(*, n_ladder: Sequence[int], trials: Sequence[int] | int, gamma: float,
                 seed: int = 0) -> dict[str, Any]:
    r"""The two tables of fitted slopes (Markdown).

    Returns
    -------
    dict
        ``slopes_table``: per model and setting at the reported ``gamma``, the shift ``delta`` at
        the smallest and the largest ``n`` (0 for ridge), the bias at the largest ``n`` ± its
        standard error, the resolved sizes, the bias slope ``beta`` ± se with its ``chi^2/dof``
        and the fluctuation slope ``sigma`` ± se ("—" where there is no fit).
        ``gamma_slopes_table``: per setting and ``gamma`` of the study (same draws), the
        attention bias slope ``beta`` ± se and, in brackets, the resolved sizes out of all.
    """
    ch = _load(n_ladder, trials, gamma, seed)
    rows = []
    for model, series in (("attention", ch.att), ("ridge", ch.ridge)):
        for name, s in series.items():
            d = ch.delta[name] if model == "attention" else np.zeros(ch.n.size)
            rows.append({
                "model": model, "setting": name,
                "δ, n min": d[0], "δ, n max": d[-1],
                "bias, n max": f"{s.bias[-1]:+.4f} ± {s.bias_se[-1]:.4f}",
                "resolved": f"{s.resolved.sum()}/{s.n.size}",
                "bias slope β": _pm(s.bias_fit()), "χ²/dof (β)": _chi(s.bias_fit()),
                "fluctuation slope σ": _pm(s.fluctuation_fit()),
            })
    by_gamma = []
    for b, name in enumerate(_NAMES):
        row = {"setting": name}
        for k, g in enumerate(ch.gammas):
            s = ch.study.series("attention", b, k)
            row[f"γ = {g:g}"] = f"{_pm(s.bias_fit())} ({s.resolved.sum()}/{s.n.size})"
        by_gamma.append(row)
    return {"slopes_table": markdown_table(rows, {"δ, n min": ".3f", "δ, n max": ".3f"}),
            "gamma_slopes_table": markdown_table(by_gamma)}


def bias_shift(*, n_ladder: Sequence[int], trials: Sequence[int] | int, gamma: float,
               seed: int = 0) -> Figure:
    r"""Attention bias against the coherent shift ``delta(n)``, for the settings with signal.

    Left: ``|b_n|`` against ``delta`` (resolved points filled ± one se, upper limits open) with
    the fitted law ``|b| ~ A delta^k`` dashed. Right: ``b_n / delta`` ± ``se / delta`` at the
    resolved points.

    Returns
    -------
    Figure
        Numbers: ``cos_verdict`` (Markdown: how the cosine's exponent ``k`` compares with that of
        tanh with ``|w| = 1``); ``bd_min``, ``bd_max``, ``bd_points`` (range and number of the
        resolved ``b / delta``); ``dk_<key>``, ``dk_<key>_se`` (exponent ``k`` ± se, NaN without
        a fit, for ``key`` in al1, al2, cos), ``dk_cos_text`` (the cosine's ``k`` ± se as text,
        or that it was not fitted); ``cmp_delta``, ``cmp_al2``, ``cmp_al2_se`` (shift
        and ``|b|`` ± se of ``|w| = 2`` at the largest ``n``), ``cmp_al1_law`` (the ``|w| = 1``
        law at that shift), ``cmp_ratio`` (their ratio), ``cmp_al1_range_lo``/``_hi`` (the
        resolved shifts of ``|w| = 1``), ``cmp_ratio_se`` (its standard error, from the
        ``|w| = 2`` point and from the law's value at that shift, fitted centred there) and the
        claim ``cmp_geometry`` (:func:`_ratio_claim`: the ratio differs from 1, the value a bias
        set by ``delta`` alone gives).
    """
    import matplotlib.pyplot as plt
    from IPython.display import Markdown

    ch = _load(n_ladder, trials, gamma, seed)
    dfit = _delta_fits(ch)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2))
    per_shift = {}
    for name, fit in dfit.items():
        s, d, c = ch.att[name], ch.delta[name], _COLORS[name]
        _bias_points(axes[0], d, s, name, c, _MARKERS[name])
        _fit_line(axes[0], d, fit, c)
    for name in dfit:
        s, d, c, r = ch.att[name], ch.delta[name], _COLORS[name], ch.att[name].resolved
        if r.any():
            per_shift[name] = s.bias[r] / d[r]
            style.plot_sim(axes[1], d[r], per_shift[name], s.bias_se[r] / d[r], color=c,
                           fmt=_MARKERS[name], markerfacecolor=c, label=name)
    style.label_axes(axes[0], r"coherent shift $\delta$", r"$|b_n|$", logx=True, logy=True,
                     title=f"attention, $\\gamma = {gamma:g}$", legend=False)
    axes[1].axhline(0.0, color="0.3", linewidth=1)
    style.label_axes(axes[1], r"coherent shift $\delta$", r"$b_n / \delta$", logx=True,
                     title=r"bias per unit of shift (resolved points)", legend=False)
    for ax in axes:
        ax.legend(fontsize=8)
        style.log_ticks(ax.xaxis)
    style.log_ticks(axes[0].yaxis)

    f_cos, f_al1 = dfit[_COS], dfit[_AL1]
    if f_cos is None or f_al1 is None:
        verdict = "one of the two exponents is missing (fewer than two resolved points)"
    else:
        z = (f_cos.slope - f_al1.slope) / np.hypot(f_cos.slope_se, f_al1.slope_se)
        verdict = ("the two exponents differ by less than two standard errors" if abs(z) < 2 else
                   f"the cosine's exponent is {'smaller' if z < 0 else 'larger'} by "
                   f"{abs(z):.1f} standard errors: its bias decays "
                   f"{'more slowly' if z < 0 else 'faster'} with the shift")
    ratios = np.concatenate(list(per_shift.values()))
    out: dict[str, Any] = {"cos_verdict": Markdown(verdict), "bd_min": float(ratios.min()),
                           "bd_max": float(ratios.max()), "bd_points": int(ratios.size)}
    for name in (_AL1, _AL2, _COS):
        out[f"dk_{_KEYS[name]}"] = _nan_if_none(dfit[name], "slope")
        out[f"dk_{_KEYS[name]}_se"] = _nan_if_none(dfit[name], "slope_se")
    out["dk_cos_text"] = _exponent_text(dfit[_COS])
    # same delta, different SNR-weight geometry: the |w| = 2 bias at its smallest shift against
    # the |w| = 1 law evaluated (if need be, extrapolated) at that shift
    d_cmp, al1, al2 = float(ch.delta[_AL2][-1]), ch.att[_AL1], ch.att[_AL2]
    centred = _fitted(al1.bias_fit(ch.delta[_AL1] / d_cmp), _AL1)  # log_amplitude: the law's log at d_cmp
    law = _fitted(dfit[_AL1], _AL1)
    ratio = float(abs(al2.bias[-1]) / law(d_cmp))
    log_se = float(np.hypot(al2.bias_se[-1] / abs(al2.bias[-1]), centred.log_amplitude_se))
    out.update(cmp_delta=d_cmp, cmp_al2=float(abs(al2.bias[-1])), cmp_al2_se=float(al2.bias_se[-1]),
               cmp_al1_law=float(law(d_cmp)), cmp_ratio=ratio,
               cmp_ratio_se=ratio * log_se,
               cmp_geometry=_ratio_claim(ratio, log_se, int(ch.study.trials[-1])),
               cmp_al1_range_lo=float(ch.delta[_AL1][al1.resolved].min()),
               cmp_al1_range_hi=float(ch.delta[_AL1][al1.resolved].max()))
    return Figure(fig, out)


def slowest(*, n_ladder: Sequence[int], trials: Sequence[int] | int, gamma: float,
            seed: int = 0) -> dict[str, Any]:
    r"""Which attention setting converges slowest, and two extrapolations of its bias.

    "Slowest" is the largest ``|b|`` at the largest ``n``; "shallowest" the largest fitted bias
    slope ``beta``. The size at which the slowest bias falls to :data:`TARGET` is extrapolated
    (a) by its own law in ``n`` and (b) by the ``delta``-law of the ``|w| = 1`` setting applied to
    its ``delta(n) = delta_1 / sqrt(c n)``.

    Returns
    -------
    dict
        ``slowest``, ``shallowest`` (Markdown names); ``slow_bias``, ``slow_bias_se``,
        ``slow_delta``, ``slow_ratio`` (``|b|`` over the fluctuation), ``slow_theory`` (its DE),
        ``slow_rel`` (``|b|`` in % of the DE), ``slow_delta_others`` (largest shift of the
        others), all at the largest ``n``; ``shallow_slope``, ``shallow_slope_se``,
        ``shallow_chi`` (text: ``chi^2/dof``, or that two points have none), ``shallow_points``; ``target``;
        ``slow_slope``, ``slow_slope_se``, ``slow_n_needed`` (extrapolation a);
        ``slow_delta_star``, ``slow_n_delta`` (extrapolation b); ``al1_beta`` (``-k/2`` of the
        ``|w| = 1`` delta-law), ``slow_k`` (the slowest setting's own ``k``); ``cos_beta``,
        ``al1_beta_n`` and their ``_se`` (bias slopes in ``n``, NaN without a fit);
        ``slow_dcoef``, ``others_dcoef`` (``delta sqrt(p)``); ``slow_slope_first``,
        ``slow_slope_last`` and their ``_se`` (two-point slopes at the ends of the ladder);
        ``slow_law_misfit``: the claim of :func:`_misfit_claim` on the slowest setting's own law;
        ``al1_law_chi``: the same text for the ``delta``-law of extrapolation (b).
    """
    from IPython.display import Markdown

    ch = _load(n_ladder, trials, gamma, seed)
    att, delta, dfit = ch.att, ch.delta, _delta_fits(ch)
    b_last = {k: abs(s.bias[-1]) for k, s in att.items()}
    slow = max(b_last, key=lambda k: b_last[k])
    s_slow = att[slow]
    fits = {k: s.bias_fit() for k, s in att.items()}
    fitted = {k: f for k, f in fits.items() if f is not None}
    shallow = max(fitted, key=lambda k: fitted[k].slope)
    f_sh, f_slow = fitted[shallow], _fitted(fits[slow], slow)
    d_al1 = _fitted(dfit[_AL1], _AL1)
    d_star = d_al1.inverse(TARGET)
    d_coef = SETTINGS[slow].delta(1) * np.sqrt(SETTINGS[slow].p(1))
    out: dict[str, Any] = {
        "slowest": Markdown(f"*{slow}*"),
        "slow_bias": float(s_slow.bias[-1]), "slow_bias_se": float(s_slow.bias_se[-1]),
        "slow_delta": float(delta[slow][-1]),
        "slow_ratio": float(abs(s_slow.bias[-1]) / s_slow.fluctuation[-1]),
        "slow_theory": float(s_slow.theory),
        "slow_rel": 100 * float(abs(s_slow.bias[-1]) / s_slow.theory),
        "slow_delta_others": float(max(delta[k][-1] for k in att if k != slow)),
        "shallowest": Markdown(f"*{shallow}*"),
        "shallow_slope": f_sh.slope, "shallow_slope_se": f_sh.slope_se,
        "shallow_chi": _misfit_text(f_sh),
        "shallow_points": f_sh.points, "target": TARGET,
        "slow_slope": f_slow.slope, "slow_slope_se": f_slow.slope_se,
        "slow_n_needed": f_slow.inverse(TARGET),
        "slow_delta_star": d_star, "slow_n_delta": (d_coef / d_star) ** 2 / C,
        "al1_beta": -d_al1.slope / 2, "slow_k": _fitted(dfit[slow], slow).slope,
    }
    for key, name in (("cos_beta", _COS), ("al1_beta_n", _AL1)):
        out[key] = _nan_if_none(fits[name], "slope")
        out[f"{key}_se"] = _nan_if_none(fits[name], "slope_se")
    out["slow_dcoef"] = d_coef
    out["others_dcoef"] = max(SETTINGS[k].delta(1) * np.sqrt(SETTINGS[k].p(1)) for k in _NAMES
                              if k != slow)
    for tag, idx in (("first", [0, 1]), ("last", [-2, -1])):
        two = convergence.fit_power_law(ch.n[idx], np.abs(s_slow.bias[idx]), s_slow.bias_se[idx])
        out[f"slow_slope_{tag}"], out[f"slow_slope_{tag}_se"] = two.slope, two.slope_se
    out["slow_law_misfit"] = _misfit_claim(f_slow)
    out["al1_law_chi"] = _misfit_text(d_al1)
    return out


def _ratio_claim(ratio: float, log_se: float, draws: int) -> Claim:
    r"""The finding that two settings at one shift have different biases (``ratio != 1``).

    Tested on ``log(ratio)`` with standard error ``log_se`` at the Student t threshold of
    ``draws`` (the draws of the ``|w| = 2`` point, the fewer of the two; :func:`~attn_lib.book.claims.threshold`):
    ``holds`` is ``True`` when ``|log ratio| > k log_se`` and ``None`` otherwise (the draws
    cannot tell the ratio from 1). Not required: either verdict is a result.
    """
    k, d = threshold(Z, draws), float(np.log(ratio))
    holds = True if abs(d) > k * log_se else None
    return Claim("cmp_geometry", holds,
                 f"log ratio {d:+.3f} ± {log_se:.3f} (t = {d / log_se:+.1f}, {draws - 1} d.o.f.; "
                 f"{rule(k, holds is not None)})",
                 ("differs from 1: at the same shift the bias also depends on the geometry of "
                  "signal and weights, not on the shift alone",
                  "(not used: a ratio is never decided equal to 1)",
                  "cannot be told from 1 at these draws: the comparison neither confirms nor "
                  "rules out a bias set by the shift alone"), required=False)


def _misfit_claim(fit: convergence.PowerLawFit) -> Claim:
    r"""The finding that one power law in ``n`` does *not* describe a bias series.

    A :math:`\chi^2` goodness-of-fit test of the weighted fit: the law is rejected when the
    upper tail :math:`P(\chi^2_{\mathrm{dof}} \ge \chi^2)` is below the two-sided tail of
    :data:`~attn_lib.book.claims.Z` standard errors (0.0027 for 3). ``holds`` is ``True`` when
    rejected, ``False`` when not, ``None`` for a line through two points (``dof = 0``). Not
    required: either verdict is a result, and the prose quotes the wording of each.
    """
    from scipy import stats

    level = float(2 * stats.norm.sf(Z))
    red = fit.chi2 / fit.dof if fit.dof > 0 else float("nan")
    tail = float(stats.chi2.sf(fit.chi2, fit.dof)) if fit.dof > 0 else float("nan")
    wording = (f"is rejected by its own points (χ²/dof = {red:.1f}, dof = {fit.dof}, "
               f"P = {tail:.2g}): no single power law in n describes this bias, and "
               f"extrapolation (a) is a formal one",
               f"is not rejected by its points (χ²/dof = {red:.1f}, dof = {fit.dof}, "
               f"P = {tail:.2g}, above the {level:.2g} of {Z:g} standard errors); with "
               f"so few degrees of freedom the test has little power, so the law is not shown "
               f"to hold either",
               "cannot be tested: a line through two resolved points fits any two numbers")
    if fit.dof == 0:
        return Claim("slow_law_misfit", None, "two resolved points: no degree of freedom",
                     wording, required=False)
    return Claim("slow_law_misfit", tail < level,
                 f"chi^2/dof = {red:.1f} over {fit.points} points (dof {fit.dof}), "
                 f"P(chi^2 >= observed) = {tail:.2g} against {level:.2g} ({Z:g} s.e.)", wording,
                 required=False)


@functools.lru_cache(maxsize=2)
def _small_n(n: int, trials: int, draws: int, seed: int) -> tuple[np.ndarray, ...]:
    """Monte Carlo (per draw), finite-size theory, conditional mean and its s.e. of :data:`SMALL_N`."""
    g = np.array(SMALL_N_GAMMAS)
    mc = sweeps.simulations([SMALL_N], g, n, trials, seed).values("attention")[0]
    cond = conditional_error(SMALL_N, g, n, draws=draws, seed=seed)
    return mc, attention_error(SMALL_N, g, n=n), cond.mean, cond.sem


def small_n(*, n: int, trials: int, draws: int, seed: int = 0) -> dict[str, Any]:
    r"""Numbers of the small-n section: the conditional equivalent against Monte Carlo.

    :data:`SMALL_N` at ``n`` tokens and ``gamma`` in :data:`SMALL_N_GAMMAS`: ``trials`` draws of
    the simulator (cached :func:`~attn_lib.studies.sweeps.simulations`), the finite-size theory
    (``attention_error(..., n=n)``) and the conditional equivalent over ``draws`` draws of the
    latent block (:func:`~attn_lib.theory.conditional_error`, seed ``seed``).

    Returns
    -------
    dict
        ``smalln_n``, ``smalln_p``, ``smalln_delta``, ``smalln_trials``, ``smalln_draws``;
        ``smalln_table`` (Markdown: per ``gamma`` the Monte Carlo mean ± s.e., both theories
        minus it and the conditional's shift); at the smallest ``gamma``: ``smalln_fs_gap``,
        ``smalln_cond_gap``, ``smalln_mc_se``, ``smalln_shift`` and ``smalln_shift_se`` (conditional
        minus finite-size); the claims ``smalln_lower`` (the conditional equivalent lies below the
        finite-size theory, Student t at ``draws``; required) and ``smalln_within`` (it is within
        :data:`TARGET` of the Monte Carlo, an equivalence test at ``trials`` draws; not required:
        "not decided" is a result at a small profile).
    """
    mc, fs, cm, cse = _small_n(int(n), int(trials), int(draws), int(seed))
    m, se = mc.mean(axis=0), standard_error(mc, axis=0)
    table = markdown_table([{"γ": f"{g:g}", "Monte Carlo": f"{m[j]:.4f} ± {se[j]:.4f}",
                             "finite-size − MC": f"{fs[j] - m[j]:+.4f}",
                             "conditional − MC": f"{cm[j] - m[j]:+.4f} ± {cse[j]:.4f}",
                             "conditional − finite-size": f"{cm[j] - fs[j]:+.4f} ± {cse[j]:.4f}"}
                            for j, g in enumerate(SMALL_N_GAMMAS)])
    out: dict[str, Any] = {
        "smalln_n": int(n), "smalln_p": SMALL_N.p(n), "smalln_delta": float(SMALL_N.delta(n)),
        "smalln_trials": int(trials), "smalln_draws": int(draws), "smalln_table": table,
        "smalln_fs_gap": float(fs[0] - m[0]), "smalln_cond_gap": float(cm[0] - m[0]),
        "smalln_mc_se": float(se[0]), "smalln_shift": float(cm[0] - fs[0]),
        "smalln_shift_se": float(cse[0]),
    }
    out["smalln_lower"] = less("smalln_lower", float(cm[0]), float(cse[0]), float(fs[0]),
                               wording=("lies below", "lies above",
                                        "cannot be told apart at these draws from"),
                               draws=int(draws))
    out["smalln_within"] = equivalent(
        "smalln_within", float(cm[0]), float(cse[0]), float(m[0]), float(se[0]), margin=TARGET,
        wording=(f"is within {TARGET:g} of", f"is more than {TARGET:g} away from",
                 f"is not decided at this profile to be within {TARGET:g} of"),
        draws=int(min(trials, draws)), required=False)
    return out
