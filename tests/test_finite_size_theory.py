"""The finite-size (strong-alignment) equivalent: shift data, limits, derivative, simulation."""

import numpy as np
import pytest
from scipy import special

from attn_lib import Setting, hermite, simulate
from attn_lib.theory import ConvergenceError, attention_error, attention_resolvent_form
from attn_lib.theory import _finite_size as finite_size
from attn_lib.theory.shift import shift_functions

# small n and strong shifts on purpose (the solver and its limits)
pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

GAMMAS = np.array([1e-3, 0.1, 1.0])


def test_shift_functions_closed_forms():
    h = np.linspace(-7.5, 7.5, 301)
    F0, F1, S2 = shift_functions("sign")(h)
    np.testing.assert_allclose(F0, special.erf(h / np.sqrt(2)), atol=1e-8)
    np.testing.assert_allclose(F1, 2 * np.exp(-h ** 2 / 2) / np.sqrt(2 * np.pi), atol=1e-8)
    np.testing.assert_allclose(S2, 1 - F0 ** 2 - F1 ** 2, atol=1e-8)
    F0, F1, _ = shift_functions("erf")(h)
    np.testing.assert_allclose(F0, special.erf(h / np.sqrt(3)), atol=1e-8)
    np.testing.assert_allclose(F1, 2 / np.sqrt(3 * np.pi) * np.exp(-h ** 2 / 3), atol=1e-8)


def test_compiled_spline_evaluation_is_the_numpy_formula():
    # attn_lib.theory._spline.evaluate: the same arithmetic as the NumPy expression, bit for bit,
    # on a grid with both ends of the table and shifts beyond it (there: direct quadrature)
    from attn_lib.theory import shift
    t = shift_functions("tanh", 1.0, 8.0)
    h = np.concatenate([np.linspace(-8.0, 8.0, 1001), [-8.0, 8.0, 1e-17, -12.5, 70.0]]).reshape(2, -1)
    k = np.clip(np.floor((h + t.h_max) / shift._STEP), 0, len(t.coef) - 1).astype(np.intp)
    d = (h - (k * shift._STEP - t.h_max))[..., None]
    c = t.coef[k]
    v = ((c[..., 0, :] * d + c[..., 1, :]) * d + c[..., 2, :]) * d + c[..., 3, :]
    inside = np.abs(h) <= t.h_max
    got = t(h)
    for j in range(3):
        np.testing.assert_array_equal(got[j][inside], np.maximum(v[..., j], 0.0)[inside] if j == 2 else v[..., j][inside])
    np.testing.assert_array_equal(t.curvature(h)[inside], v[..., 3][inside])
    far = shift.expectations(t.g, t.breaks, h[~inside])
    np.testing.assert_allclose(got[1][~inside], far[1], rtol=0, atol=0)


def test_curvature_closed_forms():
    # F2 = E[(xi^2 - 1) f(xi + h)] = F0'': sign: F0 = erf(h / sqrt 2), F0'' = -h sqrt(2 / pi)
    # exp(-h^2 / 2); erf(a t): F0 = erf(a h / sqrt q), q = 1 + 2 a^2, F0'' = -(2 a^2 h / q) F0';
    # cos (centred by a0 = e^{-1/2}): F0 = e^{-1/2} (cos h - 1), F0'' = -e^{-1/2} cos h;
    # quadratic: F0 = h^2, F0'' = 2. Same accuracy as F0 and F1 (splines, 1e-8).
    h = np.linspace(-7.5, 7.5, 301)
    np.testing.assert_allclose(shift_functions("sign").curvature(h),
                               -h * np.sqrt(2 / np.pi) * np.exp(-h ** 2 / 2), atol=1e-8)
    for a in (1.0, 0.5):
        q = 1 + 2 * a ** 2
        d1 = 2 * a / np.sqrt(np.pi * q) * np.exp(-a ** 2 * h ** 2 / q)
        np.testing.assert_allclose(shift_functions("erf", scale=a).curvature(h), -2 * a ** 2 * h / q * d1,
                                   atol=1e-8)
    np.testing.assert_allclose(shift_functions("cos").curvature(h), -np.exp(-0.5) * np.cos(h), atol=1e-8)
    np.testing.assert_allclose(shift_functions("quadratic").curvature(h), 2.0, atol=1e-8)
    # beyond the table: direct quadrature, same closed form
    far = np.array([-300.0, 70.5])
    np.testing.assert_allclose(shift_functions("cos", h_max=4.0).curvature(far), -np.exp(-0.5) * np.cos(far),
                               atol=1e-10)


