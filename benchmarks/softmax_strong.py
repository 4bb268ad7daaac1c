"""The finite-size theory of masked softmax attention against Monte Carlo (issue 12, strong alignment).

Three parts (``--part``), each printing what ``book/derivation_softmax.md`` quotes:

``steps``
    Each step of the finite-size reduction on common draws (``n = 512`` and ``2048``, three
    aligned settings with ``beta delta`` 1.5 to 2 at both sizes), at the effective gammas where the theory is in
    0.05–0.95. With the latent split ``t_ij = g_ij + h_ij`` (:func:`attn_lib.studies.
    strong_alignment.latent_split`) and ``d(t) = E_pi[e^{beta h(t', t)}]``
    (:func:`attn_lib.theory.softmax.query_mean`), the features ``X A`` against:

    * ``const``: ``D_j`` replaced by ``(n - 1) m`` (the limit's normaliser, ``m = e^{beta^2/2}``);
    * ``d(t)``: ``D_j`` replaced by ``(n - 1) m d(t_j)`` (what the fluctuations of ``D_j`` add);
    * ``d(t), diagonal``: the same with the self-pair restored at its mean ``m e^{beta h_jj}``
      (what the mask's ``-I`` does once the normaliser is deterministic);
    * ``surrogate``: ``d(t)`` with ``e^{beta t} / m`` replaced by the latent surrogate
      ``e^{beta h} (1 + beta g + sqrt(e^{beta^2} - 1 - beta^2) W)``, ``W`` a GOE matrix: the
      model the theory solves (unit variance of ``g``);
    * ``surrogate p'/p``: the same with ``g``'s variance ``p'/p`` in the Wigner part,
      ``sqrt(e^{beta^2 p'/p} - 1 - beta^2 p'/p)``;

    and the theory against ``surrogate`` (how the model is solved) and ``X A``; where
    ``2 beta ||M_r|| / sqrt(p) >= 1`` (:func:`attn_lib.theory.softmax.tail`) the finite-size
    theory refuses the setting and only the limit is compared. Also the
    standard deviation of ``D_j / ((n - 1) m) - 1`` and of ``D_j / ((n - 1) m d(t_j)) - 1`` with
    the predicted one of the latter, ``sqrt(E_j[e^{beta^2} E[e^{2 beta h}] / d^2 - 1] / (n - 1)
    + beta^4 / (2 p))``.

``targets``
    Aligned settings at ``n = 2048``: ``beta`` in {0.5, 1, 1.5}, ``beta delta`` in
    {0.5, 1, 1.5, 2}, ``c`` in {0.3, 0.75, 1.5} (``||w_K|| = ||w_Q||`` 2.5, 1.5, 2; the SNR set
    by ``beta delta``); :data:`POINTS` effective gammas per setting, log-spaced where the
    finite-size theory is in 0.05–0.95; Monte Carlo of ``X A`` through
    :func:`attn_lib.studies.sweeps.simulations` (uncached), trials from an 8-draw pilot sized
    for the standard error ``--sem``. Printed per setting and per ``beta``: median and maximum
    ``|theory - MC|`` of the finite-size theory and of the limit. Target: max <= 0.02.

``grid``
    The ``beta = 1.5`` settings of ``benchmarks/softmax_grid.py`` (the same gammas, seeds and
    draw counts, so the same Monte Carlo) against the finite-size theory and the limit.

Usage: ``python benchmarks/softmax_strong.py --part steps|targets|grid [--quick]``; the
derivation page includes ``book/derivation_softmax_strong_output.txt`` (the three parts in that
order, on the 2-core machine under load; seeded, no timings).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

import attn_lib as al
from attn_lib.model import data, kernel
from attn_lib.simulation.resolvent import interpolation_errors
from attn_lib.simulation.trials import Trials
from attn_lib.studies import strong_alignment
from attn_lib.theory import softmax
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

#: Effective gammas scanned for the informative range of the theory.
SCAN = np.logspace(-5, 7, 97)
#: Points per setting.
POINTS = 6
#: (c, ||w_K|| = ||w_Q||) of the targets; the SNR gives beta delta(2048) its value.
SHAPES = ((0.3, 2.5), (0.75, 1.5), (1.5, 2.0))
#: beta delta of the targets.
SHIFTS = (0.5, 1.0, 1.5, 2.0)
#: Settings of the steps, (beta, c, ||w||, beta delta): the SNR gives beta delta(n) its value at each n.
STEPS = ((0.5, 0.3, 2.5, 2.0), (1.0, 0.3, 2.5, 2.0), (1.5, 0.75, 1.5, 1.5))
STEP_CURVES = ("softmax", "const", "d(t)", "d(t), diagonal", "surrogate", "surrogate p'/p")


def aligned(beta: float, c: float, snr: float, w: float) -> al.Setting:
    return al.Setting(c=c, snr=snr, wk_norm=w, wq_norm=w, attention=al.Softmax(beta))


def shifted(beta: float, c: float, w: float, tau: float, n: int) -> tuple[str, al.Setting]:
    """The aligned setting with ``beta delta(n) = tau`` (the SNR rounded to 0.01), and its name."""
    snr = round(tau / beta * math.sqrt(c * n) / (1.0 + w * w), 2)
    return f"beta={beta:g} c={c:g} snr={snr:g} |w|={w:g}", aligned(beta, c, snr, w)


def targets(n: int = 2048) -> list[tuple[str, al.Setting]]:
    """The aligned target settings (:data:`SHAPES` x :data:`SHIFTS` per beta), as ``(name, setting)``."""
    return [shifted(beta, c, w, tau, n) for beta in (0.5, 1.0, 1.5) for tau in SHIFTS
            for c, w in SHAPES]


def informative(setting: al.Setting, n: int | None) -> np.ndarray:
    """:data:`POINTS` effective gammas, log-spaced where the theory (finite-size at ``n``, the
    limit for ``None``) is in [0.05, 0.95]."""
    e = al.theory.attention_error(setting, SCAN, n=n)
    inside = SCAN[(e >= 0.05) & (e <= 0.95)]
    return np.geomspace(inside.min(), inside.max(), POINTS)


def steps(setting: al.Setting, n: int, geff: np.ndarray, trials: int, seed: int = 0) -> Trials:
    """Errors of ``X A`` and its finite-size surrogates (module docstring) on common draws."""
    beta, p = setting.attention.beta, setting.p(n)
    m = math.exp(0.5 * beta * beta)
    g = geff * softmax.scale(setting, n) ** 2

    def trial(rng: np.random.Generator) -> dict:
        d = data.draw(setting, n, rng)
        W = data.goe(n, rng)
        split = strong_alignment.latent_split(d)
        H = split.shift()
        T = kernel.logits(d.X, d.w_K, d.w_Q)
        N = np.exp(beta * T)
        np.fill_diagonal(N, 0.0)
        D = N.sum(axis=0)
        mu_r = split.basis.T @ d.mu
        dq = softmax.query_mean(split.xi, mu_r, split.m_r, beta, p)
        norm = (n - 1) * m * dq                             # the deterministic normaliser
        diag = N.copy()
        np.fill_diagonal(diag, m * np.exp(beta * np.diag(H)))
        eh = np.exp(beta * H)
        lin = eh * (1.0 + beta * (T - H))
        sur = []
        for var in (1.0, (p - split.xi.shape[0]) / p):
            S = lin + eh * math.sqrt(math.expm1(beta * beta * var) - beta * beta * var) * W
            np.fill_diagonal(S, 0.0)
            sur.append(d.X @ S / ((n - 1) * dq))
        feats = [d.X @ N / D, d.X @ N / ((n - 1) * m), d.X @ N / norm, d.X @ diag / norm, *sur]
        out = dict(zip(STEP_CURVES, interpolation_errors(feats, d.y, g)))
        # Var(D_j / ((n-1) m d_j)) ~ (e^{beta^2} E[e^{2 beta h}] / d^2 - 1) / (n - 1) + beta^4 / (2p):
        # the keys' spread given the query's type, and the query's noise norm
        rel = math.exp(beta * beta) * softmax.query_mean(split.xi, mu_r, split.m_r, beta, p, 2.0) / dq ** 2
        out.update(eps_const=np.std(D / ((n - 1) * m) - 1.0), eps_d=np.std(D / norm - 1.0),
                   eps_pred=math.sqrt(np.mean(rel - 1.0) / (n - 1) + beta ** 4 / (2.0 * p)))
        return out

    return Trials.run(trial, trials=trials, seed=seed, gammas=geff, n=n, p=p)


def _paired(r: Trials, a: str, b: str) -> tuple[float, float]:
    """Largest mean ``a - b`` over gamma (by size) and its standard error."""
    d = r[a] - r[b]
    mean = d.mean(axis=0)
    k = int(np.argmax(np.abs(mean)))
    return float(mean[k]), float(d[:, k].std(ddof=1) / math.sqrt(d.shape[0]))


def part_steps(quick: bool) -> None:
    sizes = {512: 24, 2048: 8} if not quick else {512: 2}
    print("steps of the finite-size reduction on common draws (max over the gammas of the mean "
          "paired difference, +- its s.e.)")
    for beta, c, w, tau in STEPS:
        for n, trials in sizes.items():
            name, s = shifted(beta, c, w, tau, n)
            refused = softmax.tail(s, n) >= 1.0     # then the limit's informative range
            geff = informative(s, None if refused else n)
            theories = {"limit": al.theory.attention_error(s, geff)}
            if not refused:
                theories = {"finite-size": al.theory.attention_error(s, geff, n=n), **theories}
            r = steps(s, n, geff, trials)
            print(f"\n{name} n={n} p={s.p(n)} beta*delta={beta * s.delta(n):.2f} "
                  f"2 beta |M_r|/sqrt(p)={softmax.tail(s, n):.2f} trials={trials} gamma_eff "
                  f"{geff[0]:.3g}..{geff[-1]:.3g}" + ("  (finite-size theory refused)" if refused else ""))
            print(f"  std of D_j/((n-1) m) - 1: {r['eps_const'].mean():.4f};  of D_j/((n-1) m d(t_j)) - 1: "
                  f"{r['eps_d'].mean():.4f} (predicted {r['eps_pred'].mean():.4f})")
            for label, a, b in (("normaliser (n-1) m d(t_j) vs (n-1) m", "d(t)", "const"),
                                ("fluctuations of D_j: softmax - d(t)", "softmax", "d(t)"),
                                ("mask: d(t) - d(t), diagonal      ", "d(t)", "d(t), diagonal"),
                                ("kernel: d(t) - surrogate         ", "d(t)", "surrogate"),
                                ("p'/p: surrogate p'/p - surrogate ", "surrogate p'/p", "surrogate"),
                                ("softmax - surrogate              ", "softmax", "surrogate")):
                mean, se = _paired(r, a, b)
                print(f"  {label}: {mean:+.4f} +- {se:.4f}")
            for label, th in theories.items():
                for curve in ("surrogate", "softmax"):
                    err = np.abs(th - r.mean(curve))
                    print(f"  {label:11s} theory - {curve:9s}: median {np.median(err):.4f} max "
                          f"{err.max():.4f} (s.e. <= {r.sem(curve).max():.4f})")
            for label, curve in ((next(iter(theories)), theories[next(iter(theories))]),
                                 ("softmax", r.mean("softmax")), ("surrogate", r.mean("surrogate"))):
                print(f"    {label:11s}", np.array2string(curve, precision=4))


def monte_carlo(settings: list[al.Setting], gammas: list[np.ndarray], n: int, pilot: int,
                sem: float, max_trials: int) -> tuple[list[np.ndarray], list[int]]:
    """Errors ``(trials_b, G_b)``: ``pilot`` draws of seed 0, then the draws the pilot's spread
    asks for (seed 1, times 1.3 against the pilot's underestimate), at most ``max_trials``."""
    sys.path.insert(0, str(Path(__file__).parent))
    import softmax_grid as sg  # the pilot-then-extra rounds of benchmarks/softmax_grid.py

    first = sg.monte_carlo(settings, gammas, n, pilot)
    counts = [max(pilot, min(max_trials, math.ceil(1.3 * (v.std(axis=0, ddof=1).max() / sem) ** 2)))
              for v in first]
    values = sg.monte_carlo(settings, gammas, n, pilot, counts, first=first)
    return values, counts


def _summary(rows: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]]) -> None:
    print(f"{'beta':>6s} {'points':>6s} {'median':>8s} {'max':>8s} {'limit med':>9s} "
          f"{'limit max':>9s} {'max s.e.':>8s} {'>3 s.e.':>7s}")
    for beta in sorted({r[0] for r in rows}) + [None]:
        sel = [r for r in rows if beta is None or r[0] == beta]
        fs, lim, se = (np.concatenate([r[k] for r in sel]) for k in (1, 2, 3))
        label = "all" if beta is None else f"{beta:g}"
        print(f"{label:>6s} {fs.size:6d} {np.median(fs):8.4f} {fs.max():8.4f} {np.median(lim):9.4f} "
              f"{lim.max():9.4f} {se.max():8.4f} {int((fs > 3 * se).sum()):7d}")


