"""The covariance theory (attn_lib.theory._covariance) against Monte Carlo, and on real tokens.

Parts (``--part``, default all, in this order):

* ``identity``: ``C = I`` against the any-matrix theory (``attn_lib.theory._matrix``), largest
  ``|difference|`` over three matrices (I, I + w w^T, dense non-symmetric; p = 96) and tanh,
  relu, sign.
* ``speed``: the theory for three gammas at p = 784 (MNIST 3 vs 8, identity and aligned
  matrix), cold (a new setting: the eigendecomposition of C included), one BLAS thread; and
  one Monte Carlo trial of the same setting (n = 784) in the same run, for the ratio.
* ``real``: every pair and setting of the chapter: MNIST 3-8, 4-9, 0-1 at n = 196, 392, 784
  (c = 4, 2, 1), digits 3-8 (n = 64, 128, 256) and breast cancer (n = 60, 120, 240); tanh,
  relu, sign, cos; identity, aligned and random ``M``; g = gamma / tau = 1e-3, 0.1, 1:
  ``|theory - real|``, ``|surrogate - real|``, ``|theory - surrogate|`` and the share of the
  MNIST points with ``|theory - real| <= 0.02``; masked softmax (beta = 1) real against
  surrogate (no theory).
* ``cause``: relu on the power-law and spiked spectra (c = 0.25, n = 2048, M = I): the real
  kernel against its Gaussian equivalent on common draws, and the theory (where the synthetic
  grid misses).
* ``classes``: MNIST pairs, n = 392, M = I, the four f: real tokens against the Gaussian
  surrogate with the pooled covariance and with each class's own.
* ``twocov``: the two-covariance theory: ``C_+ = C_-`` against the one-covariance theory; two
  diagonal class spectra (p = 100, 200, 400, n = 2 p) against 24 Monte Carlo draws; the MNIST grid of
  ``real`` (324 comparisons) with the pooled, the two-covariance and the two-covariance theory
  with the coherent shift, and against the class-covariance surrogate (n = 392, M = I).
* ``fscov``: the finite-size covariance theory (limit plus the shift of an isotropic reduced
  model) on Gaussian tokens and on the MNIST grid, held-out pairs 2-7 and 5-6, and the tokens'
  logit scales made equal.
* ``ceiling``: the Gaussian surrogate with each class's own mean and covariance against the real
  error on the MNIST grid and the held-out pairs: how close any two-class Gaussian theory can come.
* ``synthetic``: diagonal covariances, spiked (four eigenvalues 10, the rest 1, then mean one)
  and power law (``k^{-0.7}``, mean one); c = 0.25 (n = 2048), 1 (n = 1024), 4 (n = 512,
  p = 2048: the p of the largest c kept at 2048 for memory and time); tanh, relu, sign;
  ``M = I`` and ``I + w w^T`` with ``|w| = 1`` along ``mu`` or random, each at unit logit scale;
  Monte Carlo in rounds of 8 draws until every s.e. <= 0.003 (at most 48; breadth first over
  the settings of a ``c``, each round cached, so an interrupted run resumes and prints every
  setting's partial s.e.): max ``|theory - MC|`` with its s.e., per ``c``, spectrum, ``f`` and
  ``M``. ``--n 2048`` runs every ``c`` at that ``n`` instead (``c = 4``: ``p = 8192``), ``--c``
  a subset of the ``c``, ``--rounds R`` at most ``R`` rounds (a summary of what the cache holds).
* ``elliptic``: the tokens' own norms. The spread (coefficient of variation) over each class's
  real tokens of the norm ``|x_i - m_y|`` and of the logit variance ``e_i^T M C M^T e_i``
  (``e_i = x_i - m_y``), and the kurtosis of ``e_i`` along the top four eigenvectors of
  ``M C M^T``, against the Gaussian class surrogate and the surrogate with the real tokens' norms
  (``rt.scale_noise``: Gaussian directions with the class covariance, norms drawn from the real
  ones; 4000 draws per class); then that surrogate (``rt.surrogate``, law ``"norms"``, on the draws of the
  class surrogate: paired) and the surrogates with the real coordinates along each class's top
  k = 4, 16, 64 principal directions and a Gaussian rest (``"top"``), and with the top
  16 coordinates independent, each of its real marginal law (``"marginal"``), and the
  Gaussian mixtures of 4 and 16 k-means clusters per class (``"cluster"``), against the real
  error on the MNIST grid and held-out pairs of ``ceiling``: the shares within 0.02 (overall,
  per f, matrix, g and n), beyond 0.02 by two s.e., and per f and g the class surrogate's gap
  real - class, the paired move of each surrogate from the class one, and the mean |miss|.
* ``latent``: which conditional law of the kernel carries the miss of a heavy spectrum
  (common draws, paired differences): the real kernel on Gaussian tokens against (i) its
  Gaussian equivalent, (ii) the equivalent typed by the tokens' own logit scales (``f`` read at
  ``sigma_ij^2 = s_i s'_j / sigma^2``: its mean, slope and residual variance) and (iii) the
  equivalent with the top ``k`` directions of ``C^{1/2} M C^{1/2}`` kept as latent coordinates
  (``f`` read at their logit ``T_top``, the rest Gaussian of variance ``rho_k^2``); on the
  power-law spectrum (c = 0.25, n = 2048, M = I; relu, tanh, sign; 16 draws) and on the Gaussian
  surrogate of MNIST 3 vs 8 (n = 392, identity and aligned ``M``, the four f, 16 draws).
* ``topk``: the covariance limit plus the finite-size shift of a reduced model that keeps the top
  ``k`` directions of ``C^{1/2} M C^{1/2}`` (and ``mu``, the cross terms) as latent coordinates
  with their exact law, an isotropic complement and a quasi-Monte Carlo rule for the types
  (``k = 0, 1, 2, 4, 8, 16``), against the Monte Carlo of ``synthetic`` (c = 0.25 and 1); the
  rule's quadrature error first.

Usage: ``python benchmarks/real_tokens.py [--part identity speed real synthetic] [--trials 16]
[--n N] [--c 0.25 1 4] [--rounds 6] [--out FILE]`` (JSON of every number). Run it alone:
timings are wall-clock of this process.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Iterator

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al
from attn_lib import cache
from attn_lib.simulation import simulate
from attn_lib.studies import real_tokens as rt
from attn_lib.model.setting import scale_spread

G = np.array([1e-3, 0.1, 1.0])
FS = ("tanh", "relu", "sign", "cos")
REAL = [("mnist", (3, 8), (196, 392, 784)), ("mnist", (4, 9), (196, 392, 784)),
        ("mnist", (0, 1), (196, 392, 784)), ("digits", (3, 8), (64, 128, 256)),
        ("breast_cancer", (0, 1), (60, 120, 240))]


def identity() -> dict:
    p = 96
    rng = np.random.default_rng(0)
    w = 1.5 * rng.standard_normal(p) / np.sqrt(p)
    mu = rng.standard_normal(p) / np.sqrt(p)
    mats = [np.eye(p), np.eye(p) + np.outer(w, w), 0.3 * np.eye(p) + rng.standard_normal((p, p)) / np.sqrt(p)]
    worst = 0.0
    for M in mats:
        M = M * np.sqrt(p) / np.linalg.norm(M)
        for f in ("tanh", "relu", "sign"):
            a = al.theory.attention_error(al.MatrixSetting(c=0.5, M=M, mu=mu, f=f), G)
            b = al.theory.attention_error(al.CovarianceSetting(c=0.5, M=M, mu=mu, f=f, C=np.eye(p)), G)
            worst = max(worst, float(np.abs(a - b).max()))
    print(f"identity: C = I against the any-matrix theory, max |difference| {worst:.2e} "
          f"(3 matrices x 3 f x 3 gamma, p = {p})")
    return {"max_difference": worst}


def speed() -> dict:
    out = {}
    X, y = rt.tokens("mnist", 3, 8)
    for kind in ("identity", "aligned"):
        base = rt.setting("mnist", (3, 8), 784, "tanh", kind)
        M, mu, C = np.array(base.M), np.array(base.mu), np.array(base.C)
        t = time.perf_counter()
        s = al.CovarianceSetting(c=1.0, M=M, mu=mu, C=C, f="tanh")   # cold: eigh of C included
        al.theory.attention_error(s, G)
        theory = time.perf_counter() - t
        t = time.perf_counter()
        simulate.subset_errors(s, X, y, G, 784, trials=1)
        trial = time.perf_counter() - t
        out[kind] = {"theory_s": theory, "trial_s": trial, "ratio": theory / trial}
        print(f"speed ({kind} M, p = 784, 3 gammas, one BLAS thread): theory "
              f"{theory:.2f} s cold, one Monte Carlo trial (n = 784) {trial:.2f} s, ratio "
              f"{theory / trial:.2f}")
    return out


def real(trials: int) -> dict:
    rows = []
    for data, pair, ns in REAL:
        for n in ns:
            diag = rt.diagnostics(data, pair, n)
            for kind in rt.MATRICES:
                for f in FS:
                    c = rt.compare(data, pair, n, f, kind, G, trials)
                    assert c.theory is not None
                    for k, g in enumerate(G):
                        rows.append({"data": data, "pair": pair, "n": n, "kind": kind, "f": f,
                                     "g": g, "theory": c.theory[k], "real": c.real[k],
                                     "real_se": c.real_se[k], "surrogate": c.surrogate[k],
                                     "surrogate_se": c.surrogate_se[k],
                                     "ridge_theory": c.ridge_theory[k], "ridge_real": c.ridge_real[k],
                                     "shift": rt.diagnostics(data, pair, n, kind)["shift"],
                                     **{f"diag_{a}": b for a, b in diag.items() if a != "shift"}})
            print(f"  {data} {pair} n = {n}: done", flush=True)
    for data in ("mnist", "digits", "breast_cancer"):
        sub = [r for r in rows if r["data"] == data]
        tr = np.array([abs(r["theory"] - r["real"]) for r in sub])
        sr = np.array([abs(r["surrogate"] - r["real"]) for r in sub])
        ts = np.array([abs(r["theory"] - r["surrogate"]) for r in sub])
        rr = np.array([abs(r["ridge_theory"] - r["ridge_real"]) for r in sub])
        print(f"real {data}: {len(sub)} points; |theory - real| median {np.median(tr):.4f} max "
              f"{tr.max():.4f}, within 0.02: {np.mean(tr <= 0.02):.0%}; |surrogate - real| median "
              f"{np.median(sr):.4f} max {sr.max():.4f}; |theory - surrogate| median {np.median(ts):.4f} "
              f"max {ts.max():.4f}; ridge |theory - real| median {np.median(rr):.4f} max {rr.max():.4f}")
        for kind in rt.MATRICES:
            k = np.array([r["kind"] == kind for r in sub])
            print(f"    {kind:8s}: within 0.02 {np.mean(tr[k] <= 0.02):.0%}, |theory - surrogate| "
                  f"max {ts[k].max():.4f}, |surrogate - real| max {sr[k].max():.4f}")
        for pair in sorted({r["pair"] for r in sub}):
            k = np.array([r["pair"] == pair for r in sub])
            r0 = next(r for r in sub if r["pair"] == pair)
            print(f"    pair {pair}: within 0.02 {np.mean(tr[k] <= 0.02):.0%}, snr {r0['diag_snr']:.1f}, "
                  f"effective rank {r0['diag_effective_rank']:.1f}, class covariances "
                  f"{r0['diag_class_covariance']:.2f}")
    soft = []
    for data, pair, _ in REAL[:3]:
        for kind in ("identity", "aligned"):
            c = rt.compare(data, pair, 392, "tanh", kind, G, trials, attention=al.Softmax(1.0))
            soft.append({"data": data, "pair": pair, "kind": kind,
                         "real": c.real.tolist(), "surrogate": c.surrogate.tolist(),
                         "se": np.hypot(c.real_se, c.surrogate_se).tolist(),
                         "ridge_real": c.ridge_real.tolist()})
            print(f"softmax(1) {data} {pair} {kind}: real {np.round(c.real, 3)}, surrogate "
                  f"{np.round(c.surrogate, 3)}, ridge (real) {np.round(c.ridge_real, 3)}")
    return {"rows": rows, "softmax": soft}


SYNTHETIC_N = {0.25: 2048, 1.0: 1024, 4.0: 512}   # the default grid's n per c (p at most 2048)
COVS, KINDS, FS3 = ("spiked", "power"), ("identity", "aligned", "random"), ("tanh", "relu", "sign")


def _mnist_grids(trials: int) -> dict[str, tuple[list[tuple[tuple[int, int], tuple[int, ...]]], int, int]]:
    """The MNIST grids ``{name: (pairs with their n, seed, subsets)}``: the chapter's pairs of
    ``real`` (seed 0, ``trials`` subsets) and the held-out pairs 2-7 and 5-6 (seed 1, 8)."""
    return {"chapter": ([(pair, ns) for _, pair, ns in REAL[:3]], 0, trials),
            "held out": ([((2, 7), (196, 392, 784)), ((5, 6), (196, 392, 784))], 1, 8)}


def _mnist_points(pairs: list[tuple[tuple[int, int], tuple[int, ...]]]
                  ) -> Iterator[tuple[tuple[int, int], int, str, str, np.ndarray, np.ndarray, al.CovarianceSetting]]:
    """``(pair, n, kind, f, X, y, setting)`` for every pair, ``n``, matrix and ``f`` of a grid."""
    for pair, ns in pairs:
        X, y = rt.tokens("mnist", *pair)
        for n in ns:
            for kind in rt.MATRICES:
                for f in FS:
                    yield pair, n, kind, f, X, y, rt.setting("mnist", pair, n, f, kind)


def _grid_vectors(p: int, cov: str, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(lam, mu, w, sigma)`` of the synthetic grid in ``R^p``: the diagonal spectrum (``spiked``:
    four eigenvalues 10, the rest 1; ``power``: ``k^{-0.7}``; mean one; ``white``: ``C = I``),
    ``mu`` with two entries 0.8, ``w = 0``, ``mu / |mu|`` or a random unit vector (seed 7) for
    ``kind`` identity, aligned, random, and the logit scale ``sigma^2 = tr(C M C M^T) / p`` of
    ``M = I + w w^T``."""
    lam = (np.r_[np.full(4, 10.0), np.ones(p - 4)] if cov == "spiked" else np.arange(1, p + 1) ** -0.7
           if cov == "power" else np.ones(p))
    lam = lam / lam.mean()
    mu = np.zeros(p)
    mu[[0, 10]] = 0.8
    d = mu if kind == "aligned" else np.random.default_rng(7).standard_normal((2, p))[int(kind == "random")]
    w = 0.0 * d if kind == "identity" else d / np.linalg.norm(d)
    sigma = np.sqrt((np.sum(lam ** 2) + 2 * np.sum((lam * w) ** 2) + (w @ (lam * w)) ** 2) / p)
    return lam, mu, w, float(sigma)