@pytest.mark.parametrize("f", ["tanh", "relu", "trunc_exp", "cos"])
def test_shift_functions_at_zero_are_the_hermite_data(f):
    sf = shift_functions(f)
    F0, F1, S2 = sf(np.array(0.0))
    h = hermite.coefficients(f)
    assert abs(F0) < 1e-10
    assert F1 == pytest.approx(h.a1, abs=1e-8)
    assert S2 == pytest.approx(h.nu - h.a1 ** 2, abs=1e-8)
    assert sf.curvature(np.array(0.0)) == pytest.approx(np.sqrt(2) * h.a2, abs=1e-8)


@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_shifts_beyond_the_table_are_integrated_directly(scale):
    # The table stops at |h| = 64 (and at h_max); beyond, F0 and F1 come from direct quadrature and
    # must still match the closed forms of erf (a small scale: GPT-2's layer 4 reduced to alpha = 1
    # needs |h| ~ 3000), as tightly as the table does (1e-8).
    sf = shift_functions("erf", scale=scale, h_max=4.0)
    assert sf.h_max == 4.0
    h = np.array([-3000.0, -64.5, -4.01, 3.99, 4.01, 70.3, 500.0])
    q = 1 + 2 * scale ** 2
    F0, F1, S2 = sf(h)
    np.testing.assert_allclose(F0, special.erf(scale * h / np.sqrt(q)), atol=1e-8)
    np.testing.assert_allclose(F1, 2 * scale / np.sqrt(np.pi * q) * np.exp(-scale ** 2 * h ** 2 / q), atol=1e-8)
    assert np.all(S2 >= 0)
    # a jump far from the table: sign's break at 0 sits on a panel edge of every shift's window
    F0, F1, _ = shift_functions("sign", h_max=1e4)(np.array([-100.0, 0.5, 65.25]))
    np.testing.assert_allclose(F0, special.erf(np.array([-100.0, 0.5, 65.25]) / np.sqrt(2)), atol=1e-12)


@pytest.mark.parametrize("setting", [
    Setting(c=0.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=1.0),                      # r = 1
    Setting(c=2.0, snr=2.0, f="relu", wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.6, cos_mu_wq=0.6),  # r = 2
    Setting(c=0.5, snr=1.0, f="linear", wk_norm=1.0, wq_norm=1.0),
], ids=["tanh-r1", "relu-r2", "linear"])
def test_large_n_reduces_to_the_proportional_limit(setting):
    # At n = 1e6 the shifts are O(1e-3): the finite-size equivalent must reproduce the
    # proportional DE up to O(delta) = 1e-3 (measured: 1e-6 to 3e-5).
    fs = attention_error(setting, GAMMAS, n=10 ** 6)
    np.testing.assert_allclose(fs, attention_error(setting, GAMMAS), atol=2e-4)


def test_random_inputs_agree_with_the_limit_at_any_n():
    # mu = 0 and no weights: no latent direction, h = 0, the two theories are the same equations
    s = Setting(c=0.7, f="sign")
    np.testing.assert_allclose(attention_error(s, GAMMAS, n=300), attention_error(s, GAMMAS), rtol=1e-7)


def test_gap_to_the_limit_shrinks_with_n():
    s = Setting(c=0.5, snr=4.0, f="tanh", wk_norm=2.0, wq_norm=2.0)
    lim = attention_error(s, 0.1)
    gaps = [abs(attention_error(s, 0.1, n=n) - lim) for n in (512, 8192, 131072)]
    assert gaps[0] > gaps[1] > gaps[2]


