"""Signal-plus-noise tokens and the low-rank attention weights.

``X = mu y^T + Z`` in ``R^{p x n}`` with ``Z`` i.i.d. ``N(0, 1)``, balanced labels ``y`` (``+1``
for the first ``ceil(n/2)`` tokens and ``-1`` for the rest, in random order) and
``p = max(1, round(c n))``. The vectors ``mu, w_K, w_Q`` have exactly the norms and cosines of
the :class:`~attn_lib.model.setting.Setting`. Because ``Z`` is rotation invariant, they are placed in
the span of the first ``r <= 3`` coordinate axes without loss of generality.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_tokens
from .setting import Setting

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
    mu, w_K, w_Q : ndarray of shape (p,)
        Signal and the low-rank weight vectors.
    """

    X: np.ndarray
    y: np.ndarray
    mu: np.ndarray
    w_K: np.ndarray
    w_Q: np.ndarray


def latent_coordinates(setting: Setting) -> np.ndarray:
    """Coordinates of ``mu, w_K, w_Q`` in an orthonormal basis of their span, shape ``(r, 3)``.

    ``gram = C^T C`` through the eigendecomposition of ``setting.gram``; ``r`` (0 to 3) is its
    numerical rank.
    """
    lam, vec = np.linalg.eigh(setting.gram)
    keep = lam > _RANK_TOL * max(1.0, lam.max())
    return np.sqrt(lam[keep])[:, None] * vec[:, keep].T


def geometry(setting: Setting, p: int) -> np.ndarray:
    """Rows ``mu, w_K, w_Q`` (shape ``(3, p)``) with the Gram matrix ``setting.gram``.

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
        raise ValueError(f"n is too small: mu, w_K, w_Q span {rank} dimensions but p = {p}")
    out = np.zeros((3, p))
    out[:, :rank] = factor
    return out


def labels(n: int, rng: np.random.Generator) -> np.ndarray:
    """Balanced labels: ``ceil(n/2)`` entries ``+1`` and the rest ``-1``, randomly permuted.

    ``n >= 2`` (:func:`attn_lib._validation.check_tokens`): one token per class at least.
    """
    n = check_tokens(n)
    y = np.ones(n)
    y[(n + 1) // 2:] = -1.0
    return rng.permutation(y)


def draw(setting: Setting, n: int, rng: np.random.Generator) -> Sample:
    """Draw ``X = mu y^T + Z`` (shape ``(p, n)``) and the weights for ``setting``.

    Parameters
    ----------
    setting : Setting
        Model scalars.
    n : int
        Number of tokens, ``>= 2`` (one per class); ``p = max(1, round(c n))``.
    rng : numpy.random.Generator
        Source of randomness: labels are drawn first, then ``Z``.
    """
    n = check_tokens(n)
    p = setting.p(n)
    mu, w_K, w_Q = geometry(setting, p)
    y = labels(n, rng)
    X = rng.standard_normal((p, n))
    X += np.outer(mu, y)
    return Sample(X=X, y=y, mu=mu, w_K=w_K, w_Q=w_Q)
