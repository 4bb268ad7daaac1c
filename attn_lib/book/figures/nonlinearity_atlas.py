r"""Figures and numbers of the chapter *A nonlinearity atlas* (``book/10_nonlinearity_atlas``).

The atlas (:mod:`attn_lib.studies.atlas`) holds registered nonlinearities scaled to ``nu = 1``,
partners of equal ``a1^2 / nu`` (mixtures with the non-linear part of another function),
reflections ``f(-t)`` and a sweep of ``a1``; :func:`attn_lib.studies.atlas.compute` gives their
Hermite data, deterministic equivalents and cached Monte Carlo (common random numbers) at the
four settings of :func:`attn_lib.studies.atlas.default_settings` (``c = 2``), every ``f`` at the
same ``gamma / tau`` as ridge regression at ``gamma =`` :data:`attn_lib.studies.atlas.GAMMA`
(the book's scale convention, ``compute(..., matched=True)``).

The public functions take the chapter's parameters as keyword arguments: ``names``,
``partners``, ``reflect`` (of :func:`~attn_lib.studies.atlas.catalogue`), ``n_sweep`` (interior
points of the ``a1`` sweep), ``n``, ``trials`` (at least 3: the jackknife standard errors need
them) and ``seed``; the atlas behind them is computed once per parameter set. Every claim built
from the draws is decided at the Student t quantile of its number of draws
(:func:`attn_lib.book.claims.threshold`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from .. import style
from ..claims import Z, Claim, equivalent, exceeds, less, threshold
from ..page import Figure, markdown_table
from ...model import nonlinearity
from ...model.setting import Setting
from ...simulation.trials import standard_error
from ...studies import atlas, sweeps

__all__ = ["SMALL", "overview", "gamma_choice", "tables", "error_ratio",
           "paired_deviations", "shift_ladder", "finite_size", "reflection"]

#: The settings with a small coherent shift ``delta``.
SMALL = ("random", "aligned", "orthogonal")
#: Marker and colour of each kind of entry (partners and sweep points by their ``h``).
_KIND_STYLE = {
    "named": ("o", style.color("attention")),
    "partner [cos]": ("s", style.color("cos")),
    "partner [sign]": ("D", style.color("sign")),
    "reflected": ("^", style.color("relu")),
    "sweep [cos]": ("v", style.color("cos")),
    "sweep [sign]": ("<", style.color("sign")),
}
_FINE = np.linspace(0.0, 1.0, 21)  # a1^2/nu of the DE curves (one Hermite quadrature each)


def _settings() -> dict[str, Setting]:
    return atlas.default_settings()  # c = 2: random, aligned, orthogonal, strong


@functools.lru_cache(maxsize=4)
def _atlas(names: tuple[str, ...], partners: tuple[str, ...], reflect: tuple[str, ...],
           n_sweep: int, n: int, trials: int, seed: int, finite_size: bool) -> atlas.Atlas:
    sweep_ratios = np.linspace(0.0, 1.0, n_sweep + 2)[1:-1]
    entries = atlas.catalogue(names, partners, reflect, sweep_ratios)
    return atlas.compute(entries, _settings(), atlas.GAMMA, n=n, trials=trials, seed=seed,
                         finite_size=finite_size, matched=True)


def _load(names: Sequence[str], partners: Sequence[str], reflect: Sequence[str], n_sweep: int,
          n: int, trials: int, seed: int, finite_size: bool = False) -> atlas.Atlas:
    if isinstance(trials, (int, np.integer)) and not isinstance(trials, bool) and trials < 3:
        raise ValueError(f"trials must be at least 3 (the jackknife standard errors of the "
                         f"chapter need them), got {trials}")
    return _atlas(tuple(names), tuple(partners), tuple(reflect), n_sweep, n, trials, seed,
                  finite_size)


def _category(entry: atlas.Entry) -> str:
    """Key of :data:`_KIND_STYLE`: the kind, with the mixed-in ``h`` for partners and sweeps."""
    if entry.kind in ("partner", "sweep"):  # a mixture: a Nonlinearity with its base h
        return f"{entry.kind} [{cast(nonlinearity.Nonlinearity, entry.f).base}]"
    return entry.kind


def _finite(A: atlas.Atlas) -> np.ndarray:
    """The finite-size theory of an atlas computed with ``finite_size=True``."""
    assert A.finite is not None
    return A.finite


def _categories(A: atlas.Atlas) -> np.ndarray:
    return np.array([_category(e) for e in A.entries])


def overview(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
             n_sweep: int, n: int, trials: int, seed: int = 0) -> dict[str, Any]:
    r"""Numbers of the introduction and the check that the DE sees ``a1^2`` only.

    The sign check compares the DE of ReLU and of its reflection (``a1 -> -a1``) over
    ``gamma`` in ``logspace(-3, 1, 9)`` at the four settings and at one where
    ``(mu^T w_K)(mu^T w_Q) < 0``.

    Returns
    -------
    dict
        ``n_f`` (functions in the atlas), ``n_tok``, ``p_tok``, ``n_trials``, ``gamma``
        (ridge regression's ridge parameter), ``gamma_zero`` and ``gamma_linear`` (attention's at
        the same ``gamma / tau`` for ``a1 = 0`` and for a linear ``f``, both at ``nu = 1``),
        ``t_quantile`` (the Student t threshold of a claim on ``trials`` draws, in standard
        errors), ``delta_<setting>`` (coherent shift of each setting at ``n``) and
        ``sign_de_gap`` (largest DE difference of the pair).
    """
    A = _load(names, partners, reflect, n_sweep, n, trials, seed)
    settings = _settings()
    out: dict[str, Any] = {"n_f": len(A.entries), "n_tok": n, "p_tok": settings["random"].p(n),
                           "n_trials": trials, "gamma": atlas.GAMMA,
                           "t_quantile": threshold(Z, trials)}
    for key, ratio in (("zero", 0.0), ("linear", 1.0)):
        s = dataclasses.replace(settings["random"], f=atlas.mixture_for_ratio(ratio))
        out[f"gamma_{key}"] = float(sweeps.matched_gamma(s, atlas.GAMMA))
    out.update({f"delta_{key}": d for key, d in A.deltas().items()})
    twisted = dataclasses.replace(settings["aligned"], cos_mu_wq=-1.0, cos_wk_wq=-1.0, wq_norm=0.5)
    pair = [nonlinearity.normalised("relu"), nonlinearity.reflected("relu")]
    de_pair = sweeps.equivalents([dataclasses.replace(s, f=f)
                                  for s in [*settings.values(), twisted] for f in pair],
                                 np.logspace(-3, 1, 9)).reshape(-1, 2, 9)
    out["sign_de_gap"] = float(np.abs(de_pair[:, 0] - de_pair[:, 1]).max())
    return out


def gamma_choice() -> Figure:
    r"""DE of the attention error along the mixture family against ridge's ``gamma``, per setting.

    Four panels (one per setting), five curves ``a1^2 / nu`` in ``{0, 0.25, ..., 1}``, each ``f``
    at the same ``gamma / tau`` as ridge regression at the ``gamma`` of the x axis
    (``logspace(-3, 1, 21)``); the dotted line marks the atlas's ``gamma``.

    Returns
    -------
    Figure
        Numbers: ``contrast_<setting>``, the DE at ``a1 = 0`` over that of linear attention
        (``a1^2 / nu = 1``) at the atlas's ``gamma``, both at equal ``gamma / tau``.
    """
    import matplotlib.pyplot as plt

    gammas = np.logspace(-3, 1, 21)
    ratios = _FINE[::5]
    shades = plt.cm.viridis(np.linspace(0.0, 0.9, ratios.size))
    fig, axes = plt.subplots(1, 4, figsize=(13.5, 3.6), sharey=True)
    out: dict[str, Any] = {}
    for ax, (key, s) in zip(axes, _settings().items()):
        curves = atlas.mixture_theory(s, ratios, gammas, matched=True)
        for r, curve, col in zip(ratios, curves, shades):
            style.plot_theory(ax, gammas, curve, label=f"$a_1^2/\\nu = {r:.2f}$", color=col)
        ax.axvline(atlas.GAMMA, color="0.5", linestyle=":", linewidth=1.2)
        at = atlas.mixture_theory(s, [0.0, 1.0], atlas.GAMMA, matched=True)
        out[f"contrast_{key}"] = float(at[0] / at[1])
        style.label_axes(ax, r"ridge's $\gamma$ (each $f$ at equal $\gamma/\tau$)",
                         r"DE error $E(\gamma)$" if key == "random" else "",
                         title=f"{key} ($c = {s.c:g}$)", logx=True, legend=False)
    axes[0].legend(fontsize=8)
    return Figure(fig, out)


def tables(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
           n_sweep: int, n: int, trials: int, seed: int = 0) -> dict[str, Any]:
    r"""The three tables of the atlas (Markdown) and the numbers quoted next to them.

    Returns
    -------
    dict
        ``hermite_table`` (``kind, a1, a2, a1^2/nu`` of every function, sorted by
        ``a1^2/nu``), ``nu_err`` (largest ``|nu - 1|``); ``errors_table`` (the named functions:
        per setting the DE and the simulated mean ± its standard error), ``errors_table_more``
        (the same for the partners, reflections and the sweep), ``ridge_<setting>`` (ridge DE);
        ``groups_table`` (per group of equal ``a1^2/nu`` and setting, the relative spread of the
        simulated means and the largest paired ``|z|``,
        :meth:`~attn_lib.studies.atlas.Atlas.groups_summary`).
    """
    A = _load(names, partners, reflect, n_sweep, n, trials, seed)
    settings = list(A.settings)
    table = A.table()
    hermite_table = table[["kind", "a1", "a2", "a1^2/nu"]].sort_values("a1^2/nu", kind="stable")
    errors = table[["a1^2/nu"]].copy()
    for key in settings:
        errors[f"DE, {key}"] = table[f"DE {key}"]
        errors[f"simulation, {key}"] = [f"{m:.4f} ± {e:.4f}"
                                        for m, e in zip(table[f"MC {key}"], table[f"SEM {key}"])]
    errors = errors.sort_values("a1^2/nu", kind="stable")
    named = (table["kind"] == "named").reindex(errors.index)
    wide = A.groups_summary().pivot(index="group", columns="setting",
                                    values=["rel. spread", "max |z|"])
    wide = wide.reindex(columns=settings, level=1)
    wide.columns = [f"{'max $|z|$' if value == 'max |z|' else value} ({key})"
                    for value, key in cast("pd.MultiIndex", wide.columns)]
    de_cols = ["a1^2/nu"] + [c for c in errors.columns if c.startswith("DE")]
    out: dict[str, Any] = {
        "nu_err": float(np.abs(table["nu"] - 1.0).max()),
        "hermite_table": _markdown(hermite_table, ".4f", ["a1", "a2", "a1^2/nu"]),
        "errors_table": _markdown(errors[named.to_numpy()], ".4f", de_cols),
        "errors_table_more": _markdown(errors[~named.to_numpy()], ".4f", de_cols),
        "groups_table": _markdown(wide, ".2f", list(wide.columns)),
    }
    out.update({f"ridge_{key}": value for key, value in zip(settings, A.ridge_theory)})
    return out


#: Column headers of the atlas's tables, in the book's notation.
_HEADERS = {"f": "$f$", "a1": "$a_1$", "a2": "$a_2$", "a1^2/nu": "$a_1^2/\\nu$"}


def _markdown(frame: Any, spec: str, columns: Sequence[str]) -> Any:
    """A data frame (its index as the first column) as a Markdown table, ``columns`` at ``spec``.

    Headers of :data:`_HEADERS` are written in math.
    """
    rows = [{_HEADERS.get(k, k): v for k, v in row.items()}
            for row in frame.reset_index().to_dict("records")]
    return markdown_table(rows, dict.fromkeys([_HEADERS.get(c, c) for c in columns], spec))


def error_ratio(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
                n_sweep: int, n: int, trials: int, seed: int = 0) -> Figure:
    r"""Interpolation error against ``a1^2 / nu``, one panel per setting.

    The line is the DE along the mixture family, the dashed line the ridge DE, markers the
    simulated means ± one standard error of every function, by kind (slightly offset
    horizontally per kind); every ``f`` at the same ``gamma / tau`` as ridge.

    Returns
    -------
    Figure
        Numbers: ``random_monotone`` (Markdown: whether the DE on random inputs is monotone in
        ``a1^2 / nu``), ``r2_<setting>`` (share of the variance of the simulated means explained
        by the DE, :meth:`~attn_lib.studies.atlas.Atlas.explained`) and ``de_range_<setting>``
        (range of the DE across the atlas).
    """
    import matplotlib.pyplot as plt
    from IPython.display import Markdown

    A = _load(names, partners, reflect, n_sweep, n, trials, seed)
    cats, ratio, deltas = _categories(A), A.ratio, A.deltas()
    offsets = np.linspace(-0.015, 0.015, len(_KIND_STYLE))  # small horizontal offsets per kind
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (k, (key, s)) in zip(axes.ravel(), enumerate(A.settings.items())):
        style.plot_theory(ax, _FINE, atlas.mixture_theory(s, _FINE, atlas.GAMMA, matched=True),
                          label="attention (DE)", color="0.2")
        ax.axhline(A.ridge_theory[k], color=style.color("ridge"), linestyle="--", label="ridge (DE)")
        for (cat, (marker, col)), shift in zip(_KIND_STYLE.items(), offsets):
            sel = cats == cat
            if sel.any():
                style.plot_sim(ax, ratio[sel] + shift, A.mean[sel, k], A.sem[sel, k], fmt=marker,
                               color=col, label=f"{cat} (simulation)")
        style.label_axes(ax, r"$a_1^2/\nu$", r"interpolation error $E(\gamma)$", legend=False,
                         title=f"{key}: $\\delta =$ {deltas[key]:.2f}, $n = {n}$, "
                               f"equal $\\gamma/\\tau$")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8)

    steps = np.diff(atlas.mixture_theory(A.settings["random"], _FINE, atlas.GAMMA, matched=True))
    monotone = np.all(steps < 0) or np.all(steps > 0)
    out: dict[str, Any] = {"random_monotone": Markdown("is monotone" if monotone else
                                                       "is not even monotone")}
    for k, (key, r2) in enumerate(zip(A.settings, A.explained())):
        out[f"r2_{key}"] = r2
        out[f"de_range_{key}"] = np.ptp(A.theory[:, k])
    return Figure(fig, out)


def paired_deviations(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
                      n_sweep: int, n: int, trials: int, seed: int = 0) -> Figure:
    r"""Paired deviation of every group member from its named function, per setting.

    For each group of equal ``a1^2 / nu`` (x axis) the mean per-draw difference of a member's
    error and the named function's, in % of the DE, with error bars of one paired standard
    error; one panel per setting.

    Returns
    -------
    Figure
        Numbers, for the (group, setting) cells of :data:`SMALL` (``_small``) and of the strong
        setting (``_strong``): ``n_cells_*``, ``n_sig_*`` (cells with ``max |z|`` beyond
        ``z_max``, the Student t threshold of the draws, :func:`~attn_lib.book.claims.threshold`),
        ``spread_*_median``, ``spread_*_max`` (relative spread in %); ``z_max``;
        ``sem_rel_small`` (median standard error of one mean, % of the mean); ``worst_small``
        (Markdown: group and setting of the largest ``|z|``), ``worst_small_z``; ``pair_small``,
        ``pair_small_se`` and ``pair_small_label`` (Markdown): the largest ``|paired
        difference|`` of a member and its named function over :data:`SMALL`, in % of the DE,
        its standard error and "member (setting)";
        ``verdict_small`` (the equivalence claim of :func:`_equality_claim`). In the strong setting, deviations from the DE
        in %: ``dev_cos_strong``, ``dev_sign_strong`` (partners, mean), ``dev_named_strong``
        (named functions, mean), ``dev_min_strong``/``dev_max_strong`` with
        ``dev_min_label``/``dev_max_label`` (extreme named functions, Markdown) and
        ``closest_kind`` (Markdown: the kind closest to the DE on average).
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    A = _load(names, partners, reflect, n_sweep, n, trials, seed)
    groups, cats = A.groups(), _categories(A)
    fig, axes = plt.subplots(1, 4, figsize=(13.5, 4.2), sharey=True)
    for k, (ax, (key, delta)) in enumerate(zip(axes, A.deltas().items())):
        for g, idx in enumerate(groups.values()):
            for j, i in enumerate(idx[1:]):
                m, se = A.paired(i, idx[0])
                marker, col = _KIND_STYLE[_category(A.entries[i])]
                x = g + (j - (len(idx) - 2) / 2) * 0.18
                style.plot_sim(ax, x, 100 * m[k] / A.theory[idx[0], k],
                               100 * se[k] / A.theory[idx[0], k], fmt=marker, color=col)
        ax.axhline(0.0, color="0.3", linewidth=1)
        ax.set_xticks(range(len(groups)), list(groups), rotation=60, ha="right", fontsize=8)
        style.label_axes(ax, "", "member minus named function (% of DE)" if k == 0 else "",
                         title=f"{key} ($\\delta =$ {delta:.2f})", legend=False)
    handles = [Line2D([], [], marker=m_, color=c_, linestyle="", markerfacecolor="white")
               for m_, c_ in _KIND_STYLE.values()]
    fig.legend(handles, list(_KIND_STYLE), loc="outside lower center", ncol=6, fontsize=8)
    return Figure(fig, {**_group_numbers(A), **_strong_deviations(A, cats)})


