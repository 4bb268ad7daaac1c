"""Rank-r key-query weights: the proportional-limit theory against Monte Carlo (issue 13, stage 1).

``W = I + sum_{k<=r} w_K^(k) w_Q^(k)T`` (:class:`attn_lib.RankSetting`) for ``r = 1, 2, 4, 8,
32`` in two geometries, tanh, ``c = 1/2``, ``snr = 1.5``, weight norms 1.5:

* ``random``: ``mu`` and the ``2 r`` weight vectors along independent random directions of
  ``R^(1 + 2r)`` (:func:`random_setting`);
* ``aligned``: ``w_K^(k) = w_Q^(k) = 1.5 e_k`` and ``mu`` along ``sum_k e_k``, inside the span of
  the weights (:func:`aligned_setting`); its limit does not depend on ``r``, the Monte Carlo does
  at finite ``p``.

Per point (setting, gamma in 1e-3, 1e-1, 1): the theory ``attention_error(s, gammas)``, the
Monte Carlo mean and standard error (``--trials`` draws, seed 1), the difference and
``z = (MC - theory) / sem``; the coherent shift ``delta``. Summary: median and maximum absolute
difference for ``r <= 8`` (issue 13's target at ``n = 2048``, ``delta <= 0.3``: median at most
0.005, maximum at most 0.02) and for ``r = 32``.

Usage::

    python benchmarks/rank_r.py [--n 2048] [--trials 32] [--ranks 1 2 4 8 32]

Last result (n = 2048, 32 trials: s.e. 0.0014-0.0027, issue 13 asks for at most 0.003; 9 min
under load): r <= 8, median 0.0025 and maximum 0.0050 over 24 points; r = 32, median 0.0014 and
maximum 0.0045. The aligned geometry (delta = 0.152) sits 0.001 to 0.005 below the limit at
every r, rank one included (0.0042 to 0.0047, z down to -3.3 at r = 8): the coherent shift's
correction, which the limit leaves out; the random geometry (delta <= 0.067) is within 1.3 s.e.
everywhere. The theory takes 0.02-0.11 s per 3-point curve (r = 32 the slowest).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al

GAMMAS = np.array([1e-3, 1e-1, 1.0])


def random_setting(r: int, c: float = 0.5, snr: float = 1.5, norm: float = 1.5,
                   f: str = "tanh", seed: int = 0) -> al.RankSetting:
    """``mu`` (``||mu||^2 = snr``) and ``2 r`` vectors of norm ``norm`` in random directions."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((1 + 2 * r, 1 + 2 * r))
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    V[0] *= np.sqrt(snr)
    V[1:] *= norm
    return al.RankSetting.from_vectors(c, V[0], V[1:1 + r], V[1 + r:], f=f)


def aligned_setting(r: int, c: float = 0.5, snr: float = 1.5, norm: float = 1.5,
                    f: str = "tanh") -> al.RankSetting:
    """``w_K^(k) = w_Q^(k) = norm e_k`` and ``mu = sqrt(snr / r) sum_k e_k``."""
    W = norm * np.eye(r)
    return al.RankSetting.from_vectors(c, np.full(r, np.sqrt(snr / r)), W, W, f=f)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8, 32])
    ap.add_argument("--blas-threads", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"n = {args.n}, p = {round(0.5 * args.n)}, {args.trials} trials, tanh, c = 0.5, "
          "snr = 1.5, weight norms 1.5")
    print(f"{'r':>3} {'geometry':>8} {'delta':>6} {'gamma':>7} {'theory':>8} {'MC':>8} "
          f"{'sem':>7} {'MC-th':>8} {'z':>6}")
    diffs: dict[bool, list[float]] = {True: [], False: []}
    with threadpool_limits(args.blas_threads):
        for r in args.ranks:
            for name, s in (("random", random_setting(r)), ("aligned", aligned_setting(r))):
                t0 = time.perf_counter()
                th = al.theory.attention_error(s, GAMMAS)
                t_th = time.perf_counter() - t0
                mc = al.simulate.errors(s, GAMMAS, n=args.n, trials=args.trials, seed=1).attention
                for k, g in enumerate(GAMMAS):
                    d = mc.mean[k] - th[k]
                    diffs[r <= 8].append(abs(d))
                    print(f"{r:>3} {name:>8} {s.delta(args.n):>6.3f} {g:>7.0e} {th[k]:>8.4f} "
                          f"{mc.mean[k]:>8.4f} {mc.sem[k]:>7.4f} {d:>+8.4f} {d / mc.sem[k]:>+6.1f}"
                          + (f"   (theory {t_th:.2f} s)" if k == 0 else ""), flush=True)
    for small, label in ((True, "r <= 8"), (False, "r > 8")):
        if diffs[small]:
            a = np.array(diffs[small])
            print(f"{label}: |MC - theory| median {np.median(a):.4f}, max {a.max():.4f} "
                  f"over {a.size} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
