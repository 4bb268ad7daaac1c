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
The nine n-side unknowns ``g`` at each ``gamma`` along the continuation path of the shared
driver (:func:`~attn_lib.theory._continuation.descend`: from ``max(10, 10 max gamma)`` in steps of
ratio at most 10, a step that fails within ``_TRY_ITER`` corrector steps split in two), each
point predicted by :func:`~._matrix._predict` and corrected by a quasi-Newton method
(:func:`_quasi_newton`: the Jacobian of the whole fixed-point map by complex steps,
:func:`~._matrix._complex_step`, then Broyden updates, one evaluation of the map per step), to a
residual below ``1e-12`` relative (``1e-6`` between the requested ``gamma``), then the exact
Jacobian and one last Newton step; ``E = -gamma^2 d(y^T Q y / n)/dgamma`` by the implicit function
theorem, as in :mod:`~._matrix`.

Two class covariances
---------------------
:func:`two_covariance_form` (``x_i = y_i mu + C_{y_i}^{1/2} z_i``, ``C_+- = C +- Delta``;
``book/derivation_covariance.md``, section *Two class covariances*): the n-side splits into the
two classes (18 unknowns), the p-side self-energy is ``Sc (x) C + Sd (x) Delta``
(:class:`_TwoPSide`), each pair of classes reads ``f`` at its own logit scale
``tr(C_a M C_b M^T) / p`` (block means ``d_ab``, linear coefficients, GOE variances), and the
signal step (:func:`_woodbury2`) also carries the kernel's block means and the row and column
offsets of the tokens' own logit variances (:func:`_fluctuations`). ``C_+ = C_-`` gives
:func:`covariance_resolvent_form` back.

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
from ..model.nonlinearity import NonlinearityLike, check_nonlinearity
from ..model.setting import CovarianceSetting
from .._validation import check_gammas
from ._errors import ConvergenceError
from ._continuation import descend
from ._matrix import (_H, _MAX_ATTEMPTS, _MAX_RATIO_STEP, _MIN_SPLIT, _PI, _SIG, _TRY_ITER, _Y, _YT,
                      _complex_step, _n_side, _predict, _sigma_pp, _woodbury)

__all__ = ["covariance_resolvent_form", "ridge_form", "two_covariance_form", "class_setting_form"]

_NEWTON_TOL = 1e-12
_PATH_TOL = 1e-6
_MAX_ITER = 60
_RANK_TOL = 1e-10
_SKETCH = 16                        # columns of the sketch that finds a low rank in _low_rank
_DELTA_RANK = 0                     # rank kept of Delta's part off C's eigenbasis diagonal (first order exact)


