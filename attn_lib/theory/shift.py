r"""Shift-dependent Hermite data of the attention nonlinearity.

For ``xi ~ N(0, 1)``, a centred nonlinearity ``f`` and a shift ``h``:

    F0(h) = E f(xi + h),    F1(h) = E[xi f(xi + h)],    S2(h) = E f(xi + h)^2 - F0(h)^2 - F1(h)^2,
    F2(h) = E[(xi^2 - 1) f(xi + h)] = F0''(h).

``F0`` is the mean of ``f`` at a shifted argument, ``F1`` its slope (``= E f'(xi + h)`` for smooth
``f``) and ``S2`` the variance left after the linear part. ``F2`` (:meth:`ShiftFunctions.curvature`)
is the curvature of the mean: by the heat equation, ``d/d(s^2) E f(h + s xi) = F0''(h) / 2`` at
``s = 1``, so it measures how the mean moves with the variance of the argument. At ``h = 0`` they
reduce to ``0``, ``a1``, ``b2 = nu - a1^2`` and ``sqrt(2) a2`` of :mod:`attn_lib.model.hermite`. They are the data of the finite-size
theory (``attn_lib.theory._finite_size``), which evaluates them at the pairwise latent shifts
``h_ij`` of the tokens.

Computation: ``E g(xi + h) = int g(x) phi(x - h) dx`` by composite Gauss–Legendre quadrature
(24 nodes on each of the 25 unit panels ``[k - 12, k + 13]``, ``k = floor(h)``, split at the break
points of ``f`` so that kinks and jumps sit on panel edges; ``phi(12) ~ 1e-32``). Shifts up to
``|h| = 64`` are tabulated on a grid of spacing ``1/64`` and interpolated by cubic splines; larger
shifts (GPT-2's layer 4, with ``alpha = 0.004``, needs ``|h|`` up to 3000 once reduced to
``alpha = 1``) are integrated directly at the shifts asked for. Both work on blocks of shifts, so
time and memory grow with the number of shifts, not with their size. The quadrature error is below
``1e-12``; the spline error is below ``1e-7`` (tests compare with the closed forms for ``sign``
and ``erf``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from ..model.hermite import centered
from ..model.nonlinearity import NonlinearityLike, check_nonlinearity

__all__ = ["ShiftFunctions", "expectations", "shift_functions"]

_NODES = 24          # Gauss–Legendre nodes per unit panel
_TAIL = 12           # integrate over the unit panels within _TAIL of the shift
_STEP = 1.0 / 64.0   # spacing of the tabulated shifts
_TABLE_MAX = 64.0    # largest tabulated |h|; larger shifts are integrated directly
_BLOCK = 1024        # shifts per block of the quadrature (memory ~ _BLOCK x 650 nodes)


@dataclass(frozen=True, eq=False)
class ShiftFunctions:
    """Cubic-spline tables of ``F0``, ``F1``, ``S2`` and ``F2`` on ``[-h_max, h_max]``.

    Call :meth:`__call__` (or :meth:`curvature`) with an array of shifts; shifts outside the
    table are integrated directly (:func:`expectations`).
    """

    h_max: float
    g: Callable[[np.ndarray], np.ndarray]
    breaks: tuple[float, ...]
    coef: np.ndarray   # (intervals, 4, 4): the splines' cubic coefficients (highest power first) of F0, F1, S2, F2

    def _values(self, h: np.ndarray, which: tuple[int, ...]) -> list[np.ndarray]:
        """Entries ``which`` of ``(F0, F1, S2, F2)`` at ``h``: splines inside the table (one
        lookup of the interval on the uniform grid for all of them, compiled:
        :func:`attn_lib.theory._spline.evaluate`), direct quadrature (:func:`expectations`)
        outside it."""
        from ._spline import evaluate   # imports Numba on first use, not with attn_lib

        h = np.asarray(h, dtype=float)
        v = np.empty((len(which), h.size))
        evaluate(self.coef, self.h_max, _STEP, np.ascontiguousarray(h).reshape(-1), np.array(which), v)
        vals = [v[j].reshape(h.shape) for j in range(len(which))]
        out = np.abs(h) > self.h_max
        if np.any(out):
            direct = expectations(self.g, self.breaks, h[out])
            for val, j in zip(vals, which):
                val[out] = direct[j]
        return vals

    def __call__(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F0(h), F1(h), S2(h))``, each shaped like ``h``."""
        F0, F1, S2 = self._values(h, (0, 1, 2))
        return F0, F1, np.maximum(S2, 0.0)

    def curvature(self, h: np.ndarray) -> np.ndarray:
        """``F2(h) = E[(xi^2 - 1) f(xi + h)] = F0''(h)``, shaped like ``h``."""
        return self._values(h, (3,))[0]


