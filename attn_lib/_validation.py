"""Input validation shared by the public functions.

Every check raises immediately (before any heavy computation) with a message that names the
parameter and the allowed range, in the style of scikit-learn's ``check_scalar``.
"""

from __future__ import annotations

import numbers

import numpy as np


def check_real(value: object, name: str, *, low: float | None = None,
               high: float | None = None, low_open: bool = False) -> float:
    """Return ``value`` as a finite float, checking ``low <(=) value <= high``.

    Parameters
    ----------
    value : object
        The candidate; booleans and non-real numbers raise ``TypeError``.
    name : str
        Parameter name used in the error message.
    low, high : float, optional
        Bounds of the allowed interval (``None``: unbounded).
    low_open : bool, default False
        Whether the lower bound is excluded.

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is not finite or lies outside the interval.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    x = float(value)
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    interval = f"{'(' if low is None or low_open else '['}{lo}, {hi}{')' if high is None else ']'}"
    if not np.isfinite(x):
        raise ValueError(f"{name} must be finite and in {interval}, got {x!r}")
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name} must be in {interval}, got {x!r}")
    if high is not None and x > high:
        raise ValueError(f"{name} must be in {interval}, got {x!r}")
    return x


def check_int(value: object, name: str, *, low: int = 1) -> int:
    """Return ``value`` as an int ``>= low``; floats, even integral ones, are refused."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer >= {low}, got {type(value).__name__}")
    if int(value) < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {int(value)}")
    return int(value)


def check_gammas(gammas: object, name: str = "gammas") -> np.ndarray:
    """Return ``gammas`` as a float array of shape ``()`` or ``(G,)`` with finite positive entries."""
    try:
        g = np.asarray(gammas, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a positive float or a 1-D array of them") from exc
    if g.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {g.shape}")
    if g.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(g)):
        raise ValueError(f"{name} must be finite and in (0, inf)")
    if np.any(g <= 0):
        raise ValueError(f"{name} must be in (0, inf), got minimum {g.min()!r}")
    return g


def check_seed(seed: object, name: str = "seed") -> int:
    """Return a non-negative integer seed for :class:`numpy.random.SeedSequence`."""
    return check_int(seed, name, low=0)