def _low_rank(A: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``(alpha, U, W)`` with ``A = alpha I + U W^T``, ``U, W`` of shape ``(p, r)`` and ``r`` the
    numerical rank of ``A - alpha I``.

    ``alpha`` is the median eigenvalue of the symmetric part (``alpha I + rank r`` has at least
    ``p - 2 r`` eigenvalues ``alpha``); the rank is cut by a pivoted QR at ``1e-10`` of the
    larger of ``|alpha|`` and the largest diagonal of its triangle (``r = p`` for a matrix of no
    such form). A rank below ``_SKETCH`` is found first from ``R Omega`` (``Omega`` a fixed
    Gaussian ``p x _SKETCH``: ``O(p^2)`` work): its orthonormal range ``Q`` gives
    ``R = Q (Q^T R)`` when that reproduces ``R`` to ``1e-12`` relative."""
    from scipy import linalg

    p = A.shape[0]
    alpha = float(np.median(np.linalg.eigvalsh((A + A.T) / 2.0)))
    R = A - alpha * np.eye(p)
    k = min(p, _SKETCH)
    Y = R @ np.random.default_rng(0).standard_normal((p, k))
    Qy, sv, _ = np.linalg.svd(Y, full_matrices=False)
    r = int(np.sum(sv > _RANK_TOL * max(float(sv[0]) if sv.size else 0.0, abs(alpha))))
    if r < k:
        Qr = Qy[:, :r]
        Wt = Qr.T @ R
        if np.linalg.norm(R - Qr @ Wt) <= 1e-12 * max(float(np.linalg.norm(R)), abs(alpha)):
            return alpha, Qr, Wt.T
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
                 gamma: float, tol: float, J: np.ndarray | None = None, max_iter: int = _MAX_ITER
                 ) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """The nine n-side unknowns at one ``gamma`` by :func:`_quasi_newton`."""
    def residual(e: np.ndarray) -> np.ndarray:
        return _n_side(side.blocks(_sigma_pp(e, rho, c))[0], e, rho, k0, b2, gamma) - e

    return _quasi_newton(residual, g, tol, J, max_iter)


def _quasi_newton(residual: Any, g: np.ndarray, tol: float, J: np.ndarray | None,
                  max_iter: int) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """A zero of ``residual`` (``Phi(g) - g``, any shape) from ``g``: ``(g, J, res, ok)``.

    The Jacobian ``J`` (``g.size`` square) by complex steps (:func:`~._matrix._complex_step`)
    where none is given (or after three steps without a halving of the residual, or when a
    secant step does not halve it), Broyden's update after each step (one evaluation of the map
    per step), steps cut to half the size of ``g``; at most ``max_iter`` steps. Once the
    residual is below ``tol`` (relative) the exact Jacobian is taken there (for ``dg/dgamma``)
    and one last Newton step made with it."""
    r0 = residual(g)
    res, best, stall = float(np.abs(r0).max()), np.inf, 0
    for _ in range(max_iter):
        scale = np.abs(g).max()
        if res < tol * scale:
            r0, J = _complex_step(residual, g)
            return g + np.linalg.solve(J, -r0.ravel()).reshape(g.shape), J, res, True
        fresh = J is None or stall >= 3
        if fresh:
            r0, J = _complex_step(residual, g)
            best, stall = res, 0
        assert J is not None
        step = np.linalg.solve(J, -r0.ravel())
        step *= min(1.0, 0.5 * scale / np.abs(step).max())
        r1 = residual(g + step.reshape(g.shape))
        res1 = float(np.abs(r1).max())
        if res1 > 0.5 * res and not fresh:    # a poor secant: retry with the exact Jacobian
            stall = 3
            continue
        g = g + step.reshape(g.shape)
        J = J + np.outer((r1 - r0).ravel() - J @ step, step) / (step @ step)
        r0, res = r1, res1
        if res < best / 2:
            best, stall = res, 0
        else:
            stall += 1
    assert J is not None
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

    def value(g: np.ndarray, dg: np.ndarray) -> tuple[float, float]:
        if m is None:
            return g[0, 0], dg[0]

        def form(e: np.ndarray) -> Any:
            return _woodbury(e, side.blocks(_sigma_pp(e, rho, c))[1], c, rho)
        qv, grad = _complex_step(form, g)
        return float(qv), float(grad[0] @ dg)

    out = _continue(
        g_arr, lambda gam: np.linalg.inv(np.array([[gam, 0.0, -k0], [k0, 1.0, 0.0], [0.0, 0.0, 1.0]])),
        lambda g, gam, tol, J, it: _solve_point(g, side, c, rho, k0, b2, gam, tol, J, it),
        lambda g: np.outer(g[:, 0], g[0, :]).ravel(), value, "covariance fixed point")
    form_, error = np.array([out[x] for x in g_arr]).T
    return form_, error


# ---------------------------------------------------------------------------------------------
# Two class covariances


_Y_KERNEL = (True, False, True)     # the Y blocks (d, x), (b, a), (q, t): the kernel's or X's
_YT_KERNEL = (True, True, False)    # the Y^T blocks (x, q'), (a, d'), (t, b)


def _weights(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(wY, wYT)`` of shape ``(2, 3)``: the class weight ``u_a`` of each ``Y`` block (by its
    n-column x, a, t) and ``Y^T`` block (by its n-row), ``1`` for the blocks of ``X`` itself."""
    wy = np.array([[u[a] if k else 1.0 for k in _Y_KERNEL] for a in range(2)])
    wyt = np.array([[u[a] if k else 1.0 for k in _YT_KERNEL] for a in range(2)])
    return wy, wyt


