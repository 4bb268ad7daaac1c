"""Softmax theory against Monte Carlo in the regular regime (issue 12's first target).

At ``n = 2048`` and ``beta`` in {0.5, 1, 1.5}, on a grid of settings (c from 0.3 to 1.5, SNR
from 0 to 3, weight norms from 0 to 2.5; aligned, orthogonal and partly aligned weights) kept
where ``beta * delta <= 0.3`` (``delta = Setting.delta(n)``, the coherent shift), the script
compares the proportional-limit theory ``attention_error(setting, gamma_eff)`` with the Monte
Carlo error of the raw softmax features ``X A`` at ``gamma = gamma_eff s_n^2`` (the simulator
reads the effective ``gamma`` and converts it)
(:func:`attn_lib.theory.softmax.effective_gamma`).

Per setting, :data:`POINTS` effective gammas, log-spaced between the ones where the theory is
0.05 and 0.95 (the error is informative there, not saturated). The Monte Carlo goes through
:func:`attn_lib.studies.sweeps.simulations` (all settings in one call, so it can run on Dask:
``ATTN_BOOK_SCHEDULER``), on the union of every setting's gammas (one eigendecomposition per
draw gives them all), uncached: a pilot of ``--pilot`` draws (seed 0), then up to ``--rounds``
rounds (round ``k`` of seed ``k``, independent of the others) that add draws to the settings
whose largest standard error is above ``--sem``, sized from the spread of all their draws so far
(:func:`until_sem`; at most ``--max-trials``). With ``--entrywise`` the entry-wise kernel of ``f_beta``
(:func:`~attn_lib.theory.softmax.entrywise_equivalent`, features ``X K`` at the effective
gammas) is simulated on the same draws: its own distance to the theory (the entry-wise
theory's finite-size error) and the paired difference softmax minus entry-wise (what the
normalising sums and the mean part add) separate the two sources of a miss. Printed: per
setting its largest ``|theory - MC|`` and standard error; per ``beta`` and overall the median
and maximum of ``|theory - MC|`` over all points and the number of points beyond 3 standard
errors. Target: median <= 0.005, maximum <= 0.02.

Usage: ``python benchmarks/softmax_grid.py [--n 2048] [--sem 0.003] [--pilot 8] [--rounds 3]
[--max-trials 160] [--beta 0.5 1 1.5] [--blas-threads 1] [--entrywise]`` (``--n 512 --sem 0.01`` is a smoke
run).
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al
from attn_lib.studies import sweeps
from attn_lib.theory import softmax
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

#: Effective gammas on which the theory is scanned for the informative range.
SCAN = np.logspace(-5, 3, 161)
#: Points per setting.
POINTS = 6
#: Weight geometries: cosines (mu, w_K), (mu, w_Q), (w_K, w_Q).
GEOMETRY = {"aligned": (1.0, 1.0, 1.0), "orthogonal": (0.0, 0.0, 0.0),
            "partial": (0.6, 0.6, 1.0), "wK!=wQ": (0.8, -0.3, 0.2)}
#: (c, snr, ||w_K|| = ||w_Q||, geometry).
GRID = [(0.3, 0.0, 0.0, "orthogonal"), (0.3, 1.0, 1.0, "aligned"), (0.3, 3.0, 2.5, "orthogonal"),
        (0.3, 2.0, 1.5, "partial"), (0.75, 0.0, 2.5, "aligned"), (0.75, 2.0, 1.5, "partial"),
        (0.75, 0.5, 2.0, "wK!=wQ"), (0.75, 3.0, 0.0, "orthogonal"), (1.5, 3.0, 1.0, "aligned"),
        (1.5, 1.0, 2.5, "orthogonal"), (1.5, 2.0, 2.5, "partial"), (1.5, 0.0, 0.0, "orthogonal")]


def settings(betas: list[float], n: int) -> list[tuple[str, al.Setting]]:
    """The grid's settings with ``beta * delta(n) <= 0.3``, as ``(name, setting)``."""
    out = []
    for beta in betas:
        for c, snr, w, geo in GRID:
            a, b, k = GEOMETRY[geo]
            s = al.Setting(c=c, snr=snr, wk_norm=w, wq_norm=w, cos_mu_wk=a, cos_mu_wq=b,
                           cos_wk_wq=k, attention=al.Softmax(beta))
            if beta * s.delta(n) <= 0.3:
                out.append((f"beta={beta:g} c={c:g} snr={snr:g} |w|={w:g} {geo}", s))
    return out


