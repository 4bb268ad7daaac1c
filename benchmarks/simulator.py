"""Cost of one Monte Carlo trial against its unavoidable GEMMs, measured in one process.

One attention + ridge trial at ``n = 2048``, ``p = 512`` (``f = tanh``) needs at least the three
matrix products ``X^T X`` (n x p x n), ``Phi = X K`` (p x n x n) and ``Phi Phi^T`` (p x n x p).
This script times them and a full trial (``attn_lib.simulation.simulate.draw_errors`` on a 50-point gamma
grid) in interleaved repeats, and prints the medians, the minima and the ratio
``trial / (sum of the GEMMs)`` of each. Target: at most 2. The same trial under softmax
attention (``Softmax(1.0)``, the same setting otherwise: row ``softmax``) is timed in the same
repeats, and the ratio ``softmax trial / tanh trial`` printed; target: at most 1.2. Trial and
GEMMs run with the same BLAS threads (``--blas-threads``, default 1: the threads every mode of
:mod:`attn_lib.simulation.executor` gives a trial), so the comparison is like with like.

It also reads how busy the cores were with other processes during the run (``/proc/stat``
minus this process's CPU time) and says whether it was measured alone or under load: run it
alone on an idle machine for the README.

With ``--memory`` it instead runs one trial at ``n = 4096, p = 8192`` and prints the peak
resident memory (the simulator must fit in 24 GB).

Usage: ``python benchmarks/simulator.py [--n 2048] [--c 0.25] [--repeats 9] [--blas-threads 1] [--memory]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import time

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (``/proc/stat``), or ``None``."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--c", type=float, default=0.25)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads of trial and GEMMs alike (default 1, as in every executor mode)")
    ap.add_argument("--memory", action="store_true", help="peak memory at n=4096, p=8192")
    args = ap.parse_args()
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        run(args)


def run(args: argparse.Namespace) -> None:
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

    softmax = dataclasses.replace(setting, attention=al.Softmax(1.0))
    gemm = {"X^T X": lambda: X.T @ X, "X K": lambda: X @ K, "Phi Phi^T": lambda: Phi @ Phi.T}
    times: dict[str, list[float]] = {name: [] for name in [*gemm, "trial", "softmax"]}
    busy0, own0, wall0 = _busy_seconds(), _own_seconds(), time.perf_counter()
    for r in range(args.repeats):
        for name, fn in gemm.items():
            times[name].append(_time(fn))
        for name, s in (("trial", setting), ("softmax", softmax)):
            times[name].append(_time(
                lambda: al.simulate.draw_errors(s, gammas, args.n, np.random.default_rng(r))))
    wall = time.perf_counter() - wall0
    busy1, own = _busy_seconds(), _own_seconds() - own0
    print(f"n={args.n} p={p} f=tanh, 50 gammas, {args.repeats} interleaved repeats, "
          f"{al.kernel.blas_threads()} BLAS threads")
    print(f"  {'':10s} {'median':>9s} {'min':>9s}")
    for name, t in times.items():
        print(f"  {name:10s} {np.median(t) * 1e3:6.1f} ms {min(t) * 1e3:6.1f} ms")
    for stat, fn in (("medians", np.median), ("minima", min)):
        floor = sum(fn(times[name]) for name in gemm)
        print(f"ratio trial / GEMMs of the {stat}: {fn(times['trial']) / floor:.2f}  (target <= 2)")
    for stat, fn in (("medians", np.median), ("minima", min)):
        print(f"ratio softmax trial / tanh trial of the {stat}: "
              f"{fn(times['softmax']) / fn(times['trial']):.2f}  (target <= 1.2)")
    cores = os.cpu_count() or 1
    if busy0 is None or busy1 is None:
        print("load of other processes unknown (no /proc/stat)")
    else:
        others = max(0.0, (busy1 - busy0 - own) / wall)
        verdict = "measured alone" if others < 0.1 else "measured under load"
        print(f"{verdict}: other processes kept {others:.2f} of {cores} cores busy on average")


if __name__ == "__main__":
    main()