def _synthetic_setting(c: float, n: int, cov: str, kind: str, f: str) -> al.CovarianceSetting:
    """One setting of the synthetic grid (:func:`_grid_vectors`): ``M = (I + w w^T) / sigma``, unit
    logit scale."""
    p = int(round(c * n))
    lam, mu, w, sigma = _grid_vectors(p, cov, kind)
    return al.CovarianceSetting(c=p / n, M=(np.eye(p) + np.outer(w, w)) / sigma, mu=mu, f=f, C=np.diag(lam))


def _finite_size_white(c: float, n: int) -> dict:
    """How far the limit is from finite ``n`` without the covariance: at ``C = I``, the same ``M``
    (``alpha I + w_K w_Q^T``, ``alpha = 1 / sigma``, ``w_K = w_Q = w / sqrt(sigma)``), ``mu`` and
    ``f``, the finite-size theory (``attention_error(..., n=n)``) against the limit; and the
    spread of the tokens' own logit scales ``sqrt(2 tr(B^2)) / tr(B)``, ``B = C^2`` (``M = I``),
    of each spectrum (the cause of :func:`cause`; ``sqrt(2 / p)`` for ``C = I``)."""
    p = int(round(c * n))
    worst, where = 0.0, ""
    for kind in KINDS:
        _, mu, w, sigma = _grid_vectors(p, "white", kind)
        W = (w / np.sqrt(sigma))[None]
        for f in FS3:
            s = al.RankSetting.from_vectors(p / n, mu, W, W, f, alpha=1.0 / sigma)
            d = np.abs(al.theory.attention_error(s, G, n=n) - al.theory.attention_error(s, G))
            if d.max() > worst:
                worst, where = float(d.max()), f"{kind} {f} g = {G[np.argmax(d)]}"
    spread = {cov: float(np.sqrt(2 * np.sum(lam ** 4)) / np.sum(lam ** 2))
              for cov in COVS for lam in [_grid_vectors(p, cov, "identity")[0]]}
    print(f"    c = {c} n = {n}, C = I: |finite-size theory - limit| max {worst:.4f} ({where}); spread of "
          f"the logit scales (M = I): spiked {spread['spiked']:.3f}, power {spread['power']:.3f}, "
          f"C = I {np.sqrt(2 / p):.3f}", flush=True)
    return {"white_finite_size": worst, "spread": spread}