def test_derivative_matches_a_central_difference():
    s = Setting(c=0.3, snr=6.0, f="sign", wk_norm=2.0, wq_norm=3.5)
    g = np.array([0.05])
    q, dq = attention_resolvent_form(s, g, n=1024)
    h = 1e-4 * g
    qp, _ = attention_resolvent_form(s, g + h, n=1024)
    qm, _ = attention_resolvent_form(s, g - h, n=1024)
    assert dq[0] == pytest.approx((qp - qm)[0] / (2 * h[0]), rel=1e-5)


def test_quadrature_is_converged():
    # more Gauss-Hermite nodes per latent dimension change nothing visible
    s = Setting(c=1.0, snr=4.0, f="erf", wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.7, cos_mu_wq=0.7)
    base = finite_size.finite_size_resolvent_form(s, GAMMAS, 1024)[1]
    more = finite_size.finite_size_resolvent_form(s, GAMMAS, 1024, nodes=14)[1]
    np.testing.assert_allclose(GAMMAS ** 2 * base, GAMMAS ** 2 * more, atol=1e-5)


@pytest.mark.slow
def test_quadrature_is_converged_with_three_latent_directions():
    # r = 3 uses 6 nodes per dimension by default. Measured for this setting at n = 512:
    # gamma^2 d/dgamma form changes by at most 6.8e-6 from 6 to 8 nodes and 2.7e-6 from 6 to 10,
    # against a simulation tolerance of about 1e-3 there.
    s = FINITE_SIZE_CASES["erf-r3"]
    base = finite_size.finite_size_resolvent_form(s, GAMMAS, 512)[1]
    more = finite_size.finite_size_resolvent_form(s, GAMMAS, 512, nodes=8)[1]
    assert finite_size.latent_law(s, s.p(512)).r == 3
    np.testing.assert_allclose(GAMMAS ** 2 * base, GAMMAS ** 2 * more, atol=2e-5)


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_shift_functions_of_a_scaled_erf(scale):
    # E erf(a (h + Z)) = erf(a h / sqrt(1 + 2 a^2)); F1 is its derivative in h (Stein)
    h = np.linspace(-7.5, 7.5, 301)
    q = 1 + 2 * scale ** 2
    F0, F1, S2 = shift_functions("erf", scale=scale)(h)
    np.testing.assert_allclose(F0, special.erf(scale * h / np.sqrt(q)), atol=1e-8)
    np.testing.assert_allclose(F1, 2 * scale / np.sqrt(np.pi * q) * np.exp(-scale ** 2 * h ** 2 / q), atol=1e-8)
    assert np.all(S2 >= 0)


def test_shift_functions_of_an_unhashable_callable():
    class Tanh:  # defines __eq__ and so is unhashable
        breaks = ()

        def __eq__(self, other):
            return isinstance(other, Tanh)

        def __call__(self, t):
            return np.tanh(t)

    with pytest.raises(TypeError):
        hash(Tanh())
    h = np.linspace(-4, 4, 41)
    np.testing.assert_allclose(np.array(shift_functions(Tanh())(h)), np.array(shift_functions("tanh")(h)),
                               atol=1e-12)


def test_latent_shifts_carry_the_coherent_shift():
    # h(t, t') = xi_t^T M xi_t' / sqrt(p): averaged against the labels it is the signed coherent
    # shift mu^T (I + w_K w_Q^T) mu / sqrt(p) of the Setting (computed from the scalars, not the
    # latent basis); averaged without them it vanishes (balanced labels)
    for s in FINITE_SIZE_CASES.values():
        s = s.canonical()
        law = finite_size.latent_law(s, s.p(512))
        H = law.shifts()
        wy = law.weight * law.y
        assert H.shape == (law.y.size, law.y.size)
        assert wy @ H @ wy == pytest.approx(s.signed_delta(512), rel=1e-10)
        assert law.weight @ H @ law.weight == pytest.approx(0.0, abs=1e-12)
        np.testing.assert_allclose(H[0], law.xi[0] @ law.M @ law.xi.T / np.sqrt(s.p(512)), rtol=1e-12)


