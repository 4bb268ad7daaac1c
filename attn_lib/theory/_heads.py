r"""A deterministic equivalent of the error of multi-head attention as GPT-2 computes it.

Model
-----
Tokens ``X = mu y^T + Z`` (``p x n``, ``c = p/n``) and ``H`` heads with matrices ``B_h``
(:class:`~attn_lib.model.setting.HeadsSetting`): ``K_h = f_h(X^T B_h X / sqrt(p)) / sqrt(p)``
with a zero diagonal, ``f_h`` centred at the head's logit scale ``sigma_h = ||B_h||_F / sqrt(p)``,
and the heads side by side, ``Phi = [X_1 K_1; ...; X_H K_H]`` (``X_h = P_h X``, ``P_h`` the
coordinate projection on head ``h``'s block of rows, :func:`~attn_lib.model.kernel.head_blocks`;
``sum_h P_h = I``, ``P_h P_h' = 0``). ``E(gamma) = gamma^2 y^T Q^2 y / n`` with
``Q = (Phi^T Phi / n + gamma)^{-1}``.

Gaussian equivalent
-------------------
Each head is linearised at its own scale, as one matrix is in :mod:`~attn_lib.theory._matrix`:
with ``M'_h = B_h / sigma_h``, ``a1_h = E[xi f(sigma_h xi)]``, ``rho_h = sqrt(c) a1_h`` and
``m0_h = tr(M'_h) / p``,

    sqrt(c) K_h ~ Kt_h = rho_h (Y'^T M'_h Y' - m0_h I) + H_h,

``Y' = X / sqrt(p) = Y + m yhat^T / sqrt(c)``. The residuals ``H_h`` are GOEs independent of
``X`` and **jointly Gaussian across heads**: the logits of two heads on the same pair of noise
tokens are jointly Gaussian with correlation ``r_hh' = tr(B_h B_h'^T) / (p sigma_h sigma_h')``,
so their non-linear residuals have the covariance
``E[H_h,ij H_h',ij] = C_hh' / n``, ``C`` = :func:`attn_lib.model.hermite.residual_covariance`
(``C_hh = b2_h``; for tanh and GPT-2's heads at unit scale, ``|r_hh'| <= 0.5`` and the
off-diagonal ``C`` is at most 0.003 against ``b2 = 0.027``). The residuals are uncorrelated with
every head's logits, so the linear parts carry the heads' correlation exactly. Then

    Phi^T Phi / n = sum_h Kt_h^T Y'^T P_h Y' Kt_h.

What is approximated is what :mod:`~attn_lib.theory._matrix` approximates, per head: ``f`` is
linearised at the head's logit scale (the homogeneous surrogate: no latent types, no per-token
scales, the residual's correlation between ``(i, j)`` and ``(j, i)`` dropped), and the limit is the
proportional one (for a ``mu`` aligned with the heads' spikes it lies above Monte Carlo by up
to 0.013 at unit scale, ``benchmarks/multi_head.py``; the finite-size shift below corrects it).
Given that Gaussian equivalent, the rest (the pencil, its reduction, the signal) is exact in
the limit.

Linear pencil
-------------
``Q yhat`` is the ``x``-block of a linear system in ``N = 1 + 2H`` n-vectors ``x``,
``a_h = Kt_h x``, ``t_h = Y'^T P_h Y' a_h`` and ``1 + 4H`` p-vectors ``d = Y' x``,
``d'_h = M'_h d``, ``b_h = P_h Y' a_h``, ``q_h = Y' t_h``, ``q'_h = M'^T_h q_h``:

    gamma x + sum_h (rho_h Y'^T q'_h - k0_h t_h + H_h t_h) = yhat,
    a_h + k0_h x - H_h x - rho_h Y'^T d'_h = 0,      t_h - Y'^T b_h = 0,

(``k0_h = rho_h m0_h``). Its random blocks are ``kappa A Y`` (``kappa = -1``; ``A = I`` at
``(d, x)`` and ``(q_h, t_h)``, ``A = P_h`` at ``(b_h, a_h)``), ``beta Y^T`` (``beta = rho_h``
at ``(x, q'_h)``, ``-rho_h`` at ``(a_h, d'_h)``, ``-1`` at ``(t_h, b_h)``) and ``H_h`` (``+1``
at ``(x, t_h)``, ``-1`` at ``(a_h, x)``). Gaussian integration by parts gives
``G = (L0 + P - Sigma)^{-1}`` with

* ``Sigma_pp[rho, pi] = kappa beta g[c, r] / c A`` (``Y`` block at ``(rho, c)``, ``Y^T`` block at
  ``(r, pi)``);
* ``Sigma_nn[r, c] = -T[r, c] + sum C_hh' (...)`` with the traces
  ``T[r, c] = tr(G[psi_r, sigma_c] A_c) / p``: ``psi_x = sum_h rho_h q'_h``,
  ``psi_{a_h} = -rho_h d'_h``, ``psi_{t_h} = -b_h`` (the ``Y^T`` blocks of row ``r``, weighted by
  ``beta``) and ``sigma_x = d``, ``sigma_{a_h} = b_h`` (``A = P_h``), ``sigma_{t_h} = q_h``; the
  ``H`` terms are ``Sigma[x, t_h'] += sum_h C_hh' g[t_h, x]``,
  ``Sigma[x, x] -= sum_hh' C_hh' g[t_h, a_h']``, ``Sigma[a_h, t_h'] -= C_hh' g[x, x]`` and
  ``Sigma[a_h, x] += sum_h' C_hh' g[x, a_h']``.

The n-side of ``Gbar = (L0 - Sigma)^{-1}`` is ``g (x) I_n``, ``g`` an ``N x N`` matrix
(``N^2`` unknowns: 625 for GPT-2's 12 heads). **The p-side collapses to 2p x 2p.** Every row of
``Sigma_pp`` is ``-(1/c) A_rho sum_nu g[c_rho, nu] psi_nu``, so the ``q_h`` are combinations of the
same vectors, the ``b_h`` live on disjoint blocks (one p-vector ``b = sum_h b_h``), and the
p-side is a system in ``(d, b, psi = psi_x)``:

    d   + (1/c) [g_xx psi - A_dd d - D_xt b]          = s_d,
    b   + (1/c) [D_ax psi - R_bd d - D_at b]          = s_b,
    psi + (1/c) [W_pp psi - W_pd d - W_pb b]          = s_psi,

with ``A_dd = sum_h rho_h g[x, a_h] M'_h``, ``R_bd = sum_h P_h sum_h' rho_h' g[a_h, a_h'] M'_h'``,
``W_pd = sum_hh' rho_h rho_h' g[t_h, a_h'] M'^T_h M'_h'``, ``W_pb = sum_hh' rho_h g[t_h, t_h']
M'^T_h P_h'``, ``W_pp = sum_h rho_h g[t_h, x] M'^T_h`` and the block-diagonal ``D_xt``, ``D_ax``,
``D_at`` (``g[x, t_h]``, ``g[a_h, x]``, ``g[a_h, t_h]`` on head ``h``'s coordinates); a source
at ``q_h`` enters as ``s_psi = rho_h M'^T_h s``. ``b`` is eliminated (its block is diagonal),
and the ``2p x 2p`` system in ``(d, psi)``, whose ``(d, psi)`` block is diagonal, is inverted by
its Schur complement (two ``p x p`` inverses, :meth:`_Heads.operator`). With the heads'
factors ``M'_h = L_h R_h^T`` (rank ``r_h``; ``r = sum_h r_h`` columns, 768 for GPT-2), what
mixes heads passes through the factors and the block Grams ``L_n^T P_k L_m`` of the factor
blocks ``n, m`` (stored once per setting, ``H r^2`` numbers, up to ``_GRAM_LIMIT``):
``W_pd + W_pb Bi R_bd / c = R (Omega o L^T L + Xi / c) R^T`` with
``Xi[n, m] = rho_n rho_m sum_k g[t_n, t_k] Bi_k g[a_k, a_m] L_n^T P_k L_m`` (:meth:`_Heads._xi`),
and the traces ``tr(M'_h G_dp M'^T_h')``, ``tr(P_k M'_h G_dp W_pb)`` and
``tr(P_k R_bd G_dp M'^T_h)`` are block sums of ``(R^T G_dp R) o L^T L`` and
``(R^T G_dp R)^T o L^T P_k L`` (:meth:`_Heads._reduce`). One evaluation of the ``N^2``
traces costs two ``p x p`` inverses and seven GEMMs (width ``p`` or ``r``), the rest
``O(H p^2 + H r^2)``.

For ``H = 1`` this is the pencil of :mod:`~attn_lib.theory._matrix`; for ``H`` identical heads
with fully correlated residuals (``C = b2``, what identical logits give), ``sum_h P_h = I`` makes
it that of the one matrix (both checked in ``tests/test_heads_theory.py``).

Signal: one Woodbury step
-------------------------
The signal parts of the ``Y'`` blocks form ``P = U C V^T`` with ``2N`` columns: per n-column
``c``, ``u = A_c m`` at ``sigma_c`` and ``v = yhat`` at ``c`` (coefficient ``-1/sqrt(c)``); per
n-row ``r``, ``u = yhat`` at ``r`` and ``v = m`` at ``psi_r`` (``1/sqrt(c)``). Then

    y^T Q y / n ~ g_xx - l'^T (I_2N + C K)^{-1} C l,    K = [[0, g], [F, 0]],

with ``F[r, c] = m^T G[psi_r, sigma_c] A_c m`` (the traces with ``m^T . m`` for ``tr / p``),
``l' = (0, g[x, .])`` and ``l = (g[., x], 0)``.

Finite size
-----------
With ``n`` (:func:`attn_lib.theory.attention_error`, ``round(c n) = p``) the error is the limit
plus the heads' finite-size shifts, each head's weighted by the share of the feature rows it
writes (``attn_lib.theory.attention._heads_shift``; ``book/derivation_attention.md``,
"Multi-head attention at finite size"):

    E_n = E_lim + sum_h w_h [E_n(s_B,h) - E_lim(s_B,h)],     w_h = |P_h| / p,

``s_B,h`` the reduced model of head ``h``'s matrix alone
(:func:`~attn_lib.theory._finite_size.reduced_setting`: ``mu``, ``B_h mu`` and ``B_h^T mu`` kept
exactly, an isotropic bulk of the rest's logit variance), whose bracket is the single-matrix
finite-size shift of ``B_h``. It is the first order in the heads' finite-size kernel parts
``dK_h`` (the latent mean, slope and variance that the reduced model keeps and the Gaussian
equivalent drops): ``dE`` is a sum over the heads of the derivative of ``E`` along ``dK_h``,
which enters ``Phi^T Phi`` through ``X^T P_h X``; replacing that block Gram by ``w_h X^T X``
(neither ``dK_h`` nor the latent directions single out a block of coordinates) and the
multi-head derivative by that of head ``h``'s own one-matrix model gives ``w_h`` times the
head's own shift. Exact for one head and for identical heads (``sum_h w_h = 1``; both in
``tests/test_heads_theory.py``); otherwise the derivatives differ at the order of the two
models' errors, a second-order error on the heads' shifts (a few hundredths each). Cost: ``H`` reduced
models in one batch of the finite-size solver and their limits in their latent spans, a few
seconds at ``p = 768``.

Numerics
--------
The ``N^2`` entries of ``g`` solve ``g = Phi(g)`` (``Phi(g) = (L0 - Sigma(g))^{-1}``) by Anderson
acceleration (:func:`_anderson`, memory ``_MEMORY``): the Jacobian has ``N^4`` entries (390 625
for GPT-2), each column one evaluation, which Newton cannot afford, but ``DPhi`` has few
eigenvalues away from zero (measured spectral radius 0.29, 0.51, 0.75 at ``gamma`` = 1, 0.1,
1e-3 for four random heads of rank 12 in ``p = 48``), and Anderson takes 9-20 evaluations per
point. The path is :func:`~._matrix._path`'s (from ``max(1, max gamma)``, ratio at most 10), each point
predicted by :func:`~._matrix._predict`; the relative residual is ``1e-11`` at the requested
``gamma`` and ``1e-7`` between them. ``dg/dgamma`` (to a relative residual of ``1e-10``; ``E``
then moves by less than 1e-9 relative) is the fixed point of the affine tangent map
``v -> DPhi v + dPhi/dgamma`` (:meth:`_Heads.tangent_map`: the p-side at ``g`` factored once, each
application its forward-mode derivative and a complex step through the head-level algebra,
exact to rounding), solved by the same Anderson iteration (on an affine map, a Krylov method)
started with the fixed point's last secant pairs (the same Jacobian ``DPhi - I``). The forms
``F`` are ``N`` solves with the same factored p-side, their derivative along ``dg/dgamma``
``N`` more (``dL`` applied through the factors, ``O(p^2 N)``: :meth:`_Heads.forms_tangent`);
``y^T Q y / n`` and its derivative along ``dg/dgamma`` (one complex step of the Woodbury form)
give ``E = -gamma^2 d(y^T Q y / n)/dgamma``.
A fixed point that does not converge raises :class:`~._errors.ConvergenceError` (never NaN).
Cost: ``O(p^3)`` per evaluation (two ``p x p`` inverses and seven GEMMs) and per application
of the tangent map (fourteen GEMMs); at ``p = 768`` (GPT-2's 12 heads, three ``gamma``, four
path points) 55 evaluations and 30 applications of the tangent map, still more than ten Monte
Carlo trials of the same setting: Anderson needs 9-19 evaluations per point and 8-12
applications per tangent, each a dense ``p x p`` problem, since the heads' total rank is ``p``
(``benchmarks/theory_speed.py``, ``benchmarks/multi_head.py --speed``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy import linalg

from ..model import hermite
from ..model.kernel import head_blocks
from ..model.nonlinearity import NonlinearityLike
from .._validation import check_array, check_gammas, check_real
from .. import _progress
from ._errors import ConvergenceError
from ._matrix import _START, _path, _predict

__all__ = ["heads_error", "heads_resolvent_form"]

_TOL = 1e-11            # relative residual at the requested gamma
_PATH_TOL = 1e-7        # at the path points between them
_TANGENT_TOL = 1e-10    # of dg/dgamma
_MEMORY = 15            # Anderson memory
_MAX_ITER = 400
_GRAM_LIMIT = 2 ** 24   # numbers: the block Grams (H r^2) are stored up to this, else formed per use
_RANK_TOL = 1e-13       # singular values below this fraction of the largest are dropped


class _Heads:
    """The p-side of the per-head pencil: traces ``T`` and forms ``F`` as functions of ``g``.

    Parameters
    ----------
    c : float
    M : ndarray of shape (H, p, p)
        The normalised head matrices ``M'_h = B_h / sigma_h``.
    rho, k0 : ndarray of shape (H,)
    C : ndarray of shape (H, H)
        Residual covariance.
    m : ndarray of shape (p,)
        Signal.

    Every method takes a real or complex ``g`` (``N x N``, ``N = 1 + 2H``; complex steps).
    """

    def __init__(self, c: float, M: np.ndarray, rho: np.ndarray, k0: np.ndarray, C: np.ndarray,
                 m: np.ndarray):
        H, p, _ = M.shape
        self.c, self.H, self.p, self.N = c, H, p, 1 + 2 * H
        self.M, self.rho, self.k0, self.C, self.m = M, rho, k0, C, m
        self.x, self.a, self.t = 0, np.arange(1, H + 1), np.arange(H + 1, 2 * H + 1)
        blocks = head_blocks(p, H)
        self.who = np.empty(p, dtype=int)           # the head of each coordinate
        for h, b in enumerate(blocks):
            self.who[b] = h
        self.blocks = blocks
        self.Pm = (self.who[None, :] == np.arange(H)[:, None]).astype(float)   # (H, p) 0/1
        # each block's rows of every head, contiguous: (H, rows * p) per block (_row_mix)
        self.Mrows = [np.ascontiguousarray(M[:, b, :]).reshape(H, -1) for b in blocks]
        self.Mflat = M.reshape(H, -1)
        L, R, cols = [], [], []
        for h in range(H):
            U, s, Vt = linalg.svd(M[h], check_finite=False)
            r = int(np.sum(s > _RANK_TOL * s[0]))
            L.append(U[:, :r] * s[:r])
            R.append(Vt[:r].T)
            cols.append(np.full(r, h))
        self.L, self.R, self.fw = np.hstack(L), np.hstack(R), np.concatenate(cols)
        self.LtL = self.L.T @ self.L
        # the factors' block Grams L^T P_k L, each (n, m) block of factor columns flattened
        # into one segment of a row: Lam[k, seg(n, m)] (_contract)
        r, cols = self.fw.size, [np.flatnonzero(self.fw == h) for h in range(H)]
        self.starts = np.array([cl[0] for cl in cols])
        self.ranks = np.array([cl.size for cl in cols])
        self.Lam: np.ndarray | None = None
        if H * r * r <= _GRAM_LIMIT:
            self.qidx = np.concatenate([(cols[n][:, None] * r + cols[m][None, :]).ravel()
                                        for n in range(H) for m in range(H)])
            self.qseg = np.cumsum([0] + [cols[n].size * cols[m].size
                                         for n in range(H) for m in range(H)])
            self.Lam = np.empty((H, r * r))
            for k, b in enumerate(blocks):
                self.Lam[k] = (self.L[b].T @ self.L[b]).ravel()[self.qidx]
        self.sizes = np.array([b.size for b in blocks], dtype=float)

    def _row_mix(self, w: np.ndarray) -> np.ndarray:
        """``out[i, :] = sum_h w[who(i), h] M_h[i, :]`` (``w`` of shape ``(H, H)``)."""
        out = np.empty((self.p, self.p), dtype=w.dtype)
        for k, b in enumerate(self.blocks):
            out[b] = (w[k] @ self.Mrows[k]).reshape(b.size, self.p)
        return out

    def _coefficients(self, g: np.ndarray) -> dict[str, np.ndarray]:
        """The p-side coefficients, linear in ``g``: the block-diagonal ``D_xt``, ``D_at``,
        ``D_ax`` (vectors), ``g_xx`` and ``A_dd``, ``R_bd``, ``W_pb``, ``W_pp``, and
        ``W_pd = R Om R^T`` as its core ``Om`` (``r x r``)."""
        rho, who, p = self.rho, self.who, self.p
        x, a, t = self.x, self.a, self.t
        Om = (rho[:, None] * rho[None, :] * g[np.ix_(t, a)])[np.ix_(self.fw, self.fw)] * self.LtL
        return dict(Dxt=g[x, t][who], Dat=g[a, t][who], Dax=g[a, x][who], gxx=g[x, x],
                    A_dd=((rho * g[x, a]) @ self.Mflat).reshape(p, p),
                    R_bd=self._row_mix(rho[None, :] * g[np.ix_(a, a)]), Om=Om,
                    W_pb=self._row_mix(rho[None, :] * g[np.ix_(t, t)].T).T,
                    W_pp=((rho * g[t, x]) @ self.Mflat).reshape(p, p).T)

    def _xi(self, g: np.ndarray) -> np.ndarray:
        """The core of ``W_pb Bi R_bd = R Xi R^T`` (``r x r``): on the factor blocks ``(n, m)``,
        ``Xi = rho_n rho_m sum_k g[t_n, t_k] Bi_k g[a_k, a_m] L_n^T P_k L_m`` from the stored
        block Grams (one vector-matrix product per block pair, no ``p x p`` work; without stored
        Grams, each formed here: ``O(p r^2)``)."""
        H, rho, a, t = self.H, self.rho, self.a, self.t
        Bh = 1.0 / (1.0 - g[a, t] / self.c)
        coef = np.einsum("n,m,nk,k,km->nmk", rho, rho, g[np.ix_(t, t)], Bh, g[np.ix_(a, a)])
        r = self.fw.size
        flat = np.zeros(r * r, dtype=np.result_type(coef, float))
        if self.Lam is None:
            for k, b in enumerate(self.blocks):
                E = np.repeat(np.repeat(coef[:, :, k], self.ranks, axis=0), self.ranks, axis=1)
                flat += (E * (self.L[b].T @ self.L[b])).ravel()
            return flat.reshape(r, r)
        coef, seg = coef.reshape(H * H, H), self.qseg
        perm = np.empty_like(flat)
        for j in range(H * H):
            perm[seg[j]:seg[j + 1]] = coef[j] @ self.Lam[:, seg[j]:seg[j + 1]]
        flat[self.qidx] = perm
        return flat.reshape(r, r)

    def operator(self, g: np.ndarray) -> dict[str, np.ndarray]:
        """The p-side at ``g`` (module docstring): ``b`` eliminated (``Bi = 1 / (1 - D_at / c)``),
        the ``(d, psi)`` operator ``[[A11, diag(D12)], [A21, A22]]`` and its inverse by the Schur
        complement ``S = A11 - D12 A22^{-1} A21``: ``Gdd = S^{-1}``, ``Gdp``, ``Gpp`` and
        ``X = A22^{-1} A21`` (``G_psi,d = -X Gdd``), with the pieces that return ``b``."""
        c, eye = self.c, np.eye(self.p)
        op = self._coefficients(g)
        Dxt, Dax, R_bd = op["Dxt"], op["Dax"], op["R_bd"]
        Bi = 1.0 / (1.0 - op["Dat"] / c)
        WB = op["W_pb"] * Bi[None, :]
        # A21 = -W_pd / c - W_pb Bi R_bd / c^2 = -R (Om + Xi / c) R^T / c
        A21 = -self.R @ (op["Om"] + self._xi(g) / c) @ self.R.T / c
        A22i = linalg.inv(eye + op["W_pp"] / c + WB * (Dax / c ** 2)[None, :], check_finite=False)
        X = A22i @ A21
        D12 = op["gxx"] / c + Dxt * Dax * Bi / c ** 2
        Si = linalg.inv(eye - op["A_dd"] / c - (Dxt * Bi / c ** 2)[:, None] * R_bd
                        - D12[:, None] * X, check_finite=False)
        Y = D12[:, None] * A22i
        Gdp = -Si @ Y
        op.update(g=g, Bi=Bi, WB=WB, A21=A21, A22i=A22i, X=X, D12=D12, Y=Y, Gdd=Si, Gdp=Gdp,
                  Gpp=A22i - X @ Gdp)
        return op

    def operator_tangent(self, op: dict[str, np.ndarray], v: np.ndarray) -> dict[str, np.ndarray]:
        """The derivative of :meth:`operator` at its ``op`` along ``v`` (forward mode: the
        product rule on each step, ``d(A^{-1}) = -A^{-1} dA A^{-1}``, the core of ``A21`` by one
        complex step; 12 GEMMs)."""
        c = self.c
        d = self._coefficients(v)
        Dxt, Dax, R_bd, Bi, WB = op["Dxt"], op["Dax"], op["R_bd"], op["Bi"], op["WB"]
        A22i, X, D12, Si = op["A22i"], op["X"], op["D12"], op["Gdd"]
        dBi = Bi * Bi * d["Dat"] / c
        dWB = d["W_pb"] * Bi[None, :] + op["W_pb"] * dBi[None, :]
        h = 1e-20 * np.abs(op["g"]).max() / max(np.abs(v).max(), 1e-300)
        dXi = self._xi(op["g"] + 1j * h * v).imag / h
        dA21 = -self.R @ (d["Om"] + dXi / c) @ self.R.T / c
        dA22 = d["W_pp"] / c + dWB * (Dax / c ** 2)[None, :] + WB * (d["Dax"] / c ** 2)[None, :]
        dA22i = -A22i @ dA22 @ A22i
        dX = dA22i @ op["A21"] + A22i @ dA21
        dD12 = d["gxx"] / c + (d["Dxt"] * Dax * Bi + Dxt * d["Dax"] * Bi + Dxt * Dax * dBi) / c ** 2
        dS = (-d["A_dd"] / c - ((d["Dxt"] * Bi + Dxt * dBi) / c ** 2)[:, None] * R_bd
              - (Dxt * Bi / c ** 2)[:, None] * d["R_bd"] - dD12[:, None] * X - D12[:, None] * dX)
        dSi = -Si @ dS @ Si
        dGdp = -(dSi @ op["Y"] + Si @ (dD12[:, None] * A22i + D12[:, None] * dA22i))
        d.update(Bi=dBi, WB=dWB, X=dX, Gdd=dSi, Gdp=dGdp, Gpp=dA22i - dX @ op["Gdp"] - X @ dGdp)
        return d

    def _blocksum(self, A: np.ndarray) -> np.ndarray:
        """Sums of ``A`` (``r x r``, ``r = sum_h r_h``) over the heads' factor blocks: ``H x H``."""
        return np.add.reduceat(np.add.reduceat(A, self.starts, axis=-1), self.starts, axis=-2)

    def _contract(self, Z: np.ndarray) -> np.ndarray:
        """``Q[k, n, m] = sum over the factor blocks n, m of (L^T P_k L) o Z^T`` (``H x H x H``):
        one matrix-vector product of the stored Grams per block pair (without stored Grams,
        each formed here: ``O(p r^2)``)."""
        if self.Lam is None:
            return np.stack([self._blocksum((self.L[b].T @ self.L[b]) * Z.T) for b in self.blocks])
        H, seg = self.H, self.qseg
        z = Z.T.ravel()[self.qidx]
        Q = np.empty((H, H * H), dtype=z.dtype)
        for j in range(H * H):
            Q[:, j] = self.Lam[:, seg[j]:seg[j + 1]] @ z[seg[j]:seg[j + 1]]
        return Q.reshape(H, H, H)

    def _reduce(self, Gdd: np.ndarray, Gdp: np.ndarray, Gpp: np.ndarray, gpd: np.ndarray,
                rG: np.ndarray, wpp: np.ndarray) -> dict[str, np.ndarray]:
        """The head-level sums of the p-side inverse that the traces read, linear in its
        arguments: ``spd``, ``srG``, ``swpp`` (block sums of ``gpd = diag(G_psi,d)``,
        ``rG = diag(R_bd Gdd)``, ``wpp = diag(Gpp W_pb Bi)``), ``MGdd[h, k] = tr(P_k M'_h Gdd)``,
        ``MGpp[k, h] = tr(P_k Gpp M'^T_h)``, ``Sa = blocksum((R^T Gdp R) o L^T L)`` and
        ``Q[k, n, m] = blocksum(L^T P_k L o (R^T Gdp R)^T)[n, m]`` (two GEMMs, the rest
        ``O(H p^2)``)."""
        Pm, R = self.Pm, self.R
        Z = R.T @ Gdp @ R
        GddT = Gdd.T
        return dict(spd=Pm @ gpd, srG=Pm @ rG, swpp=Pm @ wpp,
                    MGdd=np.stack([self.Mrows[k] @ GddT[b].ravel()
                                   for k, b in enumerate(self.blocks)], axis=1),
                    MGpp=np.stack([self.Mrows[k] @ Gpp[b].ravel() for k, b in enumerate(self.blocks)]),
                    Sa=self._blocksum(Z * self.LtL), Q=self._contract(Z))

    def _pieces(self, op: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """:meth:`_reduce` at :meth:`operator`'s ``op``."""
        Gdd, Gpp = op["Gdd"], op["Gpp"]
        return self._reduce(Gdd, op["Gdp"], Gpp, -_rowdot(op["X"], Gdd), _rowdot(op["R_bd"], Gdd),
                            _rowdot(Gpp, op["WB"]))

    def _pieces_tangent(self, op: dict[str, np.ndarray], dop: dict[str, np.ndarray]
                        ) -> dict[str, np.ndarray]:
        """The derivative of :meth:`_pieces` at ``op`` along ``dop`` (:meth:`operator_tangent`;
        two GEMMs)."""
        Gdd, Gpp, X, R_bd, WB = op["Gdd"], op["Gpp"], op["X"], op["R_bd"], op["WB"]
        dGdd, dGpp = dop["Gdd"], dop["Gpp"]
        return self._reduce(dGdd, dop["Gdp"], dGpp, -_rowdot(dop["X"], Gdd) - _rowdot(X, dGdd),
                            _rowdot(dop["R_bd"], Gdd) + _rowdot(R_bd, dGdd),
                            _rowdot(dGpp, WB) + _rowdot(Gpp, dop["WB"]))

    def _assemble(self, pc: dict[str, np.ndarray], g: np.ndarray) -> np.ndarray:
        """``T[r, c] = tr(G[psi_r, sigma_c] A_c) / p`` (``N x N``) from the sums of
        :meth:`_reduce` and the head-level coefficients of ``g`` (``Bi``, ``D_xt``, ``D_ax``
        on each head's block, ``g[t, t]``, ``g[a, a]``); real-analytic small algebra, so that a
        complex step through it differentiates it."""
        p, c, rho = self.p, self.c, self.rho
        x, a, t = self.x, self.a, self.t
        Bh = 1.0 / (1.0 - g[a, t] / c)
        Dxt, Dax, Gtt, Gaa = g[x, t], g[a, x], g[np.ix_(t, t)], g[np.ix_(a, a)]
        xb = Dxt * Bh / c
        spd, srG, MGdd, MGpp, Q = pc["spd"], pc["srG"], pc["MGdd"], pc["MGpp"], pc["Q"]
        sgpb = spd * xb + pc["swpp"] / c
        # tr(P_k M'_h Gdp W_pb Bi) / c and tr(P_h R_bd Gdp W_pb Bi), tr(P_k R_bd Gdp M'^T_h)
        aa = np.einsum("k,n,nk,knh->hk", Bh / c, rho, Gtt, Q)
        tq = Bh * np.einsum("m,n,hm,nh,hnm->h", rho, rho, Gaa, Gtt, Q)
        tt = np.einsum("m,km,khm->kh", rho, Gaa, Q)
        T = np.zeros((self.N, self.N), dtype=np.result_type(g, Q))
        T[x, x] = np.sum(spd) / p
        T[a, x] = -rho * MGdd.sum(axis=1) / p
        T[t, x] = -Bh * (srG - Dax * spd) / (c * p)
        T[x, a] = sgpb / p
        T[np.ix_(a, a)] = -rho[:, None] * (MGdd * xb[None, :] + aa) / p
        T[t, a] = -(self.sizes * Bh + Bh * (xb * srG + tq / c - Dax * sgpb) / c) / p
        T[x, t] = rho * MGpp.sum(axis=0) / p
        T[np.ix_(a, t)] = -rho[:, None] * rho[None, :] * pc["Sa"] / p
        T[np.ix_(t, t)] = -rho[None, :] * (Bh / c)[:, None] * (tt - Dax[:, None] * MGpp) / p
        return T

    def sigma(self, g: np.ndarray, T: np.ndarray) -> np.ndarray:
        """``Sigma_nn = -T`` plus the ``H`` terms (linear in ``g``)."""
        x, a, t, C = self.x, self.a, self.t, self.C
        S = -T
        S[x, t] += C.T @ g[t, x]
        S[x, x] -= np.sum(C * g[np.ix_(t, a)])
        S[np.ix_(a, t)] -= C * g[x, x]
        S[a, x] += C @ g[x, a]
        return S

    def _sources(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``N`` sources of :meth:`forms` at ``(d, b, psi)`` (each ``p x N``): ``m`` at ``d``
        (column ``x``), ``P_h m`` at ``b`` (``a_h``) and ``rho_h M'^T_h m`` at ``psi`` (``t_h``)."""
        p, N, rho, M, m, Pm = self.p, self.N, self.rho, self.M, self.m, self.Pm
        sd, sb, sp = np.zeros((p, N)), np.zeros((p, N)), np.zeros((p, N))
        sd[:, self.x] = m
        sb[:, self.a] = (Pm * m[None, :]).T
        sp[:, self.t] = (rho[:, None] * (M.transpose(0, 2, 1) @ m)).T
        return sd, sb, sp

    def solve(self, op: dict[str, np.ndarray], sd: np.ndarray, sb: np.ndarray, sp: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(d, b, psi)`` of the p-side system at :meth:`operator`'s ``op`` for the sources
        ``(s_d, s_b, s_psi)`` (each ``p x k``): ``b`` eliminated into ``s_d + D_xt Bi s_b / c``
        and ``s_psi + W_pb Bi s_b / c``, then the ``(d, psi)`` inverse (``p^2 k`` work)."""
        c = self.c
        Gdd, Gdp, Gpp, X = op["Gdd"], op["Gdp"], op["Gpp"], op["X"]
        Bi, Dxt, Dax, R_bd, WB = op["Bi"], op["Dxt"], op["Dax"], op["R_bd"], op["WB"]
        w = Gdd @ (sd + (Dxt * Bi / c)[:, None] * sb)
        up = sp + WB @ sb / c
        d = w + Gdp @ up
        psi = -X @ w + Gpp @ up
        b = Bi[:, None] * (sb + (R_bd @ d - Dax[:, None] * psi) / c)
        return d, b, psi

    def _read(self, d: np.ndarray, b: np.ndarray, psi: np.ndarray) -> np.ndarray:
        """``F`` (``N x N``) from the solutions of :meth:`solve` for the sources of :meth:`_sources`."""
        rho, M, m, Pm = self.rho, self.M, self.m, self.Pm
        F = np.zeros((self.N, self.N), dtype=d.dtype)
        F[self.x] = m @ psi
        F[self.a] = -rho[:, None] * ((M.transpose(0, 2, 1) @ m) @ d)
        F[self.t] = -(Pm * m[None, :]) @ b
        return F

    def forms(self, op: dict[str, np.ndarray]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """``F[r, c] = m^T G[psi_r, sigma_c] A_c m`` (``N x N``) from :meth:`operator`, and the
        solutions behind it (for :meth:`forms_tangent`): the ``2p x 2p`` inverse applied to the
        ``N`` sources ``m`` at ``d``, ``P_h m`` at ``b`` and ``rho_h M'^T_h m`` at ``psi``."""
        z = self.solve(op, *self._sources())
        return self._read(*z), z

    def forms_tangent(self, op: dict[str, np.ndarray], z: tuple[np.ndarray, ...], v: np.ndarray
                      ) -> np.ndarray:
        """The derivative of :meth:`forms` along ``v`` at ``op`` (its solutions ``z``):
        ``dz = -L^{-1} dL z``, ``dL`` the p-side operator's change along ``v`` applied to the
        ``N`` solutions through the heads' factors (``W_pd = R Om R^T``), ``O(p^2 N)`` work."""
        c, R = self.c, self.R
        d, b, psi = z
        k = self._coefficients(v)
        Wpd_d = R @ (k["Om"] @ (R.T @ d))
        rd = (k["gxx"] * psi - k["A_dd"] @ d - k["Dxt"][:, None] * b) / c
        rb = (k["Dax"][:, None] * psi - k["R_bd"] @ d - k["Dat"][:, None] * b) / c
        rp = (k["W_pp"] @ psi - Wpd_d - k["W_pb"] @ b) / c
        return self._read(*self.solve(op, -rd, -rb, -rp))

    def phi(self, g: np.ndarray, gamma: complex) -> np.ndarray:
        """The fixed-point map ``g -> (L0 - Sigma_nn(g))^{-1}`` at ``gamma``."""
        S = self.sigma(g, self._assemble(self._pieces(self.operator(g)), g))
        return np.linalg.inv(self.initial(gamma).astype(S.dtype) - S)

    def tangent_map(self, g: np.ndarray, gamma: float, op: dict[str, np.ndarray] | None = None
                    ) -> Callable[[np.ndarray], np.ndarray]:
        """``v -> DPhi(g) v + dPhi/dgamma = Phi (dSigma(v) - E_xx) Phi`` at ``(g, gamma)``, its
        fixed point ``dg/dgamma`` at a fixed point ``g``. The p-side at ``g`` is computed once
        (or given: ``op`` of :meth:`operator` at ``g``); each application is its forward-mode
        derivative (:meth:`operator_tangent`, :meth:`_pieces_tangent`: 14 GEMMs, about 1.3
        evaluations of :meth:`phi`, ``benchmarks/multi_head.py --speed``) and a complex step
        through :meth:`_assemble`."""
        op = self.operator(g) if op is None else op
        pc = self._pieces(op)
        P = np.linalg.inv(self.initial(gamma) - self.sigma(g, self._assemble(pc, g)))
        E = np.zeros((self.N, self.N))
        E[self.x, self.x] = 1.0

        def tangent(v: np.ndarray) -> np.ndarray:
            # the small algebra by one complex step, the p-side sums by forward mode
            h = 1e-20 * np.abs(g).max() / max(np.abs(v).max(), 1e-300)
            dpc = self._pieces_tangent(op, self.operator_tangent(op, v))
            dT = self._assemble({k: pc[k] + 1j * h * dpc[k] for k in pc}, g + 1j * h * v).imag / h
            return P @ (self.sigma(v, dT) - E) @ P
        return tangent

    def initial(self, gamma: complex) -> np.ndarray:
        """``L0_nn`` at ``gamma``; its inverse is ``g`` at ``Sigma = 0`` (the start of the path)."""
        L0 = np.eye(self.N, dtype=np.result_type(gamma, float))
        L0[self.x, self.x] = gamma
        L0[self.x, self.t] = -self.k0
        L0[self.a, self.x] = self.k0
        return L0

    def form(self, g: np.ndarray, F: np.ndarray) -> complex:
        """``y^T Q y / n`` from the n-side solution ``g`` and the forms ``F`` (:meth:`forms`; one
        Woodbury step, ``2N x 2N``; complex ``g`` and ``F``: one complex step of it)."""
        N, c = self.N, self.c
        K = np.zeros((2 * N, 2 * N), dtype=np.result_type(g, F))
        K[:N, N:] = g
        K[N:, :N] = F
        coef = np.concatenate([np.full(N, -1.0), np.full(N, 1.0)]) / np.sqrt(c)
        left = np.concatenate([np.zeros(N), g[self.x, :]])
        right = np.concatenate([g[:, self.x], np.zeros(N)])
        return g[self.x, self.x] - left @ np.linalg.solve(np.eye(2 * N) + coef[:, None] * K,
                                                          coef * right)


def _rowdot(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``diag(A B)`` without the product."""
    return np.einsum("ij,ji->i", A, B)


def _anderson(fun: Callable[[np.ndarray], np.ndarray], g: np.ndarray, tol: float, what: str,
              history: tuple[list[np.ndarray], list[np.ndarray]] | None = None
              ) -> tuple[np.ndarray, tuple[list[np.ndarray], list[np.ndarray]]]:
    """The fixed point of ``fun`` from ``g`` by Anderson acceleration (type II, memory
    ``_MEMORY``, undamped): ``g_new = g + r - (dG + dR) w``, ``w`` the least-squares
    coefficients of the residual ``r = fun(g) - g`` on the last residual differences ``dR``.

    ``history`` (``dG``, ``dR``): secant pairs of a map with nearly the same Jacobian to start
    from (a previous solve's). Converged when ``max |r| <= tol max |g|`` (then ``fun(g)`` is
    returned, with the pairs); raises :class:`ConvergenceError` (naming ``what`` and the last
    residual) after ``_MAX_ITER`` evaluations."""
    dG: list[np.ndarray] = [] if history is None else list(history[0])
    dR: list[np.ndarray] = [] if history is None else list(history[1])
    prev = None
    for _ in range(_MAX_ITER):
        r = fun(g) - g
        res = np.abs(r).max() / np.abs(g).max()
        if res <= tol:
            return g + r, (dG, dR)
        v, rv = g.ravel(), r.ravel()
        if prev is not None:
            dG.append(v - prev[0])
            dR.append(rv - prev[1])
            del dG[:-_MEMORY], dR[:-_MEMORY]
        prev = (v, rv)
        if dG:
            A = np.array(dR).T
            w = np.linalg.lstsq(A, rv, rcond=None)[0]
            v = v + rv - (np.array(dG).T + A) @ w
        else:
            v = v + rv
        g = v.reshape(g.shape)
    raise ConvergenceError(f"multi-head fixed point ({what}) did not converge in {_MAX_ITER} "
                           f"evaluations: last relative residual {res:.3g}")


def heads_resolvent_form(c: float, heads: np.ndarray, mu: np.ndarray, f: NonlinearityLike,
                         gammas: object) -> tuple[np.ndarray, np.ndarray]:
    """``(y^T Q y / n, E)`` on a grid of ``gamma`` for multi-head attention (module docstring).

    Parameters
    ----------
    c : float
        ``p / n``.
    heads : ndarray of shape (H, p, p)
        The head matrices ``B_h`` (rows: keys), any scale, each non-zero, ``H <= p``; head ``h``
        writes the rows :func:`~attn_lib.model.kernel.head_blocks` ``(p, H)[h]``.
    mu : ndarray of shape (p,)
        Signal (``snr = ||mu||^2``).
    f : str or callable
        Nonlinearity, linearised per head at ``sigma_h = ||B_h||_F / sqrt(p)``.
    gammas : array_like of shape (G,)

    Returns
    -------
    form, error : ndarray of shape (G,)
        ``y^T Q y / n`` and ``E = -gamma^2 d(y^T Q y / n)/dgamma``.

    Raises
    ------
    ConvergenceError
        When a fixed point does not converge (never NaN).
    ValueError
        For malformed input, and when the residual covariance series does not converge
        (:func:`attn_lib.model.hermite.residual_covariance`).
    """
    c = check_real(c, "c", low=0.0, low_open=True)
    B = check_array(heads, "heads", ndim=3)
    H, p = B.shape[0], B.shape[-1]
    if B.shape != (H, p, p) or not 1 <= H <= p:
        raise ValueError(f"heads must have shape (H, p, p) with 1 <= H <= p, got {B.shape}")
    m = check_array(mu, "mu")
    if m.shape != (p,):
        raise ValueError(f"mu must have shape ({p},), got {m.shape}")
    g_arr = np.atleast_1d(check_gammas(gammas))
    sigma = np.array([np.linalg.norm(b) / np.sqrt(p) for b in B])
    if np.any(sigma == 0):
        raise ValueError(f"heads[{int(np.argmin(sigma))}] must not be zero")
    M = B / sigma[:, None, None]
    corr = np.einsum("hij,kij->hk", M, M) / p
    C = hermite.residual_covariance(f, sigma, corr)
    rho = np.sqrt(c) * np.array([hermite.coefficients(f, float(s)).a1 for s in sigma])
    k0 = rho * np.trace(M, axis1=1, axis2=2) / p
    model = _Heads(c, M, rho, k0, C, m)
    targets = np.unique(g_arr)[::-1]
    path = _path(targets, _START)
    g = np.linalg.inv(model.initial(path[0]))
    points: list[tuple[Any, np.ndarray, np.ndarray | None]] = []
    out: dict[Any, tuple[float, Any]] = {}
    for gam in _progress.bar(path, "multi-head theory (gamma path)"):
        if points:
            g = _predict(points, gam)
        final = gam in targets
        g, hist = _anderson(lambda e: model.phi(e, gam), g, _TOL if final else _PATH_TOL,
                            f"gamma={gam:.6g}")
        dg = None
        if final:
            # dg/dgamma: the fixed point of the tangent map, from its first term -g E_xx g
            op = model.operator(g)
            dg, _ = _anderson(model.tangent_map(g, gam, op), -np.outer(g[:, 0], g[0, :]),
                              _TANGENT_TOL, f"d/dgamma at gamma={gam:.6g}", hist)
            F, z = model.forms(op)
            dF = model.forms_tangent(op, z, dg)
            s = 1e-20 * np.abs(g).max() / np.abs(dg).max()
            dq = model.form(g + 1j * s * dg, F + 1j * s * dF).imag / s
            out[gam] = (float(np.real(model.form(g, F))), -gam ** 2 * dq)
        points.append((np.log(gam), g, None if dg is None else gam * dg))
    form, error = np.array([out[x] for x in g_arr]).T
    return form, error


def heads_error(c: float, heads: np.ndarray, mu: np.ndarray, f: NonlinearityLike,
                gammas: object) -> np.ndarray:
    """The attention error ``E(gamma)`` of multi-head attention (:func:`heads_resolvent_form`)."""
    return heads_resolvent_form(c, heads, mu, f, gammas)[1]