def _synthetic_mc(c: float, n: int, keys: list[tuple[str, str, str]], rounds: int,
                  theory: dict[tuple[str, str, str], np.ndarray] | None = None
                  ) -> tuple[dict[tuple[str, str, str], np.ndarray], dict[tuple[str, str, str], np.ndarray]]:
    """Monte Carlo of the synthetic settings ``keys`` (``(cov, kind, f)``) at ``c``, ``n``: rounds of
    8 draws (round ``r``: ``simulate.errors`` with ``seed = 100 + r``, cached), breadth first
    over the settings whose s.e. is still above 0.003, at most ``rounds``; each round's s.e. (and
    ``|theory - MC|`` with ``theory``) printed. Returns the draws (shape ``(draws, 3)``) and the
    s.e. of each setting."""
    parts: dict = {k: [] for k in keys}
    sem: dict = {}
    for r in range(rounds):
        todo = [k for k in keys if k not in sem or sem[k].max() > 0.003]
        if not todo:
            break
        for k in todo:
            s = _synthetic_setting(c, n, *k)
            res = cache.cached(al.simulate.errors, setting=s, gammas=G, n=n, trials=8, seed=100 + r)
            parts[k].append(res.attention.values)
            v = np.concatenate(parts[k])
            sem[k] = v.std(axis=0, ddof=1) / np.sqrt(len(v))
            miss = "" if theory is None else f", |theory - MC| max {np.abs(theory[k] - v.mean(axis=0)).max():.4f}"
            print(f"    round {r + 1}: {k[0]} c = {c} n = {n} {k[1]} {k[2]}: {len(v)} draws, s.e. max "
                  f"{sem[k].max():.4f}{miss}", flush=True)
    return {k: np.concatenate(v) for k, v in parts.items()}, sem


def synthetic(n_all: int | None = None, cs: tuple[float, ...] = (0.25, 1.0, 4.0), rounds: int = 6) -> dict:
    """The synthetic grid at ``n = SYNTHETIC_N[c]`` (default) or at ``n_all`` for every ``c``.

    Monte Carlo in rounds of 8 draws (round ``r``: ``simulate.errors`` with ``seed = 100 + r``,
    cached), breadth first: each round goes over every setting of a ``c`` whose s.e. is still
    above 0.003, so an interrupted run has every setting's partial s.e. (printed per round), and
    a setting stops at the same draws as it would alone. At most ``rounds`` rounds."""
    rows = []
    for c in cs:
        n = n_all or SYNTHETIC_N[c]
        keys = [(cov, kind, f) for cov in COVS for kind in KINDS for f in FS3]
        th = {k: cache.cached(al.theory.attention_error, setting=_synthetic_setting(c, n, *k), gammas=G)
              for k in keys}
        vals, sem = _synthetic_mc(c, n, keys, rounds, th)
        for k in keys:
            v = vals[k]
            mc = v.mean(axis=0)
            rows.append({"cov": k[0], "c": c, "n": n, "kind": k[1], "f": k[2], "theory": th[k].tolist(),
                         "mc": mc.tolist(), "se": sem[k].tolist(), "trials": len(v)})
            j = int(np.argmax(np.abs(th[k] - mc)))
            print(f"  {k[0]} c = {c} n = {n} {k[1]} {k[2]}: |theory - MC| max {abs(th[k][j] - mc[j]):.4f} "
                  f"(s.e. {sem[k][j]:.4f}, {len(v)} draws)", flush=True)
    d = np.array([np.abs(np.array(r["theory"]) - np.array(r["mc"])) for r in rows])
    se = np.array([r["se"] for r in rows])
    k = np.unravel_index(np.argmax(d), d.shape)
    print(f"synthetic: {d.size} points, |theory - MC| median {np.median(d):.4f}, max {d.max():.4f} "
          f"(s.e. {se[k]:.4f}; {rows[k[0]]['cov']} c = {rows[k[0]]['c']} {rows[k[0]]['kind']} "
          f"{rows[k[0]]['f']} g = {G[k[1]]}); within 0.01: {np.mean(d <= 0.01):.0%}; "
          f"largest s.e. {se.max():.4f}")
    for f in FS3:
        for cname in COVS:
            m = np.array([r["f"] == f and r["cov"] == cname for r in rows])
            print(f"    {cname:6s} {f}: max {d[m].max():.4f}, within 0.01 {np.mean(d[m] <= 0.01):.0%}")
    for c in cs:
        for cname in COVS:
            for f in FS3:
                m = np.flatnonzero([r["c"] == c and r["f"] == f and r["cov"] == cname for r in rows])
                i, j = np.unravel_index(np.argmax(d[m]), d[m].shape)
                print(f"    c = {c} {cname:6s} {f}: max {d[m][i, j]:.4f} (s.e. {se[m][i, j]:.4f}; "
                      f"{rows[m[i]]['kind']}, g = {G[j]}), within 0.01 {np.mean(d[m] <= 0.01):.0%}, "
                      f"draws {min(rows[q]['trials'] for q in m)}-{max(rows[q]['trials'] for q in m)}")
    white = {c: _finite_size_white(c, n_all or SYNTHETIC_N[c]) for c in cs}
    return {"rows": rows, "white": white}


def cause(trials: int) -> dict:
    """Where the synthetic grid misses: relu (whose residual beyond the linear part is even) on the
    power-law and spiked spectra at c = 0.25, n = 2048, M = I. On common draws: the real kernel,
    its Gaussian equivalent ``a1/sigma (X^T M X / p - diag) + sqrt(b2/p) W`` (a GOE ``W``), and
    the theory; and the spread of the tokens' own logit scales ``||M^T x_i||^2 / (p sigma^2)``."""
    from attn_lib.model import data, hermite
    from attn_lib.simulation.resolvent import interpolation_errors
    from attn_lib.simulation.trials import Trials

    out = {}
    n, p = 2048, 512
    for cname, lam in (("power", np.arange(1, p + 1) ** -0.7), ("spiked", np.r_[np.full(4, 10.0), np.ones(p - 4)])):
        lam = lam / lam.mean()
        mu = np.zeros(p)
        mu[[0, 10]] = 0.8
        sigma = np.sqrt(np.sum(lam ** 2) / p)
        s = al.CovarianceSetting(c=p / n, M=np.eye(p) / sigma, mu=mu, f="relu", C=np.diag(lam))
        h = hermite.coefficients("relu", 1.0)
        th = al.theory.attention_error(s, G)

        def trial(r: np.random.Generator) -> dict:
            smp = data.draw(s, n, r)
            T = smp.X.T @ smp.X / (np.sqrt(p) * sigma)
            K = (np.maximum(T, 0.0) - h.a0) / np.sqrt(p)
            np.fill_diagonal(K, 0.0)
            L = h.a1 * T / np.sqrt(p) + np.sqrt(h.b2 / p) * data.goe(n, r)
            np.fill_diagonal(L, 0.0)
            real, sur = interpolation_errors([smp.X @ K, smp.X @ L], smp.y, [G, G])
            return {"real": real, "sur": sur, "diff": real - sur}

        res = Trials.run(trial, trials=trials, seed=5, gammas=G, n=n, p=p)
        # token i's logit variance z_i^T B z_i / p, B = C^{1/2} M C M^T C^{1/2} = C^2 / sigma^2
        B = lam ** 2 / sigma ** 2
        spread = np.sqrt(2 * np.sum(B ** 2)) / np.sum(B)
        out[cname] = {"theory": th.tolist(), "real": res.stats("real").mean.tolist(),
                      "real_se": res.stats("real").sem.tolist(), "surrogate": res.stats("sur").mean.tolist(),
                      "surrogate_se": res.stats("sur").sem.tolist(), "real_minus_surrogate": res.stats("diff").mean.tolist(),
                      "paired_se": res.stats("diff").sem.tolist(), "logit_scale_spread": float(spread),
                      "effective_rank": s.effective_rank}
        print(f"cause ({cname}, relu, c = 0.25, n = {n}, M = I, {trials} draws): theory {np.round(th, 4)}, "
              f"Gaussian equivalent {np.round(res.stats('sur').mean, 4)} (s.e. {res.stats('sur').sem.max():.4f}), "
              f"real kernel {np.round(res.stats('real').mean, 4)}; real - equivalent (paired) "
              f"{np.round(res.stats('diff').mean, 4)} ± {res.stats('diff').sem.max():.4f}; effective rank "
              f"{s.effective_rank:.1f}, spread of the tokens' logit scales {spread:.3f}", flush=True)
    return out


