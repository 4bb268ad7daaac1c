r"""The row-space bound: at ``c < 1`` the ridgeless error of ``Phi = X K`` against ridge's.

As ``gamma -> 0`` the interpolation error ``E(gamma) = gamma^2 y^T Q^2 y / n`` of features
``Phi`` (``p x n``) tends to the label energy outside the row space of ``Phi``,
``E(0+) = |y - P y|^2 / n`` with ``P`` the orthogonal projector onto ``range(Phi^T)`` (in
``R^n``), and ``E(gamma)`` does not decrease with ``gamma``. For ``Phi = X K`` the row space is
``K^T range(X^T)``. The linear part of the Gaussian-equivalent kernel,
``a1 (X^T M X / p - m0 I)``, maps ``range(X^T)`` into itself for every ``M`` and every scalar
``m0`` (``X^T M^T X X^T v / p - m0 X^T v`` lies in ``range(X^T)``), so with that part alone the
attention error at ``gamma -> 0`` is at least ridge's, with equality when the map is onto. The
exact zero diagonal ``diag(x_i^T M x_i) / p`` is not a multiple of the identity and breaks the
inclusion by ``O(p^{-1/2})``. The Wigner part leaves it too but, independent of the labels,
cannot gain in the limit (the book's section on the row-space bound); the entry-wise kernel at a
coherent shift of order one leaves it and gains.

:func:`ridgeless_errors` measures, on the same draws, the ridgeless error of ridge regression,
of that linear part, of the proportional-limit model (that linear part plus an independent
Wigner part ``sqrt(nu - a1^2) W / sqrt(p)``, as in
:func:`attn_lib.studies.hermite_linearisation.linearised_kernel` but with the averaged diagonal)
and of the attention kernel,
with the fraction of tokens whose label is the sign of their projection on ``mu``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import orth

from .._validation import check_int, check_setting
from ..model import data, kernel
from ..model.nonlinearity import check_nonlinearity
from ..model.setting import Setting
from ..simulation.trials import Trials

__all__ = ["ridgeless_error", "ridgeless_errors", "MODELS"]

#: The curves of :func:`ridgeless_errors`.
MODELS = ("ridge", "linear_part", "equivalent", "attention")


def ridgeless_error(Phi: np.ndarray, y: np.ndarray) -> float:
    """``|y - P y|^2 / n``, ``P`` the projector onto the row space of ``Phi`` (``gamma -> 0``).

    Parameters
    ----------
    Phi : ndarray of shape (p, n)
        Features, one column per token.
    y : ndarray of shape (n,)
        Labels.

    Returns
    -------
    float
        The limit of ``gamma^2 y^T (Phi^T Phi / n + gamma I)^{-2} y / n`` as ``gamma -> 0``; the
        row space is spanned by the right singular vectors of ``Phi`` above
        :func:`scipy.linalg.orth`'s rank tolerance.
    """
    Phi, y = np.asarray(Phi, dtype=float), np.asarray(y, dtype=float)
    if Phi.ndim != 2 or y.shape != (Phi.shape[1],):
        raise ValueError(f"Phi must be (p, n) and y (n,), got {Phi.shape} and {y.shape}")
    U = orth(Phi.T)
    r = y - U @ (U.T @ y)
    return float(r @ r / y.size)


def ridgeless_errors(setting: Setting, n: int, trials: int = 2, seed: int = 0) -> Trials:
    """Ridgeless errors of ridge and three attention kernels on the same tokens, over seeded trials.

    Trial ``t`` draws ``X = mu y^T + Z`` and the weights (:func:`attn_lib.model.data.draw`), then
    the GOE matrix of the Gaussian equivalent (:func:`attn_lib.model.data.goe`), from
    ``SeedSequence(seed).spawn(trials)[t]`` (:meth:`attn_lib.simulation.trials.Trials.run`).

    Parameters
    ----------
    setting : Setting
        Entry-wise attention with rank-one weights.
    n : int
        Tokens (``p = round(c n)``).
    trials : int, default 2
    seed : int, default 0

    Returns
    -------
    Trials
        Curves of shape ``(trials,)``: ``ridge`` (``Phi = X``), ``linear_part``
        (``Phi = X a1 (X^T M X / p - m0 I)`` with ``m0`` the mean diagonal of ``X^T M X / p``),
        ``equivalent`` (that linear part plus ``sqrt(nu - a1^2) W / sqrt(p)``, ``W`` a GOE
        matrix independent of the tokens), ``attention`` (the kernel ``f(X^T M X / sqrt p) / sqrt p``, zero
        diagonal), each :func:`ridgeless_error`; and ``sign_agreement``, the fraction of tokens
        with ``y_i = sign(mu^T x_i)``.
    """
    check_setting(setting, types=(Setting,))
    n = check_int(n, "n", low=2)
    p = setting.p(n)
    f = check_nonlinearity(setting.f)
    a0, a1 = setting.hermite.a0, setting.hermite.a1

    def trial(rng: np.random.Generator) -> dict[str, float]:
        s = data.draw(setting, n, rng)
        X, y = s.X, s.y
        assert s.w_K is not None and s.w_Q is not None  # a Setting's draw has its weights
        gram = X.T @ X
        T = kernel.logits(X, s.w_K, s.w_Q, setting.alpha, gram) / (setting.alpha * np.sqrt(p))
        linear = a1 * (T - np.mean(np.diag(T)) * np.eye(n))  # X^T M X / p - m0 I
        K = kernel.attention_kernel(X, f, s.w_K, s.w_Q, setting.alpha, a0=a0, gram=gram)
        # the proportional-limit model: the linear part plus an independent Wigner part
        K_eq = linear + (np.sqrt(setting.hermite.b2) / np.sqrt(p)) * data.goe(n, rng)
        out = {name: ridgeless_error(X @ k, y) for name, k in
               (("linear_part", linear), ("equivalent", K_eq), ("attention", K))}
        out["ridge"] = ridgeless_error(X, y)
        out["sign_agreement"] = float(np.mean(np.sign(s.mu @ X) == y))
        return out

    return Trials.run(trial, trials=trials, seed=seed, gammas=np.array(0.0), n=n, p=p)
