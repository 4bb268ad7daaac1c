"""The studies behind the chapters, one module per chapter's study.

``sweeps``
    Theory and cached Monte Carlo over many settings (chapters 2-4, and the others' sweeps).
``hermite_linearisation``
    The linearised kernel ``K_lin`` and its distance to ``K`` (chapter 1).
``gpt2``
    GPT-2 query/key weights and the full-plus-low-rank check (chapter 5).
``phase``
    Phase diagrams of the attention-minus-ridge error gap (chapter 6).
``convergence``
    Finite-size bias and fluctuation of the simulated errors (chapter 7).
``atlas``
    The nonlinearity atlas at ``nu = 1`` (chapter 8).
``strong_alignment``
    Latent split of a sample and the kernel's coherent shift (chapter 9).
``explorer``
    The grid of theory curves behind the theory explorer page.
"""

from . import (atlas, convergence, explorer, gpt2, hermite_linearisation, phase, strong_alignment,
               sweeps)

__all__ = ["atlas", "convergence", "explorer", "gpt2", "hermite_linearisation", "phase",
           "strong_alignment", "sweeps"]