def _sigma_pp2(g: np.ndarray, rho: float, c: float, wy: np.ndarray, wyt: np.ndarray) -> np.ndarray:
    """The two classes' p-side coefficients ``s_a`` (``(2, 5, 5)``, as :func:`~._matrix._sigma_pp`
    with the blocks' class weights): ``Sigma_pp = (s_+ (x) C_+ + s_- (x) C_-) / 2``."""
    S = np.zeros((2, 5, 5), dtype=g.dtype)
    yt = np.array([rho, -rho, -1.0])
    for a in range(2):
        for r, cn in _Y:
            for k, (cn2, s) in enumerate(_YT):
                S[a, r, s] -= yt[k] * wy[a, cn] * wyt[a, cn2] * g[a, cn, cn2] / c
    return S


def _n_side2(T: np.ndarray, g: np.ndarray, rho: float, wy: np.ndarray, wyt: np.ndarray,
             k0: np.ndarray, b2: np.ndarray, gamma: float) -> np.ndarray:
    """The two classes' n-side blocks ``g_a = (L0_nn^a - Sigma_nn^a)^{-1}`` (``(2, 3, 3)``) from
    the traces ``T[a] = tr(C_a Gbar_pp[pi, sigma]) / p`` and ``g`` (as :func:`~._matrix._n_side`:
    the blocks' class weights, the removed diagonal ``k0_a`` and the GOE's variance profile
    ``b2[a, b]`` over the pairs of classes)."""
    out = np.empty((2, 3, 3), dtype=np.result_type(T, g))
    yt = np.array([rho, -rho, -1.0])
    for a in range(2):
        S = np.zeros((3, 3), dtype=out.dtype)
        for r in range(3):
            for s in range(3):
                S[r, s] = -yt[r] * wyt[a, r] * wy[a, s] * T[a, _PI[r], _SIG[s]]
        for r, cn, h1 in _H:
            for cn2, s, h2 in _H:
                S[r, s] += h1 * h2 * 0.5 * (b2[a, 0] * g[0, cn, cn2] + b2[a, 1] * g[1, cn, cn2])
        L0 = np.array([[gamma, 0.0, -k0[a]], [k0[a], 1.0, 0.0], [0.0, 0.0, 1.0]])
        out[a] = np.linalg.inv(L0 - S)
    return out


