r"""Quadratic forms in the labels: the signal spike and the weight overlap (structured inputs).

Conditionally on ``X``, integrating the Wigner part gives ``Q ~ Qbar = (alpha I + J^T R J)^{-1}``
with ``S_x = X^T X / p``, ``J = j(S_x) + rho u v^T`` (``j(l) = rho (l - 1) - kappa``),
``R = S_x (I + tau S_x)^{-1}``, ``u = X^T w_K / sqrt(p)``, ``v = X^T w_Q / sqrt(p)``.

Linear pencil
-------------
``Qbar yh`` is the ``x`` block of the solution of the ``3n x 3n`` system (blocks ``x, k, e``)

    alpha x + J^T e = yh,     k - J x = 0,     (I + tau S_x) e - S_x k = 0,

whose matrix is ``L(S_x) = L0 (x) I + L1 (x) S_x + rank 2`` with

    L0 = [[alpha, 0, -(rho + kappa)], [rho + kappa, 1, 0], [0, 0, 1]],
    L1 = [[0, 0, rho], [-rho, 0, 0], [0, -1, tau]],

and the rank-2 part ``rho E_xe (x) v u^T - rho E_kx (x) u v^T``. Per eigenvalue ``l`` of ``S``
the ``3 x 3`` inverse is ``G(l) = adj(L0 + l L1) / D(l)``,

    G = (1/D) [[t, -j l, -j], [j t, alpha t, -j^2], [j l, alpha l, alpha]],   t = 1 + tau l,

with the same cubic ``D = alpha t + l j^2`` as the bulk, so ``G`` is analytic on ``[0, inf)``.

Spike
-----
``S_x = S + U C U^T`` with ``U = [yh, e]``, ``e = Z^T mu / sqrt(p)`` and
``C = [[snr/c, 1/sqrt(c)], [1/sqrt(c), 0]]``. All vectors involved are of the form
``a = alpha_a yh + Z^T w_a / sqrt(p)``, for which the isotropic Marchenko–Pastur law gives, for a
function ``h`` of ``S``,

    a^T h(S) b -> alpha_a alpha_b int h dmu_MP + (w_a^T w_b / c) int h dsigma,  sigma = l mu_MP.

Hence the whole low-rank perturbation ``P = L1 (x) U C U^T + (uv terms) = Uc Cc Vc^T`` (eight
columns on each side) is handled by one Woodbury step with ``8 x 8`` matrices built from
``A_mu = int G dmu_MP`` and ``A_sigma = int G dsigma`` (``3 x 3`` each):

    yh^T Qbar yh -> A_mu[x, x] - r^T Cc (I + B Cc)^{-1} l,

``B[a, b] = <V_a, G U_b>``, ``r_b = <yh, G_{x .} U_b>``, ``l_a = <V_a, G_{. x} yh>``.
No partial fractions are needed. The ``gamma``-derivative follows by differentiating each piece
(``dG = -G dL G``) with the bulk tangent ``d(alpha, kappa, tau)/dgamma``.

Rank r
------
For ``W = I + sum_{k<=r} w_K^(k) w_Q^(k)T`` (:class:`attn_lib.RankSetting`, canonical) the
linear part of the kernel is ``J = j(S_x) + rho sum_k u_k v_k^T`` with
``u_k = X^T w_K^(k) / sqrt(p)``, ``v_k = X^T w_Q^(k) / sqrt(p)``, and the pencil is the same
``L0 (x) I + L1 (x) S_x`` plus the rank-``2r`` part
``sum_k (rho E_xe (x) v_k u_k^T - rho E_kx (x) u_k v_k^T)``. What generalises:

* the bulk (``alpha, kappa, tau``, hence ``G``, ``A_mu``, ``A_sigma``) depends on ``c``, ``rho``
  and ``b2`` only: a finite-rank change of ``K`` does not move normalised traces, so ``r`` and
  the weights never enter it;
* the spikes: the ``2 + 2r`` vectors ``yh, e, u_1..u_r, v_1..v_r`` are all of the form
  ``alpha_a yh + Z^T w_a / sqrt(p)`` in the frame ``(mu, w_K^(1..r), w_Q^(1..r))`` whose Gram
  matrix (``(1 + 2r) x (1 + 2r)``) is the setting's (:func:`_vectors`), so the isotropic law
  gives every inner product from ``A_mu``, ``A_sigma`` and that Gram matrix;
* the perturbation ``P = Uc Cc Vc^T`` keeps the six signal-spike columns and adds two per pair
  (:func:`_columns`, :func:`_core`): one Woodbury step with ``(6 + 2r) x (6 + 2r)`` matrices
  (``r = 1``: the eight above, in the same order, so the rank-one numbers are unchanged;
  ``r = 32``: 70).

The limit is taken at fixed ``r``; at finite ``p`` the low-rank logits add
``(2 tr(W_K^T W_Q) + ||W_K^T W_Q||_F^2) / p`` (of order ``r / p``) to the variance of ``f``'s
argument, and the coherent shift ``delta = |mu^T W mu| / sqrt(p)`` has the
same role as for rank one (``benchmarks/rank_r.py``).
"""

