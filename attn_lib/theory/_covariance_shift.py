r"""The reduced finite-size model of tokens with a covariance (the covariance theory's shift).

The covariance theory (:mod:`attn_lib.theory._covariance`) is a proportional limit. Its
finite-size version (``attention_error(CovarianceSetting, gammas, n=n)``) is that limit plus
the finite-size shift ``E_n(s_B) - E_lim(s_B)`` of an isotropic rank-``<= 3`` model ``s_B``
(:func:`reduced_covariance_setting`), in the spirit of the reduced model of any matrix
(:func:`~attn_lib.theory._finite_size.reduced_setting`; ``book/derivation_covariance.md``,
"Finite size").

The logits of ``x_i = y_i mu + R z_i`` (``R = C^{1/2}``) split exactly into

    sqrt(p) T_ij = y_i y_j mu^T M mu + y_i a^T z_j + y_j b^T z_i + z_i^T (R M R) z_j,

``a = R M^T mu``, ``b = R M mu``: the coherent shift, two cross terms (latent coordinates of
order one when ``|a|^2 / p`` is) and the noise logits of variance ``sigma^2 = tr(C M C M^T) / p``.
Isotropic tokens ``y_i m + z_i`` with a matrix ``A`` have the same parts with ``m^T A m``,
``A^T m``, ``A m`` and ``A``. ``s_B`` is the isotropic model with ``|m|^2 = ||mu||^2`` (the
features' signal, ``snr``), ``m^T A m = mu^T M mu``, the Gram matrix of ``(A^T m, A m)`` equal to
that of ``(a, b)``, and the noise logit variance ``||A||_F^2 / p = sigma^2``; its block on the
kept directions off ``m`` is ``alpha_b I``. It neglects the spread of the tokens' own logit
scales ``|M R z_i|^2 / p`` (of relative size :func:`~attn_lib.model.setting.scale_spread`;
large for a covariance of small effective rank) and the features' covariance in the shift.
"""

from __future__ import annotations

import math

import numpy as np

from dataclasses import dataclass

from ..model.data import latent_basis
from ..model.setting import CovarianceSetting, RankSetting
from . import _covariance
from ._finite_size import LatentLaw, finite_size_resolvent_form_batch, reduced_setting, sobol_types

__all__ = ["reduced_covariance_setting", "TopModel", "top_covariance_model", "top_covariance_shift"]


def reduced_covariance_setting(setting: CovarianceSetting, n: int) -> RankSetting:
    r"""The isotropic rank-``<= 3`` model ``s_B`` of a covariance setting's finite-size shift.

    In coordinates ``e_0, e_1, e_2`` (module docstring): ``m = sqrt(snr) e_0`` and ``A`` with the
    first row ``a_B / sqrt(snr)``, the first column ``b_B / sqrt(snr)``,

        a_B = (d, a_1, 0),   b_B = (d, b_1, b_2),   d = mu^T M mu / sqrt(snr),
        a_1^2 = |a|^2 - d^2,  a_1 b_1 = a^T b - d^2,  b_2^2 = |b|^2 - d^2 - b_1^2

    (each clipped at zero), ``alpha_b`` on the rest of the diagonal, ``alpha_b^2 (p - 1) =
    p sigma^2 - (sum of the first row's and column's squares)``. Returned as
    :func:`~attn_lib.theory._finite_size.reduced_setting` of that ``p x p`` isotropic matrix
    setting (a :class:`~attn_lib.model.setting.RankSetting` in the kept span, same ``c``, ``f``,
    attention kind).

    Parameters
    ----------
    setting : CovarianceSetting
    n : int
        Number of tokens (``setting.p(n)`` checks it against ``p``).

    Returns
    -------
    RankSetting

    Raises
    ------
    ValueError
        For ``mu = 0`` (no signal: nothing to keep), or when the first row and column carry the
        whole logit variance (``alpha_b^2 <= 0``).
    """
    p = setting.p(n)
    mu, M, R = setting.mu, setting.M, setting.noise_factor
    snr = float(mu @ mu)
    if not snr > 0.0:
        raise ValueError("setting: mu = 0; the reduced covariance model keeps the class means, "
                         "and without them the covariance limit needs no shift")
    a, b = R @ (M.T @ mu), R @ (M @ mu)
    s = math.sqrt(snr)
    d = float(mu @ M @ mu) / s
    a1 = math.sqrt(max(float(a @ a) - d * d, 0.0))
    b1 = (float(a @ b) - d * d) / a1 if a1 > 0.0 else 0.0
    b2 = math.sqrt(max(float(b @ b) - d * d - b1 * b1, 0.0))
    row, col = np.array([d, a1, 0.0]) / s, np.array([d, b1, b2]) / s
    rest = p * setting.logit_scale ** 2 - float(row @ row) - float(col[1:] @ col[1:])
    if not rest > 0.0:
        raise ValueError(f"setting: the cross terms |a|^2 = {a @ a:.3g}, |b|^2 = {b @ b:.3g} "
                         f"carry the whole logit variance p sigma^2 = {p * setting.logit_scale ** 2:.3g}; "
                         "the reduced covariance model needs a bulk")
    alpha = math.sqrt(rest / (p - 1))
    # A = alpha I + W_K^T W_Q, the low-rank part on e_0..e_2 (no p x p matrix)
    A3 = alpha * np.eye(3)
    A3[0, :], A3[:, 0] = row, col
    U, sv, Vt = np.linalg.svd(A3 - alpha * np.eye(3))
    root = np.sqrt(sv)
    sA = RankSetting.from_vectors(setting.c, np.array([s, 0.0, 0.0]), (U * root).T, root[:, None] * Vt,
                                  f=setting.f, alpha=alpha, attention=setting.attention)
    return reduced_setting(sA, n)


