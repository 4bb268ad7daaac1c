"""Training the low-rank update: the numbers behind the chapter *Does fine-tuning find the alignment?*

    python benchmarks/fine_tuning.py [--n-train 512] [--steps 200] [--seeds 5] [--n-check 2048]
                                     [--trials 8] [--points 4] [--skip-speed]

Prints, measured in one run:

1. **Gradient against finite differences**: the relative error ``||g - g_fd|| / ||g_fd||`` of
   :mod:`attn_lib.simulation.gradient` (five-point differences, step 1e-3, every coordinate) for
   tanh, cos and masked softmax, rank 1 and 2, both objectives, at ``n = 96``; and along three
   random unit directions ``v`` at ``n = 512``, ``max |g.v - fd_v| / ||g||`` (a directional
   derivative can be far smaller than ``||g||``, and the rounding of ``E`` then dominates its own
   relative error).
2. **Speed**: one gradient against one error of the simulator (``draw_errors``) at ``n = 2048``,
   and a training step on one BLAS thread against all of them at ``n = 256``.
3. **Theory against Monte Carlo along training**: ``tanh``, ``c = 1/2``, SNR 1, ``g = 0.1``;
   SGD at ``--n-train`` tokens for ``--steps`` steps; at ``--points`` recorded steps of the first
   seed the learned geometry is simulated at ``--n-check`` tokens (``--trials`` draws) and set
   against the limit and the finite-size theory there.
4. **The learned geometry against the theory's optimum** at the learned norms, over ``--seeds``
   training runs: mean ± 95 % Student t half-width of the final cosines and of the limit
   theory's error, learned and optimal.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy import stats

import attn_lib as al
from attn_lib.book.figures.fine_tuning import check
from attn_lib.model import data
from attn_lib.model.kernel import BLAS
from attn_lib.simulation import gradient as gr
from attn_lib.simulation.simulate import draw_errors
from attn_lib.simulation.trials import standard_error
from attn_lib.studies import fine_tuning as ft


def _draw(p: int, n: int, rng: np.random.Generator) -> gr.Draw:
    mu = np.zeros(p)
    mu[0] = 1.0
    y = data.labels(n, rng)
    return gr.Draw(rng.standard_normal((p, n)) + np.outer(mu, y), y)


def _fd_check(n: int, directions: int | None) -> float:
    """Largest relative error over kinds, ranks and objectives at ``n`` tokens."""
    worst = 0.0
    for name, s in (("tanh", al.Setting(c=0.5, f="tanh")), ("cos", al.Setting(c=0.5, f="cos")),
                    ("softmax", al.Setting(c=0.5, attention=al.Softmax(1.0)))):
        for r in (1, 2):
            for objective in ("interpolation", "generalisation"):
                rng = np.random.default_rng(0)
                p = s.p(n)
                d, d2 = _draw(p, n, rng), _draw(p, n, rng)
                W_K, W_Q = 0.6 * rng.standard_normal((2, r, p))

                def E(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
                    if objective == "interpolation":
                        return gr.interpolation_gradient(s, d, a, b, 0.1)
                    return gr.generalisation_gradient(s, d, d2, a, b, 0.1)
                _, gK, gQ = E(W_K, W_Q)
                g = np.concatenate([gK.ravel(), gQ.ravel()])
                h = 1e-3
                if directions is None:
                    basis = np.eye(g.size)
                else:
                    basis = rng.standard_normal((directions, g.size))
                    basis /= np.linalg.norm(basis, axis=1)[:, None]
                fd = []
                for v in basis:
                    vK, vQ = v[:gK.size].reshape(gK.shape), v[gK.size:].reshape(gQ.shape)

                    def at(t: float) -> float:
                        return E(W_K + t * vK, W_Q + t * vQ)[0]
                    # the five-point stencil: truncation O(h^4)
                    fd.append((8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h))
                miss = basis @ g - np.array(fd)
                err = float(np.linalg.norm(miss) / np.linalg.norm(fd) if directions is None
                            else np.max(np.abs(miss)) / np.linalg.norm(g))
                worst = max(worst, err)
                print(f"  n={n:4d} {name:8s} r={r} {objective:15s} rel. error {err:.2e}")
    return worst


def _speed() -> None:
    s = al.Setting(c=0.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=1.0)
    rng = np.random.default_rng(0)
    n = 2048
    d = _draw(s.p(n), n, rng)
    W = np.ones((1, s.p(n))) / np.sqrt(s.p(n))
    for label, limit in (("all BLAS threads", None), ("one BLAS thread", 1)):
        with BLAS.limit(limits=limit):
            t0 = time.perf_counter()
            gr.interpolation_gradient(s, d, W, W, 0.1)
            t1 = time.perf_counter()
            draw_errors(s, np.array([0.1]), n, np.random.default_rng(1))
            t2 = time.perf_counter()
        print(f"  n = 2048, {label}: gradient {t1 - t0:.2f} s, simulator's error of one draw "
              f"{t2 - t1:.2f} s, ratio {(t1 - t0) / (t2 - t1):.2f}")
    st = al.Setting(c=0.5, snr=1.0, f="tanh")
    t0 = time.perf_counter()
    ft.train(st, 256, 20, 1.0, 0.1)   # one BLAS thread inside
    t1 = time.perf_counter()
    with BLAS.limit(limits=None):
        for k in range(20):
            gr.interpolation_gradient(st, _draw(st.p(256), 256, rng), W[:, :128], W[:, :128], 0.1)
    t2 = time.perf_counter()
    print(f"  n = 256, 20 steps: training (one BLAS thread) {t1 - t0:.2f} s, gradients on all "
          f"threads {t2 - t1:.2f} s, ratio {(t2 - t1) / (t1 - t0):.1f}")


def _hw(v: np.ndarray) -> float:
    return float(stats.t.ppf(0.975, v.size - 1) * standard_error(v, axis=0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-train", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n-check", type=int, default=2048)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore", al.DomainWarning)

    print("1. gradient against central finite differences")
    worst = max(_fd_check(96, None), _fd_check(512, 3))
    print(f"  largest relative error {worst:.2e} (target 1e-6)")
    if not args.skip_speed:
        print("2. speed")
        _speed()

    s = al.Setting(c=0.5, snr=1.0, f="tanh")
    gamma = ft.probe_gamma(s, 0.1, args.n_train)
    t0 = time.perf_counter()
    runs = ft.train_seeds(setting=s, n=args.n_train, steps=args.steps, lr=1.0, gamma=gamma,
                          seeds=list(range(args.seeds)), record=max(1, args.steps // 10))
    print(f"3. theory against Monte Carlo along training (tanh, SGD at n = {args.n_train}, "
          f"{args.steps} steps, {args.seeds} seeds in {time.perf_counter() - t0:.0f} s)")
    idx = np.unique(np.linspace(0, runs["steps"].size - 1, args.points).round().astype(int))
    c = check(setting=s, W_K=runs["W_K"][0, idx], W_Q=runs["W_Q"][0, idx], mu=runs["mu"],
              gamma=ft.probe_gamma(s, 0.1, args.n_check), n=args.n_check, trials=args.trials,
              seed=0)
    for k, i in enumerate(idx):
        print(f"  step {runs['steps'][i]:4d}: MC {c['mc'][k]:.4f} ± {c['sem'][k]:.4f}, "
              f"finite-size {c['finite'][k]:.4f} ({c['finite'][k] - c['mc'][k]:+.4f}), "
              f"limit {c['limit'][k]:.4f} ({c['limit'][k] - c['mc'][k]:+.4f}), "
              f"delta {c['delta'][k]:.3f}")
    print(f"  max |finite-size - MC| {np.max(np.abs(c['finite'] - c['mc'])):.4f}, max |limit - MC| "
          f"{np.max(np.abs(c['limit'] - c['mc'])):.4f}, max s.e. {c['sem'].max():.4f} "
          f"(n = {args.n_check}, {args.trials} draws per point)")

    print("4. learned geometry against the theory's optimum at the learned norms "
          f"(mean ± 95 % t half-width over {args.seeds} seeds)")
    cos, best_cos, learned, best = [], [], [], []
    for a, b in zip(runs["W_K"][:, -1], runs["W_Q"][:, -1]):
        ls = ft.learned_setting(s, runs["mu"], a, b)
        assert isinstance(ls, al.Setting)
        opt, err = ft.theory_optimum(s, ls.wk_norm, ls.wq_norm, gamma, starts=2)
        cos.append([abs(ls.cos_mu_wk), abs(ls.cos_mu_wq)])
        best_cos.append([abs(opt.cos_mu_wk), abs(opt.cos_mu_wq)])
        learned.append(float(al.theory.attention_error(ls, [gamma])[0]))
        best.append(err)
    C, B, L, Opt = map(np.array, (cos, best_cos, learned, best))
    for name, v in (("learned |cos(mu, w_K)|", C[:, 0]), ("learned |cos(mu, w_Q)|", C[:, 1]),
                    ("optimum |cos(mu, w_K)|", B[:, 0]), ("optimum |cos(mu, w_Q)|", B[:, 1]),
                    ("E learned (limit)", L), ("E optimum (limit)", Opt), ("learned - optimum", L - Opt)):
        print(f"  {name:24s} {v.mean():.4f} ± {_hw(v):.4f}")
    print(f"  ridge at the same gamma/tau (limit): "
          f"{al.theory.ridge_error(s, [0.1], relative=True)[0]:.4f}")


if __name__ == "__main__":
    main()
