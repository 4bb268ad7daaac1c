r"""Deterministic equivalent of the ridge (linear regression) interpolation error.

Derivation (used by the book's "Deterministic equivalent" chapter)
------------------------------------------------------------------
With ``Phi = X = mu y^T + Z`` and ``S_x = X^T X / p`` we have ``X^T X / n = c S_x``, so

    y^T (X^T X / n + gamma)^{-1} y / n = (1/c) yh^T (S_x - z)^{-1} yh,   z = -gamma / c,

with the unit vector ``yh = y / sqrt(n)``. Expanding ``X^T X`` shows that ``S_x`` is the noise
Gram matrix ``S = Z^T Z / p`` plus a rank-two perturbation,

    S_x = S + U C U^T,   U = [yh, e],   e = Z^T mu / sqrt(p),
    C = [[snr / c, 1 / sqrt(c)], [1 / sqrt(c), 0]].

Woodbury with ``R = (S - z)^{-1}`` gives
``yh^T (S_x - z)^{-1} yh = yh^T R yh - yh^T R U (C^{-1} + U^T R U)^{-1} U^T R yh``.
By the isotropic Marchenko–Pastur law ``yh^T R yh -> m(z)`` (``yh`` is independent of ``Z``),
``e^T R e -> snr (1 + z m~(z))`` (because ``Z R Z^T / p = I + z (Z Z^T/p - z)^{-1}``), and
``yh^T R e -> 0`` (it changes sign with ``Z -> -Z``). With ``C^{-1} = [[0, sqrt c], [sqrt c, -snr]]``
the 2x2 algebra collapses to

    q(z) = m(z) / (1 - snr z m(z) m~(z) / c).

The error is a derivative: ``E(gamma) = gamma^2 y^T Q^2 y / n = -gamma^2 d/dgamma [q(-gamma/c)/c]
= (gamma / c)^2 q'(-gamma/c)``, evaluated in closed form from ``m'`` (no finite differences).

Checks: ``snr = 0`` gives ``(gamma/c)^2 m'(-gamma/c)``; as ``gamma -> 0`` with ``c < 1`` the error
tends to ``(1 - c)/(1 + snr)`` (the part of ``y`` outside the row space of ``X``), and to 0 for
``c > 1``; as ``gamma -> inf`` it tends to 1.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_bool, check_gammas, check_setting
from ..model.scale import feature_scale
from ..model.setting import CovarianceSetting, Entrywise, HeadsSetting, MatrixSetting, RankSetting, Setting, Softmax
from . import _covariance
from . import marchenko_pastur as mp


def ridge_resolvent_form(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, z: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """``q(z)`` and ``q'(z)``, the limit of ``yh^T (X^T X / p - z)^{-1} yh`` and its derivative.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        Only ``c`` and ``snr`` enter.
    z : ndarray
        Points off the spectrum (for example ``-gamma / c``).
    """
    c, s = setting.c, setting.snr
    phi = 1.0 / c
    m = mp.stieltjes(z, c)
    dm = mp.stieltjes_derivative(z, c, m)
    A = phi * z * m + phi - 1.0            # z m~(z)
    dA = phi * (m + z * dm)
    den = 1.0 - (s / c) * m * A
    q = m / den
    dq = (dm * den + m * (s / c) * (dm * A + m * dA)) / den ** 2
    return q, dq


def ridge_error(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: object, *,
                relative: bool = False) -> np.ndarray:
    """Deterministic equivalent of the ridge interpolation error.

    ``E(gamma) = gamma^2 y^T (X^T X / n + gamma I)^{-2} y / n -> (gamma/c)^2 q'(-gamma/c)``
    with ``q(z) = m(z) / (1 - snr z m(z) m~(z) / c)`` (see the module docstring).

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting, CovarianceSetting or HeadsSetting
        Only ``c`` and ``snr`` enter (for a :class:`~attn_lib.model.setting.CovarianceSetting`
        ``c``, ``mu`` and the covariance ``C``: :func:`attn_lib.theory._covariance.ridge_form`,
        the standard equivalent); the nonlinearity, the weights (rank one, rank ``r``, a
        general matrix ``M`` or the heads) and the attention kind (entry-wise or softmax) do not: ridge
        regresses on the tokens ``Phi = X`` themselves, so a softmax setting has the ridge error
        of its entry-wise twin at the same raw ``gamma``.
    gammas : float or array_like of shape (G,)
        Positive ridge parameters (ridge's ``gamma`` is the same in every convention: its
        features ``X`` have no softmax scale).
    relative : bool, default False
        Read ``gammas`` as ``g = gamma / tau`` with ridge's ``tau = c`` (``c tr(C) / p`` for a
        covariance, :func:`attn_lib.model.scale.feature_scale`): the error at ``tau g``
        (the book's equal-``gamma / tau`` comparison, as ``attention_error(..., relative=True)``).

    Returns
    -------
    ndarray shaped like ``gammas``, values in ``[0, 1]``.
    """
    check_setting(setting, types=(Setting, RankSetting, MatrixSetting, HeadsSetting),
                  attention=(Entrywise, Softmax))
    g = check_gammas(gammas)
    if check_bool(relative, "relative"):
        g = feature_scale(setting, "ridge") * g
    if isinstance(setting, CovarianceSetting):
        return _covariance.ridge_form(setting.c, setting.mu, setting.spectrum, g.reshape(-1))[1].reshape(g.shape)
    z = -g / setting.c
    _, dq = ridge_resolvent_form(setting, z)
    out = z ** 2 * dq
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(f"ridge_error produced non-finite values for {setting} at "
                                 f"gammas {g[~np.isfinite(out)]}")
    return out