from __future__ import annotations

import numpy as np

from ._bulk import BulkSolution, sigma_rule

__all__ = ["pencil_integrals", "label_quadratic_form"]

_X, _K, _E = 0, 1, 2


def _G_nodes(lam, alpha, kappa, tau, rho):
    """``G(l)`` at nodes, shape ``(B, N, 3, 3)``."""
    a = alpha[:, None]
    t = 1.0 + tau[:, None] * lam
    j = rho[:, None] * (lam - 1.0) - kappa[:, None]
    D = a * t + lam * j * j
    iD = 1.0 / D
    G = np.empty(lam.shape + (3, 3))
    G[..., 0, 0] = t * iD
    G[..., 0, 1] = -j * lam * iD
    G[..., 0, 2] = -j * iD
    G[..., 1, 0] = j * t * iD
    G[..., 1, 1] = a * t * iD
    G[..., 1, 2] = -j * j * iD
    G[..., 2, 0] = j * lam * iD
    G[..., 2, 1] = a * lam * iD
    G[..., 2, 2] = a * iD
    return G


def _L0(alpha, kappa, rho):
    B = alpha.shape[0]
    L = np.zeros((B, 3, 3))
    L[:, 0, 0] = alpha
    L[:, 0, 2] = -(rho + kappa)
    L[:, 1, 0] = rho + kappa
    L[:, 1, 1] = 1.0
    L[:, 2, 2] = 1.0
    return L


def _L1(tau, rho):
    B = tau.shape[0]
    L = np.zeros((B, 3, 3))
    L[:, 0, 2] = rho
    L[:, 1, 0] = -rho
    L[:, 2, 1] = -1.0
    L[:, 2, 2] = tau
    return L


def pencil_integrals(bulk: BulkSolution):
    """``A_mu, A_sigma`` (shape ``(B, 3, 3)``) and their ``gamma``-derivatives.

    ``bulk`` must be flat (arrays of shape ``(B,)``). ``A_mu = G(0) - A_sigma L1 G(0)`` follows
    from ``G(l) - G(0) = -l G(l) L1 G(0)``, which absorbs the atom of ``mu_MP`` at zero.
    """
    alpha, kappa, tau, rho, c = bulk.alpha, bulk.kappa, bulk.tau, bulk.rho, bulk.c
    da, dk, dt = bulk.dalpha, bulk.dkappa, bulk.dtau
    B = alpha.shape[0]
    A_s = np.empty((B, 3, 3))
    dA_s = np.empty((B, 3, 3))
    for N in np.unique(bulk.nodes):
        sel = bulk.nodes == N
        lam, w = sigma_rule(c[sel], int(N))
        G = _G_nodes(lam, alpha[sel], kappa[sel], tau[sel], rho[sel])
        A_s[sel] = np.einsum("bnij,n->bij", G, w)
        # dL(l)/dgamma = da E_xx + dk (-E_xe + E_kx) + dt l E_ee ; dG = -G dL G
        Gx_, G_x = G[..., :, 0], G[..., 0, :]
        Ge_, G_e = G[..., :, 2], G[..., 2, :]
        Gk_ = G[..., :, 1]
        dG = -(da[sel, None, None, None] * Gx_[..., :, None] * G_x[..., None, :]
               + dk[sel, None, None, None] * (-Gx_[..., :, None] * G_e[..., None, :]
                                              + Gk_[..., :, None] * G_x[..., None, :])
               + (dt[sel, None] * lam)[..., None, None] * Ge_[..., :, None] * G_e[..., None, :])
        dA_s[sel] = np.einsum("bnij,n->bij", dG, w)
    L0 = _L0(alpha, kappa, rho)
    L1 = _L1(tau, rho)
    G0 = np.linalg.inv(L0)
    dL0 = np.zeros((B, 3, 3))
    dL0[:, 0, 0] = da
    dL0[:, 0, 2] = -dk
    dL0[:, 1, 0] = dk
    dG0 = -G0 @ dL0 @ G0
    dL1 = np.zeros((B, 3, 3))
    dL1[:, 2, 2] = dt
    A_m = G0 - A_s @ L1 @ G0
    dA_m = dG0 - dA_s @ L1 @ G0 - A_s @ dL1 @ G0 - A_s @ L1 @ dG0
    return A_m, A_s, dA_m, dA_s