def classes(trials: int) -> dict:
    """The class-covariance check of the chapter at its full size: MNIST pairs, n = 392, M = I,
    the four f: the real error against the Gaussian surrogate with the pooled covariance and with
    each class's own (:func:`attn_lib.studies.real_tokens.class_surrogate`)."""
    rows = []
    for data, pair, _ in REAL[:3]:
        for f in FS:
            c = rt.compare(data, pair, 392, f, "identity", G, trials)
            cl = rt.class_surrogate(data, pair, 392, f, "identity", G, trials)
            rows.append({"pair": pair, "f": f, "real": c.real.tolist(), "common": c.surrogate.tolist(),
                         "classes": cl.mean.tolist(), "theory": (c.theory if c.theory is not None else G * 0).tolist()})
            print(f"classes {pair} {f}: real {np.round(c.real, 3)}, pooled-C surrogate "
                  f"{np.round(c.surrogate, 3)}, class-C surrogate {np.round(cl.mean, 3)} "
                  f"(s.e. <= {max(c.real_se.max(), cl.sem.max()):.3f}), theory {np.round(c.theory, 3)}", flush=True)
    com = np.array([np.abs(np.array(r["common"]) - r["real"]) for r in rows])
    cls = np.array([np.abs(np.array(r["classes"]) - r["real"]) for r in rows])
    for f in FS:
        k = np.array([r["f"] == f for r in rows])
        print(f"classes {f}: max |pooled-C surrogate - real| {com[k].max():.4f}, max |class-C "
              f"surrogate - real| {cls[k].max():.4f}")
    return {"rows": rows}


def twocov(trials: int) -> dict:
    """The two-covariance theory (``attn_lib.theory._covariance.two_covariance_form``): equal
    class covariances against the one-covariance theory; two diagonal class spectra against
    Monte Carlo of their Gaussian tokens; the MNIST pairs against the class-covariance surrogate
    (n = 392, M = I) and on the chapter's grid (324 comparisons: the share within 0.02 of the real
    error, without and with the coherent shift read by ``f``)."""
    from attn_lib.model import data
    from attn_lib.simulation.trials import Trials
    from attn_lib.theory import _covariance as cv

    out: dict = {}
    p = 96
    rng = np.random.default_rng(0)
    lam = np.linspace(0.5, 1.5, p)
    mu = rng.standard_normal(p) / np.sqrt(p)
    w = rng.standard_normal(p)
    worst = 0.0
    for M in (np.eye(p), np.eye(p) + np.sqrt(p) * np.outer(w, w) / (w @ w)):
        for f in FS:
            a = cv.covariance_resolvent_form(0.5, M, mu, lam, f, G)
            b = cv.two_covariance_form(0.5, M, mu, lam, np.zeros((p, p)), f, G)
            worst = max(worst, float(np.abs(np.r_[a[0] - b[0], a[1] - b[1]]).max()))
    out["equal"] = worst
    print(f"twocov: C_+ = C_- against the one-covariance theory, max |difference| {worst:.1e} "
          f"(2 matrices x 4 f x 3 gamma, p = {p})", flush=True)

    syn = []
    for p, f in [(p, f) for p in (100, 200, 400) for f in FS]:
        n = 2 * p
        lam_p, lam_m = np.linspace(0.4, 2.4, p), np.linspace(0.3, 1.1, p)[::-1]
        mu = np.random.default_rng(5).standard_normal(p)
        mu *= np.sqrt(2.0) / np.linalg.norm(mu)
        C = np.diag((lam_p + lam_m) / 2)
        sigma = np.sqrt(np.sum(np.diag(C) ** 2) / p)
        s = al.CovarianceSetting(c=p / n, M=np.eye(p) / sigma, mu=mu, C=C, f=f)

        def trial(r: np.random.Generator, s: al.CovarianceSetting = s, p: int = p, n: int = n,
                  lam_p: np.ndarray = lam_p, lam_m: np.ndarray = lam_m, mu: np.ndarray = mu) -> dict:
            y = data.labels(n, r)
            Z = r.standard_normal((p, n))
            Z *= np.where(y > 0, np.sqrt(lam_p)[:, None], np.sqrt(lam_m)[:, None])
            smp = data.Sample(X=Z + np.outer(mu, y), y=y, mu=mu, w_K=None, w_Q=None, Z=Z)
            att, _ = simulate.sample_errors(s, smp, G, ridge_gammas=G)
            return {"attention": att}

        mc = Trials.run(trial, trials=24, seed=11, gammas=G, n=n, p=p).stats("attention")
        th = cv.class_setting_form(s, np.diag(lam_p), np.diag(lam_m), G)[1]
        pooled = al.theory.attention_error(s, G)
        syn.append({"p": p, "n": n, "f": f, "mc": mc.mean.tolist(), "se": mc.sem.tolist(), "theory": th.tolist(),
                    "pooled": pooled.tolist()})
        print(f"twocov synthetic ({f}, p = {p}, n = {n}, tr(C_+-)/p = {lam_p.mean():.2f}, {lam_m.mean():.2f}, "
              f"M = I, 24 draws): MC {np.round(mc.mean, 4)} (s.e. <= {mc.sem.max():.4f}), two-covariance "
              f"theory {np.round(th, 4)}, pooled-C theory {np.round(pooled, 4)}", flush=True)
    out["synthetic"] = syn

    rows = []
    for data_name, pair, ns in REAL[:3]:
        X, y = rt.tokens(data_name, *pair)
        Cp, Cm = np.cov(X[:, y > 0]), np.cov(X[:, y < 0])
        for n in ns:
            for kind in rt.MATRICES:
                for f in FS:
                    c = rt.compare(data_name, pair, n, f, kind, G, trials)
                    s = rt.setting(data_name, pair, n, f, kind)
                    gam = simulate.raw_gammas(s, G, n, relative=True)[0]
                    two = cv.class_setting_form(s, Cp, Cm, gam)[1]
                    sh = cv.class_setting_form(s, Cp, Cm, gam, shift=True)[1]
                    cl = (rt.class_surrogate(data_name, pair, n, f, kind, G, trials).mean
                          if (n == 392 and kind == "identity") else np.full(3, np.nan))
                    assert c.theory is not None
                    for k in range(3):
                        rows.append({"pair": pair, "n": n, "kind": kind, "f": f, "g": float(G[k]),
                                     "real": float(c.real[k]), "pooled": float(c.theory[k]),
                                     "two": float(two[k]), "shift": float(sh[k]),
                                     "class_surrogate": float(cl[k])})
            print(f"  twocov {pair} n = {n}: done", flush=True)
    real = np.array([r["real"] for r in rows])
    for key in ("pooled", "two", "shift"):
        d = np.abs(np.array([r[key] for r in rows]) - real)
        print(f"twocov MNIST ({len(rows)} comparisons) {key:6s}: within 0.02 {np.mean(d <= 0.02):.0%}, "
              f"median |theory - real| {np.median(d):.4f}, max {d.max():.4f}")
        for f in FS:
            k = np.array([r["f"] == f for r in rows])
            print(f"      {f:4s}: within 0.02 {np.mean(d[k] <= 0.02):.0%}, max {d[k].max():.3f}")
        for kind in rt.MATRICES:
            k = np.array([r["kind"] == kind for r in rows])
            print(f"      {kind:8s}: within 0.02 {np.mean(d[k] <= 0.02):.0%}, max {d[k].max():.3f}")
    k = np.array([not np.isnan(r["class_surrogate"]) for r in rows])
    cs = np.array([r["class_surrogate"] for r in rows])[k]
    for key in ("two", "shift"):
        th = np.array([r[key] for r in rows])[k]
        print(f"twocov n = 392, M = I ({k.sum()} points): |{key} theory - class surrogate| median "
              f"{np.median(np.abs(th - cs)):.4f} max {np.abs(th - cs).max():.4f}; |class surrogate - real| "
              f"median {np.median(np.abs(cs - real[k])):.4f} max {np.abs(cs - real[k]).max():.4f}")
    out["rows"] = rows
    return out


