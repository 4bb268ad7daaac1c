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

from .._validation import check_array, check_int, check_real
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
    """``E[g(xi)]``, ``xi ~ N(0,1)``, integrating ``g * phi`` piecewise between ``breaks``.

    A break beyond ``+-8`` (Gaussian weight below ``1e-14``) is split at ``+-8`` instead: an
    infinite piece that starts far in the tail is one on which ``quad`` misses the mass near 0."""
    pts = sorted({float(np.clip(b, -8.0, 8.0)) for b in breaks} | ({-8.0, 8.0} if not breaks else set()))
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


def series(f: NonlinearityLike, scale: float = 1.0, order: int = 40) -> np.ndarray:
    """Normalised Hermite coefficients ``c_k = E[f_c(scale xi) h_k(xi)]``, ``k = 0..order``.

    ``h_k = He_k / sqrt(k!)`` are the orthonormal (probabilists') Hermite polynomials under
    ``xi ~ N(0, 1)`` and ``f_c = f - a0`` the centred ``f``, so ``c_0 = 0``, ``c_1 = a1``,
    ``c_2 = a2`` and ``sum_k c_k^2 = nu`` (:func:`coefficients`). All orders come from one
    vector-valued adaptive quadrature (:func:`scipy.integrate.quad_vec`) of ``f_c h_k phi`` on
    the pieces between the break points of ``f``, to an absolute error of about ``1e-13``.

    Parameters
    ----------
    f : str, callable or Nonlinearity
    scale : float, default 1.0
        Factor ``> 0`` on the argument.
    order : int, default 40
        Highest order ``K``.

    Returns
    -------
    ndarray of shape (order + 1,)
    """
    scale = check_real(scale, "scale", low=0.0, low_open=True)
    order = check_int(order, "order", low=1)
    func = check_nonlinearity(f)
    a0 = coefficients(f, scale).a0
    roots = np.sqrt(np.arange(order + 2))

    def integrand(x: float) -> np.ndarray:
        w = np.exp(-0.5 * x * x)
        h = np.zeros(order + 1)
        if w == 0.0:  # as in _gauss_expect: no evaluation of f where the weight underflows
            return h
        h[0], h[1] = 1.0, x
        for k in range(1, order):
            h[k + 1] = (x * h[k] - roots[k] * h[k - 1]) / roots[k + 1]
        fx = float(np.asarray(func(np.array([scale * x])), dtype=float)[0]) - a0
        return fx * w * h

    pts = sorted({b / scale for b in func.breaks} | ({-8.0, 8.0} if not func.breaks else set()))
    edges = [-np.inf, *pts, np.inf]
    total = np.zeros(order + 1)
    for lo, hi in zip(edges[:-1], edges[1:]):
        total += integrate.quad_vec(integrand, lo, hi, epsabs=1e-14, epsrel=1e-12, norm="max",
                                    limit=2000)[0]
    out = total / np.sqrt(2.0 * np.pi)
    out[0] = 0.0
    return out


def residual_covariance(f: NonlinearityLike, scales: np.ndarray, corr: np.ndarray,
                        order: int = 40, tol: float = 1e-10) -> np.ndarray:
    r"""Covariance of the non-linear residuals of jointly Gaussian logits, shape ``(H, H)``.

    For ``(t_1, ..., t_H)`` Gaussian with standard deviations ``scales`` and correlations
    ``corr``, ``f_c(t_h) = a1_h t_h / scale_h + R_h`` with ``R_h`` uncorrelated with every
    ``t_h'``; this returns ``C[h, h'] = E[R_h R_h']``. By Mehler's formula,

        C[h, h'] = sum_{k >= 2} c_k(scale_h) c_k(scale_h') corr[h, h']^k

    (:func:`series`), and ``C[h, h] = b2`` of ``scale_h`` exactly. The series is summed to
    ``order``; its remainder is at most ``sqrt(e_h e_h') |corr|^(order + 1)`` with
    ``e_h = b2_h - sum_{2<=k<=order} c_k^2`` (Cauchy-Schwarz). A pair with ``|corr| = 1``
    (to ``1e-12``) takes the exact one-dimensional integral instead.

    Parameters
    ----------
    f : str, callable or Nonlinearity
    scales : ndarray of shape (H,)
        Logit standard deviations ``> 0``.
    corr : ndarray of shape (H, H)
        Their correlation matrix (symmetric, unit diagonal, entries in ``[-1, 1]``).
    order : int, default 40
    tol : float, default 1e-10
        Largest accepted remainder bound relative to ``sqrt(b2_h b2_h')``.

    Raises
    ------
    ValueError
        When the remainder bound of a pair exceeds ``tol`` (strongly correlated logits and an
        ``f`` whose Hermite coefficients decay slowly); the message names the pair.
    """
    scales = check_array(scales, "scales")
    corr = np.asarray(corr, dtype=float)
    H = scales.size
    if corr.shape != (H, H) or not np.all(np.isfinite(corr)) or np.any(np.abs(corr) > 1 + 1e-12):
        raise ValueError(f"corr must be a finite ({H}, {H}) matrix with entries in [-1, 1], got "
                         f"shape {corr.shape}")
    cs = {s: series(f, s, order) for s in set(scales.tolist())}
    b2 = np.array([coefficients(f, s).b2 for s in scales])
    c = np.array([cs[s] for s in scales.tolist()])[:, 2:]
    rest = np.maximum(b2 - np.sum(c * c, axis=1), 0.0)
    func = check_nonlinearity(f)
    C = np.diag(b2)
    for h in range(H):
        for k in range(h):
            r = float(np.clip(corr[h, k], -1.0, 1.0))
            if abs(r) > 1.0 - 1e-12:
                s = np.sign(r)
                fh, fk = centered(f, scales[h]), centered(f, scales[k])
                br = tuple(b / scales[h] for b in func.breaks) + tuple(
                    s * b / scales[k] for b in func.breaks)
                cov = _gauss_expect(
                    lambda x: float(fh(np.array([x]))[0] * fk(np.array([s * x]))[0]), br, True)
                C[h, k] = cov - coefficients(f, scales[h]).a1 * coefficients(f, scales[k]).a1 * s
            else:
                bound = np.sqrt(rest[h] * rest[k]) * abs(r) ** (order + 1)
                if bound > tol * np.sqrt(b2[h] * b2[k]):
                    raise ValueError(
                        f"corr[{h}, {k}] = {r:.6g}: the residual covariance series of f does not "
                        f"converge to {tol:g} within {order} terms (remainder bound {bound:.3g})")
                C[h, k] = float(np.sum(c[h] * c[k] * r ** np.arange(2, order + 1)))
            C[k, h] = C[h, k]
    return C
