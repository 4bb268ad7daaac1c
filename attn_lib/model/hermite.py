"""Hermite coefficients of the attention nonlinearity under the standard Gaussian.

For ``xi ~ N(0, 1)`` and an entry-wise function ``f`` the model only sees

* ``a0 = E[f(xi)]`` (removed: the library always uses the centred ``f - a0``),
* ``a1 = E[xi f(xi)]``,
* ``a2 = E[(xi^2 - 1) f(xi)] / sqrt(2)``,
* ``nu = E[(f(xi) - a0)^2]``,

and ``b2 = nu - a1^2``, the variance of the part of ``f`` that is not linear, which becomes an
independent Wigner matrix in the linearised kernel.

The expectations are computed by adaptive Gauss–Kronrod quadrature (:func:`scipy.integrate.quad`)
of ``g(x) phi(x)`` on the pieces between the kinks and jumps of ``f``; registered names declare
their break points (:attr:`attn_lib.model.nonlinearity.Nonlinearity.breaks`), so kinks (ReLU)
and jumps (sign) are integrated to full precision (better than 1e-12). An arbitrary callable is integrated on ``(-inf, -8], [-8, 8], [8, inf)``
with a fine adaptive subdivision, and a :class:`ValueError` is raised when the estimated error
exceeds ``1e-8``.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import integrate

from .._validation import check_real
from .nonlinearity import NonlinearityLike, check_nonlinearity

_TOL = 1e-8  # largest accepted quadrature error estimate for arbitrary callables


@dataclass(frozen=True)
class Hermite:
    """Gaussian Hermite data of a nonlinearity ``f`` (see the module docstring).

    Attributes
    ----------
    a0, a1, a2, nu : float
        ``E f``, ``E[xi f]``, ``E[(xi^2-1) f]/sqrt(2)`` and ``Var f`` for ``xi ~ N(0, 1)``.
    """

    a0: float
    a1: float
    a2: float
    nu: float

    @property
    def b2(self) -> float:
        """``nu - a1^2 >= 0``: variance of the non-linear part (clipped at 0 for rounding)."""
        return max(self.nu - self.a1 ** 2, 0.0)


def _gauss_expect(g: Callable[[float], float], breaks: tuple[float, ...], strict: bool) -> float:
    """``E[g(xi)]``, ``xi ~ N(0,1)``, integrating ``g * phi`` piecewise between ``breaks``."""
    pts = sorted(set(breaks) | ({-8.0, 8.0} if not breaks else set()))
    edges = [-np.inf, *pts, np.inf]
    total, err = 0.0, 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        for lo, hi in zip(edges[:-1], edges[1:]):
            val, e = integrate.quad(lambda x: g(x) * np.exp(-0.5 * x * x), lo, hi,
                                    epsabs=1e-14, epsrel=1e-13, limit=500)
            total += val
            err += e
    norm = np.sqrt(2.0 * np.pi)
    if strict and err / norm > _TOL:
        raise ValueError(f"f: Gaussian quadrature did not converge (estimated error {err / norm:.2e} "
                         f"> {_TOL:g}); pass a smoother or bounded function")
    return total / norm


def coefficients(f: NonlinearityLike, scale: float = 1.0) -> Hermite:
    """Hermite coefficients of ``t -> f(scale * t)`` under ``N(0, 1)``.

    Parameters
    ----------
    f : str, callable or Nonlinearity
        See :func:`attn_lib.model.nonlinearity.check_nonlinearity`.
    scale : float, default 1.0
        Positive factor applied to the argument; used for a full weight part ``alpha I``
        (``f(alpha t)``).

    Returns
    -------
    Hermite
        ``a0, a1, a2, nu`` with ``a1, a2, nu`` those of the centred ``f - a0``.

    Examples
    --------
    >>> h = coefficients("relu")
    >>> round(h.a1, 12), round(h.nu, 12)
    (0.5, 0.340845056908)
    """
    scale = check_real(scale, "scale", low=0.0, low_open=True)
    check_nonlinearity(f)
    try:
        return _coefficients(f, scale)
    except TypeError:  # an unhashable callable: no caching
        return _coefficients.__wrapped__(f, scale)


@functools.lru_cache(maxsize=256)
def _coefficients(f: NonlinearityLike, scale: float) -> Hermite:
    func = check_nonlinearity(f)
    strict = not isinstance(f, str)

    def fs(x: float) -> float:
        return float(np.asarray(func(np.array([scale * x])), dtype=float)[0])

    br = tuple(b / scale for b in func.breaks)
    a0 = _gauss_expect(fs, br, strict)
    a1 = _gauss_expect(lambda x: x * fs(x), br, strict)
    a2 = _gauss_expect(lambda x: (x * x - 1.0) * fs(x), br, strict) / np.sqrt(2.0)
    nu = _gauss_expect(lambda x: (fs(x) - a0) ** 2, br, strict)
    return Hermite(a0=float(a0), a1=float(a1), a2=float(a2), nu=float(nu))


def centered(f: NonlinearityLike, scale: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """The centred, rescaled nonlinearity ``t -> f(scale t) - a0`` as a vectorised callable."""
    func = check_nonlinearity(f)
    a0 = coefficients(f, scale).a0
    if scale == 1.0:
        return lambda t: np.asarray(func(t), dtype=float) - a0
    return lambda t: np.asarray(func(scale * np.asarray(t)), dtype=float) - a0
