"""The model: settings, nonlinearities and their Hermite data, tokens and weights, the kernel.

``nonlinearity``
    :class:`~attn_lib.model.nonlinearity.Nonlinearity`, the one type of ``f`` (registered names,
    user callables, the book's families) with its break points.
``setting``
    :class:`~attn_lib.model.setting.Setting` (the model's scalars), the base of every setting type
    and the attention kinds.
``hermite``
    Hermite coefficients ``a0, a1, a2, nu`` of the nonlinearity.
``data``
    Signal-plus-noise tokens and weight vectors with a prescribed geometry.
``kernel``
    The attention kernel ``K = f(X^T W X / sqrt(p)) / sqrt(p)``.
``scale``
    The scale of a model's features: the softmax scale ``s_n`` behind the library's one
    ``gamma`` convention, and the mean feature eigenvalue ``tau`` of the equal-``gamma / tau``
    comparison.
"""

from . import data, hermite, kernel, nonlinearity, scale, setting
from .nonlinearity import Nonlinearity
from .setting import Setting

__all__ = ["Nonlinearity", "Setting", "data", "hermite", "kernel", "nonlinearity", "scale", "setting"]
