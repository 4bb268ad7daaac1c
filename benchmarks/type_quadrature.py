"""Where the finite-size theory's type quadrature and Gaussian surrogate stop: issue 15, part 2.

The measurements behind ``book/derivation_finite_size.md``:

1. **Type quadrature** (the ``sin`` setting at ``delta = 2.2`` of ``benchmarks/small_n.py``,
   three latent directions, ``n = 512``): the finite-size error ``attention_error(s, gammas,
   n=512)`` against the rule for the types -- the default (the rule chosen from the setting,
   ``_finite_size._type_rule``), tensor rules with 6, 8 and 10 Gauss–Hermite nodes per
   dimension, and rules of ``k x k x 3`` nodes along the axes of ``w_K``, ``w_Q`` and ``mu``
   (``nodes=(k, k, 3)``, :func:`attn_lib.theory._finite_size.latent_law`, ``k = 16`` to
   ``--max-k``) -- beside the leading singular values of the mean-kernel operator
   ``E_t' F0(h(t, t')) g(t')`` on each rule and on 6,000 seeded Monte Carlo types. With
   ``--mc FILE`` (a saved ``small_n.py`` run) the Monte Carlo error of the setting is printed.
   With ``--sign``, also ``sign`` under a dominant spike (``alpha = 1e-3``, the geometry of
   ``benchmarks/finite_size_memory.py``, ``n = 1536``, ``gamma = 0.1``) on the tensor rule and on
   rules along the weights.
2. **The residual is not a Wigner matrix** (``--skew``): the spectrum of the ``He2`` residual
   ``[(g_ij^2 - 1) / sqrt(2)] / sqrt(n)`` (``g_ij = z_i . z_j / sqrt(p)``, zero diagonal), which
   the theory replaces by a GOE matrix, is skewed. Printed: its skewness ``m3 / m2^{3/2}`` over 4
   draws at ``c = 1/2`` and ``p = 256, 512, 1024``, a GOE matrix's, and ``sqrt(2 n) / p``.
3. **Where the quadratic gap lies** (``--surrogate``): the quadratic setting at ``delta = 0.3``
   of ``small_n.py`` on common draws at ``n = 512, 1024, 2048`` -- the true kernel, the latent
   surrogate (the theory's Gaussian model of the kernel, simulated), and the theory.
4. **What the He2 residual does** (``--he2``, the same setting at ``--he2-n``, default 512,
   ``--he2-trials`` draws, default 2000): on common draws
   (``strong_alignment.surrogate_errors(..., he2=True)``, seed 5), the true kernel and the
   latent surrogate with its ``He2`` part modelled as the tokens' own Gram of
   ``vec(z z^T - I)``, an independent one (``Z''``), and a Wishart matrix (the Marchenko–Pastur
   model), each minus the latent surrogate (GOE), paired; the theory minus the latent
   surrogate. Then (seed 21) true kernel minus latent surrogate with the ``He2`` residual
   decoupled from the features (``Phi = X'' K``, ``X''`` the tokens' latent part plus an
   independent complement) or from the slope term (``F1(h) g`` with ``g`` of an independent
   complement, in both kernels). About 15 minutes for 2000 draws at ``n = 512`` under load.
5. **A Gaussian model of the cross term** (``--self``, at ``--he2-n`` with ``--he2-trials`` draws,
   seed 5): the true kernel minus the latent surrogate, beside the latent surrogate with the
   ``He2`` residual's component along each token's own noise added to the features
   (:func:`self_component_errors`): its correlation with the slope term and its own variance.
6. **Is the cross term of first order?** (``--mix``, at ``--he2-n`` with ``--he2-trials`` draws,
   seed 7): ``E(eps) - E(0)`` with the ``He2`` part interpolated at fixed variance from the GOE
   (``eps = 0``) to the tokens' own Gram (``eps = 1``), :func:`mixed_errors`.
7. **Where the deterministic equivalent's own error lies** (``--de-error``, the same setting at
   ``--de-n``, default 256 and 512, ``--de-trials`` draws, default 4000, seed 3): the theory
   minus the latent surrogate; the latent surrogate minus its complex counterpart (paired:
   the pairings of an entry with itself, which real Gaussian matrices have and the equivalent
   does not keep); minus the surrogate with the slope Gram's diagonal (paired); the theory minus
   its mean on each draw's own types (``--type-trials`` draws,
   ``strong_alignment.sample_types_theory``); and the ridge equivalent against its simulation.
8. **The third cumulant of one entry** (``--pair``, at ``--he2-n`` with ``--he2-trials`` draws,
   seed 11): per draw of the latent surrogate, the exact first-order effect ``dE / d eps`` at
   ``eps = 0`` of the cross term, beside the formula that lets ``g_ab`` enter only the entries
   ``(a, b)`` and ``(b, a)`` of ``K`` and ``G = X^T X`` (:func:`pair_cumulant_errors`).

Last result (``--mc``, 2 December 2026, under load): E(gamma = 1) of ``sin`` is 0.2182 with the
default rule (22 x 22 x 3, 11 s); 0.2316 / 0.2216 / 0.2170 with 6, 8, 10 nodes per dimension;
along the weights 0.2255, 0.2203, 0.2185, 0.2182, 0.2186 at k = 16, 18, 20, 22, 24 (even) and
0.2263, 0.2335, 0.2342, 0.2304 at k = 17, 19, 21, 23 (odd). Larger rules, measured separately,
converge to 0.2220 (k = 35, 36, 40: 0.2220, 0.2219, 0.2221); Monte Carlo 0.2197 +- 0.0020. The
fifth mean-kernel singular value is 0.0839 on the default rule and 0.0733 at k = 32, against
0.0729 on 6,000 Monte Carlo types. ``--surrogate``: true kernel - surrogate -0.0083 +- 0.0028
(gamma 1e-4) and -0.0065 +- 0.0025 (gamma 1) at n = 512; theory - surrogate +0.0013 and +0.0011.
``--he2`` (2 December 2026, under load; n = 512 2,000 draws in 25 min, n = 256 4,000 draws in 11
min), minus the latent surrogate at gamma 1e-4 / 1: n = 512: true kernel -0.0055 / -0.0045
(s.e. 0.0010 / 0.0008), He2 own Gram -0.0057 / -0.0046, Gram of Z'' -0.0021 / -0.0001,
Wishart -0.0005 / -0.0005, theory +0.0038 / +0.0025 (s.e. 0.0007 / 0.0006); decoupled from the
features +0.0005 / +0.0017, from the slope term -0.0004 / +0.0010. n = 256: true -0.0075 /
-0.0058, own -0.0079 / -0.0060, Z'' -0.0007 / +0.0013, Wishart -0.0011 / -0.0010, theory
+0.0071 / +0.0045; decoupled -0.0005 / +0.0019 and +0.0005 / +0.0023 (s.e. 0.0006 to 0.0009).
``--de-error`` (2 December 2026; n = 256 4,000 draws in 6 min, n = 512 2,000 draws in 13 min, the two runs
side by side), at gamma 1e-4 / 1: n = 256: theory - surrogate +0.0086 / +0.0056, real - complex
-0.0018 / -0.0009 (s.e. 0.0008 / 0.0007), diagonal -0.0003 / -0.0005 (s.e. 0.0001), theory -
own types +0.0012 / +0.0014 (s.e. 0.0001), ridge theory - MC -0.0003 / -0.0004 (s.e. 0.0003).
n = 512: +0.0038 / +0.0021, -0.0012 / -0.0003, -0.0001 / -0.0002, +0.0006 / +0.0007,
-0.0002 / -0.0003.
``--self`` (2 December 2026; 3,000 draws at n = 256, 1,500 at n = 512, side by side), at gamma
1e-4 / 1: true kernel - surrogate -0.0071 / -0.0054 (n = 256), -0.0050 / -0.0038 (n = 512), s.e.
0.0009 to 0.0011; the component's correlation -0.0132 / -0.0132 and -0.0085 / -0.0090 (s.e.
0.0003), its variance +0.0001 / -0.0016 and -0.0004 / -0.0012 (s.e. 0.0002).
``--mix`` (2 December 2026; 3,000 draws at n = 256, 1,500 at n = 512, side by side), gamma 1e-4,
eps = 0.25 / 0.5 / 0.75 / 1: n = 256: -0.0016 / -0.0033 / -0.0045 / -0.0047 (s.e. 0.0003 to
0.0011); n = 512: -0.0008 / -0.0014 / -0.0027 / -0.0055; gamma 1: -0.0018 / -0.0032 / -0.0040 /
-0.0032 and -0.0010 / -0.0019 / -0.0029 / -0.0048.
``--pair`` (3 December 2026, alone; 400 draws each at n = 128 and 256 in 7 min), gamma 1e-4 / 1:
exact -0.0012 / -0.0054 (s.e. 0.0039 / 0.0033) and -0.0007 / -0.0024 (s.e. 0.0033 / 0.0026);
one entry's third cumulant +1.6e5 / -0.0689 and +2.8e4 / -0.0466: it diverges as gamma -> 0.

Usage::

    python benchmarks/type_quadrature.py [--max-k 24] [--mc benchmarks/results/small_n_n512.json]
                                          [--sign] [--skew] [--surrogate]
                                          [--he2] [--self] [--mix] [--pair] [--he2-n 512 256] [--he2-trials 2000]
                                          [--de-error [--de-n 256 512] [--de-trials 4000] [--type-trials 400]]
                                          [--skip-quadrature]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from small_n import GAMMAS, grid
from attn_lib.model import kernel
from attn_lib.model.data import latent_coordinates
from attn_lib.model.nonlinearity import check_nonlinearity
from attn_lib.simulation.resolvent import interpolation_error, interpolation_errors
from attn_lib.simulation.trials import Trials, standard_error
from attn_lib.studies import strong_alignment
from attn_lib.theory import _finite_size, attention_error, ridge_error
from attn_lib.theory.shift import shift_functions
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

SIN = "sin c=0.75 snr=3 nonparallel delta512=2.2"
QUADRATIC = "quadratic c=0.5 snr=2.4 partial delta512=0.3"
N = 512


def mean_kernel_spectrum(setting, law, k: int = 6) -> np.ndarray:
    """Leading ``k`` singular values of the weighted mean kernel ``W^1/2 F0(h) W^1/2`` on ``law``."""
    H = law.shifts()
    F0 = shift_functions(setting.f, 1.0, np.abs(H).max() + 1.0)(H)[0]
    sw = np.sqrt(law.weight)
    return np.linalg.svd(sw[:, None] * F0 * sw[None, :], compute_uv=False)[:k]


def monte_carlo_types(setting, p: int, size: int, seed: int) -> _finite_size.LatentLaw:
    """``size`` seeded draws of the types as an equal-weight law (a reference for the spectrum)."""
    co = latent_coordinates(setting)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    y = rng.choice([-1.0, 1.0], size)
    xi = y[:, None] * co[:, 0] + rng.standard_normal((size, co.shape[0]))
    return _finite_size.LatentLaw(xi=xi, y=y, weight=np.full(size, 1.0 / size),
                                  M=np.eye(co.shape[0]) + np.outer(co[:, 1], co[:, 2]), p=p)


def quadrature(max_k: int, mc: Path | None) -> None:
    s = dict(grid())[SIN]
    sc, p = s.canonical(), s.p(N)
    print(f"## Type quadrature: {SIN} (r = 3, p = {p}, delta = {s.delta(N):.2f})\n")
    if mc is not None:
        row = next(r for r in json.loads(mc.read_text())["rows"] if r["name"] == SIN)
        print("Monte Carlo: " + ", ".join(f"gamma {g:g}: {m:.4f} ± {e:.4f}" for g, m, e in
                                         zip(row["gammas"], row["mc_attention"], row["sem_attention"])) + "\n")
    print("| rule | types | " + " | ".join(f"E({g:g})" for g in GAMMAS)
          + " | mean-kernel singular values | time (s) |")
    print("|---|---|" + "---|" * len(GAMMAS) + "---|---|")
    rules = [None, 6, 8, 10, (9, 9, 3), (11, 11, 3)] + [(k, k, 3) for k in range(16, max_k + 1)]
    for nodes in rules:
        law = _finite_size.latent_law(sc, p, nodes)
        t0 = time.perf_counter()
        dq = _finite_size.finite_size_resolvent_form(s, GAMMAS, N, nodes=nodes)[1]
        dt = time.perf_counter() - t0
        name = (f"default: {_finite_size._type_rule(sc, p, latent_coordinates(sc))}" if nodes is None
                else f"{nodes}^3" if isinstance(nodes, int)
                else "x".join(map(str, nodes)) + " (w_K, w_Q, mu)")
        print(f"| {name} | {len(law.weight)} | " + " | ".join(f"{e:.4f}" for e in -GAMMAS ** 2 * dq)
              + f" | {np.array2string(mean_kernel_spectrum(sc, law), precision=4)} | {dt:.1f} |", flush=True)
    ref = mean_kernel_spectrum(sc, monte_carlo_types(sc, p, 6000, 0))
    print(f"| 6,000 Monte Carlo types | 6000 | | | | {np.array2string(ref, precision=4)} | |\n")


def sign_spike() -> None:
    from finite_size_memory import GEOMETRY
    from attn_lib import Setting
    s = Setting(c=0.5, snr=1.0, f="sign", alpha=1e-3, **GEOMETRY)
    g = np.array([0.1])
    print("## sign under a dominant spike (alpha = 1e-3, n = 1536, gamma = 0.1)\n")
    print("| rule | E | time (s) |\n|---|---|---|")
    for nodes in (6, 8, (6, 6, 6), (12, 12, 4), (16, 16, 4)):
        t0 = time.perf_counter()
        e = -g ** 2 * _finite_size.finite_size_resolvent_form(s, g, 1536, nodes=nodes)[1]
        name = f"{nodes}^3" if isinstance(nodes, int) else "x".join(map(str, nodes)) + " (w_K, w_Q, mu)"
        print(f"| {name} | {e[0]:.4f} | {time.perf_counter() - t0:.0f} |", flush=True)
    print()


def skewness() -> None:
    print("## Skewness of the He2 residual (c = 1/2, 4 draws)\n")
    print("| n | p | residual | GOE | sqrt(2n)/p |\n|---|---|---|---|---|")
    rng = np.random.default_rng(np.random.SeedSequence(15))
    for n in (512, 1024, 2048):
        p = n // 2
        sk = []
        for _ in range(4):
            Z = rng.standard_normal((p, n))
            R = ((Z.T @ Z) ** 2 / p - 1.0) / np.sqrt(2.0 * n)
            np.fill_diagonal(R, 0.0)
            W = rng.standard_normal((n, n))
            W = (W + W.T) / np.sqrt(2.0 * n)
            np.fill_diagonal(W, 0.0)
            sk.append([np.mean(e ** 3) / np.mean(e ** 2) ** 1.5
                       for e in (np.linalg.eigvalsh(R), np.linalg.eigvalsh(W))])
        sk = np.array(sk)
        m, se = sk.mean(0), standard_error(sk, axis=0)
        print(f"| {n} | {p} | {m[0]:.4f} ± {se[0]:.4f} | {m[1]:+.4f} ± {se[1]:.4f} | "
              f"{np.sqrt(2 * n) / p:.4f} |", flush=True)
    print()


def _quadratic() -> tuple:
    """The quadratic setting of ``small_n.py`` behind the gap, and the gammas 1e-4 and 1."""
    return dict(grid())[QUADRATIC], GAMMAS[[0, 2]]


def surrogate() -> None:
    s, g = _quadratic()
    print(f"## {QUADRATIC}: true kernel, latent surrogate and theory on common draws\n")
    print("| n | p | delta | trials | gamma | attention | latent surrogate | attention - surrogate "
          "(paired) | theory |\n|---|---|---|---|---|---|---|---|---|")
    for n, trials in ((512, 240), (1024, 60), (2048, 16)):
        res = strong_alignment.surrogate_errors(s, g, n, trials=trials, seed=5)
        th = attention_error(s, g, n=n)
        d = res["attention"] - res["latent"]
        for j, gam in enumerate(g):
            print(f"| {n} | {s.p(n)} | {s.delta(n):.2f} | {trials} | {gam:g} | "
                  f"{res.mean('attention')[j]:.4f} ± {res.sem('attention')[j]:.4f} | "
                  f"{res.mean('latent')[j]:.4f} ± {res.sem('latent')[j]:.4f} | "
                  f"{d.mean(0)[j]:+.4f} ± {standard_error(d, 0)[j]:.4f} | {th[j]:.4f} |", flush=True)
    print()


def _paired(a: np.ndarray, b: np.ndarray, j: int) -> str:
    """Mean and standard error of ``a - b`` at gamma index ``j`` (paired draws)."""
    d = a[:, j] - b[:, j]
    return f"{d.mean():+.4f} ± {standard_error(d, 0):.4f}"


def _draw(s, n: int, rng: np.random.Generator) -> tuple:
    """``X, y, W, T, split`` of one draw (:func:`attn_lib.studies.strong_alignment.latent_draw`)."""
    sample, W, T, split = strong_alignment.latent_draw(s, n, rng)
    return sample.X, sample.y, W, T, split


def decoupled_errors(s, g: np.ndarray, n: int, trials: int, seed: int) -> Trials:
    """True kernel and latent surrogate (GOE) with the ``He2`` residual decoupled, on common draws.

    Per draw: ``"X''/true"``, ``"X''/latent"``: ``Phi = X'' K`` with ``X''`` the tokens' latent
    part ``B xi`` plus an independent complement, ``K`` the true kernel or the latent surrogate of
    the tokens ``X``; ``"g''/true"``, ``"g''/latent"``: ``Phi = X K`` with the slope part
    ``F1(h) g`` of both kernels built from an independent complement ``g''`` (the true kernel
    minus ``F1(h) (g - g'') / sqrt(p)``).
    """
    func, p = check_nonlinearity(s.f), s.p(n)

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        X, y, W, T, split = _draw(s, n, rng)
        B, H = split.basis, split.shift()
        K_true = kernel.apply(func, T, p, a0=s.hermite.a0)
        K_lat = strong_alignment.surrogate_kernel(T, H, s.f, p, W)

        def complement() -> np.ndarray:
            Z = rng.standard_normal((p, n))
            return Z - B @ (B.T @ Z)

        X2 = B @ split.xi + complement()
        Z3 = complement()
        T3 = H + Z3.T @ Z3 / np.sqrt(p)
        F1 = shift_functions(s.f, h_max=float(np.abs(H).max(initial=0.0)))(H)[1]
        K3 = K_true - F1 * (T - T3) / np.sqrt(p)
        np.fill_diagonal(K3, 0.0)
        return {"X''/true": interpolation_error(X2 @ K_true, y, g),
                "X''/latent": interpolation_error(X2 @ K_lat, y, g),
                "g''/true": interpolation_error(X @ K3, y, g),
                "g''/latent": interpolation_error(X @ strong_alignment.surrogate_kernel(T3, H, s.f, p, W), y, g)}

    return Trials.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)


def self_component_errors(s, g: np.ndarray, n: int, trials: int, seed: int) -> Trials:
    """The latent surrogate with a feature component along each token's own noise, on common draws.

    The ``He2`` residual's share of token ``b`` in the feature ``phi_a``, ``z_b R_ba``, has along
    ``z_a`` the part ``z_a F2(h_ba) (g_ab^3 - g_ab) / (2p)`` (``z_b``'s projection on ``z_a`` is
    ``(g_ab / sqrt(p)) z_a``). Per draw: ``"true"`` and ``"latent"`` (the true kernel and the
    latent surrogate, ``Phi = X K``); ``"latent+self"``: ``Phi = X K_lat + Z_perp diag(s)`` with
    ``s_a = sum_b F2(h_ba) (g_ab^3 - g_ab) / (2p)``, which gives the features the true pair
    covariance ``E[phi_a . phi_b] = (F1 F2)(h) / sqrt(p)`` (see the derivation page);
    ``"latent+self''"``: the same with ``g''`` of an independent complement (the component's own
    variance, not its correlation with the slope term).
    """
    func, p = check_nonlinearity(s.f), s.p(n)

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        X, y, W, T, split = _draw(s, n, rng)
        B, H = split.basis, split.shift()
        F2 = shift_functions(s.f, h_max=float(np.abs(H).max(initial=0.0))).curvature(H)
        Z3 = rng.standard_normal((p, n))
        Z3 -= B @ (B.T @ Z3)

        def along(G: np.ndarray) -> np.ndarray:
            np.fill_diagonal(G, 0.0)
            return np.einsum("ba,ab->a", F2, G ** 3 - G) / (2 * p)

        Phi = X @ strong_alignment.surrogate_kernel(T, H, s.f, p, W)
        Zp = X - B @ split.xi
        return dict(zip(("true", "latent", "latent+self", "latent+self''"), interpolation_errors(
            [X @ kernel.apply(func, T, p, a0=s.hermite.a0), Phi, Phi + Zp * along(T - H),
             Phi + Zp * along(Z3.T @ Z3 / np.sqrt(p))], y, g)))

    return Trials.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)


def self_component(sizes: list[int], trials: int) -> None:
    s, g = _quadratic()
    print(f"## {QUADRATIC}: the He2 residual's component along each token's own noise ({trials} draws)\n")
    print("| n | p | gamma | true - latent | latent+self - latent+self'' (the correlation) "
          "| latent+self'' - latent (the variance) |\n|" + "---|" * 6)
    for n in sizes:
        res = self_component_errors(s, g, n, trials, seed=5)
        indep = res["latent+self''"]
        for j, gam in enumerate(g):
            print(f"| {n} | {s.p(n)} | {gam:g} | {_paired(res['true'], res['latent'], j)} | "
                  f"{_paired(res['latent+self'], indep, j)} | {_paired(indep, res['latent'], j)} |",
                  flush=True)
    print()


MIX = (0.0, 0.25, 0.5, 0.75, 1.0)


def mixed_errors(s, g: np.ndarray, n: int, trials: int, seed: int) -> Trials:
    """The latent surrogate with its ``He2`` part interpolated from Gaussian to the tokens' own.

    Per draw and ``eps`` in :data:`MIX`: ``surrogate_kernel(..., he2=eps Q + sqrt(1 - eps^2)
    sqrt(2) W)`` with ``Q`` the tokens' own ``He2`` Gram (:func:`strong_alignment.he2_gram`) and
    ``W`` the draw's GOE matrix. The variance of the ``He2`` part stays that of ``S2`` (for the
    quadratic, ``S3 = 0``: ``eps = 0`` is the latent surrogate, ``eps = 1`` the true kernel less
    its norm term), while its joint cumulants with the tokens scale with ``eps`` (the third, the
    cross term, linearly). ``E(eps) - E(0)`` against ``eps`` shows whether a correction of first
    order in the cumulant can account for the whole gap.
    """
    p = s.p(n)

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        X, y, W, T, split = _draw(s, n, rng)
        H = split.shift()
        Q = split.he2(X)
        Ks = [strong_alignment.surrogate_kernel(T, H, s.f, p, W, he2=e * Q + np.sqrt(2.0 - 2.0 * e * e) * W)
              for e in MIX]
        return dict(zip((f"eps={e:g}" for e in MIX), interpolation_errors([X @ K for K in Ks], y, g)))

    return Trials.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)


def mixed(sizes: list[int], trials: int) -> None:
    s, g = _quadratic()
    print(f"## {QUADRATIC}: the He2 part from Gaussian (eps = 0) to the tokens' own (eps = 1), "
          f"E(eps) - E(0), paired ({trials} draws)\n")
    print("| n | p | gamma | " + " | ".join(f"eps = {e:g}" for e in MIX[1:]) + " |\n|" + "---|" * (3 + len(MIX) - 1))
    for n in sizes:
        res = mixed_errors(s, g, n, trials, seed=7)
        base = res["eps=0"]
        for j, gam in enumerate(g):
            print(f"| {n} | {s.p(n)} | {gam:g} | "
                  + " | ".join(_paired(res[f"eps={e:g}"], base, j) for e in MIX[1:]) + " |", flush=True)
    print()


# --pair: the He1-He2 cross term as the third cumulant of one entry. For an ordered pair
# (a, b) the entry g_ab moves K_ab by F1(h_ab) / sqrt(p), K_ba by F1(h_ba) / sqrt(p) and
# G_ab = G_ba (G = X^T X) by sqrt(p): the direction "t". The He2 residual moves K_ab by
# F2(h_ab) / (2 sqrt(p)): the direction "s". Since E[(g^2 - 1) psi(g)] = E[psi''(g)] for
# Gaussian g, the cross cumulant's first-order effect would be sum_{a != b} d_t^2 d_s phi,
# phi = y^T (gamma + A)^{-1} y with A = K^T G K / n, if g_ab entered nowhere else. A
# perturbation is a list of rank-one terms (coefficient names, entries of G, left, right):
# coef * prod(G entries) * left right^T, with vectors (kind, index), kind "e" (unit vector),
# "p" (row of G K) or "k" (row of K), index "a" or "b"; FULL stands for K or G themselves.
FULL = None
_DK = [(("al",), (), ("e", "a"), ("e", "b")), (("be",), (), ("e", "b"), ("e", "a"))]
_DR = [(("w",), (), ("e", "a"), ("e", "b"))]
_DG = [(("sg",), (), ("e", "a"), ("e", "b")), (("sg",), (), ("e", "b"), ("e", "a"))]


def _product(X1, X2, X3) -> list:
    """``X1^T X2 X3`` (``X1, X3``: FULL for ``K`` or a perturbation of it; ``X2``: of ``G``)."""
    if X1 is FULL and X2 is FULL:            # K^T G e_k e_l^T = p_k e_l^T
        return [(c3, s3, ("p", l3[1]), r3) for c3, s3, l3, r3 in X3]
    out = []
    if X1 is FULL:                           # K^T e_k e_l^T X3
        for c2, s2, l2, r2 in X2:
            if X3 is FULL:
                out.append((c2, s2, ("k", l2[1]), ("k", r2[1])))
            else:
                out += [(c2 + c3, s2 + s3, ("k", l2[1]), r3) for c3, s3, l3, r3 in X3 if r2[1] == l3[1]]
        return out
    for c1, s1, l1, r1 in X1:                # X1^T = r1 l1^T: r1 times e_i^T X2 X3, i = l1
        i = l1[1]
        if X2 is FULL:
            if X3 is FULL:
                out.append((c1, s1, r1, ("p", i)))
            else:
                out += [(c1 + c3, s1 + s3 + ((("e", i), "G", l3),), r1, r3) for c3, s3, l3, r3 in X3]
            continue
        for c2, s2, l2, r2 in X2:
            if l2[1] != i:
                continue
            if X3 is FULL:
                out.append((c1 + c2, s1 + s2, r1, ("k", r2[1])))
            else:
                out += [(c1 + c2 + c3, s1 + s2 + s3, r1, r3) for c3, s3, l3, r3 in X3 if r2[1] == l3[1]]
    return out


def _derivative(mult: float, *products: tuple) -> list:
    """``mult`` times the sum of the :func:`_product` terms, each term tagged with ``mult``."""
    return [(c, s, lt, r, mult) for prod in products for c, s, lt, r in _product(*prod)]


_A_T = _derivative(1.0, (_DK, FULL, FULL), (FULL, FULL, _DK), (FULL, _DG, FULL))
_A_TT = _derivative(2.0, (_DK, FULL, _DK), (_DK, _DG, FULL), (FULL, _DG, _DK))
_A_S = _derivative(1.0, (_DR, FULL, FULL), (FULL, FULL, _DR))
_A_TS = _derivative(1.0, (_DR, FULL, _DK), (_DK, FULL, _DR), (_DR, _DG, FULL), (FULL, _DG, _DR))
_A_TTS = _derivative(2.0, (_DR, _DG, _DK), (_DK, _DG, _DR))
# d_t^2 d_s (y^T Q y) = -4 u A_t Q A_t Q A_s u + 2 u A_tt Q A_s u + 4 u A_t Q A_ts u
#                       - 2 u A_t Q A_s Q A_t u - u A_tts u, with u = Q y and the derivatives of
# A = K^T G K / n the lists above (each over n):
_CHAINS = ((-4.0, (_A_T, _A_T, _A_S)), (2.0, (_A_TT, _A_S)), (4.0, (_A_T, _A_TS)),
           (-2.0, (_A_T, _A_S, _A_T)), (-1.0, (_A_TTS,)))


def pair_third_derivative(K: np.ndarray, G: np.ndarray, Q: np.ndarray, u: np.ndarray,
                          coef: dict) -> np.ndarray:
    """``d_t^2 d_s (y^T (gamma + K^T G K / n)^{-1} y)`` for every ordered pair, shape ``(n, n)``.

    ``Q = (gamma + K^T G K / n)^{-1}``, ``u = Q y`` (may be complex: a complex step in
    ``gamma``); ``coef``: ``"al"``, ``"be"``, ``"w"`` (arrays over the pairs ``(a, b)``) and
    ``"sg"`` (a number), the weights of the directions ``t`` and ``s`` (comment above). The
    diagonal ``a = b`` is meaningless.
    """
    n = len(u)
    V = {"e": np.eye(n), "p": (G @ K).T, "k": K.T}
    mats = {"I": None, "G": G, "Q": Q}
    cache: dict = {}

    def form(v: tuple, M: str, w: tuple):
        """``v^T M w`` over the pairs (``M`` symmetric)."""
        if (v, M, w) not in cache:
            L = u if v[0] == "u" else V[v[0]]
            R = u if w[0] == "u" else V[w[0]]
            B = (L if mats[M] is None else mats[M] @ L).T @ R
            if v[0] == "u" or w[0] == "u":
                idx = w[1] if v[0] == "u" else v[1]
                B = B if idx is None else (B[:, None] if idx == "a" else B[None, :])
            else:
                B = {("a", "b"): B, ("b", "a"): B.T, ("a", "a"): np.diag(B)[:, None],
                     ("b", "b"): np.diag(B)[None, :]}[(v[1], w[1])]
            cache[(v, M, w)] = B
        return cache[(v, M, w)]

    total = 0.0
    for mult, factors in _CHAINS:
        for chain in itertools.product(*factors):
            val, prev = mult / n ** len(factors), ("u", None)
            for k, (names, entries, left, right, m) in enumerate(chain):
                val = val * m * form(prev, "Q" if k else "I", left)
                for name in names:
                    val = val * coef[name]
                for v, M, w in entries:
                    val = val * form(v, M, w)
                prev = right
            total = total + val * form(prev, "I", ("u", None))
    return total


def _check_pair_derivative() -> None:
    """:func:`pair_third_derivative` against central differences on a random ``n = 7`` problem."""
    rng = np.random.default_rng(0)
    n, gam, h = 7, 0.7, 1e-3
    K, X, y = rng.standard_normal((n, n)), rng.standard_normal((5, n)), rng.standard_normal(n)
    G = X.T @ X + 0.3 * np.eye(n)
    coef = {name: rng.standard_normal((n, n)) for name in ("al", "be", "w")} | {"sg": 1.3}
    Q = np.linalg.inv(gam * np.eye(n) + K.T @ G @ K / n)
    got = pair_third_derivative(K, G, Q, Q @ y, coef)

    def phi(t: float, s_: float, a: int, b: int) -> float:
        Kp, Gp = K.copy(), G.copy()
        Kp[a, b] += t * coef["al"][a, b] + s_ * coef["w"][a, b]
        Kp[b, a] += t * coef["be"][a, b]
        Gp[a, b] += t * coef["sg"]
        Gp[b, a] += t * coef["sg"]
        return y @ np.linalg.solve(gam * np.eye(n) + Kp.T @ Gp @ Kp / n, y)

    for a, b in ((0, 1), (3, 2), (6, 0)):
        d = [(phi(t, h, a, b) - phi(t, -h, a, b)) / (2 * h) for t in (-h, 0.0, h)]
        fd = (d[0] - 2 * d[1] + d[2]) / h ** 2
        if abs(fd - got[a, b]) > 1e-4 * max(1.0, abs(fd)):
            raise RuntimeError(f"pair_third_derivative at {(a, b)}: {got[a, b]} against {fd} by differences")


def pair_cumulant_errors(s, g: np.ndarray, n: int, trials: int, seed: int) -> Trials:
    """The first-order effect of the cross term on the latent surrogate, exact and entry-wise.

    Per draw of the latent surrogate (``Phi = X K``, ``G = X^T X``, the ``eps = 0`` point of
    :func:`mixed_errors`): ``"exact"``, ``dE / d eps`` at ``eps = 0`` in the direction
    ``dK = F2(h) Q / (2 sqrt(p))`` of the tokens' own ``He2`` Gram ``Q`` (zero diagonal),
    ``-2 gamma^2 (Q_g u)^T dA u / n`` with ``u = Q_g y``; its mean over draws is the first-order
    term of the cross cumulant. ``"pair"``, the same term if ``g_ab`` entered ``K`` and ``G``
    only through the entries ``(a, b)`` and ``(b, a)``: ``-gamma^2 d_gamma sum_{a != b}
    pair_third_derivative / n``, by a complex step in ``gamma``.
    """
    p = s.p(n)

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        X, y, W, T, split = _draw(s, n, rng)
        H = split.shift()
        sf = shift_functions(s.f, h_max=float(np.abs(H).max(initial=0.0)))
        F1, F2 = sf(H)[1] / np.sqrt(p), sf.curvature(H) / (2 * np.sqrt(p))
        K, G = strong_alignment.surrogate_kernel(T, H, s.f, p, W), X.T @ X
        dK = F2 * split.he2(X)
        np.fill_diagonal(dK, 0.0)
        A, GK = K.T @ G @ K / n, G @ K
        coef = {"al": F1, "be": F1.T, "w": F2, "sg": np.sqrt(p)}
        exact, pair = [], []
        for gam in g:
            step = 1e-20 * gam                   # Q.real is the real resolvent to O(step^2)
            Qc = np.linalg.inv(complex(gam, step) * np.eye(n) + A)
            uc = Qc @ y
            u, Qu = uc.real, Qc.real @ uc.real
            exact.append(-2 * gam ** 2 * ((dK @ Qu) @ (GK @ u) + (GK @ Qu) @ (dK @ u)) / n ** 2)
            third = pair_third_derivative(K, G, Qc, uc, coef)
            np.fill_diagonal(third, 0.0)
            pair.append(-gam ** 2 * third.sum().imag / step / n)
        return {"exact": np.array(exact), "pair": np.array(pair)}

    return Trials.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)


def pair_cumulant(sizes: list[int], trials: int) -> None:
    _check_pair_derivative()
    s, g = _quadratic()
    print(f"## {QUADRATIC}: the cross term's first-order effect, exact and entry-wise ({trials} draws)\n")
    print("| n | p | gamma | exact dE/deps | entry-wise third cumulant |\n|" + "---|" * 5)
    for n in sizes:
        res = pair_cumulant_errors(s, g, n, trials, seed=11)
        for j, gam in enumerate(g):
            print(f"| {n} | {s.p(n)} | {gam:g} | "
                  + " | ".join(f"{res.mean(k)[j]:+.4f} ± {res.sem(k)[j]:.4f}" for k in ("exact", "pair"))
                  + " |", flush=True)
    print()


def he2(sizes: list[int], trials: int) -> None:
    s, g = _quadratic()
    print(f"## {QUADRATIC}: the He2 residual on common draws ({trials} draws), minus the latent surrogate\n")
    print("| n | p | delta | gamma | latent surrogate | true kernel | He2 own Gram | He2 from Z'' "
          "| He2 Wishart | theory | true, X'' | true, g'' |\n|" + "---|" * 12)
    for n in sizes:
        res = strong_alignment.surrogate_errors(s, g, n, trials=trials, seed=5, he2=True)
        dec = decoupled_errors(s, g, n, trials, seed=21)
        th = attention_error(s, g, n=n)
        lat = res["latent"]
        for j, gam in enumerate(g):
            cells = [_paired(res[k], lat, j) for k in ("attention", "latent+own", "latent+features",
                                                         "latent+wishart")]
            cells.append(f"{th[j] - lat[:, j].mean():+.4f} ± {standard_error(lat[:, j], 0):.4f}")
            cells += [_paired(dec[f"{k}/true"], dec[f"{k}/latent"], j) for k in ("X''", "g''")]
            print(f"| {n} | {s.p(n)} | {s.delta(n):.2f} | {gam:g} | {lat[:, j].mean():.4f} | "
                  + " | ".join(cells) + " |", flush=True)
    print()


def de_error(sizes: list[int], trials: int, type_trials: int) -> None:
    s, g = _quadratic()
    print(f"## {QUADRATIC}: where the deterministic equivalent's own error lies ({trials} draws; "
          f"{type_trials} draws of types)\n")
    print("| n | p | gamma | latent surrogate | theory - latent | latent - complex (paired) "
          "| theory - complex | diagonal - latent (paired) | theory - theory on own types "
          "| ridge: theory - MC |\n|" + "---|" * 10)
    for n in sizes:
        res = strong_alignment.surrogate_errors(s, g, n, trials=trials, seed=3, de_error=True)
        own = strong_alignment.sample_types_theory(s, g, n, trials=type_trials, seed=3)
        th, rt = attention_error(s, g, n=n), ridge_error(s, g)
        lat, cx, rg = res["latent"], res["latent-complex"], res["ridge"]
        for j, gam in enumerate(g):
            cells = [f"{lat[:, j].mean():.4f} ± {standard_error(lat[:, j], 0):.4f}",
                     f"{th[j] - lat[:, j].mean():+.4f}", _paired(lat, cx, j),
                     f"{th[j] - cx[:, j].mean():+.4f} ± {standard_error(cx[:, j], 0):.4f}",
                     _paired(res["latent+diagonal"], lat, j),
                     f"{th[j] - own[:, j].mean():+.4f} ± {standard_error(own[:, j], 0):.4f}",
                     f"{rt[j] - rg[:, j].mean():+.4f} ± {standard_error(rg[:, j], 0):.4f}"]
            print(f"| {n} | {s.p(n)} | {gam:g} | " + " | ".join(cells) + " |", flush=True)
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-k", type=int, default=24, help="largest in-plane count of the refined rules")
    ap.add_argument("--mc", type=Path, default=None, help="a saved small_n.py run (n = 512)")
    ap.add_argument("--sign", action="store_true")
    ap.add_argument("--skew", action="store_true")
    ap.add_argument("--surrogate", action="store_true")
    ap.add_argument("--he2", action="store_true", help="the He2 residual on common draws")
    ap.add_argument("--he2-n", type=int, nargs="+", default=[512])
    ap.add_argument("--he2-trials", type=int, default=2000)
    ap.add_argument("--self", action="store_true", dest="self_component",
                    help="the He2 residual's component along each token's own noise (--he2-n, --he2-trials)")
    ap.add_argument("--mix", action="store_true",
                    help="the He2 part interpolated from Gaussian to the tokens' own (--he2-n, --he2-trials)")
    ap.add_argument("--pair", action="store_true",
                    help="the cross term's first-order effect, exact and entry-wise (--he2-n, --he2-trials)")
    ap.add_argument("--de-error", action="store_true",
                    help="where the deterministic equivalent's own error lies, on common draws")
    ap.add_argument("--de-n", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--de-trials", type=int, default=4000)
    ap.add_argument("--type-trials", type=int, default=400)
    ap.add_argument("--skip-quadrature", action="store_true", help="skip the quadrature tables")
    args = ap.parse_args(argv)
    with threadpool_limits(limits=1, user_api="blas"):
        if not args.skip_quadrature:
            quadrature(args.max_k, args.mc)
        if args.he2:
            he2(args.he2_n, args.he2_trials)
        if args.self_component:
            self_component(args.he2_n, args.he2_trials)
        if args.mix:
            mixed(args.he2_n, args.he2_trials)
        if args.pair:
            pair_cumulant(args.he2_n, args.he2_trials)
        if args.de_error:
            de_error(args.de_n, args.de_trials, args.type_trials)
        if args.sign:
            sign_spike()
        if args.skew:
            skewness()
        if args.surrogate:
            surrogate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
