r"""The random-row-variance equivalent of the attention bulk (softmax at larger ``beta``).

Model (``book/derivation_softmax.md``, *Row factors*). On random inputs (``mu = 0``, ``M = I``)
the entry-wise kernel of ``f`` is ``K = a1 (Z^T Z / p - I) + B`` with ``B`` the kernel's
non-linear part, ``B_ij = R(T_ij) / sqrt(p)``, ``R(t) = f(t) - a1 t`` (centred, ``E R^2 = b2``).
The Gaussian equivalent replaces ``B`` by a Wigner matrix of variance ``b2 / p``. At finite
``n`` a heavy-tailed ``R`` (``f_beta``: kurtosis ``~ e^{4 beta^2}``) gives each row ``i`` its
own variance factor

    r_i = sum_{j != i} R(T_ij)^2 / ((n - 1) b2),    E r_i = 1,

whose law is skewed (its median is below one when a few entries carry the row). The cavity
equation of a matrix with independent entries keeps ``r_i`` and averages the other rows'
resolvent entries without weights (the entry ``B_ij`` is independent of row ``j``'s cavity
resolvent), which is the variance-profile equivalent of Hachem, Loubaton and Najim with one
unknown per row class.

Linearisation. With ``C = Z^T Z / n``, ``Q = (K C K + gamma)^{-1}`` is the ``(a, a)`` block of
the inverse of the linear pencil in the unknowns ``(a, c, u)`` (length ``n``) and
``(w, b, v)`` (length ``p``)::

    gamma a + a1 Z^T v / sqrt(p) - a1 u + B u = e,     w = Z a / sqrt(p),
    c = a1 Z^T w / sqrt(p) - a1 a + B a,                b = Z c / sqrt(n),
    u = Z^T b / sqrt(n),                                v = Z u / sqrt(p).

Its matrix Dyson equation ``G = (L_0 - E[X G X])^{-1}`` (``X`` the Gaussian part) is
block-diagonal in the indices: a ``3 x 3`` matrix ``G_p`` for every ``p``-index and
``G_n(r)`` for an ``n``-index of row factor ``r``,

    G_p = (L_p - Sigma_p)^{-1},               Sigma_p = sum s s' (n/p) E_r[G_n(r)],
    G_n(r) = (L_n - Sigma_Z - r Sigma_B)^{-1},  Sigma_Z = sum s s' G_p,
    Sigma_B = b2 (n / p) sum E_r[G_n(r)],

the sums over the pairs of pencil positions holding ``Z`` and ``Z^T`` (or ``B``), and
``tr Q / n = E_r[G_n(r)_{aa}]``. With ``r = 1`` it is the bulk fixed point of
:mod:`attn_lib.theory._bulk` (tested to ``1e-9``). The error for ``mu = 0`` is
``-gamma^2 d/dgamma tr Q / n`` (central difference of the converged solution).

The law of ``r`` is discretised by :data:`CLASSES` classes of equal probability, each at its
conditional mean, from :data:`ROWS` rows of ``n - 1`` entries drawn with a fixed
:class:`numpy.random.SeedSequence` (``T_ij ~ N(0, 1)`` independent: the law of the marginal,
which carries the miss, ``book/derivation_softmax.md``); the rule is therefore deterministic,
and its own sampling error is measured there.
"""

from __future__ import annotations

import functools
import numpy as np
from scipy.optimize import brentq, root

from ._bulk import BulkSolution, solve_bulk
from ._spiked import label_quadratic_form

from ._errors import ConvergenceError, not_converged

__all__ = ["row_law", "rows_bulk", "rows_bulk_error", "matched_b2", "spiked_error", "ROWS", "CLASSES", "SEED"]

#: Rows sampled for the law of the row factor, and classes of the quadrature.
ROWS = 16384
CLASSES = 32
#: Entropy of the SeedSequence of the sampled rows (any fixed value; the rule is deterministic).
SEED = 20261203
_CHUNK = 2 ** 22
_TOL = 1e-12
_RATIO = 1.5
_HALVINGS = 12

# pencil positions (row block, column block, coefficient) in units p = 1, n = 1 / c:
# n-blocks a, c, u = 0, 1, 2; p-blocks w, b, v = 0, 1, 2


def _positions(c: float, a1: float) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, float]],
                                            list[tuple[int, int]]]:
    ip, in_ = 1.0, float(np.sqrt(c))
    z = [(0, 0, ip), (1, 1, in_), (2, 2, ip)]              # Z: (p-row, n-column, s)
    zt = [(0, 2, a1 * ip), (1, 0, a1 * ip), (2, 1, in_)]   # Z^T: (n-row, p-column, s)
    bl = [(0, 2), (1, 0)]                                   # B: (n-row, n-column)
    return z, zt, bl


