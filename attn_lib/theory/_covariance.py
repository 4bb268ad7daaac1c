r"""Deterministic equivalents for tokens with a general covariance ``C`` (attention and ridge).

Model
-----
Tokens ``x_i = y_i mu + C^{1/2} z_i`` (``p x n``, ``c = p/n``, :class:`~attn_lib.model.setting.CovarianceSetting`),
logits ``T_ij = x_i^T M x_j / sqrt(p)`` for any ``p x p`` matrix ``M`` (rows: keys), kernel
``K = f(T) / sqrt(p)`` with zero diagonal, ``Phi = X K``, ``E(gamma) = gamma^2 y^T Q^2 y / n``.
This is the pencil of :mod:`attn_lib.theory._matrix` (its module docstring has the variables
and blocks) with ``Y = C^{1/2} Z / sqrt(p)`` in place of ``Z / sqrt(p)``; ``C = I`` gives it back.

What changes with ``C`` (``book/derivation_covariance.md`` derives each step):

* the logit scale, where ``f`` is linearised: ``sigma^2 = tr(C M C M^T) / p`` (the variance of
  ``z_i^T C^{1/2} M C^{1/2} z_j / sqrt(p)``), so ``a1, b2`` are read at that ``sigma`` and
  ``M' = M / sigma``;
* the removed diagonal: ``Y^T M' Y`` has the diagonal ``tr(C M') / p``, so ``k0 = rho tr(C M') / p``;
* the Gaussian integration by parts: ``E[Y B Y^T] = tr(B) / p C`` and ``E[Y^T A Y] = tr(C A) / p I``,
  so the n-side self-energy takes the traces ``tr(C Gbar_pp[pi, sigma]) / p`` and the p-side one
  is ``Sigma_pp = s (x) C`` (``s`` the ``5 x 5`` of :func:`~._matrix._sigma_pp`).

The signal step (one Woodbury step, :func:`~._matrix._woodbury`) is unchanged: it takes the
forms ``mu^T Gbar_pp[pi, sigma] mu`` of the new p-side resolvent.

The p-side resolvent
--------------------
``Gbar_pp = (L0_pp - s (x) C)^{-1}`` with ``L0_pp`` the identity but for ``-M'`` at (d', d) and
``-M'^T`` at (q', q). In the eigenbasis of ``C = V diag(lam) V^T`` write
``V^T M' V = alpha I + U W^T`` (rank ``r``; :func:`_low_rank`): the part without ``U W^T`` is
block diagonal, one ``5 x 5`` block ``(I - alpha E - lam_k s)^{-1}`` per eigenvalue, and
``U W^T`` is a Woodbury step of rank ``2 r``. A trace costs ``O(p r^2)``, no ``p x p`` work after
the eigendecomposition of ``C`` and ``M`` in its basis (``O(p^3)`` once). A dense ``M`` has
``r`` up to ``p`` and costs ``O(p^3)`` per trace: meant for ``p`` up to a few hundred; the
book's matrices ``I`` and ``I + w w^T`` have ``r = 0`` and ``1``.

Numerics
--------
Newton's method on the nine n-side unknowns ``g`` at each ``gamma`` along the continuation path of
:mod:`~._matrix` (:func:`~._matrix._path`, :func:`~._matrix._predict`), the Jacobian of the whole
fixed-point map by complex steps (:func:`~._matrix._complex_step`: exact to rounding), residual
below ``1e-12`` relative (``1e-6`` between the requested ``gamma``) then one last step;
``E = -gamma^2 d(y^T Q y / n)/dgamma`` by the implicit function theorem, as in :mod:`~._matrix`.

Ridge
-----
``Phi = X``: the standard equivalent (Silverstein; Couillet and Liao 2022, ch. 2 and 4)
``g = 1 / (gamma + tr(C (I + g C)^{-1}) / n)`` and ``y^T Q y / n = g / (1 + g mu^T (I + g C)^{-1} mu)``,
with the derivative in closed form (:func:`ridge_form`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import optimize

from ..model import hermite
from ..model.nonlinearity import NonlinearityLike
from ..model.setting import CovarianceSetting
from .._validation import check_gammas
from ._errors import ConvergenceError
from ._matrix import _complex_step, _n_side, _path, _predict, _sigma_pp, _woodbury

__all__ = ["covariance_resolvent_form", "ridge_form"]

_NEWTON_TOL = 1e-12
_PATH_TOL = 1e-6
_MAX_ITER = 60
_RANK_TOL = 1e-10


def _low_rank(A: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``(alpha, U, W)`` with ``A = alpha I + U W^T``, ``U, W`` of shape ``(p, r)`` and ``r`` the
    numerical rank of ``A - alpha I``.

    ``alpha`` is the median eigenvalue of the symmetric part (``alpha I + rank r`` has at least
    ``p - 2 r`` eigenvalues ``alpha``); the rank is cut by a pivoted QR at ``1e-10`` of the
    larger of ``|alpha|`` and the largest diagonal of its triangle (``r = p`` for a matrix of no
    such form)."""
    from scipy import linalg

    p = A.shape[0]
    alpha = float(np.median(np.linalg.eigvalsh((A + A.T) / 2.0)))
    R = A - alpha * np.eye(p)
    Q, T, piv = linalg.qr(R, pivoting=True, mode="economic")
    d = np.abs(np.diag(T))
    r = int(np.sum(d > _RANK_TOL * max(float(d.max()), abs(alpha))))
    Wt = np.empty((r, p))
    Wt[:, piv] = T[:r]
    return alpha, Q[:, :r], Wt.T


