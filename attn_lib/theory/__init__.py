"""Deterministic equivalents: Marchenko–Pastur tools, ridge regression, nonlinear attention."""

from . import marchenko_pastur
from .ridge import ridge_error

__all__ = ["marchenko_pastur", "ridge_error"]
