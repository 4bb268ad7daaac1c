"""The studies of the softmax chapter (attn_lib.studies.softmax)."""

from __future__ import annotations

import numpy as np
import pytest

from attn_lib import Setting, Softmax, simulate
from attn_lib.studies import softmax as study
from attn_lib.studies import sweeps
from attn_lib.theory import softmax as theory

# the chapter's settings, past the tail edge and the regular regime on purpose
pytestmark = [pytest.mark.usefixtures("book_cache_off"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]

S = Setting(c=1.0, attention=Softmax(1.0))


def test_compare_is_the_simulator_at_each_models_gamma():
    g = np.array([0.01, 0.1, 1.0])
    r = study.compare(S, g, n=48, trials=2, seed=3, with_unmasked=True)
    direct = simulate.errors(S, g, n=48, trials=2, seed=3, relative=True)  # tau_A g and c g
    np.testing.assert_array_equal(r.softmax, direct.attention.values)
    np.testing.assert_array_equal(r.ridge, direct.ridge.values)
    ridge = simulate.errors(S, S.c * g, n=48, trials=2, seed=3, attention=False)
    np.testing.assert_array_equal(r.ridge, ridge.ridge.values)
    ew = theory.entrywise_equivalent(S)
    np.testing.assert_array_equal(
        r.entrywise, simulate.errors(ew, sweeps.feature_scale(ew) * g, n=48, trials=2,
                                     seed=3).attention.values)
    um = simulate.errors(study.unmasked(S), S.c * g, n=48, trials=2, seed=3)
    np.testing.assert_array_equal(r.unmasked, um.attention.values)
    np.testing.assert_array_equal(r.mean("gap"), (r.softmax - r.ridge).mean(axis=0))
    th = study.compare_theory(S, g, n=48)
    np.testing.assert_array_equal(r.theory_softmax, th["softmax"])
    np.testing.assert_array_equal(r.theory_finite, th["finite"])


def test_compare_theory_finite_size_at_n_and_its_refusal():
    from attn_lib.theory import attention_error

    g = np.array([0.01, 0.1, 1.0])
    geff = theory.effective_gamma(S, sweeps.feature_scale(S, n=48) * g, 48)
    th = study.compare_theory(S, g, n=48)
    np.testing.assert_array_equal(th["finite"], attention_error(S, geff, n=48))
    assert not np.allclose(th["finite"], th["softmax"])   # the mean part at n = 48
    # aligned weights of norm 2 at c = 1/2, n = 128: 2 beta ||M_r|| / sqrt(p) = 10 / 8 >= 1
    refused = Setting(c=0.5, snr=2.0, wk_norm=2.0, wq_norm=2.0, attention=Softmax(1.0))
    assert theory.tail(refused, 128) >= 1.0
    th = study.compare_theory(refused, g, n=128)
    assert th["finite"] is None and np.all(np.isfinite(th["softmax"]))


def test_compare_refuses_what_it_does_not_cover():
    with pytest.raises(ValueError, match="attention"):
        study.compare(Setting(c=1.0), [0.1], n=32, trials=1)
    with pytest.raises(ValueError, match="mask"):
        study.compare(study.unmasked(S), [0.1], n=32, trials=1)
    with pytest.raises(ValueError, match="g"):
        study.compare(S, [-0.1], n=32, trials=1)
    r = study.compare(S, [0.1], n=32, trials=1, entrywise=False)
    with pytest.raises(ValueError, match="model"):
        r.mean("entrywise")


def test_normalisation_spread_matches_its_prediction():
    # measured in book/derivation_softmax.md: 0.0258 against 0.0260 at beta = 0.5, n = 512, and
    # here 0.0651 against 0.0659 at beta = 1, c = 1, n = 512 (3 draws); the spread of the
    # estimate over queries is ~ 1 / sqrt(2 n) = 3 % relative, so 8 % rejects a wrong variance
    s = Setting(c=1.0, attention=Softmax(1.0))
    r = study.normalisation_draws(s, 512, trials=2, seed=0)
    assert r.mean("eps_std") == pytest.approx(theory.normalisation_std(s, 512), rel=0.08)
    assert abs(r.mean("eps_mean")) < 0.02


def test_self_weight_limit_against_simulation():
    # measured: 0.2928 vs 0.2942 (p = 64), 0.4985 vs 0.4979 (p = 128) at beta = 0.5 (2 draws);
    # the tolerance is 5x the larger gap
    for p in (64, 128):
        s = Setting(c=0.5, attention=Softmax(0.5, mask=False))
        sim = simulate.self_weight(s, n=2 * p, trials=2, seed=0).mean("self_weight")
        assert sim == pytest.approx(study.self_weight_limit(s, 2 * p), abs=0.007)
    with pytest.raises(ValueError, match="snr"):
        study.self_weight_limit(Setting(c=0.5, snr=1.0, attention=Softmax(0.5)), 64)


def test_kurtosis_is_the_fourth_over_the_squared_second_moment():
    # against adaptive quadrature of f_beta(x)^k phi(x) (relative error ~1e-10): the closed
    # form must agree to 1e-8, far below the factor ~100 between beta = 1 and 1.5
    from scipy import integrate

    def moment(beta: float, k: int) -> float:
        f = lambda x: np.expm1(beta * x - beta * beta / 2) ** k * np.exp(-x * x / 2)  # noqa: E731
        return integrate.quad(f, -40.0, 40.0, epsabs=0.0, epsrel=1e-12, limit=400,
                              points=[4 * beta])[0] / np.sqrt(2 * np.pi)

    for beta in (0.1, 0.5, 1.0, 1.5):
        assert study.kurtosis(beta) == pytest.approx(moment(beta, 4) / moment(beta, 2) ** 2,
                                                     rel=1e-8)
    assert study.kurtosis(1e-3) == pytest.approx(3.0, rel=1e-4)  # Gaussian as beta -> 0
    with pytest.raises(ValueError, match="beta"):
        study.kurtosis(0.0)


def test_tail_beta_solves_kurtosis_equals_n_and_tends_to_half_sqrt_log_n():
    for n in (9, 256, 2048, 10 ** 6):
        assert study.kurtosis(study.tail_beta(n)) == pytest.approx(n, rel=1e-9)
    assert study.tail_beta(2048) == pytest.approx(1.3498, abs=1e-4)
    # kurtosis ~ e^{6 beta^2} / e^{2 beta^2} = e^{4 beta^2} at large beta, so beta* / (sqrt(log n)
    # / 2) -> 1 slowly: 0.978 at n = 2048, 0.998 at 10^6
    assert study.tail_beta(10 ** 6) / (np.sqrt(np.log(10 ** 6)) / 2) == pytest.approx(1.0, abs=0.01)
    with pytest.raises(ValueError, match="n"):
        study.tail_beta(8)


def test_gaussian_equivalent_is_close_in_spectrum_and_a_wrong_scale_is_not():
    # measured relative W1 at beta = 1, c = 1/2: 4.8-6.0 % at n = 256 (3 draws)
    s = Setting(c=0.5, attention=Softmax(1.0))
    r = study.spectrum_draws(s, 256, trials=2, seed=0)
    w = study.wasserstein(r["softmax"], r["equivalent"])
    assert np.all(w < 0.08)
    assert np.all(study.wasserstein(r["softmax"], 1.2 * r["equivalent"]) > 0.12)
    np.testing.assert_array_equal(study.wasserstein(r["softmax"], r["softmax"]), 0.0)
    assert np.all(np.abs(r["softmax"][:, 0] - 1) < 0.05)  # the mean part's outlier


def test_gaussian_equivalent_structure():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 40))
    G = study.gaussian_equivalent(X, 0.5, rng)
    assert G.shape == (40, 40) and np.all(np.diag(G) == 0)
    # off the kernel part, each column of the mean part sums to one
    G0 = study.gaussian_equivalent(X, 1e-12, rng)
    np.testing.assert_allclose(G0.sum(axis=0), 1.0, atol=1e-9)


def test_bad_inputs():
    with pytest.raises(ValueError, match="a and b"):
        study.wasserstein(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="M = I"):
        study.spectrum_draws(Setting(c=0.5, wk_norm=1.0, attention=Softmax(1.0)), 32, 1)
    with pytest.raises(TypeError, match="n"):
        study.normalisation_draws(S, 3.5, 1)