def fscov(trials: int) -> dict:
    """The finite-size covariance theory (``attention_error(CovarianceSetting, gammas, n=n)``: the
    limit plus the shift of an isotropic reduced model, ``attn_lib.theory._covariance_shift``).
    (1) Gaussian tokens of a diagonal covariance (p = 256, n = 512, spectra ``k^-0.5`` and
    ``k^-1``, mean one; ``||mu||^2 = 8``; M = I and aligned ``I + w w^T``; four f; 16 draws): the
    limit and the finite-size theory against Monte Carlo, and the spread of the tokens' logit
    scales. (2) The MNIST grid of ``real`` (324 comparisons): the common-covariance theory with
    and without the shift against its Gaussian surrogate; the two-covariance theory with and
    without the shift against the real error. (3) Held out: MNIST 2-7 and 5-6 at the same n, f, M
    and g, real subsets from seed 1 (8 subsets): the same shares. (4) The tokens' logit scales:
    MNIST 3-8, n = 392, M = I, the surrogate with each token's noise rescaled to the common logit
    scale (8 draws), against the plain surrogate and the limit."""
    from attn_lib import cache
    from attn_lib.model import data
    from attn_lib.simulation.trials import Trials
    out: dict = {}
    syn = []
    p, n = 256, 512
    mu = np.random.default_rng(3).standard_normal(p)
    mu *= np.sqrt(8.0) / np.linalg.norm(mu)
    for expo in (0.5, 1.0):
        lam = np.arange(1, p + 1) ** -expo
        lam /= lam.mean()
        for kind in ("identity", "aligned"):
            w = np.zeros(p) if kind == "identity" else mu / np.linalg.norm(mu) * p ** 0.25
            sig = np.sqrt((np.sum(lam ** 2) + 2 * np.sum((lam * w) ** 2) + (w @ (lam * w)) ** 2) / p)
            for f in FS:
                s = al.CovarianceSetting(c=p / n, M=(np.eye(p) + np.outer(w, w)) / sig, mu=mu, f=f, C=np.diag(lam))
                spread = scale_spread(s)
                lim, fin = al.theory.attention_error(s, G), al.theory.attention_error(s, G, n=n)
                mc = al.simulate.errors(s, G, n=n, trials=16, seed=4).attention
                syn.append({"exponent": expo, "kind": kind, "f": f, "limit": lim.tolist(), "finite": fin.tolist(),
                            "mc": mc.mean.tolist(), "se": mc.sem.tolist(), "spread": spread,
                            "effective_rank": s.effective_rank, "shift": s.delta() / s.logit_scale})
                print(f"  fscov synthetic k^-{expo} (effective rank {s.effective_rank:.0f}, logit-scale spread "
                      f"{spread:.2f}) {kind} {f} (shift {s.delta() / s.logit_scale:.2f}): MC {np.round(mc.mean, 3)} "
                      f"(s.e. <= {mc.sem.max():.3f}); limit - MC {np.round(lim - mc.mean, 3)}, finite - MC "
                      f"{np.round(fin - mc.mean, 3)}", flush=True)
    for expo in (0.5, 1.0):
        for kind in ("identity", "aligned"):
            sub = [r for r in syn if r["exponent"] == expo and r["kind"] == kind]
            dl = max(np.abs(np.subtract(r["limit"], r["mc"])).max() for r in sub)
            df = max(np.abs(np.subtract(r["finite"], r["mc"])).max() for r in sub)
            odd = [r for r in sub if r["f"] in ("tanh", "sign")]
            dlo = max(np.abs(np.subtract(r["limit"], r["mc"])).max() for r in odd)
            dfo = max(np.abs(np.subtract(r["finite"], r["mc"])).max() for r in odd)
            print(f"fscov synthetic k^-{expo} {kind}: max |limit - MC| {dl:.4f}, |finite - MC| {df:.4f}; "
                  f"tanh and sign {dlo:.4f} -> {dfo:.4f}")
    out["synthetic"] = syn

    def shares(rows: list, key: str, ref: str, label: str) -> None:
        d = np.abs(np.array([r[key] for r in rows]) - np.array([r[ref] for r in rows]))
        per = ", ".join(f"{f} {np.mean(d[[r['f'] == f for r in rows]] <= 0.02):.0%}" for f in FS)
        print(f"  {label}: within 0.02 {np.mean(d <= 0.02):.0%} ({per}); median {np.median(d):.4f}, max {d.max():.4f}")

    for name, (pairs, seed, t) in _mnist_grids(trials).items():
        rows = []
        for pair, n, kind, f, X, y, s in _mnist_points(pairs):
            sh = rt.finite_shift("mnist", pair, n, f, kind, G)
            two = rt.class_theory("mnist", pair, n, f, kind, G)
            row = {"pair": pair, "n": n, "kind": kind, "f": f, "two": two, "shift": sh}
            if name == "chapter":
                c = rt.compare("mnist", pair, n, f, kind, G, t, seed)
                assert c.theory is not None
                row.update(real=c.real, surrogate=c.surrogate, one=c.theory)
            else:
                real = cache.cached(simulate.subset_errors, setting=s, X=X, y=y, gammas=G, n=n,
                                    trials=t, seed=seed, relative=True)
                assert real.attention is not None
                row.update(real=real.attention.mean)
            rows.append(row)
        flat = [{k: (v[i] if isinstance(v, np.ndarray) else v) for k, v in r.items()} | {"g": float(G[i])}
                for r in rows for i in range(len(G))]
        for r in flat:
            r["two_finite"] = r["two"] + r["shift"]
            if "one" in r:
                r["one_finite"] = r["one"] + r["shift"]
        print(f"fscov MNIST {name} grid ({len(flat)} comparisons; pairs {[q for q, _ in pairs]}, real subsets "
              f"{t} from seed {seed}):")
        if name == "chapter":
            shares(flat, "one", "surrogate", "common-C limit vs its Gaussian surrogate     ")
            shares(flat, "one_finite", "surrogate", "common-C finite-size vs its Gaussian surrogate")
        shares(flat, "two", "real", "two-covariance limit vs real            ")
        shares(flat, "two_finite", "real", "two-covariance finite-size vs real      ")
        out[name] = [{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()} for r in flat]

    cause = []
    n, pair = 392, (3, 8)
    for pr in ((3, 8), (4, 9), (0, 1)):
        d = rt.diagnostics("mnist", pr, n, "identity")
        print(f"fscov logit-scale spread (M = I) {pr}: {d['scale_spread']:.3f}, effective rank {d['effective_rank']:.1f}")
    for f in ("tanh", "sign", "cos"):
        s = rt.setting("mnist", pair, n, f, "identity")
        R, mu = s.noise_factor, s.mu
        B = R @ s.M @ R
        g_att, g_r = simulate.raw_gammas(s, G, n, relative=True)

        def trial(r: np.random.Generator, s: al.CovarianceSetting = s, B: np.ndarray = B, R: np.ndarray = R,
                  g_att: np.ndarray = g_att, g_r: np.ndarray = g_r) -> dict:
            y = data.labels(n, r)
            Z0 = r.standard_normal((mu.size, n))
            out = {}
            for key, Zs in (("plain", Z0), ("rescaled", Z0 / (np.sqrt(np.sum((B.T @ Z0) ** 2, axis=0) / mu.size)
                                                              / s.logit_scale))):
                Z = R @ Zs
                smp = data.Sample(X=Z + np.outer(mu, y), y=y, mu=mu, w_K=None, w_Q=None, Z=Z)
                out[key] = simulate.sample_errors(s, smp, g_att, ridge_gammas=g_r)[0]
            out["diff"] = out["rescaled"] - out["plain"]
            return out

        res = Trials.run(trial, trials=8, seed=21, gammas=G, n=n, p=mu.size)
        lim = al.theory.attention_error(s, G, relative=True)
        cause.append({"f": f, "limit": lim.tolist(), "plain": res.stats("plain").mean.tolist(),
                      "rescaled": res.stats("rescaled").mean.tolist(), "diff": res.stats("diff").mean.tolist(),
                      "diff_se": res.stats("diff").sem.tolist()})
        print(f"fscov MNIST {pair} n = {n} M = I {f}: limit {np.round(lim, 3)}, surrogate {np.round(res.stats('plain').mean, 3)}, "
              f"logit scales made equal {np.round(res.stats('rescaled').mean, 3)} (paired difference "
              f"{np.round(res.stats('diff').mean, 3)} ± {res.stats('diff').sem.max():.3f}, 8 draws)", flush=True)
    out["cause"] = cause
    return out


