"""Numba's ``njit`` with the options of the compiled parts of :mod:`attn_lib.theory`, typed.

The compiled functions are cached on disk (``cache=True``: compiled once per clone, then loaded
from ``__pycache__``) and divide as NumPy does (by zero: ``inf`` or ``nan``, not an exception).
Modules that use them are imported on first use, so that ``import attn_lib`` does not import
Numba.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import numba

__all__ = ["fastjit", "jit"]

_F = TypeVar("_F", bound=Callable[..., object])


def jit(fn: _F) -> _F:
    """``numba.njit`` with the on-disk cache and NumPy's division, typed as the function it compiles."""
    return cast(_F, numba.njit(cache=True, error_model="numpy")(fn))


def fastjit(fn: _F) -> _F:
    """:func:`jit` that may reassociate sums (vectorised reductions) and fuse multiply-adds; NaN
    and infinity keep their meaning (convergence tests see them)."""
    return cast(_F, numba.njit(cache=True, error_model="numpy",
                               fastmath={"reassoc", "contract", "nsz", "arcp"})(fn))