def _group_numbers(A: atlas.Atlas) -> dict[str, Any]:
    from IPython.display import Markdown

    summary = A.groups_summary()
    small = summary[summary.setting.isin(SMALL)]
    strong = summary[summary.setting == "strong"]
    ks_small = [list(A.settings).index(key) for key in SMALL]
    worst = small.loc[cast(Any, small["max |z|"].idxmax())]
    k = threshold(Z, A.attention.shape[2])
    pairs = [(100 * m[j] / A.theory[idx[0], j], 100 * se[j] / A.theory[idx[0], j],
              f"{A.labels[i]} ({key})")
             for idx in A.groups().values() for i in idx[1:]
             for m, se in [A.paired(i, idx[0])] for j, key in zip(ks_small, SMALL)]
    big = max(pairs, key=lambda v: abs(v[0]))
    return {
        "pair_small": float(big[0]), "pair_small_se": float(big[1]),
        "pair_small_label": Markdown(big[2]),
        "z_max": k, "n_cells_small": len(small), "n_sig_small": int((small["max |z|"] > k).sum()),
        "spread_small_max": 100 * small["rel. spread"].max(),
        "spread_small_median": 100 * small["rel. spread"].median(),
        "n_cells_strong": len(strong), "n_sig_strong": int((strong["max |z|"] > k).sum()),
        "spread_strong_median": 100 * strong["rel. spread"].median(),
        "spread_strong_max": 100 * strong["rel. spread"].max(),
        "sem_rel_small": 100 * float(np.median(A.sem[:, ks_small] / A.mean[:, ks_small])),
        "worst_small": Markdown(f"{worst['group']} ({worst['setting']})"),
        "worst_small_z": worst["max |z|"], "verdict_small": _equality_claim(A, ks_small),
    }


