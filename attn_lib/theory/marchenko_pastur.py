"""Marchenko–Pastur tools for the ``n x n`` Gram matrix ``S = Z^T Z / p`` (``Z`` is ``p x n``).

With ``c = p/n`` and ``phi = 1/c = n/p``, the eigenvalue law of ``S`` tends to the
Marchenko–Pastur law with ratio ``phi``: edges ``lambda_pm = (1 +- sqrt(phi))^2``, density
``sqrt((lambda_+ - x)(x - lambda_-)) / (2 pi phi x)`` on ``[lambda_-, lambda_+]`` and an atom of
mass ``(1 - c)^+`` at zero. Its Stieltjes transform ``m(z) = int d mu(x) / (x - z)`` is the root of

    phi z m^2 - (1 - phi - z) m + 1 = 0

with ``Im m > 0`` for ``Im z > 0`` (equivalently ``m(z) -> -1/z`` at infinity); the companion
transform of the ``p x p`` matrix ``Z Z^T / p`` is ``m~(z) = phi m(z) + (phi - 1)/z``.
"""

from __future__ import annotations

import numpy as np


def edges(c: float) -> tuple[float, float]:
    """Support edges ``((1 - sqrt(phi))^2, (1 + sqrt(phi))^2)`` with ``phi = 1/c``."""
    r = np.sqrt(1.0 / c)
    return (1.0 - r) ** 2, (1.0 + r) ** 2


def stieltjes(z: np.ndarray | complex, c: float) -> np.ndarray:
    """Stieltjes transform ``m(z)`` of the law of ``Z^T Z / p`` at ``z`` off the support.

    Parameters
    ----------
    z : complex or ndarray
        Points of ``C`` outside ``[lambda_-, lambda_+] ∪ {0}``; real ``z < 0`` returns real values.
    c : float
        ``p/n > 0``.

    Returns
    -------
    ndarray (complex; real when ``z`` is real) shaped like ``z``.

    Notes
    -----
    ``m = (a + sqrt(z - lambda_-) sqrt(z - lambda_+)) / (2 phi z)`` with ``a = 1 - phi - z`` and
    principal square roots (their product selects the right branch off the support). Since the
    two roots multiply to ``1/(phi z)``, the same value is ``2 / (a - sqrt(...) sqrt(...))``; the
    form with the larger denominator is used, which avoids cancellation.
    """
    z = np.asarray(z)
    real = not np.iscomplexobj(z)
    zc = z.astype(complex)
    phi = 1.0 / c
    lo, hi = edges(c)
    sq = np.sqrt(zc - lo) * np.sqrt(zc - hi)
    a = 1.0 - phi - zc
    plus, minus = a + sq, a - sq
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(np.abs(plus) >= np.abs(minus), plus / (2.0 * phi * zc), 2.0 / minus)
    return m.real if real else m


def stieltjes_derivative(z: np.ndarray | complex, c: float, m: np.ndarray | None = None) -> np.ndarray:
    """``m'(z)``, from differentiating ``phi z m^2 - (1 - phi - z) m + 1 = 0``:

    ``m' = -(phi m^2 + m) / (2 phi z m - (1 - phi - z))``.
    """
    z = np.asarray(z)
    phi = 1.0 / c
    if m is None:
        m = stieltjes(z, c)
    return -(phi * m * m + m) / (2.0 * phi * z * m - (1.0 - phi - z))


def companion(z: np.ndarray | complex, c: float, m: np.ndarray | None = None) -> np.ndarray:
    """Companion transform ``m~(z) = phi m(z) + (phi - 1)/z`` of ``Z Z^T / p``."""
    z = np.asarray(z)
    phi = 1.0 / c
    if m is None:
        m = stieltjes(z, c)
    return phi * m + (phi - 1.0) / z


def density(x: np.ndarray, c: float) -> np.ndarray:
    """Absolutely continuous part of the Marchenko–Pastur density at ``x`` (the atom excluded)."""
    x = np.asarray(x, dtype=float)
    phi = 1.0 / c
    lo, hi = edges(c)
    inside = (x > lo) & (x < hi)
    out = np.zeros_like(x)
    xi = x[inside]
    out[inside] = np.sqrt((hi - xi) * (xi - lo)) / (2.0 * np.pi * phi * xi)
    return out


def atom(c: float) -> float:
    """Mass ``(1 - c)^+`` of the eigenvalue law at zero."""
    return max(1.0 - c, 0.0)
