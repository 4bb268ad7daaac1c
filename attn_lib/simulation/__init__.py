"""Monte Carlo simulation of the interpolation error (``simulate``)."""

from . import simulate

__all__ = ["simulate"]
