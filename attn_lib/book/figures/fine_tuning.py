"""Figures and numbers of the chapter *Does fine-tuning find the alignment?*
(``book/14_fine_tuning.ipynb``).

The low-rank update ``W_K^T W_Q`` is trained by stochastic gradient descent
(:func:`attn_lib.studies.fine_tuning.train`, a fresh task each step, several seeds) in six cases:
``tanh`` (``a1 != 0``), ``cos`` (``a1 = 0``), masked ``softmax``, ``rank2`` (two weight pairs),
``generalisation`` (``tanh`` trained on the probe's test error) and ``strong`` (``tanh`` with the
coherent shift ``delta = snr / sqrt(p)`` of order one at the training size). Every case is
cached (:func:`attn_lib.cache.cached`). :func:`alignment` draws the cosines along training,
:func:`error_along` the error of the learned weights (Monte Carlo and theory) against ridge,
:func:`theory_check` the theory against Monte Carlo at the check size, and :func:`optimum` sets
the learned geometry against the theory's optimum. Intervals over training runs are Student t
intervals (95 %) over the seeds; the claims use :mod:`attn_lib.book.claims` with ``draws`` the
number of seeds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from ... import Setting, Softmax, cache, theory
from ...simulation import simulate
from ...simulation.trials import standard_error
from ...studies import fine_tuning as ft
from .. import style
from ..claims import equivalent, exceeds, less
from ..page import Figure, markdown_table

__all__ = ["CASES", "alignment", "error_along", "theory_check", "optimum"]

#: The training cases, in the order of the figures.
CASES = ("tanh", "cos", "softmax", "rank2", "generalisation", "strong")
_LABEL = {"tanh": r"$\tanh$ ($a_1 \neq 0$)", "cos": r"$\cos$ ($a_1 = 0$)",
          "softmax": "masked softmax", "rank2": r"$\tanh$, rank 2",
          "generalisation": r"$\tanh$, test-error objective",
          "strong": r"$\tanh$, $\delta$ of order one"}
_COL = {"K": style.color("attention", "C0"), "Q": style.color("ridge", "C1"), "KQ": "0.5"}


def _setting(case: str, c: float, snr: float, beta: float, strong_delta: float, n: int) -> Setting:
    """The task and model of ``case`` (weights unset: they are trained)."""
    if case == "cos":
        return Setting(c=c, snr=snr, f="cos")
    if case == "softmax":
        return Setting(c=c, snr=snr, attention=Softmax(beta))
    if case == "strong":
        p = Setting(c=c).p(n)
        return Setting(c=c, snr=strong_delta * float(np.sqrt(p)), f="tanh")
    return Setting(c=c, snr=snr, f="tanh")


def _half_width(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Half-width of the 95 % Student t interval of the mean over ``axis``."""
    k = values.shape[axis]
    return np.asarray(stats.t.ppf(0.975, k - 1) * standard_error(values, axis=axis))


def _case(case: str, P: dict[str, Any]) -> tuple[Setting, float, dict[str, np.ndarray]]:
    """``(setting, gamma, runs)`` of ``case``: the cached :func:`~attn_lib.studies.fine_tuning.train_seeds`."""
    s = _setting(case, P["c"], P["snr"], P["beta"], P["strong_delta"], P["n"])
    gamma = ft.probe_gamma(s, P["g"], P["n"])
    runs = cache.cached(ft.train_seeds, setting=s, n=P["n"], steps=P["steps"], lr=P["lr"],
                        gamma=gamma, seeds=list(range(P["seed"], P["seed"] + P["seeds"])),
                        r=2 if case == "rank2" else 1, init=P["init"],
                        objective="generalisation" if case == "generalisation" else "interpolation",
                        record=P["record"])
    return s, gamma, runs


