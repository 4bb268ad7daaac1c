"""Every theory against one Monte Carlo trial of the same setting, and its values against main's.

Prints, in one run (one BLAS thread, ``threadpoolctl``), each ratio of issue 35's "Done when":

* the any-matrix theory (GPT-2 layer 5, normalised, ``p = 768``, ``n = 1536``, tanh, SNR 1,
  random ``mu``, ``gamma`` 1e-3, 0.1, 1) and its finite-size version against one Monte Carlo
  trial of the same setting (``attn_lib.simulate.errors``, one trial), interleaved
  (trial, theory, trial, theory, ...), minimum over ``--repeats``;
* the multi-head theory (the layer's 12 heads at unit scale, same ``mu`` and ``gamma``) and its
  finite-size version (the limit plus the heads' reduced-model shift) against one trial of the
  same ``HeadsSetting``;
* the finite-size theory's 50-``gamma`` curve (one latent direction, ``n = 2048``, the setting of
  ``benchmarks/finite_size_speed.py``) against five trials, and 100 x 100 maps at ``n = 2048``
  with one, two and three latent directions (``--map-size`` solves a smaller grid and scales
  the time by the number of cells, also with the one-off shift tables of ``f`` counted once:
  the grid solved again once they are built);
* the largest relative difference of every theory's values (``y^T Q y / n`` and ``E`` or
  ``dq/dgamma``) to those that main's code computed before the changes, stored in
  ``benchmarks/theory_speed_reference.json`` (``--store`` writes it; run it only on main's code).

Usage::

    python benchmarks/theory_speed.py [--repeats 2] [--map-size 100] [--skip-maps] [--skip-check]
    python benchmarks/theory_speed.py --store      # main's code only: writes the reference

Run it alone on an idle machine: the ratios are measured within one run, but a loaded machine
inflates both sides unevenly.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al
from attn_lib import DomainWarning
from attn_lib.studies import gpt2, phase
from attn_lib.theory import _heads, _matrix
from attn_lib.theory.attention import attention_error_batch, attention_resolvent_form

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

REFERENCE = Path(__file__).resolve().parent / "theory_speed_reference.json"
LAYER = 5
N_GPT2 = 1536
GAMMAS = np.array([1e-3, 0.1, 1.0])
N_FS = 2048
G50 = np.logspace(-4, 0, 50)


def _gpt2_layer() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(M, heads, mu)``: layer ``LAYER``'s normalised summed matrix, its 12 unit-scale heads
    and the random ``mu`` (SNR 1) of ``benchmarks/any_matrix.py``."""
    W_Q, W_K = gpt2.load_qk(LAYER)
    M = gpt2.normalise(gpt2.paper_matrix(W_Q, W_K))[0]
    return M, gpt2.heads(W_Q, W_K, "unit"), gpt2.random_direction(gpt2.P, 1.0, 0)


