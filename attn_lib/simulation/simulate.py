"""Monte Carlo interpolation errors of nonlinear attention and of ridge regression.

For features ``Phi`` (shape ``(p, n)``) and labels ``y`` the interpolation error of the ridge probe
``w = (Phi Phi^T + n gamma I)^{-1} Phi y`` is its training mean squared error

    E(gamma) = gamma^2 y^T Q^2 y / n,    Q = (Phi^T Phi / n + gamma I_n)^{-1},

with ``Phi = X K`` for attention and ``Phi = X`` for linear (ridge) regression.

One tridiagonal reduction of the smaller Gram matrix per draw gives the whole ``gamma`` curve
(:func:`interpolation_error`), so a grid of any length costs one factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import blas, lapack
from threadpoolctl import ThreadpoolController
from tqdm import tqdm

from ..model import data, kernel
from .._validation import check_gammas, check_int, check_seed, check_setting
from ..model.nonlinearity import check_nonlinearity
from ..model.setting import Setting

_BLAS = ThreadpoolController()


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
    with _BLAS.limit(limits=1, user_api="blas"):
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


def draw_errors(setting: Setting, gammas: np.ndarray, n: int, rng: np.random.Generator,
                keep_diagonal: bool = False, attention: bool = True
                ) -> tuple[np.ndarray | None, np.ndarray]:
    """Attention and ridge errors of one draw, each shaped like ``gammas``.

    When ``p >= n`` the attention Gram matrix is formed as ``K^T (X^T X) K`` (reusing ``X^T X``,
    which the kernel needs anyway); otherwise ``Phi Phi^T`` with ``Phi = X K``. With
    ``attention=False`` only the ridge error is computed (the attention entry is ``None``).
    """
    s = data.draw(setting, n, rng)
    p = s.X.shape[0]
    if not attention:
        return None, interpolation_error(s.X, s.y, gammas)
    f = check_nonlinearity(setting.f)
    a0 = setting.hermite.a0  # E f(alpha xi): the off-diagonal logits are ~ N(0, alpha^2)
    if p >= n:
        G = s.X.T @ s.X
        K = kernel.attention_kernel(s.X, f, s.w_K, s.w_Q, setting.alpha, keep_diagonal, G, a0)
        att = gram_error(K.T @ (G @ K) / n, s.y, gammas)
        ridge = gram_error(G / n, s.y, gammas)
    else:
        K = kernel.attention_kernel(s.X, f, s.w_K, s.w_Q, setting.alpha, keep_diagonal, a0=a0)
        att = interpolation_error(s.X @ K, s.y, gammas)
        ridge = interpolation_error(s.X, s.y, gammas)
    return att, ridge


@dataclass(frozen=True)
class Stats:
    """Summary over trials.

    Attributes
    ----------
    values : ndarray of shape ``(trials, *gammas.shape)``
        Realised error of each draw.
    """

    values: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """Average over trials, shaped like ``gammas``."""
        return self.values.mean(axis=0)

    @property
    def std(self) -> np.ndarray:
        """Standard deviation across trials (``ddof=0``: zero for a single trial)."""
        return self.values.std(axis=0)

    @property
    def sem(self) -> np.ndarray:
        """Standard error of the mean (:func:`standard_error` over trials)."""
        return standard_error(self.values, axis=0)


def standard_error(values: np.ndarray, axis: int) -> np.ndarray:
    """Standard error of the mean along ``axis``, ``std(ddof=1) / sqrt(T)``; zeros when ``T = 1``.

    Parameters
    ----------
    values : ndarray
        Draws, ``T`` of them along ``axis``.
    axis : int

    Returns
    -------
    ndarray, ``values`` without ``axis``.
    """
    values = np.asarray(values)
    t = values.shape[axis]
    if t < 2:
        return np.zeros_like(values.mean(axis=axis))
    return values.std(axis=axis, ddof=1) / np.sqrt(t)


@dataclass(frozen=True)
class SimulationResult:
    """Monte Carlo errors of attention (``Phi = X K``) and ridge regression (``Phi = X``)."""

    attention: Stats | None
    ridge: Stats
    n: int
    p: int


def errors(setting: Setting, gammas: object, n: int = 2048, trials: int = 4, seed: int = 0,
           keep_diagonal: bool = False, progress: bool = False,
           attention: bool = True) -> SimulationResult:
    """Monte Carlo interpolation errors of attention and ridge regression.

    Parameters
    ----------
    setting : Setting
        Model scalars.
    gammas : float or array_like of shape (G,)
        Positive ridge parameters.
    n : int, default 2048
        Number of tokens; ``p = max(1, round(c n))``.
    trials : int, default 4
        Independent draws. Trial ``t`` uses ``SeedSequence(seed).spawn(trials)[t]``, so fewer
        trials are a prefix of more.
    seed : int, default 0
        Non-negative root seed.
    keep_diagonal : bool, default False
        Keep the kernel's diagonal (see :mod:`attn_lib.model.kernel`).
    progress : bool, default False
        Show a tqdm progress bar over trials.
    attention : bool, default True
        Also simulate attention; ``False`` gives ridge only (``.attention`` is ``None``).

    Returns
    -------
    SimulationResult
        ``.attention`` and ``.ridge`` with ``mean``, ``std`` (ddof=0), ``sem`` and ``values``.
    """
    check_setting(setting)
    if not isinstance(keep_diagonal, bool) or not isinstance(attention, bool):
        raise TypeError("keep_diagonal and attention must be bool")
    g = check_gammas(gammas)
    n = check_int(n, "n")
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    p = setting.p(n)
    data.geometry(setting, p)  # fail fast when n is too small for the geometry
    children = np.random.SeedSequence(seed).spawn(trials)
    att = np.empty((trials, *g.shape))
    ridge = np.empty((trials, *g.shape))
    for t in tqdm(range(trials), disable=not progress, desc="Monte Carlo"):
        a, ridge[t] = draw_errors(setting, g, n, np.random.default_rng(children[t]),
                                  keep_diagonal, attention)
        if attention:
            att[t] = a
    return SimulationResult(attention=Stats(att) if attention else None, ridge=Stats(ridge),
                            n=n, p=p)
