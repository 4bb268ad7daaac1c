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
  tr(M'^T G_qq)`` over ``p`` (:class:`_Oracle`), three functions of
  ``(alpha_1, alpha_2 alpha_3, alpha_4)``: two ``p x p`` inverses and three products per call.

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
traces), this is the rank-one limit theory to 3e-9 (``tests/test_matrix_theory.py``).

Numerics
--------
The nine entries of ``g`` are found by Newton's method at each ``gamma`` along a path from
``gamma = 10`` down (steps of ratio at most 4, tangent predictor from the implicit function
theorem); the Newton Jacobian uses the oracle's Jacobian in the ``alpha``'s (forward
differences, three more calls, reused while the residual falls 20-fold per step) and forward
differences of the small n-side algebra.
``E = -gamma^2 d(y^T Q y / n)/dgamma`` by a central difference of relative step ``1e-4``
(the fixed point is solved to ``1e-12``, so the difference is good to about ``1e-8``).
Cost: ``O(p^3)`` per oracle call (one or two ``p x p`` inverses), about 115 calls for three
``gamma`` (counted at ``p = 150``); a GPT-2 layer (``p = 768``) takes 21-72 s for three ``gamma``
and 77 s for 20, with one BLAS thread under load. Run it with one BLAS thread on a shared machine
(``threadpoolctl``): several threads on small matrices oversubscribe the cores.
"""

from __future__ import annotations

import numpy as np

from ..model import hermite
from ..model.nonlinearity import NonlinearityLike
from .._validation import check_array, check_gammas, check_real, check_square
from ._errors import ConvergenceError

__all__ = ["matrix_error", "matrix_resolvent_form"]

# n-side pencil variables x, a, t (0, 1, 2); p-side d, d', b, q, q' (0..4)
_Y = ((0, 0), (2, 1), (3, 2))       # Y at (p-row, n-col), coefficient -1
_YT = ((0, 4), (1, 1), (2, 2))      # Y^T at (n-row, p-col), coefficients rho, -rho, -1
_H = ((0, 2, 1.0), (1, 0, -1.0))    # H at (n-row, n-col, coefficient)
_PI = (4, 1, 2)                     # p-column of the Y^T block in n-row x, a, t
_SIG = (0, 2, 3)                    # p-row of the Y block in n-column x, a, t
_NEWTON_TOL = 1e-12
_MAX_ITER = 60
_MAX_RATIO_STEP = 4.0


def _yt_coef(rho: float) -> np.ndarray:
    return np.array([rho, -rho, -1.0])


class _Oracle:
    """Normalised traces (or quadratic forms in ``m``) of the p-side blocks.

    With ``s = Sigma_pp`` (rows d, b, q; columns q', d', b), ``beta = 1 - s_bb`` and
    ``alpha_1 = s_dd' + s_db s_bd' / beta``, ``alpha_2 = s_dq' + s_db s_bq' / beta``,
    ``alpha_3 = s_qd' + s_qb s_bd' / beta``, ``alpha_4 = s_qq' + s_qb s_bq' / beta``, the
    ``2p x 2p`` operator ``[[I - alpha_1 M, -alpha_2 M^T], [-alpha_3 M, I - alpha_4 M^T]]`` is
    inverted by its Schur complement ``S = I - alpha_1 M - b N``, ``b = alpha_2 alpha_3``,
    ``N = M^T A^{-1} M``, ``A = I - alpha_4 M^T``. The values are
    ``F = (f_1, alpha_2 f_2, alpha_3 f_2, f_3)`` with ``f_1 = tr(M S^{-1})/p``,
    ``f_2 = tr(N S^{-1})/p`` and ``f_3 = tr(M^T A^{-1})/p + b tr(M^T A^{-1} N S^{-1})/p``
    (traces), or the same with ``m^T . m`` (forms): three functions of ``(alpha_1, b, alpha_4)``.
    """

    def __init__(self, M: np.ndarray, m: np.ndarray | None):
        self.M, self.m = M, m
        self.p = M.shape[0]
        self.I = np.eye(self.p)
        self.evaluations = 0
        self._a4 = None

    def _pieces(self, a4: float):
        if self._a4 != a4:
            M = self.M
            B = M.T @ np.linalg.inv(self.I - a4 * M.T)
            N = B @ M
            self._cache = (B, N, B @ N)
            self._a4 = a4
        return self._cache

    def _f(self, a1: float, b: float, a4: float, forms: bool) -> np.ndarray:
        out = self._f_eval(a1, b, a4, forms)
        self._last = out
        return out

    def _f_eval(self, a1: float, b: float, a4: float, forms: bool) -> np.ndarray:
        self.evaluations += 1
        M, p = self.M, self.p
        B, N, N2 = self._pieces(a4)
        Sinv = np.linalg.inv(self.I - a1 * M - b * N)
        if forms:
            m = self.m
            sm = Sinv @ m
            Bm = B @ m
            sbm = Sinv @ Bm
            # f_2: m^T M S^{-1} B m (= alpha_2^{-1} m^T M G_dq m) and m^T B M S^{-1} m
            # (= alpha_3^{-1} m^T M^T G_qd m) differ for forms: both are returned
            return np.array([m @ (M @ sm), m @ (M @ sbm), m @ (B @ (M @ sm)),
                             m @ Bm + b * (m @ (B @ (M @ sbm)))])
        f2 = np.sum(N * Sinv.T) / p
        return np.array([np.sum(M * Sinv.T) / p, f2, f2, np.trace(B) / p + b * np.sum(N2 * Sinv.T) / p])

    @staticmethod
    def _values(f: np.ndarray, a: np.ndarray) -> np.ndarray:
        return np.array([f[0], a[1] * f[1], a[2] * f[2], f[3]])

    def __call__(self, a: np.ndarray, forms: bool = False) -> np.ndarray:
        """``(tr(M G_dd), tr(M G_dq), tr(M^T G_qd), tr(M^T G_qq)) / p`` at ``alpha = a`` (or the
        forms ``m^T . m``)."""
        return self._values(self._f(a[0], a[1] * a[2], a[3], forms), a)

    def jacobian(self, a: np.ndarray, forms: bool = False, values: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The values and their Jacobian in ``alpha`` (4 x 4), by forward differences in
        ``alpha_1``, ``b`` and ``alpha_4`` (the ``b`` and ``alpha_1`` steps reuse ``A^{-1}``);
        ``values``, the oracle's values at ``a`` when known, saves one evaluation."""
        b = a[1] * a[2]
        if values is None:
            f0 = self._f(a[0], b, a[3], forms)
        else:
            f0 = values.copy()
            f0[1] = self._last[1]
            f0[2] = self._last[2]
        h = 1e-7 * np.maximum(np.abs([a[0], b, a[3]]), 1e-3)
        d1 = (self._f(a[0] + h[0], b, a[3], forms) - f0) / h[0]
        db = (self._f(a[0], b + h[1], a[3], forms) - f0) / h[1]
        d4 = (self._f(a[0], b, a[3] + h[2], forms) - f0) / h[2]
        mult = np.array([1.0, a[1], a[2], 1.0])
        J = np.empty((4, 4))
        J[:, 0] = mult * d1
        J[:, 3] = mult * d4
        J[:, 1] = mult * db * a[2]
        J[:, 2] = mult * db * a[1]
        J[1, 1] += f0[1]
        J[2, 2] += f0[2]
        return self._values(f0, a), J


