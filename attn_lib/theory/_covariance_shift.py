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

from ..model.setting import CovarianceSetting, RankSetting
from ._finite_size import reduced_setting

__all__ = ["reduced_covariance_setting"]


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