def _cosines(runs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``|cos(mu, w_K)|``, ``|cos(mu, w_Q)|`` (row spaces for rank ``r``), ``(S, K)`` each, and
    for rank one ``cos(w_K, w_Q)`` times the sign of ``(mu^T w_K)(mu^T w_Q)``."""
    mu = runs["mu"]
    out = {"K": np.array([ft.alignment(mu, W) for W in runs["W_K"]]),
           "Q": np.array([ft.alignment(mu, W) for W in runs["W_Q"]])}
    if runs["W_K"].shape[2] == 1:
        k, q = runs["W_K"][:, :, 0], runs["W_Q"][:, :, 0]
        kq = np.sum(k * q, axis=2) / (np.linalg.norm(k, axis=2) * np.linalg.norm(q, axis=2))
        out["KQ"] = kq * np.sign((k @ mu) * (q @ mu))
    return out


def along(*, setting: Setting, mu: np.ndarray, W_K: np.ndarray, W_Q: np.ndarray, gamma: float,
          g: float, g_small: float, n: int, trials: int, seed: int) -> dict[str, np.ndarray]:
    """Theory and Monte Carlo at the weights ``W_K, W_Q`` (``(S, K, r, p)``) of a case.

    ``limit``, ``finite`` (at ``n`` tokens), ``mc``, ``mc_sem`` (``trials`` draws of
    :func:`attn_lib.simulate.errors` at ``n``), ``ridge`` (the ridge theory at the probe's
    ``gamma / tau = g``), ``delta`` (the coherent shift at ``n``), all ``(S, K)``; ``small``: the limit
    theory at ``gamma / tau = g_small`` and ``ridge_small``.
    """
    S, K = W_K.shape[:2]
    out = {k: np.empty((S, K)) for k in ("limit", "finite", "mc", "mc_sem", "delta", "small")}
    for i in range(S):
        for k in range(K):
            ls = ft.learned_setting(setting, mu, W_K[i, k], W_Q[i, k])
            out["limit"][i, k] = theory.attention_error(ls, [gamma])[0]
            out["finite"][i, k] = theory.attention_error(ls, [gamma], n=n)[0]
            out["small"][i, k] = theory.attention_error(ls, [g_small], relative=True)[0]
            r = simulate.errors(ls, [gamma], n=n, trials=trials, seed=seed + 1000 * i + k)
            assert r.attention is not None  # attention is simulated
            out["mc"][i, k], out["mc_sem"][i, k] = r.attention.mean[0], r.attention.sem[0]
            out["delta"][i, k] = ls.delta(n)
    plain = dataclasses.replace(setting, wk_norm=0.0, wq_norm=0.0)
    out["ridge"] = np.asarray(theory.ridge_error(plain, [g], relative=True))
    out["ridge_small"] = np.asarray(theory.ridge_error(plain, [g_small], relative=True))
    return out


def _along(case: str, P: dict[str, Any]) -> tuple[Setting, float, dict[str, np.ndarray],
                                                  dict[str, np.ndarray]]:
    s, gamma, runs = _case(case, P)
    a = cache.cached(along, setting=s, mu=runs["mu"], W_K=runs["W_K"], W_Q=runs["W_Q"],
                     gamma=gamma, g=P["g"], g_small=P["g_small"], n=P["n"], trials=P["train_trials"],
                     seed=P["seed"])
    return s, gamma, runs, a


def alignment(**P: Any) -> Figure:
    """Cosines of ``w_K, w_Q`` with ``mu`` along training, for ``tanh``, ``cos``, softmax and rank 2.

    One panel per case: ``|cos(mu, w_K)|`` and ``|cos(mu, w_Q)|`` (for rank 2 the cosine of ``mu``
    with each row space), mean over the seeds with its 95 % t band; for rank one also
    ``cos(w_K, w_Q)`` (signed so that aligned pairs are positive). Dashed: gradient descent on the
    theory itself (:func:`~attn_lib.studies.fine_tuning.theory_flow`) from the first seed's start,
    with the first seed's own trajectory (thin).

    Returns
    -------
    Figure
        Numbers ``ft_<case>_cos_k``, ``ft_<case>_cos_q`` (final mean), ``..._hw`` (95 % half
        width), claims ``ft_<case>_aligns`` (final minus start ``|cos(mu, w_K)|``, paired over
        seeds), ``ft_tanh_steps_09`` (the first recorded step where the mean exceeds 0.9, as words),
        ``ft_flow_*`` (the flow's final cosines and its gap to the first seed's SGD).
    """
    cases = ("tanh", "cos", "softmax", "rank2")
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6), sharey=True)
    numbers: dict[str, Any] = {"ft_seeds": P["seeds"], "ft_steps": P["steps"], "ft_n": P["n"],
                               "ft_lr": P["lr"], "ft_g": P["g"]}
    for ax, case in zip(axes, cases):
        s, gamma, runs = _case(case, P)
        steps, cos = runs["steps"], _cosines(runs)
        for key, name in (("K", r"$w_K$"), ("Q", r"$w_Q$"), ("KQ", r"$\cos(w_K, w_Q)$")):
            if key not in cos:
                continue
            m, hw = cos[key].mean(axis=0), _half_width(cos[key])
            lab = name if key == "KQ" else rf"$|\cos(\mu,$ {name}$)|$"
            ax.plot(steps, m, color=_COL[key], label=lab)
            ax.fill_between(steps, m - hw, m + hw, color=_COL[key], alpha=0.2, lw=0)
        d = cos["K"][:, -1] - cos["K"][:, 0]
        numbers[f"ft_{case}_cos_k"] = float(cos["K"][:, -1].mean())
        numbers[f"ft_{case}_cos_k_hw"] = float(_half_width(cos["K"][:, -1]))
        numbers[f"ft_{case}_cos_q"] = float(cos["Q"][:, -1].mean())
        numbers[f"ft_{case}_cos_q_hw"] = float(_half_width(cos["Q"][:, -1]))
        numbers[f"ft_{case}_aligns"] = exceeds(
            f"ft_{case}_aligns", float(d.mean()), float(standard_error(d, axis=0)), draws=len(d),
            wording=("turns the weights towards", "turns the weights away from",
                     "does not measurably turn the weights towards"),
            required=case != "cos")
        if case in ("tanh", "softmax"):
            stride = P["flow_stride"]
            first = ft.Run(steps, runs["W_K"][0], runs["W_Q"][0], runs["loss"][0], runs["mu"])
            fsteps, fl = cache.cached(_flow, setting=s, run_W_K=first.W_K, run_W_Q=first.W_Q,
                                      mu=first.mu, lr=P["lr"] * stride, gamma=gamma,
                                      steps=P["steps"] // stride,
                                      record=max(1, P["record"] // stride),
                                      n=P["n"] if P["flow_finite"] else None)
            ax.plot(fsteps * stride, fl[:, 0], "--", color=_COL["K"], lw=1.2,
                    label=r"theory's gradient flow, $w_K$")
            ax.plot(steps, cos["K"][0], ":", color=_COL["K"], lw=1.0, label="first seed (SGD)")
            last = np.searchsorted(steps, fsteps[-1] * stride)
            numbers[f"ft_flow_{case}_cos_k"] = float(fl[-1, 0])
            numbers[f"ft_flow_{case}_gap"] = float(np.max(np.abs(
                np.interp(steps[:last + 1], fsteps * stride, fl[:, 0]) - cos["K"][0, :last + 1])))
        style.label_axes(ax, "SGD step", "cosine" if case == "tanh" else "", title=_LABEL[case],
                         legend=False)
        ax.set_ylim(-0.05, 1.05)
        if case == "tanh":
            m = cos["K"].mean(axis=0)
            hit = np.flatnonzero(m > 0.9)
            numbers["ft_tanh_steps_09"] = (f"at step {int(steps[hit[0]])}" if hit.size
                                           else f"not within the {P['steps']} steps")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize=8)
    numbers["ft_flow_kind"] = ("the finite-size theory at the training size" if P["flow_finite"]
                               else "the proportional limit")
    return Figure(fig, numbers)


def _flow(*, setting: Setting, run_W_K: np.ndarray, run_W_Q: np.ndarray, mu: np.ndarray,
          lr: float, gamma: float, steps: int, record: int, n: int | None
          ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~attn_lib.studies.fine_tuning.theory_flow` as arrays: steps and ``(K, 3)`` rows
    ``|cos(mu, w_K)|, |cos(mu, w_Q)|, error (limit)``."""
    run = ft.Run(np.zeros(1), run_W_K, run_W_Q, np.zeros(0), mu)
    k, sets = ft.theory_flow(setting, run, lr, gamma, steps, record=record, n=n)
    rows = [[abs(x.cos_mu_wk), abs(x.cos_mu_wq), float(theory.attention_error(x, [gamma])[0])]
            for x in sets]
    return k, np.array(rows)


def error_along(**P: Any) -> Figure:
    """The error of the learned weights along training, Monte Carlo and theory, against ridge.

    One panel per case (``tanh``, softmax, ``strong``): Monte Carlo of the learned weights at the
    training size (``train_trials`` draws per seed and step, mean over seeds, 95 % t band), the
    limit and the finite-size theory at the same weights (mean over seeds), and ridge regression
    at the same ``gamma / tau`` (theory).

    Returns
    -------
    Figure
        Numbers per case: ``ft_<case>_start``, ``ft_<case>_end`` (Monte Carlo), ``..._end_hw``;
        ``ft_<case>_vs_ridge`` (claim: learned attention minus ridge at equal ``gamma / tau``,
        over seeds), ``ft_<case>_finite_miss``, ``ft_<case>_limit_miss`` (largest
        ``|theory - MC|`` over seeds and steps) with ``ft_<case>_mc_sem`` (largest s.e.);
        ``ft_<case>_delta_end`` (mean final ``delta``); ``ft_<case>_small_vs_ridge`` (limit
        theory at ``g_small``: attention minus ridge, mean over seeds).
    """
    cases = ("tanh", "softmax", "strong")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    numbers: dict[str, Any] = {"ft_train_trials": P["train_trials"], "ft_g_small": P["g_small"]}
    for ax, case in zip(axes, cases):
        s, gamma, runs, a = _along(case, P)
        steps, S = runs["steps"], runs["W_K"].shape[0]
        m, hw = a["mc"].mean(axis=0), _half_width(a["mc"])
        style.plot_sim(ax, steps, m, hw, label="Monte Carlo (learned weights)")
        style.plot_theory(ax, steps, a["limit"].mean(axis=0), label="limit theory",
                          color=style.color("theory", "k"))
        ax.plot(steps, a["finite"].mean(axis=0), "--", color=style.color("theory", "k"),
                label=f"finite-size theory, n = {P['n']}")
        ax.axhline(float(a["ridge"][0]), color=_COL["Q"], ls=":", label="ridge, same $\\gamma/\\tau$")
        style.label_axes(ax, "SGD step", "$E$" if case == "tanh" else "", title=_LABEL[case],
                         legend=False)
        end = a["mc"][:, -1]
        numbers[f"ft_{case}_start"] = float(a["mc"][:, 0].mean())
        numbers[f"ft_{case}_end"] = float(end.mean())
        numbers[f"ft_{case}_end_hw"] = float(_half_width(end))
        numbers[f"ft_{case}_ridge"] = float(a["ridge"][0])
        numbers[f"ft_{case}_vs_ridge"] = less(
            f"ft_{case}_vs_ridge", float(end.mean()), float(standard_error(end, axis=0)),
            float(a["ridge"][0]), draws=S, required=False,
            wording=("below", "above", "not distinguishable from"))
        numbers[f"ft_{case}_improves"] = less(
            f"ft_{case}_improves", float((end - a["mc"][:, 0]).mean()),
            float(standard_error(end - a["mc"][:, 0], axis=0)), draws=S, required=False,
            wording=("lowers", "raises", "does not measurably change"))
        numbers[f"ft_{case}_finite_miss"] = float(np.max(np.abs(a["finite"] - a["mc"])))
        numbers[f"ft_{case}_limit_miss"] = float(np.max(np.abs(a["limit"] - a["mc"])))
        numbers[f"ft_{case}_mc_sem"] = float(np.max(a["mc_sem"]))
        numbers[f"ft_{case}_delta_end"] = float(a["delta"][:, -1].mean())
        small = a["small"][:, -1] - float(a["ridge_small"][0])
        numbers[f"ft_{case}_small_vs_ridge"] = float(small.mean())
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=5, fontsize=8)
    return Figure(fig, numbers)


