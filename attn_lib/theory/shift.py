r"""Shift-dependent Hermite data of the attention nonlinearity.

For ``xi ~ N(0, 1)``, a centred nonlinearity ``f`` and a shift ``h``:

    F0(h) = E f(xi + h),    F1(h) = E[xi f(xi + h)],    S2(h) = E f(xi + h)^2 - F0(h)^2 - F1(h)^2.

``F0`` is the mean of ``f`` at a shifted argument, ``F1`` its slope (``= E f'(xi + h)`` for smooth
``f``) and ``S2`` the variance left after the linear part. At ``h = 0`` they reduce to ``0``,
``a1`` and ``b2 = nu - a1^2`` of :mod:`attn_lib.model.hermite`. They are the data of the finite-size
theory (``attn_lib.theory._finite_size``), which evaluates them at the pairwise latent shifts
``h_ij`` of the tokens.

Computation: ``E g(xi + h) = int g(x) phi(x - h) dx`` by composite Gauss–Legendre quadrature
(24 nodes on every unit interval of ``[-H - 12, H + 12]``, split at the break points of ``f`` so
that kinks and jumps sit on panel edges), tabulated on a grid of ``h`` with spacing ``1/64`` and
interpolated by cubic splines. The quadrature error is below ``1e-12``; the spline error is below
``1e-7`` (tests compare with the closed forms for ``sign`` and ``erf``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from ..model.hermite import centered
from ..model.nonlinearity import NonlinearityLike, check_nonlinearity

__all__ = ["ShiftFunctions", "shift_functions"]

_NODES = 24          # Gauss–Legendre nodes per unit panel
_TAIL = 12.0         # integrate x over [h - 12, h + 12] at least
_STEP = 1.0 / 64.0   # spacing of the tabulated shifts


@dataclass(frozen=True)
class ShiftFunctions:
    """Cubic-spline tables of ``F0``, ``F1`` and ``S2`` on ``[-h_max, h_max]``.

    Call :meth:`__call__` with an array of shifts; values outside the table raise ``ValueError``.
    """

    h_max: float
    _F0: CubicSpline
    _F1: CubicSpline
    _S2: CubicSpline

    def __call__(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F0(h), F1(h), S2(h))``, each shaped like ``h``."""
        h = np.asarray(h, dtype=float)
        if h.size and np.max(np.abs(h)) > self.h_max:
            raise ValueError(f"shift |h| = {np.max(np.abs(h)):.3g} outside the table [-{self.h_max}, {self.h_max}]")
        return self._F0(h), self._F1(h), np.maximum(self._S2(h), 0.0)


def _panels(lo: float, hi: float, breaks: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on unit panels of ``[lo, hi]`` split at ``breaks``."""
    edges = np.union1d(np.arange(math.floor(lo), math.ceil(hi) + 1.0),
                       [b for b in breaks if lo < b < hi])
    t, w = np.polynomial.legendre.leggauss(_NODES)
    half = np.diff(edges)[:, None] / 2.0
    mid = (edges[:-1] + edges[1:])[:, None] / 2.0
    return (mid + half * t).ravel(), (half * w).ravel()


def shift_functions(f: NonlinearityLike, scale: float = 1.0, h_max: float = 8.0) -> ShiftFunctions:
    """Tables of ``F0, F1, S2`` for the centred ``t -> f(scale t) - a0`` (see the module docstring).

    Parameters
    ----------
    f : str, callable or Nonlinearity
        A name in :data:`attn_lib.model.nonlinearity.REGISTRY`, a hashable vectorised callable
        (its ``breaks`` attribute, if any, lists kinks and jumps) or a
        :class:`~attn_lib.model.nonlinearity.Nonlinearity`.
    scale : float, default 1.0
    h_max : float, default 8.0
        Largest shift needed; rounded up to a multiple of 4 so that tables are shared.

    Returns
    -------
    ShiftFunctions
    """
    h_max = 4.0 * math.ceil(max(float(h_max), 1.0) / 4.0)
    try:
        return _table(f, float(scale), h_max)
    except TypeError:  # unhashable callable
        return _table.__wrapped__(f, float(scale), h_max)


@functools.lru_cache(maxsize=64)
def _table(f: NonlinearityLike, scale: float, h_max: float) -> ShiftFunctions:
    breaks = check_nonlinearity(f).breaks
    g = centered(f, scale)
    x, w = _panels(-h_max - _TAIL, h_max + _TAIL, tuple(b / scale for b in breaks))
    fx = g(x)
    h = np.arange(-h_max, h_max + _STEP / 2, _STEP)
    d = x[None, :] - h[:, None]                       # xi = x - h
    kern = w * np.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi)
    F0 = kern @ fx
    F1 = (kern * d) @ fx
    V = kern @ (fx * fx)
    S2 = V - F0 ** 2 - F1 ** 2
    return ShiftFunctions(h_max, CubicSpline(h, F0), CubicSpline(h, F1), CubicSpline(h, S2))
