r"""The gradient of one draw's error with respect to the low-rank weights ``W_K, W_Q``.

With ``M = alpha I + W_K^T W_Q`` (``W_K, W_Q`` of shape ``(r, p)``, rows ``w_K^(k), w_Q^(k)``:
the convention of :func:`attn_lib.model.kernel.logits` and
:class:`~attn_lib.model.setting.RankSetting`), the logits ``T = X^T M X / sqrt(p)``, the kernel
``K`` of the setting's attention kind (entry-wise ``(f(T) - a0) / sqrt(p)`` with a zero
diagonal, or the masked column softmax divided by its scale ``s_n``) and the features
``Phi = X K``, two objectives of one draw:

* the **interpolation error** ``E = gamma^2 y^T Q^2 y / n``, ``Q = (Phi^T Phi / n + gamma)^{-1}``
  (the simulator's error, :mod:`attn_lib.simulation.resolvent`);
* the **generalisation error** ``L = ||y' - Phi'^T w||^2 / n'`` of the ridge probe
  ``w = Phi Q y / n`` fitted on the draw ``(X, y)`` and scored on a fresh sequence
  ``(X', y')`` of the same task, ``Phi' = X' K(X')`` its own attention features.

**By hand, by the adjoint method** (the choice: no dependency, and the backward pass costs less
than the forward one). With ``u = Q y`` and ``v = Q u``,

    dE/dPhi = -(2 gamma^2 / n^2) Phi (u v^T + v u^T),

so ``dE/dK = X^T dE/dPhi`` is of rank two; the generalisation error's is of rank three (and one
for the test sequence). Through the kernel, ``D = dE/dT`` is ``dE/dK o f'(T) / sqrt(p)`` (zero
diagonal) for the entry-wise kernel and ``beta A o (G - 1 (1^T (A o G)))`` (``G = dE/dA``,
each column's softmax Jacobian) for softmax; then

    dE/dW_K = (W_Q X) D^T X^T / sqrt(p),    dE/dW_Q = (W_K X) D X^T / sqrt(p).

After the forward pass (the kernel, ``Phi``, the ``n x n`` Gram matrix and its Cholesky factor)
the backward pass costs a few ``n x n`` element-wise passes and GEMMs of inner dimension ``r``:
at ``n = 2048`` the gradient is about the price of the error. An automatic-differentiation
library (JAX, autograd) would trace the same forward pass and add a large dependency for no
gain in accuracy; the test suite checks this gradient against central finite differences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .._validation import check_gamma, check_setting
from ..model import kernel
from ..model.hermite import coefficients
from ..model.nonlinearity import Nonlinearity, check_nonlinearity
from ..model.scale import softmax_scale
from ..model.setting import Entrywise, RankSetting, Setting, Softmax

__all__ = ["derivative", "Draw", "interpolation_gradient", "generalisation_gradient"]

#: Derivatives of the registered smooth functions (and of ReLU away from its kink).
_DERIVATIVES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": np.ones_like,
    "tanh": lambda t: 1.0 - np.tanh(t) ** 2,
    "cos": lambda t: -np.sin(t),
    "sin": np.cos,
    "erf": lambda t: 2.0 / np.sqrt(np.pi) * np.exp(-t * t),
    "relu": lambda t: (t > 0).astype(float),
    "quadratic": lambda t: 2.0 * t,
    "cubic": lambda t: 3.0 * t * t,
    "he3": lambda t: 3.0 * t * t - 3.0,
    "poly": lambda t: 1.0 + t,
}

Weights = tuple[np.ndarray, np.ndarray]


def derivative(f: object) -> Callable[[np.ndarray], np.ndarray]:
    """``f'`` of a nonlinearity with a registered base (its ``scale``, ``nu`` and ``theta`` included).

    Raises
    ------
    ValueError
        If the base is not in the table of derivatives (a jump such as ``sign``, or a user
        callable).
    """
    fn = check_nonlinearity(f)
    base = fn.base
    if not (isinstance(base, str) and base in _DERIVATIVES):
        raise ValueError(f"f: a derivative is known for the registered {sorted(_DERIVATIVES)}, "
                         f"got {fn!r}")
    g, a = _DERIVATIVES[base], fn.scale
    if fn.theta is not None:
        h = coefficients(Nonlinearity(base))
        th = fn.theta
        return lambda t: a * (np.cos(th) + np.sin(th) * (g(a * t) - h.a1) / np.sqrt(h.b2))
    gain = fn.gain
    return lambda t: gain * a * g(a * t)


@dataclass(frozen=True)
class Draw:
    """Tokens ``X`` (shape ``(p, n)``) and labels ``y`` (shape ``(n,)``) of one draw."""

    X: np.ndarray
    y: np.ndarray


def _check(setting: object, W_K: object, W_Q: object, X: np.ndarray
           ) -> tuple[Setting | RankSetting, np.ndarray, np.ndarray]:
    s = check_setting(setting, types=(Setting, RankSetting), attention=(Entrywise, Softmax))
    if s.alpha != 1.0:
        raise ValueError(f"setting.alpha must be 1 (M = I + W_K^T W_Q), got {s.alpha}")
    Wk, Wq = np.atleast_2d(np.asarray(W_K, dtype=float)), np.atleast_2d(np.asarray(W_Q, dtype=float))
    p = X.shape[0]
    if Wk.ndim != 2 or Wk.shape != Wq.shape or Wk.shape[1] != p:
        raise ValueError(f"W_K and W_Q must both have shape (r, p) with p = {p}, got "
                         f"{Wk.shape} and {Wq.shape}")
    return s, Wk, Wq


def _kernel(setting: Setting | RankSetting, X: np.ndarray, W_K: np.ndarray, W_Q: np.ndarray
            ) -> tuple[np.ndarray, Callable[[np.ndarray], Weights]]:
    """The kernel ``K`` (``(n, n)``) and its pull-back ``dE/dK -> (dE/dW_K, dE/dW_Q)``.

    Entry-wise: ``K = (f(T) - a0) / sqrt(p)`` with a zero diagonal, ``a0 = setting.hermite.a0``
    (the simulator's centring). Softmax: ``K = A / s_n`` (:func:`~attn_lib.model.scale.softmax_scale`),
    so that the setting's ``gamma`` is the effective one of the simulator and the theory.
    """
    p, n = X.shape
    root = np.sqrt(p)
    T = kernel.logits(X, W_K, W_Q)
    kind = setting.attention
    if isinstance(kind, Softmax):
        scale = 1.0 / softmax_scale(setting, n)
        A = kernel.softmax_columns(T, kind.beta, kind.mask)   # in place on T
        K = A * scale

        def logit_adjoint(G: np.ndarray) -> np.ndarray:
            G = G * scale
            return kind.beta * A * (G - np.sum(A * G, axis=0))
    else:
        f = check_nonlinearity(setting.f)
        fprime = derivative(f)(T) / root
        K = kernel.apply(f, T, p, a0=setting.hermite.a0)

        def logit_adjoint(G: np.ndarray) -> np.ndarray:
            D = G * fprime
            np.fill_diagonal(D, 0.0)
            return D

    def pullback(G: np.ndarray) -> Weights:
        D = logit_adjoint(G)
        return (W_Q @ X) @ D.T @ X.T / root, (W_K @ X) @ D @ X.T / root

    return K, pullback


def _probe(Phi: np.ndarray, y: np.ndarray, gamma: float
           ) -> tuple[tuple[np.ndarray, bool], np.ndarray]:
    """Cholesky factor of ``Phi^T Phi / n + gamma`` and ``u = Q y``."""
    n = y.size
    G = Phi.T @ Phi
    G /= n
    G[np.diag_indices(n)] += gamma
    cho = linalg.cho_factor(G, lower=True, overwrite_a=True, check_finite=False)
    return cho, linalg.cho_solve(cho, y, check_finite=False)


def interpolation_gradient(setting: Setting | RankSetting, draw: Draw, W_K: np.ndarray,
                           W_Q: np.ndarray, gamma: float) -> tuple[float, np.ndarray, np.ndarray]:
    r"""``E = gamma^2 y^T Q^2 y / n`` of one draw and its gradient in ``W_K, W_Q``.

    Parameters
    ----------
    setting : Setting or RankSetting
        The attention kind, ``f`` and its centring (``setting.hermite.a0``); ``alpha = 1``. Its
        Gram matrix is not used: the weights are ``W_K, W_Q``.
    draw : Draw
        Tokens ``X`` (``(p, n)``) and labels ``y``.
    W_K, W_Q : ndarray of shape (r, p) or (p,)
        ``M = I + W_K^T W_Q``.
    gamma : float
        Ridge parameter ``> 0`` (for softmax the effective one, as in the simulator).

    Returns
    -------
    E : float
    dW_K, dW_Q : ndarray of shape (r, p)

    Notes
    -----
    ``dE/dK = -(2 gamma^2 / n^2) X^T Phi (u v^T + v u^T)`` with ``u = Q y``, ``v = Q u``
    (module docstring); ``E = gamma^2 ||u||^2 / n``.
    """
    X, y = draw.X, draw.y
    s, Wk, Wq = _check(setting, W_K, W_Q, X)
    g = check_gamma(gamma)
    n = y.size
    K, pullback = _kernel(s, X, Wk, Wq)
    Phi = X @ K
    cho, u = _probe(Phi, y, g)
    v = linalg.cho_solve(cho, u, check_finite=False)
    a, b = X.T @ (Phi @ u), X.T @ (Phi @ v)
    G = np.outer(a, v)
    G += np.outer(b, u)
    G *= -2.0 * g * g / (n * n)
    dWk, dWq = pullback(G)
    return float(g * g * (u @ u) / n), dWk, dWq


def generalisation_gradient(setting: Setting | RankSetting, train: Draw, test: Draw,
                            W_K: np.ndarray, W_Q: np.ndarray, gamma: float
                            ) -> tuple[float, np.ndarray, np.ndarray]:
    r"""Test error ``L = ||y' - Phi'^T w||^2 / n'`` of the probe fitted on ``train``, and its gradient.

    ``w = Phi Q y / n = Phi u / n`` is the ridge probe on the training features ``Phi = X K(X)``;
    the test sequence's features are ``Phi' = X' K(X')`` (its own attention, the same weights).

    Parameters
    ----------
    setting, W_K, W_Q, gamma
        As for :func:`interpolation_gradient`.
    train, test : Draw
        The draw the probe is fitted on and a fresh one of the same task (same ``p``).

    Returns
    -------
    L : float
    dW_K, dW_Q : ndarray of shape (r, p)

    Notes
    -----
    With the residual ``r' = y' - Phi'^T w``, ``g = -(2 / n') Phi' r'`` (``dL/dw``),
    ``h = Q Phi^T g`` and ``z = Phi u``:

        dL/dPhi' = -(2 / n') w r'^T,    dL/dPhi = g u^T / n - (z h^T + Phi h u^T) / n^2.
    """
    X, y = train.X, train.y
    s, Wk, Wq = _check(setting, W_K, W_Q, X)
    if test.X.shape[0] != X.shape[0]:
        raise ValueError(f"test.X must have p = {X.shape[0]} rows, got {test.X.shape[0]}")
    gm = check_gamma(gamma)
    n, m = y.size, test.y.size
    K, pull = _kernel(s, X, Wk, Wq)
    Kt, pull_t = _kernel(s, test.X, Wk, Wq)
    Phi, Phit = X @ K, test.X @ Kt
    cho, u = _probe(Phi, y, gm)
    z = Phi @ u
    w = z / n
    res = test.y - Phit.T @ w
    g = Phit @ res
    g *= -2.0 / m
    h = linalg.cho_solve(cho, Phi.T @ g, check_finite=False)
    # dL/dK = X^T dL/dPhi, of rank three
    G = np.outer(X.T @ g, u / n)
    G -= np.outer(X.T @ z, h / (n * n))
    G -= np.outer(X.T @ (Phi @ h), u / (n * n))
    Gt = np.outer(test.X.T @ w, res * (-2.0 / m))
    dWk, dWq = pull(G)
    dWk_t, dWq_t = pull_t(Gt)
    return float(res @ res / m), dWk + dWk_t, dWq + dWq_t
