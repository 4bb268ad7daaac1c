"""Ridge deterministic equivalent: limits and agreement with Monte Carlo at n = 2048."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib.theory import marchenko_pastur as mp

GAMMAS = np.array([1e-3, 0.1, 1.0, 10.0])


def test_stieltjes_against_quadrature():
    c = 0.5
    lo, hi = mp.edges(c)
    x, w = np.polynomial.legendre.leggauss(4000)
    lam = lo + (hi - lo) * (x + 1) / 2
    dens = mp.density(lam, c) * (hi - lo) / 2
    for z in [-0.3, -2.0, 1.0 + 0.5j, 9.0 - 1j]:
        want = (w * dens / (lam - z)).sum() + mp.atom(c) / (0 - z)
        assert mp.stieltjes(z, c) == pytest.approx(want, abs=1e-6)
    assert (w * dens).sum() + mp.atom(c) == pytest.approx(1.0, abs=1e-6)


def test_stieltjes_derivative():
    z, h = np.array([-0.5, 2.0 + 1j]), 1e-6
    num = (mp.stieltjes(z + h, 2.0) - mp.stieltjes(z - h, 2.0)) / (2 * h)
    assert np.allclose(mp.stieltjes_derivative(z, 2.0), num, rtol=1e-7)


@pytest.mark.parametrize("c", [0.25, 0.5, 0.9])
@pytest.mark.parametrize("snr", [0.0, 1.0, 4.0])
def test_ridgeless_limit(c, snr):
    e = al.theory.ridge_error(al.Setting(c=c, snr=snr), 1e-9)
    assert e == pytest.approx((1 - c) / (1 + snr), rel=1e-6)


@pytest.mark.parametrize("c", [1.0, 2.0])
def test_interpolation_for_p_at_least_n_and_large_gamma(c):
    s = al.Setting(c=c, snr=1.0)
    e0, e_inf = al.theory.ridge_error(s, [1e-9, 1e7])
    assert e0 < 1e-3 and e_inf == pytest.approx(1.0, abs=1e-6)


def test_derivative_matches_finite_difference():
    s = al.Setting(c=0.7, snr=2.0)
    g, h = 0.3, 1e-5

    def F(gam):  # y^T Q y / n = q(-gamma/c)/c
        return al.theory.ridge.ridge_resolvent_form(s, np.array(-gam / s.c))[0] / s.c
    num = -g ** 2 * (F(g + h) - F(g - h)) / (2 * h)
    assert al.theory.ridge_error(s, g) == pytest.approx(num, rel=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("c", [0.25, 0.5, 2.0])
@pytest.mark.parametrize("snr", [0.0, 1.0, 4.0])
def test_against_simulation_n2048(c, snr):
    s = al.Setting(c=c, snr=snr)
    r = al.simulate.errors(s, GAMMAS, n=2048, trials=4, seed=11, attention=False)
    theory = al.theory.ridge_error(s, GAMMAS)
    # Tolerance: 4 standard errors of the Monte Carlo mean (from the measured spread, ddof=1)
    # plus 4/n for the finite-size bias. Measured with 300 trials at n = 256 (all nine settings)
    # and n = 512 (c <= 0.5): |mean - theory| * n <= 0.8, always within 2 standard errors, so the
    # bias is below 1/n; 4/n leaves a factor 4. Per-draw spread at n = 2048 is 0.0003-0.015.
    tol = 4 * r.ridge.sem + 4 / 2048
    assert np.all(np.abs(r.ridge.mean - theory) <= tol), (r.ridge.mean, theory, tol)


@pytest.mark.parametrize("bad, exc", [(0.0, ValueError), ([1.0, -1.0], ValueError),
                                      ([[1.0]], ValueError), ("x", TypeError)])
def test_bad_gammas(bad, exc):
    with pytest.raises(exc, match="gammas"):
        al.theory.ridge_error(al.Setting(c=1.0), bad)


def test_bad_setting():
    with pytest.raises(TypeError, match="setting"):
        al.theory.ridge_error(0.5, 1.0)


def test_rank_setting_depends_on_c_and_snr_only():
    """Ridge on X = mu y^T + Z ignores the weights: a rank-3 RankSetting gives the Setting's
    error and resolvent form with the same c and snr, whatever its weights and f."""
    rng = np.random.default_rng(3)
    mu = rng.standard_normal(7)
    mu *= np.sqrt(1.7) / np.linalg.norm(mu)
    rank = al.RankSetting.from_vectors(0.5, mu, rng.standard_normal((3, 7)),
                                       rng.standard_normal((3, 7)), f="relu", alpha=0.3)
    one = al.Setting(c=0.5, snr=1.7)
    assert np.allclose(al.theory.ridge_error(rank, GAMMAS), al.theory.ridge_error(one, GAMMAS),
                       rtol=1e-13, atol=0)
    z = -GAMMAS / 0.5
    for a, b in zip(al.theory.ridge.ridge_resolvent_form(rank, z),
                    al.theory.ridge.ridge_resolvent_form(one, z)):
        assert np.allclose(a, b, rtol=1e-13, atol=0)
    assert not np.allclose(al.theory.ridge_error(al.Setting(c=0.5, snr=1.0), GAMMAS),
                           al.theory.ridge_error(rank, GAMMAS))