def _sigma_pp(g: np.ndarray, rho: float, c: float) -> np.ndarray:
    """``Sigma_pp`` (5 x 5, rows d, b, q; columns q', d', b) from the n-side blocks ``g``."""
    S = np.zeros((5, 5))
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
    t = np.zeros((5, 5))
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
    S = np.zeros((3, 3))
    yt = _yt_coef(rho)
    for r in range(3):
        for s in range(3):
            S[r, s] = -yt[r] * t[_PI[r], _SIG[s]]
    for r, cn, h1 in _H:
        for cn2, s, h2 in _H:
            S[r, s] += h1 * h2 * b2 * g[cn, cn2]
    L0 = np.array([[gamma, 0.0, -k0], [k0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    return np.linalg.inv(L0 - S)


def _phi(g, T, dT, a0, c, rho, k0, b2, gamma):
    """One pass of the fixed-point map, the oracle linearised at ``a0``: ``T + dT (alpha - a0)``."""
    S = _sigma_pp(g, rho, c)
    a, _ = _alphas(S)
    F = T + dT @ (a - a0)
    return _n_side(_blocks(S, F, 1.0), g, rho, k0, b2, gamma)


def _solve_point(g, dT, oracle, c, rho, k0, b2, gamma):
    """Newton on the nine n-side unknowns at one ``gamma``.

    The p-side oracle enters the Newton Jacobian through its linearisation ``dT`` in the four
    ``alpha`` (:meth:`_Oracle.jacobian`); the small n-side algebra is differentiated by forward
    differences. ``dT`` (from the previous point, or ``None``) is reused while the residual
    falls by a factor 20 per step and refreshed otherwise: the residual itself never uses it, so
    a stale ``dT`` only slows the convergence. Returns ``(g, J, dT, converged)`` with ``J`` the
    last Newton Jacobian (9 x 9)."""
    J, last = None, np.inf
    for it in range(_MAX_ITER):
        a0, _ = _alphas(_sigma_pp(g, rho, c))
        T = oracle(a0)
        scale = np.abs(g).max()
        r0 = _phi(g, T, np.zeros((4, 4)), a0, c, rho, k0, b2, gamma) - g
        res = np.abs(r0).max()
        if res < _NEWTON_TOL * scale and J is not None:
            return g, J, dT, True
        if dT is None or res > last / 20.0:
            T, dT = oracle.jacobian(a0, values=T)
        last = res
        J = np.empty((9, 9))
        for k in range(9):
            e = g.copy().ravel()
            h = 1e-7 * max(abs(e[k]), 1e-6 * scale)
            e[k] += h
            e = e.reshape(3, 3)
            J[:, k] = ((_phi(e, T, dT, a0, c, rho, k0, b2, gamma) - e) - r0).ravel() / h
        step = np.linalg.solve(J, -r0.ravel()).reshape(3, 3)
        big = np.abs(step).max() / scale
        g = g + step * min(1.0, 0.5 / big) if big > 0 else g
    return g, J, dT, False


def _predict(g, J, gamma, new):
    """Tangent predictor at ``new`` from the solution at ``gamma`` (implicit function theorem,
    ``dPhi/dgamma = -g E_xx g``), exponential in ``log gamma`` for each entry."""
    dR = -np.outer(g[:, 0], g[0, :])
    d = np.linalg.solve(J, -dR.ravel()).reshape(3, 3) * gamma   # dg / dlog gamma
    dl = np.log(new / gamma)
    with np.errstate(all="ignore"):
        ratio = np.clip(d / g * dl, -3.0, 3.0)
    tiny = np.abs(g) < 1e-8 * np.abs(g).max()
    return np.where(tiny, g + d * dl, g * np.exp(ratio))


def _form(g, oracle_m, c, rho):
    """``y^T Q y / n`` from the n-side solution ``g`` by one Woodbury step (6 x 6) for the
    signal ``X / sqrt(p) = Y + m yhat^T / sqrt(c)``."""
    S = _sigma_pp(g, rho, c)
    a, _ = _alphas(S)
    if oracle_m.m is None:
        return g[0, 0]
    t = _blocks(S, oracle_m(a, forms=True), float(oracle_m.m @ oracle_m.m))
    u_m, v_m = (0, 2, 3), (4, 1, 2)          # p-variables of U's and V's m-columns
    C = np.zeros((6, 6))
    K = np.zeros((6, 6))
    yt = _yt_coef(rho)
    for r, cn in _Y:
        C[u_m.index(r), 3 + cn] = -1.0 / np.sqrt(c)
    for k, (r, pc) in enumerate(_YT):
        C[3 + r, v_m.index(pc)] = yt[k] / np.sqrt(c)
    for i, pi in enumerate(v_m):
        for j, sg in enumerate(u_m):
            K[i, j] = t[pi, sg]
    K[3:, 3:] = g
    r = np.zeros(6)
    r[3:] = g[0, :]
    ell = np.zeros(6)
    ell[3:] = g[:, 0]
    return g[0, 0] - r @ np.linalg.solve(np.eye(6) + C @ K, C @ ell)


def matrix_resolvent_form(c, M, mu, f: NonlinearityLike, gammas, *, scale=None, bulk=None,
                          step: float = 1e-4):
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
    step : float
        Relative step of the central difference in ``gamma`` for ``E``.

    Returns
    -------
    form, error : ndarray of shape (G,)
    """
    M = check_square(M, "M")
    p = M.shape[0]
    c = check_real(c, "c", low=0.0, low_open=True)
    g_arr = np.atleast_1d(check_gammas(gammas))
    sigma = float(np.linalg.norm(M) / np.sqrt(p)) if scale is None else check_real(
        scale, "scale", low=0.0, low_open=True)
    Mb = M if bulk is None else check_square(bulk, "bulk")
    if Mb.shape != M.shape:
        raise ValueError(f"bulk must have shape {M.shape}, got {Mb.shape}")
    m = None
    if mu is not None:
        m = check_array(mu, "mu")
        if m.shape != (p,):
            raise ValueError(f"mu must have shape ({p},), got {m.shape}")
    h = hermite.coefficients(f, sigma)
    rho, b2 = np.sqrt(c) * h.a1, h.b2
    k0 = rho * np.trace(Mb) / (p * sigma)
    traces = _Oracle(Mb / sigma, None)
    quad = _Oracle(M / sigma, m) if (bulk is not None or m is not None) else traces
    if bulk is None and m is not None:
        traces = quad
    targets = np.unique(np.concatenate([g_arr * (1 - step), g_arr, g_arr * (1 + step)]))[::-1]
    top = max(10.0, 10.0 * targets[0])
    path = [top]
    for t in targets:
        while path[-1] / t > _MAX_RATIO_STEP:
            path.append(path[-1] / _MAX_RATIO_STEP)
        path.append(t)
    g = np.linalg.inv(np.array([[top, 0.0, -k0], [k0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    forms = {}
    J, dT, last = None, None, None
    for gam in path:
        if J is not None:
            g = _predict(g, J, last, gam)
        g, J, dT, ok = _solve_point(g, dT, traces, c, rho, k0, b2, gam)
        last = gam
        if not ok:
            raise ConvergenceError(f"any-matrix fixed point did not converge at gamma={gam:.6g}")
        if gam in set(targets):
            forms[gam] = _form(g, quad, c, rho)
    form = np.array([forms[x] for x in g_arr])
    dq = np.array([(forms[x * (1 + step)] - forms[x * (1 - step)]) / (2 * step * x) for x in g_arr])
    return form, -g_arr ** 2 * dq


def matrix_error(c, M, mu, f: NonlinearityLike, gammas, **kwargs) -> np.ndarray:
    """The attention error ``E(gamma)`` for the matrix ``M`` (:func:`matrix_resolvent_form`)."""
    return matrix_resolvent_form(c, M, mu, f, gammas, **kwargs)[1]
