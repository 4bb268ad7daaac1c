"""Signal-plus-noise tokens and the low-rank attention weights.

``X = mu y^T + Z`` in ``R^{p x n}`` with ``Z`` i.i.d. ``N(0, 1)``, balanced labels ``y`` (``+1``
for the first ``ceil(n/2)`` tokens and ``-1`` for the rest, in random order) and
``p = max(1, round(c n))``. The vectors ``mu, w_K, w_Q`` have exactly the norms and cosines of
the :class:`~attn_lib.model.setting.Setting` (for a :class:`~attn_lib.model.setting.RankSetting`,
``mu`` and the rows of ``W_K, W_Q`` have exactly its Gram matrix). Because ``Z`` is rotation
invariant, they are placed in the span of the first ``k`` coordinate axes without loss of
generality (``k`` their rank: at most 3, or ``1 + 2r``). A
:class:`~attn_lib.model.setting.MatrixSetting` (or :class:`~attn_lib.model.setting.HeadsSetting`)
gives ``mu`` (and the key-query matrices) itself.

The latent basis of ``span(mu, w_K, w_Q)`` (:func:`latent_coordinates` from the Gram matrix of a
setting, :func:`latent_basis` from the vectors of a sample) has one factorisation and one rank
cut-off. :func:`goe` draws the Wigner matrix of the Gaussian-equivalent kernels, :func:`wishart`
the Gram matrix of Gaussian vectors (the Marchenko–Pastur model of a kernel's ``He2`` residual).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_int, check_tokens
from .setting import CovarianceSetting, HeadsSetting, MatrixSetting, RankSetting, Setting

_RANK_TOL = 1e-12


@dataclass(frozen=True)
class Sample:
    """One draw of the model.

    Attributes
    ----------
    X : ndarray of shape (p, n)
        Tokens ``mu y^T + Z`` as columns.
    y : ndarray of shape (n,)
        Labels in ``{-1, +1}``.
    mu : ndarray of shape (p,)
        Signal.
    w_K, w_Q : ndarray of shape (p,), or (r, p) for a RankSetting; None for a MatrixSetting
        The low-rank weight vectors (rows ``w_K^(k)``, ``w_Q^(k)`` for rank ``r``; ``None`` for
        a ``MatrixSetting`` or ``HeadsSetting``).
    Z : ndarray of shape (p, n) or None
        The noise, kept for a :class:`~attn_lib.model.setting.MatrixSetting` (or
        ``HeadsSetting``), whose logits are
        formed from it (:func:`attn_lib.model.kernel.matrix_logits`); ``None`` otherwise.
    """

    X: np.ndarray
    y: np.ndarray
    mu: np.ndarray
    w_K: np.ndarray | None
    w_Q: np.ndarray | None
    Z: np.ndarray | None = None


def _latent_factor(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lam, vec, d)`` with ``gram = D U diag(lam) U^T D`` on its numerical range, ``D = diag(d)``.

    The eigendecomposition is of the *equilibrated* ``gram / (d d^T)``, ``d`` the column norms
    (the cosine matrix), so that the rank does not depend on the vectors' scales: after the
    reduction to ``alpha = 1`` a small ``alpha`` makes ``w_K`` a million times longer than ``mu``,
    and the eigenvalues of ``gram`` itself would no longer resolve ``mu``'s direction. A column
    counts when ``d^2 > 1e-12`` (a norm above ``1e-6``, whatever the others), an eigenvalue of the cosine matrix when
    ``lam > 1e-12`` (``eigh`` resolves eigenvalues to about ``1e-16 lam_max``, and
    ``lam_max >= 1``); ``d`` is 0 for the columns that do not count and ``U`` has zero rows there.
    """
    d2 = np.diag(gram).copy()
    on = d2 > _RANK_TOL
    d = np.where(on, np.sqrt(np.where(on, d2, 1.0)), 0.0)
    lam, vec = np.linalg.eigh(gram[np.ix_(on, on)] / np.outer(d[on], d[on]))
    keep = lam > _RANK_TOL
    U = np.zeros((len(d2), int(keep.sum())))
    U[on] = vec[:, keep]
    return lam[keep], U, d


