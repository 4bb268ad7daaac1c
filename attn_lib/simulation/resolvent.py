"""The interpolation error of one draw, from one tridiagonal reduction.

For features ``Phi`` (shape ``(p, n)``) and labels ``y`` the interpolation error of the ridge probe
``w = (Phi Phi^T + n gamma I)^{-1} Phi y`` is its training mean squared error

    E(gamma) = gamma^2 y^T Q^2 y / n,    Q = (Phi^T Phi / n + gamma I_n)^{-1}.

One tridiagonal reduction of the smaller Gram matrix per draw gives the whole ``gamma`` curve
(:func:`interpolation_error`), so a grid of any length costs one factorisation.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas, lapack

from ..model.kernel import BLAS

__all__ = ["krylov_tridiagonal", "resolvent_moments", "gram_error", "interpolation_error"]

def krylov_tridiagonal(A: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tridiagonal ``T`` with ``e_1^T h(T) e_1 = v^T h(A) v / ||v||^2`` for every function ``h``.

    ``T`` is the Lanczos matrix of the symmetric ``A`` (shape ``(m, m)``) started at ``v``,
    computed stably by Householder reflections: a reflector ``H_0`` maps ``v / ||v||`` to
    ``+-e_1``, and the LAPACK reduction ``sytrd`` of ``H_0 A H_0`` (lower storage, whose
    reflectors act on coordinates ``2..m`` only) keeps ``e_1`` fixed. Cost: one tridiagonal
    reduction, about a third of a full ``eigh``; no eigenvectors are formed.

    Returns
    -------
    d : ndarray of shape (m,)
        Diagonal of ``T``.
    e : ndarray of shape (m - 1,)
        Off-diagonal of ``T``.
    """
    x = np.asarray(v, dtype=float) / np.linalg.norm(v)
    a = np.asfortranarray(A, dtype=float)  # a copy: A is left untouched
    h = x.copy()
    h[0] += 1.0 if x[0] >= 0 else -1.0      # h = x - alpha e_1, alpha = -sign(x_0)
    beta = 2.0 / (h @ h)
    q = beta * (a @ h)
    w = q - 0.5 * beta * (h @ q) * h
    # H_0 A H_0 = A - h w^T - w h^T; sytrd reads the lower triangle only. Measured on 2 cores:
    # this memory-bound BLAS-2 work is faster with one thread (39 vs 47 ms at m = 512), and
    # 2-4x faster right after a threaded GEMM, whose spinning workers compete for the cores.
    with BLAS.limit(limits=1):
        a = blas.dsyr2(-1.0, h, w, lower=1, a=a, overwrite_a=1)
        _, d, e, _, info = lapack.dsytrd(a, lower=1, overwrite_a=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dsytrd failed with info={info}")
    return d, e


def resolvent_moments(d: np.ndarray, e: np.ndarray, gammas: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``e_1^T (T + gamma)^{-1} e_1`` and ``e_1^T (T + gamma)^{-2} e_1`` for the tridiagonal ``T``.

    One tridiagonal solve ``(T + gamma) x = e_1`` per ``gamma`` (LAPACK ``gtsv``, O(m)); the
    moments are ``x_1`` and ``||x||^2``. Both outputs have the shape of ``gammas``.
    """
    g = np.asarray(gammas, dtype=float)
    if d.size == 1:
        r1 = 1.0 / (d[0] + g)
        return r1, r1 ** 2
    r1, r2 = np.empty(g.size), np.empty(g.size)
    rhs = np.zeros(d.size)
    rhs[0] = 1.0
    for k, gamma in enumerate(g.ravel()):
        *_, x, info = lapack.dgtsv(e, d + gamma, e, rhs)
        if info != 0:
            raise np.linalg.LinAlgError(f"tridiagonal solve failed at gamma={gamma} (info={info})")
        r1[k], r2[k] = x[0], x @ x
    return r1.reshape(g.shape), r2.reshape(g.shape)


def gram_error(A: np.ndarray, y: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """``E(gamma) = gamma^2 y^T (A + gamma I)^{-2} y / n`` for the ``n x n`` matrix ``A = Phi^T Phi / n``.

    With the Lanczos matrix ``T`` of ``A`` started at ``y`` (:func:`krylov_tridiagonal`),
    ``E = gamma^2 ||y||^2 e_1^T (T + gamma)^{-2} e_1 / n``. Returns an array shaped like ``gammas``.
    """
    g = np.asarray(gammas, dtype=float)
    _, r2 = resolvent_moments(*krylov_tridiagonal(A, y), g)
    return g ** 2 * (y @ y) * r2 / y.size


def interpolation_error(Phi: np.ndarray, y: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """``E(gamma) = gamma^2 y^T (Phi^T Phi / n + gamma I)^{-2} y / n`` on a grid of ``gamma``.

    Parameters
    ----------
    Phi : ndarray of shape (p, n)
        Features of the ``n`` tokens.
    y : ndarray of shape (n,)
        Targets, not zero.
    gammas : ndarray of shape (G,) or ()
        Positive ridge parameters.

    Returns
    -------
    ndarray shaped like ``gammas``.

    Notes
    -----
    One tridiagonal reduction of the smaller Gram matrix serves the whole grid
    (:func:`krylov_tridiagonal`, :func:`resolvent_moments`). If ``p >= n`` see
    :func:`gram_error`. If ``p < n``, write ``B = Phi Phi^T / n`` and ``v = Phi y / sqrt(n)``;
    since ``Phi (Phi^T Phi / n + gamma)^{-1} = (B + gamma)^{-1} Phi`` and
    ``gamma^2 (A + gamma)^{-2} = I - A (A + 2 gamma)(A + gamma)^{-2}`` for ``A = Phi^T Phi / n``,

    ``E = (||y||^2 - v^T (B + gamma)^{-1} v - gamma v^T (B + gamma)^{-2} v) / n``

    with no division by a small eigenvalue.
    """
    p, n = Phi.shape
    if p >= n:
        return gram_error(Phi.T @ Phi / n, y, gammas)
    g = np.asarray(gammas, dtype=float)
    v = Phi @ y / np.sqrt(n)
    vv = v @ v
    if vv == 0.0:
        return np.full(g.shape, (y @ y) / n)
    r1, r2 = resolvent_moments(*krylov_tridiagonal(Phi @ Phi.T / n, v), g)
    return (y @ y - vv * (r1 + g * r2)) / n
