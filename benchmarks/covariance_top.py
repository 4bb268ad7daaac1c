"""A reduced covariance model that keeps the top directions of ``B = C^{1/2} M C^{1/2}`` exactly.

Measured by ``benchmarks/real_tokens.py --part topk`` (output in
``book/derivation_covariance_output.txt``); not a library theory: on the power-law grid its
error against Monte Carlo falls with the number ``k`` of kept directions up to ``k = 4`` to ``8``
and then rises again (``book/derivation_covariance.md``, "The top directions as latent types").

The covariance limit (``attn_lib.theory._covariance``) plus the finite-size shift
``E_n(s_k) - E_lim(s_k)`` of the model ``s_k`` of :func:`top_covariance_model`: ``mu`` and the
top ``k`` singular pairs of ``B`` (and the cross vectors) kept as latent coordinates with their
exact Gaussian law, the rest an independent isotropic complement; its finite-size theory is
``attn_lib.theory._finite_size``'s solver with a type rule of its own (:func:`sobol_types`), since
the latent dimension ``r`` (up to ``2 k + 3``) exceeds the 3 of its tensor rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from attn_lib.model.data import latent_basis
from attn_lib.model.setting import CovarianceSetting, RankSetting
from attn_lib.theory import _covariance
from attn_lib.theory._finite_size import LatentLaw, finite_size_resolvent_form_batch


def sobol_types(r: int, types: int, seed: int = 0) -> np.ndarray:
    r"""Standard Gaussian quasi-Monte Carlo points for half of a flip-symmetric rule of ``types`` types.

    ``zeta_i = Phi^{-1}(u_i)`` (componentwise) for the ``types / 2`` points ``u_i`` of a
    scrambled Sobol sequence in ``[0, 1)^r`` (:class:`scipy.stats.qmc.Sobol`, seeded): a rule
    whose size does not grow with ``r`` (a tensor rule's does), with an error decreasing like
    ``types^{-1}`` up to logarithms for smooth integrands.

    Parameters
    ----------
    r : int
        Dimension, at least 1.
    types : int
        ``2^j`` for an integer ``j >= 2``.
    seed : int, optional
        Seed of the scrambling.

    Returns
    -------
    ndarray, shape (types // 2, r)

    Raises
    ------
    ValueError
        For ``r < 1`` or ``types`` not a power of two of at least 4.
    """
    from scipy.stats import norm, qmc

    if not (isinstance(types, (int, np.integer)) and types >= 4 and types & (types - 1) == 0):
        raise ValueError(f"types must be a power of two >= 4, got {types!r}")
    if not (isinstance(r, (int, np.integer)) and r >= 1):
        raise ValueError(f"r must be a positive integer, got {r!r}")
    u = qmc.Sobol(d=int(r), scramble=True, seed=seed).random_base2(int(types).bit_length() - 2)
    return cast(np.ndarray, norm.ppf(u))


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
        ``zeta`` of :func:`sobol_types` (``types`` a power of two),
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
        The rule of :func:`sobol_types`.

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