def check(*, setting: Setting, W_K: np.ndarray, W_Q: np.ndarray, mu: np.ndarray, gamma: float,
          n: int, trials: int, seed: int) -> dict[str, np.ndarray]:
    """Limit, finite-size theory (at ``n``) and Monte Carlo (``trials`` draws at ``n``) at the
    weights ``W_K, W_Q`` (``(K, r, p)``): ``(K,)`` arrays ``limit``, ``finite``, ``mc``, ``sem``,
    ``delta``."""
    out: dict[str, list[float]] = {k: [] for k in ("limit", "finite", "mc", "sem", "delta")}
    for k, (a, b) in enumerate(zip(W_K, W_Q)):
        ls = ft.learned_setting(setting, mu, a, b)
        out["limit"].append(float(theory.attention_error(ls, [gamma])[0]))
        out["finite"].append(float(theory.attention_error(ls, [gamma], n=n)[0]))
        r = simulate.errors(ls, [gamma], n=n, trials=trials, seed=seed + k)
        assert r.attention is not None  # attention is simulated
        out["mc"].append(float(r.attention.mean[0]))
        out["sem"].append(float(r.attention.sem[0]))
        out["delta"].append(ls.delta(n))
    return {k: np.array(v) for k, v in out.items()}


def theory_check(**P: Any) -> Figure:
    """The theory against Monte Carlo at ``n_check`` tokens along the first seed's ``tanh`` run.

    At ``check_points`` recorded steps (evenly spaced, the start and the end included) the
    learned geometry is simulated at ``n_check`` tokens (``check_trials`` draws) and set against
    the limit and the finite-size theory at ``n_check``. ``gamma`` is the training ``gamma``.

    Returns
    -------
    Figure
        Numbers ``ft_check_n``, ``ft_check_trials``, ``ft_check_finite_miss`` and
        ``ft_check_limit_miss`` (largest ``|theory - MC|``), ``ft_check_sem`` (largest s.e.),
        ``ft_check_within`` (claim: the finite-size theory within 0.01 at every point, the
        equivalence test at the largest miss), ``ft_check_delta`` (largest ``delta``).
    """
    s, gamma, runs = _case("tanh", P)
    idx = np.unique(np.linspace(0, runs["steps"].size - 1, P["check_points"]).round().astype(int))
    gamma_c = ft.probe_gamma(s, P["g"], P["n_check"])
    c = cache.cached(check, setting=s, W_K=runs["W_K"][0, idx], W_Q=runs["W_Q"][0, idx],
                     mu=runs["mu"], gamma=gamma_c, n=P["n_check"], trials=P["check_trials"],
                     seed=P["seed"])
    steps = runs["steps"][idx]
    fig, ax = plt.subplots(figsize=(5.4, 3.6))
    style.plot_theory_vs_sim(ax, steps, c["finite"], c["mc"], c["sem"],
                             label=f"n = {P['n_check']}, finite-size")
    ax.plot(steps, c["limit"], ":", color="0.4", label="limit theory")
    style.label_axes(ax, "SGD step", "$E$", title=_LABEL["tanh"] + ", first seed", legend=True)
    miss = np.abs(c["finite"] - c["mc"])
    worst = int(np.argmax(miss))
    return Figure(fig, {
        "ft_check_n": P["n_check"], "ft_check_trials": P["check_trials"],
        "ft_check_points": len(idx),
        "ft_check_finite_miss": float(miss.max()),
        "ft_check_limit_miss": float(np.max(np.abs(c["limit"] - c["mc"]))),
        "ft_check_sem": float(c["sem"].max()),
        "ft_check_delta": float(c["delta"].max()),
        "ft_check_within": equivalent(
            "ft_check_within", float(c["finite"][worst]), 0.0, float(c["mc"][worst]),
            float(c["sem"][worst]), margin=0.01, draws=P["check_trials"], required=False,
            wording=("within 0.01 of", "more than 0.01 away from",
                     "not shown within 0.01 of (too few draws)"))})


