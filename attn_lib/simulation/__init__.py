"""Monte Carlo simulation of the interpolation error.

``resolvent``
    The interpolation error of one draw, from one tridiagonal reduction of a Gram matrix.
``trials``
    The seeded trial engine and its result type (:class:`~attn_lib.simulation.trials.Trials`,
    :class:`~attn_lib.simulation.trials.Stats`), used by every Monte Carlo loop of the package.
``simulate``
    Attention and ridge errors of the model: one draw and seeded trials.
``gradient``
    The gradient of one draw's error with respect to the low-rank weights ``W_K, W_Q``.
"""

from . import gradient, resolvent, simulate, trials

__all__ = ["gradient", "resolvent", "simulate", "trials"]