def test_latent_dimension():
    law = finite_size.latent_law(Setting(c=1.0, snr=2.0, wk_norm=1.0, wq_norm=1.0), 100)
    assert law.r == 1 and law.weight.sum() == pytest.approx(1.0)
    law = finite_size.latent_law(Setting(c=1.0, snr=2.0, wk_norm=1.0, wq_norm=2.0, cos_mu_wk=0.8,
                                         cos_mu_wq=0.6, cos_wk_wq=0.3), 100)
    assert law.r == 3
    assert law.M.shape == (3, 3)


def test_bad_n():
    s = Setting(c=0.5, snr=1.0)
    with pytest.raises(TypeError, match="n must be an integer"):
        attention_error(s, 0.1, n=512.0)
    with pytest.raises(ValueError, match="p = round"):
        attention_error(s, 0.1, n=10)


def test_non_convergence_raises(monkeypatch):
    monkeypatch.setattr(finite_size, "_MAX_ITER", 2)
    with pytest.raises(ConvergenceError, match="did not converge"):
        attention_error(Setting(c=0.5, snr=4.0, f="sign", wk_norm=2.0, wq_norm=2.0), 0.01, n=512)


# n = 512, 64 draws (seed 3). Measured with 64 other draws (seed 100) over gamma = 0.01-3: the
# per-draw spread is 7-19 % of E (standard errors of 64 draws: 0.9-2.4 % of E), and
# |theory - simulation| is at most 1.7 standard errors (largest: tanh r = 2, 3.4 % of E at 0.01,
# 1.9 % at 1): the surrogate's own bias is not resolved at that precision. Tolerance: 3 standard
# errors plus 1 % of the value. What it rejects, at the gamma where it is largest: the theory
# x0.9 and x1.1; at n = 384 instead of 512 (sign -9.7 % at 3, -16 % at 0.01; trunc_relu -12 %;
# tanh r = 2 -9.6 % at 1; erf r = 3 -8.6 % at 1); alpha dropped (sign -23 to -37 %, trunc_relu
# -9 to -28 %); the proportional limit (off by 22-150 %). c x 1.1 moves these theories by 4-8 %
# at their most sensitive gamma (0.01 or 0.3); benchmarks/perturbed_theory.py finds it rejected too.
FINITE_SIZE_CASES = {
    "sign-alpha1.5": Setting(c=0.5, snr=4.0, f="sign", wk_norm=2.0, wq_norm=2.0, alpha=1.5),       # delta 1.4
    "trunc_relu-alpha0.6": Setting(c=1.0, snr=4.0, f="trunc_relu", wk_norm=2.0, wq_norm=2.0,
                                   alpha=0.6),                                                     # not odd, 0.8
    "tanh-r2": Setting(c=0.5, snr=6.0, f="tanh", wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.7,
                       cos_mu_wq=0.7),                                                             # 1.1
    "erf-r3": Setting(c=0.5, snr=6.0, f="erf", wk_norm=1.5, wq_norm=2.0, cos_mu_wk=0.8, cos_mu_wq=0.6,
                      cos_wk_wq=0.3),                                                              # 0.9
}


@pytest.mark.slow
@pytest.mark.parametrize("setting", FINITE_SIZE_CASES.values(), ids=FINITE_SIZE_CASES.keys())
def test_matches_simulation_where_the_limit_fails(setting):
    g = np.array([1e-2, 0.3, 1.0, 3.0])
    sim = simulate.errors(setting, g, n=512, trials=64, seed=3)
    fs = attention_error(setting, g, n=512)
    tol = 3 * sim.attention.sem + 0.01 * fs
    np.testing.assert_array_less(np.abs(sim.attention.mean - fs), tol)
    assert np.any(np.abs(attention_error(setting, g) - sim.attention.mean) > 3 * tol)


def test_latent_dimensions_of_the_simulation_cases():
    r = {k: finite_size.latent_law(s, s.p(512)).r for k, s in FINITE_SIZE_CASES.items()}
    assert r == {"sign-alpha1.5": 1, "trunc_relu-alpha0.6": 1, "tanh-r2": 2, "erf-r3": 3}


