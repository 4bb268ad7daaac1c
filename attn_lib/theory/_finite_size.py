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
    :mod:`attn_lib.theory.shift` and ``W`` an independent GOE matrix. What it misses at small
    ``p`` for ``f`` with an ``He2`` part is the residual's dependence on the tokens (the pair
    moment ``E[g^2 (g^2 - 1)] = 2``), not the Wishart spectrum of ``(g_ij^2 - 1)``: a
    Marchenko–Pastur block for it moves the quadratic of ``benchmarks/small_n.py`` at ``p = 256``
    by -0.0005 +- 0.0010, the true kernel is -0.0055 +- 0.0010 below the surrogate
    (``book/derivation_finite_size.md``, "The He2 residual"). So it is not modelled.

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

Rank r and any matrix
    A :class:`~attn_lib.model.setting.RankSetting` whose latent span of ``mu, w_K^(k), w_Q^(k)``
    has dimension ``r <= 3`` is the same model with ``M_r = I_r + W_{K,r} W_{Q,r}^T`` (exact:
    the complement is still ``I``). A larger span, or any matrix
    (:class:`~attn_lib.model.setting.MatrixSetting`), goes through the rank-``<= 3`` model of
    :func:`reduced_setting` (``mu``, ``M mu`` and ``M^T mu`` kept exactly, an isotropic bulk of
    the complement's logit variance), whose finite-size shift
    :func:`attn_lib.theory.attention_error` adds to the limit.

Softmax
    A canonical setting with (masked) :class:`~attn_lib.model.setting.Softmax` attention is the
    kernel ``(n - 1) A / sqrt(p)`` of ``f_beta`` with its columns normalised by their means over
    the keys' types: the mean kernel is the uncentred ``1 + F0 = e^{beta h(t, t')}``, and the
    mean and slope kernels are divided by ``d(t') = E_pi[e^{beta h(t, t')}]``, the Wigner
    profile by ``d(t')^2`` (``book/derivation_softmax.md``). Only the kernels change; the
    equations and the solver are those above.

Solver
    The state ``z = (Gamma, Sigma_W)`` (``(2m + 1)^2 + 4 T`` complex numbers) is iterated by
    Anderson acceleration, batched: every (setting, gamma) of a batch is one element, settings
    of similar size are stacked with zero-weight padding (:class:`_Stack`), and one compiled call
    (:func:`attn_lib.theory._finite_size_iteration.anderson`, Numba) iterates the elements of a
    batch in turn, each until it converges, so that the cost is the arithmetic, not one NumPy
    call per operation on small arrays. One iteration costs ``O(T (m^2 + T))`` per element: one
    product of ``Gamma`` with the coefficients of ``Z^T`` and one of ``G`` with those of ``Z``
    (one entry per block and type, used as such, over the entries of ``Gamma`` that are not zero
    by parity), one product with each Wigner profile (a ``T x T`` matrix), the ``3 x 3``
    inverses by cofactors and ``Gamma``'s inverse in real arithmetic, block by block (to first
    order in the complex step, exact to rounding). Each setting is cold-started at
    ``max(gamma_max, 0.1)`` (at 10 if that fails) and continued down in steps of ratio at most 4
    (to the smallest gamma asked for within that ratio, if any); one batched solve per step
    takes every setting's gammas inside the step and then the next point of its path, in
    decreasing order, each from the Taylor predictor of the fixed point before it
    (:func:`_solve`); the label forms of all are taken at the end, together. The one-off
    factorisations are SVDs (eigendecompositions for symmetric kernels) of the slope and mean
    kernels; the slope kernel keeps at most 8 terms, which a subspace iteration gives for a
    large non-symmetric block (:func:`_leading`).

Flip symmetry
    Every kernel is a function of ``h(t, t')``, a bilinear form of ``xi_t, xi_t'``, so it is
    invariant under flipping both types, ``(y, xi) -> -(y, xi)``; the default rules are
    symmetric under the flip (:func:`_flip`). The kernels are then evaluated on half the type
    pairs and factorised in their even and odd blocks (:func:`_factor`: two ``T/2 x T/2``
    decompositions, a quarter of the cost), each slope term is even or odd, and the fixed point
    is even, ``G(pi t) = G(t)``: it is solved on half the types (:meth:`_Model.solve_types`),
    with the same iterates as on all of them (the Anderson fit counts each solved type twice),
    the Wigner profiles folded onto them. The label form's solution ``(x, k, e)`` is odd (its
    right-hand side ``y_t`` is), so only the mean kernel's odd block acts on it: the even one
    is not decomposed, and the label form's integrands are even: it is taken on the solved
    types too. A rule of one's own without the symmetry is solved on all its types.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..model.data import latent_basis, latent_coordinates
from ..model.kernel import BLAS
from ..model.setting import MatrixSetting, RankSetting, Setting, Softmax
from ._errors import ConvergenceError, _gamma, check_converged, not_converged
from .shift import shift_functions

__all__ = ["finite_size_resolvent_form", "finite_size_resolvent_form_batch", "LatentLaw", "latent_law",
           "reduced_setting", "REDUCED_KINDS"]

_GH_NODES = {0: 1, 1: 32, 2: 10, 3: 6}   # Gauss–Hermite nodes per latent dimension
# type rule for r = 3 (_type_rule): nodes added along a weight axis per monotone piece of F0 or F1
# beyond the first two on the bulk line of that axis (sin at delta 2.2: 1.8 extra pieces, 20 nodes)
_NODES_PER_PIECE = 8
_BULK = 3.0          # the bulk line: zeta_j in [-_BULK, _BULK] at the r.m.s. rate of h along axis j
_NODES_MAX = 24      # refined count along a weight axis at most this (2 x 24 x 24 x 3 types)
_NODES_MU = 3        # nodes along mu in a refined rule (20 x 20 x 3 and 20 x 20 x 5 agree to 1e-5)
_PRUNE = 1e-12       # drop nodes whose weight is below this fraction of the largest
_SLOPE_TOL = 1e-4    # keep slope terms with s_k >= _SLOPE_TOL * s_1 (1e-3 and 6 terms change E by < 1e-6)
_SLOPE_MAX = 8
_SKETCH = 24         # subspace of the slope kernel's leading terms (_leading): 3 x _SLOPE_MAX columns
_SKETCH_POWER = 3    # its power iterations (2: Ritz residuals up to 3e-13 s_1 on the r = 3 maps, 3: 1e-15)
_MEAN_TOL = 1e-8     # keep mean-kernel terms with singular value >= _MEAN_TOL * largest (1e-6: E moves < 1e-8)
_STEP = 1e-30        # complex step (relative to gamma)
_NO_BULK = 1e-12    # a bulk ||P_perp A P_perp||_F^2 below this fraction of ||A||_F^2 is rounding: none
_TOL = 1e-10         # fixed-point tolerance (relative change of value and derivative)
_MAX_ITER = 300
_GAMMA_START = 10.0  # continuation starts here when a cold start at _GAMMA_COLD fails
_GAMMA_COLD = 0.1    # first cold start (measured: 35-46 iterations at 0.1, 14 at 10, 275 at 0.01)
_COLD_ITER = 100     # iteration cap of that first cold start
_MAX_RATIO = 4.0     # largest gamma ratio of one continuation step (2: 1.6x the iterations, as accurate)
_MAX_ATTEMPTS = 9    # per continuation step: the first try and up to 8 halvings
_SAME = 1e-15        # a target within this relative distance of a path point is solved there
_MIN_STEP = 1e-9     # a failing step shorter than this (relative) is not halved further
_BATCH_CELLS = 500_000  # models per batch: sum of 3 T^2 at most this (T types)
_PROBLEM = "finite-size fixed point"
_MEMORY = 12        # Anderson memory
_LABEL_CELLS = 1_000_000  # label forms taken together: elements x solved types x (2L + r) at most this


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
    """Orthogonal ``O`` (r x r) whose rows are the directions of the ``w_K``, then the ``w_Q``, then ``mu``.

    ``coords`` has the columns ``mu_r, w_{K,r}^(1..k), w_{Q,r}^(1..k)`` (``k = 1`` for a
    :class:`~attn_lib.model.setting.Setting`). Gram–Schmidt on ``(w_{K,r}^(1..k),
    w_{Q,r}^(1..k), mu_r, e_1, ..., e_r)``, skipping vectors that are (numerically) in the span of
    the previous ones. ``h = xi^T M_r xi' / sqrt(p)`` varies fastest along ``w_K`` in ``xi`` and
    along ``w_Q`` in ``xi'``.
    """
    r = coords.shape[0]
    rows: list[np.ndarray] = []
    for v in [*coords[:, 1:].T, coords[:, 0], *np.eye(r)]:
        for u in rows:
            v = v - (u @ v) * u
        if len(rows) < r and np.linalg.norm(v) > 1e-8 * max(1.0, float(np.linalg.norm(coords))):
            rows.append(v / np.linalg.norm(v))
    return np.array(rows).reshape(r, r)


