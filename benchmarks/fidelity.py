"""Fidelity of the deterministic equivalents against Monte Carlo, and their speed.

For every setting of a grid (nonlinearities, aspect ratios, SNR, weight norms and geometries)
and every ``n`` the script compares ``theory.attention_error`` and ``theory.ridge_error`` with
the Monte Carlo mean of :func:`attn_lib.simulation.simulate.errors` on a ``gamma`` grid, adding trials until
the largest standard error of the mean over the grid is below ``--sem`` (or a cap on trials or
on the time budget is reached; the achieved standard error is reported). Absolute errors are
summarised per ``n`` and per bin of the coherent shift
``delta = |snr + (mu^T w_K)(mu^T w_Q)| / sqrt(p)`` (``Setting.delta(n)``): ``[0, 0.1]``,
``(0.1, 0.3]``, ``> 0.3``. Large-``delta`` settings are listed individually with their signed gap.

Speed (printed as ratios; time it on an otherwise idle machine):

* a 50-point ``gamma`` curve of the theory for ``f = tanh``, ``c = 0.5`` versus 5 Monte Carlo
  trials at ``n = 2048`` on the same grid (minimum of repeats);
* 10,000 random settings at one ``gamma`` each through ``attention_error_batch``.

Usage::

    python benchmarks/fidelity.py [--quick] [--n 512 1024 2048] [--out results.json|.csv]
                                  [--sem 0.003] [--budget-minutes 30] [--skip-speed]
                                  [--blas-threads 1] [--rescore results.json]

``--rescore`` recomputes the theory columns of a saved run (keeping its Monte Carlo) and prints
the tables again. BLAS is limited to ``--blas-threads`` threads (default 1): on a shared
2-core machine two OpenBLAS threads per process made a Monte Carlo trial ~50x slower.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import warnings

import numpy as np

from threadpoolctl import threadpool_limits

from adaptive import trials_until
from attn_lib.simulation.trials import standard_error
from attn_lib import Setting, simulate
from attn_lib.theory import attention_error, attention_error_batch, ridge_error
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

GAMMAS = np.array([1e-5, 1e-3, 1e-2, 1e-1, 1.0, 10.0])
BINS = [(0.0, 0.1, "0-0.1"), (0.1, 0.3, "0.1-0.3"), (0.3, np.inf, ">0.3")]
MAX_TRIALS = {512: 100, 1024: 40, 2048: 16}

ORTH = dict(cos_mu_wk=0.0, cos_mu_wq=0.0, cos_wk_wq=1.0)
PART = dict(cos_mu_wk=0.6, cos_mu_wq=0.6, cos_wk_wq=1.0)
DIFF = dict(cos_mu_wk=0.8, cos_mu_wq=-0.3, cos_wk_wq=0.2)


def grid(quick: bool) -> list[tuple[str, Setting]]:
    """The benchmark settings as ``(name, Setting)``."""
    s = [
        ("tanh c=0.5 snr=0", Setting(c=0.5, f="tanh")),
        ("relu c=1 snr=0", Setting(c=1.0, f="relu")),
        ("cos c=2 snr=2 aligned w=1", Setting(c=2.0, f="cos", snr=2.0, wk_norm=1.0, wq_norm=1.0)),
        ("tanh c=0.5 snr=1 aligned w=1", Setting(c=0.5, f="tanh", snr=1.0, wk_norm=1.0, wq_norm=1.0)),
        ("sign c=0.25 snr=2 orth w=2", Setting(c=0.25, f="sign", snr=2.0, wk_norm=2.0, wq_norm=2.0, **ORTH)),
        ("erf c=4 snr=1 partial w=1.5", Setting(c=4.0, f="erf", snr=1.0, wk_norm=1.5, wq_norm=1.5, **PART)),
        ("relu c=2 snr=2 wK!=wQ", Setting(c=2.0, f="relu", snr=2.0, wk_norm=1.5, wq_norm=0.7, **DIFF)),
        ("tanh c=1 snr=4 orth w=4", Setting(c=1.0, f="tanh", snr=4.0, wk_norm=4.0, wq_norm=4.0, **ORTH)),
        ("erf c=1 snr=1 aligned w=2", Setting(c=1.0, f="erf", snr=1.0, wk_norm=2.0, wq_norm=2.0)),
        ("sign c=0.5 snr=0.5 wK!=wQ w=0.5,3", Setting(c=0.5, f="sign", snr=0.5, wk_norm=0.5, wq_norm=3.0, **DIFF)),
        ("cos c=0.5 snr=8 aligned w=2", Setting(c=0.5, f="cos", snr=8.0, wk_norm=2.0, wq_norm=2.0)),
        ("tanh c=0.25 snr=2 partial w=1", Setting(c=0.25, f="tanh", snr=2.0, wk_norm=1.0, wq_norm=1.0, **PART)),
        ("relu c=4 snr=8 orth w=1", Setting(c=4.0, f="relu", snr=8.0, wk_norm=1.0, wq_norm=1.0, **ORTH)),
        ("tanh c=0.5 snr=4 aligned w=1", Setting(c=0.5, f="tanh", snr=4.0, wk_norm=1.0, wq_norm=1.0)),
        ("sign c=1 snr=4 aligned w=2", Setting(c=1.0, f="sign", snr=4.0, wk_norm=2.0, wq_norm=2.0)),
        ("erf c=0.5 snr=8 aligned w=1", Setting(c=0.5, f="erf", snr=8.0, wk_norm=1.0, wq_norm=1.0)),
        ("tanh c=2 snr=8 partial w=3", Setting(c=2.0, f="tanh", snr=8.0, wk_norm=3.0, wq_norm=3.0, **PART)),
    ]
    if quick:
        return [s[i] for i in (0, 3, 6, 13)]
    return s


def run_fidelity(ns: list[int], quick: bool, sem_target: float, budget_s: float) -> list[dict]:
    rows = []
    settings = grid(quick)
    t_start = time.time()
    for n in ns:
        # equal shares of the remaining budget per n: a trial costs ~ n^3 but the per-draw spread
        # shrinks like n^{-1/2}, so small n needs many more trials
        rest = [m for m in ns if m >= n]
        share = 1.0 / len(rest)
        deadline_n = time.time() + share * (budget_s - (time.time() - t_start))
        for i, (name, s) in enumerate(settings):
            th_a = attention_error(s, GAMMAS)
            th_r = ridge_error(s, GAMMAS)
            left = len(settings) - i
            deadline = time.time() + (deadline_n - time.time()) / left
            A, R = trials_until(s, GAMMAS, n, sem_target, MAX_TRIALS.get(n, 16), deadline, seed=17 + i)
            t = A.shape[0]
            mA, sA = A.mean(axis=0), standard_error(A, axis=0)
            mR, sR = R.mean(axis=0), standard_error(R, axis=0)
            for k, g in enumerate(GAMMAS):
                rows.append(dict(setting=name, n=n, p=s.p(n), gamma=float(g), delta=float(s.delta(n)),
                                 trials=t, theory_attention=float(th_a[k]), mc_attention=float(mA[k]),
                                 sem_attention=float(sA[k]), theory_ridge=float(th_r[k]),
                                 mc_ridge=float(mR[k]), sem_ridge=float(sR[k])))
            print(f"  n={n:5d} {name:40s} delta={s.delta(n):5.3f} trials={t:3d} "
                  f"max|att err|={np.abs(th_a - mA).max():.4f} max|ridge err|={np.abs(th_r - mR).max():.4f} "
                  f"max sem={max(sA.max(), sR.max()):.4f}", file=sys.stderr, flush=True)
    return rows


def summary_table(rows: list[dict]) -> str:
    ns = sorted({r["n"] for r in rows})
    lines = ["| n | delta bin | points | settings | attention median | attention max | ridge median | ridge max | max sem |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n in ns:
        for lo, hi, lab in BINS:
            sel = [r for r in rows if r["n"] == n and lo <= r["delta"] <= hi and not (lo > 0 and r["delta"] == lo)]
            if not sel:
                continue
            ea = np.array([abs(r["theory_attention"] - r["mc_attention"]) for r in sel])
            er = np.array([abs(r["theory_ridge"] - r["mc_ridge"]) for r in sel])
            sem = max(max(r["sem_attention"], r["sem_ridge"]) for r in sel)
            lines.append(f"| {n} | {lab} | {len(sel)} | {len({r['setting'] for r in sel})} | "
                         f"{np.median(ea):.4f} | {ea.max():.4f} | {np.median(er):.4f} | {er.max():.4f} | {sem:.4f} |")
    return "\n".join(lines)


def _largest_gap(rows: list[dict], name: str, n: int) -> tuple[list[dict], float, int] | None:
    """Rows of one setting at one n, its largest signed attention gap theory - MC, and where."""
    sel = [r for r in rows if r["setting"] == name and r["n"] == n]
    if not sel:
        return None
    gaps = np.array([r["theory_attention"] - r["mc_attention"] for r in sel])
    k = int(np.abs(gaps).argmax())
    return sel, float(gaps[k]), k


def _per_setting_table(rows: list[dict], names, header: str, cell) -> str:
    """One row per setting, one column per n; ``cell(name, sel, gap, k)`` formats a found gap."""
    ns = sorted({r["n"] for r in rows})
    lines = ["| setting | " + " | ".join(f"n={n}: {header}" for n in ns) + " |",
             "|---|" + "---|" * len(ns)]
    for name in names:
        cells = []
        for n in ns:
            found = _largest_gap(rows, name, n)
            cells.append("-" if found is None else cell(name, *found))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gap_table(rows: list[dict]) -> str:
    """Per setting with delta > 0.3 at some n: the signed attention gap theory - MC at each n."""
    return _per_setting_table(
        rows, sorted({r["setting"] for r in rows if r["delta"] > 0.3}),
        "delta, largest gap (signed)",
        lambda name, sel, gap, k: (f"{sel[0]['delta']:.2f}, {gap:+.4f} (gamma={sel[k]['gamma']:g}, "
                                   f"E_mc={sel[k]['mc_attention']:.3f})"))


def setting_table(rows: list[dict]) -> str:
    """Per setting: delta, the weight scale ||w_K|| ||w_Q|| / sqrt(p) and the largest attention gap per n."""
    settings = dict(grid(False))

    def cell(name: str, sel: list[dict], gap: float, k: int) -> str:
        st = settings.get(name)
        ws = st.wk_norm * st.wq_norm / np.sqrt(sel[0]["p"]) if st is not None else float("nan")
        return f"{sel[0]['delta']:.2f} / {ws:.2f} / {gap:+.4f}"

    return _per_setting_table(rows, dict.fromkeys(r["setting"] for r in rows),
                              "delta / wscale / gap", cell)


def speed(repeats: int = 3, n: int = 2048, n_batch: int = 10000) -> dict:
    s = Setting(c=0.5, f="tanh")
    g50 = np.logspace(-5, 1, 50)
    attention_error(s, g50)  # warm the Hermite cache
    # the theory curve takes tens of milliseconds: many repeats make its minimum stable
    t_theory = min(_timed(lambda: attention_error(s, g50)) for _ in range(20 * repeats))
    t_mc = min(_timed(lambda: simulate.errors(s, g50, n=n, trials=5)) for _ in range(max(1, repeats - 2)))
    rng = np.random.default_rng(0)
    fs = ["tanh", "relu", "sign", "erf", "cos"]
    settings = []
    for i in range(n_batch):
        cos = rng.uniform(-1, 1)
        settings.append(Setting(c=float(rng.choice([0.25, 0.5, 1.0, 2.0, 4.0])), f=fs[i % 5],
                                snr=float(rng.uniform(0, 8)), wk_norm=float(rng.uniform(0.5, 4)),
                                wq_norm=float(rng.uniform(0.5, 4)), cos_mu_wk=float(cos),
                                cos_mu_wq=float(cos), cos_wk_wq=1.0))
    gam = 10 ** rng.uniform(-5, 1, n_batch)
    attention_error_batch(settings[:10], gam[:10])
    t_batch = _timed(lambda: attention_error_batch(settings, gam))
    return dict(theory_curve_s=t_theory, mc_5_trials_s=t_mc, ratio=t_mc / t_theory,
                batch_settings=n_batch, batch_s=t_batch)


def _print_speed(sp: dict, threads: int) -> None:
    print("\n## Speed\n")
    print(f"* 50-point gamma curve (tanh, c = 0.5): theory {sp['theory_curve_s']:.3f} s, "
          f"5 Monte Carlo trials {sp['mc_5_trials_s']:.1f} s: ratio {sp['ratio']:.0f}x")
    print(f"* {sp['batch_settings']} settings at one gamma each: {sp['batch_s']:.1f} s")
    print(f"* BLAS threads: {threads}")


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 settings, n = 256, 512")
    ap.add_argument("--n", type=int, nargs="+", default=None, help="token counts (default 512 1024 2048)")
    ap.add_argument("--sem", type=float, default=0.003, help="target Monte Carlo standard error")
    ap.add_argument("--budget-minutes", type=float, default=25.0, help="time budget of the Monte Carlo")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--out", default=None, help="write rows to a .json or .csv file")
    ap.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (default 1)")
    ap.add_argument("--rescore", default=None, help="recompute the theory for a saved .json run")
    ap.add_argument("--speed-only", action="store_true", help="only the speed measurements")
    args = ap.parse_args(argv)
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        return _main(args)


def _rescore(path: str) -> list[dict]:
    with open(path) as fh:
        rows = json.load(fh)["rows"]
    settings = dict(grid(False))
    for r in rows:
        s = settings[r["setting"]]
        r["theory_attention"] = float(attention_error(s, r["gamma"]))
        r["theory_ridge"] = float(ridge_error(s, r["gamma"]))
    return rows


def _main(args) -> int:
    ns = args.n or ([256, 512] if args.quick else [512, 1024, 2048])
    if args.speed_only:
        sp = speed(n=2048 if not args.quick else 512, n_batch=10000 if not args.quick else 1000)
        _print_speed(sp, args.blas_threads)
        return 0
    if args.rescore:
        rows = _rescore(args.rescore)
        args.skip_speed = True
    else:
        rows = run_fidelity(ns, args.quick, args.sem, 60.0 * args.budget_minutes)
    print("## Attention and ridge deterministic equivalents vs Monte Carlo (absolute error)\n")
    print(f"gammas = {', '.join(f'{g:g}' for g in GAMMAS)}\n")
    print(summary_table(rows))
    print("\n## Large coherent shift (delta > 0.3): theory - Monte Carlo\n")
    print(gap_table(rows))
    print("\n## Per setting: delta, ||w_K|| ||w_Q|| / sqrt(p), largest signed attention gap (theory - MC)\n")
    print(setting_table(rows))
    result = {"rows": rows}
    if not args.skip_speed:
        sp = speed(n=2048 if not args.quick else 512, n_batch=10000 if not args.quick else 1000)
        result["speed"] = sp
        _print_speed(sp, args.blas_threads)
    if args.out:
        if args.out.endswith(".csv"):
            with open(args.out, "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
        else:
            with open(args.out, "w") as fh:
                json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
