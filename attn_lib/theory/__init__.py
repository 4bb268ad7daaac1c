"""Deterministic equivalents: Marchenko–Pastur tools, ridge regression, nonlinear attention.

``attention_error(setting, gammas)`` is the proportional limit; with ``n=...`` it is the
finite-size theory of :mod:`attn_lib.theory.finite_size` (shift data in :mod:`attn_lib.theory.shift`).
"""

from . import finite_size, marchenko_pastur, shift
from .attention import (Linearisation, attention_bulk, attention_error, attention_error_batch,
                        attention_resolvent_form, gram_spectrum, linearisation)
from .bulk import BulkSolution, ConvergenceError, solve_bulk
from .kernel_spectrum import kernel_density
from .ridge import ridge_error

__all__ = ["finite_size", "marchenko_pastur", "shift", "ridge_error", "attention_error", "attention_error_batch",
           "attention_bulk", "attention_resolvent_form", "gram_spectrum", "linearisation",
           "Linearisation", "BulkSolution", "ConvergenceError", "solve_bulk", "kernel_density"]