def informative(setting: al.Setting) -> np.ndarray:
    """:data:`POINTS` effective gammas, log-spaced where the theory is between 0.05 and 0.95."""
    e = al.theory.attention_error(setting, SCAN)
    inside = SCAN[(e >= 0.05) & (e <= 0.95)]
    return np.geomspace(inside.min(), inside.max(), POINTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--sem", type=float, default=0.003, help="target standard error")
    ap.add_argument("--pilot", type=int, default=8, help="trials of round 0")
    ap.add_argument("--max-trials", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of extra trials after the pilot")
    ap.add_argument("--beta", type=float, nargs="+", default=[0.5, 1.0, 1.5])
    ap.add_argument("--blas-threads", type=int, default=1)
    ap.add_argument("--entrywise", action="store_true",
                    help="also the entry-wise kernel of f_beta on the same draws")
    args = ap.parse_args()
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        run(args)


def monte_carlo(settings: list[al.Setting], gammas: list[np.ndarray], n: int, pilot: int,
                counts: list[int] | None = None, first: list[np.ndarray] | None = None,
                seed: int = 1) -> list[np.ndarray]:
    """Errors ``(counts[b], G_b)`` of each setting: ``pilot`` trials of seed 0, the rest of ``seed``.

    One :func:`sweeps.simulations` call per round (per count of extra trials), on the union of
    the settings' gammas; ``first`` are the values already computed (seed 0's ``pilot`` trials,
    or those of earlier rounds, each with its own seed), to which setting ``b`` gets
    ``counts[b] - len(first[b])`` trials of ``seed``.
    """
    union = np.unique(np.concatenate(gammas))
    cols = [np.searchsorted(union, g) for g in gammas]
    if first is None:
        r0 = sweeps.simulations(settings, union, n, pilot, seed=0, use_cache=False)
        first = [r0.attention[b][:, cols[b]] for b in range(len(settings))]
    values = list(first)
    extra: dict[int, list[int]] = {}
    for b, t in enumerate(counts or []):
        if t > len(values[b]):
            extra.setdefault(t - len(values[b]), []).append(b)
    for t, bs in sorted(extra.items()):
        r1 = sweeps.simulations([settings[b] for b in bs], union, n, t, seed=seed, use_cache=False)
        for j, b in enumerate(bs):
            values[b] = np.concatenate([values[b], r1.attention[j][:, cols[b]]])
    return values


def until_sem(settings: list[al.Setting], gammas: list[np.ndarray], n: int, pilot: int,
              sem: float, max_trials: int, rounds: int
              ) -> tuple[list[np.ndarray], list[list[int]]]:
    """:func:`monte_carlo` in rounds until every setting's largest standard error is <= ``sem``.

    Round 0 is ``pilot`` trials of seed 0; round ``k`` (seed ``k``, at most ``rounds``) brings
    each setting to the ``ceil((sd / sem)^2)`` trials that the spread ``sd`` of all its trials so
    far asks for (its largest over the gammas), capped at ``max_trials``. A pilot's spread
    underestimates the spread of a skewed error often enough that one round is not enough.
    Returns the values and the schedule (the counts after each round), which :func:`replay`
    repeats on other settings with the same seeds and groupings, hence the same draws.
    """
    values = monte_carlo(settings, gammas, n, pilot)
    schedule: list[list[int]] = []
    for k in range(1, rounds + 1):
        counts = [min(max_trials, max(len(v), math.ceil((v.std(axis=0, ddof=1).max() / sem) ** 2)))
                  for v in values]
        if all(t == len(v) for t, v in zip(counts, values)):
            break
        schedule.append(counts)
        values = monte_carlo(settings, gammas, n, pilot, counts, first=values, seed=k)
    return values, schedule


def replay(settings: list[al.Setting], gammas: list[np.ndarray], n: int, pilot: int,
           schedule: list[list[int]]) -> list[np.ndarray]:
    """The rounds of :func:`until_sem` with a given ``schedule``, on other settings."""
    values = monte_carlo(settings, gammas, n, pilot)
    for k, counts in enumerate(schedule, start=1):
        values = monte_carlo(settings, gammas, n, pilot, counts, first=values, seed=k)
    return values


def _summary(rows: list[tuple[float, np.ndarray, np.ndarray]], betas: list[float]) -> None:
    """Per beta and overall: points, median and max of ``|err|``, max s.e., points beyond 3 s.e."""
    print(f"{'beta':>6s} {'points':>6s} {'median':>8s} {'max':>8s} {'max s.e.':>8s} {'>3 s.e.':>7s}")
    for beta in [*betas, None]:
        sel = [r for r in rows if beta is None or r[0] == beta]
        err = np.concatenate([r[1] for r in sel])
        se = np.concatenate([r[2] for r in sel])
        label = "all" if beta is None else f"{beta:g}"
        print(f"{label:>6s} {err.size:6d} {np.median(err):8.4f} {err.max():8.4f} {se.max():8.4f} "
              f"{int((err > 3 * se).sum()):7d}")


def _mean_se(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(v.shape[0])


def run(args: argparse.Namespace) -> None:
    n = args.n
    grid = settings(args.beta, n)
    ss = [s for _, s in grid]
    geff = [informative(s) for s in ss]
    theory = [al.theory.attention_error(s, g) for s, g in zip(ss, geff)]
    values, schedule = until_sem(ss, geff, n, args.pilot, args.sem, args.max_trials, args.rounds)
    counts = [len(v) for v in values]
    rows = []
    print(f"n={n}, {len(grid)} settings with beta * delta <= 0.3, {POINTS} effective gammas each "
          f"where the theory is in [0.05, 0.95]; |theory - MC| and its standard error")
    print(f"{'setting':48s} {'delta':>6s} {'trials':>6s} {'max|err|':>9s} {'s.e.':>7s} "
          f"{'>3 s.e.':>7s}  gamma_eff")
    for b, (name, s) in enumerate(grid):
        mc, se = _mean_se(values[b])
        err = np.abs(theory[b] - mc)
        rows.append((s.attention.beta, err, se))
        print(f"{name:48s} {s.delta(n):6.3f} {counts[b]:6d} {err.max():9.4f} {se.max():7.4f} "
              f"{int((err > 3 * se).sum()):7d}  {geff[b][0]:.2g}..{geff[b][-1]:.2g}")
    print()
    _summary(rows, args.beta)
    print("target: median <= 0.005, max <= 0.02")
    if not args.entrywise:
        return
    # the entry-wise kernel of f_beta on the same draws (same seeds and trial counts), at the
    # effective gammas: its theory error, and the paired difference softmax - entry-wise
    ew = [softmax.entrywise_equivalent(s) for s in ss]
    paired = replay(ew, geff, n, args.pilot, schedule)
    rows_ew, rows_diff = [], []
    for b, s in enumerate(ss):
        mc, se = _mean_se(paired[b])
        rows_ew.append((s.attention.beta, np.abs(theory[b] - mc), se))
        d, dse = _mean_se(values[b] - paired[b])
        rows_diff.append((s.attention.beta, np.abs(d), dse))
    print("\nentry-wise f_beta (X K at gamma_eff, same draws): |theory - MC|")
    _summary(rows_ew, args.beta)
    print("\nsoftmax - entry-wise f_beta on the same draws (normalising sums and mean part): "
          "|paired mean difference|")
    _summary(rows_diff, args.beta)


if __name__ == "__main__":
    main()
