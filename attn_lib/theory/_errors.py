"""The error raised when a fixed point of the theory cannot be solved."""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["ConvergenceError", "check_converged", "not_converged"]


class ConvergenceError(RuntimeError):
    """A fixed point could not be solved; the message names the problem, the setting, the point
    (``gamma`` or ``z``) and the last residual. The theory raises it instead of returning NaN."""


ConvergenceError.__module__ = "attn_lib.theory"  # its public name (as in tracebacks and pickles)


def _gamma(g: float) -> str:
    return f"gamma={g:.6g}"


def check_converged(ok: np.ndarray, residual: np.ndarray, at: np.ndarray, *, problem: str,
                    label: Callable[[int], str] | None = None,
                    point: Callable[[float], str] = _gamma, reason: str = "") -> None:
    """Raise :class:`ConvergenceError` for the first element whose ``ok`` is false.

    Parameters
    ----------
    ok, residual, at : ndarray of shape (B,)
        Convergence flags, last residuals and the points (``gamma`` or ``x = -Re gamma``) tried.
    problem : str
        What was solved, e.g. ``"attention fixed point"``.
    label : callable, optional
        ``label(b)`` describes element ``b`` (default ``"batch element b"``).
    point : callable
        ``point(at[b])`` formats the point (default ``"gamma=..."``).
    reason : str
        Appended in parentheses (for example the number of step halvings).
    """
    ok = np.asarray(ok)
    if np.all(ok):
        return
    b = int(np.flatnonzero(~ok)[0])
    raise not_converged(problem, label(b) if label is not None else f"batch element {b}",
                        point(float(np.asarray(at)[b])), float(np.asarray(residual)[b]), reason)


def not_converged(problem: str, where: str, at: str, residual: float, reason: str = "") -> ConvergenceError:
    """``ConvergenceError("<problem> did not converge for <where> at <at>: last residual <r> (<reason>)")``."""
    return ConvergenceError(f"{problem} did not converge for {where} at {at}: last residual {residual:.3g}"
                            + (f" ({reason})" if reason else ""))