def _random_matrix(p: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A non-symmetric ``p x p`` matrix with a spike, normalised, and a ``mu`` (SNR 1.5)."""
    rng = np.random.default_rng(seed)
    u, v = rng.standard_normal(p), rng.standard_normal(p)
    M = rng.standard_normal((p, p)) / np.sqrt(p) + 0.4 * np.eye(p) + 2.0 * np.outer(u, v) / p
    M = gpt2.normalise(M)[0]
    mu = 0.5 * rng.standard_normal(p) / np.sqrt(p) + 0.6 * (u + v) / np.linalg.norm(u + v)
    return M, mu * np.sqrt(1.5) / np.linalg.norm(mu)


def _random_heads(H: int, p: int, r: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``H`` heads of rank ``r`` in ``R^p`` (unit logit scale) and a ``mu`` (SNR 1)."""
    rng = np.random.default_rng(seed)
    B = np.einsum("hik,hjk->hij", rng.standard_normal((H, p, r)), rng.standard_normal((H, p, r)))
    B /= (np.linalg.norm(B, axis=(1, 2)) / np.sqrt(p))[:, None, None]
    mu = rng.standard_normal(p)
    return B, mu / np.linalg.norm(mu)


def chapter9_grid(size: int) -> list[al.Setting]:
    """Chapter 9's map: sign, c = 0.3, aligned ``w_K = w_Q = w`` (one latent direction)."""
    snr, w = np.linspace(0.5, 8.0, size), np.linspace(0.0, 3.0, size)
    return [al.Setting(c=0.3, snr=float(a), f="sign", wk_norm=float(b), wq_norm=float(b))
            for b in w for a in snr]


def angle_grid(size: int) -> list[al.Setting]:
    """An SNR-angle plane (two latent directions): ``w_K = w_Q = w``, ``|w| = 2``, at angle
    ``theta`` in ``(0, pi/2)`` to ``mu`` (:func:`attn_lib.studies.phase.symmetric_weights`)."""
    snr, theta = np.linspace(0.5, 8.0, size), np.linspace(0.05, 1.5, size)
    return [phase.symmetric_weights(0.5, float(a), 2.0, float(t)) for t in theta for a in snr]


def nonparallel_grid(size: int) -> list[al.Setting]:
    """Three latent directions: weights neither parallel nor in span(mu)."""
    snr, w = np.linspace(0.5, 8.0, size), np.linspace(0.5, 3.0, size)
    return [al.Setting(c=0.3, snr=float(a), f="sign", wk_norm=float(b), wq_norm=1.5 * float(b),
                       cos_mu_wk=0.8, cos_mu_wq=0.7, cos_wk_wq=0.3) for b in w for a in snr]


MAPS = (("one direction (chapter 9)", chapter9_grid), ("two directions (SNR, angle)", angle_grid),
        ("three directions", nonparallel_grid))


def _curve_setting() -> al.Setting:
    """One latent direction: sign, c = 0.3, SNR 4, aligned weights (finite_size_speed.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from strong_alignment import weighted_setting
    return weighted_setting("sign", 0.3, 4.0, "aligned", 1.5, N_FS)


def cases() -> dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]]:
    """Each reference case: a function returning two arrays (``y^T Q y / n`` and ``E`` or
    ``dq/dgamma``), covering the code paths of the theories this benchmark times."""
    M5, B5, mu5 = _gpt2_layer()
    c5 = gpt2.P / N_GPT2
    Mr, mur = _random_matrix(96, 1)
    g20 = np.logspace(-3, 0, 20)
    w = np.random.default_rng(2).standard_normal(64)
    Mrank1 = np.eye(64) + np.outer(w, w) / 64
    Mk = _random_matrix(5, 3)[0]
    Bs, mus = _random_heads(3, 48, 12, 4)
    out: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
        "matrix/gpt2": lambda: _matrix.matrix_resolvent_form(c5, M5, mu5, "tanh", GAMMAS),
        "matrix/gpt2-aligned": lambda: _matrix.matrix_resolvent_form(
            c5, M5, gpt2.aligned_direction(gpt2.fit(M5), 1.0), "tanh", GAMMAS),
        "matrix/gpt2-fs": lambda: attention_resolvent_form(
            al.MatrixSetting(c=c5, M=M5, mu=mu5, f="tanh"), GAMMAS, n=N_GPT2),
        "matrix/random-20": lambda: _matrix.matrix_resolvent_form(0.5, Mr, mur, "tanh", g20),
        "matrix/random-relu": lambda: _matrix.matrix_resolvent_form(1.5, Mr, mur, "relu", GAMMAS),
        "matrix/no-signal": lambda: _matrix.matrix_resolvent_form(0.5, Mr, None, "sign", g20),
        "matrix/bulk": lambda: _matrix.matrix_resolvent_form(0.5, Mrank1, w / 8, "tanh", GAMMAS,
                                                             scale=1.0, bulk=np.eye(64)),
        "matrix/complement": lambda: _matrix.matrix_resolvent_form(
            0.5, Mk, np.array([1.0, 0.5, 0, 0, 0]), "tanh", g20, complement=(0.8, 200)),
        "matrix/random-fs": lambda: attention_resolvent_form(
            al.MatrixSetting(c=0.5, M=Mr, mu=mur, f="tanh"), GAMMAS, n=192),
        "heads/gpt2": lambda: _heads.heads_resolvent_form(c5, B5, mu5, "tanh", GAMMAS),
        "heads/random": lambda: _heads.heads_resolvent_form(0.5, Bs, mus, "tanh", g20[::4]),
        "finite-size/curve-r1": lambda: attention_resolvent_form(_curve_setting(), G50, n=N_FS),
    }
    for name, grid in MAPS:
        settings = grid(4)
        out[f"finite-size/map {name}"] = (
            lambda s=settings: (attention_error_batch(s, 0.1, n=N_FS), attention_error_batch(s, 0.1)))
    return out


def store() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    ref: dict = {"commit": commit, "cases": {}}
    with threadpool_limits(limits=1, user_api="blas"):
        for name, fn in cases().items():
            t0 = time.perf_counter()
            a, b = fn()
            ref["cases"][name] = {"a": np.asarray(a).tolist(), "b": np.asarray(b).tolist()}
            print(f"  {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    REFERENCE.write_text(json.dumps(ref, indent=1))


def check(only: str = "") -> float:
    """The largest relative difference of every case (whose name starts with ``only``) to the
    stored reference."""
    ref = json.loads(REFERENCE.read_text())
    worst = 0.0
    print(f"relative difference to main's values ({ref['commit']}, stored in {REFERENCE.name})")
    with threadpool_limits(limits=1, user_api="blas"):
        for name, fn in cases().items():
            if not name.startswith(only):
                continue
            t0 = time.perf_counter()
            a, b = fn()
            d = max(float(np.max(np.abs(np.asarray(x) / np.array(ref["cases"][name][k]) - 1)))
                    for x, k in ((a, "a"), (b, "b")))
            worst = max(worst, d)
            print(f"  {name:40s} {d:.1e}   ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"  largest: {worst:.1e} (target 1e-8)")
    return worst


def _interleaved(theory: Callable[[], object], trial: Callable[[], object], repeats: int
                 ) -> tuple[float, float]:
    """Minimum wall seconds of ``theory()`` and ``trial()`` over ``repeats`` interleaved runs."""
    t_th, t_mc = [], []
    for _ in range(repeats):
        for fn, out in ((trial, t_mc), (theory, t_th)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return min(t_th), min(t_mc)


def ratios(repeats: int, only: str = "") -> None:
    M5, B5, mu5 = _gpt2_layer()
    c5 = gpt2.P / N_GPT2
    ms = al.MatrixSetting(c=c5, M=M5, mu=mu5, f="tanh")
    hs = al.HeadsSetting(c=c5, heads=B5, mu=mu5, f="tanh")
    s1 = _curve_setting()
    print(f"theory / Monte Carlo (one BLAS thread, interleaved, min of {repeats}; wall seconds)")
    rows = (
        ("any matrix, GPT-2 layer 5, 3 gammas", lambda: al.theory.attention_error(ms, GAMMAS),
         lambda: al.simulate.errors(ms, GAMMAS, n=N_GPT2, trials=1, seed=0), 1.0),
        ("any matrix finite-size, n = 1536", lambda: al.theory.attention_error(ms, GAMMAS, n=N_GPT2),
         lambda: al.simulate.errors(ms, GAMMAS, n=N_GPT2, trials=1, seed=0), 1.0),
        ("multi-head, 12 heads, 3 gammas", lambda: al.theory.attention_error(hs, GAMMAS),
         lambda: al.simulate.errors(hs, GAMMAS, n=N_GPT2, trials=1, seed=0), 1.0),
        ("multi-head finite-size, n = 1536", lambda: al.theory.attention_error(hs, GAMMAS, n=N_GPT2),
         lambda: al.simulate.errors(hs, GAMMAS, n=N_GPT2, trials=1, seed=0), 1.0),
        ("finite-size, 50 gammas, r = 1, n = 2048", lambda: al.theory.attention_error(s1, G50, n=N_FS),
         lambda: al.simulate.errors(s1, G50, n=N_FS, trials=5, seed=0), 1 / 80),
    )
    with threadpool_limits(limits=1, user_api="blas"):
        al.theory.attention_error(s1, G50, n=N_FS)   # warm-up: the finite-size shift tables
        for name, theory, trial, target in rows:
            if not name.startswith(only):
                continue
            t_th, t_mc = _interleaved(theory, trial, repeats)
            what = "one trial" if target == 1.0 else "five trials"
            print(f"  {name:42s} theory {t_th:7.3f} s   {what} {t_mc:6.3f} s   "
                  f"theory / MC {t_th / t_mc:7.4f}  (target <= {target:g})", flush=True)


def maps(size: int) -> None:
    print(f"finite-size maps at n = {N_FS}, gamma = 0.1 (wall seconds; target 60 s for 100 x 100)")
    with threadpool_limits(limits=1, user_api="blas"):
        for name, grid in MAPS:
            settings = grid(size)
            t0 = time.perf_counter()
            attention_error_batch(settings, 0.1, n=N_FS)
            wall = time.perf_counter() - t0
            note = ""
            if size != 100:   # again, with the shift tables (one-off per f and range of h) built
                t0 = time.perf_counter()
                attention_error_batch(settings, 0.1, n=N_FS)
                warm = time.perf_counter() - t0
                note = (f"  -> 100 x 100 extrapolated: {wall * 1e4 / len(settings):7.1f} s "
                        f"({wall - warm + warm * 1e4 / len(settings):.1f} s with the tables built once)")
            print(f"  {name:30s} {size} x {size}: {wall:7.1f} s{note}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--map-size", type=int, default=100)
    ap.add_argument("--skip-maps", action="store_true")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-ratios", action="store_true")
    ap.add_argument("--only", default="", metavar="PREFIX",
                    help="only the reference cases (and ratio rows) whose name starts with PREFIX")
    ap.add_argument("--store", action="store_true", help="write the reference (main's code only)")
    args = ap.parse_args(argv)
    if args.store:
        store()
        return 0
    if not args.skip_ratios:
        ratios(args.repeats, args.only)
    if not args.skip_maps:
        maps(args.map_size)
    return 0 if args.skip_check or check(args.only) < 1e-8 else 1


if __name__ == "__main__":
    sys.exit(main())