#: Margin of "equal a1^2/nu gives equal errors", in % of the DE: at the atlas's gamma the
#: a1^2/nu axis changes the small-delta errors by factors 2.4 (orthogonal) to 3.1 (aligned)
#: (``contrast_*`` of :func:`gamma_choice`), so 10 % is a small fraction of the effect of a1^2/nu.
EQUAL_MARGIN = 10.0


def _joint(verdicts: list[bool | None], what: str, margin: str,
           draws: int) -> tuple[bool | None, str]:
    """Joint verdict of equivalence checks and its evidence.

    ``False`` if any check differs, ``True`` if all are shown equal, else undecided ``None``
    (``None`` for no checks); the evidence counts the ``what`` shown equal, shown to differ and
    undecided against ``margin`` at the Student t threshold of ``draws`` draws.
    """
    holds = (None if not verdicts else False if False in verdicts
             else True if all(verdicts) else None)
    n_eq, n_diff = verdicts.count(True), verdicts.count(False)
    return holds, (f"{len(verdicts)} {what} against a margin of {margin}, each at "
                   f"{threshold(Z, draws):.3g} s.e. (t with {draws - 1} d.o.f.): "
                   f"{n_eq} shown equal, {n_diff} shown to differ by more, "
                   f"{len(verdicts) - n_eq - n_diff} undecided")


