r"""Finite-size ("renormalised") deterministic equivalent for strongly aligned signals.

The proportional-limit theory (:mod:`attn_lib.theory.attention`) linearises ``f`` around the
kernel argument's mean, which is zero up to the coherent shift
``delta = |snr + (mu^T w_K)(mu^T w_Q)| / sqrt(p)``; at ``p`` of a few hundred to a few thousand and
a strong aligned signal ``delta`` is of order one and the limit misses the error by up to ten
times. This module keeps the latent part of the argument exactly (derivation in
``book/derivation_finite_size.md``; notes in ``shared/theory/strong_alignment.md``).

Latent split
    With ``B`` an orthonormal basis of ``span(mu, w_K, w_Q)`` (dimension ``r <= 3``), every token
    has latent coordinates ``xi_i = B^T x_i = y_i mu_r + zeta_i`` (``zeta_i ~ N(0, I_r)``) and an
    independent complement ``z_i^perp`` of dimension ``p' = p - r``, and exactly
    ``t_ij = g_ij + h_ij`` with ``g_ij = z_i^perp . z_j^perp / sqrt(p)`` and
    ``h_ij = xi_i^T M_r xi_j / sqrt(p)``, ``M_r = I_r + w_{K,r} w_{Q,r}^T``.

Surrogate kernel (conditional Gaussian equivalent, ``i != j``)
    ``sqrt(p) K_ij = F0(h_ij) + F1(h_ij) g_ij + sqrt(S2(h_ij)) W_ij`` with the shift data of
    :mod:`attn_lib.theory.shift` and ``W`` an independent GOE matrix.

Deterministic equivalent
    The tokens' latent coordinates become *types* ``t = (y, zeta)`` with law ``pi`` (a tensor
    Gauss–Hermite rule per label). The slope kernel is factorised,
    ``F1(h(t, t')) ~ sum_k s_k u_k(t) v_k(t')`` (``m`` terms), which makes the kernel linear in
    ``Z^perp`` inside a linear pencil for ``Q = (gamma + c K^T (X^T X / p) K)^{-1}``. Gaussian
    integration over ``Z^perp`` and ``W`` leaves, per type, a ``3 x 3`` matrix ``G(t)`` (blocks
    ``x, k = K x, e = X^T X k / p``) and one ``(2m + 1) x (2m + 1)`` matrix ``Gamma`` (blocks
    ``u = Z k, v_k, q_k``):

        Lambda(t) = H0(t) - (p'/p) P(t) Gamma R(t) - Sigma_W(t),   G(t) = Lambda(t)^{-1},
        Gamma = (I - phi E_pi[R(t) G(t) P(t)])^{-1},

    with ``phi = 1/c`` and ``Sigma_W`` the Wigner self-energy (variance profile ``S2(h(t, t'))``).
    The low-rank parts (the mean kernel ``F0(h(t, t')) / sqrt(p)`` and the latent Gram
    ``Xi^T Xi / p``) enter the label form exactly, as integral operators on the types:
    ``Lambda(t) (x, k, e)(t) = (y_t - c (L^* e)(t), (L x)(t), xi_t^T omega / sqrt(p))``, and
    ``y^T Q y / n -> E_pi[y_t x(t)]``. The error is ``E(gamma) = -gamma^2 d/dgamma`` of that
    form; the derivative is taken by a complex step (the whole solver is holomorphic in gamma),
    so it is exact to rounding.

As ``n -> infinity`` at fixed ``snr`` and weights, ``h -> 0`` and the equations reduce to the
proportional-limit equivalent (tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from ..model.data import latent_coordinates
from ..model.setting import Setting
from ._continuation import continue_to
from ._errors import ConvergenceError, check_converged
from .shift import shift_functions

__all__ = ["finite_size_resolvent_form", "LatentLaw", "latent_law"]

_GH_NODES = {0: 1, 1: 32, 2: 10, 3: 6}   # Gauss–Hermite nodes per latent dimension
_PRUNE = 1e-12       # drop nodes whose weight is below this fraction of the largest
_SLOPE_TOL = 1e-4    # keep slope terms with s_k >= _SLOPE_TOL * s_1 (1e-3 and 6 terms change E by < 1e-6)
_SLOPE_MAX = 8
_NOISE_TOL = 1e-10   # relative cut-off of the factorised Wigner variance profiles
_MEAN_TOL = 1e-8     # keep mean-kernel terms with singular value >= _MEAN_TOL * largest (1e-6: E moves < 1e-8)
_STEP = 1e-30        # complex step (relative to gamma)
_TOL = 1e-10         # fixed-point tolerance (relative change of value and derivative)
_MAX_ITER = 300
_GAMMA_START = 10.0  # continuation starts here (a cold start converges fast at large gamma)
_MAX_RATIO = 2.0     # largest gamma ratio of one continuation step
_MAX_ATTEMPTS = 9    # per continuation step: the first try and up to 8 halvings
_PROBLEM = "finite-size fixed point"
_MEMORY = 12        # Anderson memory


@dataclass(frozen=True)
class LatentLaw:
    """Quadrature rule for the types ``t = (y, zeta)`` and the latent geometry of a setting.

    Attributes
    ----------
    xi : ndarray, shape (T, r)
        Latent coordinates ``y mu_r + zeta`` of the nodes.
    y : ndarray, shape (T,)
        Labels of the nodes (``+-1``, half the mass each).
    weight : ndarray, shape (T,)
        Quadrature weights (sum to one).
    M : ndarray, shape (r, r)
        Restricted attention matrix ``I_r + w_{K,r} w_{Q,r}^T``.
    p : int
        Token dimension.
    """

    xi: np.ndarray
    y: np.ndarray
    weight: np.ndarray
    M: np.ndarray
    p: int

    @property
    def r(self) -> int:
        """Latent dimension ``dim span(mu, w_K, w_Q)``."""
        return self.xi.shape[1]

    def shifts(self) -> np.ndarray:
        """``h(t, t') = xi_t^T M_r xi_t' / sqrt(p)``, shape ``(T, T)``."""
        return self.xi @ self.M @ self.xi.T / math.sqrt(self.p)


def _frame(coords: np.ndarray) -> np.ndarray:
    """Orthogonal ``O`` (r x r) whose rows are ``w_K``'s direction, then ``w_Q``'s, then ``mu``'s.

    Gram–Schmidt on ``(w_{K,r}, w_{Q,r}, mu_r, e_1, ..., e_r)``, skipping vectors that are
    (numerically) in the span of the previous ones. ``h = xi^T M_r xi' / sqrt(p)`` varies fastest
    along ``w_K`` in ``xi`` and along ``w_Q`` in ``xi'``.
    """
    r = coords.shape[0]
    rows: list[np.ndarray] = []
    for v in [coords[:, 1], coords[:, 2], coords[:, 0], *np.eye(r)]:
        for u in rows:
            v = v - (u @ v) * u
        if len(rows) < r and np.linalg.norm(v) > 1e-8 * max(1.0, np.linalg.norm(coords)):
            rows.append(v / np.linalg.norm(v))
    return np.array(rows).reshape(r, r)


def latent_law(setting: Setting, p: int, nodes: int | tuple[int, ...] | None = None) -> LatentLaw:
    """Latent geometry of the canonical ``setting`` and a Gauss–Hermite rule for its types.

    Parameters
    ----------
    setting : Setting
        Canonical (``alpha = 1``).
    p : int
        Token dimension.
    nodes : int or tuple of int, optional
        Gauss–Hermite nodes per latent dimension (default: 32, 10, 6 for ``r = 1, 2, 3``), in the
        basis of :func:`attn_lib.model.data.latent_coordinates`. A tuple of ``r`` counts gives
        the nodes along the axes of ``w_K``, ``w_Q`` and ``mu`` instead (:func:`_frame`; the law
        of the types is rotation invariant): a rule refined where the kernels vary fastest, for
        oscillating or step-like ``f`` under a strong spike.
    """
    coords = latent_coordinates(setting)        # (r, 3): columns mu_r, wK_r, wQ_r
    r = coords.shape[0]
    if isinstance(nodes, tuple):
        if len(nodes) != r:
            raise ValueError(f"nodes must have one count per latent dimension (r = {r}), got {nodes!r}")
        coords = _frame(coords) @ coords
        counts = nodes
    else:
        counts = (nodes or _GH_NODES[r],) * r
    mu_r, wk_r, wq_r = coords[:, 0], coords[:, 1], coords[:, 2]
    M = np.eye(r) + np.outer(wk_r, wq_r)
    rules = [np.polynomial.hermite_e.hermegauss(k) for k in counts]
    grids = np.meshgrid(*[t for t, _ in rules], indexing="ij")
    zeta = np.stack([g.ravel() for g in grids], axis=1) if r else np.zeros((1, 0))
    wz = (np.prod(np.meshgrid(*[w / w.sum() for _, w in rules], indexing="ij"), axis=0).ravel()
          if r else np.ones(1))
    sel = wz >= _PRUNE * wz.max()
    zeta, wz = zeta[sel], wz[sel] / wz[sel].sum()
    y = np.repeat([1.0, -1.0], len(wz))
    xi = np.concatenate([zeta + mu_r, zeta - mu_r])
    return LatentLaw(xi=xi, y=y, weight=np.concatenate([wz, wz]) / 2.0, M=M, p=p)


def _factor(kernel: np.ndarray, weight: np.ndarray, rel_tol: float, max_terms: int | None):
    """``kernel(t, t') ~ sum_k s_k a_k(t) b_k(t')`` from the SVD of ``W^1/2 kernel W^1/2``."""
    sw = np.sqrt(weight)
    U, s, Vt = np.linalg.svd(sw[:, None] * kernel * sw[None, :])
    m = int(np.sum(s >= rel_tol * s[0])) if s[0] > 0 else 0
    if max_terms is not None:
        m = min(m, max_terms)
    return s[:m], U[:, :m] / sw[:, None], Vt[:m].T / sw[:, None]


class _Model:
    """The type-space data of one setting at one size (everything that does not depend on gamma)."""

    def __init__(self, setting: Setting, n: int, nodes: int | tuple[int, ...] | None = None):
        p = setting.p(n)
        law = latent_law(setting, p, nodes)
        H = law.shifts()
        sf = shift_functions(setting.f, 1.0, np.max(np.abs(H)) + 1.0)
        F0, F1, S2 = sf(H)
        self.c, self.n, self.p, self.law = setting.c, n, p, law
        self.phi = n / p
        self.pp = (p - law.r) / p                    # p'/p
        w = law.weight
        T = len(w)
        # slope kernel F1(h(t, t')) ~ sum_k s_k u_k(t) v_k(t')
        s, u, v = _factor(F1, w, _SLOPE_TOL, _SLOPE_MAX)
        K = len(s)
        # mean kernel F0(h(t, t')) ~ sum_l S_l a_l(t) b_l(t')
        self.S, self.a, self.b = _factor(F0, w, _MEAN_TOL, None)
        # diagonal correction making K_ii = 0 on average
        self.delta = np.diag(F0) / math.sqrt(p) + self.pp * np.einsum("k,tk,tk->t", s, u, v)
        # Wigner variance profiles times the weights of t' (they act on G(t'))
        S2t = S2.T
        # as low-rank factors (left, right^T W): E_t'[k(t, t') g(t')] = left @ (right_w @ g)
        self.noise = []
        for kern in (np.sqrt(S2 * S2t), S2, S2t):
            sk, left, right = _factor(kern, w, _NOISE_TOL, None)
            self.noise.append((self.phi * left * sk, (right * w[:, None]).T))
        # coefficient tables of Z^T (P: rows x, k, e) and Z (R: columns x, k, e), p-blocks (u, v_k, q_k)
        P = 1 + 2 * K
        self.P = np.zeros((T, 3, P))
        self.P[:, 0, 1 + K:] = self.c * s * v      # row x: c s_k v_k(t) in column q_k
        self.P[:, 1, 1:1 + K] = -s * u             # row k: -s_k u_k(t) in column v_k
        self.P[:, 2, 0] = -1.0                     # row e: -1 in column u
        self.R = np.zeros((T, P, 3))
        self.R[:, 0, 1] = -1.0                     # u = Z k
        self.R[:, 1:1 + K, 0] = -v                 # v_k = Z D_{v_k} x
        self.R[:, 1 + K:, 2] = -u                  # q_k = Z D_{u_k} e
        self.wR = w[:, None, None] * self.R

    def base(self, gamma: complex) -> np.ndarray:
        """``H0(t)`` (rows and columns x, k, e), shape (T, 3, 3)."""
        T = len(self.delta)
        H0 = np.zeros((T, 3, 3), dtype=complex)
        H0[:, 0, 0] = gamma
        H0[:, 0, 2] = -self.c * self.delta
        H0[:, 1, 0] = self.delta
        H0[:, 1, 1] = 1.0
        H0[:, 2, 2] = 1.0
        return H0

    def resolvent(self, H0: np.ndarray, Gam: np.ndarray, om: np.ndarray) -> np.ndarray:
        """``G(t) = Lambda(t)^{-1}`` for given ``Gamma`` (P, P) and noise self-energies ``om`` (4, T)."""
        c = self.c
        Lam = H0 - self.pp * (self.P @ Gam @ self.R)
        Lam[:, 1, 0] -= om[0]            # (k, x): E[sigma sigma' G_xk]
        Lam[:, 1, 2] += c * om[1]        # (k, e): -c E[S2(t, t') G_xx]
        Lam[:, 0, 0] += c * om[2]        # (x, x): -c E[S2(t', t) G_ek]
        Lam[:, 0, 2] -= c * c * om[3]    # (x, e): c^2 E[sigma sigma' G_ex]
        return np.linalg.inv(Lam)

    def update(self, G: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """New ``(Gamma, om)`` from ``G``."""
        (la, ra), (lb, rb), (lc, rc) = self.noise
        ss = la @ (ra @ np.column_stack([G[:, 0, 1], G[:, 2, 0]]))
        om = np.stack([ss[:, 0], lb @ (rb @ G[:, 0, 0]), lc @ (rc @ G[:, 2, 1]), ss[:, 1]])
        P = self.P.shape[2]
        RGP = np.matmul(self.wR, G).transpose(1, 0, 2).reshape(P, -1) @ self.P.reshape(-1, P)
        Gam = np.linalg.inv(np.eye(len(RGP)) - self.phi * RGP)
        return Gam, om

    def pack(self, Gam, om):
        return np.concatenate([Gam.ravel(), om.ravel()])

    def unpack(self, z):
        P = self.P.shape[2]
        return z[:P * P].reshape(P, P), z[P * P:].reshape(4, -1)


def _fixed_point(m: _Model, gamma: float, start: tuple | None):
    """Fixed point at ``gamma + i eps`` (complex step) by Anderson acceleration.

    The state ``z`` (``Gamma`` and the noise self-energies) is complex; its imaginary part divided
    by ``eps`` is the gamma-derivative. Anderson's mixing coefficients are real and fitted to the
    residuals of both parts (the imaginary part scaled by ``1/eps``), so the iteration solves the
    fixed-point equation and its tangent equation together. ``start`` is a previous solution
    ``(gamma0, z, dz/dgamma, d2z/dgamma2)`` (a Taylor predictor for the warm start); returns ``G``,
    the same tuple at ``gamma`` (the second derivative by a difference of the first ones) and the
    last relative residual, or ``None, None, residual`` after ``_MAX_ITER`` iterations.
    """
    eps = _STEP * gamma
    H0 = m.base(complex(gamma, eps))
    if start is None:
        P = m.P.shape[2]
        z0 = m.pack(np.eye(P, dtype=complex), np.zeros((4, len(m.delta)), dtype=complex))
    else:  # Taylor predictor from the previous solution (second order once two are known)
        g0, z, dz, d2z = start
        step = gamma - g0
        z0 = (z + step * dz + 0.5 * step ** 2 * d2z) + 1j * eps * (dz + step * d2z)

    def g(z):
        G = m.resolvent(H0, *m.unpack(z))
        return m.pack(*m.update(G)), G

    z, f_prev, r_prev = z0, None, None
    d_res, d_upd = [], []          # Anderson history: residual differences (real form) and updates
    for it in range(_MAX_ITER):
        gz, G = g(z)
        f = gz - z
        scale = max(np.max(np.abs(gz.real)), 1e-300), max(np.max(np.abs(gz.imag)), 1e-300)
        if it == 0:
            weights = 1.0 / scale[0], 1.0 / scale[1]   # value and derivative count alike
        r = np.concatenate([f.real * weights[0], f.imag * weights[1]])
        err = max(np.max(np.abs(f.real)) / scale[0], np.max(np.abs(f.imag)) / scale[1])
        if err < _TOL:
            dz = gz.imag / eps
            d2z = (dz - start[2]) / (gamma - start[0]) if start else 0.0
            return G, (gamma, gz.real, dz, d2z), err
        if f_prev is not None:
            d_res.append(r - r_prev)
            d_upd.append(z - z_prev + f - f_prev)
            if len(d_res) > _MEMORY:
                d_res.pop(0)
                d_upd.pop(0)
            D = np.stack(d_res, axis=1)
            gram = D.T @ D                 # normal equations of min ||r - D theta||, regularised
            gram[np.diag_indices_from(gram)] *= 1.0 + 1e-12
            theta = np.linalg.solve(gram, D.T @ r)
            z_prev, z = z, z + f - np.stack(d_upd, axis=1) @ theta
        else:
            z_prev, z = z, z + f
        f_prev, r_prev = f, r
    return None, None, err


def _label_form(m: _Model, G: np.ndarray) -> complex:
    """``E_pi[y_t x(t)]`` with the mean kernel and latent Gram kept exactly (see module docstring)."""
    c, w, y, xi = m.c, m.law.weight, m.law.y, m.law.xi
    kappa = m.n / math.sqrt(m.p)
    SL, a, b = m.S, m.a, m.b
    L, r = len(SL), xi.shape[1]
    # unknowns z = (alpha = <b, x>_w, beta = <a, e>_w, omega = kappa E[xi k])
    # (x, k, e)(t) = G(t) [y_t - c kappa b(t) S beta, kappa a(t) S alpha, xi_t . omega / sqrt(p)]
    # response of (x, k, e)(t) to each unknown (T, 3, 2L + r): alpha enters row k, beta row x,
    # omega row e of the right-hand side
    resp = np.concatenate([G[:, :, 1:2] * (kappa * a * SL)[:, None, :],
                           G[:, :, 0:1] * (-c * kappa * b * SL)[:, None, :],
                           G[:, :, 2:3] * (xi / math.sqrt(m.p))[:, None, :]], axis=2)
    base = G[:, :, 0] * y[:, None]                    # (T, 3)
    rows_x = (w[:, None] * b).T          # alpha = sum_t w b(t) x(t)
    rows_e = (w[:, None] * a).T          # beta = sum_t w a(t) e(t)
    rows_k = kappa * (w[:, None] * xi).T  # omega = kappa sum_t w xi(t) k(t)
    A = np.concatenate([rows_x @ resp[:, 0, :], rows_e @ resp[:, 2, :], rows_k @ resp[:, 1, :]])
    rhs = np.concatenate([rows_x @ base[:, 0], rows_e @ base[:, 2], rows_k @ base[:, 1]])
    z = np.linalg.solve(np.eye(2 * L + r) - A, rhs)
    x = base[:, 0] + resp[:, 0, :] @ z
    return np.sum(w * y * x)


def finite_size_resolvent_form(setting: Setting, gammas: np.ndarray, n: int,
                               nodes: int | tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``y^T Q y / n`` and its gamma-derivative from the finite-size equivalent.

    Parameters
    ----------
    setting : Setting
        Any setting (reduced to ``alpha = 1`` through :meth:`Setting.canonical`).
    gammas : ndarray
        Positive ridge parameters, any shape (validated by the caller).
    n : int
        Number of tokens; ``p = round(c n)``.
    nodes : int or tuple of int, optional
        Gauss–Hermite nodes per latent dimension (default 32, 10, 6 for ``r = 1, 2, 3``), or per
        axis of ``w_K``, ``w_Q``, ``mu`` (:func:`latent_law`).

    Returns
    -------
    q, dq : ndarray shaped like ``gammas``

    Raises
    ------
    ConvergenceError
        When the fixed point does not converge (never returns NaN).
    """
    g = np.asarray(gammas, dtype=float)
    flat = g.ravel()
    q, dq = np.empty(flat.size), np.empty(flat.size)
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: threads only cost
        m = _Model(setting.canonical(), n, nodes)
        label = lambda b: f"{setting!r}, n={n} (p={m.p})"  # noqa: E731
        order = np.argsort(-flat)                         # continuation from large gamma
        gam = np.array([max(flat[order[0]], _GAMMA_START)])
        G, state, err = _fixed_point(m, gam[0], None)     # cold start
        check_converged([G is not None], [err], gam, problem=_PROBLEM, label=label,
                        reason=f"{_MAX_ITER} iterations")

        def step(idx, g0, g1):
            """Taylor predictor and Anderson corrector (both in :func:`_fixed_point`)."""
            nonlocal G, state
            G1, state1, res = _fixed_point(m, float(g1[0]), state)
            if G1 is not None:
                G, state = G1, state1
            return np.array([G1 is not None]), np.array([res])

        for i in order:
            continue_to(gam, flat[i], step, max_ratio=_MAX_RATIO, max_attempts=_MAX_ATTEMPTS,
                        problem=_PROBLEM, label=label)
            val = _label_form(m, G)
            q[i], dq[i] = val.real, val.imag / (_STEP * flat[i])
    for name, arr in (("q", q), ("dq", dq)):
        if not np.all(np.isfinite(arr)):
            raise ConvergenceError(f"non-finite finite-size label form {name} for {setting!r}, n={n}")
    return q.reshape(g.shape), dq.reshape(g.shape)