def test_repeated_and_large_gammas():
    # a repeated gamma (zero continuation step) and one above the continuation start
    s = Setting(c=0.3, snr=6.0, f="sign", wk_norm=2.0, wq_norm=3.5)
    e = attention_error(s, [20.0, 0.1, 0.1], n=512)
    assert e[1] == pytest.approx(e[2], rel=1e-8)  # re-solved from its own fixed point
    assert e[0] == pytest.approx(attention_error(s, 20.0, n=512), rel=1e-9)


def test_the_example_of_the_derivation_notes():
    # book/derivation_finite_size.md: sign, c = 0.3, SNR 6, aligned weights of norms 2 and 3.5,
    # n = 2048; the notes print their equivalent as 0.0089, 0.0098, 0.0149 (four decimals)
    s = Setting(c=0.3, snr=6.0, f="sign", wk_norm=2.0, wq_norm=3.5)
    got = attention_error(s, [1e-3, 0.1, 1.0], n=2048)
    np.testing.assert_allclose(got, [0.0089, 0.0098, 0.0149], atol=5e-5)


@pytest.mark.slow
def test_the_centred_cosine_setting_of_issue_15():
    # Issue 15 reported, for this cos setting (a1 = 0, delta = 0.77 at n = 512, three latent
    # directions) and gamma = 1e-4, Monte Carlo 0.486 +- 0.004 against the finite-size theory's
    # 0.503. benchmarks/small_n.py measured 0.5016 +- 0.0019 (249 draws, seed 11): the theory
    # is 0.8 standard errors away, so the reported miss was a fluctuation. Here 200 other draws
    # (seed 15; per-draw spread 0.031, so 3 standard errors are 0.0067): the theory must be
    # within 3 standard errors; that rejects the reported Monte Carlo value (0.017 below the
    # theory) and a theory off by 0.01.
    s = Setting(c=0.5, snr=10.0, f="cos", wk_norm=3.0, wq_norm=3.0, cos_mu_wk=-0.870912938064634,
                cos_mu_wq=-0.030527303503535122, cos_wk_wq=0.2849164234575394)
    g = np.array([1e-4, 1e-2])
    sim = simulate.errors(s, g, n=512, trials=200, seed=15)
    fs = attention_error(s, g, n=512)
    assert np.all(3 * sim.attention.sem < 0.007)
    np.testing.assert_array_less(np.abs(sim.attention.mean - fs), 3 * sim.attention.sem)


def test_a_rule_along_the_weights_is_the_same_law_rotated():
    # nodes=(k, k, k) puts the rule on the axes of w_K, w_Q, mu: the law of the types is rotation
    # invariant, so for a smooth f the error moves by the quadrature error only (measured for
    # erf-r3 at n = 512: 9.5e-6, the size of the 6 -> 8 node change, 6.8e-6); the geometry
    # (|mu_r|, mu^T M mu, the singular values of M_r) is the same in both frames, and the first
    # axis is w_K's direction
    s = FINITE_SIZE_CASES["erf-r3"]
    law = finite_size.latent_law(s, s.p(512), (6, 6, 6))
    base = finite_size.latent_law(s, s.p(512))
    assert law.xi.shape == base.xi.shape
    mu = [lw.weight[lw.y > 0] @ lw.xi[lw.y > 0] * 2.0 for lw in (law, base)]   # mu_r of each frame
    assert np.linalg.norm(mu[0]) == pytest.approx(np.linalg.norm(mu[1]), rel=1e-12)
    assert mu[0] @ law.M @ mu[0] == pytest.approx(mu[1] @ base.M @ mu[1], rel=1e-12)
    np.testing.assert_allclose(np.linalg.svd(law.M)[1], np.linalg.svd(base.M)[1], rtol=1e-12)
    wk = law.M - np.eye(3)
    assert np.allclose(wk[1:], 0.0, atol=1e-12)   # M_r - I = w_K w_Q^T with w_K on axis 0
    a = finite_size.finite_size_resolvent_form(s, GAMMAS, 512)[1]
    b = finite_size.finite_size_resolvent_form(s, GAMMAS, 512, nodes=(6, 6, 6))[1]
    np.testing.assert_allclose(GAMMAS ** 2 * a, GAMMAS ** 2 * b, atol=3e-5)
    with pytest.raises(ValueError, match="nodes"):
        finite_size.latent_law(s, s.p(512), (6, 6))
