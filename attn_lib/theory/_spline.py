"""Compiled evaluation of the cubic-spline tables of :mod:`attn_lib.theory.shift` (Numba,
:mod:`attn_lib.theory._jit`): the arithmetic of the NumPy expression it replaces, one pass over
the shifts instead of a gather of ``4 x len(which)`` coefficients per shift."""

from __future__ import annotations

import numpy as np

from ._jit import jit

__all__ = ["evaluate"]


@jit
def evaluate(coef: np.ndarray, h_max: float, step: float, h: np.ndarray, which: np.ndarray,
             out: np.ndarray) -> None:
    """``out[j, i]`` = spline ``which[j]`` of the table at ``h[i]``.

    Parameters
    ----------
    coef : ndarray, shape (intervals, 4, F)
        Cubic coefficients (highest power first) of ``F`` splines on the uniform grid
        ``-h_max + step k``.
    h_max, step : float
    h : ndarray, shape (H,)
        Shifts; those beyond the table take its first or last interval (the caller replaces them).
    which : ndarray of int, shape (J,)
    out : ndarray, shape (J, H)
    """
    n = coef.shape[0]
    for i in range(h.shape[0]):
        k = min(max(np.floor((h[i] + h_max) / step), 0.0), n - 1.0)
        ki = int(k)
        d = h[i] - (k * step - h_max)
        for j in range(which.shape[0]):
            w = which[j]
            out[j, i] = ((coef[ki, 0, w] * d + coef[ki, 1, w]) * d + coef[ki, 2, w]) * d + coef[ki, 3, w]
