"""Softmax at larger beta: the theory that keeps the row factors against Monte Carlo (issue 36).

Compares, against the Monte Carlo error of the raw softmax features ``X A`` at the effective
gammas (:func:`attn_lib.theory.softmax.effective_gamma`), the proportional limit
``attention_error(setting, gamma_eff)``, the finite-size theory ``attention_error(...,
n=n)`` and the row-factor theory :func:`attn_lib.theory.softmax.rows_error` (the finite-size
theory plus :func:`~attn_lib.theory.softmax.rows_correction`; ``book/derivation_softmax.md``,
*Row factors*).
Parts (``--part``):

* ``diagnostic``: the beta-breakdown settings of ``benchmarks/softmax_beta.py`` (random
  inputs, SNR 0, no weights; ``c = 1.5`` and ``0.3``) at ``beta`` 1 and 1.5 and ``n`` from 256
  to 2048 (4096 for ``beta = 1.5``, ``c = 1.5``), at the 6 effective gammas of
  ``softmax_grid.informative``. Per setting and ``n``: the largest ``|theory - MC|`` of both
  theories. Then the diagnostic: the limit's miss against ``x1 = e^{4 beta^2} / n`` and against
  ``x2 = beta^2 / sqrt(p)`` (the spread of the Hayase-Karakida row prefactor
  ``e^{beta^2 (rho_ii - 1)}`` of the token norms): the slope of ``log miss`` on ``log x`` and
  the spread of ``miss / x`` over ``n`` (a collapse: slope one, constant ratio); and against
  ``x3``, the change the row factors predict, ``max |rows_correction|``.
* ``breakdown``: the chapter's breakdown in ``beta`` (``book/11_softmax.ipynb`` at its full
  profile: random inputs at ``c = 1``, ``n`` 512 and 2048, 8 draws, its ``g`` grid; the same
  cached draws as the chapter): per ``beta`` the largest ``|theory - MC|`` over the informative
  ``g`` of the limit, the finite-size theory and the row theory, and the breakdown temperature
  of each (the first ``beta`` whose miss exceeds 0.02 beyond the Student t threshold of the
  draws, the chapter's rule).
* ``grid``: the chapter's regular grid (``softmax_grid.settings`` at the given betas).
* ``heldout``: settings that no part of the construction looked at (:data:`HELDOUT`), with
  seeds of their own (:data:`HELDOUT_SEED`).

``grid`` and ``heldout`` draw until the largest standard error of each setting is at most
``--sem`` (a pilot of ``--pilot`` draws, then up to ``--rounds`` rounds sized by the spread so
far, at most ``--max-trials``); every call goes through the result cache
(:func:`attn_lib.studies.sweeps.simulations`, ``ATTN_BOOK_CACHE``), so a rerun reads them.
Printed per setting: draws, the largest ``|theory - MC|`` of the limit and of the row theory,
the largest standard error and the points beyond 3 standard errors; then per ``beta`` the
median and maximum over the points.

Usage: ``python benchmarks/softmax_rows.py --part diagnostic|breakdown|grid|heldout [--beta ...]
[--n 2048] [--sem 0.003]``; the derivation page includes
``book/derivation_softmax_rows_output.txt`` (seeded; under load, no timings).

Last result (2-core machine under load; the draws cached). Largest ``|theory - MC|`` at
``n = 2048``, standard errors at most 0.0031:

    grid       beta  settings  limit   finite-size  row factors
    regular    0.5   12        0.0110  0.0065       0.0065
    regular    1     12        0.0114  0.0080       0.0079
    regular    1.5   12        0.0290  0.0293       0.0129
    held-out   0.75-1.25  4    0.0057  0.0037       0.0030
    held-out   1.5   4         0.0254  0.0255       0.0048

    breakdown (random inputs, c = 1, the chapter's rule): at n = 2048 the limit breaks at
    beta = 1.5, the row theory at 2.5 (within 0.017 at beta = 2); at n = 512 at 0.25 / 2.5.
    diagnostic (c = 1.5, beta = 1.5): limit 0.0819 ... 0.0247 for n = 256 ... 4096, row theory
    0.0210 ... 0.0071; slope of log miss on log(e^{4 beta^2}/n) 0.44, on log(beta^2/sqrt p) 0.87.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al
from attn_lib import DomainWarning
from attn_lib.book import claims
from attn_lib.book.figures import softmax as figs
from attn_lib.studies import softmax as study
from attn_lib.studies import sweeps
from attn_lib.theory import softmax

sys.path.insert(0, str(Path(__file__).parent))
import softmax_grid as sg

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

#: Breakdown settings (c, beta) and draws per n.
BREAKDOWN = ((1.5, 1.5), (0.3, 1.5), (1.5, 1.0))
SIZES = {256: 64, 512: 40, 1024: 28, 2048: 24, 4096: 6}
#: Held-out settings: (beta, c, snr, ||w_K|| = ||w_Q||, geometry of softmax_grid.GEOMETRY).
HELDOUT = [(1.5, 0.5, 0.5, 1.0, "orthogonal"), (1.5, 1.0, 1.5, 2.0, "partial"),
           (1.5, 2.0, 0.25, 0.5, "wK!=wQ"), (1.5, 1.0, 0.0, 0.0, "orthogonal"),
           (1.25, 1.2, 2.0, 1.5, "orthogonal"), (1.25, 0.6, 1.0, 2.0, "aligned"),
           (1.0, 2.0, 1.0, 1.0, "partial"), (0.75, 1.0, 0.5, 1.5, "orthogonal")]
#: Root seed of the held-out draws (the grid's rounds use 0, 1, 2, ...).
HELDOUT_SEED = 3600


def setting(beta: float, c: float, snr: float = 0.0, w: float = 0.0, geo: str = "orthogonal") -> al.Setting:
    a, b, k = sg.GEOMETRY[geo]
    return al.Setting(c=c, snr=snr, wk_norm=w, wq_norm=w, cos_mu_wk=a, cos_mu_wq=b, cos_wk_wq=k,
                      attention=al.Softmax(beta))


def draws(ss: list[al.Setting], gammas: list[np.ndarray], n: int, pilot: int, sem: float,
          rounds: int, max_trials: int, seed: int) -> list[np.ndarray]:
    """Errors ``(T_b, G_b)`` per setting: ``pilot`` draws of ``seed``, then rounds ``seed + k``
    (cached), each setting brought to the draws its spread asks for."""
    values = []
    for s, g in zip(ss, gammas):
        v = sweeps.simulations([s], g, n, pilot, seed=seed).attention[0]
        for k in range(1, rounds + 1):
            want = min(max_trials, math.ceil((v.std(axis=0, ddof=1).max() / sem) ** 2))
            if want <= len(v):
                break
            more = sweeps.simulations([s], g, n, want - len(v), seed=seed + k).attention[0]
            v = np.concatenate([v, more])
        values.append(v)
    return values


def compare(names: list[str], ss: list[al.Setting], n: int, values: list[np.ndarray],
            gammas: list[np.ndarray]) -> None:
    print(f"{'setting':44s} {'trials':>6s} {'limit':>7s} {'finite':>7s} {'rows':>7s} {'s.e.':>7s} "
          f"{'>3se':>4s}")
    rows: dict[float, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for name, s, v, g in zip(names, ss, values, gammas):
        mc, se = v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(len(v))
        lim = np.abs(al.theory.attention_error(s, g) - mc)
        fin = np.abs(al.theory.attention_error(s, g, n=n) - mc)
        new = np.abs(softmax.rows_error(s, g, n) - mc)
        rows.setdefault(s.attention.beta, []).append((lim, fin, new, se))
        print(f"{name:44s} {len(v):6d} {lim.max():7.4f} {fin.max():7.4f} {new.max():7.4f} "
              f"{se.max():7.4f} {int((new > 3 * se).sum()):4d}")
    print(f"{'beta':>5s} {'points':>6s} {'limit median':>12s} {'max':>7s} {'finite median':>13s} "
          f"{'max':>7s} {'rows median':>11s} {'max':>7s} {'max s.e.':>8s}")
    for beta, r in sorted(rows.items()):
        lim, fin, new, se = (np.concatenate(x) for x in zip(*r))
        print(f"{beta:5g} {lim.size:6d} {np.median(lim):12.4f} {lim.max():7.4f} "
              f"{np.median(fin):13.4f} {fin.max():7.4f} {np.median(new):11.4f} {new.max():7.4f} "
              f"{se.max():8.4f}")


def diagnostic(sizes: dict[int, int]) -> None:
    print("largest |theory - MC| over the 6 gammas; limit and row theory; s.e. its largest")
    misses = []
    for c, beta in BREAKDOWN:
        s = setting(beta, c)
        g = sg.informative(s)
        lim = al.theory.attention_error(s, g)
        print(f"\nc={c:g} beta={beta:g} snr=0 no weights; gamma_eff {np.array2string(g, precision=3)}")
        for n, t in sizes.items():
            if n == 4096 and (c, beta) != (1.5, 1.5):
                continue
            v = sweeps.simulations([s], g, n, t, seed=0).attention[0]
            mc, se = v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(len(v))
            rows = softmax.rows_error(s, g, n)
            m_lim, m_rows = np.abs(lim - mc).max(), np.abs(rows - mc).max()
            m_fin = np.abs(al.theory.attention_error(s, g, n=n) - mc).max()
            misses.append((c, beta, n, s.p(n), m_lim, m_rows,
                           np.abs(softmax.rows_correction(s, g, n)).max()))
            print(f"  n={n:5d} p={s.p(n):5d} trials={t:3d}  limit {m_lim:.4f}  finite {m_fin:.4f}  "
                  f"rows {m_rows:.4f}  "
                  f"s.e. {se.max():.4f}   signed rows - MC {np.array2string(rows - mc, precision=4, sign='+')}")
    print("\ndiagnostic: the limit's miss against x1 = e^{4 beta^2} / n and x2 = beta^2 / sqrt(p)")
    for label, xf in (("x1 = e^(4 beta^2)/n", lambda b, n, p: math.exp(4 * b * b) / n),
                      ("x2 = beta^2/sqrt(p)", lambda b, n, p: b * b / math.sqrt(p))):
        print(f"  {label}")
        for c, beta in BREAKDOWN:
            sel = [m for m in misses if m[0] == c and m[1] == beta]
            x = np.array([xf(beta, m[2], m[3]) for m in sel])
            y = np.array([m[4] for m in sel])
            slope = np.polyfit(np.log(x), np.log(y), 1)[0]
            print(f"    c={c:g} beta={beta:g}: miss / x = {np.array2string(y / x, precision=4)} "
                  f"(n = {[m[2] for m in sel]}), slope of log miss on log x {slope:.2f}")
    print("  x3 = max |rows_correction| (the row factors' predicted change), same points")
    for c, beta in BREAKDOWN:
        sel = [m for m in misses if m[0] == c and m[1] == beta]
        print(f"    c={c:g} beta={beta:g}: miss / x3 = "
              f"{np.array2string(np.array([m[4] / m[6] for m in sel]), precision=3)}")


def breakdown(ns: list[int], betas: list[float], trials: int, n_gamma: int) -> None:
    g = figs._grid(n_gamma)
    k_t = claims.threshold(claims.Z, trials)
    print(f"random inputs c = {figs.RANDOM['c']:g}, {trials} draws, g = {np.array2string(g, precision=3)}; "
          "largest |theory - MC| over the informative g (s.e.)")
    for n in ns:
        print(f"n = {n}")
        worst: dict[str, list[tuple[float, float]]] = {"limit": [], "finite-size": [], "rows": []}
        for beta in betas:
            cmp = study.compare(figs._random(beta), g, n=n, trials=trials, seed=0, entrywise=False,
                                rows=True)
            for name, kw in (("limit", {}), ("finite-size", {"finite": True}), ("rows", {"rows": True})):
                w = figs._worst(cmp, **kw)
                worst[name].append((w[0], w[1]))
            print(f"  beta={beta:5g}  " + "  ".join(f"{k} {v[-1][0]:.4f} ({v[-1][1]:.4f})"
                                                   for k, v in worst.items()))
        for name, v in worst.items():
            broken = [b for b, (e, se) in zip(betas, v) if e - k_t * se > figs.MARGIN]
            print(f"  breakdown beta of {name}: {broken[0] if broken else 'none'} "
                  f"(miss - {k_t:.2f} s.e. > {figs.MARGIN:g})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["diagnostic", "breakdown", "grid", "heldout"], required=True)
    ap.add_argument("--beta", type=float, nargs="+", default=[1.5])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--sem", type=float, default=0.003)
    ap.add_argument("--pilot", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-trials", type=int, default=64)
    ap.add_argument("--blas-threads", type=int, default=1)
    args = ap.parse_args()
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        if args.part == "diagnostic":
            diagnostic({n: SIZES[n] for n in args.sizes})
            return
        if args.part == "breakdown":
            breakdown([512, 2048], [0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0], 8, 9)
            return
        if args.part == "grid":
            grid = sg.settings(args.beta, args.n)
            names, ss, seed = [g[0] for g in grid], [g[1] for g in grid], 0
        else:
            ss = [setting(*h) for h in HELDOUT]
            names = [f"beta={h[0]:g} c={h[1]:g} snr={h[2]:g} |w|={h[3]:g} {h[4]}" for h in HELDOUT]
            seed = HELDOUT_SEED
        gammas = [sg.informative(s) for s in ss]
        values = draws(ss, gammas, args.n, args.pilot, args.sem, args.rounds, args.max_trials, seed)
        print(f"n={args.n}; largest |theory - MC| over 6 effective gammas per setting (limit, row "
              f"theory), largest s.e., points of the row theory beyond 3 s.e.")
        compare(names, ss, args.n, values, gammas)


if __name__ == "__main__":
    main()
