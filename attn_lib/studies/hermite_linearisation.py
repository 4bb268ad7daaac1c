r"""The Gaussian-equivalent (linearised) attention kernel, built from the same tokens ``X``.

For ``W_K^T W_Q = alpha I + w_K w_Q^T`` the kernel arguments are ``t_ij = x_i^T W x_j / sqrt(p)``,
of variance ``alpha^2`` off the diagonal, and the Hermite data ``a1, a2, nu`` of the
:class:`~attn_lib.model.setting.Setting` are those of ``f(alpha .)``. With ``M = W / alpha`` the
linearisation is (``i != j``; zero diagonal)

    K_lin = a1 (X^T M X / p - diag) + sqrt(nu - a1^2) G / sqrt(p)
            + a2 / sqrt(2) (eta 1^T + 1 eta^T) / p,      eta_i = sqrt(p) (x_i^T M x_i / p - 1),

where ``G`` is an independent GOE matrix with zero diagonal (:func:`attn_lib.model.data.goe`).
The theory keeps only the first two terms (the ``a2`` directions are asymptotically orthogonal
to the labels); both variants are available so that the claim can be measured.

Functions here measure ``||K - K_lin||_op`` and the gap in the interpolation error on the same
draw (:func:`attn_lib.simulation.resolvent.interpolation_error`), over seeded trials
(:meth:`attn_lib.simulation.trials.Trials.run`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import svds

from ..model import data, kernel
from .._validation import check_gammas, check_int, check_setting
from ..model.nonlinearity import check_nonlinearity
from ..model.setting import Setting
from ..simulation.resolvent import interpolation_error
from ..simulation.trials import Trials

__all__ = ["KernelPair", "linearised_kernel", "kernel_pair", "operator_norm", "error_gap"]


@dataclass(frozen=True)
class KernelPair:
    """One draw with its true kernel and the linearised kernels (all ``(n, n)``)."""

    sample: data.Sample
    K: np.ndarray
    K_lin: np.ndarray
    K_lin_no_a2: np.ndarray
    G: np.ndarray


def linearised_kernel(sample: data.Sample, setting: Setting, G: np.ndarray,
                      include_a2: bool = True, gram: np.ndarray | None = None) -> np.ndarray:
    """``K_lin`` (shape ``(n, n)``) of the module docstring for the tokens of ``sample``.

    Parameters
    ----------
    sample : Sample
        Tokens ``X`` (``p x n``) and weights from :func:`attn_lib.model.data.draw`.
    setting : Setting
        Supplies ``alpha`` and the Hermite data of ``f(alpha .)``.
    G : ndarray of shape (n, n)
        GOE matrix with zero diagonal (:func:`attn_lib.model.data.goe`).
    include_a2 : bool, default True
        Add the rank-two ``a2`` correction.
    gram : ndarray of shape (n, n), optional
        A precomputed ``X^T X`` (see :func:`attn_lib.model.kernel.logits`).
    """
    X = sample.X
    p, n = X.shape
    h = setting.hermite
    b = np.sqrt(h.b2)
    assert sample.w_K is not None and sample.w_Q is not None  # a Setting's draw
    T = kernel.logits(X, sample.w_K, sample.w_Q, setting.alpha, gram) / (setting.alpha * np.sqrt(p))  # X^T M X / p
    diag = np.diag(T).copy()
    K = h.a1 * T
    K += (b / np.sqrt(p)) * G
    if include_a2 and h.a2 != 0.0:
        eta = np.sqrt(p) * (diag - 1.0)
        K += (h.a2 / np.sqrt(2.0) / p) * (eta[:, None] + eta[None, :])
    np.fill_diagonal(K, 0.0)
    return K


def kernel_pair(setting: Setting, n: int, rng: np.random.Generator) -> KernelPair:
    """Draw ``X``, then the true kernel and both linearisations on the same ``X``.

    ``rng`` draws the sample first (as :func:`attn_lib.model.data.draw`), then the GOE part.
    """
    check_setting(setting)
    n = check_int(n, "n", low=2)
    s = data.draw(setting, n, rng)
    func = check_nonlinearity(setting.f)
    a0 = setting.hermite.a0
    XtX = s.X.T @ s.X                 # shared by the true kernel and both linearisations
    assert s.w_K is not None and s.w_Q is not None  # a Setting's draw
    K = kernel.attention_kernel(s.X, func, s.w_K, s.w_Q, setting.alpha, a0=a0, gram=XtX)
    G = data.goe(n, rng)
    return KernelPair(sample=s, K=K, K_lin=linearised_kernel(s, setting, G, True, XtX),
                      K_lin_no_a2=linearised_kernel(s, setting, G, False, XtX), G=G)


def operator_norm(A: np.ndarray) -> float:
    """Largest singular value of ``A`` (Lanczos via :func:`scipy.sparse.linalg.svds`, ``k = 1``).

    For ``n >= 64`` this is several times faster than a full SVD (``numpy.linalg.norm(A, 2)``),
    which is used for small matrices.
    """
    A = np.asarray(A, dtype=float)
    if min(A.shape) < 64:
        return float(np.linalg.norm(A, 2))
    v0 = np.ones(min(A.shape)) / np.sqrt(min(A.shape))
    return float(svds(A, k=1, return_singular_vectors=False, v0=v0, tol=1e-8)[0])


def error_gap(setting: Setting, gammas: object, n: int, trials: int = 1,
              seed: int = 0) -> Trials:
    """Errors of the true and the linearised kernels on the same draws, over seeded trials.

    Trial ``t`` draws one :func:`kernel_pair` from ``SeedSequence(seed).spawn(trials)[t]``
    (:meth:`attn_lib.simulation.trials.Trials.run`).

    Parameters
    ----------
    setting : Setting
    gammas : float or array_like of shape (G,)
        Positive ridge parameters.
    n : int
        Tokens, ``>= 2``.
    trials : int, default 1
    seed : int, default 0

    Returns
    -------
    Trials
        Curves ``E_true, E_lin, E_lin_no_a2`` (shape ``(trials, *gammas.shape)``),
        ``gap = E_lin - E_true`` and, of shape ``(trials,)``, the operator norms
        ``op_K_minus_Klin``, ``op_K_minus_Klin_no_a2``, ``op_K`` and ``op_residual``, the norm of
        ``K`` minus the ``a1`` and ``a2`` parts (its Wigner-like remainder), next to the GOE
        prediction ``semicircle_edge = 2 sqrt(b2 n / p)`` (the same in every trial).

    Notes
    -----
    The Wigner part of ``K_lin`` is independent of ``X``, so ``||K - K_lin||_op`` does not vanish
    (it is about ``2 sqrt(2 b2 n / p)``): the equivalence holds in distribution, not entry-wise.
    ``op_residual`` close to ``semicircle_edge`` shows that no low-rank part was missed.
    """
    g = check_gammas(gammas)
    check_setting(setting)
    n = check_int(n, "n", low=2)
    p = setting.p(n)
    b2 = setting.hermite.b2

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray | float]:
        kp = kernel_pair(setting, n, rng)
        X, y = kp.sample.X, kp.sample.y
        E: dict[str, np.ndarray | float] = {name: interpolation_error(X @ K, y, g)
             for name, K in (("E_true", kp.K), ("E_lin", kp.K_lin), ("E_lin_no_a2", kp.K_lin_no_a2))}
        E["gap"] = E["E_lin"] - E["E_true"]
        E["op_K_minus_Klin"] = operator_norm(kp.K - kp.K_lin)
        E["op_K_minus_Klin_no_a2"] = operator_norm(kp.K - kp.K_lin_no_a2)
        E["op_K"] = operator_norm(kp.K)
        # the structured part alone: K minus everything but the Wigner part should look like a
        # GOE matrix of variance b2/p, whose norm tends to the semicircle edge 2 sqrt(b2 n / p)
        E["op_residual"] = operator_norm(kp.K - kp.K_lin + np.sqrt(b2 / p) * kp.G)
        E["semicircle_edge"] = float(2.0 * np.sqrt(b2 * n / p))
        return E

    return Trials.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)