def _vectors(c, gram):
    """Coordinates of ``yh, e, u_1..u_r, v_1..v_r``: ``alpha_a`` (shape ``(B, 2 + 2r)``) and
    ``w_a^T w_b / c`` (shape ``(B, 2 + 2r, 2 + 2r)``).

    Each vector is ``alpha_a yh + Z^T w_a / sqrt(p)`` with ``w_a`` in the (possibly dependent)
    frame ``(mu, w_K^(1..r), w_Q^(1..r))`` whose Gram matrix is ``gram`` (``(B, 1 + 2r, 1 + 2r)``;
    ``r = 1``: ``(mu, w_K, w_Q)``): ``yh`` has ``alpha = 1`` and ``w = 0``, ``e = Z^T mu / sqrt(p)``
    has ``alpha = 0`` and ``w = mu``, ``u_k = X^T w_K^(k) / sqrt(p)`` has
    ``alpha = mu^T w_K^(k) / sqrt(c)`` and ``w = w_K^(k)``, and so on. So the ``w``-part inner
    products are ``gram`` bordered by the zero row and column of ``yh``.
    """
    B, m = gram.shape[0], gram.shape[1]
    al = np.zeros((B, m + 1))
    al[:, 0] = 1.0
    al[:, 2:] = gram[:, 0, 1:] / np.sqrt(c)[:, None]
    Wg = np.zeros((B, m + 1, m + 1))
    Wg[:, 1:, 1:] = gram / c[:, None, None]
    return al, Wg


def _columns(r):
    """Columns ``(block, vector)`` of ``P = Uc Cc Vc^T``, left and right, ``6 + 2r`` each.

    Vectors are numbered as in :func:`_vectors` (``0 = yh``, ``1 = e``, ``2 + k = u_k``,
    ``2 + r + k = v_k``). The first six carry the signal spike ``L1 (x) U C U^T``; pair ``k``
    adds ``rho E_xe (x) v_k u_k^T`` (left ``(x, v_k)``, right ``(e, u_k)``) and
    ``-rho E_kx (x) u_k v_k^T`` (left ``(k, u_k)``, right ``(x, v_k)``).
    """
    spike = [(_X, 0), (_K, 0), (_E, 0), (_X, 1), (_K, 1), (_E, 1)]
    left = spike + [col for k in range(r) for col in ((_X, 2 + r + k), (_K, 2 + k))]
    right = spike + [col for k in range(r) for col in ((_E, 2 + k), (_X, 2 + r + k))]
    return left, right