@dataclass(frozen=True)
class TopModel:
    r"""The reduced model of a covariance setting that keeps the top directions of ``B`` exactly.

    Built by :func:`top_covariance_model`: tokens ``x = (xi, x_perp)`` in an orthonormal basis
    ``(O, O_perp)`` of ``R^p``, ``xi ~ y mu_r + N(0, Sigma_r)`` (``r`` latent coordinates,
    exactly the covariance setting's marginal law) and an independent isotropic complement
    ``x_perp ~ N(0, v I_{p - r})``, with the matrix ``diag(M_r, alpha I)``.

    Attributes
    ----------
    limit : CovarianceSetting
        The same model as a covariance setting, for its proportional limit:
        ``C_k = diag(Sigma_r, v I)``, ``M_k = diag(M_r, alpha I)``, ``mu_k = (mu_r, 0)``.
    solver : RankSetting
        ``c``, ``f``, the attention kind and the complement's matrix ``v alpha I`` of the model
        in units of ``sqrt(v)`` (a unit complement, as the finite-size solver takes it); its
        vectors are not read (the types are :meth:`law`'s).
    mu_r : ndarray, shape (r,)
    root : ndarray, shape (r, r)
        ``Sigma_r^{1/2}`` (symmetric).
    M_r : ndarray, shape (r, r)
    v, alpha : float
    """

    limit: CovarianceSetting
    solver: RankSetting
    mu_r: np.ndarray
    root: np.ndarray
    M_r: np.ndarray
    v: float
    alpha: float

    def law(self, n: int, types: int, seed: int = 0) -> LatentLaw:
        """Its types for the finite-size solver, in units of ``sqrt(v)`` and canonical.

        ``xi = +-(mu_r + Sigma_r^{1/2} zeta) / sqrt(v)`` (labels ``+-1``) with the points
        ``zeta`` of :func:`~attn_lib.theory._finite_size.sobol_types` (``types`` a power of two),
        flip-symmetric, and the matrix ``M_r / alpha`` (the complement's ``v alpha I`` divided
        out, as :meth:`RankSetting.canonical` does with ``f``)."""
        zeta = sobol_types(len(self.mu_r), types, seed)
        xi = (self.mu_r + zeta @ self.root) / math.sqrt(self.v)
        return LatentLaw(xi=np.concatenate([xi, -xi]), y=np.repeat([1.0, -1.0], types // 2),
                         weight=np.full(types, 1.0 / types), M=self.M_r / self.alpha, p=self.solver.p(n))


def top_covariance_model(setting: CovarianceSetting, n: int, top: int) -> TopModel:
    r"""The reduced model that keeps ``mu`` and the ``top`` leading directions of ``B = R M R`` exactly.

    With ``U S V^T`` the SVD of ``B`` (``R = C^{1/2}``), the kept noise directions are the span
    ``P`` of ``u_1..u_top, v_1..v_top`` and of the cross vectors ``a = R M^T mu``,
    ``b = R M mu``; the kept token directions the orthonormal basis ``O`` of
    ``span(mu, R P)`` (``r <= 2 top + 3`` columns). The model (:class:`TopModel`) keeps the
    latent coordinates ``xi = O^T x`` with their exact law ``N(y O^T mu, O^T C O)`` and
    ``M_r = O^T M O``, and replaces the rest by an independent isotropic complement of the same
    feature variance and noise logit variance:

        v = tr(Pi C) / (p - r),   alpha^2 = tr(C_perp M_perp C_perp M_perp^T) / (v^2 (p - r)),

    ``Pi = I - O O^T``, ``C_perp = Pi C Pi``, ``M_perp = Pi M Pi``. It neglects the covariance
    between ``xi`` and the rest (zero when ``C`` commutes with ``O O^T``, e.g. a diagonal ``C``
    and ``M = I``), the blocks of ``M`` between them, and the spread of the rest's spectrum.

    Parameters
    ----------
    setting : CovarianceSetting
        Entry-wise attention.
    n : int
        Number of tokens (``p = setting.p(n)``).
    top : int
        Leading singular pairs of ``B`` kept, ``0 <= top`` and ``2 top + 3 < p``.

    Returns
    -------
    TopModel

    Raises
    ------
    ValueError
        For ``top`` out of range, or a complement without variance (``v`` or ``alpha`` zero).
    """
    p = setting.p(n)
    if not (isinstance(top, (int, np.integer)) and top >= 0 and 2 * top + 3 < p):
        raise ValueError(f"top must be an integer with 0 <= top and 2 top + 3 < p = {p}, got {top!r}")
    mu, M, R = setting.mu, setting.M, setting.noise_factor
    C = R @ R
    U, _, Vt = np.linalg.svd(R @ M @ R)
    P = latent_basis(np.column_stack([U[:, :top], Vt[:top].T, R @ (M.T @ mu), R @ (M @ mu)]))[0]
    Ob = latent_basis(np.column_stack([mu, R @ P]))[0]         # O, (p, r)
    r = Ob.shape[1]
    Pi = np.eye(p) - Ob @ Ob.T
    Cp, Mp = Pi @ C @ Pi, Pi @ M @ Pi
    v = float(np.trace(Cp)) / (p - r)
    var = float(np.sum((Cp @ Mp) * (Cp @ Mp.T).T))           # tr(C_perp M_perp C_perp M_perp^T)
    if not (v > 0.0 and var > 0.0):
        raise ValueError(f"setting: no variance outside the {r} kept directions (v = {v:.3g}, "
                         f"logit variance {var:.3g}); the top-direction model needs a complement")
    alpha = math.sqrt(var / (v * v * (p - r)))
    Sigma, M_r, mu_r = Ob.T @ C @ Ob, Ob.T @ M @ Ob, Ob.T @ mu
    lam, E = np.linalg.eigh((Sigma + Sigma.T) / 2.0)
    root = (E * np.sqrt(np.clip(lam, 0.0, None))) @ E.T
    Ck, Mk = np.zeros((p, p)), np.zeros((p, p))
    Ck[:r, :r], Mk[:r, :r] = Sigma, M_r
    Ck[r:, r:], Mk[r:, r:] = v * np.eye(p - r), alpha * np.eye(p - r)
    limit = CovarianceSetting(c=setting.c, M=Mk, mu=np.r_[mu_r, np.zeros(p - r)], f=setting.f, C=Ck,
                              attention=setting.attention)
    solver = RankSetting.from_vectors(setting.c, np.ones(1), np.zeros((1, 1)), np.zeros((1, 1)), f=setting.f,
                                      alpha=v * alpha, attention=setting.attention)
    return TopModel(limit=limit, solver=solver, mu_r=mu_r, root=root, M_r=M_r, v=v, alpha=alpha)


def top_covariance_shift(setting: CovarianceSetting, gammas: np.ndarray, n: int, top: int,
                         types: int = 4096, seed: int = 0) -> np.ndarray:
    r"""The finite-size shift of the error, ``E_n(s_k) - E_lim(s_k)``, of the top-direction model.

    ``s_k = top_covariance_model(setting, n, top)``; ``E_lim`` its covariance limit
    (:func:`attn_lib.theory._covariance.setting_form` of ``s_k.limit``), ``E_n`` the finite-size
    theory of its types (:meth:`TopModel.law`, ``types`` quasi-Monte Carlo types) in units of
    ``sqrt(v)``, where the features are ``X / sqrt(v)``: ``E_n(gamma) = E_n^{(v)}(gamma / v)``
    (``Q^{(v)}(gamma) = v Q(v gamma)``), ``E = -gamma^2 dq``.

    Parameters
    ----------
    setting : CovarianceSetting
    gammas : ndarray
        Positive ridge parameters (raw, not relative), any shape.
    n : int
    top : int
        As for :func:`top_covariance_model`.
    types, seed : int, optional
        The rule of :func:`~attn_lib.theory._finite_size.sobol_types`.

    Returns
    -------
    ndarray shaped like ``gammas``
    """
    g = np.asarray(gammas, dtype=float)
    model = top_covariance_model(setting, n, top)
    _, E_lim = _covariance.setting_form(model.limit, g.reshape(-1))
    gs = g / model.v
    (_, dq), = finite_size_resolvent_form_batch([model.solver], [gs], n, nodes=model.law(n, types, seed))
    return -gs ** 2 * dq - E_lim.reshape(g.shape)