def compare(grid: list[tuple[str, al.Setting]], geff: list[np.ndarray], values: list[np.ndarray],
            counts: list[int], n: int) -> None:
    """Per setting and per beta: ``|theory - MC|`` of the finite-size theory and of the limit."""
    ss = [s for _, s in grid]
    fs = al.theory.attention_error_batch(ss, np.array(geff), n=n)
    lim = [al.theory.attention_error(s, g) for s, g in zip(ss, geff)]
    print(f"{'setting':40s} {'b*delta':>7s} {'tail':>5s} {'trials':>6s} {'max|fs|':>8s} "
          f"{'max|lim|':>8s} {'s.e.':>7s}  gamma_eff")
    rows = []
    for b, (name, s) in enumerate(grid):
        mc = values[b].mean(axis=0)
        se = values[b].std(axis=0, ddof=1) / math.sqrt(values[b].shape[0])
        efs, elim = np.abs(fs[b] - mc), np.abs(lim[b] - mc)
        rows.append((s.attention.beta, efs, elim, se))
        print(f"{name:40s} {s.attention.beta * s.delta(n):7.2f} {softmax.tail(s, n):5.2f} "
              f"{counts[b]:6d} {efs.max():8.4f} "
              f"{elim.max():8.4f} {se.max():7.4f}  {geff[b][0]:.2g}..{geff[b][-1]:.2g}")
    print()
    _summary(rows)


