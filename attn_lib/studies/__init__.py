"""The studies behind the chapters, one module per chapter's study.

``sweeps``
    Theory and cached Monte Carlo over many settings (the chapters of Part I, and the others'
    sweeps).
``hermite_linearisation``
    The linearised kernel ``K_lin`` and its distance to ``K`` (chapter "The linearisation").
``row_space``
    The ridgeless error against ridge's rank bound (the row-space bound, chapter "Signal and
    alignment").
``gpt2``
    GPT-2 query/key weights and the full-plus-low-rank check (chapters "GPT-2's weights" and
    "Any key-query matrix").
``strong_alignment``
    Latent split of a sample and the kernel's coherent shift (chapter "The coherent shift of
    order one").
``convergence``
    Finite-size bias and fluctuation of the simulated errors (chapter "Convergence").
``phase``
    Phase diagrams of the attention-minus-ridge error gap (chapter "Phase diagrams").
``atlas``
    The nonlinearity atlas at ``nu = 1`` (chapter "A nonlinearity atlas").
``fine_tuning``
    Training the low-rank update by stochastic gradient descent, and the theory along the way
    (chapter "Does fine-tuning find the alignment?").
``explorer``
    The grid of theory curves behind the theory explorer page.
"""

from . import (atlas, convergence, explorer, fine_tuning, gpt2, hermite_linearisation, phase,
               row_space, strong_alignment, sweeps)

__all__ = ["atlas", "convergence", "explorer", "fine_tuning", "gpt2", "hermite_linearisation",
           "phase", "row_space", "strong_alignment", "sweeps"]