def latent_coordinates(setting: Setting | RankSetting) -> np.ndarray:
    """Coordinates of ``mu, w_K, w_Q`` in an orthonormal basis of their span, shape ``(r, m)``.

    ``C = diag(lam)^{1/2} U^T D`` with ``gram = C^T C`` from the equilibrated eigendecomposition
    of ``setting.gram`` (:func:`latent_basis` uses the same factor and cut-off); ``r`` (0 to
    ``m``) is its numerical rank, ``m = 3`` (or ``1 + 2r`` vectors ``mu, w_K^(k), w_Q^(k)`` of a
    :class:`~attn_lib.model.setting.RankSetting`).
    """
    lam, U, d = _latent_factor(setting.gram)
    return np.sqrt(lam)[:, None] * U.T * d[None, :]


def latent_basis(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal basis ``B`` of the span of the columns of ``V`` and the coordinates ``B^T V``.

    With ``V^T V = D U diag(lam) U^T D`` the equilibrated factorisation of
    :func:`latent_coordinates` (same cut-off), ``B = V D^+ U diag(lam)^{-1/2}`` and
    ``C = B^T V = diag(lam)^{1/2} U^T D``, so ``V = B C``.

    Parameters
    ----------
    vectors : ndarray of shape (p, k)
        Columns spanning the latent space, e.g. ``mu, w_K, w_Q`` (``k = 3``).

    Returns
    -------
    B : ndarray of shape (p, r)
        Orthonormal columns (``r = 0`` when all vectors vanish).
    C : ndarray of shape (r, k)
        Coordinates of the vectors in ``B``.

    Notes
    -----
    Through ``V^T V``, ``B^T B = I`` holds up to rounding times the squared condition number of
    the *normalised* columns on their span, at most ``1e12`` by the cut-off; for ``mu, w_K, w_Q``
    it is a small number.
    """
    V = np.asarray(vectors, dtype=float)
    if V.ndim != 2:
        raise ValueError(f"vectors must be a 2-D array (p, k), got shape {V.shape}")
    lam, U, d = _latent_factor(V.T @ V)
    root = np.sqrt(lam)
    dinv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    return V @ (dinv[:, None] * U / root), root[:, None] * U.T * d[None, :]


def geometry(setting: Setting | RankSetting, p: int) -> np.ndarray:
    """Rows ``mu, w_K, w_Q`` (shape ``(3, p)``) with the Gram matrix ``setting.gram``.

    For a :class:`~attn_lib.model.setting.RankSetting` the rows are ``mu, w_K^(1..r),
    w_Q^(1..r)`` (shape ``(1 + 2r, p)``).

    Factorises ``gram = L L^T`` through its eigendecomposition and embeds ``L`` in the first
    coordinates of ``R^p``.

    Raises
    ------
    ValueError
        If the three vectors span more dimensions than ``p``.
    """
    factor = latent_coordinates(setting).T
    rank = factor.shape[1]
    if rank > p:
        names = ("mu, w_K, w_Q" if isinstance(setting, Setting)
                 else f"mu and the {2 * setting.r} weight vectors")
        raise ValueError(f"n is too small: {names} span {rank} dimensions but p = {p}")
    out = np.zeros((factor.shape[0], p))
    out[:, :rank] = factor
    return out


def goe(n: int, rng: np.random.Generator) -> np.ndarray:
    """Symmetric ``n x n`` Gaussian (Wigner) matrix with zero diagonal.

    Off the diagonal, ``W_ij = W_ji ~ N(0, 1)`` independently for ``i < j``; ``W_ii = 0``. The
    zero diagonal is the law the Gaussian equivalents need: the attention kernel's diagonal is
    zeroed (:func:`attn_lib.model.kernel.attention_kernel`), so the Wigner part of the
    linearised kernel and of the strong-alignment surrogates has a zero diagonal too.

    Drawn as ``(A + A^T) / sqrt(2)`` from an ``n x n`` matrix ``A`` of ``n^2`` standard normals
    (``rng.standard_normal((n, n))``), with the diagonal then set to zero.
    """
    n = check_int(n, "n")
    A = rng.standard_normal((n, n))
    W = A + A.T
    W /= np.sqrt(2.0)
    np.fill_diagonal(W, 0.0)
    return W


def gue(n: int, rng: np.random.Generator) -> np.ndarray:
    """Hermitian ``n x n`` complex Gaussian (Wigner) matrix with zero diagonal.

    Off the diagonal, ``W_ij = conj(W_ji)`` with independent real and imaginary parts of variance
    ``1/2`` each (``E |W_ij|^2 = 1``, ``E W_ij^2 = 0``) for ``i < j``; ``W_ii = 0``: the complex
    counterpart of :func:`goe`. Drawn as ``(A + A^T) / 2 + i (B - B^T) / 2`` from two ``n x n``
    matrices of standard normals, ``A`` first.
    """
    n = check_int(n, "n")
    A = rng.standard_normal((n, n))
    B = rng.standard_normal((n, n))
    W = (A + A.T) + 1j * (B - B.T)
    W /= 2.0
    np.fill_diagonal(W, 0.0)
    return W


def wishart(n: int, dof: int, rng: np.random.Generator) -> np.ndarray:
    """Gram matrix ``U^T U`` (shape ``(n, n)``) of ``n`` standard Gaussian vectors in dimension ``dof``.

    Drawn by the Bartlett decomposition, ``L L^T`` with ``L`` lower triangular,
    ``L_ii = sqrt(chi2(dof - i))`` (``i = 0 .. n-1``) and ``L_ij ~ N(0, 1)`` below the diagonal:
    the law of ``U^T U`` in ``O(n^3)`` operations and ``n^2`` random numbers, whatever ``dof``
    (for a kernel's ``He2`` residual ``dof = p'(p' + 1) / 2``, about 32,000 at ``p = 256``).
    The off-diagonal entries have variance ``dof``, the diagonal has mean ``dof``.

    Parameters
    ----------
    n : int
        Number of vectors.
    dof : int
        Their dimension, ``>= n``.
    rng : numpy.random.Generator
        Source of randomness: the ``n (n - 1) / 2`` normals below the diagonal (drawn as a full
        ``n x n`` matrix), then the ``n`` chi-squared variates.

    Raises
    ------
    ValueError
        If ``dof < n`` (the Gram matrix is then singular; the decomposition needs ``dof >= n``).
    """
    n, dof = check_int(n, "n"), check_int(dof, "dof")
    if dof < n:
        raise ValueError(f"dof must be at least n = {n} for the Bartlett decomposition, got {dof}")
    L = np.tril(rng.standard_normal((n, n)), -1)
    L[np.diag_indices(n)] = np.sqrt(rng.chisquare(dof - np.arange(n)))
    return L @ L.T


def labels(n: int, rng: np.random.Generator) -> np.ndarray:
    """Balanced labels: ``ceil(n/2)`` entries ``+1`` and the rest ``-1``, randomly permuted.

    ``n >= 2`` (:func:`attn_lib._validation.check_tokens`): one token per class at least.
    """
    n = check_tokens(n)
    y = np.ones(n)
    y[(n + 1) // 2:] = -1.0
    return rng.permutation(y)


def draw(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, n: int,
         rng: np.random.Generator) -> Sample:
    """Draw ``X = mu y^T + Z`` (shape ``(p, n)``) and the weights for ``setting``.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        Model scalars (a ``RankSetting`` gives ``w_K, w_Q`` of shape ``(r, p)``; the same
        random numbers are drawn, so one with ``r = 1`` gives the ``Setting``'s sample). A
        ``MatrixSetting`` or ``HeadsSetting`` gives its own ``mu`` and keeps ``Z`` in the sample
        (no weight vectors); a ``CovarianceSetting`` draws ``Z = C^{1/2} Z_0``.
    n : int
        Number of tokens, ``>= 2`` (one per class); ``p = max(1, round(c n))`` (for a
        ``MatrixSetting`` or ``HeadsSetting``, ``n`` must give its ``p``: :meth:`MatrixSetting.p`).
    rng : numpy.random.Generator
        Source of randomness: labels are drawn first, then ``Z``.
    """
    n = check_tokens(n)
    p = setting.p(n)
    if isinstance(setting, (MatrixSetting, HeadsSetting)):
        y = labels(n, rng)
        Z = rng.standard_normal((p, n))
        if isinstance(setting, CovarianceSetting):
            if setting.diagonal:
                Z *= np.sqrt(np.clip(setting.spectrum[0], 0.0, None))[:, None]
            else:
                Z = setting.noise_factor @ Z
        return Sample(X=Z + np.outer(setting.mu, y), y=y, mu=setting.mu, w_K=None, w_Q=None, Z=Z)
    V = geometry(setting, p)
    if isinstance(setting, Setting):
        mu, w_K, w_Q = V
    else:
        mu, w_K, w_Q = V[0], V[1:1 + setting.r], V[1 + setting.r:]
    y = labels(n, rng)
    X = rng.standard_normal((p, n))
    X += np.outer(mu, y)
    return Sample(X=X, y=y, mu=mu, w_K=w_K, w_Q=w_Q)
