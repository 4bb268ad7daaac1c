"""Figures and numbers of the chapter *Real tokens* (``book/13_real_tokens.ipynb``).

Every number comes from :func:`attn_lib.studies.real_tokens.compare` (theory, balanced subsets
of the real pair, Gaussian surrogate; Monte Carlo cached),
:func:`~attn_lib.studies.real_tokens.class_theory` (the two-covariance theory) and
:func:`~attn_lib.studies.real_tokens.diagnostics`. Pairs are given as ``"data:a-b"`` strings
(``"mnist:3-8"``). Figure functions return a :class:`~attn_lib.book.page.Figure` whose numbers
are the glue names of the chapter's prose.
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np

from ...model.nonlinearity import check_nonlinearity
from ...model.setting import Softmax
from ...simulation.trials import standard_error
from ...studies import real_tokens as rt
from .. import style
from ..claims import exceeds, threshold
from ..page import Figure, markdown_table

__all__ = ["parse_pair", "curves", "agreement", "gap", "causes"]

_NAMES = {"mnist": "MNIST", "digits": "digits", "breast_cancer": "breast cancer"}


def parse_pair(spec: str) -> tuple[str, tuple[int, int]]:
    """``"mnist:3-8"`` -> ``("mnist", (3, 8))``."""
    try:
        data, classes = spec.split(":")
        a, b = classes.split("-")
        return data, (int(a), int(b))
    except ValueError as exc:
        raise ValueError(f"a pair is 'data:a-b' (e.g. 'mnist:3-8'), got {spec!r}") from exc


def _label(spec: str) -> str:
    data, (a, b) = parse_pair(spec)
    return f"{_NAMES.get(data, data)} {a} vs {b}"


def curves(*, pair: str, ns: Sequence[int], f: str, g: Sequence[float], trials: int,
           seed: int) -> Figure:
    """``E`` against ``g = gamma / tau`` for one pair, ``M = I``, one panel per ``n``: attention's
    theory (line), real subsets (dots) and Gaussian surrogate (crosses), ridge the same in its
    colour.

    Numbers: ``rt_curve_theory_real`` and ``rt_curve_surrogate_real`` (largest ``|difference|``
    of attention over the panels), ``rt_curve_theory_surrogate``, ``rt_curve_ridge_theory_real``,
    ``rt_curve_pair`` (the pair's name), ``rt_curve_trials``, ``rt_curve_cs`` (the ``c`` of the
    panels, Markdown-free text).
    """
    data, classes = parse_pair(pair)
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 3.6), squeeze=False, sharey=True)
    worst = {"tr": 0.0, "sr": 0.0, "ts": 0.0, "ridge": 0.0}
    cs = []
    for ax, n in zip(axes[0], ns):
        c = rt.compare(data, classes, n, f, "identity", g, trials, seed)
        assert c.theory is not None
        p = rt.tokens(data, *classes)[0].shape[0]
        cs.append(p / n)
        for model, th, mean, se, sur, sur_se in (
                ("attention", c.theory, c.real, c.real_se, c.surrogate, c.surrogate_se),
                ("ridge", c.ridge_theory, c.ridge_real, c.ridge_real_se, c.ridge_surrogate,
                 c.ridge_surrogate_se)):
            col = style.color(model)
            style.plot_theory(ax, c.g, th, label=f"{model}: theory", color=col)
            style.plot_sim(ax, c.g, mean, se, label=f"{model}: real tokens", color=col)
            style.plot_sim(ax, c.g, sur, sur_se, label=f"{model}: Gaussian surrogate", color=col,
                           fmt="x")
        worst["tr"] = max(worst["tr"], float(np.abs(c.theory - c.real).max()))
        worst["sr"] = max(worst["sr"], float(np.abs(c.surrogate - c.real).max()))
        worst["ts"] = max(worst["ts"], float(np.abs(c.theory - c.surrogate).max()))
        worst["ridge"] = max(worst["ridge"], float(np.abs(c.ridge_theory - c.ridge_real).max()))
        ax.set_xscale("log")
        style.label_axes(ax, r"$g = \gamma/\tau$", r"$E(\gamma)$", f"$n = {n}$, $c = {p / n:.3g}$")
    axes[0][0].legend(fontsize=7)
    return Figure(fig, {"rt_curve_theory_real": worst["tr"], "rt_curve_surrogate_real": worst["sr"],
                        "rt_curve_theory_surrogate": worst["ts"],
                        "rt_curve_ridge_theory_real": worst["ridge"], "rt_curve_pair": _label(pair),
                        "rt_curve_trials": trials,
                        "rt_curve_cs": ", ".join(f"{x:.3g}" for x in cs)})


def _rows(pairs: Sequence[str], ns: dict[str, Sequence[int]], fs: Sequence[str],
          kinds: Sequence[str], g: Sequence[float], trials: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for spec in pairs:
        data, classes = parse_pair(spec)
        for n in ns[data]:
            for kind in kinds:
                diag = rt.diagnostics(data, classes, n, kind)
                for f in fs:
                    c = rt.compare(data, classes, n, f, kind, g, trials, seed)
                    two = rt.class_theory(data, classes, n, f, kind, g)
                    shift = rt.finite_shift(data, classes, n, f, kind, g)
                    cls = rt.class_surrogate(data, classes, n, f, kind, g, trials, seed)
                    assert c.theory is not None
                    for k in range(len(c.g)):
                        rows.append({"pair": spec, "data": data, "n": n, "kind": kind, "f": f,
                                     "g": c.g[k], "theory": two[k], "common": c.theory[k],
                                     "finite": two[k] + shift[k], "common_finite": c.theory[k] + shift[k],
                                     "real": c.real[k], "real_se": c.real_se[k],
                                     "surrogate": c.surrogate[k], "class_surrogate": cls.mean[k],
                                     "class_se": cls.sem[k], **diag})
    return rows


def agreement(*, pairs: Sequence[str], ns: dict[str, Sequence[int]], fs: Sequence[str],
              kinds: Sequence[str], g: Sequence[float], trials: int, seed: int,
              tolerance: float = 0.02) -> Figure:
    """Theory and surrogate against the real error, every pair, ``n``, ``f``, matrix and ``g``.

    Left: the two-covariance theory (:func:`~attn_lib.studies.real_tokens.class_theory`) against
    real (dots), coloured by pair, with the band ``|difference| <= tolerance``; right: the same
    for the Gaussian surrogate. Numbers: ``rt_points`` (MNIST points), ``rt_within`` (their
    share with ``|theory - real| <= tolerance``, a percentage string), ``rt_within_common`` (the
    same for the theory with one common covariance), ``rt_within_surrogate`` (the surrogate), ``rt_median_tr``,
    ``rt_median_sr``, ``rt_median_ts`` (MNIST medians of ``|theory - real|``, ``|surrogate -
    real|``, and ``|common-covariance theory - surrogate|``, a theory against its own Gaussian
    model), ``rt_within_finite`` (the share of the two-covariance theory plus the finite-size
    shift, :func:`~attn_lib.studies.real_tokens.finite_shift`), ``rt_within_ts`` and
    ``rt_within_fs`` (the shares of the common-covariance limit and of its finite-size version
    within ``tolerance`` of their Gaussian surrogate), ``rt_median_fs`` (the median of the
    latter's ``|theory - surrogate|``), ``rt_tolerance``, ``rt_table`` (Markdown: per pair and
    ``f``, the shares per matrix, the largest misses and the measured candidates for a miss:
    ``||mu||^2``, the largest coherent shift, the effective rank, the class covariances).
    How far any two-class Gaussian theory can come: ``rt_within_class`` (the share of the MNIST
    points whose Gaussian surrogate with each class's own mean and covariance,
    :func:`~attn_lib.studies.real_tokens.class_surrogate`, is within ``tolerance`` of the real
    error), ``rt_beyond_class`` (the share where it is off by more than ``tolerance`` plus the
    decision threshold of ``trials`` draws, :func:`~attn_lib.book.claims.threshold`, in standard
    errors of the difference) and ``rt_misses_shared`` (of the points the
    two-covariance theory with the finite-size shift misses by more than ``tolerance``, the share
    that surrogate misses too).
    """
    rows = _rows(pairs, ns, fs, kinds, g, trials, seed)
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 4.2), sharex=True, sharey=True)
    colors = plt.get_cmap("tab10")
    for i, spec in enumerate(pairs):
        sub = [r for r in rows if r["pair"] == spec]
        real = np.array([r["real"] for r in sub])
        for ax, key in zip(axes, ("theory", "surrogate")):
            ax.plot(real, [r[key] for r in sub], "o" if key == "theory" else "x", ms=3.5,
                    color=colors(i), label=_label(spec), alpha=0.8)
    top = max(max(r["real"] for r in rows), max(max(r["theory"], r["surrogate"]) for r in rows)) * 1.05
    for ax, key in zip(axes, ("theory", "surrogate")):
        x = np.array([0.0, top])
        ax.plot(x, x, color="0.3", lw=1)
        ax.fill_between(x, x - tolerance, x + tolerance, color="0.85", zorder=0)
        style.label_axes(ax, "real tokens (mean over subsets)", key,
                         "theory against real" if key == "theory" else "Gaussian surrogate against real")
    axes[0].legend(fontsize=7)
    mnist = [r for r in rows if r["data"] == "mnist"] or rows
    tr = np.array([abs(r["theory"] - r["real"]) for r in mnist])
    cr = np.array([abs(r["common"] - r["real"]) for r in mnist])
    sr = np.array([abs(r["surrogate"] - r["real"]) for r in mnist])
    ts = np.array([abs(r["common"] - r["surrogate"]) for r in mnist])    # a theory and its own model
    fs_ = np.array([abs(r["common_finite"] - r["surrogate"]) for r in mnist])
    fr = np.array([abs(r["finite"] - r["real"]) for r in mnist])
    cl = np.array([abs(r["class_surrogate"] - r["real"]) for r in mnist])
    cl_se = np.hypot([r["real_se"] for r in mnist], [r["class_se"] for r in mnist])
    missed = fr > tolerance
    table = []
    for spec in pairs:
        for f in fs:
            sub = [r for r in rows if r["pair"] == spec and r["f"] == f]
            a = np.array([abs(r["theory"] - r["real"]) for r in sub])
            b = np.array([abs(r["surrogate"] - r["real"]) for r in sub])
            t = np.array([abs(r["common"] - r["surrogate"]) for r in sub])
            shares = " / ".join(f"{np.mean([abs(r['theory'] - r['real']) <= tolerance for r in sub if r['kind'] == k]):.0%}"
                                for k in kinds)
            table.append({"pair": _label(spec), "f": f, "within": shares, "theory-real": a.max(),
                          "theory-surrogate": t.max(), "surrogate-real": b.max(),
                          "snr": sub[0]["snr"], "shift": max(r["shift"] for r in sub),
                          "effective rank": sub[0]["effective_rank"],
                          "class covariances": sub[0]["class_covariance"]})
    headers = {"within": f"within {tolerance:g} ({' / '.join(kinds)})", "theory-real": "max |theory - real|",
               "theory-surrogate": "max |common-C theory - surrogate|", "surrogate-real": "max |surrogate - real|",
               "snr": "‖μ‖²", "shift": "largest coherent shift", "class covariances": "‖C₊ - C₋‖/‖C‖"}
    md = markdown_table([{headers.get(k, k): v for k, v in r.items()} for r in table],
                        formats={headers["theory-real"]: ".3f", headers["theory-surrogate"]: ".3f",
                                 headers["surrogate-real"]: ".3f", headers["shift"]: ".2f",
                                 headers["snr"]: ".0f",
                                 "effective rank": ".1f", headers["class covariances"]: ".2f"})
    return Figure(fig, {"rt_points": len(mnist), "rt_within": f"{np.mean(tr <= tolerance):.0%}",
                        "rt_within_common": f"{np.mean(cr <= tolerance):.0%}",
                        "rt_within_surrogate": f"{np.mean(sr <= tolerance):.0%}",
                        "rt_median_tr": float(np.median(tr)), "rt_median_sr": float(np.median(sr)),
                        "rt_median_ts": float(np.median(ts)), "rt_tolerance": tolerance,
                        "rt_within_finite": f"{np.mean(fr <= tolerance):.0%}",
                        "rt_within_ts": f"{np.mean(ts <= tolerance):.0%}",
                        "rt_within_fs": f"{np.mean(fs_ <= tolerance):.0%}",
                        "rt_median_fs": float(np.median(fs_)),
                        "rt_within_class": f"{np.mean(cl <= tolerance):.0%}",
                        "rt_beyond_class": f"{np.mean(cl - threshold(draws=trials) * cl_se > tolerance):.0%}",
                        "rt_misses_shared": (f"{np.mean(cl[missed] > tolerance):.0%}" if missed.any()
                                             else "none"),
                        "rt_table": md})


def gap(*, pair: str, n: int, fs: Sequence[str], kinds: Sequence[str], g: float, trials: int,
        seed: int, beta: float) -> Figure:
    """Attention minus ridge on the real tokens at ``g = gamma / tau``, paired over the same
    subsets (mean ± one standard error), per matrix and ``f`` (and masked softmax at ``beta``,
    by simulation only); the theory's difference as a bar outline.

    Numbers: ``rt_gap_identity`` (claim: attention - ridge > 0 for ``M = I`` and the first ``f``),
    ``rt_align`` (claim: aligned minus identity for the first ``f``, attention, paired; wording
    "raises", "lowers", or, undecided, "moves, in a direction this profile's draws do not decide,"),
    ``rt_gap_text`` (the identity gap ``d ± se``), ``rt_align_text``, ``rt_gap_g``,
    ``rt_gap_trials``, ``rt_gap_n``.
    """
    data, classes = parse_pair(pair)
    models: list[tuple[str, Any]] = [(f, f) for f in fs] + [(f"softmax β={beta:g}", Softmax(beta))]
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    width = 0.8 / len(models)
    values: dict[tuple[str, str], np.ndarray] = {}
    for j, (name, f) in enumerate(models):
        for i, kind in enumerate(kinds):
            if isinstance(f, Softmax):
                c = rt.compare(data, classes, n, "tanh", kind, [g], trials, seed, attention=f)
            else:
                c = rt.compare(data, classes, n, f, kind, [g], trials, seed)
            d = c.real_values[:, 0] - c.ridge_real_values[:, 0]
            values[name, kind] = c.real_values[:, 0]
            x = i + (j - (len(models) - 1) / 2) * width
            col = style.color(name) or "0.4"
            ax.errorbar(x, d.mean(), float(standard_error(d, 0)), fmt="o", color=col,
                        label=name if i == 0 else None)
            if c.theory is not None:
                ax.bar(x, c.theory[0] - c.ridge_theory[0], width * 0.9, fill=False, edgecolor=col)
    ax.axhline(0.0, color="0.3", lw=1)
    ax.set_xticks(range(len(kinds)), [rf"$M$ {k}" for k in kinds])
    style.label_axes(ax, "", r"$E_{\rm attention} - E_{\rm ridge}$")
    ax.legend(fontsize=7, ncol=2)
    f0 = fs[0]
    base = rt.compare(data, classes, n, f0, "identity", [g], trials, seed)
    d = base.real_values[:, 0] - base.ridge_real_values[:, 0]
    se = float(standard_error(d, 0))
    claim = exceeds("rt_gap_identity", float(d.mean()), se, wording=(
        "is above", "is below", "is not distinguishable, at this profile's draws, from"), draws=trials)
    dal = values[f0, "aligned"] - values[f0, "identity"]
    se_al = float(standard_error(dal, 0))
    align = exceeds("rt_align", float(dal.mean()), se_al, wording=(
        "raises", "lowers", "moves, in a direction this profile's draws do not decide,"), draws=trials,
        required=False)
    return Figure(fig, {"rt_gap_identity": claim, "rt_align": align,
                        "rt_gap_text": f"{d.mean():+.3f} ± {se:.3f}",
                        "rt_align_text": f"{dal.mean():+.3f} ± {se_al:.3f}",
                        "rt_gap_g": g, "rt_gap_trials": trials, "rt_gap_n": n,
                        "rt_gap_pair": _label(pair)})


def causes(*, pairs: Sequence[str], n: int, fs: Sequence[str], g: Sequence[float], trials: int,
           seed: int) -> Figure:
    """Where the Gaussian model of the tokens fails: ``M = I``, per pair and ``f``, attention's
    error on the real tokens (dots), the Gaussian surrogate with one common covariance (crosses),
    the Gaussian surrogate with each class's own covariance
    (:func:`~attn_lib.studies.real_tokens.class_surrogate`, pluses), the two-covariance theory
    (:func:`~attn_lib.studies.real_tokens.class_theory`, bars) and the theory with one common
    covariance (dotted bars), at the ``g`` of the grid (one panel per ``g`` and pair).

    Numbers: ``rt_cause_common`` and ``rt_cause_class`` (largest ``|surrogate - real|`` of the
    common-covariance and of the class-covariance surrogate, over pairs, ``g`` and the ``f``
    with an even part, ``f(t) + f(-t)`` not constant: ``rt_cause_even``, text), the same over
    the odd ``f`` (``rt_cause_common_odd``, ``rt_cause_class_odd``; ``nan`` if none); over the
    ``f`` with an even part, the largest ``|two-covariance theory - class-covariance surrogate|``
    (``rt_cause_two_class``), ``|common-covariance theory - common surrogate|``
    (``rt_cause_one_common``) and each theory's largest ``|theory - real|``
    (``rt_cause_two_real``, ``rt_cause_one_real``),
    ``rt_cause_fs`` (all, text), ``rt_cause_n``, ``rt_cause_trials``.
    """
    gg = list(g)
    t = np.linspace(-3.0, 3.0, 61)
    even = {f: bool(np.ptp(check_nonlinearity(f)(t) + check_nonlinearity(f)(-t)) > 1e-9) for f in fs}
    misses: dict[tuple[str, bool], float] = {}
    fig, axes = plt.subplots(len(pairs), len(gg), figsize=(3.4 * len(gg), 3.0 * len(pairs)),
                             squeeze=False, sharey="row")
    for r, spec in enumerate(pairs):
        data, classes = parse_pair(spec)
        for j, f in enumerate(fs):
            c = rt.compare(data, classes, n, f, "identity", gg, trials, seed)
            cl = rt.class_surrogate(data, classes, n, f, "identity", gg, trials, seed)
            two = rt.class_theory(data, classes, n, f, "identity", gg)
            assert c.theory is not None
            for key, sur in (("common", c.surrogate), ("class", cl.mean)):
                miss = float(np.abs(sur - c.real).max())
                misses[key, even[f]] = max(misses.get((key, even[f]), 0.0), miss)
            for key, a, b in (("two-class", two, cl.mean), ("one-common", c.theory, c.surrogate),
                              ("two-real", two, c.real), ("one-real", c.theory, c.real)):
                misses[key, even[f]] = max(misses.get((key, even[f]), 0.0), float(np.abs(a - b).max()))
            col = style.color(f) or "0.4"
            for k, ax in enumerate(axes[r]):
                ax.bar(j, two[k], 0.7, fill=False, edgecolor=col)
                ax.bar(j, c.theory[k], 0.7, fill=False, edgecolor=col, linestyle=":")
                ax.errorbar(j - 0.15, c.real[k], c.real_se[k], fmt="o", color=col)
                ax.errorbar(j, c.surrogate[k], c.surrogate_se[k], fmt="x", color=col)
                ax.errorbar(j + 0.15, cl.mean[k], cl.sem[k], fmt="+", color=col, ms=8)
        for k, ax in enumerate(axes[r]):
            ax.set_xticks(range(len(fs)), list(fs))
            style.label_axes(ax, "", r"$E$", f"{_label(spec)}, $g = {gg[k]:g}$", legend=False)
    axes[0][0].plot([], [], "ko", label="real tokens")
    axes[0][0].plot([], [], "kx", label="surrogate, common $C$")
    axes[0][0].plot([], [], "k+", label="surrogate, class covariances")
    axes[0][0].bar([0], [0], 0, fill=False, edgecolor="k", label="theory, class covariances")
    axes[0][0].bar([0], [0], 0, fill=False, edgecolor="k", linestyle=":", label="theory, common $C$")
    axes[0][0].legend(fontsize=7)
    nan = float("nan")
    return Figure(fig, {"rt_cause_common": misses.get(("common", True), nan),
                        "rt_cause_class": misses.get(("class", True), nan),
                        "rt_cause_common_odd": misses.get(("common", False), nan),
                        "rt_cause_class_odd": misses.get(("class", False), nan),
                        "rt_cause_two_class": misses.get(("two-class", True), nan),
                        "rt_cause_one_common": misses.get(("one-common", True), nan),
                        "rt_cause_two_real": misses.get(("two-real", True), nan),
                        "rt_cause_one_real": misses.get(("one-real", True), nan),
                        "rt_cause_even": ", ".join(f for f in fs if even[f]),
                        "rt_cause_fs": ", ".join(fs), "rt_cause_n": n, "rt_cause_trials": trials})
