"""The nonlinear attention kernel.

``K = f(X^T (alpha I_p + w_K w_Q^T) X / sqrt(p)) / sqrt(p)`` (shape ``(n, n)``) with the centred
``f``; row ``i`` indexes keys and column ``j`` queries:
``K_ij = f((alpha x_i^T x_j + (x_i^T w_K)(w_Q^T x_j)) / sqrt(p)) / sqrt(p)``.

**The diagonal is set to zero by default.** Its entries ``f(x_i^T M x_i / sqrt(p)) / sqrt(p)``
evaluate ``f`` at arguments of size ``sqrt(p)``, far outside the O(1) range of the off-diagonal
ones: for a bounded ``f`` they are ``O(p^{-1/2})`` but not negligible at finite ``p`` (0.044 for
``tanh`` at ``p = 512``), and for a growing ``f`` (ReLU, linear) they add an ``O(1)`` multiple of
the identity. Either way they are a deterministic-looking shift that the random-matrix limit
treats separately, so the theory assumes a zero diagonal; ``keep_diagonal=True`` keeps it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.linalg import blas

from .nonlinearity import Nonlinearity


def logits(X: np.ndarray, w_K: np.ndarray, w_Q: np.ndarray, alpha: float = 1.0,
           gram: np.ndarray | None = None) -> np.ndarray:
    """Kernel arguments ``T = X^T (alpha I + w_K w_Q^T) X / sqrt(p)``, shape ``(n, n)``.

    Parameters
    ----------
    X : ndarray of shape (p, n)
    w_K, w_Q : ndarray of shape (p,)
    alpha : float, default 1.0
        Scale of the full part.
    gram : ndarray of shape (n, n), optional
        A precomputed ``X^T X`` (it is not modified).
    """
    p = X.shape[0]
    if gram is None:
        T = X.T @ X
        T *= alpha / np.sqrt(p)
    else:
        T = gram * (alpha / np.sqrt(p))
    # rank-one update in place: T += (X^T w_K)(X^T w_Q)^T / sqrt(p) (T.T is Fortran-ordered)
    u, v = X.T @ w_K, X.T @ w_Q
    if np.any(u) and np.any(v):
        blas.dger(1.0 / np.sqrt(p), v, u, a=T.T, overwrite_a=True)
    return T


def apply(f: Callable[[np.ndarray], np.ndarray], T: np.ndarray, p: int,
          keep_diagonal: bool = False, a0: float = 0.0, overwrite: bool = False) -> np.ndarray:
    """``K = (f(T) - a0) / sqrt(p)`` with the diagonal zeroed unless ``keep_diagonal``.

    Parameters
    ----------
    f : callable
        Vectorised nonlinearity, e.g. a :class:`~attn_lib.model.nonlinearity.Nonlinearity`;
        ``f - a0`` must be centred (see :func:`attn_lib.model.hermite.centered`, or pass the
        raw ``f`` with its ``a0``).
    T : ndarray of shape (n, n)
        Kernel arguments (:func:`logits`).
    p : int
        Token dimension.
    keep_diagonal : bool, default False
        Keep ``K_ii``.
    a0 : float, default 0.0
        Constant subtracted from ``f``.
    overwrite : bool, default False
        Allow ``T`` to be overwritten (a NumPy ufunc, or a nonlinearity that is one, then writes
        into it: one ``n x n`` allocation less).
    """
    u = f.ufunc if isinstance(f, Nonlinearity) else f
    if overwrite and isinstance(u, np.ufunc) and u.nin == 1:
        K = u(T, out=T)
    else:
        K = np.array(f(T), dtype=float)  # a copy: never an alias of T
    if a0:
        K -= a0
    K *= 1.0 / np.sqrt(p)
    if not keep_diagonal:
        np.fill_diagonal(K, 0.0)
    return K


def attention_kernel(X: np.ndarray, f: Callable[[np.ndarray], np.ndarray], w_K: np.ndarray,
                     w_Q: np.ndarray, alpha: float = 1.0, keep_diagonal: bool = False,
                     gram: np.ndarray | None = None, a0: float = 0.0) -> np.ndarray:
    """``K = (f(X^T (alpha I + w_K w_Q^T) X / sqrt(p)) - a0) / sqrt(p)``, shape ``(n, n)``.

    Parameters
    ----------
    X : ndarray of shape (p, n)
        Tokens as columns.
    f : callable
        Vectorised nonlinearity, centred by ``a0``.
    w_K, w_Q : ndarray of shape (p,)
        Low-rank weight vectors.
    alpha : float, default 1.0
        Scale of the full part of ``W_K^T W_Q``.
    keep_diagonal : bool, default False
        Keep ``K_ii`` (see the module docstring for why it is zeroed by default).
    gram : ndarray of shape (n, n), optional
        A precomputed ``X^T X`` (not modified).
    a0 : float, default 0.0
        Centring constant ``E f(alpha xi)`` when ``f`` is not centred already.
    """
    return apply(f, logits(X, w_K, w_Q, alpha, gram), X.shape[0], keep_diagonal, a0,
                 overwrite=True)