def _equality_claim(A: atlas.Atlas, ks: Sequence[int]) -> Claim:
    """Equivalence of every group member with its named function at the settings ``ks``.

    Per (member, setting) the paired difference in % of the named function's DE is tested by
    :func:`~attn_lib.book.claims.equivalent` against :data:`EQUAL_MARGIN` at the Student t
    threshold of the draws (the pairs of draws). ``holds`` is ``True`` when every pair is shown
    equal, ``False`` when some pair is shown to differ by more, ``None`` otherwise (too little
    power). The prose picks its words by the verdict (``required=False``).
    """
    T = A.attention.shape[2]
    pairs = []
    for idx in A.groups().values():
        for i in idx[1:]:
            m, se = A.paired(i, idx[0])
            for k in ks:
                scale = 100 / A.theory[idx[0], k]
                pairs.append(equivalent("pair", m[k] * scale, se[k] * scale, draws=T,
                                        margin=EQUAL_MARGIN, wording=("", "", "")))
    margin = f"{EQUAL_MARGIN:.0f} % of the error"
    holds, evidence = _joint([c.holds for c in pairs], "(member, setting) pairs", margin, T)
    return Claim("verdict_small", holds, evidence,
                 (f"equal a₁²/ν gives simulated errors equal within {margin}",
                  f"some functions of equal a₁²/ν differ by more than {margin}",
                  f"whether functions of equal a₁²/ν give errors equal within {margin} is not "
                  f"decided at this profile (too few draws)"),
                 required=False)


