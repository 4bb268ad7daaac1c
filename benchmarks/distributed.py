"""Monte Carlo on Dask: the speedup of 2 local workers over 1, and a scaling model for a cluster.

The sweep is the SNR sweep of chapter 2 (``deterministic_equivalent.snr_sweep``) at the full
profile's size: ``Setting(c=1/4, snr=s)`` for 13 values ``s = linspace(0, 4, 13)``, ``n = 2048``
(``p = 512``), 4 trials, ``gamma = 1e-5``: ``N = 52`` independent (setting, trial) tasks, sent
together by :func:`attn_lib.studies.sweeps.simulations` (uncached). It is run

* in-process (serial, the default BLAS threads) and in-process with one BLAS thread, which
  gives the time of one task ``t``;
* on ``LocalCluster``\\ s of 1 and 2 worker processes (one thread, one BLAS thread each): the
  speedup of 2 workers over 1 on this machine;

and every cluster run is checked to be bit-identical to the serial run with one BLAS thread
(the workers' BLAS threads; the serial run with the default threads may differ by rounding,
whose largest relative size is printed). Measured for the model: the
bytes moved per task (the pickled task -- its child seed; the pickled trial function, sent once
per setting; the pickled result), the scheduler's overhead per task ``h`` (wall time per task of
400 no-op tasks on the 2-worker cluster) and the fixed cost ``s`` of one sweep (one no-op task).

**Model** (Amdahl with a serial per-task overhead): ``N`` tasks of duration ``t`` on ``W``
workers take ``T(W) = s + N h + ceil(N / W) t`` (the scheduler handles the tasks one at a time;
the workers run ``ceil(N / W)`` rounds), so the efficiency is ``E(W) = N t / (W T(W))``. It is
printed for ``W = 2, 8, 64`` for this sweep sent whole (all ``N`` tasks in flight) and sent
setting by setting (4 tasks in flight: ``T = B (s + T h + ceil(T / W) t)``), and for a sweep of
``--scale`` times as many tasks. The transfer of the bytes above is not in the model: at
1 Gbit/s it is printed as a time per task, to compare with ``h``.

Run it alone on an idle machine (the numbers in the README say under which load they were
taken). Usage: ``python benchmarks/distributed.py [--n 2048] [--trials 4] [--scale 10]``
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import pickle
import sys
import time

# This script is named like the package it runs on: keep its folder off the import path.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import cloudpickle  # noqa: E402
import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import attn_lib as al  # noqa: E402
from attn_lib.simulation import executor, simulate, trials  # noqa: E402
from attn_lib.studies import sweeps  # noqa: E402


def _sweep(n: int, t: int, scheduler: str | None) -> tuple[float, sweeps.SweepResult]:
    settings = [al.Setting(c=0.25, snr=float(s)) for s in np.linspace(0.0, 4.0, 13)]
    t0 = time.perf_counter()
    out = sweeps.simulations(settings, 1e-5, n, t, seed=0, use_cache=False, scheduler=scheduler)
    return time.perf_counter() - t0, out


def _same(a: sweeps.SweepResult, b: sweeps.SweepResult) -> bool:
    return all(a.values(m).tobytes() == b.values(m).tobytes() for m in ("attention", "ridge"))


def _rel(a: sweeps.SweepResult, b: sweeps.SweepResult) -> float:
    return max(float(np.max(np.abs(a.values(m) - b.values(m)) / np.abs(b.values(m))))
               for m in ("attention", "ridge"))


def _model(N: int, t: float, h: float, s: float, W: int) -> float:
    return s + N * h + math.ceil(N / W) * t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--scale", type=int, default=10, help="a sweep this many times larger")
    args = ap.parse_args()
    B, T = 13, args.trials
    N = B * T
    print(f"sweep: chapter 2's SNR sweep, 13 settings x {T} trials = {N} tasks, n = {args.n}, "
          f"c = 1/4 (p = {round(args.n / 4)}), gamma = 1e-5")

    wall_serial, ref = _sweep(args.n, T, "serial")
    with threadpool_limits(limits=1, user_api="blas"):
        wall_one, one = _sweep(args.n, T, "serial")
    t_task = wall_one / N
    print(f"in-process: {wall_serial:.1f} s (default BLAS threads), {wall_one:.1f} s with one "
          f"BLAS thread: t = {t_task:.3f} s per task; the two differ by {_rel(ref, one):.2g} "
          f"relative at most")

    walls = {}
    for W in (1, 2):
        mode = f"local:{W}"
        executor.client(mode)
        _sweep(64, 1, mode)  # warm-up: the workers import the library
        walls[W], res = _sweep(args.n, T, mode)
        print(f"LocalCluster({W} worker{'s' * (W > 1)}): {walls[W]:.1f} s, "
              f"bit-identical to serial with one BLAS thread: {_same(res, one)}")
    print(f"speedup of 2 workers over 1: {walls[1] / walls[2]:.2f}x "
          f"(over in-process serial: {wall_serial / walls[2]:.2f}x)")

    # bytes per task
    plan = simulate.errors_plan(al.Setting(c=0.25, snr=1.0), [1e-5], args.n, T)
    func = functools.partial(trials._draw, plan.trial)
    task_bytes = len(cloudpickle.dumps(plan.seeds[0]))
    func_bytes = len(cloudpickle.dumps(func))
    result_bytes = len(pickle.dumps(func(plan.seeds[0]), protocol=pickle.HIGHEST_PROTOCOL))
    per_task = task_bytes + result_bytes + func_bytes / T
    print(f"bytes per task: task {task_bytes} B (its child seed), result {result_bytes} B, trial "
          f"function {func_bytes} B once per setting ({func_bytes / T:.0f} B per task): "
          f"{per_task:.0f} B, {per_task * 8 / 1e9 * 1e3:.4f} ms at 1 Gbit/s")

    # scheduler overhead per task and fixed cost of a sweep, on the 2-worker cluster
    t0 = time.perf_counter()
    for _ in executor.run([(abs, list(range(400)))], scheduler="local:2"):
        pass
    h = (time.perf_counter() - t0) / 400
    fixed = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in executor.run([(abs, [0])], scheduler="local:2"):
            pass
        fixed.append(time.perf_counter() - t0)
    s = min(fixed)
    print(f"scheduler overhead h = {h * 1e3:.2f} ms per task (400 no-op tasks); fixed cost of a "
          f"sweep s = {s * 1e3:.1f} ms (one no-op task, best of 5)")

    print(f"model T(W) = s + N h + ceil(N/W) t; at W = 2 it predicts "
          f"{_model(N, t_task, h, s, 2):.1f} s against {walls[2]:.1f} s measured")
    print(f"{'tasks in flight':>28} | " + " | ".join(f"E({W:2d})" for W in (2, 8, 64)))
    rows = [(f"whole sweep ({N})", lambda W: N * t_task / (W * _model(N, t_task, h, s, W))),
            (f"setting by setting ({T})",
             lambda W: N * t_task / (W * B * _model(T, t_task, h, s, W))),
            (f"{args.scale}x the sweep ({args.scale * N})",
             lambda W: args.scale * N * t_task / (W * _model(args.scale * N, t_task, h, s, W)))]
    for name, eff in rows:
        print(f"{name:>28} | " + " | ".join(f"{eff(W):5.0%}" for W in (2, 8, 64)))
    executor.shutdown()


if __name__ == "__main__":
    main()