@functools.lru_cache(maxsize=64)
def _law(key: tuple[float, float, float, float], n: int) -> tuple[np.ndarray, np.ndarray]:
    beta, shift, a1, b2 = key
    rng = np.random.default_rng(np.random.SeedSequence([SEED, n]))
    per = max(1, _CHUNK // (n - 1))
    out = []
    for start in range(0, ROWS, per):
        t = rng.standard_normal((min(per, ROWS - start), n - 1))
        R = np.exp(beta * t - shift)
        R -= a1 * t
        R -= float(np.exp(0.5 * beta * beta - shift))  # the mean of e^{beta t - shift}
        out.append(np.einsum("ij,ij->i", R, R) / ((n - 1) * b2))
    r = np.sort(np.concatenate(out))
    bins = np.array_split(r, CLASSES)
    return np.array([b.mean() for b in bins]), np.array([b.size for b in bins], dtype=float) / r.size


def row_law(beta: float, shift: float, a1: float, b2: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Quadrature ``(nodes, weights)`` of the row factor ``r`` of ``f(t) = e^{beta t - shift}`` at ``n``.

    ``R(t) = f(t) - E f - a1 t`` on ``t ~ N(0, 1)``, ``r = sum_{j < n} R(t_j)^2 / ((n - 1) b2)``;
    :data:`CLASSES` equal-probability classes at their conditional means (module docstring).

    Returns
    -------
    nodes, weights : ndarray of shape (CLASSES,)
    """
    return _law((float(beta), float(shift), float(a1), float(b2)), int(n))


def _solve_point(c: float, a1: float, b2: float, gamma: float, r: np.ndarray, w: np.ndarray,
                 x0: np.ndarray | None) -> tuple[float, np.ndarray]:
    """``tr Q / n`` and the unknowns ``(E_r G_n, G_p)`` (flattened) at one ``gamma``."""
    z, zt, bl = _positions(c, a1)
    ratio = 1.0 / c  # n / p
    Ln = np.zeros((3, 3))
    Ln[0, 0], Ln[0, 2], Ln[1, 0], Ln[1, 1], Ln[2, 2] = gamma, -a1, -a1, -1.0, -1.0
    Lp = -np.eye(3)

    def parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        gn, gp = x[:9].reshape(3, 3), x[9:].reshape(3, 3)
        sp = np.zeros((3, 3))
        for al, be, s in z:
            for ga, de, s2 in zt:
                sp[al, de] += s * s2 * ratio * gn[be, ga]
        sz = np.zeros((3, 3))
        for al, be, s in zt:
            for ga, de, s2 in z:
                sz[al, de] += s * s2 * gp[be, ga]
        sb = np.zeros((3, 3))
        for al, be in bl:
            for ga, de in bl:
                sb[al, de] += b2 * ratio * gn[be, ga]
        Gn = np.linalg.inv(Ln[None] - sz[None] - r[:, None, None] * sb[None])
        Gp = np.linalg.inv(Lp - sp)
        return np.einsum("k,kij->ij", w, Gn), Gp, Gn

    def residual(x: np.ndarray) -> np.ndarray:
        gn, gp, _ = parts(x)
        return x - np.concatenate([gn.ravel(), gp.ravel()])

    if x0 is None:  # large gamma: no self-energy
        x0 = np.concatenate([np.linalg.inv(Ln).ravel(), np.linalg.inv(Lp).ravel()])
        for _ in range(200):  # a few damped iterations before Newton
            x0 = x0 - 0.5 * residual(x0)
    sol = root(residual, x0, method="hybr", options={"xtol": 1e-14})
    res = float(np.abs(residual(sol.x)).max())
    if not res < _TOL * max(1.0, float(np.abs(sol.x).max())):
        raise not_converged("row-variance fixed point", f"c={c:g}, a1={a1:g}, b2={b2:g}",
                            f"gamma={gamma:.6g}", res, sol.message)
    gn, _, _ = parts(sol.x)
    return float(gn[0, 0]), sol.x


def rows_bulk(c: float, a1: float, b2: float, gammas: np.ndarray, law: tuple[np.ndarray, np.ndarray],
              step: float = 1e-4) -> tuple[np.ndarray, np.ndarray]:
    r"""``tr Q / n`` and the random-input error ``-gamma^2 d/dgamma tr Q / n`` of the row-variance equivalent.

    Parameters
    ----------
    c, a1, b2 : float
        ``p / n`` and the linearisation of the kernel.
    gammas : ndarray of shape (G,)
        Positive ridge parameters (effective, in the units of the entry-wise kernel).
    law : (nodes, weights)
        Quadrature of the row factor (:func:`row_law`); ``(array([1.]), array([1.]))`` gives the
        Gaussian bulk.
    step : float
        Relative step of the central difference in ``log gamma``.

    Returns
    -------
    trace, error : ndarray of shape (G,)
    """
    r, w = (np.asarray(v, dtype=float) for v in law)
    g = np.asarray(gammas, dtype=float)
    trace, error = np.empty_like(g), np.empty_like(g)
    x = None
    at = float(g.max()) * np.exp(2 * step)
    for i in np.argsort(-g):  # from large gamma down, warm starts along a continuation path
        x, at = _walk(c, a1, b2, at, g[i] * np.exp(step), r, w, x)
        hi = _solve_point(c, a1, b2, at, r, w, x)[0]
        trace[i] = _solve_point(c, a1, b2, g[i], r, w, x)[0]
        lo = _solve_point(c, a1, b2, g[i] * np.exp(-step), r, w, x)[0]
        error[i] = -g[i] * (hi - lo) / (2.0 * step)  # -gamma^2 dq/dgamma = -gamma dq/dlog gamma
    return trace, error


def rows_bulk_error(c: float, a1: float, b2: float, gammas: np.ndarray,
                    law: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The error of :func:`rows_bulk` alone, shape ``(G,)``."""
    return rows_bulk(c, a1, b2, gammas, law)[1]


def _walk(c: float, a1: float, b2: float, at: float, target: float, r: np.ndarray, w: np.ndarray,
          x: np.ndarray | None) -> tuple[np.ndarray, float]:
    """The unknowns at ``target``, continued from ``(at, x)`` in ``gamma`` steps of ratio at most
    :data:`_RATIO` (halved on failure, at most :data:`_HALVINGS` times in a row)."""
    if x is None:
        x = _solve_point(c, a1, b2, at, r, w, None)[1]
    halvings = 0
    while at > target:
        nxt = max(target, at / _RATIO ** (0.5 ** halvings))
        try:
            x = _solve_point(c, a1, b2, nxt, r, w, x)[1]
        except ConvergenceError:
            halvings += 1
            if halvings > _HALVINGS:
                raise
            continue
        at, halvings = nxt, max(0, halvings - 1)
    return x, at


#: Where changing ``b2`` by a factor of four either way moves the Gaussian bulk error by less
#: than this, the error does not determine ``b2_eff`` (:func:`matched_b2`).
_FLAT = 1e-4


def _gauss_error(c: float, rho: float, b2: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """The Gaussian bulk error (:mod:`attn_lib.theory._bulk`), one ``b2`` per ``gamma``."""
    sol = solve_bulk(np.full(b2.shape, c), np.full(b2.shape, rho), b2, gammas.reshape(-1, 1))
    return np.asarray(sol.error).reshape(-1)


def matched_b2(c: float, rho: float, b2: float, gammas: np.ndarray, target: np.ndarray) -> np.ndarray:
    r"""The Wigner variance ``b2_eff(gamma)`` whose Gaussian bulk has the error ``target(gamma)``.

    The Gaussian bulk error (:func:`attn_lib.theory._bulk.solve_bulk`) decreases in ``b2``; the
    root is bracketed in ``[b2 / 1000, 4 b2]`` (:func:`scipy.optimize.brentq`, ``xtol``
    ``1e-12 b2``). Where the error does not determine it (changing ``b2`` fourfold either way
    moves it by less than :data:`_FLAT`: at ``c < 1`` and small ``gamma`` the error sits at its
    floor ``1 - c``; or the target is outside the bracket's errors: at ``beta = 1``, ``c = 1.5``
    and small ``gamma`` the row factors lower the error by 4e-4, which no ``b2`` up to ``4 b2``
    reaches; at ``beta = 3`` the factors ask for less than ``b2 / 1000``), ``b2_eff`` is continued from the nearest larger ``gamma`` (``b2`` if none).

    Parameters
    ----------
    c, rho, b2 : float
        ``p / n``, ``sqrt(c) a1`` and the Gaussian Wigner variance.
    gammas, target : ndarray of shape (G,)

    Returns
    -------
    ndarray of shape (G,)
    """
    out = np.full(gammas.shape, float(b2))
    lo, hi = b2 / 1000.0, 4.0 * b2
    last = float(b2)
    for i in np.argsort(-gammas):
        g, t = float(gammas[i]), float(target[i])
        e_4, e_lo, e_hi = _gauss_error(c, rho, np.array([b2 / 4.0, lo, hi]), np.full(3, g))
        if e_4 - e_hi < _FLAT or (e_lo - t) * (e_hi - t) > 0:
            out[i] = last  # the error does not determine b2 here (or not within the bracket)
            continue

        def h(v: float, g: float = g, t: float = t) -> float:
            return float(_gauss_error(c, rho, np.array([v]), np.array([g]))[0]) - t

        out[i] = last = brentq(h, lo, hi, xtol=1e-12 * b2, rtol=1e-12)
    return out


def spiked_error(c: float, rho: float, b2: np.ndarray, gammas: np.ndarray, snr: float,
                 gram: np.ndarray) -> np.ndarray:
    """The limit's error (:func:`attn_lib.theory._spiked.label_quadratic_form`) with one ``b2`` per ``gamma``.

    At ``b2`` constant it is ``attention_error`` of the setting of ``snr`` and ``gram``
    (canonical, ``(3, 3)`` or ``(1 + 2r, 1 + 2r)``), shape ``(G,)``.
    """
    sol = solve_bulk(np.full(b2.shape, c), np.full(b2.shape, rho), b2, gammas.reshape(-1, 1))
    flat = BulkSolution(**{k: np.asarray(v).reshape(-1) for k, v in sol.__dict__.items()})
    G = gammas.size
    _, dq = label_quadratic_form(flat, np.full(G, snr), np.repeat(gram[None], G, axis=0))
    return np.asarray(-(gammas ** 2) * dq)