def optimum(**P: Any) -> dict[str, Any]:
    """The learned geometry against the theory's optimum at the learned norms (rank one).

    For each rank-one case and seed, the final weights' cosines and the limit theory there, and
    :func:`~attn_lib.studies.fine_tuning.theory_optimum` at the same norms (its cosines and
    error). Returns the glue numbers: ``ft_optimum_table`` (Markdown: mean ± 95 % t half-width
    over seeds), ``ft_opt_gap_<case>`` (learned minus optimal theory error, mean) and the claim
    ``ft_tanh_reaches_optimum`` (that gap below 0.01, an equivalence test over seeds);
    ``ft_gen_minus_interp`` (``..._hw``): the final ``|cos(mu, w_K)|`` of the test-error
    objective minus the interpolation objective's, paired by seed, and the claim
    ``ft_gen_same`` (within 0.1).
    """
    rows: list[dict[str, str]] = []
    numbers: dict[str, Any] = {}
    for case in ("tanh", "softmax", "generalisation"):
        s, gamma, runs = _case(case, P)
        res = cache.cached(_optimum_case, setting=s, W_K=runs["W_K"][:, -1], W_Q=runs["W_Q"][:, -1],
                           mu=runs["mu"], gamma=gamma)
        gap = res["learned"] - res["best"]

        def pm(v: np.ndarray) -> str:
            return f"{v.mean():.3f} ± {float(_half_width(v)):.3f}"
        rows.append({"case": _LABEL[case], "|cos(mu, w_K)|": pm(res["cos"][:, 0]),
                     "|cos(mu, w_Q)|": pm(res["cos"][:, 1]),
                     "optimum's |cos(mu, w_K)|": pm(res["best_cos"][:, 0]),
                     "E learned (limit)": pm(res["learned"]), "E optimum (limit)": pm(res["best"]),
                     "learned - optimum": pm(gap)})
        numbers[f"ft_opt_gap_{case}"] = float(gap.mean())
        if case == "tanh":
            numbers["ft_tanh_reaches_optimum"] = equivalent(
                "ft_tanh_reaches_optimum", float(gap.mean()), float(standard_error(gap, axis=0)),
                margin=0.01, draws=gap.size, required=False,
                wording=("within 0.01 of", "more than 0.01 above",
                         "not shown within 0.01 of"))
    numbers["ft_optimum_table"] = markdown_table(rows)
    cos_i, cos_g = (_cosines(_case(case, P)[2])["K"][:, -1] for case in ("tanh", "generalisation"))
    d = cos_g - cos_i
    numbers["ft_gen_minus_interp"] = float(d.mean())
    numbers["ft_gen_minus_interp_hw"] = float(_half_width(d))
    numbers["ft_gen_same"] = equivalent(
        "ft_gen_same", float(d.mean()), float(standard_error(d, axis=0)), margin=0.1,
        draws=d.size, required=False,
        wording=("the same, within 0.1,", "different (by more than 0.1)",
                 "not shown to be the same within 0.1"))
    return numbers


def _optimum_case(*, setting: Setting, W_K: np.ndarray, W_Q: np.ndarray, mu: np.ndarray,
                  gamma: float) -> dict[str, np.ndarray]:
    """Per seed: learned ``|cos|`` (``(S, 2)``), limit error, optimum's ``|cos|`` and error."""
    out: dict[str, list[Any]] = {"cos": [], "learned": [], "best_cos": [], "best": []}
    for a, b in zip(W_K, W_Q):
        ls = ft.learned_setting(setting, mu, a, b)
        assert isinstance(ls, Setting)  # rank one
        best, err = ft.theory_optimum(setting, ls.wk_norm, ls.wq_norm, gamma, starts=2)
        out["cos"].append([abs(ls.cos_mu_wk), abs(ls.cos_mu_wq)])
        out["learned"].append(float(theory.attention_error(ls, [gamma])[0]))
        out["best_cos"].append([abs(best.cos_mu_wk), abs(best.cos_mu_wq)])
        out["best"].append(err)
    return {k: np.array(v) for k, v in out.items()}