def _strong_deviations(A: atlas.Atlas, cats: np.ndarray) -> dict[str, Any]:
    from IPython.display import Markdown

    dev = 100 * (A.mean[:, -1] / A.theory[:, -1] - 1)  # strong setting: the last
    named = np.flatnonzero(cats == "named")
    lo, hi = named[np.argmin(dev[named])], named[np.argmax(dev[named])]
    closeness = {cat: np.abs(dev[cats == cat]).mean() for cat in _KIND_STYLE if (cats == cat).any()}
    return {
        "dev_cos_strong": dev[cats == "partner [cos]"].mean(),
        "dev_sign_strong": dev[cats == "partner [sign]"].mean(),
        "dev_named_strong": dev[named].mean(),
        "dev_min_strong": dev[lo], "dev_max_strong": dev[hi],
        "dev_min_label": Markdown(A.labels[lo]), "dev_max_label": Markdown(A.labels[hi]),
        "closest_kind": Markdown(f"*{min(closeness, key=lambda c: closeness[c])}*"),
    }


def shift_ladder(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
                 n_sweep: int, n: int, trials: int, n_ladder: Sequence[int],
                 seed: int = 0) -> Figure:
    r"""Simulation minus DE in the strong setting against ``delta``, at the sizes ``n_ladder``.

    The groups of tanh and ReLU (those present in the atlas) are simulated in the strong setting
    at every ``n`` of the ladder (fixed ``c``, SNR and weights: the DE is fixed, ``delta``
    falls like ``n^(-1/2)``); one panel per group, mean deviation ± one standard error in % of
    the DE, one line per member.

    Returns
    -------
    Figure
        Numbers: ``ladder_n0``, ``ladder_n1`` (first and last ``n``), ``ladder_d0``,
        ``ladder_d1`` (their ``delta``), ``ladder_spread0``, ``ladder_spread1`` (range of the
        deviations across all members, percentage points); ``ladder_q0``, ``ladder_q1`` and their
        ``_se`` (the noise-corrected squared spread :func:`_spread_stat`, in squared percentage
        points, ± jackknife standard error); ``ladder_verdict``: the
        :func:`~attn_lib.book.claims.exceeds` claim ``q0 > q1`` (the spread shrinks as ``n``
        grows; ``draws=trials``: the jackknife has ``trials - 1`` degrees of freedom), and
        ``ladder_conclusion`` (Markdown: what follows from its verdict).
    """
    import matplotlib.pyplot as plt
    from IPython.display import Markdown

    A = _load(names, partners, reflect, n_sweep, n, trials, seed)
    ladder_groups, members, ladder = _ladder(A, trials, n_ladder, seed)
    deltas = np.array([run.deltas()["strong"] for run in ladder])
    dev = np.array([100 * (run.mean[:, 0] / run.theory[:, 0] - 1) for run in ladder])  # (N, F)
    dev_se = np.array([100 * run.sem[:, 0] / run.theory[:, 0] for run in ladder])
    fig, axes = plt.subplots(1, len(ladder_groups), figsize=(5.3 * len(ladder_groups), 4.0),
                             sharey=True, squeeze=False)
    offset = 0
    for ax, (label, idx) in zip(axes[0], ladder_groups.items()):
        for j in range(len(idx)):
            e = members[offset + j]
            marker, col = _KIND_STYLE[_category(e)]
            style.plot_sim(ax, deltas, dev[:, offset + j], dev_se[:, offset + j],
                           fmt=marker + "-", color=col, label=e.label)
        offset += len(idx)
        ax.axhline(0.0, color="0.3", linewidth=1)
        style.label_axes(ax, r"coherent shift $\delta$ (larger $n$ to the left)",
                         r"simulation minus DE (% of DE)", title=f"group of {label}, strong setting")
    spread = np.ptp(dev, axis=1)  # across all ladder members, per n
    q = [_spread_jackknife(100 * (run.attention[:, 0] / run.theory[:, :1] - 1)) for run in ladder]
    verdict = exceeds("ladder_verdict", q[0][0], q[0][1], q[-1][0], q[-1][1], draws=trials,
                      required=False,
                      wording=("shrinks", "grows", "neither shrinks nor grows beyond the noise "
                               "of these draws (not decided at this profile)"))
    conclusion = {
        True: "The separation of functions with equal a₁²/ν is therefore a finite-δ effect, which "
              "the proportional limit removes as δ ∝ 1/√n falls; at a fixed size with a large SNR "
              "or strongly aligned weights it need not be small.",
        False: "The separation grows as δ falls: over this range of n it is not a finite-δ effect.",
        None: "So these draws cannot tell whether the separation is a finite-δ effect."}
    return Figure(fig, {
        "ladder_n0": n_ladder[0], "ladder_n1": n_ladder[-1], "ladder_d0": deltas[0],
        "ladder_d1": deltas[-1], "ladder_spread0": spread[0], "ladder_spread1": spread[-1],
        "ladder_q0": q[0][0], "ladder_q0_se": q[0][1], "ladder_q1": q[-1][0],
        "ladder_q1_se": q[-1][1], "ladder_verdict": verdict,
        "ladder_conclusion": Markdown(conclusion[verdict.holds])})