def ceiling(trials: int) -> dict:
    """How close any Gaussian-mixture theory can come to the real error: on the MNIST grid of
    ``real`` (324 comparisons, real subsets and surrogate draws from seed 0) and the held-out
    pairs 2-7 and 5-6 (216, seed 1, 8 of each), the Gaussian surrogate with each class's own
    mean and covariance (``rt.class_surrogate``: the tokens' first two moments kept class by
    class, which is all a two-class Gaussian theory sees) against the real error: the share
    within 0.02, the share whose miss exceeds 0.02 by two standard errors of the difference
    (decided), and, of the points the two-covariance theory with its finite-size shift misses by
    more than 0.02, the share the class surrogate misses too."""
    out: dict = {}
    for name, (pairs, seed, t) in _mnist_grids(trials).items():
        rows = []
        for pair, n, kind, f, X, y, s in _mnist_points(pairs):
            real = cache.cached(simulate.subset_errors, setting=s, X=X, y=y, gammas=G, n=n,
                                trials=t, seed=seed, relative=True).attention
            cls = rt.class_surrogate("mnist", pair, n, f, kind, G, t, seed)
            theory = rt.class_theory("mnist", pair, n, f, kind, G) + rt.finite_shift("mnist", pair, n, f, kind, G)
            assert real is not None
            for k in range(len(G)):
                rows.append({"pair": pair, "n": n, "kind": kind, "f": f, "g": float(G[k]),
                             "real": float(real.mean[k]), "real_se": float(real.sem[k]),
                             "class_surrogate": float(cls.mean[k]), "class_se": float(cls.sem[k]),
                             "theory": float(theory[k])})
        d = np.array([r["class_surrogate"] - r["real"] for r in rows])
        se = np.hypot([r["real_se"] for r in rows], [r["class_se"] for r in rows])
        miss = np.abs(np.array([r["theory"] - r["real"] for r in rows])) > 0.02
        per = ", ".join(f"{f} {np.mean(np.abs(d[[r['f'] == f for r in rows]]) <= 0.02):.0%}" for f in FS)
        print(f"ceiling MNIST {name} ({len(rows)} comparisons, {t} subsets and draws from seed {seed}): "
              f"|class surrogate - real| within 0.02 {np.mean(np.abs(d) <= 0.02):.0%} ({per}); beyond 0.02 by two "
              f"s.e. {np.mean(np.abs(d) - 2 * se > 0.02):.0%}; median {np.median(np.abs(d)):.4f}, max "
              f"{np.abs(d).max():.4f}, s.e. of the difference median {np.median(se):.4f}; two-covariance "
              f"finite-size theory within 0.02 {np.mean(~miss):.0%}, of its {miss.sum()} misses the class "
              f"surrogate misses {np.mean(np.abs(d[miss]) > 0.02):.0%}")
        for kind in rt.MATRICES:
            k = np.array([r["kind"] == kind for r in rows])
            print(f"    {kind:8s}: class surrogate within 0.02 {np.mean(np.abs(d[k]) <= 0.02):.0%}, "
                  f"theory {np.mean(~miss[k]):.0%}")
        for f in FS:
            k = np.array([r["f"] == f for r in rows])
            print(f"    {f:4s}: mean class surrogate - real {d[k].mean():+.4f}, surrogate below real at "
                  f"{np.mean(d[k] < 0):.0%} of the points")
        for key, values in (("g", G.tolist()), ("n", sorted({r["n"] for r in rows}))):
            share = ", ".join(f"{v:g} {np.mean(np.abs(d[[r[key] == v for r in rows]]) <= 0.02):.0%}" for v in values)
            print(f"    class surrogate within 0.02 by {key}: {share}")
        out[name] = rows
    return out


ELLIPTIC_TOP = (4, 16, 64)          # the k of the surrogates with the real top-k coordinates
ELLIPTIC_MARGINAL = 16              # the k of the surrogate with independent real top-k marginals
ELLIPTIC_CLUSTERS = (4, 16)         # components per class of the Gaussian-mixture surrogates


def _spreads(pair: tuple[int, int]) -> dict:
    """The tokens' norms and logit variances of a pair, real against the two surrogates (see the
    module's ``elliptic``): ``{(class, model): {statistic: value}}``."""
    X, y = rt.tokens("mnist", *pair)
    rng = np.random.default_rng(11)
    mats = {kind: np.asarray(rt.setting("mnist", pair, 392, "tanh", kind).M) for kind in rt.MATRICES}
    C = np.asarray(rt.setting("mnist", pair, 392, "tanh", "identity").C)
    out: dict = {}
    for sign in (1, -1):
        part = X[:, y == sign]
        yy = np.full(4000, sign)
        Z = rng.standard_normal((X.shape[0], yy.size))
        noise = {"real": part - part.mean(axis=1, keepdims=True),
                 "gaussian": rt._class_noise("mnist", pair, yy, Z),
                 "norms": rt.scale_noise("mnist", pair, yy, Z, rng)}
        for model, E in noise.items():
            r2 = np.sum(E ** 2, axis=0)
            row = {"norm": float(np.std(np.sqrt(r2)) / np.mean(np.sqrt(r2)))}
            for kind, M in mats.items():
                B = M @ C @ M.T
                q = np.sum(E * (B @ E), axis=0)
                row[f"logit {kind}"] = float(np.std(q) / np.mean(q))
                top = np.linalg.eigh(B)[1][:, -4:][:, ::-1]
                u = top.T @ E
                row[f"kurtosis {kind}"] = (np.mean(u ** 4, axis=1) / np.mean(u ** 2, axis=1) ** 2).tolist()
            out[(sign, model)] = row
    return out


def elliptic(trials: int) -> dict:
    """The real tokens' own norms (see the module's ``elliptic``): their spread against the
    surrogates', and the surrogates of :func:`_elliptic_laws` (``rt.surrogate``: the real norms,
    the real top-k coordinates jointly or independently, a class's k-means clusters) against the
    real error on the grids of ``ceiling``, each paired with the class surrogate on the same draws."""
    out: dict = {"spreads": {}}
    for pair in ((3, 8), (4, 9), (0, 1), (2, 7), (5, 6)):
        sp = _spreads(pair)
        out["spreads"][str(pair)] = {f"{'+-'[sign < 0]} {model}": v for (sign, model), v in sp.items()}
        for (sign, model), v in sp.items():
            print(f"elliptic spreads MNIST {pair} class {'+-'[sign < 0]} {model:8s}: norm cv {v['norm']:.3f}; "
                  "logit-variance cv " + ", ".join(f"{k} {v['logit ' + k]:.3f}" for k in rt.MATRICES)
                  + "; kurtosis along the top 4 (identity) " + " ".join(f"{x:.2f}" for x in v["kurtosis identity"])
                  + ", (aligned) " + " ".join(f"{x:.2f}" for x in v["kurtosis aligned"]), flush=True)
    laws = _elliptic_laws()
    for name, (pairs, seed, t) in _mnist_grids(trials).items():
        rows = []
        start = time.perf_counter()
        for pair, n, kind, f, X, y, s in _mnist_points(pairs):
            real = cache.cached(simulate.subset_errors, setting=s, X=X, y=y, gammas=G, n=n,
                                trials=t, seed=seed, relative=True).attention
            assert real is not None
            sur = {m: rt.surrogate("mnist", pair, n, f, kind, G, t, seed, law=law, size=size)
                   for m, (law, size, _) in laws.items()}
            for j in range(len(G)):
                rows.append({"pair": pair, "n": n, "kind": kind, "f": f, "g": float(G[j]),
                             "real": float(real.mean[j]), "real_se": float(real.sem[j]),
                             "class": float(sur["norms"]["class"].mean[j]),
                             "class_se": float(sur["norms"]["class"].sem[j]),
                             **{m: float(st["surrogate"].mean[j]) for m, st in sur.items()},
                             **{m + "_se": float(st["surrogate"].sem[j]) for m, st in sur.items()},
                             **{m + "_diff": float(st["difference"].mean[j]) for m, st in sur.items()},
                             **{m + "_diff_se": float(st["difference"].sem[j]) for m, st in sur.items()}})
        print(f"  elliptic {name}: Monte Carlo {time.perf_counter() - start:.0f} s", flush=True)
        _elliptic_summary(name, rows, t, seed, laws)
        out[name] = rows
    return out


def _elliptic_laws() -> dict[str, tuple[str, int, str]]:
    """The surrogates of ``elliptic``: name -> (``law`` and ``size`` of ``rt.surrogate``, label)."""
    return ({"norms": ("norms", 1, "real norms")}
            | {f"top {k}": ("top", k, f"real coordinates along the top {k}") for k in ELLIPTIC_TOP}
            | {f"marginal {ELLIPTIC_MARGINAL}": ("marginal", ELLIPTIC_MARGINAL,
                                                 f"real marginals along the top {ELLIPTIC_MARGINAL}, independent")}
            | {f"clusters {j}": ("cluster", j, f"Gaussian mixture of {j} k-means clusters per class")
               for j in ELLIPTIC_CLUSTERS})


