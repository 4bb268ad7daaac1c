r"""Figures of the chapter *Softmax attention* (``book/11_softmax``).

Masked softmax attention (:class:`~attn_lib.model.setting.Softmax`: columns of ``A`` sum to one,
self-pairs masked) against the entry-wise kernel of ``f_beta(t) = e^{beta t - beta^2/2} - 1``
and against ridge regression, each model at its own ``gamma = tau g`` (``tau`` its feature
scale, :func:`attn_lib.studies.sweeps.feature_scale`; ``g`` shared). The studies are in
:mod:`attn_lib.studies.softmax`; lines are the proportional-limit theory
(:mod:`attn_lib.theory.softmax`), markers Monte Carlo (mean ± one standard error over draws).
Random inputs are ``mu = 0`` at ``c = 1`` (:data:`RANDOM`); the structured section has ``c =
1/2`` and weights of norm 2, orthogonal to or aligned with ``mu`` (:data:`GEOMETRIES`). Every
claim built from Monte Carlo draws is decided at the Student t quantile of its number of draws
(``draws=trials``, :func:`attn_lib.book.claims.threshold`); its wording for the undecided case
says that this profile does not decide it.
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ... import Setting, Softmax, simulate
from ... import cache
from ..._validation import check_int
from ...model.nonlinearity import exponential
from ...simulation.trials import standard_error
from ...studies import softmax as study
from ...studies import sweeps
from ...theory import attention_error, ridge_error, softmax as sm_theory
from ...theory.kernel_spectrum import kernel_density
from .. import claims, style
from ..page import Figure

__all__ = ["RANDOM", "BETAS", "G_REPORT", "GEOMETRIES", "MARGIN", "convention", "random_inputs",
           "structured", "breakdown", "tail_regime", "mask", "spectrum"]

#: Random inputs (``mu = 0``, no weights: ``M = I``): the aspect ratio.
RANDOM: dict[str, float] = dict(c=1.0)
#: The inverse temperatures of the comparison.
BETAS = (0.5, 1.0, 1.5)
#: The ``g = gamma / tau`` quoted in the prose.
G_REPORT = 0.1
#: The accuracy asked of a theory of softmax in its regular regime: the largest ``|theory - MC|``
#: over the informative points (the grid of :doc:`derivation_softmax` meets it at ``beta <= 1``).
MARGIN = 0.02
#: Where the theory is informative: simulated errors in this range (not saturated).
INFORMATIVE = (0.05, 0.95)
#: Structured inputs: ``c`` and weights of norm 2 orthogonal to or aligned with ``mu``.
C_STRUCTURED = 0.5
GEOMETRIES: dict[str, dict[str, Any]] = {  # keyword arguments of Setting
    r"$w \perp \mu$": dict(wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.0, cos_mu_wq=0.0),
    r"aligned": dict(wk_norm=2.0, wq_norm=2.0),
}
#: ``beta delta`` above which the proportional limit is not claimed (the regular regime of the
#: grid of settings in :doc:`derivation_softmax`).
BETA_DELTA_MAX = 0.3
#: Wording of "within MARGIN of" claims (equivalence tests).
_FITS = (f"within {MARGIN:g} of", f"farther than {MARGIN:g} from",
         f"not decided at this profile to be within {MARGIN:g} of")


def _random(beta: float, mask: bool = True, c: float | None = None) -> Setting:
    return Setting(c=RANDOM["c"] if c is None else c, attention=Softmax(float(beta), mask=mask))


def _grid(n_gamma: int) -> np.ndarray:
    """The simulated ``g``: ``logspace(-3, 1, n_gamma)`` with :data:`G_REPORT` on it."""
    n_gamma = check_int(n_gamma, "n_gamma", low=2)
    return np.unique(np.concatenate([np.logspace(-3, 1, n_gamma), [G_REPORT]]))


def _k(g: np.ndarray) -> int:
    return int(np.argmin(np.abs(np.log(g / G_REPORT))))


def _worst(cmp: study.Comparison, model: str = "softmax",
           finite: bool = False, rows: bool = False) -> tuple[float, float, float]:
    """Largest ``|theory - MC|`` over the informative points: (value, its s.e., its g).

    The theory is the limit of ``model``, or with ``finite`` the finite-size softmax theory
    (all ``nan`` where it refused the setting), or with ``rows`` the theory that keeps the row
    factors (``nan`` if not computed).
    """
    th = (cmp.theory_rows if rows else cmp.theory_finite if finite else
          cmp.theory_softmax if model == "softmax" else cmp.theory_entrywise)
    if th is None:
        return float("nan"), float("nan"), float("nan")
    mean, sem = cmp.mean(model), cmp.sem(model)
    use = (mean > INFORMATIVE[0]) & (mean < INFORMATIVE[1])
    if not use.any():
        return float("nan"), float("nan"), float("nan")
    d = np.where(use, np.abs(mean - th), -np.inf)
    j = int(np.argmax(d))
    return float(d[j]), float(sem[j]), float(cmp.g[j])


def convention(*, n: int) -> Figure:
    r"""Why the comparison is at equal ``gamma / tau``: softmax's raw features are tiny.

    Two axes, theory only, random inputs at ``beta = 1``: the errors of softmax (the limit at
    ``gamma / s_n^2``) and ridge against the raw ``gamma`` (left) and against ``g = gamma /
    tau`` (right).

    Parameters
    ----------
    n : int
        Tokens (the softmax scale ``s_n ~ sqrt(p) / n`` depends on it).

    Returns
    -------
    Figure
        Numbers: ``tau_softmax``, ``tau_ridge``, ``scale_ratio`` (``tau_ridge / tau_softmax``),
        ``s_n``; ``raw_gap`` and ``matched_gap`` (softmax minus ridge in theory at ``gamma =
        0.1`` raw and at ``g = 0.1``); claim ``raw_inflates`` (exact: the raw gap is larger);
        ``colsum_err`` (largest ``|sum_i A_ij - 1|`` of one draw), ``diag_max`` (largest
        ``A_jj``).
    """
    n = check_int(n, "n", low=2)
    s = _random(1.0)
    tau_a, tau_r, sn = sweeps.feature_scale(s, n=n), s.c, sm_theory.scale(s, n)
    x = np.logspace(-4, 2, 61)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0), sharey=True)
    for ax, label, sm_gamma, r_gamma in (
            (axes[0], r"raw ridge parameter $\gamma$ (both models)", x, x),
            (axes[1], r"effective $g = \gamma / \tau$", tau_a * x, tau_r * x)):
        style.plot_theory(ax, x, attention_error(s, sm_theory.effective_gamma(s, sm_gamma, n)),
                          label="softmax (theory)", color=style.color("attention"))
        style.plot_theory(ax, x, ridge_error(s, r_gamma), label="ridge (theory)",
                          color=style.color("ridge"), linestyle="--")
        ax.axvline(G_REPORT, color="0.6", lw=0.8, ls=":")
        style.label_axes(ax, label, r"interpolation error $E$" if ax is axes[0] else "",
                         logx=True, title=f"random inputs, $c = {s.c:g}$, $\\beta = 1$, $n = {n}$")
    raw = float(attention_error(s, sm_theory.effective_gamma(s, G_REPORT, n))[()]
                - ridge_error(s, G_REPORT)[()])
    matched = float(attention_error(s, sm_theory.effective_gamma(s, tau_a * G_REPORT, n))[()]
                    - ridge_error(s, tau_r * G_REPORT)[()])
    d = study.attention_draw(s, n, seed=0)
    return Figure(fig, {
        "tau_softmax": tau_a, "tau_ridge": tau_r, "scale_ratio": tau_r / tau_a, "s_n": sn,
        "raw_gap": raw, "matched_gap": matched,
        "raw_inflates": claims.exact(
            "raw_inflates", raw > matched, f"raw gap {raw:.3f}, matched gap {matched:.3f} (theory)",
            wording=("inflates", "does not inflate", "does not inflate")),
        "colsum_err": float(np.max(np.abs(d.sum(axis=0) - 1.0))),
        "diag_max": float(np.max(np.abs(np.diag(d))))})


def random_inputs(*, n: int, trials: int, seed: int, n_gamma: int) -> Figure:
    r"""Softmax, entry-wise ``f_beta`` and ridge on random inputs at ``beta`` = 0.5, 1, 1.5.

    One axes per ``beta`` (:data:`BETAS`): the error against ``g = gamma / tau``
    (:func:`attn_lib.studies.softmax.compare`).

    Parameters
    ----------
    n, trials, seed : int
        Tokens, draws and root seed.
    n_gamma : int
        Simulated values of ``g`` (``logspace(-3, 1)``, plus :data:`G_REPORT`).

    Returns
    -------
    Figure
        Numbers, for ``b`` in ``05``, ``10``, ``15`` (``beta`` = 0.5, 1, 1.5): ``err_b``,
        ``err_se_b`` (largest ``|theory - MC|`` of softmax over the informative points, its
        s.e.), ``ew_err_b`` (the same for the entry-wise kernel), claims ``fits_b`` and
        ``ew_fits_b`` (equivalence within :data:`MARGIN` at those points), ``gap_b`` and
        ``gap_se_b`` (softmax minus ridge at ``g = 0.1``, paired, and its standard error) and
        claim ``worse_b``; ``sm_ew_b``, ``sm_ew_se_b`` (softmax minus entry-wise at ``g =
        0.1``, paired) and claim ``above_ew_b``; ``theory_gap_min`` (the
        smallest softmax-minus-ridge gap of the limits at ``g = 0.1``) and claim
        ``theory_worse`` (exact: every such gap is positive); ``grade_worse`` (Markdown, the
        verdict on "worse than ridge" from those claims, :func:`_grade`) and ``grade_worse_word``
        (the same verdict as plain text, for other pages); ``trials``.
    """
    g = _grid(n_gamma)
    k = _k(g)
    fine = np.logspace(-3, 1, 41)
    fig, axes = plt.subplots(1, len(BETAS), figsize=(13.0, 4.0), sharey=True)
    out: dict[str, Any] = {"trials": trials}
    th_gaps = []
    for ax, beta in zip(axes, BETAS):
        s = _random(beta)
        cmp = study.compare(s, g, n=n, trials=trials, seed=seed)
        assert cmp.entrywise is not None  # compare's default entrywise=True
        line = study.compare_theory(s, fine, n=n)
        for model, label, color, th in (
                ("softmax", "softmax", style.color("attention"), line["softmax"]),
                ("entrywise", r"entry-wise $f_\beta$", style.color("linearised"),
                 line["entrywise"]),
                ("ridge", "ridge", style.color("ridge"), line["ridge"])):
            style.plot_theory_vs_sim(ax, fine, th, cmp.mean(model), cmp.sem(model), label=label,
                                     color=color, x_sim=g,
                                     fmt={"softmax": "o", "entrywise": "s", "ridge": "D"}[model])
        style.label_axes(ax, r"$g = \gamma / \tau$", r"interpolation error $E$" if beta == BETAS[0]
                         else "", logx=True, legend=False,
                         title=f"$\\beta = {beta:g}$, $c = {s.c:g}$, $n = {n}$")
        b = f"{int(round(10 * beta)):02d}"
        err, se, _ = _worst(cmp)
        out[f"err_{b}"], out[f"err_se_{b}"] = err, se
        ew_err, ew_se, _ = _worst(cmp, "entrywise")
        out[f"ew_err_{b}"] = ew_err
        out[f"ew_fits_{b}"] = claims.equivalent(
            f"ew_fits_{b}", ew_err, ew_se, margin=MARGIN, draws=trials, required=False,
            wording=_FITS)
        out[f"fits_{b}"] = claims.equivalent(
            f"fits_{b}", err, se, margin=MARGIN, draws=trials, required=False, wording=_FITS)
        gap = cmp.softmax[:, k] - cmp.ridge[:, k]
        out[f"gap_{b}"], out[f"gap_se_{b}"] = float(gap.mean()), float(standard_error(gap, axis=0))
        th_gaps.append(float(cmp.theory_softmax[k] - cmp.theory_ridge[k]))
        out[f"worse_{b}"] = claims.exceeds(
            f"worse_{b}", out[f"gap_{b}"], out[f"gap_se_{b}"], draws=trials,
            wording=("is worse than", "is better than",
                     "is not decided at this profile to be worse or better than"))
        above = cmp.softmax[:, k] - cmp.entrywise[:, k]
        out[f"sm_ew_{b}"] = float(above.mean())
        out[f"sm_ew_se_{b}"] = float(standard_error(above, axis=0))
        out[f"above_ew_{b}"] = claims.exceeds(
            f"above_ew_{b}", out[f"sm_ew_{b}"], out[f"sm_ew_se_{b}"], draws=trials,
            required=False, wording=("lies above", "lies below",
                                     "is not decided at this profile to lie above or below"))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=6, fontsize=8)
    out["theory_gap_min"] = min(th_gaps)
    out["theory_worse"] = claims.exact(
        "theory_worse", min(th_gaps) > 0,
        "limit gaps at g = 0.1: " + ", ".join(f"{v:.3f}" for v in th_gaps),
        wording=("predicts", "does not predict", "does not predict"))
    out["grade_worse"] = _grade([out[f"worse_{b}"] for b in ("05", "10", "15")]
                                + [out["theory_worse"]])
    out["grade_worse_word"] = out["grade_worse"].data.strip("*")  # plain, for other pages
    return Figure(fig, out)


def _grade(found: Sequence[claims.Claim], partly: Sequence[claims.Claim] = ()) -> Any:
    """The verdict on a claim of the paper from the findings behind it (Markdown, in bold).

    *contradicted* if a finding of ``found`` is, *not decided at this profile* if one is
    undecided, *partly* if all of ``found`` hold but one of ``partly`` (the stronger form) does
    not, else *demonstrated*.
    """
    from IPython.display import Markdown

    verdicts = [c.holds for c in found]
    word = ("contradicted" if False in verdicts else "not decided at this profile"
            if None in verdicts else "partly" if not all(c.holds for c in partly)
            else "demonstrated")
    return Markdown(f"**{word}**")


def structured(*, n: int, trials: int, seed: int, snrs: Sequence[float],
               beta: float = 1.0) -> Figure:
    r"""Softmax against ridge with a signal: weights orthogonal to or aligned with ``mu``.

    Two axes at ``beta``, ``c = 1/2``, ``g = 0.1`` (:data:`GEOMETRIES`): left the errors against
    the SNR (softmax simulation, limit and finite-size theory at ``n`` dashed, ridge simulation
    and theory, the entry-wise ``f_beta`` limit dotted), right the paired gap softmax minus ridge
    with ``beta delta`` on top (lines: both theories minus ridge's).

    Parameters
    ----------
    n, trials, seed : int
    snrs : sequence of float
        Simulated SNRs (the prose quotes the last).
    beta : float, default 1.0

    Returns
    -------
    Figure
        Numbers: ``gap_perp``, ``gap_aligned`` (paired gaps at the last SNR) with ``gap_perp_se``,
        ``gap_aligned_se``; claims ``perp_worse`` (``gap_perp > 0``), ``aligned_closes``
        (``gap_aligned < gap_perp``, :func:`~attn_lib.book.claims.less`), ``aligned_reverses``
        (``gap_aligned < 0``, not required); the same gaps of the limit theory at the last SNR,
        ``th_gap_perp``, ``th_gap_aligned``, with the exact claims ``limit_closes``
        (``th_gap_aligned < th_gap_perp``) and ``limit_reverses`` (``th_gap_aligned < 0``, not
        required: in the proportional limit it does not) and the finite-size theory's
        ``fs_gap_aligned`` (``nan`` where refused); ``grade_align`` (Markdown, :func:`_grade`:
        the gap closes in the limit and in the simulation; *partly* unless the limit reverses it
        too) and ``grade_align_word`` (the same as plain text);
        ``bd_aligned`` (``beta delta`` of the aligned setting at the last SNR), ``bd_perp``;
        ``th_mc_aligned`` (``|theory - MC|`` of softmax there) and claim ``limit_misses``
        (beyond :data:`MARGIN`), ``th_mc_perp``, ``th_mc_se``;
        ``sm_falls`` (exact: the aligned softmax limit falls from the first SNR to the last) with
        ``sm_first``, ``sm_last``; ``tail`` (:func:`attn_lib.theory.softmax.tail` of the aligned
        setting at ``n``; the finite-size theory is refused at one and above, and then every
        ``fs_`` number is ``nan`` and its claims undecided), ``fs_mc_aligned`` (``|finite-size
        theory - MC|`` of softmax at the aligned last SNR) and claim ``fs_follows`` (within
        :data:`MARGIN`), ``fs_mc_max`` (the largest such difference over every simulated SNR
        and both geometries) and claim ``fs_within`` (that one within :data:`MARGIN`).
    """
    snrs = [float(v) for v in snrs]
    if len(snrs) < 2:
        raise ValueError(f"snrs: need at least two SNRs, got {len(snrs)}")
    g = np.array([G_REPORT])
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2))
    res: dict[str, Any] = {}
    shade = dict(zip(GEOMETRIES, (style.color("linear"), style.color("attention"))))
    snr_th = np.linspace(snrs[0], snrs[-1], 15)
    for (name, kw), fmt in zip(GEOMETRIES.items(), ("s", "o")):
        sets = [Setting(c=C_STRUCTURED, snr=v, attention=Softmax(beta), **kw) for v in snrs]
        cmps = [study.compare(st, g, n=n, trials=trials, seed=seed, entrywise=False) for st in sets]
        res[name] = (sets, cmps)
        th = [study.compare_theory(Setting(c=C_STRUCTURED, snr=float(v), attention=Softmax(beta),
                                           **kw), g, n=n) for v in snr_th]
        style.plot_theory_vs_sim(axes[0], snr_th, [t["softmax"][0] for t in th],
                                 [c.mean("softmax")[0] for c in cmps],
                                 [c.sem("softmax")[0] for c in cmps], x_sim=snrs,
                                 label=f"softmax, {name}", color=shade[name], fmt=fmt)
        if all(t["finite"] is not None for t in th):
            style.plot_theory(axes[0], snr_th, [f[0] for t in th if (f := t["finite"]) is not None],
                              label=f"softmax, {name} (finite-size theory)", color=shade[name],
                              linestyle="--")
        style.plot_theory(axes[0], snr_th, [t["entrywise"][0] for t in th],
                          label=rf"entry-wise $f_\beta$, {name} (theory)", color=shade[name],
                          linestyle=":")
        style.plot_sim(axes[1], snrs, [c.mean("gap")[0] for c in cmps],
                       [c.sem("gap")[0] for c in cmps], color=shade[name], fmt=fmt,
                       label=f"{name}, $\\beta\\delta$ up to {beta * sets[-1].delta(n):.2f}")
        style.plot_theory(axes[1], snr_th, [t["softmax"][0] - t["ridge"][0] for t in th],
                          color=shade[name])
        if all(t["finite"] is not None for t in th):
            style.plot_theory(axes[1], snr_th,
                              [f[0] - t["ridge"][0] for t in th if (f := t["finite"]) is not None],
                              color=shade[name], linestyle="--")
    ridge = res["aligned"][1]
    style.plot_theory_vs_sim(axes[0], snr_th, [t["ridge"][0] for t in th],
                             [c.mean("ridge")[0] for c in ridge],
                             [c.sem("ridge")[0] for c in ridge],
                             x_sim=snrs, label="ridge", color=style.color("ridge"), fmt="D")
    axes[1].axhline(0.0, color="0.3", lw=0.8)
    style.label_axes(axes[0], r"$\mathrm{SNR} = \|\mu\|^2$", r"interpolation error $E$",
                     title=f"$\\beta = {beta:g}$, $c = {C_STRUCTURED:g}$, $n = {n}$, "
                           f"$g = {G_REPORT:g}$", legend=False)
    axes[0].legend(fontsize=7)
    style.label_axes(axes[1], r"$\mathrm{SNR} = \|\mu\|^2$", "softmax minus ridge (paired)",
                     title="gap to ridge (lines: limit, dashed: finite-size theory)")
    axes[1].legend(fontsize=8)
    last = {key: res[name][1][-1] for key, name in (("perp", r"$w \perp \mu$"),
                                                     ("aligned", "aligned"))}
    gp = (last["perp"].softmax - last["perp"].ridge)[:, 0]
    ga = (last["aligned"].softmax - last["aligned"].ridge)[:, 0]
    sp, sa = float(standard_error(gp, axis=0)), float(standard_error(ga, axis=0))
    al_first, al_last = res["aligned"][1][0], last["aligned"]
    out: dict[str, Any] = {
        "gap_perp": float(gp.mean()), "gap_aligned": float(ga.mean()),
        "gap_perp_se": sp, "gap_aligned_se": sa,
        "perp_worse": claims.exceeds("perp_worse", float(gp.mean()), sp, draws=trials,
                                     wording=("is worse than", "is better than",
                                              "is not decided at this profile to be worse or "
                                              "better than")),
        "aligned_closes": claims.less(
            "aligned_closes", float(ga.mean()), sa, float(gp.mean()), sp, draws=trials,
            wording=("smaller", "larger", "not decided at this profile to be smaller or larger")),
        "aligned_reverses": claims.less("aligned_reverses", float(ga.mean()), sa, draws=trials,
                                        required=False,
                                        wording=("reverses", "does not reverse",
                                                 "is not decided at this profile to reverse")),
        "bd_aligned": float(beta * res["aligned"][0][-1].delta(n)),
        "bd_perp": float(beta * res[r"$w \perp \mu$"][0][-1].delta(n)),
        "th_mc_aligned": float(abs(al_last.mean("softmax")[0] - al_last.theory_softmax[0])),
        "limit_misses": claims.exceeds(
            "limit_misses", float(abs(al_last.mean("softmax")[0] - al_last.theory_softmax[0])),
            float(al_last.sem("softmax")[0]), MARGIN, draws=trials, required=False,
            wording=(f"misses it by more than {MARGIN:g}", f"follows it within {MARGIN:g}",
                     f"is not decided at this profile to miss it by more than {MARGIN:g}")),
        "th_mc_perp": float(abs(last["perp"].mean("softmax")[0] - last["perp"].theory_softmax[0])),
        "th_mc_se": float(max(al_last.sem("softmax")[0], last["perp"].sem("softmax")[0])),
        "sm_first": float(al_first.theory_softmax[0]), "sm_last": float(al_last.theory_softmax[0])}
    out["sm_falls"] = claims.exact(
        "sm_falls", out["sm_last"] < out["sm_first"],
        f"limit {out['sm_first']:.3f} at SNR {snrs[0]:g}, {out['sm_last']:.3f} at SNR {snrs[-1]:g}",
        wording=("falls", "does not fall", "does not fall"))
    out["tail"] = sm_theory.tail(res["aligned"][0][-1], n)
    th_last = {key: study.compare_theory(res[name][0][-1], g, n=n)
               for key, name in (("perp", r"$w \perp \mu$"), ("aligned", "aligned"))}
    out["th_gap_perp"], out["th_gap_aligned"] = (
        float(th_last[key]["softmax"][0] - th_last[key]["ridge"][0]) for key in ("perp", "aligned"))
    fin = th_last["aligned"]["finite"]
    out["fs_gap_aligned"] = (float("nan") if fin is None else
                             float(fin[0] - th_last["aligned"]["ridge"][0]))
    limit = (f"limit gaps at SNR {snrs[-1]:g}: aligned {out['th_gap_aligned']:+.4f}, "
             f"orthogonal {out['th_gap_perp']:+.4f} (theory)")
    out["limit_closes"] = claims.exact(
        "limit_closes", out["th_gap_aligned"] < out["th_gap_perp"], limit,
        wording=("closes", "does not close", "does not close"))
    out["limit_reverses"] = claims.exact(
        "limit_reverses", out["th_gap_aligned"] < 0, limit, required=False,
        wording=("reverses", "does not reverse", "does not reverse"))
    out["grade_align"] = _grade([out["limit_closes"], out["aligned_closes"]],
                                partly=[out["limit_reverses"]])
    out["grade_align_word"] = out["grade_align"].data.strip("*")  # plain, for other pages

    def fs_miss(cmp: study.Comparison) -> tuple[float, float]:
        if cmp.theory_finite is None:
            return float("nan"), float("nan")
        return (float(abs(cmp.mean("softmax")[0] - cmp.theory_finite[0])),
                float(cmp.sem("softmax")[0]))

    fs_al, fs_al_se = fs_miss(al_last)
    fs_all = [fs_miss(c) for name in GEOMETRIES for c in res[name][1]]
    fs_max, fs_max_se = max(fs_all, key=lambda v: -np.inf if np.isnan(v[0]) else v[0])
    follows = (f"follows it within {MARGIN:g}", f"misses it by more than {MARGIN:g}",
               f"is not decided at this profile to follow it within {MARGIN:g}")

    def fs_claim(name: str, d: float, se: float) -> claims.Claim:
        if np.isnan(d):     # refused: undecided, with the reason as evidence
            return claims.Claim(name, None, f"not computed: the finite-size theory refuses "
                                f"2 beta ||M_r|| / sqrt(p) = {out['tail']:.3g} >= 1",
                                follows, False)
        return claims.equivalent(name, d, se, margin=MARGIN, draws=trials, required=False,
                                 wording=follows)

    out.update(fs_mc_aligned=fs_al, fs_mc_max=fs_max,
               fs_follows=fs_claim("fs_follows", fs_al, fs_al_se),
               fs_within=fs_claim("fs_within", fs_max, fs_max_se))
    return Figure(fig, out)


def breakdown(*, n_ladder: Sequence[int], trials: int, seed: int, n_gamma: int,
              betas: Sequence[float]) -> Figure:
    r"""Where the limit stops as ``beta`` grows: ``|theory - MC|`` and the normalising sums.

    Random inputs (:data:`RANDOM`). Left: the largest ``|theory - MC|`` of softmax over the
    informative ``g`` (the grid of :func:`random_inputs`, whose draws it shares) against
    ``beta``, one curve per ``n``, for the limit (circles), the finite-size theory at that
    ``n`` (squares) and the theory that keeps the row factors at that ``n`` (triangles,
    :func:`attn_lib.theory.softmax.rows_error`), with ``sqrt(log n)`` marked. Right: the measured standard
    deviation of ``eps`` over the queries (:func:`attn_lib.studies.softmax.normalisation_draws`)
    against :func:`attn_lib.theory.softmax.normalisation_std`.

    Parameters
    ----------
    n_ladder : sequence of int
        Token counts (the prose quotes the last).
    trials, seed, n_gamma : int
    betas : sequence of float
        Inverse temperatures (increasing).

    Returns
    -------
    Figure
        Numbers: ``sqrt_log_n`` (of the last ``n``), ``n_small``, ``n_large`` (the first and
        last ``n``), ``beta_max``, ``err_beta_max`` and
        ``err_beta_max_se`` (the largest ``|theory - MC|`` at the largest ``beta``, last ``n``),
        ``err_beta_one`` (at ``beta = 1`` if present, else the first ``beta``); claim
        ``breaks`` (that error beyond :data:`MARGIN`); ``beta_break`` (the first ``beta``
        whose largest error exceeds :data:`MARGIN` beyond the Student t threshold of the draws;
        ``nan`` if none);
        ``eps_ratio_first``, ``eps_ratio_last`` and their ``_se`` (measured over predicted
        spread of ``eps`` at the smallest and largest ``beta``, last ``n``); ``eps_pred_last``
        (predicted spread there); claims ``eps_agrees`` (the first ratio within 10 % of one)
        and ``eps_below`` (the last below one, :func:`~attn_lib.book.claims.less`);
        ``err_small_first``, ``err_small_last`` and their ``_se`` (the largest error at the
        smallest ``beta``, first and last ``n``) and claim ``small_falls`` (it falls with ``n``);
        the finite-size theory's ``fs_err_small_first``, ``fs_err_small_last`` (its largest
        error at the smallest ``beta``, first and last ``n``) and claim ``fs_small_fits``
        (the last within :data:`MARGIN`), ``fs_err_beta_one`` (its largest error at ``beta = 1``,
        last ``n``), ``fs_lim_beta_max`` (the largest ``|finite-size - limit|`` over ``g`` at the
        largest ``beta``, last ``n``), ``tail_max`` (the largest
        :func:`attn_lib.theory.softmax.tail` of the settings; the finite-size theory refuses one
        and above, its errors then ``nan``); the row theory's ``rows_err_beta_one``,
        ``rows_err_beta_max`` and ``rows_err_beta_max_se`` (last ``n``), claim ``rows_breaks``
        and ``rows_beta_break`` (as ``breaks`` and ``beta_break``), ``rows_break_text`` (where
        the row theory's miss exceeds :data:`MARGIN`, in words) and ``rows_break_moves`` (whether
        the breakdown temperature moves up against the limit's, in words).
    """
    ns = [check_int(v, "n_ladder", low=9) for v in n_ladder]
    betas = [float(b) for b in betas]
    g = _grid(n_gamma)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0))
    errs, ses, ratios, preds, eps_se, fs_errs, fs_ses = {}, {}, {}, {}, {}, {}, {}
    tails, fs_lim, rw_errs, rw_ses = [], {}, {}, {}
    for k, n in enumerate(ns):
        color = style.shades("attention", len(ns))[k]
        e, se, meas, pred, mse, fe, fse, re_, rse = [], [], [], [], [], [], [], [], []
        for beta in betas:
            s = _random(beta)
            tails.append(sm_theory.tail(s, n))
            cmp = study.compare(s, g, n=n, trials=trials, seed=seed, entrywise=False, rows=True)
            w, wf, wr = _worst(cmp), _worst(cmp, finite=True), _worst(cmp, rows=True)
            e.append(w[0])
            se.append(w[1])
            fe.append(wf[0])
            fse.append(wf[1])
            re_.append(wr[0])
            rse.append(wr[1])
            fs_lim[n, beta] = (float("nan") if cmp.theory_finite is None else
                               float(np.max(np.abs(cmp.theory_finite - cmp.theory_softmax))))
            nd = study.cached_normalisation(s, n, trials, seed)
            meas.append(float(nd.mean("eps_std")))
            pred.append(sm_theory.normalisation_std(s, n))
            mse.append(float(nd.sem("eps_std")))
        errs[n], ses[n], ratios[n], preds[n] = (np.array(e), np.array(se),
                                                np.array(meas) / np.array(pred), np.array(pred))
        eps_se[n] = np.array(mse) / np.array(pred)
        fs_errs[n], fs_ses[n] = np.array(fe), np.array(fse)
        rw_errs[n], rw_ses[n] = np.array(re_), np.array(rse)
        style.plot_sim(axes[0], betas, e, se, color=color, label=f"limit, $n = {n}$")
        style.plot_sim(axes[0], betas, fe, fse, color=color, fmt="s--", markersize=4,
                       label=f"finite-size, $n = {n}$")
        style.plot_sim(axes[0], betas, re_, rse, color=color, fmt="^:", markersize=5,
                       label=f"row factors, $n = {n}$")
        style.plot_sim(axes[1], betas, meas, None, color=color, label=f"measured, $n = {n}$")
        style.plot_theory(axes[1], betas, pred, color=color, linestyle="--",
                          label=f"normalisation_std, $n = {n}$")
        axes[0].axvline(np.sqrt(np.log(n)), color=color, lw=0.8, ls=":")
    axes[0].axhline(MARGIN, color="0.4", lw=0.8, ls="--")
    style.label_axes(axes[0], r"inverse temperature $\beta$",
                     r"largest $|$theory $-$ MC$|$ (softmax)", logy=True, legend=False,
                     title=r"random inputs; dotted: $\beta = \sqrt{\log n}$")
    axes[0].legend(fontsize=7)
    style.label_axes(axes[1], r"inverse temperature $\beta$", r"std of $\varepsilon$ over queries",
                     logy=True, title="normalising sums")
    axes[1].legend(fontsize=7)
    n = ns[-1]
    e_n, se_n = errs[n], ses[n]
    k_t = claims.threshold(claims.Z, trials)
    broken = [b for b, v, s_ in zip(betas, e_n, se_n) if v - k_t * s_ > MARGIN]
    r_n, rse_n = rw_errs[n], rw_ses[n]
    rows_broken = [b for b, v, s_ in zip(betas, r_n, rse_n) if v - k_t * s_ > MARGIN]
    if not broken:
        moves = "the limit does not break on this grid either"
    elif not rows_broken:
        moves = (f"the limit breaks from β = {broken[0]:g} on and the row theory nowhere on this "
                 "grid, so the breakdown temperature moves up")
    elif rows_broken[0] > broken[0]:
        moves = f"the breakdown temperature moves up from β = {broken[0]:g} to {rows_broken[0]:g}"
    else:
        moves = f"the breakdown temperature does not move on this grid (β = {broken[0]:g})"
    j1 = betas.index(1.0) if 1.0 in betas else 0
    return Figure(fig, {
        "sqrt_log_n": float(np.sqrt(np.log(n))), "beta_max": betas[-1], "n_small": ns[0],
        "n_large": n,
        "err_beta_max": float(e_n[-1]), "err_beta_max_se": float(se_n[-1]),
        "err_beta_one": float(e_n[j1]),
        "breaks": claims.exceeds("breaks", float(e_n[-1]), float(se_n[-1]), MARGIN, draws=trials,
                                 required=False,
                                 wording=(f"farther than {MARGIN:g} from", f"within {MARGIN:g} of",
                                          f"not decided at this profile to be farther than "
                                          f"{MARGIN:g} from")),
        "beta_break": float(broken[0]) if broken else float("nan"),
        "eps_ratio_first": float(ratios[n][0]), "eps_ratio_last": float(ratios[n][-1]),
        "eps_ratio_first_se": float(eps_se[n][0]), "eps_ratio_last_se": float(eps_se[n][-1]),
        "eps_pred_last": float(preds[n][-1]),
        "err_small_first": float(errs[ns[0]][0]), "err_small_last": float(e_n[0]),
        "err_small_first_se": float(ses[ns[0]][0]), "err_small_last_se": float(se_n[0]),
        "small_falls": claims.less(
            "small_falls", float(e_n[0]), float(se_n[0]), float(errs[ns[0]][0]), float(ses[ns[0]][0]),
            draws=trials, wording=("falls", "rises", "is not decided at this profile to fall")),
        "eps_agrees": claims.equivalent(
            "eps_agrees", float(ratios[n][0]), float(eps_se[n][0]), 1.0, margin=0.1,
            draws=trials, wording=("within 10 % of", "farther than 10 % from",
                                   "not decided at this profile to be within 10 % of")),
        "eps_below": claims.less(
            "eps_below", float(ratios[n][-1]), float(eps_se[n][-1]), 1.0, draws=trials,
            wording=("below", "above", "not decided at this profile to be below")),
        "fs_err_small_first": float(fs_errs[ns[0]][0]), "fs_err_small_last": float(fs_errs[n][0]),
        "fs_small_fits": claims.equivalent(
            "fs_small_fits", float(fs_errs[n][0]), float(fs_ses[n][0]), margin=MARGIN,
            draws=trials, required=False, wording=_FITS),
        "fs_err_beta_one": float(fs_errs[n][j1]),
        "fs_lim_beta_max": fs_lim[n, betas[-1]], "tail_max": float(max(tails)),
        "rows_err_beta_one": float(r_n[j1]), "rows_err_beta_max": float(r_n[-1]),
        "rows_err_beta_max_se": float(rse_n[-1]),
        "rows_breaks": claims.exceeds("rows_breaks", float(r_n[-1]), float(rse_n[-1]), MARGIN,
                                      draws=trials, required=False,
                                      wording=(f"farther than {MARGIN:g} from",
                                               f"within {MARGIN:g} of",
                                               f"not decided at this profile to be farther than "
                                               f"{MARGIN:g} from")),
        "rows_beta_break": float(rows_broken[0]) if rows_broken else float("nan"),
        "rows_break_text": (f"from β = {rows_broken[0]:g} on" if rows_broken else
                            f"at no β of the grid (up to {betas[-1]:g})"),
        "rows_break_moves": moves})


def tail_regime(n: int) -> dict[str, Any]:
    r"""Where the Gaussian equivalence of ``f_beta`` holds at ``n`` tokens (closed forms, no simulation).

    The relative variance of one row's sum of squares of the kernel is ``kurtosis(beta) / n``
    (:func:`attn_lib.studies.softmax.kurtosis`); it is one at ``beta = tail_beta(n)``
    (:func:`attn_lib.studies.softmax.tail_beta`, about ``sqrt(log n) / 2``).

    Parameters
    ----------
    n : int
        Tokens (the chapter's ``n``), at least 9.

    Returns
    -------
    dict
        ``kurt_05``, ``kurt_10``, ``kurt_15`` (the kurtosis at ``beta`` = 0.5, 1, 1.5);
        ``q_10``, ``q_15`` (over ``n``); ``tail_beta`` (at ``n``), ``tail_beta_2048`` and
        ``half_sqrt_log_n`` (``sqrt(log n) / 2``); ``n_edge_15`` (the ``n`` at which
        ``beta = 1.5`` reaches the edge, ``kurtosis(1.5)`` rounded up); claim ``past_edge``
        (``beta = 1.5`` lies beyond ``tail_beta(n)``).
    """
    n = check_int(n, "n", low=9)
    kurt = {b: study.kurtosis(b) for b in (0.5, 1.0, 1.5)}
    edge = study.tail_beta(n)
    return {"kurt_05": kurt[0.5], "kurt_10": kurt[1.0], "kurt_15": kurt[1.5],
            "q_10": kurt[1.0] / n, "q_15": kurt[1.5] / n, "tail_beta": edge,
            "tail_beta_2048": study.tail_beta(2048),
            "half_sqrt_log_n": float(np.sqrt(np.log(n)) / 2),
            "n_edge_15": int(np.ceil(kurt[1.5])),
            "past_edge": claims.exact(
                "past_edge", 1.5 > edge, f"tail_beta({n}) = {edge:.3f}",
                wording=("beyond", "inside", "at")),
            }


def mask(*, n: int, trials: int, seed: int, n_gamma: int, p_ladder: Sequence[int]) -> Figure:
    r"""With and without the self-pair mask.

    Left: the mean self-weight ``tr(A) / n`` of the unmasked softmax
    (:func:`attn_lib.simulation.simulate.self_weight`, ``c = 1/2``, ``n = 2p``) against ``p``
    for ``beta`` = 0.5 and 1, with :func:`attn_lib.studies.softmax.self_weight_limit`. Right:
    the errors of masked and unmasked softmax and of ridge on random inputs at ``beta = 1``
    against ``g`` (the unmasked at ridge's ``gamma = c g``; the draws of :func:`random_inputs`).

    Returns
    -------
    Figure
        Numbers: ``sw_<b>_first``, ``sw_<b>_last`` (simulated self-weight at the first and last
        ``p`` of ``p_ladder``, ``p_first``, ``p_last``; ``b`` in ``05``, ``10``),
        ``swp_<b>_first``, ``swp_<b>_last`` (the limit); ``sw_dev`` (largest
        ``|simulated - limit|``); ``um_ridge`` (largest ``|unmasked - ridge|`` over ``g``,
        paired), ``um_diff`` and ``um_diff_se`` (unmasked minus ridge at ``g = 0.1``, paired)
        and claim ``um_is_ridge`` (within 0.01 there); ``mask_gap`` and ``mask_gap_se`` (masked
        minus unmasked at ``g = 0.1``, paired) and claim ``mask_matters``.
    """
    ps = [check_int(v, "p_ladder") for v in p_ladder]
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0))
    out: dict[str, Any] = {}
    dev = 0.0
    for k, beta in enumerate((0.5, 1.0)):
        color: str | None = style.shades("attention", 2)[k]
        sw, pred = [], []
        for p in ps:
            s = _random(beta, mask=False, c=0.5)
            r = cache.cached(simulate.self_weight, setting=s, n=2 * p, trials=trials, seed=seed)
            sw.append(float(r.mean("self_weight")))
            pred.append(study.self_weight_limit(s, 2 * p))
        dev = max(dev, float(np.max(np.abs(np.array(sw) - np.array(pred)))))
        p_th = np.unique(np.geomspace(ps[0], ps[-1], 40).round().astype(int))
        pred_th = [study.self_weight_limit(s, 2 * int(q)) for q in p_th]
        style.plot_theory_vs_sim(axes[0], p_th, pred_th, sw, None, label=f"$\\beta = {beta:g}$",
                                 color=color, x_sim=ps)
        b = f"{int(round(10 * beta)):02d}"
        for i, end in ((0, "first"), (-1, "last")):
            out[f"sw_{b}_{end}"], out[f"swp_{b}_{end}"] = sw[i], pred[i]
    out["sw_dev"], out["p_first"], out["p_last"] = dev, ps[0], ps[-1]
    style.label_axes(axes[0], r"dimension $p$ ($n = 2p$)", r"self-weight $\mathrm{tr}(A)/n$",
                     logx=True, title="unmasked softmax, random inputs")
    axes[0].legend(fontsize=8)
    g = _grid(n_gamma)
    k = _k(g)
    s = _random(1.0)
    cmp = study.compare(s, g, n=n, trials=trials, seed=seed, entrywise=False, with_unmasked=True)
    assert cmp.unmasked is not None  # with_unmasked=True
    for model, label, color, fmt, size in (
            ("softmax", "masked softmax", style.color("attention"), "o", 5),
            ("ridge", "ridge", style.color("ridge"), "D", 7),
            ("unmasked", "unmasked softmax", style.color("sign"), "^", 4)):
        style.plot_sim(axes[1], g, cmp.mean(model), cmp.sem(model), color=color, fmt=fmt,
                       markersize=size, label=f"{label} (simulation)")
    style.plot_theory(axes[1], g, cmp.theory_ridge, color=style.color("ridge"), linestyle="--",
                      label="ridge (theory)")
    style.label_axes(axes[1], r"$g = \gamma / \tau$", r"interpolation error $E$", logx=True,
                     title=f"random inputs, $\\beta = 1$, $c = {s.c:g}$, $n = {n}$")
    axes[1].legend(fontsize=8)
    d = cmp.unmasked - cmp.ridge
    out["um_ridge"] = float(np.max(np.abs(d.mean(axis=0))))
    out["um_diff"] = float(d[:, k].mean())
    out["um_diff_se"] = float(standard_error(d[:, k], axis=0))
    out["um_is_ridge"] = claims.equivalent(
        "um_is_ridge", out["um_diff"], out["um_diff_se"], margin=0.01, draws=trials,
        wording=("within 0.01 of", "farther than 0.01 from",
                 "not decided at this profile to be within 0.01 of"))
    m = cmp.softmax[:, k] - cmp.unmasked[:, k]
    out["mask_gap"], out["mask_gap_se"] = float(m.mean()), float(standard_error(m, axis=0))
    out["mask_matters"] = claims.exceeds(
        "mask_matters", out["mask_gap"], out["mask_gap_se"], draws=trials,
        wording=("lies above", "lies below",
                 "is not decided at this profile to lie above or below"))
    return Figure(fig, out)


def spectrum(*, n_ladder: Sequence[int], trials: int, seed: int, beta: float = 1.0) -> Figure:
    r"""The singular values of ``A`` against its Gaussian equivalent.

    Random inputs, ``M = I``, ``c = 1/2``: left the histogram of the singular values of ``A``
    and of :func:`attn_lib.studies.softmax.gaussian_equivalent` (the largest ``n``, all draws,
    the top one left out), with the limit law ``s_n |lambda|`` of the entry-wise kernel
    (:func:`attn_lib.theory.kernel_spectrum.kernel_density` of ``f_beta``); right the relative
    Wasserstein-1 distance (:func:`attn_lib.studies.softmax.wasserstein`) against ``n``.

    Returns
    -------
    Figure
        Numbers: ``w1_first``, ``w1_last`` and ``w1_se_first``, ``w1_se_last`` (percent, mean
        and s.e. over draws) at the first and last ``n`` (``n_first``, ``n_last``); claim
        ``w1_falls`` (it falls from the first to the last ``n``);
        ``top_sm``, ``top_ge`` (mean largest singular value at the last ``n``);
        ``spectrum_trials``.
    """
    ns = [check_int(v, "n_ladder", low=2) for v in n_ladder]
    s = _random(beta, c=0.5)
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.0))
    w1: list[float] = []
    w1_se: list[float] = []
    last = None
    for n in ns:
        r = study.cached_spectrum(s, n, trials, seed)
        w = 100 * study.wasserstein(r["softmax"], r["equivalent"])
        w1.append(float(w.mean()))
        w1_se.append(float(standard_error(w, axis=0)))
        last = (n, r)
    assert last is not None  # ns is not empty
    n, r = last
    sn = sm_theory.scale(s, n)
    bins = np.linspace(0.0, float(np.max(r["softmax"][:, 1:])) * 1.05, 60)
    axes[0].hist(r["softmax"][:, 1:].ravel(), bins=bins, density=True, alpha=0.45,
                 color=style.color("attention"), label="softmax $A$")
    axes[0].hist(r["equivalent"][:, 1:].ravel(), bins=bins, density=True, histtype="step",
                 color=style.color("linearised"), lw=1.6, label="Gaussian equivalent")
    x = np.linspace(1e-4, bins[-1], 300)
    ew = Setting(c=s.c, f=exponential(beta))
    dens = (kernel_density(ew, x / sn) + kernel_density(ew, -x / sn)) / sn
    style.plot_theory(axes[0], x, dens, label=r"limit law of $s_n|\lambda(K)|$", color="0.2")
    style.label_axes(axes[0], "singular value", "density",
                     title=f"$\\beta = {beta:g}$, $c = {s.c:g}$, $n = {n}$ (top value left out)")
    axes[0].legend(fontsize=8)
    style.plot_sim(axes[1], ns, w1, w1_se, color=style.color("attention"),
                   label="softmax vs Gaussian equivalent")
    style.label_axes(axes[1], "tokens $n$", r"relative $W_1$ (%)", logx=True, logy=True,
                     title="distance of the singular-value laws")
    style.plain_ticks(axes[1].xaxis, ns)
    style.log_ticks(axes[1].yaxis)
    out: dict[str, Any] = {"spectrum_trials": trials}
    for i, end in ((0, "first"), (-1, "last")):
        out[f"w1_{end}"], out[f"w1_se_{end}"], out[f"n_{end}"] = w1[i], w1_se[i], ns[i]
    out["w1_falls"] = claims.less("w1_falls", w1[-1], w1_se[-1], w1[0], w1_se[0], draws=trials,
                                  wording=("falls", "rises", "is not decided at this profile to "
                                           "fall"))
    out["top_sm"] = float(r["softmax"][:, 0].mean())
    out["top_ge"] = float(r["equivalent"][:, 0].mean())
    return Figure(fig, out)
