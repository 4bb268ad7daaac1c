"""attn_lib: the library behind attn-book.

Reproducible companion to *On the Interpolation Error of Nonlinear Attention versus Linear
Regression* (Liao, Liu, Hou, Zou, Ling; arXiv:2506.18656).

Modules
-------
setting
    :class:`Setting`, the model's scalars and their validation.
hermite
    Hermite coefficients ``a0, a1, a2, nu`` of the nonlinearity.
data
    Signal-plus-noise tokens and weight vectors with a prescribed geometry.
kernel
    The attention kernel ``K = f(X^T W X / sqrt(p)) / sqrt(p)``.
simulate
    Monte Carlo interpolation errors of attention and ridge regression.
theory
    Deterministic equivalents (Marchenko–Pastur tools, ridge, attention).
linearisation
    The linearised kernel ``K_lin`` and its distance to ``K``.
gpt2
    GPT-2 query/key weights and the full-plus-low-rank check.
sweeps
    Parameter sweeps used by the chapters.
phase
    Phase diagrams of the attention-minus-ridge error gap.
convergence
    Finite-size bias and fluctuation of the simulated errors, with fitted slopes.
atlas
    The nonlinearity atlas: Hermite data and errors of many ``f`` at ``nu = 1``.
strong_alignment
    Latent split of a sample and the statistics of the kernel's coherent shift.
cache
    Disk cache of Monte Carlo results.
style
    The book's plotting style (imports matplotlib; not loaded by ``import attn_lib``).
"""

from . import (atlas, cache, convergence, data, gpt2, hermite, kernel, linearisation, phase, simulate,
               strong_alignment, sweeps, theory)
from .setting import Setting

__all__ = ["Setting", "atlas", "cache", "convergence", "data", "gpt2", "hermite", "kernel",
           "linearisation", "phase", "simulate", "strong_alignment", "sweeps", "theory"]
__version__ = "0.1.0"
