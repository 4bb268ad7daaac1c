"""Cost of one Monte Carlo trial against its unavoidable GEMMs, measured in one process.

One attention + ridge trial at ``n = 2048``, ``p = 512`` (``f = tanh``) needs at least the three
matrix products ``X^T X`` (n x p x n), ``Phi = X K`` (p x n x n) and ``Phi Phi^T`` (p x n x p).
This script times them and a full trial (``attn_lib.simulation.simulate.draw_errors`` on a 50-point gamma
grid), each as the minimum over interleaved repeats, and prints the ratio
``trial / (sum of the GEMMs)``. Target: at most 2. Run it alone on an idle machine.

With ``--memory`` it instead runs one trial at ``n = 4096, p = 8192`` and prints the peak
resident memory (the simulator must fit in 24 GB).

Usage: ``python benchmarks/simulator.py [--n 2048] [--c 0.25] [--repeats 5] [--memory]``
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import attn_lib as al


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--c", type=float, default=0.25)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--memory", action="store_true", help="peak memory at n=4096, p=8192")
    args = ap.parse_args()
    if args.memory:
        setting = al.Setting(c=2.0, snr=2.0, f="tanh", wk_norm=2.0, wq_norm=2.0)
        t0 = time.perf_counter()
        al.simulate.errors(setting, np.logspace(-5, 1, 50), n=4096, trials=1)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
        print(f"n=4096 p=8192: one trial in {time.perf_counter() - t0:.1f} s, "
              f"peak resident memory {peak:.2f} GB (limit 24 GB)")
        return

    setting = al.Setting(c=args.c, snr=2.0, f="tanh", wk_norm=2.0, wq_norm=2.0)
    gammas = np.logspace(-5, 1, 50)
    rng = np.random.default_rng(0)
    p = setting.p(args.n)
    X = rng.standard_normal((p, args.n))
    K = rng.standard_normal((args.n, args.n))
    Phi = X @ K

    gemm = {"X^T X": lambda: X.T @ X, "X K": lambda: X @ K, "Phi Phi^T": lambda: Phi @ Phi.T}
    best = {name: np.inf for name in [*gemm, "trial"]}
    for r in range(args.repeats):
        for name, fn in gemm.items():
            best[name] = min(best[name], _time(fn))
        best["trial"] = min(best["trial"], _time(
            lambda: al.simulate.draw_errors(setting, gammas, args.n, np.random.default_rng(r))))
    floor = sum(best[name] for name in gemm)
    print(f"n={args.n} p={p} f=tanh, 50 gammas, min over {args.repeats} interleaved repeats")
    for name, t in best.items():
        print(f"  {name:10s} {t * 1e3:8.1f} ms")
    print(f"ratio trial / GEMMs = {best['trial'] / floor:.2f}  (target <= 2)")


if __name__ == "__main__":
    main()