@functools.lru_cache(maxsize=32)
def _tensor_rule(counts: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``zeta`` (shape ``(T, r)``) and weights (sum one) of the tensor Gauss–Hermite rule
    with ``counts[j]`` nodes along axis ``j``, pruned below ``_PRUNE`` of the largest weight
    (read-only, shared between calls)."""
    r = len(counts)
    rules = [np.polynomial.hermite_e.hermegauss(k) for k in counts]
    grids = np.meshgrid(*[t for t, _ in rules], indexing="ij")
    zeta = np.stack([g.ravel() for g in grids], axis=1) if r else np.zeros((1, 0))
    wz = (np.prod(np.meshgrid(*[w / w.sum() for _, w in rules], indexing="ij"), axis=0).ravel()
          if r else np.ones(1))
    sel = wz >= _PRUNE * wz.max()
    zeta, wz = zeta[sel], wz[sel] / wz[sel].sum()
    zeta.flags.writeable = wz.flags.writeable = False
    return zeta, wz


def _restricted(coords: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha I_r + W_{K,r} W_{Q,r}^T`` from latent coordinates with the columns ``mu_r,
    w_{K,r}^(1..k), w_{Q,r}^(1..k)`` (shape ``(r, 1 + 2k)``); the restricted attention matrix."""
    k = (coords.shape[1] - 1) // 2
    return alpha * np.eye(coords.shape[0]) + coords[:, 1:1 + k] @ coords[:, 1 + k:].T


def _pieces(F: np.ndarray) -> float:
    """Monotone pieces of a sampled function: its total variation over its range (0 if constant)."""
    span = np.ptp(F)
    return float(np.abs(np.diff(F)).sum() / span) if span > 0 else 0.0


def _type_rule(setting: Setting | RankSetting, p: int, coords: np.ndarray) -> tuple[int, ...] | None:
    r"""Nodes along the axes of ``w_K``, ``w_Q``, ``mu`` for an oscillating kernel, or ``None``.

    In the frame of :func:`_frame`, ``h(t, t') = xi_t^T M_r xi_t' / sqrt(p)`` changes along axis
    ``j`` of ``xi_t`` at the rate ``(M_r xi_t')_j / sqrt(p)`` (and of ``xi_t'`` at
    ``(M_r^T xi_t)_j / sqrt(p)``), whose mean square over the types is
    ``(M_r C M_r^T)_jj / p`` (``(M_r^T C M_r)_jj / p``), ``C = E[xi xi^T] = I_r + mu_r mu_r^T``.
    With ``rho_j`` the larger of the two r.m.s. rates, the bulk line of axis ``j`` is
    ``h in [-_BULK rho_j, _BULK rho_j]``; ``e_j`` is the number of monotone pieces (total
    variation over range) of ``F0`` or ``F1`` on it beyond two, the pieces of a monotone or
    single-bump kernel that the tensor rule resolves. The rule is ``k_j = 6 + 2 round(4 e_j)``
    (``_NODES_PER_PIECE`` nodes per extra piece, in steps of two: the even rules converge, the
    odd ones do not by 23 nodes), at most ``_NODES_MAX``, along ``w_K`` and ``w_Q``, and
    ``_NODES_MU`` along ``mu``, where ``h`` varies slowly. ``None`` (the default tensor rule)
    when ``r < 3``, for more than one weight pair (``coords`` with more than 3 columns: the
    third axis of the frame is then not ``mu``'s), or when neither weight axis needs more than
    6 nodes.

    Returns
    -------
    tuple of int or None
        ``(k_K, k_Q, k_mu)`` for :func:`latent_law`'s ``nodes``.
    """
    r = coords.shape[0]
    if r != 3 or coords.shape[1] != 3:
        return None
    c = _frame(coords) @ coords
    M = _restricted(c)
    C = np.eye(r) + np.outer(c[:, 0], c[:, 0])
    rho = np.sqrt(np.maximum(np.diag(M @ C @ M.T), np.diag(M.T @ C @ M)) / p)
    f = setting.attention.f if isinstance(setting.attention, Softmax) else setting.f
    table = shift_functions(f, 1.0, _BULK * rho.max())
    k = []
    for rate in rho[:2]:
        h = np.linspace(-1.0, 1.0, 2001) * min(_BULK * rate, table.h_max)
        extra = max(0.0, max(_pieces(F) for F in table(h)[:2]) - 2.0)
        k.append(min(_GH_NODES[r] + 2 * round(_NODES_PER_PIECE / 2 * extra), _NODES_MAX))
    return None if max(k) <= _GH_NODES[r] else (*k, _NODES_MU)


def latent_law(setting: Setting | RankSetting, p: int,
               nodes: int | tuple[int, ...] | None = None) -> LatentLaw:
    """Latent geometry of the canonical ``setting`` and a Gauss–Hermite rule for its types.

    Parameters
    ----------
    setting : Setting or RankSetting
        Canonical (``alpha = 1``). For a :class:`~attn_lib.model.setting.RankSetting` the latent
        span of ``mu, w_K^(k), w_Q^(k)`` must have dimension ``r <= 3`` (larger ones go through
        the reduced model, :func:`reduced_setting`); then the complement is exactly ``I`` and
        ``M_r = I_r + W_{K,r} W_{Q,r}^T`` (columns ``w_{K,r}^(k)``, ``w_{Q,r}^(k)``).
    p : int
        Token dimension.
    nodes : int or tuple of int, optional
        Gauss–Hermite nodes per latent dimension (default: 32, 10, 6 for ``r = 1, 2, 3``), in the
        basis of :func:`attn_lib.model.data.latent_coordinates`. A tuple of ``r`` counts gives
        the nodes along the axes of ``w_K``, ``w_Q`` and ``mu`` instead (:func:`_frame`; for rank
        ``k`` the Gram–Schmidt axes of ``w_K^(1..k), w_Q^(1..k), mu``; the law of the types is
        rotation invariant): a rule refined where the kernels vary fastest, for oscillating or
        step-like ``f`` under a strong spike.

    Raises
    ------
    ValueError
        For a latent dimension above 3, or a tuple ``nodes`` of the wrong length.
    """
    coords = latent_coordinates(setting)        # (r, 1 + 2k): columns mu_r, wK_r^(1..k), wQ_r^(1..k)
    r, k = coords.shape[0], (coords.shape[1] - 1) // 2
    if r > 3:
        raise ValueError(f"setting: the latent span of mu and the {2 * k} weight vectors has dimension "
                         f"{r} > 3; the exact finite-size model keeps at most 3 latent directions "
                         "(attention_error uses the reduced model for it)")
    if nodes is None:
        nodes = _type_rule(setting, p, coords)
    if isinstance(nodes, tuple):
        if len(nodes) != r:
            raise ValueError(f"nodes must have one count per latent dimension (r = {r}), got {nodes!r}")
        coords = _frame(coords) @ coords
        counts = nodes
    else:
        counts = (nodes or _GH_NODES[r],) * r
    mu_r = coords[:, 0]
    M = _restricted(coords)
    zeta, wz = _tensor_rule(tuple(counts))
    y = np.repeat([1.0, -1.0], len(wz))
    xi = np.concatenate([zeta + mu_r, zeta - mu_r])
    return LatentLaw(xi=xi, y=y, weight=np.concatenate([wz, wz]) / 2.0, M=M, p=p)


#: The directions a reduced model keeps exactly (:func:`reduced_setting`).
REDUCED_KINDS = ("coherent", "spike")


def reduced_setting(setting: RankSetting | MatrixSetting, n: int, kind: str = "coherent") -> RankSetting:
    r"""The rank-``<= 3`` model ``s_B`` of a setting whose latent span is too large to keep exactly.

    With ``A`` the key-query matrix (``M`` of a :class:`~attn_lib.model.setting.MatrixSetting`;
    ``alpha I + W_K^T W_Q`` of a :class:`~attn_lib.model.setting.RankSetting`, restricted to the
    latent span of ``mu, w_K^(k), w_Q^(k)``, with ``alpha I`` on its complement) and ``B`` an
    orthonormal basis of the kept directions (``book/derivation_finite_size.md``, "Rank r and any
    matrix"), ``s_B`` has the matrix

        alpha_b I + P_B (A - alpha_b I) P_B,   alpha_b^2 = ||P_perp A P_perp||_F^2 / (p - dim B),

    (the complement's logit variance), the same ``mu`` (it lies in ``B``), ``c``, ``f`` and
    attention kind. It is returned as a ``RankSetting`` in the coordinates of ``B``: ``w_K^(k) =
    sqrt(s_k) U_k``, ``w_Q^(k) = sqrt(s_k) V_k`` from the SVD ``U S V^T`` of ``B^T A B - alpha_b I``.

    Parameters
    ----------
    setting : RankSetting or MatrixSetting
    n : int
        Number of tokens (``p = setting.p(n)``).
    kind : {"coherent", "spike"}
        ``"coherent"`` (the default, and the one :func:`attn_lib.theory.attention_error` uses):
        ``B`` spans ``mu, A mu, A^T mu`` (every cross term of ``mu`` with the complement
        vanishes); ``"spike"``: ``mu`` and the leading singular pair ``u_1, v_1`` of ``A``,
        whose latent product ``s_1 (x_i . u_1)(v_1 . x_j) / sqrt(p)`` is of order one even
        without a signal. On GPT-2's normalised layers with the aligned ``mu`` both are within
        0.0102 of Monte Carlo (``"spike"`` within 0.0079); on the rank-``r`` grid of
        ``benchmarks/rank_r.py --strong`` ``"coherent"`` is within 0.0182 and ``"spike"`` misses
        by up to 0.0263, where the leading pair is one of several alike
        (``book/derivation_finite_size.md``).

    Returns
    -------
    RankSetting
        ``r = dim B <= 3`` pairs (zero pairs for a zero singular value).

    Raises
    ------
    ValueError
        For an unknown ``kind``, or when ``alpha_b`` is zero to rounding (no bulk outside ``B``).
    """
    if kind not in REDUCED_KINDS:
        raise ValueError(f"kind must be one of {REDUCED_KINDS}, got {kind!r}")
    p = setting.p(n)
    if isinstance(setting, MatrixSetting):
        A, mu, alpha0 = setting.M, setting.mu, 0.0
    else:
        coords = latent_coordinates(setting)       # (q, 1 + 2r)
        A, mu, alpha0 = _restricted(coords, setting.alpha), coords[:, 0], setting.alpha
    q = A.shape[0]
    if kind == "coherent":
        V = np.stack([mu, A @ mu, A.T @ mu], axis=1)
    else:
        U, _, Vt = np.linalg.svd(A)
        V = np.stack([mu, U[:, 0], Vt[0]], axis=1)
    B = latent_basis(V)[0]                           # (q, k), k <= 3
    k = B.shape[1]
    AB, BA = A @ B, B.T @ A
    MB = BA @ B
    total = float(np.sum(A * A)) + alpha0 ** 2 * (p - q)          # ||A||_F^2 on R^p
    perp = (total - np.sum(AB * AB) - np.sum(BA * BA) + np.sum(MB * MB))   # ||P_perp A P_perp||_F^2
    alpha_b = math.sqrt(max(perp, 0.0) / (p - k))
    # the subtraction leaves a rounding error of order eps * total: a bulk below 1e-12 of the
    # matrix's Frobenius mass is none
    if not perp > _NO_BULK * total:
        raise ValueError(f"setting: the matrix has no bulk outside the {k} kept directions "
                         f"(||P_perp M P_perp||_F^2 = {perp:.3g}); the reduced finite-size model "
                         "needs alpha_b > 0")
    if k == 0:                                       # mu = 0 and kind "coherent": no direction kept
        mu_B, W_K, W_Q = np.zeros(1), np.zeros((1, 1)), np.zeros((1, 1))
    else:
        Us, sv, Vts = np.linalg.svd(MB - alpha_b * np.eye(k))
        root = np.sqrt(sv)
        mu_B, W_K, W_Q = B.T @ mu, (Us * root).T, root[:, None] * Vts
    return RankSetting.from_vectors(setting.c, mu_B, W_K, W_Q, f=setting.f, alpha=alpha_b,
                                    attention=setting.attention)


def _flip(law: LatentLaw) -> np.ndarray | None:
    """The flip ``pi`` of the types, ``(y, xi)_pi(t) = -(y, xi)_t`` at equal weight, or ``None``.

    Every kernel ``k(h(t, t'))`` is invariant under flipping both types (``h`` is a bilinear form
    of ``xi_t, xi_t'``), and a tensor rule (:func:`latent_law`) is symmetric, so the kernels split
    into an even and an odd block of half the size (:func:`_factor`). ``pi`` is returned only
    when it is an involution mapping the first half of the types onto the second (the labels
    ``+1`` first, as :func:`latent_law` orders them); a rule of one's own without this symmetry
    gives ``None``.
    """
    T = len(law.y)
    key = np.column_stack([law.y, law.xi])
    pi = np.empty(T, dtype=int)
    pi[np.lexsort(-key.T[::-1])] = np.lexsort(key.T[::-1])
    ok = (T % 2 == 0 and np.array_equal(key[pi], -key) and np.array_equal(law.weight[pi], law.weight)
          and np.array_equal(pi[pi], np.arange(T)) and bool(np.all(pi[:T // 2] >= T // 2)))
    return pi if ok else None


def _halves(kernel: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """The flip-invariant ``(T, T)`` kernel from its first ``T/2`` rows: ``k(pi t, t') = k(t, pi t')``."""
    h = kernel.shape[0]
    return np.concatenate([kernel, kernel[flip[h:]][:, flip]])


def _leading(A: np.ndarray, terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The leading ``_SKETCH`` singular triplets of ``A`` by subspace iteration, or ``None``.

    ``Q`` spans ``(A A^T)^q A Omega`` (``q = _SKETCH_POWER``, ``Omega`` a fixed Gaussian
    ``n x _SKETCH`` matrix, orthonormalised at every step) and ``Q^T A = U_B diag(s) V^T`` gives
    ``A ~ (Q U_B) diag(s) V^T`` (Rayleigh–Ritz). They are returned only when the first ``terms``
    are singular triplets of ``A`` to ``1e-13 s_1`` (``|(I - Q Q^T) A v_k| <= 1e-13 s_1``; the
    other side, ``A^T u_k = s_k v_k``, holds exactly), that is, the full SVD's to rounding; a
    slowly decaying spectrum fails the test.
    """
    omega = np.random.default_rng(0).standard_normal((A.shape[1], _SKETCH))
    Q = np.linalg.qr(A @ omega)[0]
    for _ in range(_SKETCH_POWER):
        Q = np.linalg.qr(A @ np.linalg.qr(A.T @ Q)[0])[0]
    Ub, s, Vt = np.linalg.svd(Q.T @ A, full_matrices=False)
    AV = A @ Vt[:terms].T
    if not np.all(np.linalg.norm(AV - Q @ (Q.T @ AV), axis=0) <= 1e-13 * s[0]):
        return None
    return s, Q @ Ub, Vt.T


def _decompose(A: np.ndarray, symmetric: bool, terms: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A = U diag(s) V^T`` with ``s`` decreasing; for a symmetric ``A`` from the eigendecomposition
    of ``(A + A^T) / 2``, the same factors at a third of the cost: ``s = |lambda|``,
    ``V = sign(lambda) U``. When only the first ``terms`` are kept and ``A`` is larger than
    ``4 _SKETCH``, the leading ``_SKETCH`` triplets of a non-symmetric ``A`` by
    :func:`_leading` (a fifth of the cost at ``216 x 216``), if they pass its test."""
    if not symmetric and terms is not None and A.shape[0] > 4 * _SKETCH:
        lead = _leading(A, terms)
        if lead is not None:
            return lead
    if symmetric:
        lam, U = np.linalg.eigh((A + A.T) / 2)
        order = np.argsort(-np.abs(lam), kind="stable")
        return np.abs(lam[order]), U[:, order], U[:, order] * np.where(lam[order] < 0, -1.0, 1.0)
    U, s, Vt = np.linalg.svd(A)
    return s, U, Vt.T


def _factor(kernel: np.ndarray, weight: np.ndarray, rel_tol: float, max_terms: int | None,
            flip: np.ndarray | None = None, odd: bool = False):
    """``kernel(t, t') ~ sum_k s_k a_k(t) b_k(t')`` from the SVD of ``A = W^1/2 kernel W^1/2``.

    With the flip ``pi`` of the types (:func:`_flip`; ``A`` is then invariant under it), ``A``
    is block-diagonal in the even and odd vectors ``(e_t +- e_pi(t)) / sqrt(2)`` of the first half
    of the types: the blocks ``A_tt' +- A_t,pi(t')`` (``T/2 x T/2``) are decomposed separately
    (a quarter of the cost) and their terms merged in decreasing ``s``. The kept terms are
    those with ``s_k >= rel_tol * s_1``, at most ``max_terms``; a block whose Frobenius norm (a
    bound on its ``s_1``) is below ``rel_tol`` times the other's ``s_1`` keeps none and is not
    decomposed (the slope kernel of an odd ``f`` is even in ``h``: its odd block is rounding).
    A symmetric ``A`` (to rounding, ``|A - A^T| <= 1e-14 max|A|``: every kernel of a symmetric
    ``M_r``, e.g. aligned weights) is decomposed by eigendecompositions (:func:`_decompose`),
    the slope kernel's leading terms of a large non-symmetric block by subspace iteration
    (:func:`_leading`). ``odd=True`` (with a flip) keeps
    the odd terms only, those that act on an odd function (the label form's, :meth:`_Stack.label_form`),
    with the same cut-off: ``s_1`` is the largest of both blocks, the even block's computed
    (without vectors) only when its Frobenius norm, a bound on it, exceeds the odd block's.
    """
    sw = np.sqrt(weight)
    A = sw[:, None] * kernel * sw[None, :]
    sym = bool(np.max(np.abs(A - A.T), initial=0.0) <= 1e-14 * np.max(np.abs(A), initial=0.0))
    if flip is None:
        s, U, V = _decompose(A, sym, max_terms)
        s_max = s[0]
    else:
        h = len(weight) // 2
        top, partner = A[:h, :h], A[:h, flip[:h]]
        mats = [(sign, top + sign * partner) for sign in ((-1.0,) if odd else (1.0, -1.0))]
        norms = [float(np.linalg.norm(X)) for _, X in mats]
        blocks: list[tuple[float, tuple[np.ndarray, np.ndarray, np.ndarray]]] = []
        for i in np.argsort(norms)[::-1]:   # the larger block first; the other only if it can keep a term
            if blocks and norms[i] < rel_tol * max(float(b[0][0]) for _, b in blocks if len(b[0])):
                continue
            blocks.append((mats[i][0], _decompose(mats[i][1], sym, max_terms)))
        blocks.sort(key=lambda b: -b[0])    # even block first
        s = np.concatenate([b[0] for _, b in blocks])
        parity = np.concatenate([np.full(len(b[0]), sign) for sign, b in blocks])
        s_max = np.max(s)
        if odd and np.linalg.norm(top + partner) > s_max:
            s_max = max(s_max, np.linalg.norm(top + partner, 2))
    m = int(np.sum(s >= rel_tol * s_max)) if s_max > 0 else 0
    if max_terms is not None:
        m = min(m, max_terms)
    if flip is not None:     # the kept terms, in decreasing s: (e_t +- e_pi(t)) / sqrt(2) of each block's
        keep = np.argsort(-s, kind="stable")[:m]
        s = s[keep]
        U, V = (np.empty((2 * h, m)) for _ in range(2))
        for X, j in ((U, 1), (V, 2)):
            vec = np.concatenate([b[j] for _, b in blocks], axis=1)[:, keep] / math.sqrt(2.0)
            X[:h] = vec
            X[flip[:h]] = parity[keep] * vec
    return s[:m], U[:, :m] / sw[:, None], V[:, :m] / sw[:, None]


class _Model:
    """The type-space data of one setting at one size (everything that does not depend on gamma)."""

    def __init__(self, setting: Setting | RankSetting, n: int, nodes: int | tuple[int, ...] | LatentLaw | None = None):
        p = setting.p(n)
        if isinstance(nodes, LatentLaw):
            if nodes.p != p:
                raise ValueError(f"nodes: a LatentLaw of p = {nodes.p}, but the setting has p = {p} at n = {n}")
            law = nodes
        else:
            law = latent_law(setting, p, nodes)
        w = law.weight
        softmax = isinstance(setting.attention, Softmax)
        f = cast(Softmax, setting.attention).f if softmax else setting.f
        flip = _flip(law)
        if flip is None:
            H = law.shifts()
            F0, F1, S2 = shift_functions(f, 1.0, np.max(np.abs(H)) + 1.0)(H)
        else:   # the kernels at the first half of the types; the rest by the flip
            H = law.xi[:len(w) // 2] @ law.M @ law.xi.T / math.sqrt(p)
            F0, F1, S2 = (_halves(F, flip) for F in shift_functions(f, 1.0, np.max(np.abs(H)) + 1.0)(H))
        if softmax:
            # columns normalised by their means (masked softmax, book/derivation_softmax.md):
            # the uncentred mean kernel 1 + F0 = e^{beta h}, and every kernel divided on the
            # query side by d(t') = E_t[e^{beta h(t, t')}] (its square for the Wigner profile)
            F0 = 1.0 + F0
            d = w @ F0
            F0, F1, S2 = F0 / d, F1 / d, S2 / (d * d)
        self.c, self.n, self.p, self.law = setting.c, n, p, law
        self.phi = n / p
        self.pp = (p - law.r) / p                    # p'/p
        # slope kernel F1(h(t, t')) ~ sum_k s_k u_k(t) v_k(t')
        self.s, self.u, self.v = _factor(F1, w, _SLOPE_TOL, _SLOPE_MAX, flip)
        # mean kernel F0(h(t, t')) ~ sum_l S_l a_l(t) b_l(t'); with the flip its odd terms, the
        # only ones that act on the label form's odd solution (label_form)
        self.S, self.a, self.b = _factor(F0, w, _MEAN_TOL, None, flip, odd=True)
        # diagonal correction making K_ii = 0 on average
        self.delta = np.diag(F0) / math.sqrt(p) + self.pp * np.einsum("k,tk,tk->t", self.s, self.u, self.v)
        # Wigner variance profiles k(t, t') times phi and the weights of t' (they act on G(t')):
        # om(t) = phi E_t'[k(t, t') g(t')] = (phi k W g)(t) for k = sqrt(S2 S2^T), S2, S2^T, a
        # single matrix for a symmetric S2 (to rounding: the three are then one)
        same = np.max(np.abs(S2 - S2.T), initial=0.0) <= 1e-14 * np.max(S2, initial=0.0)
        self.noise = [self.phi * k * w for k in ([S2] if same else [np.sqrt(S2 * S2.T), S2, S2.T])]
        self.flip = flip

    def solve_types(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                   list[np.ndarray], np.ndarray]:
        """The data of the fixed point on the types it is solved on (:class:`_Stack`).

        With the flip ``pi`` of the types (:func:`_flip`) the fixed point is even,
        ``G(pi t) = G(t)`` (every kernel is flip invariant and each slope term even or odd, so
        the iteration keeps this from its cold start): it is solved on the first half of the
        types, at twice their weight, with the Wigner profiles folded,
        ``E_t'[k(t, t') g(t')] = sum_{t' <= T/2} w_t' (k(t, t') + k(t, pi t')) g(t')``, and the blocks of ``E_pi[R G P]`` between slope
        terms of opposite parity zero. Without the flip, on the types themselves.

        Returns
        -------
        w, delta : ndarray, shape (T',)
        u, v : ndarray, shape (T', K)
        noise : list of one or three ndarrays, shape (T', T')
            ``phi k W`` of the Wigner profiles (:meth:`__init__`) on the solved types.
        parity : ndarray, shape (K,)
            ``+-1``: ``u_k(pi t) = parity_k u_k(t)`` (all ``+1`` without the flip).

        The solved types are the first ``T'`` types (``T' = T/2`` with the flip, ``T`` without).
        """
        T = len(self.delta)
        if self.flip is None:
            return self.law.weight, self.delta, self.u, self.v, self.noise, np.ones(len(self.s))
        h, pi = T // 2, self.flip
        parity = np.where([np.array_equal(x[pi[:h]], x[:h]) for x in self.u.T], 1.0, -1.0)
        noise = [k[:h, :h] + k[:h, pi[:h]] for k in self.noise]
        return 2.0 * self.law.weight[:h], self.delta[:h], self.u[:h], self.v[:h], noise, parity


def _pad(arrays: list[np.ndarray], shape: tuple[int, ...], dtype=float) -> np.ndarray:
    """Stack ``arrays`` into one ``(len(arrays), *shape)`` array, zero-padded at the ends of each axis."""
    out = np.zeros((len(arrays), *shape), dtype=dtype)
    for i, x in enumerate(arrays):
        out[i][tuple(slice(0, k) for k in x.shape)] = x
    return out


def _rdot(left: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``left @ X`` for a real ``left`` (E or 1, m, T) and a complex ``X`` (E, T, c), shape (E, m, c):
    real GEMMs on the interleaved real and imaginary parts, one GEMM over the whole batch when
    ``left`` is shared (it is then read once, not E times)."""
    E, T, c = X.shape
    if left.shape[0] == 1:
        Xr = np.ascontiguousarray(X.transpose(1, 0, 2)).reshape(T, E * c).view(np.float64)
        Y = np.ascontiguousarray(left[0] @ Xr).view(complex)
        return Y.reshape(left.shape[1], E, c).transpose(1, 0, 2)
    return np.ascontiguousarray(left @ np.ascontiguousarray(X).view(np.float64)).view(complex)


_SHARED = ("K", "jb", "ib")  # attributes of a _Stack common to all its models


class _Stack:
    """Models of ``M`` settings on a leading axis, padded to common sizes.

    Padding adds types of zero weight (every expectation over the types ignores them; their
    ``G(t)`` is the inverse of the diagonal ``H0``), slope and mean-kernel terms with zero
    singular value and zero rows and columns of the Wigner profiles, so each model's equations
    are unchanged.

    Attributes (``E`` models, ``T`` solved types (:meth:`_Model.solve_types`), ``K`` slope terms, ``Pn = 1 + 2K``)
    ----------------------------------------------------------------------------------------------------------
    beta : ndarray, shape (E, Pn, T)
        The coefficients ``P(t)`` of ``Z^T`` (rows ``x, k, e``, columns the p-blocks
        ``u, v_k, q_k``): one entry ``beta_b(t)`` per column ``b``, in row ``jb[b]``.
    walpha, palpha : ndarray, shape (E, Pn, T)
        ``w_t alpha_b(t)`` and ``-(p'/p) alpha_b(t)``: the coefficients ``R(t)`` of ``Z`` have one
        entry ``alpha_b(t)`` per row ``b``, in column ``ib[b]`` (``x`` for the blocks ``v``,
        ``k`` for ``u`` and ``e`` for ``q``).
    jb, ib : ndarray of int, shape (Pn,)
    noise : ndarray, shape (E, 1 or 3, T, T)
        ``phi k W`` for the Wigner profiles ``k = sqrt(S2 S2^T), S2, S2^T`` (one for a
        symmetric ``S2``), folded onto the solved types.
    pmask : ndarray, shape (E, Pn, Pn)
        ``phi``, zero between slope terms of opposite parity under the flip.
    om_coef : ndarray, shape (E, 4)
        The coefficients ``-1, c, c, -c^2`` of the noise self-energies in ``Lambda(t)``.
    om_weight : ndarray, shape (E,)
        ``sqrt(types / solved types)``: the weight of the noise self-energies in the Anderson fit.
    w, y, xi, a, b : ndarray, shapes (E, T), (E, T), (E, T, r), (E, T, L), (E, T, L)
        On the solved types, for the label form: with the flip its integrands are even (``G``
        is, the mean kernel's odd terms ``a, b``, ``xi`` and ``y`` are odd), so the first half of
        the types at twice their weight gives it.
    c, phi, pp, kappa, sp : ndarray, shape (E, 1)
        ``c``, ``n/p``, ``p'/p``, ``n/sqrt(p)`` and ``sqrt(p)``.
    """

    def __init__(self, models: list[_Model] | None = None):
        if models is None:
            return
        red = [m.solve_types() for m in models]
        T = max(len(x[0]) for x in red)               # solved types, the first T' of each model
        K = max(len(m.s) for m in models)
        L = max(len(m.S) for m in models)
        r = max(m.law.r for m in models)
        E = len(models)
        Pn = 1 + 2 * K
        col = lambda x: np.array(x, dtype=float)[:, None]  # noqa: E731
        self.c, self.phi, self.pp = (col([getattr(m, k) for m in models]) for k in ("c", "phi", "pp"))
        self.kappa = col([m.n / math.sqrt(m.p) for m in models])
        self.sp = col([math.sqrt(m.p) for m in models])
        ws = _pad([x[0] for x in red], (T,))
        self.w = ws
        self.y = _pad([m.law.y[:len(x[0])] for m, x in zip(models, red)], (T,))
        self.xi = _pad([m.law.xi[:len(x[0])] for m, x in zip(models, red)], (T, r))
        self.delta = _pad([x[1] for x in red], (T,))
        s = _pad([m.s for m in models], (K,))[:, None, :]
        u = _pad([x[2] for x in red], (T, K))
        v = _pad([x[3] for x in red], (T, K))
        # zero blocks of E_pi[R G P] between slope terms of opposite parity (solve_types); the
        # Anderson fit counts each solved type's noise self-energies once per type it stands for
        sign = np.concatenate([np.ones((E, 1)), *[_pad([x[5] for x in red], (K,))] * 2], axis=1)
        mask = (sign[:, :, None] * sign[:, None, :] > 0).astype(float)
        self.om_weight = np.array([math.sqrt(len(m.delta) / len(x[0])) for m, x in zip(models, red)])
        # Z^T has rows x, k, e; Z has columns x, k, e; p-blocks (u, v_k, q_k). Both are one entry per
        # p-block in each type: P(t)[j_b, b] = beta_b(t), R(t)[b, i_b] = alpha_b(t)
        self.K = K
        beta = np.zeros((E, T, Pn))
        beta[:, :, 0] = -1.0                                       # row e: -1 in column u
        beta[:, :, 1:1 + K] = -s * u                               # row k: -s_k u_k(t) in column v_k
        beta[:, :, 1 + K:] = self.c[:, :, None] * s * v            # row x: c s_k v_k(t) in column q_k
        alpha = np.zeros((E, T, Pn))
        alpha[:, :, 0] = -1.0                                      # u = Z k
        alpha[:, :, 1:1 + K] = -v                                  # v_k = Z D_{v_k} x
        alpha[:, :, 1 + K:] = -u                                   # q_k = Z D_{u_k} e
        self.jb = np.array([2] + [1] * K + [0] * K)                # row of Z^T read by column b
        self.ib = np.array([1] + [0] * K + [2] * K)                # column of Z written by row b
        # types on the last axis (the compiled iteration's loops run over them)
        self.beta = np.ascontiguousarray(beta.transpose(0, 2, 1))
        self.palpha = np.ascontiguousarray((-self.pp[:, :, None] * alpha).transpose(0, 2, 1))   # -(p'/p) alpha_b(t)
        self.walpha = np.ascontiguousarray((ws[:, :, None] * alpha).transpose(0, 2, 1))        # w_t alpha_b(t)
        self.pmask = self.phi[:, :, None] * mask
        # the Wigner terms of Lambda(t): entries (k, x), (k, e), (x, x), (x, e) from om_0..3
        self.om_coef = np.concatenate([-np.ones_like(self.c), self.c, self.c, -self.c ** 2], axis=1)
        same = all(len(x[4]) == 1 for x in red)   # symmetric S2 in every model: one profile
        self.noise = np.stack([_pad([x[4][j % len(x[4])] for x in red], (T, T)) for j in range(1 if same else 3)],
                              axis=1)
        self.S = _pad([m.S for m in models], (L,))[:, None, :]
        self.a = _pad([m.a[:len(x[0])] for m, x in zip(models, red)], (T, L))
        self.b = _pad([m.b[:len(x[0])] for m, x in zip(models, red)], (T, L))

    @property
    def size(self) -> int:
        return self.w.shape[0]

    @property
    def npar(self) -> int:
        """``Pn = 1 + 2K``, the size of ``Gamma``."""
        return self.beta.shape[1]

    def take(self, idx: np.ndarray) -> "_Stack":
        """The models ``idx`` (one row per element of a batch; a shared model is broadcast)."""
        if self.size == 1:
            return self
        out = _Stack()
        for k, x in self.__dict__.items():
            if k not in _SHARED:
                x = x[idx]
            out.__dict__[k] = x
        return out

    def cold(self, E: int) -> np.ndarray:
        """The cold start ``Gamma = I``, ``om = 0`` for ``E`` elements, shape (E, N)."""
        Pn, T = self.npar, self.delta.shape[1]
        z = np.zeros((E, Pn * Pn + 4 * T), dtype=complex)
        z[:, :Pn * Pn:Pn + 1] = 1.0
        return z

    def label_form(self, G: np.ndarray) -> np.ndarray:
        """``E_pi[y_t x(t)]`` with the mean kernel and latent Gram kept exactly (module docstring), shape (E,).

        With the flip the mean kernel's factors are its odd terms, the only ones that act on the
        odd solution (module docstring, "Flip symmetry"); it is taken on the solved types.
        The ``(2L + r)``-system is solved in real arithmetic to first order in the complex step
        (exact to rounding): ``(I - A_r) z_r = b_r``, ``(I - A_r) z_i = b_i + A_i z_r``."""
        c, w, y, xi, kappa = self.c[:, :, None], self.w, self.y, self.xi, self.kappa[:, :, None]
        # unknowns z = (alpha = <b, x>_w, beta = <a, e>_w, omega = kappa E[xi k])
        # (x, k, e)(t) = G(t) [y_t - c kappa b(t) S beta, kappa a(t) S alpha, xi_t . omega / sqrt(p)]
        # response of (x, k, e)(t) to each unknown (E, T, 3, J), J = 2L + r: alpha enters row k,
        # beta row x, omega row e of the right-hand side
        resp = np.concatenate([G[:, :, :, 1:2] * (kappa * self.a * self.S)[:, :, None, :],
                               G[:, :, :, 0:1] * (-c * kappa * self.b * self.S)[:, :, None, :],
                               G[:, :, :, 2:3] * (xi / self.sp[:, :, None])[:, :, None, :]], axis=3)
        base = G[:, :, :, 0] * y[:, :, None]                        # (E, T, 3)
        rows = [(w[:, :, None] * self.b).transpose(0, 2, 1),        # alpha = sum_t w b(t) x(t)
                (w[:, :, None] * self.a).transpose(0, 2, 1),        # beta = sum_t w a(t) e(t)
                kappa * (w[:, :, None] * xi).transpose(0, 2, 1)]    # omega = kappa sum_t w xi(t) k(t)
        which = (0, 2, 1)                                           # the row of (x, k, e) each reads
        A = np.concatenate([_rdot(rw, resp[:, :, i, :]) for rw, i in zip(rows, which)], axis=1)
        rhs = np.concatenate([_rdot(rw, base[:, :, i, None]) for rw, i in zip(rows, which)], axis=1)
        Ar = np.eye(A.shape[1]) - A.real
        zr = np.linalg.solve(Ar, rhs.real)
        z = zr + 1j * np.linalg.solve(Ar, rhs.imag + A.imag @ zr)
        x = base[:, :, 0] + (resp[:, :, 0, :] @ z)[:, :, 0]
        return np.sum(w * y * x, axis=1)


def _anderson(st: _Stack, gamma: np.ndarray, z0: np.ndarray, max_iter: int | None = None,
              chain: np.ndarray | None = None, rows: np.ndarray | None = None):
    """Fixed points at ``gamma + i eps`` (complex step) of a batch by Anderson acceleration.

    The state ``z`` (``Gamma`` and the noise self-energies) is complex; its imaginary part divided
    by ``eps`` is the gamma-derivative. Anderson's mixing coefficients are real and fitted, per
    element, to the residuals of both parts (the imaginary part scaled by ``1/eps``), so the
    iteration solves the fixed-point equation and its tangent equation together. Each element
    iterates until it converges, in one compiled call for the batch
    (:func:`attn_lib.theory._finite_size_iteration.anderson`).

    Parameters
    ----------
    st : _Stack
        The models.
    gamma : ndarray, shape (E,)
    z0 : ndarray, shape (E, N)
        Starting states (complex: the tangent part is ``i eps dz``).
    max_iter : int, optional
        Iteration cap (default ``_MAX_ITER``).
    chain : ndarray of bool, shape (E,), optional
        Where true, an element starts from the Taylor predictor of the fixed point of the element
        before it (second order when that one is chained too), if that one converged, instead
        of ``z0``.
    rows : ndarray of int, shape (E,), optional
        The model of each element (default: one model per element, or the one model of ``st``).

    Returns
    -------
    ok : ndarray of bool, shape (E,)
    G : ndarray of complex, shape (E, T, 3, 3)
        ``G(t)`` at the fixed point, for the label form (valid where ``ok``).
    z, dz : ndarray, shape (E, N)
        The fixed point and its gamma-derivative (valid where ``ok``).
    err : ndarray, shape (E,)
        The last relative residual.
    """
    from . import _finite_size_iteration   # imports Numba on the first solve, not with attn_lib

    E, N = z0.shape
    T = st.delta.shape[1]
    eps = _STEP * gamma
    ok, err = np.zeros(E, dtype=bool), np.full(E, np.inf)
    z, G = np.zeros((E, N), dtype=complex), np.zeros((E, 9, T), dtype=complex)
    if rows is None:
        rows = np.zeros(E, dtype=np.int64) if st.size == 1 else np.arange(E, dtype=np.int64)
    chain = np.zeros(E, dtype=bool) if chain is None else chain
    C = np.ascontiguousarray
    _finite_size_iteration.anderson(gamma + 1j * eps, C(z0, dtype=complex), chain, C(rows, dtype=np.int64),
                                    C(st.c[:, 0]), C(st.delta),
                                    C(st.beta), C(st.palpha), C(st.walpha), C(st.jb), C(st.ib), C(st.pmask),
                                    C(st.om_coef), C(st.om_weight), C(st.noise),
                                    _TOL, _MAX_ITER if max_iter is None else max_iter, _MEMORY, ok, err, z, G)
    return ok, G.transpose(0, 2, 1).reshape(E, T, 3, 3), z.real.copy(), z.imag / eps[:, None], err


def _solve(st: _Stack, targets: list[np.ndarray], label: Callable[[int], str]) -> list[np.ndarray]:
    """The label form ``E_pi[y_t x(t)]`` at ``gamma + i eps`` for each model's targets.

    Continuation (module docstring of :mod:`attn_lib.theory._continuation` for the rule): each
    model follows one path from ``max(gamma_max, 10)`` (cold start) down in steps of ratio at
    most ``_MAX_RATIO`` (to its smallest target within that ratio, if any), halved in ``log gamma``
    on failure (``_MAX_ATTEMPTS`` attempts). One
    batched Anderson solve per step takes, for every model, all its targets inside the step in
    decreasing order and then the path's next point, each started from the Taylor predictor of
    the fixed point before it in that order (the path's last point for the first; second order
    once two points are known): the compiled iteration solves them in turn. The label forms of
    all targets are taken at the end, together.

    Parameters
    ----------
    st : _Stack
        ``M`` models.
    targets : list of M ndarrays
        Positive gammas of each model.
    label : callable
        ``label(m)`` names model ``m`` in a :class:`ConvergenceError`.

    Returns
    -------
    list of M complex ndarrays shaped like ``targets``.
    """
    M = st.size
    fixed: list[list[Any]] = [[None] * len(g) for g in targets]   # G(t) at each target's fixed point
    todo = [list(np.argsort(-g, kind="stable")) for g in targets]   # indices, decreasing gamma
    # cold starts at max(gamma_max, _GAMMA_COLD); those that fail start again at _GAMMA_START
    t = np.array([max(float(np.max(g)), _GAMMA_COLD) for g in targets])
    ok, Gf, z, dz, err = _anderson(st, t, st.cold(M), _COLD_ITER)
    if not np.all(ok):
        bad = np.flatnonzero(~ok)
        t[bad] = np.maximum(t[bad], _GAMMA_START)
        ok[bad], Gf[bad], z[bad], dz[bad], err[bad] = _anderson(st, t[bad], st.cold(len(bad)), None, None, bad)
    check_converged(ok, err, t, problem=_PROBLEM, label=label, reason=f"{_MAX_ITER} iterations")
    d2z = np.zeros_like(z)                                         # first order from the cold start

    def settle(m, at, value):
        """Targets of model m at ``at`` (relative 1e-15) take the fixed point there."""
        while todo[m] and targets[m][todo[m][0]] >= at * (1 - _SAME):
            fixed[m][todo[m].pop(0)] = value

    def next_goal(m):
        """The path's next point: its smallest target within the ratio ``_MAX_RATIO`` below ``t[m]``
        (a point of the path that is a target costs no extra solve), else ``t[m] / _MAX_RATIO``."""
        low = t[m] / _MAX_RATIO
        inside = [targets[m][j] for j in todo[m] if targets[m][j] >= low]
        return min(inside) if inside else low

    for m in range(M):
        settle(m, t[m], Gf[m])
    goal = np.array([next_goal(m) if todo[m] else t[m] for m in range(M)])
    attempts = np.zeros(M, dtype=int)
    while any(todo):
        paths = [m for m in range(M) if todo[m]]
        # elements: each path's targets strictly inside (goal, t), decreasing, then its next point
        owners: list[int] = []
        gams: list[float] = []
        tgt: list[int] = []
        for m in paths:
            for j in todo[m]:
                gj = targets[m][j]
                if gj <= goal[m] * (1 + _SAME):
                    break
                owners.append(m)
                gams.append(gj)
                tgt.append(j)
            owners.append(m)
            gams.append(goal[m])
            tgt.append(-1)
        owner, gam = np.array(owners), np.array(gams)
        step = (gam - t[owner])[:, None]
        z0 = (z[owner] + step * dz[owner] + 0.5 * step ** 2 * d2z[owner]
              + 1j * (_STEP * gam)[:, None] * (dz[owner] + step * d2z[owner]))
        chain = np.concatenate([[False], owner[1:] == owner[:-1]])
        ok_e, G_e, z_e, dz_e, err_e = _anderson(st, gam, z0, None, chain, owner)
        first = {}
        for e, (m, j) in enumerate(zip(owner, tgt)):
            if j < 0:
                first[m] = e
            elif ok_e[e]:
                fixed[m][j] = G_e[e]
                todo[m].remove(j)
        for m in paths:
            e = first[m]
            inside = [j for j in todo[m] if targets[m][j] > goal[m] * (1 + _SAME)]
            if ok_e[e] and not inside:               # the step succeeded
                d2z[m] = (dz_e[e] - dz[m]) / (goal[m] - t[m])
                t[m], z[m], dz[m], attempts[m] = goal[m], z_e[e], dz_e[e], 0
                settle(m, t[m], G_e[e])
                if todo[m]:
                    goal[m] = next_goal(m)
                continue
            attempts[m] += 1
            res = err_e[e] if not ok_e[e] else max(err_e[f] for f in range(len(owner))
                                                   if owner[f] == m and not ok_e[f])
            if attempts[m] >= _MAX_ATTEMPTS:
                raise not_converged(_PROBLEM, label(m), _gamma(goal[m]), float(res),
                                    f"{_MAX_ATTEMPTS} attempts at one continuation step")
            new = math.sqrt(t[m] * goal[m])
            if t[m] / new < 1 + _MIN_STEP:
                raise not_converged(_PROBLEM, label(m), _gamma(goal[m]), float(res),
                                    f"step from {_gamma(t[m])} below a relative 1e-9")
            goal[m] = new
    # the label forms of the distinct fixed points (targets settled at one point share it), together,
    # in chunks of at most _LABEL_CELLS elements x T x J
    where: dict[int, int] = {}
    whose: list[int] = []
    Gs: list[np.ndarray] = []
    for m, row in enumerate(fixed):
        for G in row:
            if id(G) not in where:
                where[id(G)] = len(Gs)
                whose.append(m)
                Gs.append(G)
    owner = np.array(whose, dtype=int)
    k = max(1, _LABEL_CELLS // (st.delta.shape[1] * max(1, 2 * st.a.shape[2] + st.xi.shape[2])))
    vals = np.concatenate([st.take(owner[i:i + k]).label_form(np.stack(Gs[i:i + k]))
                           for i in range(0, len(Gs), k)] or [np.zeros(0, dtype=complex)])
    return [vals[[where[id(G)] for G in row]] for row in fixed]


def _chunks(models: list[_Model]) -> list[list[int]]:
    """Groups of model indices of similar size, each small enough to solve as one batch."""
    size = np.array([3 * len(m.delta) ** 2 for m in models])
    order = np.argsort(size, kind="stable")
    groups: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for i in order:
        if cur and (total + size[i] > _BATCH_CELLS or size[i] > 2 * size[cur[0]]):
            groups.append(cur)
            cur, total = [], 0
        cur.append(int(i))
        total += size[i]
    return groups + [cur]


def finite_size_resolvent_form_batch(settings: Sequence[Setting | RankSetting], gammas: Sequence[np.ndarray], n: int,
                                     nodes: int | tuple[int, ...] | LatentLaw | None = None
                                     ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``y^T Q y / n`` and its gamma-derivative from the finite-size equivalent, for many settings.

    Settings are solved together in batches of similar size (:class:`_Stack`): one Anderson
    iteration advances every (setting, gamma) of a batch.

    Parameters
    ----------
    settings : sequence of Setting or RankSetting, length B
        Any settings (reduced to ``alpha = 1`` through :meth:`Setting.canonical`).
    gammas : sequence of B ndarrays
        Positive ridge parameters of each setting, any shapes (validated by the caller).
    n : int
        Number of tokens; ``p = round(c n)``.
    nodes : int, tuple of int or LatentLaw, optional
        Gauss–Hermite nodes per latent dimension (default 32, 10, 6 for ``r = 1, 2, 3``), or per
        axis of ``w_K``, ``w_Q``, ``mu`` (:func:`latent_law`); or a rule for the types of one's
        own, in the latent frame of the canonical setting, with ``law.p = setting.p(n)`` (for
        example a sample's own types, ``strong_alignment.sample_types_theory``).

    Returns
    -------
    list of B pairs ``(q, dq)`` shaped like ``gammas[b]``

    Raises
    ------
    ConvergenceError
        When a fixed point does not converge (never returns NaN).
    """
    gs = [np.asarray(g, dtype=float) for g in gammas]
    out: list[Any] = [None] * len(settings)
    with BLAS.limit(limits=1):  # small matrices: threads only cost
        models = [_Model(s.canonical(), n, nodes) for s in settings]
        for group in _chunks(models):
            label = lambda m: f"{settings[group[m]]!r}, n={n} (p={models[group[m]].p})"  # noqa: E731
            vals = _solve(_Stack([models[b] for b in group]), [gs[b].ravel() for b in group], label)
            for b, val in zip(group, vals):
                q, dq = val.real, val.imag / (_STEP * gs[b].ravel())
                for name, arr in (("q", q), ("dq", dq)):
                    if not np.all(np.isfinite(arr)):
                        raise ConvergenceError(f"non-finite finite-size label form {name} for "
                                               f"{settings[b]!r}, n={n}")
                out[b] = q.reshape(gs[b].shape), dq.reshape(gs[b].shape)
    return out


def finite_size_resolvent_form(setting: Setting, gammas: np.ndarray, n: int,
                               nodes: int | tuple[int, ...] | LatentLaw | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``y^T Q y / n`` and its gamma-derivative from the finite-size equivalent (one setting).

    Parameters
    ----------
    setting : Setting
        Any setting (reduced to ``alpha = 1`` through :meth:`Setting.canonical`).
    gammas : ndarray
        Positive ridge parameters, any shape (validated by the caller).
    n : int
        Number of tokens; ``p = round(c n)``.
    nodes : int, tuple of int or LatentLaw, optional
        Gauss–Hermite nodes per latent dimension (default 32, 10, 6 for ``r = 1, 2, 3``), or per
        axis of ``w_K``, ``w_Q``, ``mu`` (:func:`latent_law`); or a rule for the types of one's
        own, in the latent frame of the canonical setting, with ``law.p = setting.p(n)`` (for
        example a sample's own types, ``strong_alignment.sample_types_theory``).

    Returns
    -------
    q, dq : ndarray shaped like ``gammas``

    Raises
    ------
    ConvergenceError
        When the fixed point does not converge (never returns NaN).
    """
    return finite_size_resolvent_form_batch([setting], [gammas], n, nodes)[0]
