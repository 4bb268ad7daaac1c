"""Deterministic equivalents: Marchenko–Pastur tools, ridge regression, nonlinear attention."""

from . import marchenko_pastur
from .attention import (Linearisation, attention_bulk, attention_error, attention_error_batch,
                        attention_resolvent_form, gram_spectrum, linearisation)
from .bulk import BulkSolution, ConvergenceError, solve_bulk
from .kernel_spectrum import kernel_density
from .ridge import ridge_error

__all__ = ["marchenko_pastur", "ridge_error", "attention_error", "attention_error_batch",
           "attention_bulk", "attention_resolvent_form", "gram_spectrum", "linearisation",
           "Linearisation", "BulkSolution", "ConvergenceError", "solve_bulk", "kernel_density"]
