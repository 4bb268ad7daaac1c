"""Monte Carlo interpolation errors of nonlinear attention and of ridge regression.

For features ``Phi`` (shape ``(p, n)``) and labels ``y`` the interpolation error of the ridge probe
``w = (Phi Phi^T + n gamma I)^{-1} Phi y`` is its training mean squared error

    E(gamma) = gamma^2 y^T Q^2 y / n,    Q = (Phi^T Phi / n + gamma I_n)^{-1},

with ``Phi = X K`` for attention and ``Phi = X`` for linear (ridge) regression.

One symmetric eigendecomposition of the smaller Gram matrix per draw gives the whole ``gamma``
curve (:func:`interpolation_error`), so a grid of any length costs one factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.linalg import lapack
from tqdm import tqdm

from . import data, hermite, kernel
from ._validation import check_gammas, check_int, check_seed
from .setting import Setting


def spectral_weights(A: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues of a symmetric ``A`` and the squared projections of ``v`` on its eigenvectors.

    Returns ``lam`` (shape ``(m,)``, ascending) and ``w`` with ``w_k = (u_k^T v)^2`` where
    ``A = sum_k lam_k u_k u_k^T``. Only these enter a spectral function ``v^T h(A) v``, so the
    eigenvectors are never formed: ``A = Q T Q^T`` is reduced to tridiagonal form (LAPACK
    ``sytrd``), ``Q^T v`` is applied from the stored reflectors (``ormqr``) and the small
    tridiagonal eigenproblem gives ``w = (S^T Q^T v)^2`` -- about half the cost of a full ``eigh``.
    """
    c, d, e, tau, info = lapack.dsytrd(A, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dsytrd failed with info={info}")
    w = np.array(v, dtype=float)
    if d.size > 1:
        # Q = diag(1, Q'), and Q' is stored like a QR factorisation in c[1:, :-1]
        cq, _, info = lapack.dormqr("L", "T", c[1:, :-1], tau, w[1:, None], max(1, d.size))
        if info != 0:
            raise np.linalg.LinAlgError(f"LAPACK dormqr failed with info={info}")
        w[1:] = cq[:, 0]
    lam, S = linalg.eigh_tridiagonal(d, e, check_finite=False)
    return lam, (S.T @ w) ** 2


def gram_error(A: np.ndarray, y: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """``E(gamma) = gamma^2 y^T (A + gamma I)^{-2} y / n`` for the ``n x n`` matrix ``A = Phi^T Phi / n``.

    With ``A = V diag(lambda) V^T`` and ``d = V^T y`` (from :func:`spectral_weights`),
    ``E = gamma^2 / n sum_k d_k^2 / (lambda_k + gamma)^2``. Returns an array shaped like ``gammas``.
    """
    g = np.asarray(gammas, dtype=float)
    lam, d2 = spectral_weights(A, y)
    lam = np.maximum(lam, 0.0)
    gcol = g.reshape(-1, 1)
    return ((gcol / (lam + gcol)) ** 2 * d2).sum(axis=1).reshape(g.shape) / y.size


def interpolation_error(Phi: np.ndarray, y: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """``E(gamma) = gamma^2 y^T (Phi^T Phi / n + gamma I)^{-2} y / n`` on a grid of ``gamma``.

    Parameters
    ----------
    Phi : ndarray of shape (p, n)
        Features of the ``n`` tokens.
    y : ndarray of shape (n,)
        Targets.
    gammas : ndarray of shape (G,) or ()
        Positive ridge parameters.

    Returns
    -------
    ndarray shaped like ``gammas``.

    Notes
    -----
    One factorisation of the smaller Gram matrix serves the whole grid, and no eigenvectors are
    formed (:func:`spectral_weights`). If ``p >= n`` see :func:`gram_error`. If ``p < n``, with
    ``Phi Phi^T / n = U diag(lambda) U^T`` and ``b = U^T Phi y / sqrt(n)``, the non-zero
    eigenvectors of ``Phi^T Phi / n`` are ``Phi^T u_k / sqrt(n lambda_k)`` and the rest of ``R^n``
    is its null space, so
    ``E = (||y||^2 - sum_k b_k^2 (lambda_k + 2 gamma) / (lambda_k + gamma)^2) / n``
    (no division by a small eigenvalue).
    """
    p, n = Phi.shape
    if p >= n:
        return gram_error(Phi.T @ Phi / n, y, gammas)
    g = np.asarray(gammas, dtype=float)
    gcol = g.reshape(-1, 1)
    lam, b2 = spectral_weights(Phi @ Phi.T / n, Phi @ y / np.sqrt(n))
    lam = np.maximum(lam, 0.0)
    out = (y @ y - (b2 * (lam + 2 * gcol) / (lam + gcol) ** 2).sum(axis=1)) / n
    return out.reshape(g.shape)


def attention_features(X: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Attention output ``Phi = X K`` (shape ``(p, n)``)."""
    return X @ K


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
    func, _ = hermite.check_nonlinearity(setting.f)
    a0 = setting.hermite.a0  # E f(alpha xi): the off-diagonal logits are ~ N(0, alpha^2)

    def f(t: np.ndarray) -> np.ndarray:
        return np.asarray(func(t), dtype=float) - a0

    if p >= n:
        G = s.X.T @ s.X
        K = kernel.attention_kernel(s.X, f, s.w_K, s.w_Q, setting.alpha, keep_diagonal, gram=G)
        att = gram_error(K.T @ (G @ K) / n, s.y, gammas)
        ridge = gram_error(G / n, s.y, gammas)
    else:
        K = kernel.attention_kernel(s.X, f, s.w_K, s.w_Q, setting.alpha, keep_diagonal)
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
        """Standard error of the mean, ``std(ddof=1) / sqrt(trials)`` (NaN-free: 0 for one trial)."""
        t = self.values.shape[0]
        if t < 2:
            return np.zeros_like(self.mean)
        return self.values.std(axis=0, ddof=1) / np.sqrt(t)


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
        Keep the kernel's diagonal (see :mod:`attn_lib.kernel`).
    progress : bool, default False
        Show a tqdm progress bar over trials.
    attention : bool, default True
        Also simulate attention; ``False`` gives ridge only (``.attention`` is ``None``).

    Returns
    -------
    SimulationResult
        ``.attention`` and ``.ridge`` with ``mean``, ``std`` (ddof=0), ``sem`` and ``values``.
    """
    if not isinstance(setting, Setting):
        raise TypeError(f"setting must be an attn_lib.Setting, got {type(setting).__name__}")
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
