"""The functions that accept a softmax setting: ridge, the feature scale, the linearisation and
the bulk (by the entry-wise equivalent), and the sweeps' Monte Carlo."""

import dataclasses

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model import data, kernel
from attn_lib.studies import sweeps
from attn_lib.theory import softmax

GAMMAS = np.array([1e-3, 0.1, 10.0])


def test_ridge_ignores_the_attention_kind():
    e = al.Setting(c=0.5, snr=2.0, wk_norm=1.0, wq_norm=1.0)
    s = dataclasses.replace(e, attention=al.Softmax(1.5))
    np.testing.assert_array_equal(al.theory.ridge_error(s, GAMMAS), al.theory.ridge_error(e, GAMMAS))
    # the simulator's ridge curve of a softmax setting is that of the same draws
    r_s = al.simulate.errors(s, GAMMAS, n=64, trials=2, seed=3)
    r_e = al.simulate.errors(e, GAMMAS, n=64, trials=2, seed=3)
    np.testing.assert_array_equal(r_s.ridge.values, r_e.ridge.values)
    assert sweeps.feature_scale(s, "ridge") == 0.5


def test_sweep_simulations_take_softmax_settings():
    s = al.Setting(c=0.5, snr=1.0, attention=al.Softmax(1.0))
    r = sweeps.simulations([s, dataclasses.replace(s, attention=al.Softmax(0.5))], GAMMAS, 64,
                           trials=2, use_cache=False)
    one = al.simulate.errors(s, GAMMAS, n=64, trials=2, seed=0)
    np.testing.assert_array_equal(r.attention[0], one.attention.values)
    assert not np.array_equal(r.attention[0], r.attention[1])


@pytest.mark.parametrize("beta", [0.5, 1.0])
def test_softmax_feature_scale_matches_the_mean_feature_eigenvalue(beta):
    # tau = s_n^2 tau_K + p / (n (n - 1)) against ||X A||_F^2 / n^2 of one draw (c = 1/2, n = 1024).
    # Measured over 4 draws: within 5.5 % (beta = 1/2) and 2.3 % (beta = 1); the spike's
    # ||Z 1||^2 is chi-square with p degrees (relative std sqrt(2 / p) = 6 %, times its share
    # 0.56 of the trace at beta = 1/2). Without the spike term the gap is 24-37 %.
    s = al.Setting(c=0.5, attention=al.Softmax(beta))
    n = 1024
    d = data.draw(s, n, np.random.default_rng(0))
    tau = np.sum((d.X @ kernel.softmax_kernel(d.X, d.w_K, d.w_Q, beta)) ** 2) / n ** 2
    assert tau == pytest.approx(sweeps.feature_scale(s, n=n), rel=0.1)
    kernel_part = softmax.scale(s, n) ** 2 * sweeps.feature_scale(softmax.entrywise_equivalent(s))
    assert tau > 1.2 * kernel_part
    # the limit: (c / n) (tau_K + 1)
    big = 10 ** 6
    assert sweeps.feature_scale(s, n=big) * big / 0.5 == pytest.approx(
        sweeps.feature_scale(softmax.entrywise_equivalent(s)) + 1.0, rel=1e-5)


def test_softmax_feature_scale_rejects_bad_input():
    s = al.Setting(c=0.5, attention=al.Softmax(1.0))
    with pytest.raises(ValueError, match="n: the scale of softmax"):
        sweeps.feature_scale(s)
    with pytest.raises(ValueError, match="keep_diagonal"):
        sweeps.feature_scale(s, keep_diagonal=True, n=512)
    with pytest.raises(ValueError, match="mask"):
        sweeps.feature_scale(al.Setting(c=0.5, attention=al.Softmax(1.0, mask=False)), n=512)
    with pytest.raises(TypeError, match="n"):
        sweeps.feature_scale(s, n=512.5)
    # entry-wise scales have an n-free limit
    e = al.Setting(c=0.5, f="tanh")
    assert sweeps.feature_scale(e, n=512) == sweeps.feature_scale(e)


@pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")  # outside on purpose
def test_linearisation_and_bulk_of_softmax_are_the_entrywise_equivalents():
    s = al.Setting(c=0.5, alpha=0.8, attention=al.Softmax(1.5))
    e = softmax.entrywise_equivalent(s)
    lin = al.theory.linearisation(s)
    assert lin == al.theory.linearisation(e)
    # f_beta(alpha t) = e^{beta alpha t - beta^2 / 2} - 1: a1 = beta alpha e^{beta^2 (alpha^2 - 1) / 2}
    b = 1.5 * 0.8
    assert lin.a1 == pytest.approx(b * np.exp(1.5 ** 2 * (0.8 ** 2 - 1) / 2), rel=1e-10)
    one = al.theory.linearisation(al.Setting(c=0.5, attention=al.Softmax(1.5)))
    assert one.a1 == pytest.approx(1.5, rel=1e-12) and one.nu == pytest.approx(np.expm1(2.25))
    bulk = al.theory.attention_bulk(s, GAMMAS)
    np.testing.assert_array_equal(bulk.error, al.theory.attention_bulk(e, GAMMAS).error)
    # on random inputs the bulk's error is the softmax error at the effective gammas
    np.testing.assert_allclose(bulk.error, al.theory.attention_error(s, GAMMAS), rtol=1e-10)
    with pytest.raises(ValueError, match="mask"):
        al.theory.linearisation(al.Setting(c=0.5, attention=al.Softmax(1.0, mask=False)))