def _ladder(A: atlas.Atlas, trials: int, n_ladder: Sequence[int], seed: int,
            finite_size: bool = False) -> tuple[dict[str, list[int]], list[atlas.Entry], list[atlas.Atlas]]:
    """The groups of tanh and ReLU (those in ``A``), their members, and one strong-setting
    :class:`~attn_lib.studies.atlas.Atlas` of the members per ``n`` of ``n_ladder``."""
    groups = A.groups()
    ladder_groups: dict[str, list[int]] = {g: groups[g] for g in ("tanh", "relu") if g in groups}
    members = [A.entries[i] for idx in ladder_groups.values() for i in idx]
    strong_only = {"strong": A.settings["strong"]}
    ladder = [atlas.compute(members, strong_only, atlas.GAMMA, n=k, trials=trials, seed=seed,
                            finite_size=finite_size, matched=True) for k in n_ladder]
    return ladder_groups, members, ladder


def _spread_stat(dev: np.ndarray) -> float:
    """Squared spread of the mean deviations across functions, corrected for their noise.

    ``dev`` has shape ``(F, T)`` (function, draw). With ``u = dev - dev.mean(axis=0)`` (each
    draw's deviation from the draws' across-function mean, paired), the statistic is
    ``mean_f (ubar_f^2 - se(ubar_f)^2)``: an unbiased estimate of the mean squared true
    deviation from the across-function mean, so that a smaller Monte Carlo noise at larger ``n``
    does not by itself make the spread look smaller.
    """
    u = dev - dev.mean(axis=0)
    T = u.shape[1]
    return float(np.mean(u.mean(axis=1) ** 2 - u.var(axis=1, ddof=1) / T))


def _spread_jackknife(dev: np.ndarray) -> tuple[float, float]:
    """:func:`_spread_stat` of ``dev`` (shape ``(F, T)``), :func:`_jackknife` standard error."""
    return _jackknife(_spread_stat, dev)


def _jackknife(stat: Any, x: np.ndarray) -> tuple[float, float]:
    """``stat(x)`` and its delete-one jackknife standard error over the draws (last axis of ``x``).

    ``sqrt((T - 1) / T sum_t (stat_(t) - mean_t stat_(t))^2)`` with ``stat_(t)`` computed without
    draw ``t``. Needs ``T >= 3`` draws (each jackknife sample keeps two), else ``ValueError``.
    """
    T = x.shape[-1]
    if T < 3:
        raise ValueError(f"the jackknife needs at least 3 draws, got {T}")
    q = float(stat(x))
    loo = np.array([stat(np.delete(x, t, axis=-1)) for t in range(T)])
    return q, float(np.sqrt((T - 1) / T * np.sum((loo - loo.mean()) ** 2)))


def finite_size(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
                n_sweep: int, n: int, trials: int, n_ladder: Sequence[int],
                seed: int = 0) -> Figure:
    r"""Simulated error against the finite-size theory: the strong setting and the ladder.

    Left (log axes): every function of the atlas in the strong setting at ``n``, the simulated
    mean ± one standard error against the finite-size theory
    (:func:`attn_lib.studies.atlas.finite_size_theory`; markers by kind) and, in grey, against
    the proportional limit (DE); the diagonal is equality. Right: the members of the groups of
    tanh and ReLU at every ``n`` of ``n_ladder`` (as in :func:`shift_ladder`), against the
    finite-size theory at that ``n``.

    Returns
    -------
    Figure
        Numbers: ``fs_r2_<setting>`` (share of the variance of the simulated means explained by
        the finite-size theory, :meth:`~attn_lib.studies.atlas.Atlas.explained`); in the strong
        setting the numbers and claims of :func:`_finite_numbers`; with aligned weights (small
        ``delta``) ``fs_within_r2_aligned`` (the within-group share) and
        ``fs_spread_aligned_median``, ``mc_spread_aligned_median`` (median relative spread
        within a group, %, of the finite-size theory and of the simulation); along the ladder
        ``fs_ladder_spread0``, ``fs_ladder_spread1`` (range of ``FS / DE - 1`` across the
        members, in percentage points, at the first and last ``n``: the theory's counterpart of
        ``ladder_spread0/1``)
        and ``fs_ladder_dev_max``, ``fs_ladder_z_max`` (largest ``|MC - FS| / FS`` in % over
        the ladder, and the largest ``|MC - FS| / se``).
    """
    import matplotlib.pyplot as plt

    A = _load(names, partners, reflect, n_sweep, n, trials, seed, finite_size=True)
    assert A.finite is not None  # finite_size=True
    k = list(A.settings).index("strong")
    cats = _categories(A)
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.8))
    ax = axes[0]
    ax.errorbar(A.theory[:, k], A.mean[:, k], A.sem[:, k], fmt=".", color="0.6",
                elinewidth=0.8, label="all, against the DE (limit)")
    for cat, (marker, col) in _KIND_STYLE.items():
        sel = cats == cat
        if sel.any():
            style.plot_sim(ax, A.finite[sel, k], A.mean[sel, k], A.sem[sel, k], fmt=marker,
                           color=col, label=f"{cat}, against the finite-size theory")
    _diagonal(ax, A.finite[:, k], A.theory[:, k], A.mean[:, k])
    style.label_axes(ax, r"theory $E(\gamma)$", r"simulation $E(\gamma)$", legend=False,
                     title=f"strong setting, $n = {n}$ ($\\delta =$ "
                           f"{A.deltas()['strong']:.2f}), every $f$", logx=True, logy=True)
    ax.legend(fontsize=7, loc="upper left")

    ladder = _ladder(A, trials, n_ladder, seed, finite_size=True)[2]
    ax = axes[1]
    for run, col in zip(ladder, plt.cm.viridis(np.linspace(0.0, 0.85, len(ladder)))):
        style.plot_sim(ax, _finite(run)[:, 0], run.mean[:, 0], run.sem[:, 0], fmt="o", color=col,
                       label=f"$n = {run.n}$ ($\\delta =$ {run.deltas()['strong']:.2f})")
    _diagonal(ax, *[_finite(run)[:, 0] for run in ladder], *[run.mean[:, 0] for run in ladder])
    style.label_axes(ax, r"finite-size theory $E(\gamma)$", r"simulation $E(\gamma)$",
                     title="groups of tanh and ReLU, strong setting", legend=False)
    ax.legend(fontsize=8, loc="upper left")

    out: dict[str, Any] = {f"fs_r2_{key}": r2
                           for key, r2 in zip(A.settings, A.explained("finite"))}
    out.update(_finite_numbers(A, k))
    ka = list(A.settings).index("aligned")
    out["fs_within_r2_aligned"] = float(A.explained("finite", within_groups=True)[ka])
    out["fs_spread_aligned_median"] = 100 * float(np.median(_relative_spreads(A, A.finite, ka)))
    out["mc_spread_aligned_median"] = 100 * float(np.median(_relative_spreads(A, A.mean, ka)))
    spread = [100 * np.ptp(_finite(run)[:, 0] / run.theory[:, 0]) for run in ladder]
    dev = np.array([run.deviation()[0][:, 0] for run in ladder])   # (N, members)
    se = np.array([run.deviation()[1][:, 0] for run in ladder])
    out.update({"fs_ladder_spread0": spread[0], "fs_ladder_spread1": spread[-1],
                "fs_ladder_dev_max": 100 * float(np.abs(dev).max()),
                "fs_ladder_z_max": float(np.max(np.abs(dev) / se))})
    return Figure(fig, out)


