"""Softmax attention in the model layer: the kind, f_beta and its closed-form Hermite data."""

import dataclasses

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model import hermite
from attn_lib.model.nonlinearity import Exponential, exponential, scaled


def test_softmax_kind_validates_and_is_exported():
    s = al.Softmax(1.0)
    assert s.beta == 1.0 and s.mask is True and isinstance(s, al.model.setting.Attention)
    assert al.Softmax(2).beta == 2.0 and isinstance(al.Softmax(2).beta, float)
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="beta"):
            al.Softmax(bad)
    with pytest.raises(TypeError, match="beta"):
        al.Softmax("1")
    with pytest.raises(TypeError, match="mask"):
        al.Softmax(1.0, mask=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.beta = 2.0
    assert hash(al.Softmax(1.0)) == hash(al.Softmax(1.0)) and al.Softmax(1.0) != al.Softmax(1.0, False)
    setting = al.Setting(c=0.5, attention=al.Softmax(0.5))
    assert setting.attention.f == exponential(0.5)


def test_f_beta_is_centred_exponential():
    t = np.linspace(-3, 3, 7)
    for beta in (0.5, 1.0, 1.5):
        np.testing.assert_allclose(exponential(beta)(t), np.exp(beta * t - beta ** 2 / 2) - 1,
                                   rtol=1e-14, atol=1e-15)
    assert exponential(1.0).registered  # evaluated block by block by the kernel
    with pytest.raises(ValueError, match="beta"):
        Exponential(0.0)


@pytest.mark.parametrize("beta", [0.5, 1.0, 1.5, 2.0])
def test_closed_forms(beta):
    h = hermite.coefficients(exponential(beta))
    assert h.a0 == 0.0
    assert h.a1 == pytest.approx(beta, rel=1e-15)
    assert h.a2 == pytest.approx(beta ** 2 / np.sqrt(2), rel=1e-15)
    assert h.nu == pytest.approx(np.expm1(beta ** 2), rel=1e-15)
    # the same data at the logit scale alpha, through the setting, and through scaled()
    for alpha in (0.7, 1.3):
        direct = hermite.coefficients(exponential(beta), alpha)
        assert al.Setting(c=0.5, f=exponential(beta), alpha=alpha).hermite == direct
        assert hermite.coefficients(scaled(exponential(beta), alpha)) == direct
        # the quadrature (a plain callable, no closed form) agrees to rounding (measured <= 2e-15)
        quad = hermite.coefficients(lambda t, b=beta: np.expm1(b * t - b * b / 2), alpha)
        np.testing.assert_allclose([quad.a0, quad.a1, quad.a2, quad.nu],
                                   [direct.a0, direct.a1, direct.a2, direct.nu],
                                   rtol=1e-12, atol=1e-13)


def test_quadrature_of_growing_f_has_no_nan():
    # before the fix: nu = NaN from beta = 0.9 (exp(2 beta x) * 0 in the tails), all NaN at 1.5
    for beta in (0.9, 1.0, 1.5):
        h = hermite.coefficients(lambda t, b=beta: np.exp(b * t - b * b / 2) - 1)
        assert np.isfinite([h.a0, h.a1, h.a2, h.nu]).all()
        assert h.nu == pytest.approx(np.expm1(beta ** 2), rel=1e-12)
    # a function that is not integrable against the Gaussian weight is refused, not NaN
    with pytest.raises(ValueError, match="not finite"):
        hermite.coefficients(lambda t: np.where(np.abs(t) > 20.0, np.inf, 0.0))
