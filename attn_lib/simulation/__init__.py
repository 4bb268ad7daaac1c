"""Monte Carlo simulation of the interpolation error.

``resolvent``
    The interpolation error of one draw, from one tridiagonal reduction of a Gram matrix.
``trials``
    The seeded trial engine and its result type (:class:`~attn_lib.simulation.trials.Trials`,
    :class:`~attn_lib.simulation.trials.Stats`), used by every Monte Carlo loop of the package.
``simulate``
    Attention and ridge errors of the model: one draw and seeded trials.
"""

from . import resolvent, simulate, trials

__all__ = ["resolvent", "simulate", "trials"]
