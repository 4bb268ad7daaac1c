"""Deterministic equivalents: Marchenko–Pastur tools, ridge regression, nonlinear attention.

Public modules: :mod:`~attn_lib.theory.domain` (where each theory holds, as measured; the
:class:`~attn_lib.DomainWarning` of every call outside), :mod:`~attn_lib.theory.attention` (``attention_error(setting, gammas)`` is the
proportional limit; with ``n=...`` it is the finite-size theory), :mod:`~attn_lib.theory.ridge`,
:mod:`~attn_lib.theory.kernel_spectrum`, :mod:`~attn_lib.theory.marchenko_pastur` and
:mod:`~attn_lib.theory.shift` (the shifted Hermite data of the finite-size theory) and
:mod:`~attn_lib.theory.softmax` (softmax attention by reduction to the entry-wise theory).

The implementation is private: the bulk fixed point for real and complex ``gamma``
(``_bulk``), the spiked linear pencil (``_spiked``), the finite-size equivalent
(``_finite_size``) and its conditional version at small ``n`` (``_conditional``, public as
:func:`conditional_error` and ``attention_error(..., n=..., conditional=draws)``), the any-matrix pencil (``_matrix``), the multi-head pencil (``_heads``), the
continuation driver of the bulk (``_continuation``) and :class:`ConvergenceError` (``_errors``).
"""

from . import attention, domain, kernel_spectrum, marchenko_pastur, ridge, shift, softmax
from ._conditional import ConditionalError, conditional_error
from ._errors import ConvergenceError
from .._domain import DomainError, DomainWarning
from .attention import (BulkSolution, Linearisation, attention_bulk, attention_error, attention_error_batch,
                        attention_resolvent_form, gram_spectrum, linearisation)
from .kernel_spectrum import kernel_density
from .ridge import ridge_error

__all__ = ["attention", "domain", "DomainWarning", "DomainError", "kernel_spectrum", "marchenko_pastur", "ridge", "shift", "softmax", "ridge_error",
           "attention_error", "attention_error_batch", "attention_bulk", "attention_resolvent_form",
           "gram_spectrum", "linearisation", "Linearisation", "BulkSolution", "ConvergenceError",
           "kernel_density", "conditional_error", "ConditionalError"]
