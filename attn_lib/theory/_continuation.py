r"""Continuation in a decreasing parameter with a step-size limit and step halving.

The fixed points of the theory are solved from a large parameter ``t`` (``gamma``, or
``x = -Re gamma`` for the spectral problem), where a cold start is good, down to the targets.
This driver does the stepping for the bulk solver (``attn_lib.theory._bulk``, real and
spectral), which passes its own predictor-corrector ``step`` and keeps its own solution state,
and, through :func:`descend` (one parameter through several targets), for the any-matrix path
(``attn_lib.theory._matrix``) and the covariance theories (``attn_lib.theory._covariance``).
The finite-size theory (``attn_lib.theory._finite_size``) follows the same rule in its own
batched loop, since one of its steps also solves the targets inside the step.

Rule, per element of a batch (all elements step together):

    a step goes from t to e = max(target, t / max_ratio);
    an attempt at the goal t' (first t' = e) that fails is halved in log t: t' <- sqrt(t t');
    one that succeeds moves t to t' and the next attempt is at e again,

until ``t = e``. A step that needs more than ``max_attempts`` attempts, or an attempt that fails
at a goal within a relative ``1e-9`` of ``t``, raises :class:`~attn_lib.theory.ConvergenceError`
with the element, the point, the last residual and the reason.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ._errors import _gamma, check_converged, not_converged

__all__ = ["Step", "continue_to"]

Step = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``step(idx, t_from, t_to) -> (ok, residual)`` on the elements ``idx`` (shapes ``(k,)``): predict
the solution at ``t_to`` from the caller's solution at ``t_from``, correct it, store the elements
that converged (``ok``) and return the last residuals."""

_SAME = 1e-15       # an element within this relative distance of its target has reached it
_MIN_STEP = 1e-9    # a failing step shorter than this (relative) is not halved further


def continue_to(t: np.ndarray, target: np.ndarray, step: Step, *, max_ratio: float | None,
                max_attempts: int, problem: str, label: Callable[[int], str] | None = None,
                point: Callable[[float], str] = _gamma, max_steps: int = 10000,
                on_step: Callable[[np.ndarray], None] | None = None) -> None:
    """Advance the parameters ``t`` (shape ``(B,)``, updated in place) down to ``target``.

    Parameters
    ----------
    t : ndarray of shape (B,)
        Current parameters (``> 0``), at which the caller's state is a solution.
    target : ndarray of shape (B,) or scalar
        Where to go; elements with ``t <= target (1 + 1e-15)`` do not move.
    step : callable
        The caller's predictor-corrector, see :data:`Step`.
    max_ratio : float or None
        Largest ratio ``t / e`` of one step (``None``: one step to the target).
    max_attempts : int
        Attempts (calls of ``step``) allowed per step, counting the first one.
    problem, label, point
        For the error message (see :func:`attn_lib.theory._errors.check_converged`).
    max_steps : int, default 10000
        Cap on the number of steps.
    on_step : callable, optional
        ``on_step(idx)`` after every step, with the elements that moved (all reached ``e``).

    Raises
    ------
    ConvergenceError
        When an element cannot advance (see the module docstring).
    """
    target = np.broadcast_to(np.asarray(target, dtype=float), t.shape)
    where = label if label is not None else (lambda b: f"batch element {b}")
    residual = np.full(t.shape, np.inf)
    for _ in range(max_steps):
        moving = t > target * (1 + _SAME)
        if not np.any(moving):
            return
        moved = moving.copy()
        end = np.where(moving, target if max_ratio is None else np.maximum(target, t / max_ratio), t)
        goal = end.copy()
        for _attempt in range(max_attempts):
            idx = np.flatnonzero(moving)
            if idx.size == 0:
                break
            ok, res = step(idx, t[idx].copy(), goal[idx].copy())
            ok = np.asarray(ok, dtype=bool)
            residual[idx] = res
            done, fail = idx[ok], idx[~ok]
            t[done] = goal[done]
            moving[done[goal[done] == end[done]]] = False
            goal[done] = end[done]
            short = t[fail] / goal[fail] < 1 + _MIN_STEP
            if np.any(short):
                b = int(fail[np.flatnonzero(short)[0]])
                raise not_converged(problem, where(b), point(float(goal[b])), float(residual[b]),
                                    f"step from {point(float(t[b]))} below a relative 1e-9")
            goal[fail] = np.sqrt(t[fail] * goal[fail])
        check_converged(~moving, residual, goal, problem=problem, label=where, point=point,
                        reason=f"{max_attempts} attempts at one continuation step")
        if on_step is not None:
            on_step(np.flatnonzero(moved))
    check_converged(t <= target * (1 + _SAME), residual, t, problem=problem, label=where,
                    point=point, reason=f"more than {max_steps} continuation steps")


def _ignore_index(fn: Callable[[], object]) -> Callable[[np.ndarray], None]:
    """``fn`` as an ``on_step`` of :func:`continue_to` (the moved elements ignored)."""
    def call(idx: np.ndarray) -> None:
        fn()
    return call


def descend(start: float, targets: np.ndarray, step: Callable[[float, float], tuple[bool, float]],
            on_target: Callable[[float], None], *, max_ratio: float, max_attempts: int, problem: str,
            on_step: Callable[[], object] | None = None) -> None:
    """One parameter from ``start`` (where the caller holds a solution) down through the
    decreasing ``targets`` (each ``<= start``) by :func:`continue_to`: steps of ratio at most
    ``max_ratio``, a failed attempt halved in ``log t``.

    Parameters
    ----------
    start : float
    targets : ndarray of shape (T,)
        Decreasing.
    step : callable
        ``step(t_from, t_to) -> (ok, residual)``: the caller's predictor-corrector at ``t_to``
        from its solution at ``t_from``, storing the solution when ``ok``. It may raise
        :class:`~attn_lib.theory.ConvergenceError` itself (a step it will not split).
    on_target : callable
        ``on_target(t)`` when the solution is at the target ``t``.
    max_ratio, max_attempts, problem
        As :func:`continue_to`.
    on_step : callable, optional
        Called after every step (the path points of the continuation, splits not counted).
    """
    t = np.array([float(start)])

    def batch(idx: np.ndarray, t_from: np.ndarray, t_to: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok, res = step(float(t_from[0]), float(t_to[0]))
        return np.array([ok]), np.array([res])

    for target in targets:
        continue_to(t, np.array([float(target)]), batch, max_ratio=max_ratio, max_attempts=max_attempts,
                    problem=problem, label=lambda b: "the solution",
                    on_step=None if on_step is None else _ignore_index(on_step))
        on_target(float(target))