def _elliptic_summary(name: str, rows: list[dict], t: int, seed: int,
                      laws: dict[str, tuple[str, int, str]]) -> None:
    """Print the shares and gaps of ``elliptic`` for one grid: each surrogate of ``laws``
    (:func:`_elliptic_laws`) against the real error, beside the class surrogate, and paired with it."""
    d = {m: np.array([r[m] - r["real"] for r in rows]) for m in ("class", *laws)}
    se = {m: np.hypot([r["real_se"] for r in rows], [r[m + "_se"] for r in rows]) for m in d}

    def share(m: str, key: str | None = None, value: object = None) -> str:
        k = np.ones(len(rows), bool) if key is None else np.array([r[key] == value for r in rows])
        return f"{np.mean(np.abs(d[m][k]) <= 0.02):.0%}"

    print(f"elliptic MNIST {name} ({len(rows)} comparisons, {t} subsets and draws from seed {seed}): class "
          f"surrogate within 0.02 of real {share('class')}, beyond 0.02 by two s.e. "
          f"{np.mean(np.abs(d['class']) - 2 * se['class'] > 0.02):.0%}, median |difference| "
          f"{np.median(np.abs(d['class'])):.4f}")
    for m in d:
        if m == "class":
            continue
        print(f"  surrogate with the {laws[m][2]}: within 0.02 of real {share(m)}; beyond 0.02 by two s.e. "
              f"{np.mean(np.abs(d[m]) - 2 * se[m] > 0.02):.0%}; median |difference| {np.median(np.abs(d[m])):.4f}")
        for key, values in (("f", FS), ("kind", rt.MATRICES), ("g", G.tolist()), ("n", sorted({r["n"] for r in rows}))):
            print(f"    within 0.02 by {key}: " + ", ".join(f"{v} {share(m, key, v)} (class {share('class', key, v)})"
                                                        for v in values))
        gap = -d["class"]                                   # real - class
        diff = np.array([r[m + "_diff"] for r in rows])
        dse = np.array([r[m + "_diff_se"] for r in rows])
        for f in FS:
            parts = []
            for g in G:
                k = np.array([r["f"] == f and r["g"] == g for r in rows])
                parts.append(f"g {g:g}: real - class {gap[k].mean():+.4f}, {m} - class {diff[k].mean():+.4f} ± "
                             f"{np.sqrt(np.sum(dse[k] ** 2)) / k.sum():.4f}, mean |miss| {np.abs(d['class'][k]).mean():.4f}"
                             f" -> {np.abs(d[m][k]).mean():.4f}")
            k = np.array([r["f"] == f for r in rows])
            print(f"    {f:4s} mean {m} - real {d[m][k].mean():+.4f} (class - real {d['class'][k].mean():+.4f}); "
                  + "; ".join(parts))


LATENT_K = (1, 4, 16, 64)
LATENT_MEAN = 16                   # the k whose slope and residual variance are also averaged
LATENT_RANKS = (2, 8, 32)          # ranks of that k's non-linear mean kept with the averaged equivalent