def part_targets(quick: bool, sem: float) -> None:
    n = 512 if quick else 2048
    grid = [(name, s) for name, s in targets(n) if softmax.tail(s, n) < 1.0][:: 6 if quick else 1]
    geff = [informative(s, n) for _, s in grid]
    values, counts = monte_carlo([s for _, s in grid], geff, n, 8, sem, 120)
    print(f"targets: n={n}, {len(grid)} aligned settings, {POINTS} effective gammas each where the "
          f"finite-size theory is in [0.05, 0.95]; |theory - MC| (target: max <= 0.02)")
    compare(grid, geff, values, counts, n)


def part_grid(quick: bool) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import softmax_grid as sg  # the grid of benchmarks/softmax_grid.py (a sibling script)

    n = 512 if quick else 2048
    grid = sg.settings([1.5], n)[:: 6 if quick else 1]
    ss = [s for _, s in grid]
    geff = [sg.informative(s) for s in ss]
    pilot = sg.monte_carlo(ss, geff, n, 4)
    counts = [max(4, min(40, math.ceil((v.std(axis=0, ddof=1).max() / 0.003) ** 2))) for v in pilot]
    values = sg.monte_carlo(ss, geff, n, 4, counts, first=pilot)
    print(f"\nbenchmarks/softmax_grid.py, beta = 1.5 (n={n}, {len(grid)} settings, the same gammas, "
          "seeds and draws): finite-size theory and limit against the same Monte Carlo")
    compare(grid, geff, values, counts, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("steps", "targets", "grid"), required=True)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--sem", type=float, default=0.003, help="target standard error (targets)")
    args = ap.parse_args()
    if args.part == "steps":
        part_steps(args.quick)
    elif args.part == "targets":
        part_targets(args.quick, args.sem)
    else:
        part_grid(args.quick)


if __name__ == "__main__":
    main()