def _diagonal(ax: Any, *values: np.ndarray) -> None:
    """The line ``y = x`` over the range of ``values`` (theory equals simulation)."""
    lo, hi = min(np.min(v) for v in values), max(np.max(v) for v in values)
    pad = 0.05 * (hi - lo)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.3", linewidth=1, zorder=1)


#: Margin of "the simulation agrees with the finite-size theory", in % of the theory: a sixth of
#: the within-group spread it is meant to resolve in the strong setting (median 60 % of the
#: error in the full profile, ``spread_strong_median`` of :func:`paired_deviations`), and above
#: the median deviation measured there (4.2 %, ``fs_dev_median``).
FS_MARGIN = 10.0


def _relative_spreads(A: atlas.Atlas, values: np.ndarray, k: int) -> np.ndarray:
    """Per group of equal ``a1^2 / nu``: max - min of ``values[:, k]`` (theory or simulated means)
    over the group's mean simulated error, as ``rel. spread`` of
    :meth:`~attn_lib.studies.atlas.Atlas.groups_summary`."""
    return np.array([np.ptp(values[g, k]) / A.mean[g, k].mean() for g in A.groups().values()])


def _finite_numbers(A: atlas.Atlas, k: int) -> dict[str, Any]:
    r"""Numbers of the finite-size theory against the simulation at setting ``k`` (strong).

    ``fs_r2_gain``: claim (:func:`~attn_lib.book.claims.exceeds`, required) that the share of
    variance explained by the finite-size theory exceeds the DE's; the difference of the two
    shares (``fs_r2_gain_value``) with its jackknife standard error (``fs_r2_gain_se``) over the
    draws (:func:`_jackknife`: the same draws
    enter both; ``draws`` the number of draws). ``fs_within_r2`` and ``fs_within_r2_se``: the
    share of the variance within the groups of equal ``a1^2 / nu`` (the DE's is 0) and its
    jackknife standard error. ``fs_spread_median``, ``fs_spread_max``: relative spread of the
    finite-size theory within a group (:func:`_relative_spreads`, %). ``fs_dev_max``, ``fs_dev_max_rel``,
    ``fs_dev_max_z``, ``fs_dev_max_label``: the largest ``|MC - FS|``, in % of FS, in standard
    errors, and its function; ``fs_dev_median``, ``de_dev_median``: median ``|MC - T| / T`` in
    % for either theory; ``fs_n_beyond`` of ``fs_n_f``: functions beyond the Student t
    threshold of the draws; ``fs_agrees``: the equivalence claim of :func:`_agreement_claim`;
    ``fs_cos_dev``, ``fs_cos_dev_se``: the mean of ``MC / FS - 1`` (in %) over the cosine
    partners and its standard error over the draws of its per-draw value (the partners share
    their draws); ``fs_cos_above``: claim (reported, :func:`~attn_lib.book.claims.less`) that
    the simulation lies below the finite-size theory there, ``fs_cos_dev < 0``.
    """
    assert A.finite is not None  # an atlas computed with finite_size=True
    from IPython.display import Markdown

    T = A.attention.shape[2]

    def share(att: np.ndarray, theory: str, within: bool = False) -> float:
        return float(dataclasses.replace(A, attention=att).explained(theory, within)[k])

    gain = _jackknife(lambda att: share(att, "finite") - share(att, "limit"), A.attention)
    within = _jackknife(lambda att: share(att, "finite", True), A.attention)
    fs_rel = _relative_spreads(A, A.finite, k)
    dev, se = A.deviation("finite")
    dev, se = dev[:, k], se[:, k]
    z = np.abs(dev) / se
    diff = np.abs(A.mean[:, k] - A.finite[:, k])
    worst = int(np.argmax(diff))
    cos = _categories(A) == "partner [cos]"
    per_draw = 100 * (A.attention[cos, k] / A.finite[cos, k, None] - 1).mean(axis=0)   # (T,)
    wording = ("explains more of the variance than", "explains less of the variance than",
               "is not decided at this profile to explain more or less of the variance than")
    return {
        "fs_r2_gain_value": gain[0], "fs_r2_gain_se": gain[1],
        "fs_r2_gain": exceeds("fs_r2_gain", gain[0], gain[1], draws=T, wording=wording),
        "fs_within_r2": within[0], "fs_within_r2_se": within[1],
        "fs_spread_median": 100 * float(np.median(fs_rel)),
        "fs_spread_max": 100 * float(fs_rel.max()),
        "fs_dev_max": float(diff[worst]), "fs_dev_max_rel": 100 * float(abs(dev[worst])),
        "fs_dev_max_z": float(z[worst]), "fs_dev_max_label": Markdown(A.labels[worst]),
        "fs_dev_median": 100 * float(np.median(np.abs(dev))),
        "de_dev_median": 100 * float(np.median(np.abs(A.deviation("limit")[0][:, k]))),
        "fs_n_beyond": int((z > threshold(Z, T)).sum()), "fs_n_f": len(A.entries),
        "fs_agrees": _agreement_claim(dev, se, T),
        "fs_cos_dev": float(per_draw.mean()),
        "fs_cos_dev_se": float(standard_error(per_draw, axis=0)),
        "fs_cos_above": less("fs_cos_above", float(per_draw.mean()),
                             float(standard_error(per_draw, axis=0)), draws=T, required=False,
                             wording=("lies below", "lies above",
                                      "is not decided at this profile to lie above or below")),
    }


