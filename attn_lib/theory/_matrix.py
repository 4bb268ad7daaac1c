r"""A deterministic equivalent of the attention error for any key-query matrix ``M``.

Model
-----
Tokens ``X = mu y^T + Z`` (``p x n``, ``c = p/n``), logits ``T_ij = x_i^T M x_j / sqrt(p)`` for a
fixed ``p x p`` matrix ``M`` (rows: keys; any, e.g. a normalised GPT-2 layer), kernel
``K = f(T) / sqrt(p)`` with zero diagonal, ``Phi = X K`` and ``E(gamma) = gamma^2 y^T Q^2 y / n``,
``Q = (Phi^T Phi / n + gamma)^{-1}``. The Gaussian equivalent (the homogeneous surrogate of
``benchmarks/any_matrix.py --surrogate``) linearises ``f`` at the logit scale
``sigma = ||M||_F / sqrt(p)`` (the standard deviation of ``T_ij`` on noise tokens, spikes of
``M`` included): with ``a1 = E[xi f(sigma xi)]``, ``b2 = E f(sigma xi)^2 - a1^2`` and
``M' = M / sigma``,

    sqrt(c) K ~ Kt = rho (Y'^T M' Y' - m0 I) + H,     rho = sqrt(c) a1,  m0 = tr(M') / p,

``Y' = X / sqrt(p) = Y + m yhat^T / sqrt(c)`` (``Y = Z / sqrt(p)``, ``m = mu``,
``yhat = y / sqrt(n)``) and ``H`` a GOE of entry variance ``b2 / n`` independent of ``X``
(``m0 I`` is the removed diagonal). Then ``Phi^T Phi / n = Kt^T Y'^T Y' Kt``.

Linear pencil
-------------
``Q yhat`` is the ``x``-block of the solution of a linear system in three ``n``-vectors
``(x, a, t)`` and five ``p``-vectors ``(d, d', b, q, q')``:

    gamma x - k0 t + H t + rho Y'^T q' = yhat,     d - Y' x = 0,     d' - M' d = 0,
    a + k0 x - H x - rho Y'^T d' = 0,              b - Y' a = 0,
    t - Y'^T b = 0,                                q - Y' t = 0,     q' - M'^T q = 0,

(``k0 = rho m0``; eliminating gives ``a = Kt x``, ``t = Y'^T Y' Kt x`` and
``(gamma + Kt^T Y'^T Y' Kt) x = yhat``). Its matrix is ``L0 + Delta + P``: ``L0`` deterministic
(``M'`` and ``M'^T`` as blocks), ``Delta`` linear in the Gaussian ``Y`` (blocks ``-Y`` at (d, x),
(b, a), (q, t); ``Y^T`` times ``rho, -rho, -1`` at (x, q'), (a, d'), (t, b)) and ``H`` (``+H`` at
(x, t), ``-H`` at (a, x)), and ``P`` the rank-one signal parts of the same blocks. Gaussian
integration by parts with ``E[Y B Y^T] = tr(B)/p I_p``, ``E[Y^T A Y] = tr(A)/p I_n``,
``E[H C H] ~ b2 tr(C)/n I_n`` gives ``G = (L0 + P - Sigma(G))^{-1}``, where ``Sigma`` has only
n-n and p-p blocks and depends on normalised block traces only (so not on ``P``). Hence

* the n-side of ``Gbar = (L0 - Sigma)^{-1}`` is ``g (x) I_n``, ``g`` a ``3 x 3`` matrix;
  ``Sigma_nn[r, s] = -beta_r tr(Gbar_pp[pi_r, sigma_s]) / p`` (``beta = (rho, -rho, -1)``,
  ``pi = (q', d', b)``, ``sigma = (d, b, q)``) plus the ``H`` terms
  ``b2 (g_tx E_xt - g_ta E_xx - g_xx E_at + g_xa E_ax)``;
* the p-side is ``(L0_pp - s (x) I_p)^{-1}`` with ``s[r, s'] = -beta_{s'} g[c_r, c'_{s'}] / c``
  for rows ``r`` in (d, b, q) and columns in (q', d', b). Eliminating ``d' = M' d``,
  ``q' = M'^T q`` and ``b`` leaves the ``2p x 2p`` operator
  ``[[I - alpha_1 M', -alpha_2 M'^T], [-alpha_3 M', I - alpha_4 M'^T]]``, inverted by its Schur
  complement ``S = I - alpha_1 M' - alpha_2 alpha_3 M'^T (I - alpha_4 M'^T)^{-1} M'``. The
  fixed point needs four normalised traces ``tr(M' G_dd), tr(M' G_dq), tr(M'^T G_qd),
  tr(M'^T G_qq)`` over ``p`` (:class:`_Oracle`): the derivatives in the ``alpha``'s of
  ``log det W / p``, ``W = (I - alpha_4 M'^T) S = I - alpha_1 M' - alpha_4 M'^T + e M'^T M'``
  (``e = alpha_1 alpha_4 - alpha_2 alpha_3``; the determinant of the ``2p x 2p`` operator),
  so one ``p x p`` inverse ``W^{-1}`` gives all four, and two products their Jacobian. ``W``
  is a three-parameter family in ``M'``, ``M'^T`` and ``M'^T M'``, which no factorisation done
  once reduces to ``O(p^2)`` work for a non-normal ``M'`` (``M'`` and ``M'^T`` have no common
  triangular or diagonal form); the fixed point keeps ``alpha_1 = alpha_4``, where ``W`` is
  symmetric, ``kappa C^T C + (1 - kappa) I`` with ``C = I - (e / alpha_1) M'`` and
  ``kappa = alpha_1^2 / e``: its spectrum moves with ``e / alpha_1``.

For ``M' = I`` all blocks are scalars and the fixed point is the bulk fixed point of
:mod:`~attn_lib.theory._bulk` (``(1/n) tr Q = g_xx``; checked to 1e-12). For a symmetric ``M``
the traces depend on its eigenvalues only; for any ``M`` they are invariant under
``M -> O M O^T``.

Signal: one Woodbury step
-------------------------
``P = U C V^T`` with ``U = [m_d, m_b, m_q, yhat_x, yhat_a, yhat_t]`` and
``V = [m_q', m_d', m_b, yhat_x, yhat_a, yhat_t]`` (``m`` or ``yhat`` placed in one variable's
slot), ``C`` holding ``-1/sqrt(c)`` (``Y`` blocks) and ``beta / sqrt(c)``, so

    y^T Q y / n ~ g_xx - r^T (I_6 + C K)^{-1} C l,    K = V^T Gbar U,

with ``r = (0, 0, 0, g_x.)``, ``l = (0, 0, 0, g_.x)`` and ``K`` made of ``g`` and the quadratic
forms ``m^T Gbar_pp[pi, sigma] m`` (the same four functions with ``m^T . m`` for ``tr / p``). The
signal enters only through ``mu``, ``M' mu`` and ``M'^T mu`` (and ``M'`` in the resolvent).
For ``M = alpha I + w_K w_Q^T``, ``sigma = alpha`` and the traces of ``alpha I`` (argument
``bulk``: the proportional limit at fixed weights drops the spike's ``O(1/p)`` share of the
traces), this is the rank-one limit theory to 1e-14 (``tests/test_matrix_theory.py``;
measured by ``benchmarks/any_matrix.py --agreement``).

Numerics
--------
The map ``g -> Phi(g)`` keeps the subspace ``g_tx = -g_xa``, ``g_ax = -g_xt``, ``g_tt = g_aa``
of the nine entries of ``g`` (there ``alpha_1 = alpha_4``, and ``log det W`` is symmetric in
``alpha_1`` and ``alpha_4`` since ``det W = det W^T``; ``tests/test_matrix_theory.py`` checks it
with the traces of the ``2p x 2p`` inverse itself), and the fixed point, reached from a point
of it, lies there: it is solved in the six coordinates of that subspace
(:func:`_coordinates`) at each ``gamma`` along a path from ``max(1, max gamma)`` down through
the requested ``gamma`` (steps of ratio at most 10, a step split in two when it does not
converge within ``_TRY_ITER`` oracle calls: the shared driver
:func:`~attn_lib.theory._continuation.descend`), each point predicted by the Hermite
polynomial in ``log gamma`` through up to three solved points (values and the derivatives
``dg/dgamma`` below). Each oracle call gives the traces and their exact Jacobian in the
``alpha``'s (:meth:`_LogDet.values`, :meth:`_LogDet.jacobian`); the small n-side algebra is
differentiated by complex steps, and between two oracle calls the small problem with the
oracle linearised is solved by Newton's method (a few steps, no ``p x p`` work): Newton's
method on the whole, quadratic in the oracle calls. On the subspace ``W`` is symmetric, and an
oracle call is a Cholesky factorisation, ``potri`` and one product ``Z (M' + M'^T)`` for the
Jacobian (:class:`_Oracle`; an LU inverse and two products where ``W`` is not positive
definite). For ``p >= 256`` the first call at a point reached by a cold start or by a path
step longer than a ratio of 3 (a residual of a few ``1e-2`` at a ratio of 10; about ``1e-6``
at 1.4, where two float64 calls suffice), and the first two at the path points between the
requested ``gamma`` (tolerance ``1e-4``), run in float32 (relative error about ``1e-7`` times
the condition number of ``W``: up to ``7e-6`` at GPT-2 layer 5), and the Jacobian's product
also at the later calls until the residual is below ``1e-12`` (relative):
that call's Jacobian is in float64, and one last Newton step follows without an oracle call
(error of the order of the residual squared). ``y^T Q y / n`` follows to first order from
the last iterate, and ``dg/dgamma`` from the Jacobian there, so ``E`` carries an error of the
order of that residual: at ``1e-10`` it moved by up to ``2e-10`` (a ``p = 60`` test matrix;
``2e-11`` at GPT-2 layer 5), at ``1e-12`` by about ``1e-12``; the float32 calls move the
values by about ``1e-15`` (``tests/test_matrix_theory.py``).
``E = -gamma^2 d(y^T Q y / n)/dgamma`` by the implicit function theorem,
``dg/dgamma = J^{-1} g E_xx g`` with ``J`` the exact Newton Jacobian, and the gradient of the
Woodbury step (the form oracle's exact Jacobian, complex steps for the rest): one solve per
``gamma``; it matches the Richardson-extrapolated central difference of ``y^T Q y / n`` to 1e-10
(``tests/test_matrix_theory.py``), where the former central difference of step ``1e-4`` was off by
about 1e-8 (``benchmarks/any_matrix.py --agreement``).
Cost: per oracle call ``p^3 / 3`` flops (``potrf``), ``2 p^3 / 3`` (``potri``) and ``2 p^3``
(the product), and one LU of ``A`` per requested ``gamma`` for the forms; for the three
``gamma`` 1e-3, 0.1, 1 on GPT-2 layer 5 (``p = 768``), four path points and 14 oracle calls
(five in float32, six with the product in float32, three in float64): 0.36 s against 0.25 s
for one Monte Carlo trial of the same setting at ``n = 1536`` (one BLAS thread, a lightly
loaded machine; ``benchmarks/theory_speed.py``); a 20-point curve (``gamma`` 1e-3 to 1) takes
44 calls, two in float64 at most points (``benchmarks/any_matrix.py --speed``).
Run it with one BLAS thread on a shared machine
(``threadpoolctl``): several threads on small matrices oversubscribe the cores.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

from ..model import hermite
from ..model.nonlinearity import NonlinearityLike
from .._validation import check_array, check_gammas, check_int, check_real, check_square
from .. import _progress
from ._continuation import descend
from ._errors import ConvergenceError

__all__ = ["matrix_error", "matrix_resolvent_form"]

# n-side pencil variables x, a, t (0, 1, 2); p-side d, d', b, q, q' (0..4)
_Y = ((0, 0), (2, 1), (3, 2))       # Y at (p-row, n-col), coefficient -1
_YT = ((0, 4), (1, 1), (2, 2))      # Y^T at (n-row, p-col), coefficients rho, -rho, -1
_H = ((0, 2, 1.0), (1, 0, -1.0))    # H at (n-row, n-col, coefficient)
_PI = (4, 1, 2)                     # p-column of the Y^T block in n-row x, a, t
_SIG = (0, 2, 3)                    # p-row of the Y block in n-column x, a, t
_NEWTON_TOL = 1e-12
_PATH_TOL = 1e-4                    # path points between the requested gamma
_SINGLE_TOL = 1e-4                  # a tolerance from which the first two oracle calls are in float32
_MAX_ITER = 60
_MAX_RATIO_STEP = 10.0
_START = 1.0                        # the path starts at max(_START, max gamma), from Sigma = 0
_PREDICT_POINTS = 3
_TRY_ITER = 12                      # oracle calls before a path step is split in two
_MIN_SPLIT = 1.2                    # ... if its ratio is above this
_MAX_ATTEMPTS = 30                  # attempts (splits included) per path step
_SYMMETRIC = 1e-12                  # |alpha_1 - alpha_4| / (|alpha_1| + |alpha_4|) of a symmetric W
_SINGLE_MIN = 256                   # p from which the oracle's float32 mode is used
_SINGLE_STEP = 3.0                  # a path step (ratio) beyond which the first call is in float32
_INNER = 8                          # Newton steps on the small algebra per oracle call


def _yt_coef(rho: float) -> np.ndarray:
    return np.array([rho, -rho, -1.0])


class _LogDet:
    """The trace oracle's values and Jacobian in the four ``alpha`` from the gradient and Hessian
    of ``psi = log det W / p`` in ``(alpha_1, alpha_4, e)`` (:class:`_Oracle`), which a subclass
    provides as ``gradient(a, single)`` and ``hessian(a, single)`` (``single``: in float32, where
    the subclass allows it)."""

    def gradient(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The gradient of ``psi`` in ``(alpha_1, alpha_4, e)`` at ``alpha = a``, shape (3,)."""
        raise NotImplementedError

    def hessian(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The Hessian (3 x 3) of ``psi`` at ``alpha = a``."""
        raise NotImplementedError

    def values(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """``(tr(M G_dd), tr(M G_dq), tr(M^T G_qd), tr(M^T G_qq)) / p`` at ``alpha = a``
        (:meth:`gradient`)."""
        return _trace_values(self.gradient(a, single), a)

    def jacobian(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The Jacobian (4 x 4) of :meth:`values` in ``alpha`` (:meth:`gradient` and
        :meth:`hessian`)."""
        return _trace_jacobian(self.gradient(a, single), self.hessian(a, single), a)[1]


class _Oracle(_LogDet):
    """Normalised traces (or quadratic forms in ``m``) of the p-side blocks, with their Jacobian.

    With ``s = Sigma_pp`` (rows d, b, q; columns q', d', b), ``beta = 1 - s_bb`` and
    ``alpha_1 = s_dd' + s_db s_bd' / beta``, ``alpha_2 = s_dq' + s_db s_bq' / beta``,
    ``alpha_3 = s_qd' + s_qb s_bd' / beta``, ``alpha_4 = s_qq' + s_qb s_bq' / beta``, the
    p-side operator is ``L = [[I - alpha_1 M, -alpha_2 M^T], [-alpha_3 M, A]]``,
    ``A = I - alpha_4 M^T``, and the values are
    ``F = (tr(M G_dd), tr(M G_dq), tr(M^T G_qd), tr(M^T G_qq)) / p`` with ``G = L^{-1}``
    (traces), or the same with ``m^T . m`` (forms).

    ``A`` commutes with ``M^T``, so ``A`` times the Schur complement
    ``S = I - alpha_1 M - b M^T A^{-1} M`` (``b = alpha_2 alpha_3``) is

        W = A S = I - alpha_1 M - alpha_4 M^T + e M^T M,     e = alpha_1 alpha_4 - b,

    and ``det L = det A det S = det W``. The traces are the derivatives of
    ``psi(alpha) = log det W / p``: ``F = -(d psi / d alpha)`` in the order
    ``(alpha_1, alpha_3, alpha_2, alpha_4)``, i.e. with ``Z = W^{-1}`` and ``K = M^T M``,

        F = (tr(Z (M - alpha_4 K)), alpha_2 tr(Z K), alpha_3 tr(Z K), tr(Z (M^T - alpha_1 K))) / p,

    and their Jacobian is the Hessian of ``psi``, made of ``tr(Z X Z Y) / p`` for ``X, Y`` in
    ``(M, M^T, K)``. ``psi`` is symmetric in ``alpha_1`` and ``alpha_4`` (``det W = det W^T``),
    and on the fixed point's subspace ``alpha_1 = alpha_4 = s`` (:func:`_solve_point`)
    ``W = I - s S_M + e K`` (``S_M = M + M^T``) is symmetric: there it is factorised by Cholesky
    (``W = L L^T``; ``potrf``, then ``potri`` for the lower triangle of ``Z``) and the Hessian
    in the directions that keep ``alpha_1 = alpha_4`` takes one product ``P = Z S_M``
    (:meth:`hessian`); elsewhere, or where ``W`` is not positive definite, one LU inverse and
    the full Hessian from two GEMMs (:meth:`_hessian_lu`). With ``single``, for ``p`` of at
    least ``_SINGLE_MIN``, the factorisation and the product run in float32 (the traces
    accumulated in float64; a relative error of about ``1e-7`` times the condition number of
    ``W``). The forms are ``u^T G v`` with ``u``, ``v`` among ``(M^T m, 0)``,
    ``(0, M m)``, ``(m, 0)``, ``(0, m)``, and ``dG = G (E_k d alpha_k) G``: a few solves with
    ``G`` and ``G^T`` (``Z`` and one LU of ``A``) and matrix-vector products (:meth:`forms`,
    sharing ``Z`` at the same ``alpha``).
    """

    def __init__(self, M: np.ndarray, m: np.ndarray | None):
        self.M, self.m = M, m
        self.p = p = M.shape[0]
        self.I = np.eye(p)
        self.Mt = np.ascontiguousarray(M.T)
        K = M.T @ M
        self.K = (K + K.T) / 2
        self.S = M + self.Mt
        self._S32 = self.S.astype(np.float32)
        self._lower = np.triu(np.ones((p, p))).T      # the lower triangle's ones, F order
        self._lower32 = self._lower.astype(np.float32)
        # tr(Z X) = vdot(Zl, Xw) for symmetric Z and X, Zl the lower triangle of Z (zeros
        # above) and Xw = 2 tril(X, -1) + diag(X); all three in F order (X.T: X in F order)
        w = 2 * self._lower
        w.flat[::p + 1] = 1.0
        self._Sw, self._Kw = self.S.T * w, self.K.T * w
        self._normK = np.linalg.norm(self.K)
        self.scale = np.linalg.norm(M) / np.sqrt(p)
        self.evaluations = 0
        self._key: tuple[float, float, float, bool] | None = None
        self._Zl: np.ndarray | None = None    # lower triangle of W^{-1} (Cholesky), float64
        self._Zl32: np.ndarray | None = None  # the same in float32 (a float32 factorisation)
        self._Z: np.ndarray | None = None     # W^{-1} (LU)
        self._grad: np.ndarray | None = None  # the gradient there

    def _factor(self, a1: float, a4: float, e: float, single: bool = False) -> None:
        """Invert ``W`` at ``(alpha_1, alpha_4, e)`` (the last one is kept): the lower triangle
        of ``Z = W^{-1}`` by Cholesky (in float32 with ``single`` and ``p >= _SINGLE_MIN``) where
        ``W`` is symmetric (``alpha_1 = alpha_4`` to a relative ``_SYMMETRIC``) and positive
        definite, else ``Z`` by LU."""
        single = single and self.p >= _SINGLE_MIN
        if self._key is not None and self._key[:3] == (a1, a4, e) and (single or not self._key[3]):
            return                                       # (a float64 inverse serves both)
        self.evaluations += 1
        self._key, self._Zl, self._Zl32, self._Z, self._grad = (a1, a4, e, single), None, None, None, None
        if abs(a1 - a4) <= _SYMMETRIC * (abs(a1) + abs(a4)):
            W = self.K * e                      # symmetric: its transpose W.T is W in F order
            blas.daxpy(self.S.ravel(), W.ravel(), a=-(a1 + a4) / 2)
            W.flat[::self.p + 1] += 1.0
            W = W.T
            # potrf and potri leave the upper triangle (W's): zeroed by the mask
            if single:
                L, info = lapack.spotrf(W.astype(np.float32), lower=1, overwrite_a=1)
                if info == 0:
                    self._Zl32 = lapack.spotri(L, lower=1, overwrite_c=1)[0]
                    self._Zl32 *= self._lower32
                    self._Zl = self._Zl32.astype(np.float64)
                    return
            else:
                L, info = lapack.dpotrf(W, lower=1, overwrite_a=1)
                if info == 0:
                    self._Zl = lapack.dpotri(L, lower=1, overwrite_c=1)[0]
                    self._Zl *= self._lower
                    return
        self._Z = linalg.inv(self.I - a1 * self.M - a4 * self.Mt + e * self.K, check_finite=False)

    def _apply(self, v: np.ndarray, trans: bool = False) -> np.ndarray:
        """``Z v`` (``Z^T v`` with ``trans``) at the kept float64 inverse: ``symv`` on the lower
        triangle of a Cholesky inverse."""
        if self._Zl is not None:
            return blas.dsymv(1.0, self._Zl, v, lower=1)
        assert self._Z is not None
        return (self._Z.T if trans else self._Z) @ v

    def gradient(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The gradient of ``psi = log det W / p`` in ``(alpha_1, alpha_4, e)`` at ``alpha = a``:
        one factorisation and inverse (:meth:`_factor`)."""
        a1, a2, a3, a4 = (float(x) for x in a)
        self._factor(a1, a4, a1 * a4 - a2 * a3, single)
        if self._grad is None:
            if self._Zl is not None:
                # tr(Z M) = tr(Z M^T) = tr(Z S_M) / 2; vdot of the C-ordered transposes (no copy)
                Zt = self._Zl.T
                zs = -np.vdot(Zt, self._Sw.T) / 2
                self._grad = np.array([zs, zs, np.vdot(Zt, self._Kw.T)]) / self.p
            else:
                Z = self._Z
                # tr(X Y) = vdot(X, Y^T): contiguous dot products (K is symmetric)
                self._grad = np.array([-np.vdot(Z, self.Mt), -np.vdot(Z, self.M),
                                       np.vdot(Z, self.K)]) / self.p
        return self._grad

    def hessian(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The Hessian (3 x 3) of ``psi`` in ``(alpha_1, alpha_4, e)`` at the inverse of
        :meth:`gradient` (``single``: the product in float32).

        With the Cholesky inverse (``alpha_1 = alpha_4 = s``), the Hessian in the directions
        that keep ``alpha_1 = alpha_4`` from ``P = Z S_M``: ``tr(Z S_M Z S_M) = tr(P^2)`` and,
        with ``e Z K = I - Z + s P`` (from ``Z W = I``),
        ``e tr(Z S_M Z K) = tr(P) - tr(P Z) + s tr(P^2)`` and
        ``e^2 tr((Z K)^2) = p - 2 tr(Z) + 2 s tr(P) + tr(Z^2) - 2 s tr(P Z) + s^2 tr(P^2)``;
        ``Z K`` by a second product where ``e`` is small (the criterion of
        :meth:`_hessian_lu`). Its curvature across them (in ``alpha_1 - alpha_4``) is not
        computed: the entries in ``alpha_1`` and ``alpha_4`` are equal. Else the full Hessian
        (:meth:`_hessian_lu`)."""
        a1, a2, a3, a4 = (float(x) for x in a)
        e = a1 * a4 - a2 * a3
        zs = -2 * self.p * self.gradient(a, single)[0]                # tr(Z S_M)
        if self._Zl is None:
            return self._hessian_lu(a1, a4, e)
        p, s, Zl = self.p, (a1 + a4) / 2, self._Zl
        if single and p >= _SINGLE_MIN:
            Z32 = self._Zl32 if self._Zl32 is not None else Zl.astype(np.float32, order="F")
            P = blas.ssymm(1.0, Z32, self._S32.T, lower=1).astype(np.float64, order="F")
        else:
            P = blas.dsymm(1.0, Zl, self.S.T, lower=1)     # S.T: S in F order
        dz = np.diagonal(Zl)
        # vdot(X.T, Y.T) = sum X_ij Y_ij for F-ordered X, Y (C-ordered views, no copies);
        # tr(X Y) = einsum("ij,ji", X, Y) (a transposed copy for vdot is far slower)
        Zt = Zl.T
        pp = np.einsum("ij,ji->", P, P)                                  # tr(P^2)
        pz = np.vdot(P.T, Zt) + np.einsum("ij,ji->", P, Zl) - np.diagonal(P) @ dz     # tr(P Z)
        if abs(e) * self._normK >= 0.01 * np.sqrt(p) * (1 + 2 * abs(s) * self.scale):
            zz = 2 * np.vdot(Zt, Zt) - dz @ dz                         # tr(Z^2)
            pk = (zs - pz + s * pp) / e
            kk = (p - 2 * np.sum(dz) + 2 * s * zs + zz - 2 * s * pz + s * s * pp) / e ** 2
        else:
            Q = blas.dsymm(1.0, Zl, self.K.T, lower=1)
            pk, kk = np.einsum("ij,ji->", P, Q), np.einsum("ij,ji->", Q, Q)
        # -tr(Z W_i Z W_j) / p with dW / d(alpha_1, alpha_4, e) = (-M, -M^T, K), where along
        # alpha_1 = alpha_4 only W_1 + W_4 = -S_M enters
        return -np.array([[pp / 4, pp / 4, -pk / 2], [pp / 4, pp / 4, -pk / 2],
                          [-pk / 2, -pk / 2, kk]]) / p

    def _hessian_lu(self, a1: float, a4: float, e: float) -> np.ndarray:
        """:meth:`hessian` from the LU inverse ``Z`` and two GEMMs.

        ``Z K = (I - Z + alpha_1 Z M + alpha_4 Z M^T) / e`` (from ``Z W = I``) without a product
        when ``|e| ||K||_F >= 0.01 (1 + (|alpha_1| + |alpha_4|) ||M||_F / sqrt(p)) sqrt(p)``
        (the subtraction then loses at most a factor 100 of the rounding), ``Z @ K`` otherwise."""
        M, K, p, Z = self.M, self.K, self.p, self._Z
        assert Z is not None
        P1, P4 = Z @ M, Z @ self.Mt
        if abs(e) * np.linalg.norm(K) >= 0.01 * np.sqrt(p) * (1 + (abs(a1) + abs(a4)) * self.scale):
            Pe = (self.I - Z + a1 * P1 + a4 * P4) / e
        else:
            Pe = Z @ K
        P = (P1, P4, Pe)
        Pt = [np.ascontiguousarray(X.T) for X in P]   # tr(X Y) = vdot(X, Y^T)
        sign = np.array([-1.0, -1.0, 1.0])          # dW / d(alpha_1, alpha_4, e) = (-M, -M^T, K)
        hess = np.empty((3, 3))
        for i in range(3):
            for j in range(i, 3):
                hess[i, j] = hess[j, i] = -sign[i] * sign[j] * np.vdot(P[i], Pt[j]) / p
        return hess

    def forms(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The forms ``m^T . m`` of :meth:`values` and their Jacobian in ``alpha``."""
        a1, a2, a3, a4 = (float(x) for x in a)
        M, m = self.M, self.m
        if m is None:
            raise ValueError("forms need the signal m")
        self._factor(a1, a4, a1 * a4 - a2 * a3)
        # A = I - alpha_4 M^T in F order is (I - alpha_4 M) in C order, transposed (no copy)
        lu = linalg.lu_factor((self.I - a4 * M).T, check_finite=False)

        def solve(vd: np.ndarray, vq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # G v: x_d = S^{-1} (v_d + alpha_2 M^T A^{-1} v_q) = Z (A v_d + alpha_2 M^T v_q)
            xd = self._apply(vd - a4 * (M.T @ vd) + a2 * (M.T @ vq))
            return xd, linalg.lu_solve(lu, vq + a3 * (M @ xd), check_finite=False)

        def solve_t(ud: np.ndarray, uq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # G^T u: y_d = S^{-T} (u_d + alpha_3 M^T A^{-T} u_q), S^{-T} = A^T Z^T
            w = self._apply(ud + a3 * (M.T @ linalg.lu_solve(lu, uq, trans=1, check_finite=False)), True)
            yd = w - a4 * (M @ w)
            return yd, linalg.lu_solve(lu, uq + a2 * (M @ yd), trans=1, check_finite=False)

        zero = np.zeros_like(m)
        u1, u2 = M.T @ m, M @ m
        xs = (solve(m, zero), solve(zero, m))
        ys = (solve_t(u1, zero), solve_t(zero, u2))
        F, J = np.empty(4), np.empty((4, 4))
        for i, (yd, yq) in enumerate(ys):
            for j, (xd, xq) in enumerate(xs):
                Mxd, Mtxq = M @ xd, M.T @ xq
                F[2 * i + j] = (u1 @ xd) if i == 0 else (u2 @ xq)
                J[2 * i + j] = (yd @ Mxd, yd @ Mtxq, yq @ Mxd, yq @ Mtxq)
        return F, J


_ORDER = [0, 2, 1, 3]        # F in the order (alpha_1, alpha_3, alpha_2, alpha_4) of -grad psi


def _JX(a: np.ndarray) -> np.ndarray:
    """``d(alpha_1, alpha_4, e) / d alpha`` (3 x 4), ``e = alpha_1 alpha_4 - alpha_2 alpha_3``."""
    return np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [a[3], -a[2], -a[1], a[0]]])


def _trace_values(grad: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The four traces ``F = -(d psi / d alpha)[_ORDER]`` from the gradient of
    ``psi = log det W / p`` in ``(alpha_1, alpha_4, e)`` (:class:`_Oracle`)."""
    return -(_JX(a).T @ grad)[_ORDER]


def _trace_jacobian(grad: np.ndarray, hess: np.ndarray, a: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The four traces and their Jacobian in ``alpha`` (4 x 4) from the gradient and Hessian of
    ``psi`` in ``(alpha_1, alpha_4, e)`` (the chain rule through ``e``)."""
    Jx = _JX(a)
    He = np.zeros((4, 4))
    He[0, 3] = He[3, 0] = 1.0
    He[1, 2] = He[2, 1] = -1.0
    return _trace_values(grad, a), -(Jx.T @ hess @ Jx + grad[2] * He)[_ORDER]


class _Blocks(_LogDet):
    """The oracle of a matrix that is block diagonal in an orthonormal basis,
    ``diag(M_1, alpha I_d)``: ``M_1`` (``k x k``) on an invariant subspace that holds ``m``, and
    ``alpha`` on its ``d``-dimensional complement, ``p = k + d``.

    Every block of the p-side resolvent is a rational function of ``M`` and ``M^T``, so it is
    block diagonal in the same basis: its normalised trace is the dimension-weighted mean
    ``(k t_1 + d t_alpha) / p`` of the blocks' (:meth:`_Oracle.gradient`,
    :meth:`_Oracle.hessian`, each normalised by its own dimension), and its form in ``m`` is
    the first block's. One evaluation costs ``O(k^3)``
    instead of ``O(p^3)``: the any-matrix theory of ``alpha I + W_K^T W_Q`` with ``r`` pairs at any
    ``p`` works in the latent span of ``mu, w_K^(k), w_Q^(k)`` (``k <= 1 + 2 r``).
    """

    def __init__(self, M: np.ndarray, m: np.ndarray | None, alpha: float, d: int):
        self.parts = (_Oracle(M, m), _Oracle(np.array([[alpha]]), None))
        k = M.shape[0]
        self.weights = (k / (k + d), d / (k + d))

    @property
    def evaluations(self) -> int:
        return self.parts[0].evaluations

    def gradient(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The dimension-weighted mean of the blocks' :meth:`_Oracle.gradient`."""
        w1, w2 = self.weights
        return w1 * self.parts[0].gradient(a, single) + w2 * self.parts[1].gradient(a, single)

    def hessian(self, a: np.ndarray, single: bool = False) -> np.ndarray:
        """The dimension-weighted mean of the blocks' :meth:`_Oracle.hessian`."""
        w1, w2 = self.weights
        return w1 * self.parts[0].hessian(a, single) + w2 * self.parts[1].hessian(a, single)

    def forms(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first block's :meth:`_Oracle.forms` (``m`` lies in it)."""
        return self.parts[0].forms(a)


def _sigma_pp(g: np.ndarray, rho: float, c: float) -> np.ndarray:
    """``Sigma_pp`` (5 x 5, rows d, b, q; columns q', d', b) from the n-side blocks ``g``."""
    S = np.zeros((5, 5), dtype=g.dtype)
    yt = _yt_coef(rho)
    for r, cn in _Y:
        for k, (cn2, s) in enumerate(_YT):
            S[r, s] -= yt[k] * g[cn, cn2] / c
    return S


def _alphas(S: np.ndarray) -> tuple[np.ndarray, float]:
    """The Schur coefficients ``alpha_1..4`` and ``beta = 1 - s_bb`` (see :class:`_Oracle`)."""
    beta = 1.0 - S[2, 2]
    return np.array([S[0, 1] + S[0, 2] * S[2, 1] / beta, S[0, 4] + S[0, 2] * S[2, 4] / beta,
                     S[3, 1] + S[3, 2] * S[2, 1] / beta, S[3, 4] + S[3, 2] * S[2, 4] / beta]), beta


def _blocks(S: np.ndarray, F: np.ndarray, unit: float) -> np.ndarray:
    """``t[pi, sigma]`` for ``pi`` in (q', d', b) and ``sigma`` in (d, b, q) (a 5 x 5 array with
    those entries filled) from the four oracle values ``F`` and ``unit`` (``tr I / p = 1`` for
    traces, ``m^T m`` for forms)."""
    beta = 1.0 - S[2, 2]
    t = np.zeros((5, 5), dtype=np.result_type(S, F))
    for sg in (0, 2, 3):
        rd = (sg == 0) + (S[0, 2] / beta) * (sg == 2)
        rq = (sg == 3) + (S[3, 2] / beta) * (sg == 2)
        md = rd * F[0] + rq * F[1]          # M d
        mq = rd * F[2] + rq * F[3]          # M^T q
        t[1, sg] = md
        t[4, sg] = mq
        t[2, sg] = (unit * (sg == 2) + S[2, 4] * mq + S[2, 1] * md) / beta
    return t


def _n_side(t: np.ndarray, g: np.ndarray, rho: float, k0: float, b2: float,
            gamma: float) -> np.ndarray:
    """``g_new = (L0_nn - Sigma_nn)^{-1}`` (3 x 3) from the p-side traces ``t`` and ``g``."""
    S = np.zeros((3, 3), dtype=np.result_type(t, g))
    yt = _yt_coef(rho)
    for r in range(3):
        for s in range(3):
            S[r, s] = -yt[r] * t[_PI[r], _SIG[s]]
    for r, cn, h1 in _H:
        for cn2, s, h2 in _H:
            S[r, s] += h1 * h2 * b2 * g[cn, cn2]
    L0 = np.array([[gamma, 0.0, -k0], [k0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    return np.linalg.inv(L0 - S)


def _complex_step(fun: Callable[[np.ndarray], np.ndarray], g: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``fun(g)`` and its Jacobian in the entries of ``g`` (``(size, g.size)``; nine for the
    ``3 x 3`` n-side blocks) by complex steps, ``Im fun(g + i h e_k) / h`` (exact to rounding:
    ``fun`` is real-analytic small algebra)."""
    h = 1e-20 * np.abs(g).max()
    J = np.empty((np.size(fun(g)), g.size))
    for k in range(g.size):
        e = g.astype(complex).ravel()
        e[k] += 1j * h
        J[:, k] = np.ravel(fun(e.reshape(g.shape))).imag / h
    return np.real(fun(g)), J


def _linearised(lin: tuple[np.ndarray, np.ndarray, np.ndarray], a: np.ndarray) -> np.ndarray:
    """An oracle's values at ``a`` from its value and Jacobian ``lin = (F0, dF, a0)`` at ``a0``:
    exact at ``a0``, and there with the exact derivative."""
    F0, dF, a0 = lin
    return F0 + dF @ (a - a0)


def _phi(g, lin, c, rho, k0, b2, gamma):
    """One pass of the fixed-point map, the trace oracle linearised (:func:`_linearised`)."""
    S = _sigma_pp(g, rho, c)
    a, _ = _alphas(S)
    return _n_side(_blocks(S, _linearised(lin, a), 1.0), g, rho, k0, b2, gamma)


def _coordinates(g: np.ndarray) -> np.ndarray:
    """The six coordinates ``(g_xx, g_xa, g_xt, g_aa, g_at, g_ta)`` of ``g`` (3 x 3) in the
    subspace ``g_tx = -g_xa``, ``g_ax = -g_xt``, ``g_tt = g_aa`` (its orthogonal projection
    there), where the fixed point lies (:func:`_solve_point`)."""
    return np.array([g[0, 0], (g[0, 1] - g[2, 0]) / 2, (g[0, 2] - g[1, 0]) / 2,
                     (g[1, 1] + g[2, 2]) / 2, g[1, 2], g[2, 1]])


def _matrix_of(h: np.ndarray) -> np.ndarray:
    """``g`` (3 x 3) from its coordinates ``h`` (:func:`_coordinates`)."""
    return np.array([[h[0], h[1], h[2]], [-h[2], h[3], h[4]], [-h[1], h[5], h[3]]])


def _solve_point(g, oracle, c, rho, k0, b2, gamma, tol, max_iter=_MAX_ITER, far=True):
    """The n-side unknowns at one ``gamma`` (module docstring, *Numerics*).

    The map ``g -> Phi(g)`` keeps the subspace of :func:`_coordinates` (there
    ``alpha_1 = alpha_4``, and ``psi`` is symmetric in them), so the fixed point is solved in
    its six coordinates by Newton's method: each oracle call gives the values and the exact
    Jacobian in the ``alpha`` (:meth:`_LogDet.values`, :meth:`_LogDet.jacobian`), and up to
    ``_INNER`` Newton steps on the small algebra with the oracle linearised
    (:func:`_linearised`) follow. The oracle runs in float32 (``single``) at the first call
    where ``g`` is ``far`` from the solution (a cold start, or predicted over a long step),
    and at the first two where ``tol >= _SINGLE_TOL`` (a float32 residual then converges: its
    error is far below ``tol`` unless ``W`` is ill-conditioned, and the calls after them are in
    float64), its Jacobian also at the other calls until the residual is below
    ``tol`` (relative): that call's Jacobian is in float64 (unless the call is in float32) and
    the last Newton step is taken without a new oracle call (its error is of the order of the
    residual squared); at most ``max_iter`` oracle calls. Returns
    ``(g, gk, J, a, res, converged)``: ``g`` the solution, ``gk`` the last iterate, ``J`` the
    Jacobian (6 x 6) of ``Phi(g) - g`` in the coordinates, ``a`` the ``alpha`` at ``gk``,
    ``res`` its residual."""
    h = _coordinates(g)

    def residual(lin):
        return lambda x: _coordinates(_phi(_matrix_of(x), lin, c, rho, k0, b2, gamma)) - x

    loose = tol >= _SINGLE_TOL
    for it in range(max_iter):
        a0, _ = _alphas(_sigma_pp(_matrix_of(h), rho, c))
        single = it < (2 if loose else 1 if far else 0)
        F = oracle.values(a0, single)
        r0 = residual((F, np.zeros((4, 4)), a0))(h)
        scale = np.abs(h).max()
        res = np.abs(r0).max()
        done = res < tol * scale and (loose or not single)    # float32 calls: loose tol only
        lin = (F, oracle.jacobian(a0, single or not done), a0)
        r0, J = _complex_step(residual(lin), h)
        step = np.linalg.solve(J, -r0)
        if done:
            return _matrix_of(h + step), _matrix_of(h), J, a0, res, True
        for _ in range(_INNER):
            big = np.abs(step).max() / scale
            h = h + step * min(1.0, 0.5 / big)
            r1, J1 = _complex_step(residual(lin), h)
            if np.abs(r1).max() < 1e-3 * res:
                break
            step = np.linalg.solve(J1, -r1)
    return _matrix_of(h), _matrix_of(h), J, a0, res, False


def _predict(points, new):
    """The solution at ``gamma = new`` extrapolated from solved points
    ``(log gamma, g, dg/dlog gamma or None)`` (the path so far; ``g`` of any shape): the Hermite
    polynomial in ``log gamma`` (values, and the derivatives where given) through the last point
    and up to ``_PREDICT_POINTS - 1`` earlier ones, each between half and twice the extrapolation
    distance from the one after it (a cluster of close points counts once, a far point ends the
    list: the tangent predictor remains for long steps), of ``log |g|`` for the entries of one
    sign (moved by at most a factor ``e^3``), of ``g`` for the others."""
    dist = abs(np.log(new) - points[-1][0])
    used = [points[-1]]
    for pt in reversed(points[:-1]):
        gap = abs(used[-1][0] - pt[0])
        if len(used) == _PREDICT_POINTS or gap > 2 * dist:
            break
        if gap >= dist / 2:
            used.append(pt)
    points = used[::-1]
    x1, g1, _ = points[-1]
    keep = np.abs(g1) >= 1e-8 * np.abs(g1).max()
    for _, g, _ in points:
        keep &= np.sign(g) == np.sign(g1)
    h = x1 - points[0][0] if len(points) > 1 else 1.0
    k = sum(1 if d is None else 2 for _, _, d in points)
    V, rhs = np.zeros((k, k)), np.zeros((k, g1.size))
    row = 0
    with np.errstate(all="ignore"):
        for x, g, d in points:
            u = (x - x1) / h
            V[row] = u ** np.arange(k)
            rhs[row] = np.where(keep, np.log(np.abs(g)), g).ravel()
            last = row  # the value row of the last point, at the end
            row += 1
            if d is not None:
                V[row, 1:] = np.arange(1, k) * u ** np.arange(k - 1) / h
                rhs[row] = np.where(keep, d / g, d).ravel()
                row += 1
    coef = np.linalg.solve(V, rhs)
    y = (((np.log(new) - x1) / h) ** np.arange(k) @ coef).reshape(g1.shape)
    y1 = rhs[last].reshape(g1.shape)
    return np.where(keep, np.sign(g1) * np.exp(np.clip(y, y1 - 3.0, y1 + 3.0)), y)


def _path(targets: np.ndarray, start: float | None = None) -> list[float]:
    """The continuation path for the requested ``gamma`` (``targets``, decreasing): from
    ``start`` (default ``max(10, 10 max gamma)``; at least ``max gamma``) down through every
    target, in steps of ratio at most ``_MAX_RATIO_STEP``."""
    path = [max(10.0, 10.0 * targets[0]) if start is None else max(start, targets[0])]
    for t in targets[1:] if path[0] == targets[0] else targets:
        while path[-1] / t > _MAX_RATIO_STEP:
            path.append(path[-1] / _MAX_RATIO_STEP)
        path.append(t)
    return path


def _form(g, lin, unit, c, rho):
    """``y^T Q y / n`` from the n-side solution ``g`` by one Woodbury step (6 x 6) for the
    signal ``X / sqrt(p) = Y + m yhat^T / sqrt(c)``, the form oracle linearised
    (:func:`_linearised`; ``unit = m^T m``)."""
    S = _sigma_pp(g, rho, c)
    a, _ = _alphas(S)
    return _woodbury(g, _blocks(S, _linearised(lin, a), unit), c, rho)


def _woodbury(g, t, c, rho):
    """``y^T Q y / n`` from the n-side blocks ``g`` and the forms ``t[pi, sigma] =
    m^T Gbar_pp[pi, sigma] m`` (5 x 5, as :func:`_blocks`) by the Woodbury step of :func:`_form`
    (also :mod:`~attn_lib.theory._covariance`, whose ``Gbar_pp`` holds the tokens' covariance)."""
    u_m, v_m = (0, 2, 3), (4, 1, 2)          # p-variables of U's and V's m-columns
    C = np.zeros((6, 6))
    K = np.zeros((6, 6), dtype=t.dtype)
    yt = _yt_coef(rho)
    for r, cn in _Y:
        C[u_m.index(r), 3 + cn] = -1.0 / np.sqrt(c)
    for k, (r, pc) in enumerate(_YT):
        C[3 + r, v_m.index(pc)] = yt[k] / np.sqrt(c)
    for i, pi in enumerate(v_m):
        for j, sg in enumerate(u_m):
            K[i, j] = t[pi, sg]
    K[3:, 3:] = g
    row = np.zeros(6, dtype=g.dtype)
    row[3:] = g[0, :]
    ell = np.zeros(6, dtype=g.dtype)
    ell[3:] = g[:, 0]
    return g[0, 0] - row @ np.linalg.solve(np.eye(6) + C @ K, C @ ell)


def matrix_resolvent_form(c, M, mu, f: NonlinearityLike, gammas, *, scale=None, bulk=None,
                          complement=None):
    """``(y^T Q y / n, E)`` on a grid of ``gamma`` for any key-query matrix (see the module docstring).

    Parameters
    ----------
    c : float
        ``p / n``.
    M : ndarray of shape (p, p)
        The matrix of the logits ``x_i^T M x_j / sqrt(p)`` (rows: keys), any scale.
    mu : ndarray of shape (p,) or None
        Signal (``snr = ||mu||^2``); ``None`` for random inputs.
    f : str or callable
        Nonlinearity.
    gammas : array_like of shape (G,)
    scale : float, optional
        The logit scale ``sigma`` at which ``f`` is linearised; default ``||M||_F / sqrt(p)``.
    bulk : ndarray of shape (p, p), optional
        The matrix whose normalised traces enter the fixed point (default ``M``). The limit at
        fixed low-rank weights takes ``bulk = alpha I`` for ``M = alpha I + W_K^T W_Q``.
    complement : (float, int), optional
        ``(alpha, d)``: the key-query matrix is ``diag(M, alpha I_d)`` in an orthonormal basis of
        ``R^{k + d}`` (``M`` of shape ``(k, k)`` on an invariant subspace that holds ``mu``), solved
        in ``O(k^3)`` per oracle call (:class:`_Blocks`): ``alpha I + W_K^T W_Q`` at any ``p`` in the
        latent span of its vectors. Not with ``bulk``.

    Returns
    -------
    form, error : ndarray of shape (G,)
        ``y^T Q y / n`` and ``E = -gamma^2 d(y^T Q y / n)/dgamma``.
    """
    M = check_square(M, "M")
    k = M.shape[0]
    c = check_real(c, "c", low=0.0, low_open=True)
    g_arr = np.atleast_1d(check_gammas(gammas))
    if complement is None:
        alpha, d = 0.0, 0
    elif bulk is not None:
        raise ValueError("complement and bulk cannot be given together")
    else:
        alpha, d = check_real(complement[0], "complement[0]"), check_int(complement[1], "complement[1]", low=1)
    p = k + d
    sigma = float(np.sqrt((np.sum(M * M) + d * alpha ** 2) / p)) if scale is None else check_real(
        scale, "scale", low=0.0, low_open=True)
    Mb = M if bulk is None else check_square(bulk, "bulk")
    if Mb.shape != M.shape:
        raise ValueError(f"bulk must have shape {M.shape}, got {Mb.shape}")
    m = None
    if mu is not None:
        m = check_array(mu, "mu")
        if m.shape != (k,):
            raise ValueError(f"mu must have shape ({k},), got {m.shape}")
    h = hermite.coefficients(f, sigma)
    rho, b2 = np.sqrt(c) * h.a1, h.b2
    k0 = rho * (np.trace(Mb) + d * alpha) / (p * sigma)
    traces = (_Oracle(Mb / sigma, m if bulk is None else None) if complement is None
              else _Blocks(M / sigma, m, alpha / sigma, d))
    quad = None if m is None else traces if bulk is None else _Oracle(M / sigma, m)
    targets = np.unique(g_arr)[::-1]
    start = max(_START, float(targets[0]))
    out: dict[Any, tuple[Any, Any]] = {}
    points: list[tuple[Any, np.ndarray, np.ndarray]] = []
    st: dict[str, Any] = {}

    def solve(t_from: float, gam: float) -> tuple[bool, float]:
        """The point ``gam`` predicted from the path so far (a cold start at the first), with
        ``_TRY_ITER`` oracle calls while the step from ``t_from`` can still be split."""
        split = bool(points) and np.log(t_from) - np.log(gam) > np.log(_MIN_SPLIT)
        g0 = _predict(points, gam) if points else np.linalg.inv(
            np.array([[gam, 0.0, -k0], [k0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
        tol = _NEWTON_TOL if gam in targets else _PATH_TOL
        far = not points or t_from / gam > _SINGLE_STEP
        g, gk, J, a, res, ok = _solve_point(g0, traces, c, rho, k0, b2, gam, tol,
                                            _TRY_ITER if split else _MAX_ITER, far)
        if not ok and not split:
            raise ConvergenceError(f"any-matrix fixed point did not converge at gamma={gam:.6g}: "
                                   f"last residual {res:.3g}")
        if ok:
            # implicit function theorem: J dg/dgamma = -dPhi/dgamma = g E_xx g
            dg = _matrix_of(np.linalg.solve(J, _coordinates(np.outer(g[:, 0], g[0, :])))).ravel()
            points.append((np.log(gam), g, gam * dg.reshape(3, 3)))
            st.update(g=g, gk=gk, a=a, dg=dg)
        return ok, float(res)

    def at_target(gam: float) -> None:
        g, gk, a, dg = st["g"], st["gk"], st["a"], st["dg"]
        if quad is None:
            q, dq = g[0, 0], dg[0]
        else:
            lin = (*quad.forms(a), a)
            assert m is not None  # quad needs the signal m
            qk, grad = _complex_step(lambda e: _form(e, lin, float(m @ m), c, rho), gk)
            q, dq = float(qk) + grad[0] @ (g - gk).ravel(), grad[0] @ dg
        out[gam] = (q, -gam ** 2 * dq)

    bar = _progress.bar(range(len(_path(targets, _START)) - 1), "any-matrix theory (gamma path)")
    solve(start, start)
    descend(start, targets, solve, at_target, max_ratio=_MAX_RATIO_STEP, max_attempts=_MAX_ATTEMPTS,
            problem="any-matrix fixed point", on_step=lambda: next(bar, None))
    for _ in bar:
        pass
    form, error = np.array([out[x] for x in g_arr]).T
    return form, error


def matrix_error(c, M, mu, f: NonlinearityLike, gammas, **kwargs) -> np.ndarray:
    """The attention error ``E(gamma)`` for the matrix ``M`` (:func:`matrix_resolvent_form`)."""
    return matrix_resolvent_form(c, M, mu, f, gammas, **kwargs)[1]
