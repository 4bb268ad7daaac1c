"""The interpolation error of one draw, from one tridiagonal reduction.

For features ``Phi`` (shape ``(p, n)``) and labels ``y`` the interpolation error of the ridge probe
``w = (Phi Phi^T + n gamma I)^{-1} Phi y`` is its training mean squared error

    E(gamma) = gamma^2 y^T Q^2 y / n,    Q = (Phi^T Phi / n + gamma I_n)^{-1}.

One tridiagonal reduction of the smaller Gram matrix per draw gives the whole ``gamma`` curve
(:func:`interpolation_error`), so a grid of any length costs one factorisation; the reductions
of several feature matrices of one draw share one call (:func:`interpolation_errors`).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from scipy.linalg import blas, lapack

from ..model.kernel import BLAS

# ``(A, v, finish)``: the matrix and start vector of a Lanczos run (``None`` when there is
# none), and ``finish(d, e)`` of its tridiagonal matrix (called ``finish(None, None)`` then).
_Problem = tuple["np.ndarray | None", "np.ndarray | None", Callable[..., np.ndarray]]

__all__ = ["krylov_tridiagonal", "resolvent_moments", "gram_error", "interpolation_error",
           "interpolation_errors"]


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
    with BLAS.limit(limits=1):
        return _krylov(A, v)


def _krylov(A: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`krylov_tridiagonal` without setting the BLAS threads (its callers set one)."""
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


def _gram_problem(A: np.ndarray, y: np.ndarray, g: np.ndarray) -> _Problem:
    """``(A, y, finish)``: ``finish(d, e)`` is the error of :func:`gram_error` from ``T``."""
    def finish(d: np.ndarray, e: np.ndarray) -> np.ndarray:
        _, r2 = resolvent_moments(d, e, g)
        return g ** 2 * (y @ y) * r2 / y.size
    return A, y, finish


def _feature_problem(Phi: np.ndarray, y: np.ndarray, g: np.ndarray) -> _Problem:
    """``(B, v, finish)`` of :func:`interpolation_error`; ``B`` is ``None`` if ``v = 0``."""
    p, n = Phi.shape
    if p >= n:
        return _gram_problem(Phi.T @ Phi / n, y, g)
    v = Phi @ y / np.sqrt(n)
    vv = v @ v
    if vv == 0.0:
        return None, None, lambda d, e: np.full(g.shape, (y @ y) / n)

    def finish(d: np.ndarray, e: np.ndarray) -> np.ndarray:
        r1, r2 = resolvent_moments(d, e, g)
        return (y @ y - vv * (r1 + g * r2)) / n
    B = Phi @ Phi.T
    B /= n
    return B, v, finish


def _solve(problems: list[_Problem]) -> list[np.ndarray]:
    """Finish each ``(A, v, finish)`` from the Lanczos matrix of ``A`` at ``v`` (one BLAS thread)."""
    todo = [(A, v) for A, v, _ in problems if A is not None and v is not None]  # both or neither
    with BLAS.limit(limits=1):
        tri = [_krylov(A, v) for A, v in todo]
    out, it = [], iter(tri)
    for A, _, finish in problems:
        out.append(finish(*next(it)) if A is not None else finish(None, None))
    return out


def gram_error(A: np.ndarray, y: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """``E(gamma) = gamma^2 y^T (A + gamma I)^{-2} y / n`` for the ``n x n`` matrix ``A = Phi^T Phi / n``.

    With the Lanczos matrix ``T`` of ``A`` started at ``y`` (:func:`krylov_tridiagonal`),
    ``E = gamma^2 ||y||^2 e_1^T (T + gamma)^{-2} e_1 / n``. Returns an array shaped like ``gammas``.
    """
    return _solve([_gram_problem(A, y, np.asarray(gammas, dtype=float))])[0]


def interpolation_error(Phi: np.ndarray, y: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """``E(gamma) = gamma^2 y^T (Phi^T Phi / n + gamma I)^{-2} y / n`` on a grid of ``gamma``.

    Parameters
    ----------
    Phi : ndarray of shape (p, n)
        Features of the ``n`` tokens. Complex features give
        ``gamma^2 y^T (Phi^H Phi / n + gamma I)^{-2} y / n``, through the real representation
        ``Psi = sqrt(2) [[Re Phi, -Im Phi], [Im Phi, Re Phi]]`` (shape ``(2p, 2n)``) of the
        Hermitian ``Phi^H Phi``: it is twice the error of ``Psi`` and ``(y, 0)``.
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
    g = np.asarray(gammas, dtype=float)
    if np.iscomplexobj(Phi):
        A, B = Phi.real, Phi.imag
        Psi = np.block([[A, -B], [B, A]])
        Psi *= np.sqrt(2.0)
        return 2.0 * _solve([_feature_problem(Psi, np.concatenate([y, np.zeros_like(y)]), g)])[0]
    return _solve([_feature_problem(Phi, y, g)])[0]


def interpolation_errors(matrices: Sequence[np.ndarray], y: np.ndarray,
                         gammas: np.ndarray | list[np.ndarray],
                         gram: bool = False) -> list[np.ndarray]:
    """:func:`interpolation_error` (or, with ``gram=True``, :func:`gram_error`) of each matrix.

    Parameters
    ----------
    matrices : sequence of ndarray
        Features ``Phi`` of shape ``(p_k, n)``, or with ``gram=True`` the ``n x n`` matrices
        ``A = Phi^T Phi / n``.
    y : ndarray of shape (n,)
        Targets shared by all of them.
    gammas : ndarray of shape (G,) or (), or a list of them
        Positive ridge parameters, shared by the matrices or (a list) one array per matrix.
    gram : bool, default False
        Whether ``matrices`` are the ``n x n`` Gram matrices.

    Returns
    -------
    list of ndarray shaped like ``gammas`` (like its own array), one per matrix.

    Notes
    -----
    The Gram matrices are formed on all BLAS threads; the tridiagonal reductions, memory-bound
    BLAS-2 work that is fastest on one thread, run one after the other on one thread. The
    results are bit-identical to one call per matrix.
    """
    make = _gram_problem if gram else _feature_problem
    if isinstance(gammas, list):
        if len(gammas) != len(matrices):
            raise ValueError(f"gammas: one array per matrix ({len(matrices)}), got {len(gammas)}")
        per = [np.asarray(g, dtype=float) for g in gammas]
    else:
        per = [np.asarray(gammas, dtype=float)] * len(matrices)
    return _solve([make(M, y, g) for M, g in zip(matrices, per)])
