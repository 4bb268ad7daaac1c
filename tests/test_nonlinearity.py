"""attn_lib.model.nonlinearity: the one nonlinearity type, its families and break points."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import special

from attn_lib import Setting, hermite, simulate
from attn_lib import cache
from attn_lib.model import kernel
from attn_lib.model.nonlinearity import (REGISTRY, Nonlinearity, check_nonlinearity, mixture,
                                         normalised, reflected, scaled)

T = np.linspace(-3.0, 3.0, 13)


def _kinked(t):
    return np.abs(np.asarray(t, dtype=float) - 0.5)


_kinked.breaks = (0.5,)


def test_registry_holds_one_nonlinearity_per_name():
    assert all(isinstance(f, Nonlinearity) and f.base == name for name, f in REGISTRY.items())
    assert check_nonlinearity("relu") is REGISTRY["relu"]
    assert REGISTRY["trunc_relu"].breaks == (0.0, 2.0) and REGISTRY["tanh"].breaks == ()
    np.testing.assert_array_equal(REGISTRY["relu"](T), np.maximum(T, 0.0))


def test_user_callable_keeps_its_breaks_and_values():
    f = check_nonlinearity(_kinked)
    assert f.base is _kinked and f.breaks == (0.5,)
    np.testing.assert_array_equal(f(T), _kinked(T))
    # the quadrature splits at the declared kink: E|xi - c| = 2 phi(c) + c (2 Phi(c) - 1)
    c = 0.5
    exact = 2 * np.exp(-c * c / 2) / np.sqrt(2 * np.pi) + c * (2 * special.ndtr(c) - 1)
    assert hermite.coefficients(_kinked).a0 == pytest.approx(exact, abs=1e-10)


def test_scaled_and_reflected_move_the_breaks():
    assert scaled("trunc_relu", 2.0).breaks == (0.0, 1.0)
    assert scaled(_kinked, -1.0).breaks == (-0.5,)
    assert reflected("trunc_relu").breaks == (-2.0, 0.0)
    np.testing.assert_array_equal(scaled("tanh", -1.0)(T), np.tanh(-T))
    np.testing.assert_array_equal(scaled(_kinked, 2.0)(T), _kinked(2.0 * T))
    # a scaled registered name is one node; scaling a family nests it
    assert scaled("relu", 2.0) == Nonlinearity("relu", scale=2.0)
    assert scaled(normalised("relu"), 2.0).base == normalised("relu")


def test_families_match_their_formulas():
    h = hermite.coefficients("tanh")
    np.testing.assert_allclose(normalised("tanh", 0.5)(T), np.sqrt(0.5 / h.nu) * np.tanh(T))
    np.testing.assert_allclose(reflected("relu")(T), normalised("relu")(-T))
    g = hermite.coefficients("cos")
    want = np.cos(0.7) * T + np.sin(0.7) * (np.cos(T) - g.a0 - g.a1 * T) / np.sqrt(g.b2)
    np.testing.assert_allclose(mixture(0.7)(T), want)
    assert mixture(0.7) == Nonlinearity("cos", theta=0.7)


def test_setting_canonical_uses_the_scaled_type():
    s = Setting(c=0.5, f="relu", alpha=2.0).canonical()
    assert s.f == scaled("relu", 2.0) and s.alpha == 1.0
    assert Setting(c=0.5, f="relu").f == "relu"  # the given f is kept as is


def test_hashable_picklable_and_a_stable_cache_description():
    for f in (REGISTRY["sign"], normalised("tanh"), mixture(0.5, "relu"), reflected("relu"),
              scaled(normalised("cos"), 1.5)):
        assert hash(f) == hash(pickle.loads(pickle.dumps(f)))
        assert pickle.loads(pickle.dumps(f)) == f
        k = cache.key(simulate.errors, {"setting": Setting(c=0.5, f=f)})
        assert k == cache.key(simulate.errors, {"setting": Setting(c=0.5, f=f)})
    assert cache.key(simulate.errors, {"f": mixture(0.5)}) != cache.key(
        simulate.errors, {"f": mixture(0.6)})


def test_kernel_evaluates_a_registered_ufunc_in_place():
    T2 = np.random.default_rng(0).standard_normal((5, 5))
    want = np.tanh(T2) * (1.0 / np.sqrt(3.0))  # the order of operations of kernel.apply
    np.fill_diagonal(want, 0.0)
    K = kernel.apply(REGISTRY["tanh"], T2, 3, overwrite=True)
    assert K is T2 and REGISTRY["tanh"].ufunc is np.tanh and normalised("tanh").ufunc is None
    np.testing.assert_array_equal(K, want)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: Nonlinearity("nope"), ValueError, "base must be one of"),
    (lambda: Nonlinearity(3), TypeError, "base must be a registered name"),
    (lambda: Nonlinearity("tanh", scale=0.0), ValueError, "scale must be a non-zero"),
    (lambda: Nonlinearity("tanh", scale="2"), TypeError, "scale"),
    (lambda: Nonlinearity("tanh", nu=1.0, theta=0.1), ValueError, "both"),
    (lambda: Nonlinearity(np.tanh, nu=1.0), TypeError, "registered base"),
    (lambda: normalised("linear", nu=-1.0), ValueError, "nu"),
    (lambda: mixture(0.5, h=np.cos), TypeError, "h must be the name"),
    (lambda: mixture(2.0), ValueError, "theta"),
    (lambda: reflected("nope"), ValueError, "base"),
    (lambda: check_nonlinearity(lambda t: np.ones(2), "g"), ValueError, "g must be vectorised"),
    (lambda: check_nonlinearity(type("F", (), {"__call__": lambda self, t: t,
                                               "breaks": ("a",)})()), TypeError, "f.breaks"),
])
def test_validation(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
