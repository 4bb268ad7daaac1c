"""Speed of the finite-size theory: curves, maps, against Monte Carlo and against main's solver.

Prints, in one run (one BLAS thread):

* the time of a 50-point ``gamma`` curve (``logspace(-4, 0, 50)``) at ``n = 2048`` for one, two
  and three latent directions (the settings of ``benchmarks/strong_alignment.py --speed-only``:
  sign, ``c = 0.3``, SNR 4, ``delta = 1.5``), minimum over repeats, wall-clock and CPU time;
* five Monte Carlo trials of the same settings (same ``gamma`` grid) and the ratios;
* 100 x 100 finite-size maps at ``n = 2048`` and one ``gamma``: chapter 9's grid (sign,
  ``c = 0.3``, aligned ``w_K = w_Q = w``, SNR 0.5..8, ``|w|`` 0..3, ``gamma = 0.1``: one latent
  direction) and one with three latent directions (cosines 0.8, 0.7, 0.3 of the ``nonparallel``
  geometry, ``|w_Q| = 1.5 |w_K|``, ``|w_K|`` 0.5..3); ``--map-size`` solves a smaller grid and
  the time is scaled by the number of cells (printed as an extrapolation);
* how the cost grows with the number of types ``T`` (three latent directions, ``nodes`` 6, 8, 10
  per direction);
* with ``--baseline DIR`` (another checkout's tree, e.g. ``git archive main | tar -x -C DIR``),
  that code's ``attn_lib`` against this one's in the same process, interleaved (baseline, this,
  baseline, ...; one BLAS thread, minimum over repeats): the 50-gamma curve with one latent
  direction and the maps with one, two and three latent directions (``--map-size``,
  ``--map3-size``), their speed-up and the largest relative difference of their values;
* the largest relative difference of ``q = y^T Q y / n`` and ``dq/dgamma`` to main's solver
  (commit 61eff64, sequential continuation with ratio 2) on 13 curves and points, whose values
  are stored in ``benchmarks/finite_size_speed_reference.json`` (computed by main's code,
  not by this run).

Usage::

    python benchmarks/finite_size_speed.py [--repeats 3] [--map-size 100] [--map3-size 20]
                                           [--skip-mc] [--skip-maps]
    python benchmarks/finite_size_speed.py --baseline DIR [--repeats 3] [--map-size 10] [--map3-size 2]

Targets (issue 14): a curve in at most 0.05 s (r = 1) and 0.5 s (r = 2, 3) on an idle machine;
a 100 x 100 map in at most 60 s; agreement with main to a relative 1e-6.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from strong_alignment import GEOMETRIES, weighted_setting
import attn_lib
from attn_lib import Setting, simulate
from attn_lib.theory import attention_error, attention_resolvent_form
from attn_lib.theory import _finite_size as fs
from attn_lib.theory.attention import attention_error_batch
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

N = 2048
G50 = np.logspace(-4, 0, 50)
REFERENCE = Path(__file__).resolve().parent / "finite_size_speed_reference.json"


def timed(fn, repeats: int) -> tuple[float, float]:
    """Minimum wall-clock and CPU seconds of ``fn()`` over ``repeats`` calls."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def curve_settings() -> dict[str, Setting]:
    return {geo: weighted_setting("sign", 0.3, 4.0, geo, 1.5, N) for geo in GEOMETRIES}


def curves(repeats: int, mc: bool) -> None:
    print(f"50-gamma curve at n = {N} (min of {repeats}; wall / CPU seconds)")
    for geo, s in curve_settings().items():
        m = fs._Model(s.canonical(), N)
        attention_error(s, G50, n=N)  # warm-up: shift tables
        wall, cpu = timed(lambda: attention_error(s, G50, n=N), repeats)
        line = f"  {geo:12s} r={m.law.r} T={len(m.delta):4d}: {wall:7.3f} / {cpu:7.3f} s"
        if mc:
            with threadpool_limits(limits=1, user_api="blas"):
                mwall, mcpu = timed(lambda: simulate.errors(s, G50, n=N, trials=5, seed=0), 1)
            line += f"   5 MC trials {mwall:6.2f} / {mcpu:6.2f} s   ratio {mwall / wall:6.1f}x (wall)"
        print(line, flush=True)


def chapter9_grid(size: int) -> list[Setting]:
    """Chapter 9's map: sign, c = 0.3, aligned w_K = w_Q = w (one latent direction)."""
    snr, w = np.linspace(0.5, 8.0, size), np.linspace(0.0, 3.0, size)
    return [Setting(c=0.3, snr=float(a), f="sign", wk_norm=float(b), wq_norm=float(b)) for b in w for a in snr]