def expectations(g: Callable[[np.ndarray], np.ndarray], breaks: tuple[float, ...],
                 h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(F0, F1, S2, F2)`` of ``g`` at the shifts ``h`` (shape ``(H,)``) by direct quadrature.

    Parameters
    ----------
    g : callable
        Vectorised function (the centred, scaled nonlinearity).
    breaks : tuple of float
        Kinks and jumps of ``g``; they become panel edges.
    h : ndarray, shape (H,)

    Returns
    -------
    F0, F1, S2, F2 : ndarray, shape (H,)
    """
    t, wt = np.polynomial.legendre.leggauss(_NODES)
    F0, F1, V, F2 = (np.empty_like(h) for _ in range(4))
    for lo in range(0, len(h), _BLOCK):
        hb = h[lo:lo + _BLOCK, None]
        k = np.floor(hb) - _TAIL
        edges = k + np.arange(2 * _TAIL + 2.0)            # (B, 26) unit panels around h
        if breaks:                                        # breaks inside split a panel
            edges = np.sort(np.concatenate([edges, np.clip(breaks, k, k + 2 * _TAIL + 1)], axis=1), axis=1)
        half = np.diff(edges, axis=1)[:, :, None] / 2.0   # zero-width panels weigh nothing
        x = ((edges[:, :-1] + edges[:, 1:])[:, :, None] / 2.0 + half * t).reshape(len(hb), -1)
        d = x - hb                                        # xi = x - h
        kern = (half * wt).reshape(len(hb), -1) * np.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi)
        fx = g(x)
        F0[lo:lo + _BLOCK] = np.einsum("ij,ij->i", kern, fx)
        F1[lo:lo + _BLOCK] = np.einsum("ij,ij,ij->i", kern, d, fx)
        V[lo:lo + _BLOCK] = np.einsum("ij,ij,ij->i", kern, fx, fx)
        F2[lo:lo + _BLOCK] = np.einsum("ij,ij,ij->i", kern, d * d - 1.0, fx)
    return F0, F1, V - F0 ** 2 - F1 ** 2, F2


def shift_functions(f: NonlinearityLike, scale: float = 1.0, h_max: float = 8.0) -> ShiftFunctions:
    """Tables of ``F0, F1, S2, F2`` for the centred ``t -> f(scale t) - a0`` (see the module docstring).

    Parameters
    ----------
    f : str, callable or Nonlinearity
        A name in :data:`attn_lib.model.nonlinearity.REGISTRY`, a hashable vectorised callable
        (its ``breaks`` attribute, if any, lists kinks and jumps) or a
        :class:`~attn_lib.model.nonlinearity.Nonlinearity`.
    scale : float, default 1.0
    h_max : float, default 8.0
        Largest shift expected. The table covers it up to ``|h| = 64``, rounded up to a multiple
        of 4 so that tables are shared; larger shifts are integrated when asked for.

    Returns
    -------
    ShiftFunctions
    """
    h_max = 4.0 * math.ceil(min(max(float(h_max), 1.0), _TABLE_MAX) / 4.0)
    try:
        return _table(f, float(scale), h_max)
    except TypeError:  # unhashable callable
        return _table.__wrapped__(f, float(scale), h_max)


@functools.lru_cache(maxsize=64)
def _table(f: NonlinearityLike, scale: float, h_max: float) -> ShiftFunctions:
    breaks = tuple(b / scale for b in check_nonlinearity(f).breaks)
    g = centered(f, scale)
    h = np.arange(-h_max, h_max + _STEP / 2, _STEP)
    coef = np.stack([CubicSpline(h, v).c.T for v in expectations(g, breaks, h)], axis=2)
    return ShiftFunctions(h_max, g, breaks, coef)