class _TwoPSide:
    """The p-side resolvent ``(L0_pp - Sc (x) C - Sd (x) Delta)^{-1}`` of two class covariances
    ``C_+- = C +- Delta`` in the eigenbasis of ``C``: its traces ``tr(C_a G[i, j]) / p`` (``a``
    = +, -) and its forms ``m^T G[i, j] m`` (``5 x 5`` each) for any ``Sc``, ``Sd`` (complex
    allowed).

    ``Delta`` in that basis is its diagonal ``dd`` (in the ``5 x 5`` blocks of each eigenvalue,
    exact) plus the rest, kept at rank ``r`` (``Qo diag(do) Qo^T``), which enters with the
    low-rank part ``U W^T`` of ``M'`` as one Woodbury step of rank ``2 r_M + 3 r``.
    """

    def __init__(self, lam: np.ndarray, dd: np.ndarray, Qo: np.ndarray, do: np.ndarray,
                 alpha: float, U: np.ndarray, W: np.ndarray, m: np.ndarray | None):
        self.lam, self.dd, self.Qo, self.do = lam, dd, Qo, do
        self.U, self.W = U, W
        self.m = np.zeros(lam.size) if m is None else m
        self.p = lam.size
        base = np.eye(5)
        base[1, 0] = base[4, 3] = -alpha
        self.base = base
        # Woodbury columns: (variable of the left column, left p-vectors, variable of the right)
        rM, r = U.shape[1], Qo.shape[1]
        self.left = [(1, U), (4, W)] + [(i, Qo) for i in (0, 2, 3)]
        self.right = [(0, W), (3, U)] + [(j, Qo) for j in (4, 1, 2)]
        self.rM, self.r = rM, r
        self.wl = np.concatenate([[lam + dd, lam - dd]], axis=0)   # diagonal weights of C_+-

    def _core(self, Sd: np.ndarray) -> np.ndarray:
        """The middle matrix of the Woodbury step: ``-I`` for ``U W^T`` and ``W U^T``,
        ``-Sd[i, j] diag(do)`` for the rows ``i`` in (d, b, q) and columns ``j`` in (q', d', b)."""
        rM, r = self.rM, self.r
        R = 2 * rM + 3 * r
        K = np.zeros((R, R), dtype=Sd.dtype)
        K[:2 * rM, :2 * rM] = -np.eye(2 * rM)
        for bi, i in enumerate((0, 2, 3)):
            for bj, j in enumerate((4, 1, 2)):
                o1, o2 = 2 * rM + bi * r, 2 * rM + bj * r
                K[o1:o1 + r, o2:o2 + r] = -Sd[i, j] * np.diag(self.do)
        return K

    def blocks(self, Sc: np.ndarray, Sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(traces, forms)``: ``traces[a] = tr(C_a G) / p`` (``(2, 5, 5)``), ``forms`` (5 x 5)."""
        lam, dd, m, Qo, do = self.lam, self.dd, self.m, self.Qo, self.do
        G0 = np.linalg.inv(self.base[None] - lam[:, None, None] * Sc[None] - dd[:, None, None] * Sd[None])
        D0 = np.einsum("kr,r->k", Qo * Qo, do)            # diagonal of Qo diag(do) Qo^T
        diag = np.einsum("ak,kij->aij", self.wl, G0)
        off = np.einsum("k,kij->ij", D0, G0)
        traces = np.stack([diag[0] + off, diag[1] - off]) / self.p
        forms = np.einsum("k,kij->ij", m * m, G0)
        if not self.left[0][1].shape[1] and not self.r:
            return traces, forms
        p = self.p
        A = np.concatenate([G0[:, :, i, None] * v[:, None, :] for i, v in self.left], axis=2)
        B = np.concatenate([G0[:, j, :, None] * v[:, None, :] for j, v in self.right], axis=2)
        R = A.shape[2]
        # R^T G0 L [s, t] = sum_k right_s[k] G0[k, j_s, i_t] left_t[k]
        RGL = np.concatenate([v.T @ A[:, j, :] for j, v in self.right], axis=0)
        Kc = self._core(Sd)
        Kp = Kc @ np.linalg.inv(np.eye(R) + RGL @ Kc)       # G = G0 - A Kp B^T
        AK = (A.reshape(p * 5, R) @ Kp).reshape(p, 5, R)
        Bt = B.transpose(1, 0, 2).reshape(5, p * R)
        corr = [(AK * w[:, None, None]).transpose(1, 0, 2).reshape(5, p * R) @ Bt.T for w in self.wl]
        QA = (Qo.T @ AK.reshape(p, 5 * R)).reshape(-1, 5, R) * do[:, None, None]
        QB = (Qo.T @ B.reshape(p, 5 * R)).reshape(-1, 5, R)
        off = QA.transpose(1, 0, 2).reshape(5, -1) @ QB.transpose(1, 0, 2).reshape(5, -1).T
        traces = traces - np.stack([corr[0] + off, corr[1] - off]) / p
        forms = forms - (m @ AK.reshape(p, 5 * R)).reshape(5, R) @ (m @ B.reshape(p, 5 * R)).reshape(5, R).T
        return traces, forms


def _woodbury2(g: np.ndarray, F: np.ndarray, c: float, rho: float, wy: np.ndarray,
               wyt: np.ndarray, spike: np.ndarray, L: np.ndarray) -> Any:
    """``y^T Q y / n`` of the two-class pencil by one Woodbury step in a span of 23 coordinates:
    in each n-variable (x, a, t) and class ``a``, the class indicator ``e_a`` (unit) and two
    orthonormal directions ``f_{a,k}`` of the fluctuations of the tokens' own logit variances,
    and ``m`` in each p-variable. It carries the signal parts of the ``Y`` blocks
    (class-weighted ``yhat``), the kernel's block means ``S = sum spike[a, b] e_a e_b^T``
    (``spike = sqrt(n) d / 2``) and its row and column offsets
    ``S_phi = sum_b phi_b e_b^T / sqrt(2) + transpose``, ``phi_b = sum_{a, k} L[a, b, k] f_{a,k}``
    (``+ S^T`` at (x, t), ``- S`` at (a, x)). ``F`` are the forms ``m^T Gbar_pp m`` (5 x 5)."""
    def ix(a: int, slot: int, v: int) -> int:       # n-coordinate: class, (e, f_0, f_1), variable
        return (3 * a + slot) * 3 + v

    dt = np.result_type(g, F)
    Gr = np.zeros((23, 23), dtype=dt)
    for a in range(2):
        for slot in range(3):
            i = ix(a, slot, 0)
            Gr[i:i + 3, i:i + 3] = g[a]
    Gr[18:, 18:] = F
    P = np.zeros((23, 23))
    sgn = (1.0, -1.0)
    yt = np.array([rho, -rho, -1.0])
    h = 1.0 / np.sqrt(2.0 * c)
    r2 = 1.0 / np.sqrt(2.0)
    for a in range(2):
        for r, cn in _Y:
            P[18 + r, ix(a, 0, cn)] -= sgn[a] * wy[a, cn] * h
        for k, (cn2, pc) in enumerate(_YT):
            P[ix(a, 0, cn2), 18 + pc] += yt[k] * sgn[a] * wyt[a, cn2] * h
        for b in range(2):
            P[ix(b, 0, 0), ix(a, 0, 2)] += spike[a, b]
            P[ix(a, 0, 1), ix(b, 0, 0)] -= spike[a, b]
            for k in range(2):
                # S_phi[f_{a,k}, e_b] = S_phi[e_b, f_{a,k}] = L[a, b, k] / sqrt(2)
                P[ix(b, 0, 0), ix(a, 1 + k, 2)] += L[a, b, k] * r2
                P[ix(a, 1 + k, 0), ix(b, 0, 2)] += L[a, b, k] * r2
                P[ix(a, 1 + k, 1), ix(b, 0, 0)] -= L[a, b, k] * r2
                P[ix(b, 0, 1), ix(a, 1 + k, 0)] -= L[a, b, k] * r2
    cy = np.zeros(23)
    cy[ix(0, 0, 0)], cy[ix(1, 0, 0)] = r2, -r2
    return cy @ Gr @ np.linalg.solve(np.eye(23) + P @ Gr, cy)


def _fluctuations(a2: np.ndarray, covs: tuple[np.ndarray, np.ndarray], Mh: np.ndarray,
                  sig_ab: np.ndarray, n: float) -> np.ndarray:
    """``L[a, b, k]``: the row offsets of the kernel, ``phi_b[i] = D_ab (s_{i,b} - sig_ab^2)``
    for a token ``i`` of class ``a`` (``s_{i,b} = z_i^T C_a^{1/2} M C_b M^T C_a^{1/2} z_i / p``
    its own logit variance toward class ``b``, ``D_ab = a2_ab / (sqrt(2) sig_ab^2)`` the
    derivative of ``E f(sqrt(s) xi)`` in ``s``), in an orthonormal basis ``f_{a,k}`` of their span
    on class ``a``: ``L[a] L[a]^T`` is their Gram matrix
    ``(n / 2) D_ab D_ab' 2 tr(C_a M C_b M^T C_a M C_b' M^T) / p^2``."""
    p = Mh.shape[0]
    L = np.zeros((2, 2, 2))
    D = a2 / (np.sqrt(2.0) * sig_ab ** 2)
    for a in range(2):
        A = [covs[a] @ Mh @ covs[b] @ Mh.T for b in range(2)]
        Gam = np.array([[(n / 2.0) * D[a, b] * D[a, b2] * 2.0 * np.sum(A[b] * A[b2].T) / p ** 2
                         for b2 in range(2)] for b in range(2)])
        w, V = np.linalg.eigh((Gam + Gam.T) / 2.0)
        L[a] = V * np.sqrt(np.clip(w, 0.0, None))
    return L


def _moments(f: NonlinearityLike, sigma: float, shift: float) -> hermite.Hermite:
    """Hermite data of ``t -> f(shift + sigma t)`` (``a0`` its mean; ``a1, a2, nu`` as
    :func:`~attn_lib.model.hermite.coefficients`, which is the case ``shift = 0``)."""
    if shift == 0.0:
        return hermite.coefficients(f, sigma)
    func = check_nonlinearity(f)

    def fs(x: float) -> float:
        return float(np.asarray(func(np.array([shift + sigma * x])), dtype=float)[0])

    br = tuple((b - shift) / sigma for b in func.breaks)
    strict = not isinstance(f, str)
    a0 = hermite._gauss_expect(fs, br, strict)
    a1 = hermite._gauss_expect(lambda x: x * fs(x), br, strict)
    a2 = hermite._gauss_expect(lambda x: (x * x - 1.0) * fs(x), br, strict) / np.sqrt(2.0)
    nu = hermite._gauss_expect(lambda x: (fs(x) - a0) ** 2, br, strict)
    return hermite.Hermite(a0=float(a0), a1=float(a1), a2=float(a2), nu=float(nu))


def _class_kernel(f: NonlinearityLike, sigma: float, sig_ab: np.ndarray, centre: float,
                  shift: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's Gaussian equivalent over the pairs of classes (logit scales ``sig_ab`` and
    means ``shift[a, b]``, ``2 x 2``; ``f`` centred at the scale ``centre``, ``M'`` normalised by
    ``sigma``): ``(lam1, u, b2, d, a2)`` with the linear coefficients
    ``a1_ab sigma / sig_ab ~ (lam1 / 2) u_a u_b`` (the leading eigenpair of that ``2 x 2``,
    ``u = (1, 1)`` when the classes share a covariance and there is no shift), the variances
    ``b2_ab`` of the non-linear part, the block means ``d_ab = E f(shift_ab + sig_ab xi) -
    E f(centre xi)`` less the part of the shift the linear term carries,
    ``(lam1 / 2) u_a u_b shift_ab / sigma``, and the ``a2_ab`` (all read at ``shift_ab``)."""
    a0 = hermite.coefficients(f, centre).a0
    hs = [[_moments(f, float(sig_ab[a, b]), float(shift[a, b])) for b in range(2)] for a in range(2)]
    r = np.array([[hs[a][b].a1 * sigma / sig_ab[a, b] for b in range(2)] for a in range(2)])
    b2 = np.array([[hs[a][b].b2 for b in range(2)] for a in range(2)])
    a2 = np.array([[hs[a][b].a2 for b in range(2)] for a in range(2)])
    w, v = np.linalg.eigh((r + r.T) / 2.0)
    k = int(np.argmax(np.abs(w)))
    vec = v[:, k] * (1.0 if v[:, k].sum() >= 0 else -1.0)
    if w[k] == 0.0:
        vec = np.ones(2) / np.sqrt(2.0)
    u = vec * np.sqrt(2.0)
    d = np.array([[hs[a][b].a0 - a0 - w[k] / 2.0 * u[a] * u[b] * shift[a, b] / sigma
                   for b in range(2)] for a in range(2)])
    return float(w[k]), u, (b2 + b2.T) / 2.0, d, (a2 + a2.T) / 2.0