def nonparallel_grid(size: int) -> list[Setting]:
    """Three latent directions: weights neither parallel nor in span(mu)."""
    snr, w = np.linspace(0.5, 8.0, size), np.linspace(0.5, 3.0, size)
    return [Setting(c=0.3, snr=float(a), f="sign", wk_norm=float(b), wq_norm=1.5 * float(b),
                    cos_mu_wk=0.8, cos_mu_wq=0.7, cos_wk_wq=0.3) for b in w for a in snr]


def maps(size: int, size3: int) -> None:
    print(f"finite-size maps at n = {N}, gamma = 0.1 (wall / CPU seconds)")
    for name, grid, k in (("one direction (chapter 9)", chapter9_grid, size),
                          ("three directions", nonparallel_grid, size3)):
        settings = grid(k)
        t0, c0 = time.perf_counter(), time.process_time()
        e = attention_error_batch(settings, 0.1, n=N)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        r = {fs.latent_law(s.canonical(), s.p(N)).r for s in settings}
        scale = 1e4 / len(settings)
        note = "" if k == 100 else f"  -> 100 x 100 extrapolated: {wall * scale:7.1f} / {cpu * scale:7.1f} s"
        print(f"  {name:26s} {k} x {k} (r in {sorted(r)}): {wall:7.1f} / {cpu:7.1f} s, "
              f"{1e3 * wall / len(settings):6.2f} ms per cell{note}; E in [{e.min():.4f}, {e.max():.4f}]",
              flush=True)


def scaling(repeats: int) -> None:
    s = curve_settings()["nonparallel"]
    print("cost against the number of types T (three directions, 50-gamma curve; wall / CPU seconds)")
    for nodes in (6, 8, 10):
        with threadpool_limits(limits=1, user_api="blas"):
            m = fs._Model(s.canonical(), N, nodes)
            build = timed(lambda: fs._Model(s.canonical(), N, nodes), 1)[1]
        wall, cpu = timed(lambda: fs.finite_size_resolvent_form(s, G50, N, nodes=nodes), repeats)
        print(f"  nodes={nodes:2d} T={len(m.delta):5d} slope terms {len(m.s)} mean terms {len(m.S):3d}: curve {wall:7.2f} / {cpu:7.2f} s (model build {build:.2f} s CPU)",
              flush=True)


def reference_cases() -> list[tuple[str, Setting, np.ndarray, int]]:
    """The curves and points whose values main's solver stored in :data:`REFERENCE`."""
    cases = [(f"bench-{geo}", s, G50, N) for geo, s in curve_settings().items()]
    return cases + [
        ("tanh-r1", Setting(c=0.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=1.0), [1e-3, 0.1, 1.0], 512),
        ("relu-r2", Setting(c=2.0, snr=2.0, f="relu", wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.6,
                            cos_mu_wq=0.6), [1e-3, 0.1, 1.0], 512),
        ("deriv", Setting(c=0.3, snr=6.0, f="sign", wk_norm=2.0, wq_norm=3.5), [20.0, 1e-3, 0.1, 0.1, 1.0], 2048),
        ("sign-alpha", Setting(c=0.5, snr=4.0, f="sign", wk_norm=2.0, wq_norm=2.0, alpha=1.5),
         [1e-2, 0.3, 1.0, 3.0], 512),
        ("trunc", Setting(c=1.0, snr=4.0, f="trunc_relu", wk_norm=2.0, wq_norm=2.0, alpha=0.6),
         [1e-2, 0.3, 1.0, 3.0], 512),
        ("erf-r3", Setting(c=0.5, snr=6.0, f="erf", wk_norm=1.5, wq_norm=2.0, cos_mu_wk=0.8, cos_mu_wq=0.6,
                           cos_wk_wq=0.3), [1e-2, 0.3, 1.0, 3.0], 512),
        ("random", Setting(c=0.7, f="sign"), [1e-3, 0.1, 1.0], 300),
        ("cos15", Setting(c=0.5, snr=10.0, f="cos", wk_norm=3.0, wq_norm=3.0, cos_mu_wk=-0.870912938064634,
                          cos_mu_wq=-0.030527303503535122, cos_wk_wq=0.2849164234575394), [1e-4, 1e-2], 512),
        ("map-corner", Setting(c=0.3, snr=8.0, f="sign", wk_norm=3.0, wq_norm=3.0), [0.1], 2048),
        ("map-w0", Setting(c=0.3, snr=0.5, f="sign", wk_norm=0.0, wq_norm=0.0), [0.1], 2048),
    ]