class _PSide:
    """The p-side resolvent ``(L0_pp - s (x) C)^{-1}`` in the eigenbasis of ``C``: its traces
    ``tr(C G[a, b]) / p`` and its forms ``m^T G[a, b] m`` (``5 x 5`` each) for any ``s``
    (complex allowed), see the module docstring.

    Parameters
    ----------
    lam : ndarray of shape (p,)
        Eigenvalues of ``C``.
    alpha, U, W
        ``V^T M' V = alpha I + U W^T`` (:func:`_low_rank`).
    m : ndarray of shape (p,) or None
        The signal in the eigenbasis, ``V^T mu``.
    """

    def __init__(self, lam: np.ndarray, alpha: float, U: np.ndarray, W: np.ndarray,
                 m: np.ndarray | None):
        self.lam, self.alpha, self.U, self.W, self.m = lam, alpha, U, W, m
        self.p = lam.size
        base = np.eye(5)
        base[1, 0] = base[4, 3] = -alpha
        self.base = base

    def blocks(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(traces, forms)`` at the p-side coefficients ``S`` (5 x 5, :func:`~._matrix._sigma_pp`)."""
        lam, U, W, m = self.lam, self.U, self.W, self.m
        G0 = np.linalg.inv(self.base[None] - lam[:, None, None] * S[None])     # (p, 5, 5)
        traces = np.einsum("k,kab->ab", lam, G0) / self.p
        forms = None if m is None else np.einsum("k,kab->ab", m * m, G0)
        if U.shape[1]:
            # G = G0 + A Kinv B^T: A = G0 Ub (p, 5, 2r), B = G0^T Vb, Ub = [e_d' U, e_q' W],
            # Vb = [e_d W, e_q U] (the (d', d) block -U W^T and the (q', q) block -W U^T)
            A = np.concatenate([G0[:, :, 1, None] * U[:, None, :], G0[:, :, 4, None] * W[:, None, :]], axis=2)
            B = np.concatenate([G0[:, 0, :, None] * W[:, None, :], G0[:, 3, :, None] * U[:, None, :]], axis=2)
            core = np.eye(A.shape[2]) - np.concatenate([W.T @ A[:, 0, :], U.T @ A[:, 3, :]], axis=0)
            AK = A @ np.linalg.inv(core)
            traces = traces + np.einsum("kaj,kbj->ab", AK * lam[:, None, None], B) / self.p
            if m is not None and forms is not None:
                forms = forms + np.einsum("k,kaj->aj", m, AK) @ np.einsum("k,kbj->jb", m, B)
        return traces, forms


def _solve_point(g: np.ndarray, side: _PSide, c: float, rho: float, k0: float, b2: float,
                 gamma: float, tol: float) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """Newton on the nine n-side unknowns at one ``gamma``; returns ``(g, J, res, converged)``
    with ``J`` the Jacobian (9 x 9) of ``Phi(g) - g`` at the last iterate."""
    def residual(e: np.ndarray) -> np.ndarray:
        return _n_side(side.blocks(_sigma_pp(e, rho, c))[0], e, rho, k0, b2, gamma) - e

    res = np.inf
    for _ in range(_MAX_ITER):
        r0, J = _complex_step(residual, g)
        scale = np.abs(g).max()
        res = float(np.abs(r0).max())
        step = np.linalg.solve(J, -r0.ravel()).reshape(3, 3)
        if res < tol * scale:
            return g + step, J, res, True
        big = np.abs(step).max() / scale
        g = g + step * min(1.0, 0.5 / big)
    return g, J, res, False


def covariance_resolvent_form(c: float, Mh: np.ndarray, m: np.ndarray | None, lam: np.ndarray,
                              f: NonlinearityLike, gammas: object) -> tuple[np.ndarray, np.ndarray]:
    """``(y^T Q y / n, E)`` on a grid of ``gamma`` for tokens of covariance ``C`` (module docstring).

    Parameters
    ----------
    c : float
        ``p / n``.
    Mh : ndarray of shape (p, p)
        The key-query matrix (rows: keys), any scale, in the eigenbasis ``V`` of ``C``:
        ``V^T M V`` (:attr:`~attn_lib.model.setting.CovarianceSetting.rotated_M`).
    m : ndarray of shape (p,) or None
        Half the difference of the class means in that basis, ``V^T mu``.
    lam : ndarray of shape (p,)
        The eigenvalues of ``C``.
    f : str or callable
        Nonlinearity.
    gammas : array_like of shape (G,)

    Returns
    -------
    form, error : ndarray of shape (G,)
    """
    lam = np.clip(lam, 0.0, None)
    g_arr = np.atleast_1d(check_gammas(gammas))
    p = lam.size
    sigma = float(np.sqrt(np.einsum("k,kl,l,kl->", lam, Mh, lam, Mh) / p))
    if not sigma > 0.0:
        raise ValueError("M and C give logits of zero variance: tr(C M C M^T) = 0")
    Mh = Mh / sigma
    h = hermite.coefficients(f, sigma)
    rho, b2 = np.sqrt(c) * h.a1, h.b2
    k0 = rho * float(lam @ np.diag(Mh)) / p
    alpha, U, W = _low_rank(Mh)
    side = _PSide(lam, alpha, U, W, m)
    targets = np.unique(g_arr)[::-1]
    path = _path(targets)
    g = np.linalg.inv(np.array([[path[0], 0.0, -k0], [k0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    out: dict[Any, tuple[Any, Any]] = {}
    points: list[tuple[Any, np.ndarray, np.ndarray]] = []
    for gam in path:
        if points:
            g = _predict(points, gam)
        tol = _NEWTON_TOL if gam in targets else _PATH_TOL
        g, J, res, ok = _solve_point(g, side, c, rho, k0, b2, gam, tol)
        if not ok:
            raise ConvergenceError(f"covariance fixed point did not converge at gamma={gam:.6g}: "
                                   f"last residual {res:.3g}")
        dg = np.linalg.solve(J, np.outer(g[:, 0], g[0, :]).ravel())
        points.append((np.log(gam), g, gam * dg.reshape(3, 3)))
        if gam in targets:
            if m is None:
                q, dq = g[0, 0], dg[0]
            else:
                def form(e: np.ndarray) -> Any:
                    t = side.blocks(_sigma_pp(e, rho, c))[1]
                    return _woodbury(e, t, c, rho)
                qv, grad = _complex_step(form, g)
                q, dq = float(qv), grad[0] @ dg
            out[gam] = (q, -gam ** 2 * dq)
    form_, error = np.array([out[x] for x in g_arr]).T
    return form_, error


def ridge_form(c: float, mu: np.ndarray, C_spectrum: tuple[np.ndarray, np.ndarray],
               gammas: object) -> tuple[np.ndarray, np.ndarray]:
    r"""``(y^T Q y / n, E)`` of ridge (``Phi = X``) for tokens of covariance ``C``.

    ``g`` solves ``g (gamma + (1/n) sum_k lam_k / (1 + g lam_k)) = 1`` (increasing in ``g``, a
    root in ``(0, 1/gamma]``), ``t = sum_k m_k^2 / (1 + g lam_k)`` with ``m = V^T mu``, and
    ``q = g / (1 + g t)``; ``g' = -g^2 / (1 - g^2 S_2)``, ``S_2 = (1/n) sum lam^2 / (1 + g lam)^2``,
    ``t' = -g' sum m_k^2 lam_k / (1 + g lam_k)^2``, ``q' = (g' - g^2 t') / (1 + g t)^2`` and
    ``E = -gamma^2 q'``. With ``1/n = c / p``.
    """
    lam, V = C_spectrum
    lam = np.clip(lam, 0.0, None)
    p = lam.size
    m2 = (V.T @ mu) ** 2
    g_arr = np.atleast_1d(check_gammas(gammas))
    q, E = np.empty(g_arr.shape), np.empty(g_arr.shape)
    for i, gam in enumerate(g_arr):
        def F(x: float) -> float:
            return float(x * (gam + c / p * np.sum(lam / (1.0 + x * lam))) - 1.0)
        g = optimize.brentq(F, 0.0, 1.0 / gam, xtol=1e-300, rtol=1e-15)
        d = 1.0 + g * lam
        t = float(np.sum(m2 / d))
        s2 = c / p * float(np.sum(lam ** 2 / d ** 2))
        dg = -g * g / (1.0 - g * g * s2)
        dt = -dg * float(np.sum(m2 * lam / d ** 2))
        q[i] = g / (1.0 + g * t)
        E[i] = -gam ** 2 * (dg - g * g * dt) / (1.0 + g * t) ** 2
    return q, E


def setting_form(setting: CovarianceSetting, gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`covariance_resolvent_form` of a :class:`~attn_lib.model.setting.CovarianceSetting`."""
    lam, V = setting.spectrum
    return covariance_resolvent_form(setting.c, setting.rotated_M, V.T @ setting.mu, lam, setting.f, gammas)
