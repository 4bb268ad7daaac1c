"""The model: settings, nonlinearities and their Hermite data, tokens and weights, the kernel.

``setting``
    :class:`~attn_lib.model.setting.Setting`, the model's scalars and their validation.
``hermite``
    Hermite coefficients ``a0, a1, a2, nu`` of the nonlinearity.
``data``
    Signal-plus-noise tokens and weight vectors with a prescribed geometry.
``kernel``
    The attention kernel ``K = f(X^T W X / sqrt(p)) / sqrt(p)``.
"""

from . import data, hermite, kernel, setting
from .setting import Setting

__all__ = ["Setting", "data", "hermite", "kernel", "setting"]