def _baseline(root: Path):
    """The ``attn_lib`` of the tree ``root`` as the package ``attn_baseline`` (its imports are relative)."""
    spec = importlib.util.spec_from_file_location("attn_baseline", root / "attn_lib" / "__init__.py",
                                                  submodule_search_locations=[str(root / "attn_lib")])
    assert spec is not None and spec.loader is not None
    lib = importlib.util.module_from_spec(spec)
    sys.modules["attn_baseline"] = lib
    spec.loader.exec_module(lib)
    warnings.filterwarnings("ignore", category=lib.DomainWarning)
    return lib


def _jobs(lib, size: int, size3: int) -> list[tuple[str, int, object]]:
    """``(name, cells, call)`` of the curve and the three maps, with the settings of ``lib``."""
    def setting(s: Setting):
        return lib.Setting(**{k: getattr(s, k) for k in ("c", "snr", "f", "wk_norm", "wq_norm", "cos_mu_wk",
                                                         "cos_mu_wq", "cos_wk_wq", "alpha")})
    from theory_speed import angle_grid
    batch = importlib.import_module(lib.__name__ + ".theory.attention").attention_error_batch
    curve = setting(curve_settings()["aligned"])
    out: list[tuple[str, int, object]] = [("curve, 50 gammas, r = 1", 1,
                                           lambda: lib.theory.attention_error(curve, G50, n=N))]
    for name, grid, k in (("map r = 1 (chapter 9)", chapter9_grid, size), ("map r = 2 (SNR, angle)", angle_grid, size),
                          ("map r = 3", nonparallel_grid, size3)):
        settings = [setting(s) for s in grid(k)]
        out.append((f"{name} {k} x {k}", len(settings), lambda S=settings: batch(S, 0.1, n=N)))
    return out


def against(root: Path, repeats: int, size: int, size3: int) -> float:
    """This code against the baseline's, interleaved; returns the largest relative difference."""
    base = _baseline(root)
    print(f"this code against {root} (interleaved, one BLAS thread, min of {repeats}; wall seconds)")
    worst = 0.0
    with threadpool_limits(limits=1, user_api="blas"):
        for (name, cells, old), (_, _, new) in zip(_jobs(base, size, size3), _jobs(attn_lib, size, size3)):
            d = float(np.max(np.abs(np.asarray(new()) / np.asarray(old()) - 1)))   # also the warm-up
            worst = max(worst, d)
            t_old, t_new = [], []
            for _ in range(repeats):
                for fn, out in ((old, t_old), (new, t_new)):
                    t0 = time.perf_counter()
                    fn()
                    out.append(time.perf_counter() - t0)
            note = "" if cells == 1 else (f"   100 x 100: {min(t_old) * 1e4 / cells:7.1f} -> "
                                          f"{min(t_new) * 1e4 / cells:7.1f} s")
            print(f"  {name:32s} baseline {min(t_old):8.3f} s  this {min(t_new):8.3f} s  "
                  f"speed-up {min(t_old) / min(t_new):5.2f}x  values within {d:.1e}{note}", flush=True)
    print(f"  largest relative difference: {worst:.1e} (target 1e-8)")
    return worst


def accuracy() -> float:
    ref = json.loads(REFERENCE.read_text())
    worst = 0.0
    print(f"relative difference to main's solver ({ref['commit']}, stored values)")
    for name, s, g, n in reference_cases():
        q, dq = attention_resolvent_form(s, np.asarray(g, dtype=float), n=n)
        rq = np.max(np.abs(q / np.array(ref["cases"][name]["q"]) - 1))
        rd = np.max(np.abs(dq / np.array(ref["cases"][name]["dq"]) - 1))
        worst = max(worst, rq, rd)
        print(f"  {name:18s} q {rq:.1e}  dq {rd:.1e}")
    print(f"  largest: {worst:.1e} (target 1e-6)")
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--map-size", type=int, default=100, help="cells per axis of the one-direction map")
    ap.add_argument("--map3-size", type=int, default=100, help="cells per axis of the three-direction map")
    ap.add_argument("--skip-mc", action="store_true")
    ap.add_argument("--skip-maps", action="store_true")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="time this code against the attn_lib of the tree DIR (interleaved), and only that")
    args = ap.parse_args(argv)
    if args.baseline is not None:
        return 0 if against(args.baseline, args.repeats, args.map_size, args.map3_size) < 1e-8 else 1
    curves(args.repeats, not args.skip_mc)
    scaling(1)
    if not args.skip_maps:
        maps(args.map_size, args.map3_size)
    return 0 if accuracy() < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
