"""attn_lib.studies.sweeps: nonlinearity families, batched theory and Monte Carlo over settings."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from attn_lib import Setting, hermite, simulate
from attn_lib.model.nonlinearity import REGISTRY, mixture, normalised
from attn_lib import cache
from attn_lib.studies import sweeps
from attn_lib.theory import ridge_error

GAMMAS = np.array([1e-2, 1e-1, 1.0])


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_BOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------ nonlinearity families
@pytest.mark.parametrize("base", ["tanh", "cos", "relu", "sign", "sin"])
@pytest.mark.parametrize("nu", [1.0, 0.25])
def test_normalised_has_target_variance_and_same_shape(base, nu):
    f = normalised(base, nu)
    h, h0 = hermite.coefficients(f), hermite.coefficients(base)
    assert h.nu == pytest.approx(nu, rel=1e-9)
    # rescaling the output keeps a1^2 / nu
    assert h.a1 ** 2 / h.nu == pytest.approx(h0.a1 ** 2 / h0.nu, rel=1e-9, abs=1e-14)
    t = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(f(t), f.gain * REGISTRY[base](t))


@pytest.mark.parametrize("theta", [0.0, 0.3, np.pi / 4, 1.2, np.pi / 2])
def test_mixture_moves_a1_at_fixed_nu(theta):
    h = hermite.coefficients(mixture(theta))
    assert h.a0 == pytest.approx(0.0, abs=1e-10)
    assert h.a1 == pytest.approx(np.cos(theta), abs=1e-10)
    assert h.nu == pytest.approx(1.0, rel=1e-9)
    assert h.b2 == pytest.approx(np.sin(theta) ** 2, abs=1e-9)


def test_mixture_with_a_function_that_has_a_linear_part():
    # tanh has a1 != 0: mixture removes it from h, so a1 is still cos(theta)
    h = hermite.coefficients(mixture(np.pi / 2, h="tanh"))
    assert h.a1 == pytest.approx(0.0, abs=1e-10)
    assert h.nu == pytest.approx(1.0, rel=1e-9)


def test_families_are_hashable_cache_keys_and_picklable():
    s = Setting(c=0.5, snr=1.0, f=mixture(0.5))
    assert hash(s.f) == hash(mixture(0.5))
    assert cache.key(simulate.errors, {"setting": s}) != cache.key(
        simulate.errors, {"setting": Setting(c=0.5, snr=1.0, f=mixture(0.6))})
    assert pickle.loads(pickle.dumps(s)) == s
    assert pickle.loads(pickle.dumps(normalised("tanh"))) == normalised("tanh")


@pytest.mark.parametrize("kwargs, exc", [
    ({"base": "nope"}, ValueError),
    ({"base": 3}, TypeError),
    ({"base": "tanh", "nu": 0.0}, ValueError),
    ({"base": "tanh", "nu": float("nan")}, ValueError),
])
def test_normalised_validation(kwargs, exc):
    with pytest.raises(exc):
        normalised(**kwargs)


@pytest.mark.parametrize("kwargs, exc", [
    ({"theta": -0.1}, ValueError),
    ({"theta": 1.6}, ValueError),
    ({"theta": "a"}, TypeError),
    ({"theta": 0.5, "h": "linear"}, ValueError),
    ({"theta": 0.5, "h": "nope"}, ValueError),
])
def test_mixture_validation(kwargs, exc):
    with pytest.raises(exc):
        mixture(**kwargs)


# ------------------------------------------------------------------ theory over settings
def test_theory_ridge_matches_ridge_error():
    settings = [Setting(c=0.5, snr=s) for s in (0.0, 1.0, 3.0)]
    out = sweeps.equivalents(settings, GAMMAS, model="ridge")
    assert out.shape == (3, GAMMAS.size)
    for row, s in zip(out, settings):
        np.testing.assert_allclose(row, ridge_error(s, GAMMAS))
    assert sweeps.equivalents(settings, 0.1, model="ridge").shape == (3,)


def test_theory_attention_shape_and_mu0_independence_of_weights():
    settings = [Setting(c=0.5, snr=0.0, wk_norm=w, wq_norm=w) for w in (0.0, 1.0, 2.0)]
    out = sweeps.equivalents(settings, GAMMAS)
    assert out.shape == (3, GAMMAS.size)
    assert np.all((out > 0) & (out <= 1))
    # random inputs: the weights drop out
    np.testing.assert_allclose(out, np.broadcast_to(out[0], out.shape), rtol=1e-8)


@pytest.mark.parametrize("kwargs, exc", [
    ({"settings": [], "gammas": GAMMAS}, ValueError),
    ({"settings": [1.0], "gammas": GAMMAS}, TypeError),
    ({"settings": [Setting(c=1.0)], "gammas": [-1.0]}, ValueError),
    ({"settings": [Setting(c=1.0)], "gammas": GAMMAS, "model": "lasso"}, ValueError),
])
def test_theory_validation(kwargs, exc):
    with pytest.raises(exc):
        sweeps.equivalents(**kwargs)


# ------------------------------------------------------------------ Monte Carlo over settings
def test_monte_carlo_matches_simulate_and_pairs_the_gap(cache_env):
    settings = [Setting(c=0.5, snr=s, wk_norm=1.0, wq_norm=1.0) for s in (0.0, 2.0)]
    res = sweeps.simulations(settings, GAMMAS, n=64, trials=3, seed=1)
    assert res.attention.shape == res.ridge.shape == (2, 3, GAMMAS.size)
    np.testing.assert_array_equal(res.n, [64, 64])
    np.testing.assert_array_equal(res.p, [32, 32])
    direct = simulate.errors(settings[1], GAMMAS, n=64, trials=3, seed=1)
    np.testing.assert_allclose(res.attention[1], direct.attention.values)
    np.testing.assert_allclose(res.ridge[1], direct.ridge.values)
    np.testing.assert_allclose(res.values("gap"), res.attention - res.ridge)
    np.testing.assert_allclose(res.mean("ratio"), (res.attention / res.ridge).mean(axis=1))
    assert res.std("ridge").shape == (2, GAMMAS.size)
    assert any(cache_env.rglob("*.npz"))  # went through the disk cache
    again = sweeps.simulations(settings, GAMMAS, n=64, trials=3, seed=1)
    np.testing.assert_array_equal(again.attention, res.attention)


def test_monte_carlo_per_setting_n_and_ridge_only(cache_env):
    settings = [Setting(c=0.5, snr=1.0)] * 2
    res = sweeps.simulations(settings, 0.1, n=[32, 64], trials=2, attention=False,
                             use_cache=False)
    np.testing.assert_array_equal(res.n, [32, 64])
    assert res.attention is None and res.ridge.shape == (2, 2, 1)
    assert not any(cache_env.rglob("*.npz"))
    with pytest.raises(ValueError, match="without attention"):
        res.mean("gap")
    with pytest.raises(ValueError, match="model"):
        res.mean("lasso")


@pytest.mark.parametrize("kwargs, exc", [
    ({"n": [32]}, ValueError),
    ({"n": 0}, ValueError),
    ({"n": 32.0}, TypeError),
    ({"trials": 0}, ValueError),
    ({"seed": -1}, ValueError),
    ({"attention": 1}, TypeError),
])
def test_monte_carlo_validation(kwargs, exc):
    args = {"settings": [Setting(c=0.5)] * 2, "gammas": GAMMAS, "n": 32, "trials": 1}
    args.update(kwargs)
    with pytest.raises(exc):
        sweeps.simulations(**args)


# ------------------------------------------------------------------ the scale convention
@pytest.mark.parametrize("f, c, keep", [("tanh", 0.5, False), ("cos", 2.0, False),
                                        ("relu", 1.0, False), ("linear", 0.5, False),
                                        ("linear", 2.0, True)])
def test_feature_scale_matches_the_mean_feature_eigenvalue(f, c, keep):
    from attn_lib.model import data, kernel
    from attn_lib.model.nonlinearity import check_nonlinearity
    s = Setting(c=c, snr=1.0, f=f, wk_norm=1.0, wq_norm=1.0)
    n, rng = 1024, np.random.default_rng(3)
    d = data.draw(s, n, rng)
    K = kernel.attention_kernel(d.X, check_nonlinearity(s.f), d.w_K, d.w_Q, 1.0, keep,
                                a0=s.hermite.a0)
    tau = np.sum((d.X @ K) ** 2) / n ** 2
    # measured at n = 1024: within 3.5 % (tanh, c = 1/2: 1.167 against 1.128; the O(p^{-1/2})
    # corrections of the logits' variance); 8 % leaves room for the draw, a wrong term is >= 25 %
    assert tau == pytest.approx(sweeps.feature_scale(s, keep_diagonal=keep), rel=0.08)
    assert np.sum(d.X ** 2) / n ** 2 == pytest.approx(sweeps.feature_scale(s, "ridge"), rel=0.02)


def test_feature_scale_makes_gamma_scale_free():
    # E_{s Phi}(s^2 gamma) = E_Phi(gamma): measured in units of tau the error does not see s
    base = Setting(c=0.5, snr=1.0, f="tanh")
    twice = Setting(c=0.5, snr=1.0, f=normalised("tanh", 4.0 * hermite.coefficients("tanh").nu))
    assert sweeps.feature_scale(twice) == pytest.approx(4.0 * sweeps.feature_scale(base))
    g = np.array([1e-2, 1.0])
    from attn_lib.theory import attention_error
    np.testing.assert_allclose(attention_error(twice, sweeps.feature_scale(twice) * g),
                               attention_error(base, sweeps.feature_scale(base) * g), rtol=1e-6)


def test_feature_scale_rejects_bad_input():
    with pytest.raises(ValueError, match="keep_diagonal"):
        sweeps.feature_scale(Setting(c=0.5, f="tanh"), keep_diagonal=True)
    with pytest.raises(ValueError, match="keep_diagonal"):
        sweeps.feature_scale(Setting(c=0.5), "ridge", keep_diagonal=True)
    with pytest.raises(ValueError, match="model"):
        sweeps.feature_scale(Setting(c=0.5), "kernel")
    with pytest.raises(TypeError, match="keep_diagonal"):
        sweeps.feature_scale(Setting(c=0.5), keep_diagonal=1)


def test_matched_gamma_is_the_ratio_of_scales():
    s = Setting(c=0.5, f="tanh")
    ratio = sweeps.feature_scale(s) / sweeps.feature_scale(s, "ridge")
    assert sweeps.matched_gamma(s, 0.1) == pytest.approx(0.1 * ratio)
    np.testing.assert_allclose(sweeps.matched_gamma(s, GAMMAS), GAMMAS * ratio)
    with pytest.raises(ValueError, match="gamma"):
        sweeps.matched_gamma(s, -1.0)
