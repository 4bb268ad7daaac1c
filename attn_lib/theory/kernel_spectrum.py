r"""Limiting eigenvalue density of the attention kernel ``K`` (``n x n``).

Off its finite-rank parts, the linearised kernel is ``a1 (S - I) + sqrt(b2) W / sqrt(p)`` with
``S = Z^T Z / p`` (Marchenko–Pastur with ratio ``phi = 1/c``) and an independent Wigner matrix
``W`` whose semicircle has variance ``sigma^2 = b2 n / p = b2 / c``. The two are asymptotically
free, so the Stieltjes transform ``m(z) = int d mu_K(x) / (x - z)`` solves the subordination
equation of a free convolution with a semicircle,

    m(z) = m_A(z + sigma^2 m(z)),     m_A(z) = m_MP(1 + z / a1) / a1,

where ``m_A`` is the transform of ``a1 (S - I)`` (for ``a1 = 0``, ``m_A(z) = -1/z`` and ``K`` is a
pure semicircle). The density is ``Im m(x + i 0) / pi``. The signal and the weights only add
finitely many outlier eigenvalues, which do not change the density.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_setting
from ..model.setting import Setting
from . import marchenko_pastur as mp


def _m_shifted_mp(z: np.ndarray, a1: float, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Stieltjes transform of ``a1 (S - I)`` and its derivative (``-1/z``, ``1/z^2`` if ``a1 = 0``)."""
    if a1 == 0.0:
        return -1.0 / z, 1.0 / z ** 2
    w = 1.0 + z / a1
    m = mp.stieltjes(w, c)
    return m / a1, mp.stieltjes_derivative(w, c, m) / a1 ** 2


def kernel_density(setting: Setting, x: object, *, eta: float = 1e-6, tol: float = 1e-12,
                   max_iter: int = 200) -> np.ndarray:
    """Limiting eigenvalue density of ``K`` at the points ``x`` (see the module docstring).

    Parameters
    ----------
    setting : Setting
        Only ``c`` and the Hermite data ``a1``, ``b2`` of ``f(alpha .)`` enter.
    x : array_like of shape (N,)
        Real points.
    eta : float, default 1e-6
        Imaginary part at which the transform is evaluated.
    tol, max_iter
        Convergence of the safeguarded Newton iteration on ``m - m_A(z + sigma^2 m) = 0``, run
        with continuation from ``x + i`` down to ``x + i eta``.

    Returns
    -------
    ndarray of shape (N,)
        Density values (they integrate to 1 when there is no atom).

    Raises
    ------
    RuntimeError
        If the iteration does not converge, with the last residual.
    """
    check_setting(setting)
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("x must be a finite 1-D array")
    h = setting.hermite
    a1, s2 = h.a1, h.b2 / setting.c
    m = np.full(x.shape, 1j)
    for level in np.geomspace(1.0, eta, 25):  # each level warm-starts the next, smaller one
        z = x + 1j * level
        for _ in range(max_iter):
            mA, dmA = _m_shifted_mp(z + s2 * m, a1, setting.c)
            F = m - mA
            step = F / (1.0 - s2 * dmA)
            new = m - step
            # stay on the Stieltjes branch (Im m > 0); otherwise take a damped fixed-point step
            bad = ~np.isfinite(new) | (new.imag <= 0)
            new[bad] = 0.5 * (m[bad] + mA[bad])
            m = new
            res = np.max(np.abs(F))
            if res < tol:
                break
        else:
            raise RuntimeError(f"kernel_density did not converge for {setting} at eta={level:g}: "
                               f"last residual {res:.2e} after {max_iter} iterations")
    return np.maximum(m.imag, 0.0) / np.pi