def _agreement_claim(dev: np.ndarray, se: np.ndarray, draws: int) -> Claim:
    """Equivalence of the simulated mean and the finite-size theory for every function.

    Per function ``(MC - FS) / FS`` in % is tested by :func:`~attn_lib.book.claims.equivalent`
    against :data:`FS_MARGIN` at the Student t threshold of ``draws``; ``holds`` as in
    :func:`_equality_claim` (all shown equal, some shown to differ by more, otherwise
    undecided). Reported (``required=False``).
    """
    verdicts = [equivalent("fs", 100 * d, 100 * s, margin=FS_MARGIN, draws=draws,
                           wording=("", "", "")).holds for d, s in zip(dev, se)]
    margin = f"{FS_MARGIN:.0f} % of the theory"
    holds, evidence = _joint(verdicts, "functions", margin, draws)
    return Claim("fs_agrees", holds, evidence,
                 (f"agrees with the finite-size theory within {margin} for every function",
                  f"differs from the finite-size theory by more than {margin} for some "
                  f"functions",
                  f"agreement with the finite-size theory within {margin} for every function "
                  f"is not decided at this profile (too few draws)"),
                 required=False)


def reflection(*, names: Sequence[str], partners: Sequence[str], reflect: Sequence[str],
               n_sweep: int, n: int, trials: int, seed: int = 0) -> dict[str, Any]:
    r"""The paired difference of ``ReLU(-t)`` and ReLU in the simulation, in % of the DE.

    Returns
    -------
    dict
        ``refl_<setting>`` and ``refl_se_<setting>`` (the paired difference ``ReLU(-t) -
        ReLU`` in % of the DE and its standard error over the draws); ``refl_small_worst``
        (Markdown: the setting of :data:`SMALL` with the largest ``|difference|``) and its
        ``refl_worst``, ``refl_worst_se``; claim ``refl_equal`` (reported): the difference is
        within :data:`EQUAL_MARGIN` % in every setting of :data:`SMALL`
        (:func:`~attn_lib.book.claims.equivalent` at the Student t threshold of the draws, the
        joint verdict of :func:`_joint`).
    """
    from IPython.display import Markdown

    A = _load(names, partners, reflect, n_sweep, n, trials, seed)
    T = A.attention.shape[2]
    i, j = A.labels.index("relu"), A.labels.index("relu(-t)")
    m, se = A.paired(j, i)
    rel, rel_se = 100 * m / A.theory[i], 100 * se / A.theory[i]
    out: dict[str, Any] = {}
    for k, key in enumerate(A.settings):
        out[f"refl_{key}"], out[f"refl_se_{key}"] = float(rel[k]), float(rel_se[k])
    ks = [list(A.settings).index(key) for key in SMALL]
    worst = ks[int(np.argmax(np.abs(rel[ks])))]
    out.update(refl_small_worst=Markdown(list(A.settings)[worst]),
               refl_worst=float(rel[worst]), refl_worst_se=float(rel_se[worst]))
    margin = f"{EQUAL_MARGIN:.0f} % of the error"
    holds, evidence = _joint([equivalent("refl", rel[k], rel_se[k], margin=EQUAL_MARGIN,
                                         draws=T, wording=("", "", "")).holds for k in ks],
                             "settings", margin, T)
    out["refl_equal"] = Claim("refl_equal", holds, evidence,
                              (f"equal within {margin}", f"different by more than {margin}",
                               f"not decided at this profile to be equal within {margin}"),
                              required=False)
    return out