def _solve_point2(g, side, c, rho, wy, wyt, k0, b2, gamma, tol, J=None, max_iter=_MAX_ITER):
    """The 18 n-side unknowns (two classes) at one ``gamma`` by :func:`_quasi_newton`."""
    def residual(e: np.ndarray) -> np.ndarray:
        S = _sigma_pp2(e, rho, c, wy, wyt)
        T = side.blocks((S[0] + S[1]) / 2.0, (S[0] - S[1]) / 2.0)[0]
        return _n_side2(T, e, rho, wy, wyt, k0, b2, gamma) - e

    return _quasi_newton(residual, g, tol, J, max_iter)


def two_covariance_form(c: float, Mh: np.ndarray, m: np.ndarray | None, lam: np.ndarray,
                        Dh: np.ndarray, f: NonlinearityLike, gammas: object, *,
                        centre: float | None = None, rank: int | None = None, shift: bool = False
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``(y^T Q y / n, E)`` for two classes with their own covariances ``C_+- = C +- Delta``
    (``book/derivation_covariance.md``, section *Two class covariances*).

    Parameters
    ----------
    c, Mh, m, lam, f, gammas
        As :func:`covariance_resolvent_form` (``C`` the mean of the two).
    Dh : ndarray of shape (p, p)
        ``V^T Delta V``, half the difference of the class covariances in the eigenbasis of ``C``.
    centre : float, optional
        The logit scale at which ``f`` is centred (``f - E f(centre xi)``); default that of ``C``,
        ``sqrt(tr(C M C M^T) / p)``.
    rank : int, optional
        The rank at which the part of ``Dh`` off its diagonal is kept (its largest eigenvalues in
        modulus); default ``_DELTA_RANK`` (0: the diagonal only, first order in ``Delta`` exact).
    shift : bool, default False
        Read ``f`` at the coherent shift of each pair of classes, ``+- mu^T M mu / sqrt(p)``
        (its mean, slope and curvature there), which the proportional limit drops.

    Returns
    -------
    form, error : ndarray of shape (G,)
    """
    lam = np.clip(lam, 0.0, None)
    g_arr = np.atleast_1d(check_gammas(gammas))
    p = lam.size
    n = p / c
    Cp, Cm = np.diag(lam) + Dh, np.diag(lam) - Dh
    covs = (Cp, Cm)
    sig_ab = np.array([[np.sqrt(max(np.sum((covs[a] @ Mh) * (Mh @ covs[b])) / p, 0.0))
                        for b in range(2)] for a in range(2)])
    sigma = float(np.sqrt(np.einsum("k,kl,l,kl->", lam, Mh, lam, Mh) / p))
    if not sigma > 0.0 or not np.all(sig_ab > 0.0):
        raise ValueError("M and the class covariances give logits of zero variance")
    Mh = Mh / sigma
    s_ab = (sigma * float(m @ Mh @ m) / np.sqrt(p) * np.array([[1.0, -1.0], [-1.0, 1.0]])
            if shift and m is not None else np.zeros((2, 2)))
    lam1, u, b2, d, a2 = _class_kernel(f, sigma, sig_ab, sigma if centre is None else centre, s_ab)
    rho = np.sqrt(c) * lam1 / 2.0
    wy, wyt = _weights(u)
    trD = float(np.sum(Dh * Mh.T))          # tr(Delta M')
    k0 = np.array([rho * u[a] ** 2 * (float(lam @ np.diag(Mh)) + (1 - 2 * a) * trD) / p
                   for a in range(2)])
    # the off-diagonal of Dh with the diagonal of C_+- (first order in Delta): exact
    dd = np.diag(Dh).copy()
    off = Dh - np.diag(dd)
    r = min(p, _DELTA_RANK if rank is None else rank)
    if r and np.any(off):
        w, Q = np.linalg.eigh(off)
        keep = np.argsort(-np.abs(w))[:r]
        do, Qo = w[keep], Q[:, keep]
    else:
        do, Qo = np.zeros(0), np.zeros((p, 0))
    alpha, U, W = _low_rank(Mh)
    side = _TwoPSide(lam, dd, Qo, do, alpha, U, W, m)
    spike = np.sqrt(n) / 2.0 * d
    L = _fluctuations(a2, covs, Mh * sigma, sig_ab, n)

    def value(g: np.ndarray, dg: np.ndarray) -> tuple[float, float]:
        def form(e: np.ndarray) -> Any:
            S = _sigma_pp2(e, rho, c, wy, wyt)
            F = side.blocks((S[0] + S[1]) / 2.0, (S[0] - S[1]) / 2.0)[1]
            return _woodbury2(e, F, c, rho, wy, wyt, spike, L)
        qv, grad = _complex_step(form, g)
        return float(qv), float(grad[0] @ dg)

    def cold(gam: float) -> np.ndarray:
        return np.stack([np.linalg.inv(np.array([[gam, 0.0, -k0[a]], [k0[a], 1.0, 0.0], [0.0, 0.0, 1.0]]))
                         for a in range(2)])

    out = _continue(
        g_arr, cold, lambda g, gam, tol, J, it: _solve_point2(g, side, c, rho, wy, wyt, k0, b2, gam, tol, J, it),
        lambda g: np.stack([np.outer(g[a][:, 0], g[a][0, :]) for a in range(2)]).ravel(), value,
        "two-covariance fixed point")
    form_, error = np.array([out[x] for x in g_arr]).T
    return form_, error


def _continue(g_arr: np.ndarray, cold: Any, solve_point: Any, rhs: Any, value: Any,
              problem: str) -> dict[float, tuple[float, float]]:
    """``{gamma: (y^T Q y / n, E)}`` at the requested ``gamma`` by the shared continuation
    driver (:func:`~._continuation.descend`) from ``max(10, 10 max gamma)``: each point predicted
    (:func:`~._matrix._predict`; ``cold(gamma)`` at the start), corrected by
    ``solve_point(g, gamma, tol, J, max_iter) -> (g, J, res, ok)`` with ``_TRY_ITER`` steps while
    the step can still be split in two (ratio above ``_MIN_SPLIT``), ``dg/dgamma = J^{-1} rhs(g)``
    (implicit function theorem), and ``value(g, dg) -> (q, dq/dgamma)`` at the targets."""
    targets = np.unique(g_arr)[::-1]
    start = max(10.0, 10.0 * float(targets[0]))
    points: list[tuple[Any, np.ndarray, np.ndarray]] = []
    st: dict[str, Any] = {}
    out: dict[float, tuple[float, float]] = {}

    def solve(t_from: float, gam: float) -> tuple[bool, float]:
        split = bool(points) and np.log(t_from) - np.log(gam) > np.log(_MIN_SPLIT)
        g0 = _predict(points, gam) if points else cold(gam)
        tol = _NEWTON_TOL if gam in targets else _PATH_TOL
        g, J, res, ok = solve_point(g0, gam, tol, st.get("J"), _TRY_ITER if split else _MAX_ITER)
        if not ok and not split:
            raise ConvergenceError(f"{problem} did not converge at gamma={gam:.6g}: last residual {res:.3g}")
        if ok:
            dg = np.linalg.solve(J, rhs(g))
            points.append((np.log(gam), g, gam * dg.reshape(g.shape)))
            st.update(g=g, J=J, dg=dg)
        return bool(ok), float(res)

    def at_target(gam: float) -> None:
        q, dq = value(st["g"], st["dg"])
        out[gam] = (q, -gam ** 2 * dq)

    solve(start, start)
    descend(start, targets, solve, at_target, max_ratio=_MAX_RATIO_STEP, max_attempts=_MAX_ATTEMPTS,
            problem=problem)
    return out


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


def class_setting_form(setting: CovarianceSetting, C_plus: np.ndarray, C_minus: np.ndarray,
                       gammas: np.ndarray, rank: int | None = None, shift: bool = False
                       ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`two_covariance_form` of the tokens ``x_i = y_i mu + C_{y_i}^{1/2} z_i``: ``M``,
    ``mu``, ``f``, ``c`` and the centring of ``f`` (its :attr:`logit_scale`) from ``setting``,
    the class covariances ``C_plus``, ``C_minus`` (``p x p``; ``C`` their mean, decomposed here)."""
    Cp, Cm = (np.asarray(x, dtype=float) for x in (C_plus, C_minus))
    p = setting.p()
    if Cp.shape != (p, p) or Cm.shape != (p, p):
        raise ValueError(f"C_plus and C_minus must have shape ({p}, {p}), got {Cp.shape} and {Cm.shape}")
    lam, V = np.linalg.eigh((Cp + Cm) / 2.0)
    Dh = V.T @ ((Cp - Cm) / 2.0) @ V
    return two_covariance_form(setting.c, V.T @ setting.M @ V, V.T @ setting.mu, lam, (Dh + Dh.T) / 2.0,
                               setting.f, gammas, centre=setting.logit_scale, rank=rank, shift=shift)


def setting_form(setting: CovarianceSetting, gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`covariance_resolvent_form` of a :class:`~attn_lib.model.setting.CovarianceSetting`."""
    lam, V = setting.spectrum
    return covariance_resolvent_form(setting.c, setting.rotated_M, V.T @ setting.mu, lam, setting.f, gammas)
