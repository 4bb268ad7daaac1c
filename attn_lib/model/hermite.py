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
and jumps (sign) are integrated to full precision (better than 1e-12). The centred exponential
``f_beta`` of softmax attention (:class:`~attn_lib.model.nonlinearity.Exponential`) has closed
forms instead (:func:`exponential_coefficients`), and a growing ``f`` gives no NaN: where the
Gaussian weight underflows the integrand is zero. An arbitrary callable is integrated on ``(-inf, -8], [-8, 8], [8, inf)``
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
from .nonlinearity import Exponential, Nonlinearity, NonlinearityLike, check_nonlinearity

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

    def weighted(x: float) -> float:
        # beyond |x| ~ 38.6 the weight underflows to 0: g is not evaluated there, so a growing
        # g (exp(beta t) overflows near t = 709 / beta) gives 0, not inf * 0 = NaN
        w = np.exp(-0.5 * x * x)
        return 0.0 if w == 0.0 else g(x) * w

    total, err = 0.0, 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        for lo, hi in zip(edges[:-1], edges[1:]):
            val, e = integrate.quad(weighted, lo, hi, epsabs=1e-14, epsrel=1e-13, limit=500)
            total += val
            err += e
    norm = np.sqrt(2.0 * np.pi)
    if not np.isfinite(total):
        raise ValueError("f: the Gaussian expectation is not finite (f grows too fast where the "
                         "Gaussian weight is still positive, |t| < 38)")
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


def exponential_coefficients(beta: float, scale: float = 1.0) -> Hermite:
    r"""Closed-form Hermite data of ``t -> f_beta(scale t)``, ``f_beta(t) = e^{beta t - beta^2/2} - 1``.

    With ``b = beta scale`` and ``E[He_k(xi) e^{b xi}] = b^k e^{b^2/2}``:

    * ``a0 = e^{(b^2 - beta^2)/2} - 1``,
    * ``a_k = e^{(b^2 - beta^2)/2} b^k / sqrt(k!)`` (``k = 1, 2``),
    * ``nu = e^{b^2 - beta^2} (e^{b^2} - 1)``,

    so at ``scale = 1``: ``a0 = 0``, ``a_k = beta^k / sqrt(k!)``, ``nu = e^{beta^2} - 1``.

    Parameters
    ----------
    beta : float
        Inverse temperature ``> 0``.
    scale : float, default 1.0
        Factor ``> 0`` on the argument (the logit scale ``alpha``).
    """
    beta = check_real(beta, "beta", low=0.0, low_open=True)
    scale = check_real(scale, "scale", low=0.0, low_open=True)
    b = beta * scale
    g = np.exp(0.5 * (b * b - beta * beta))
    return Hermite(a0=float(np.expm1(0.5 * (b * b - beta * beta))), a1=float(g * b),
                   a2=float(g * b * b / np.sqrt(2.0)), nu=float(g * g * np.expm1(b * b)))


def _exponential_base(func: Nonlinearity) -> tuple[float, float] | None:
    """``(beta, s)`` when ``func`` is ``t -> f_beta(s t)`` (scalings of an :class:`Exponential`)."""
    s = 1.0
    while func.nu is None and func.theta is None and func.scale > 0.0:
        s *= func.scale
        if isinstance(func.base, Exponential):
            return func.base.beta, s
        if not isinstance(func.base, Nonlinearity):
            return None
        func = func.base
    return None


@functools.lru_cache(maxsize=256)
def _coefficients(f: NonlinearityLike, scale: float) -> Hermite:
    func = check_nonlinearity(f)
    closed = _exponential_base(func)
    if closed is not None:
        return exponential_coefficients(closed[0], closed[1] * scale)
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