def _core(snr, c, tau, rho, r):
    """``Cc`` (shape ``(B, 6 + 2r, 6 + 2r)``) and ``dCc/dtau``: ``P = sum_ab Cc[a,b] Uc_a Vc_b^T``."""
    B = c.shape[0]
    Cc = np.zeros((B, 6 + 2 * r, 6 + 2 * r))
    dC = np.zeros_like(Cc)
    L1 = _L1(tau, rho)
    s_c = snr / c
    r_c = 1.0 / np.sqrt(c)
    for i in range(3):
        for j in range(3):
            Lij = L1[:, i, j]
            # UCU^T = (snr/c) yh yh^T + (1/sqrt c)(yh e^T + e yh^T)
            Cc[:, i, j] += Lij * s_c            # (i, yh) (j, yh)^T
            Cc[:, i, 3 + j] += Lij * r_c        # (i, yh) (j, e)^T
            Cc[:, 3 + i, j] += Lij * r_c        # (i, e) (j, yh)^T
    dC[:, _E, _E] = s_c
    dC[:, _E, 3 + _E] = r_c
    dC[:, 3 + _E, _E] = r_c
    for k in range(r):
        Cc[:, 6 + 2 * k, 6 + 2 * k] = rho       # rho E_xe (x) v_k u_k^T
        Cc[:, 7 + 2 * k, 7 + 2 * k] = -rho      # -rho E_kx (x) u_k v_k^T
    return Cc, dC


def label_quadratic_form(bulk: BulkSolution, snr, gram):
    """Deterministic equivalent of ``y^T Q y / n`` and its ``gamma``-derivative.

    Parameters
    ----------
    bulk : BulkSolution
        Flat (shape ``(B,)``) bulk solution.
    snr : ndarray of shape (B,)
        ``||mu||^2``.
    gram : ndarray of shape (B, 1 + 2r, 1 + 2r)
        Gram matrix of ``mu, w_K^(1..r), w_Q^(1..r)`` (of the canonical, ``alpha = 1``
        setting; ``r = 1``: ``mu, w_K, w_Q``).

    Returns
    -------
    q, dq : ndarray of shape (B,)
        ``yh^T Qbar yh`` and ``d/dgamma``; the error is ``E = -gamma^2 dq``.
    """
    c, tau, rho = bulk.c, bulk.tau, bulk.rho
    A_m, A_s, dA_m, dA_s = pencil_integrals(bulk)
    rank = (gram.shape[1] - 1) // 2
    al, Wg = _vectors(c, gram)
    AA = al[:, :, None] * al[:, None, :]
    left, right = _columns(rank)
    ub = np.array([b for b, _ in left])
    uv = np.array([v for _, v in left])
    vb = np.array([b for b, _ in right])
    vv = np.array([v for _, v in right])

    def forms(Am, As):
        Bm = (AA[:, vv[:, None], uv[None, :]] * Am[:, vb[:, None], ub[None, :]]
              + Wg[:, vv[:, None], uv[None, :]] * As[:, vb[:, None], ub[None, :]])
        r = AA[:, 0, uv] * Am[:, _X, ub] + Wg[:, 0, uv] * As[:, _X, ub]
        lv = AA[:, vv, 0] * Am[:, vb, _X] + Wg[:, vv, 0] * As[:, vb, _X]
        return Bm, r, lv

    Bm, r, lv = forms(A_m, A_s)
    dBm, dr, dlv = forms(dA_m, dA_s)
    Cc, dCt = _core(np.asarray(snr, float), c, tau, rho, rank)
    dC = dCt * bulk.dtau[:, None, None]
    N = np.eye(6 + 2 * rank) + Bm @ Cc
    Ninv_l = np.linalg.solve(N, lv[..., None])[..., 0]          # N^{-1} l
    CNl = np.einsum("bij,bj->bi", Cc, Ninv_l)                   # C N^{-1} l
    q = A_m[:, _X, _X] - np.einsum("bi,bi->b", r, CNl)
    # d(C N^{-1} l) = dC N^{-1} l - C N^{-1} dN N^{-1} l + C N^{-1} dl,  dN = dB C + B dC
    dN = dBm @ Cc + Bm @ dC
    w = np.einsum("bij,bj->bi", dN, Ninv_l)
    inner = np.linalg.solve(N, (dlv - w)[..., None])[..., 0]
    dCNl = np.einsum("bij,bj->bi", dC, Ninv_l) + np.einsum("bij,bj->bi", Cc, inner)
    dq = dA_m[:, _X, _X] - np.einsum("bi,bi->b", dr, CNl) - np.einsum("bi,bi->b", r, dCNl)
    return q, dq