def _reading(f: str, rho: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``f`` read at the logits ``t`` (any shape) with a Gaussian rest of variance ``rho^2``:
    ``(E f(t + rho xi), E[xi f(t + rho xi)] / rho, Var f(t + rho xi) - (E[xi f(t + rho xi)])^2)``,
    the mean, slope and residual variance of the conditional law; from a table over the range of
    ``t`` (``attn_lib.theory._covariance._moments``, breaks of ``f`` integrated exactly), linear in
    between: 401 points, and 161 within ``8 rho`` of each break of ``f`` (where they vary on the
    scale ``rho``)."""
    from attn_lib.model.nonlinearity import check_nonlinearity
    from attn_lib.theory._covariance import _moments

    lo, hi = float(t.min()), float(t.max()) + 1e-12
    near = [b + rho * np.linspace(-8.0, 8.0, 161) for b in check_nonlinearity(f).breaks]
    grid = np.unique(np.clip(np.concatenate([np.linspace(lo, hi, 401), *near]), lo, hi))
    hs = [_moments(f, rho, float(x)) for x in grid]
    a0, a1, nu = (np.array([getattr(h, k) for h in hs]) for k in ("a0", "a1", "nu"))
    return (np.interp(t, grid, a0), np.interp(t, grid, a1) / rho,
            np.clip(np.interp(t, grid, nu - a1 ** 2), 0.0, None))


def _latent_trials(s: al.CovarianceSetting, n: int, gam: np.ndarray, trials: int, seed: int) -> dict:
    """Common draws of Gaussian tokens ``x_i = y_i mu + R z_i`` (``R = C^{1/2}``) of ``s``: the
    errors at the raw ``gam`` of the real kernel ``(f(T) - a0) / sqrt(p)`` (``a0 = E f(sigma xi)``)
    and of three equivalents with the same GOE ``W`` (zero diagonal each):

    * ``ge``: ``(a1 T + sqrt(b2) W) / sqrt(p)``, ``f``'s data at the common scale ``sigma``;
    * ``scales``: ``(m(sigma_ij) - a0 + a1(sigma_ij) / sigma_ij T + sqrt(b2(sigma_ij)) W) / sqrt(p)``,
      ``sigma_ij^2 = s_i s'_j / sigma^2`` with the tokens' own logit variances
      ``s_i = x_i^T M C M^T x_i / p``, ``s'_j = x_j^T M^T C M x_j / p``;
    * ``k = K``: ``A = R M R = U S V^T``, the rest of the noise logit beyond the top ``K``
      directions ``T_rest = sum_{k > K} S_k (u_k^T z_i) (v_k^T z_j) / sqrt(p)``, taken Gaussian of
      variance ``rho_K^2 = sum_{k > K} S_k^2 / p``, and the latent logit ``T_top = T - T_rest``
      (the signal, cross terms and top directions, exact):
      ``(F0(T_top) - a0 + F1(T_top) T_rest + sqrt(F2(T_top)) W) / sqrt(p)`` (:func:`_reading`).
      At ``K = LATENT_MEAN`` also ``k = K, mean``: ``F1`` and ``F2`` replaced by their averages
      over the pairs (the latent law in the kernel's mean only), and ``ge + rank R``: that averaged
      equivalent ``F1bar T + sqrt(F2bar) W`` plus the mean's non-linear part
      ``N = F0(T_top) - a0 - F1bar T_top`` (symmetrised) at its ``R`` largest eigenvalues in modulus.

    Returns ``{name: Stats}`` of the errors and of ``real - name`` (``"real-" + name``)."""
    from attn_lib.model import data, hermite
    from attn_lib.model.nonlinearity import check_nonlinearity
    from attn_lib.simulation.resolvent import interpolation_errors
    from attn_lib.simulation.trials import Trials

    p, f = s.p(), str(s.f)
    M, R, sigma = np.asarray(s.M), s.noise_factor, s.logit_scale
    fn = check_nonlinearity(f)
    h = hermite.coefficients(f, sigma)
    U, S, Vt = np.linalg.svd(R @ M @ R)
    rest = {k: float(np.sqrt(np.sum(S[k:] ** 2) / p)) for k in LATENT_K}
    sg = np.geomspace(1e-3, 30.0, 240) * sigma
    hs = [hermite.coefficients(f, x) for x in sg]
    A0, A1, B2 = (np.array([getattr(q, k) for q in hs]) for k in ("a0", "a1", "b2"))

    def kern(F: np.ndarray) -> np.ndarray:
        F = F / np.sqrt(p)
        np.fill_diagonal(F, 0.0)
        return F

    def trial(r: np.random.Generator) -> dict:
        y = data.labels(n, r)
        Z0 = r.standard_normal((p, n))
        X = np.outer(s.mu, y) + R @ Z0
        T = X.T @ M @ X / np.sqrt(p)
        W = data.goe(n, r)
        mats = {"real": kern(np.asarray(fn(T)) - h.a0), "ge": kern(h.a1 * T + np.sqrt(h.b2) * W)}
        srow = np.sum((R @ (M.T @ X)) ** 2, axis=0) / p
        scol = np.sum((R @ (M @ X)) ** 2, axis=0) / p
        lsij = 0.5 * (np.log(srow)[:, None] + np.log(scol)[None, :]) - np.log(sigma)
        a0, a1, b2 = (np.interp(lsij, np.log(sg), q) for q in (A0, A1, B2))
        mats["scales"] = kern(a0 - h.a0 + a1 / np.exp(lsij) * T + np.sqrt(b2) * W)
        a, b = U.T @ Z0, Vt @ Z0
        for k in LATENT_K:
            Tr = (a[k:].T * S[k:]) @ b[k:] / np.sqrt(p)
            F0, F1, F2 = _reading(f, rest[k], T - Tr)
            mats[f"k = {k}"] = kern(F0 - h.a0 + F1 * Tr + np.sqrt(F2) * W)
            if k == LATENT_MEAN:
                mats[f"k = {k}, mean"] = kern(F0 - h.a0 + F1.mean() * Tr + np.sqrt(F2.mean()) * W)
                # the mean's part beyond the average slope, N = F0(T_top) - a0 - F1bar T_top, at rank R
                lin = F1.mean() * T + np.sqrt(F2.mean()) * W
                N = F0 - h.a0 - F1.mean() * (T - Tr)
                ev, EV = np.linalg.eigh((N + N.T) / 2.0)
                order = np.argsort(-np.abs(ev))
                for rank in LATENT_RANKS:
                    E = EV[:, order[:rank]]
                    mats[f"ge + rank {rank}"] = kern(lin + (E * ev[order[:rank]]) @ E.T)
        names = list(mats)
        errs = dict(zip(names, interpolation_errors([X @ mats[q] for q in names], y, [gam] * len(names))))
        return errs | {"real-" + q: errs["real"] - errs[q] for q in names[1:]}

    res = Trials.run(trial, trials=trials, seed=seed, gammas=gam, n=n, p=p)
    return {q: res.stats(q) for q in res.values}


def latent(trials: int) -> dict:
    """The conditional law that carries a heavy spectrum's miss (:func:`_latent_trials`): the
    power-law spectrum ``k^{-0.7}`` (c = 0.25, n = 2048, M = I; relu, tanh, sign) and the Gaussian
    surrogate of MNIST 3 vs 8 (n = 392, identity and aligned matrix, the four f; ``g = gamma / tau``
    with the predicted ``tau``): real kernel minus each equivalent (paired), and the theory."""
    out: dict = {}
    cases = [("power", _synthetic_setting(0.25, 2048, "power", "identity", f), 2048, G) for f in FS3]
    for kind in ("identity", "aligned"):
        for f in FS:
            s = rt.setting("mnist", (3, 8), 392, f, kind)
            cases.append((f"mnist (3, 8) {kind}", s, 392, simulate.raw_gammas(s, G, 392, relative=True)[0]))
    for name, s, n, gam in cases:
        st = _latent_trials(s, n, gam, trials, seed=5)
        th = al.theory.attention_error(s, gam)
        S = np.linalg.svd(s.noise_factor @ np.asarray(s.M) @ s.noise_factor, compute_uv=False)
        share = S[:4] ** 2 / np.sum(S ** 2)
        row = {"case": name, "f": str(s.f), "n": n, "spread": scale_spread(s), "top_share": share.tolist(),
               "theory": th.tolist(), **{q: v.mean.tolist() for q, v in st.items()},
               **{q + " se": v.sem.tolist() for q, v in st.items()}}
        out[f"{name} {s.f}"] = row
        print(f"latent {name} {s.f} (n = {n}, {trials} draws; logit-scale spread {row['spread']:.2f}, share of "
              f"tr(B) in the top four directions {np.round(share, 3)}): real kernel {np.round(st['real'].mean, 4)}, "
              f"theory {np.round(th, 4)}", flush=True)
        for q in [q for q in st if q.startswith("real-")]:
            print(f"    {q:12s} {np.round(st[q].mean, 4)} ± {np.round(st[q].sem, 4)}   ({q[5:]} - theory "
                  f"{np.round(st[q[5:]].mean - th, 4)})", flush=True)
    return out


TOPK = (0, 1, 2, 4, 8, 16)      # top directions of B kept by the reduced model of part topk
TOPK_TYPES = 2048                # its quasi-Monte Carlo types
SYNTHETIC_TOPK_C = (0.25, 1.0)   # the c of part topk


def topk(cs: tuple[float, ...] = (0.25, 1.0), rounds: int = 6) -> dict:
    """The covariance limit plus the finite-size shift of the reduced model that keeps the top
    ``k`` directions of ``B = C^{1/2} M C^{1/2}`` exactly
    (``covariance_top.top_covariance_shift``, ``TOPK_TYPES`` Sobol types) on the
    synthetic grid (:func:`synthetic`'s settings and Monte Carlo, :func:`_synthetic_mc`), for
    ``k`` in ``TOPK``; with the limit and the library's finite-size theory (the isotropic
    rank-3 shift). First the rule's quadrature error: ``T`` against ``2 T`` types and another
    scrambling seed, on the power law, c = 0.25, M = I, k = 8 and 16."""
    from covariance_top import top_covariance_model, top_covariance_shift   # a sibling, as a script imports it

    out: dict = {"quadrature": {}, "rows": []}
    for f in FS3:
        s = _synthetic_setting(0.25, 2048, "power", "identity", f)
        for k in (8, 16):
            t = time.perf_counter()
            base = top_covariance_shift(s, G, 2048, k, TOPK_TYPES, 0)
            dt = time.perf_counter() - t
            other = {"2T": top_covariance_shift(s, G, 2048, k, 2 * TOPK_TYPES, 0),
                     "seed 1": top_covariance_shift(s, G, 2048, k, TOPK_TYPES, 1)}
            out["quadrature"][f"{f} {k}"] = {q: (v - base).tolist() for q, v in other.items()}
            print(f"topk quadrature (power, c = 0.25, n = 2048, M = I, {f}, k = {k}, r = "
                  f"{len(top_covariance_model(s, 2048, k).mu_r)}): shift {np.round(base, 4)} ({dt:.1f} s, "
                  f"T = {TOPK_TYPES}); T = {2 * TOPK_TYPES} minus it {np.round(other['2T'] - base, 4)}, "
                  f"seed 1 minus it {np.round(other['seed 1'] - base, 4)}", flush=True)
    for c in cs:
        n = SYNTHETIC_N[c]
        keys = [(cov, kind, f) for cov in COVS for kind in KINDS for f in FS3]
        vals, sem = _synthetic_mc(c, n, keys, rounds)
        for key in keys:
            s = _synthetic_setting(c, n, *key)
            mc = vals[key].mean(axis=0)
            lim = cache.cached(al.theory.attention_error, setting=s, gammas=G)
            fs = al.theory.attention_error(s, G, n=n)
            row = {"cov": key[0], "c": c, "n": n, "kind": key[1], "f": key[2], "mc": mc.tolist(),
                   "se": sem[key].tolist(), "draws": len(vals[key]), "limit": (lim - mc).tolist(),
                   "finite": (fs - mc).tolist(), "top": {}, "seconds": {}}
            for k in TOPK:
                t = time.perf_counter()
                row["top"][k] = (lim + top_covariance_shift(s, G, n, k, TOPK_TYPES) - mc).tolist()
                row["seconds"][k] = time.perf_counter() - t
            out["rows"].append(row)
            tops = ", ".join(f"k = {k} {np.round(v, 3)}" for k, v in row["top"].items())
            print(f"  {key[0]} c = {c} n = {n} {key[1]} {key[2]} ({len(vals[key])} draws, s.e. <= "
                  f"{sem[key].max():.4f}; theory - MC at g = {G.tolist()}): limit {np.round(lim - mc, 3)}, "
                  f"finite (rank 3) {np.round(fs - mc, 3)}, top {tops} "
                  f"({max(row['seconds'].values()):.1f} s per call at most)", flush=True)
    for c in cs:
        for cov in COVS:
            sub = [r for r in out["rows"] if r["c"] == c and r["cov"] == cov]
            se = max(max(r["se"]) for r in sub)
            line = [f"limit {max(np.abs(r['limit']).max() for r in sub):.4f}",
                    f"finite {max(np.abs(r['finite']).max() for r in sub):.4f}"]
            line += [f"k = {k} {max(np.abs(r['top'][k]).max() for r in sub):.4f}" for k in TOPK]
            print(f"topk c = {c} {cov}: max |theory - MC| over 9 settings x 3 g (s.e. <= {se:.4f}): "
                  + ", ".join(line))
            for f in FS3:
                sf = [r for r in sub if r["f"] == f]
                print(f"    {f:4s}: " + ", ".join(f"k = {k} {max(np.abs(r['top'][k]).max() for r in sf):.4f}"
                                           for k in TOPK)
                      + f"; limit {max(np.abs(r['limit']).max() for r in sf):.4f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", nargs="+", default=["identity", "speed", "real", "synthetic", "cause", "classes",
                                                  "twocov", "fscov", "ceiling", "latent", "topk", "elliptic"],
                    choices=["identity", "speed", "real", "synthetic", "cause", "classes", "twocov", "fscov",
                             "ceiling", "latent", "topk", "elliptic"])
    ap.add_argument("--trials", type=int, default=16, help="subsets and surrogate draws per real setting")
    ap.add_argument("--n", type=int, help="synthetic: every c at this n (default n = 2048, 1024, 512 "
                    "for c = 0.25, 1, 4)")
    ap.add_argument("--c", type=float, nargs="+", default=[0.25, 1.0, 4.0], choices=[0.25, 1.0, 4.0],
                    help="synthetic, topk: the c of the grid (topk: 0.25 and 1 only)")
    ap.add_argument("--rounds", type=int, default=6, choices=range(1, 7),
                    help="synthetic: at most this many rounds of 8 draws")
    ap.add_argument("--out", help="write every number as JSON")
    args = ap.parse_args()
    warnings.simplefilter("ignore", al.DomainWarning)
    out: dict = {}
    with threadpool_limits(1):
        for part in args.part:
            t = time.perf_counter()
            out[part] = (identity() if part == "identity" else speed() if part == "speed" else
                         real(args.trials) if part == "real" else
                         synthetic(args.n, tuple(args.c), args.rounds) if part == "synthetic"
                         else cause(args.trials) if part == "cause" else classes(args.trials)
                         if part == "classes" else twocov(args.trials) if part == "twocov"
                         else fscov(args.trials) if part == "fscov" else ceiling(args.trials)
                         if part == "ceiling" else latent(args.trials) if part == "latent"
                         else topk(tuple(c for c in args.c if c in SYNTHETIC_TOPK_C), args.rounds)
                         if part == "topk" else elliptic(args.trials))
            print(f"[{part}: {time.perf_counter() - t:.0f} s]", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o), indent=1)


if __name__ == "__main__":
    main()
