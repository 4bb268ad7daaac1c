"""The row-space bound: at c < 1 the ridgeless error of Phi = X K against ridge's rank bound."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from attn_lib import Setting
from attn_lib.simulation.resolvent import interpolation_error
from attn_lib.simulation.trials import standard_error
from attn_lib.studies import row_space, sweeps

EXAMPLE = dict(c=0.3, f="sign", wk_norm=2.0, wq_norm=3.5)


def test_ridgeless_error_is_the_small_gamma_limit():
    rng = np.random.default_rng(0)
    Phi, y = rng.standard_normal((12, 40)), np.sign(rng.standard_normal(40))
    E = interpolation_error(Phi, y, np.array([1e-7]))[0]
    assert row_space.ridgeless_error(Phi, y) == pytest.approx(E, rel=1e-5)
    with pytest.raises(ValueError, match="Phi"):
        row_space.ridgeless_error(Phi, y[:-1])


def test_linear_part_keeps_the_row_space_exactly():
    # a1 (X^T M X / p - m0 I) maps range(X^T) into itself: the ridgeless errors agree to rounding
    for s in (Setting(snr=2.0, **EXAMPLE), Setting(c=0.5, snr=1.0, f="tanh", wk_norm=2.0,
                                                    wq_norm=1.0, cos_mu_wk=0.3, cos_mu_wq=0.8,
                                                    cos_wk_wq=0.5)):
        r = row_space.ridgeless_errors(s, 120, trials=3, seed=1)
        np.testing.assert_allclose(r["linear_part"], r["ridge"], atol=1e-12)
        assert np.all(r["ridge"] > 0.02)


def test_zero_diagonal_leaves_the_row_space():
    # the exact zero diagonal is not a multiple of I: linear attention (nu = a1^2, no Wigner part)
    # then differs from ridge at finite p, although its limit is the bound
    s = Setting(c=0.3, snr=6.0, f="linear", wk_norm=2.0, wq_norm=3.5)
    r = row_space.ridgeless_errors(s, 120, trials=2, seed=0)
    assert np.all(np.abs(r["attention"] - r["ridge"]) > 1e-6)
    np.testing.assert_allclose(r["equivalent"], r["ridge"], atol=1e-12)  # b2 = 0


@pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")  # outside on purpose: strong shifts
@pytest.mark.parametrize("c", [0.3, 0.8])
def test_limit_theory_never_below_the_rank_bound(c):
    settings = [Setting(c=c, snr=s, f=f, wk_norm=w, wq_norm=w, cos_mu_wk=k, cos_mu_wq=k)
                for s in (0.0, 1.0, 5.0) for f in ("tanh", "relu", "cos")
                for w, k in ((2.0, 0.0), (1.0, 1.0), (3.0, 1.0))]
    E = sweeps.equivalents(settings, 1e-5)
    bound = np.array([(1 - s.c) / (1 + s.snr) for s in settings])
    assert np.all(E > bound - 1e-9)
    zero = np.array([s.snr == 0 for s in settings])
    np.testing.assert_allclose(E[zero], 1 - c, atol=5e-5)  # equality without signal, up to O(gamma)
    assert np.max(E - bound) > 0.15                                  # a1 = 0 is far above it
    # the ridge theory reaches the bound itself
    np.testing.assert_allclose(sweeps.equivalents(settings[:3], 1e-7, model="ridge"),
                               bound[:3], atol=1e-5)


def test_wigner_part_costs_what_the_limit_theory_says():
    # orthogonal weights: the Wigner part tilts the row space, and the limit theory puts the
    # paired excess over ridge at +0.0069; 24 draws at n = 256 (s.e. about 0.003)
    s = Setting(c=0.5, snr=2.0, f="tanh", wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.0, cos_mu_wq=0.0)
    r = row_space.ridgeless_errors(s, 256, trials=24, seed=3)
    d = r["equivalent"] - r["ridge"]
    excess = sweeps.equivalents([s], 1e-5)[0] - 0.5 / 3
    assert excess == pytest.approx(0.0069, abs=5e-4)
    assert abs(d.mean() - excess) < 4 * standard_error(d, 0)


def test_attention_kernel_goes_below_the_bound_at_large_delta():
    # the worked example at SNR 6, n = 300 (delta = 5): the kernel evaluated off-centre
    s = Setting(snr=6.0, **EXAMPLE)
    r = row_space.ridgeless_errors(s, 300, trials=4, seed=0)
    assert s.delta(300) > 4
    assert np.all(r["attention"] < 0.5 * r["ridge"])
    assert r.mean("ridge") == pytest.approx(0.1, abs=0.01)
    # y_i = sign(mu^T x_i) for Phi(sqrt 6) = 99.3 % of the tokens
    agree = r["sign_agreement"]
    assert abs(agree.mean() - norm.cdf(np.sqrt(6.0))) < 4 * np.sqrt(0.0072 / 1200)


def test_rotation_average_of_the_wigner_tilt():
    # The identity behind the bound: K^T range(X^T) = range(Q_S A + Q_perp H) (the linear part has
    # no Q_perp block), the law of H is invariant under H -> O H, and the captured label energy
    # averaged over Haar O is y_S^T A G^-1 A^T y_S + rho_perp tr(H G^-1 H^T), with
    # G = A^T A + H^T H and rho_perp = |y_perp|^2 / (n - p)
    from scipy.linalg import null_space, orth
    from scipy.stats import ortho_group

    from attn_lib.model import data

    rng = np.random.default_rng(5)
    n, p, a1, b = 60, 20, 0.8, 0.6
    mu = np.zeros(p)
    mu[0] = np.sqrt(2.0)
    y = data.labels(n, rng)
    X = np.outer(mu, y) + rng.standard_normal((p, n))
    M = np.eye(p) + np.outer(rng.standard_normal(p), rng.standard_normal(p)) / np.sqrt(p)
    L = a1 * (X.T @ M @ X / p - np.trace(M) / p * np.eye(n))
    K = L + b * data.goe(n, rng) / np.sqrt(p)
    QS, Qp = orth(X.T), null_space(X)
    assert np.max(np.abs(Qp.T @ L.T @ QS)) < 1e-12          # the linear part keeps range(X^T)
    A, H = QS.T @ K.T @ QS, Qp.T @ K.T @ QS
    yS, yp = QS.T @ y, Qp.T @ y
    G = A.T @ A + H.T @ H

    def captured(H_):
        g = A.T @ yS + H_.T @ yp
        return g @ np.linalg.solve(G, g)

    # with O = I the captured energy is that of the row space of X K
    assert captured(H) == pytest.approx(n * (1 - row_space.ridgeless_error(X @ K, y)), rel=1e-9)
    predicted = yS @ A @ np.linalg.solve(G, A.T @ yS) + yp @ yp / (n - p) * np.trace(
        H @ np.linalg.solve(G, H.T))
    draws = np.array([captured(rot @ H)
                      for rot in ortho_group.rvs(n - p, size=1500, random_state=6)])
    assert abs(draws.mean() - predicted) < 4 * draws.std(ddof=1) / np.sqrt(draws.size)
    assert abs(draws.mean() - captured(H)) > 0 and draws.std() > 0.1
