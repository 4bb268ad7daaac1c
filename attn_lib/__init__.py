"""attn_lib: the library behind attn-book.

Reproducible companion to *On the Interpolation Error of Nonlinear Attention versus Linear
Regression* (Liao, Liu, Hou, Zou, Ling; arXiv:2506.18656).

The symbols of the docstrings (``delta``, ``nu``, ``a1``, ``tau``, the coherent shift, the
effective ``gamma``) are explained in the book's notation page, section *Glossary*
(``book/notation.md``); ``README.md`` says which call answers which question.

The package is laid out by layer; each layer imports only the ones above it in this list.

model
    The model: :class:`Setting` (``setting``), the nonlinearities (``nonlinearity``) and their
    Hermite data (``hermite``), the tokens and weights (``data``) and the attention kernel (``kernel``).
simulation
    Monte Carlo: the interpolation error of one draw (``resolvent``), the seeded trial engine and
    its result type (``trials``), attention and ridge errors of the model (``simulate``).
theory
    Deterministic equivalents: Marchenko–Pastur tools, ridge, attention (proportional limit and
    finite size), the kernel spectrum.
studies
    One module per chapter's study (sweeps, linearisation, GPT-2, phase diagrams, convergence,
    the nonlinearity atlas, strong alignment).
book
    The book's support: the plotting style, the page helpers and the figures (imports
    matplotlib; not loaded by ``import attn_lib``).

Beside the layers, ``_validation`` checks every public function's input and ``cache`` stores
computed results on disk, keyed by the code they depend on; both are used by every layer.

``attn_lib.Setting``, ``attn_lib.RankSetting``, ``attn_lib.MatrixSetting``, ``attn_lib.CovarianceSetting``, ``attn_lib.HeadsSetting``, the attention kinds
``attn_lib.Entrywise`` and ``attn_lib.Softmax``, ``attn_lib.nonlinearity``, ``attn_lib.hermite``,
``attn_lib.data``, ``attn_lib.kernel``, ``attn_lib.simulate`` and ``attn_lib.theory`` are
re-exported here, and so are :class:`DomainWarning` (a theory evaluated outside the conditions
the book measured it under; :mod:`attn_lib.theory.domain`) and :class:`DomainError` (the same
with ``strict=True``).
"""

from . import cache, model, simulation, studies, theory
from .model import data, hermite, kernel, nonlinearity
from .model.setting import CovarianceSetting, Entrywise, HeadsSetting, MatrixSetting, RankSetting, Setting, Softmax
from .simulation import simulate
from ._domain import DomainError, DomainWarning

__all__ = ["CovarianceSetting", "DomainError", "DomainWarning", "HeadsSetting", "MatrixSetting", "RankSetting", "Setting", "Entrywise", "Softmax", "cache", "data",
           "hermite", "kernel", "model",
           "nonlinearity", "simulate",
           "simulation", "studies", "theory"]
__version__ = "0.1.0"
