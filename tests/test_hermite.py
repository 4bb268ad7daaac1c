"""Hermite coefficients against closed forms and the quadrature error guard."""

import numpy as np
import pytest
from scipy import special

import attn_lib as al
from attn_lib.model.hermite import coefficients
from attn_lib.model.nonlinearity import REGISTRY

SQ2, SQPI, SQ2PI = np.sqrt(2), np.sqrt(np.pi), np.sqrt(2 * np.pi)

# Closed forms (xi ~ N(0,1)); (a0, a1, a2, nu).
EXACT = {
    "linear": (0.0, 1.0, 0.0, 1.0),
    "relu": (1 / SQ2PI, 0.5, 1 / (2 * SQPI), 0.5 - 1 / (2 * np.pi)),
    "sign": (0.0, np.sqrt(2 / np.pi), 0.0, 1.0),
    # E cos(xi) = e^{-1/2}, E[xi^2 cos] = 0, so a2 = -e^{-1/2}/sqrt2; E cos^2 = (1 + e^{-2})/2.
    "cos": (np.exp(-0.5), 0.0, -np.exp(-0.5) / SQ2, (1 + np.exp(-2)) / 2 - np.exp(-1)),
    "sin": (0.0, np.exp(-0.5), 0.0, (1 - np.exp(-2)) / 2),
    # E erf(xi) = 0, E[xi erf(xi)] = E erf'(xi) = 2/sqrt(3 pi), E erf^2 = (2/pi) arcsin(2/3).
    "erf": (0.0, 2 / np.sqrt(3 * np.pi), 0.0, 2 / np.pi * np.arcsin(2 / 3)),
    # Polynomials through He1 = t, He2 = t^2 - 1, He3 = t^3 - 3t (E He_k^2 = k!):
    # t^2 = He2 + 1; t^3 = He3 + 3 He1 (nu = 6 + 9); t + t^2/2 = He1 + He2/2 + 1/2 (nu = 1 + 2/4).
    "quadratic": (1.0, 0.0, SQ2, 2.0),
    "cubic": (0.0, 3.0, 0.0, 15.0),
    "he3": (0.0, 0.0, 0.0, 6.0),
    "poly": (0.5, 1.0, 1 / SQ2, 1.5),
}


def _trunc_relu_exact():
    # clip(t, 0, 2) = t on [0, 2], 2 above: integrate with the Gaussian cdf/pdf.
    phi, Phi = lambda x: np.exp(-x * x / 2) / SQ2PI, special.ndtr
    a0 = (phi(0) - phi(2)) + 2 * (1 - Phi(2))
    e_x2 = (Phi(2) - Phi(0)) - 2 * phi(2)          # int_0^2 x^2 phi
    a1 = e_x2 + 2 * phi(2)                         # E[xi f] = int_0^2 x^2 phi + 2 int_2^inf x phi
    e_x3 = 2 * phi(0) - (4 + 2) * phi(2)           # int_0^2 x^3 phi = [-(x^2+2) phi]_0^2
    a2 = (e_x3 - (phi(0) - phi(2)) + 2 * (2 * phi(2) + (1 - Phi(2)) - (1 - Phi(2)))) / SQ2
    nu = e_x2 + 4 * (1 - Phi(2)) - a0 ** 2
    return a0, a1, a2, nu


EXACT["trunc_relu"] = _trunc_relu_exact()


@pytest.mark.parametrize("name", sorted(EXACT))
def test_closed_forms(name):
    h = coefficients(name)
    assert np.allclose([h.a0, h.a1, h.a2, h.nu], EXACT[name], rtol=0, atol=1e-10)


def test_trunc_exp_against_high_order_quadrature():
    # exp(min(t, 2)): smooth pieces, so a split Gauss-Legendre rule of high order is exact to 1e-13.
    x, w = np.polynomial.legendre.leggauss(400)
    def expect(g):
        lo = 0.5 * (x + 1) * (2 + 12) - 12      # [-12, 2]
        hi = 0.5 * (x + 1) * 12 + 2             # [2, 14]

        def pdf(t):
            return np.exp(-t * t / 2) / SQ2PI
        return (w * g(lo) * pdf(lo)).sum() * 7 + (w * g(hi) * pdf(hi)).sum() * 6

    def f(t):
        return np.exp(np.minimum(t, 2.0))
    a0 = expect(f)
    h = coefficients("trunc_exp")
    assert h.a0 == pytest.approx(a0, abs=1e-10)
    assert h.a1 == pytest.approx(expect(lambda t: t * f(t)), abs=1e-10)
    assert h.a2 == pytest.approx(expect(lambda t: (t * t - 1) * f(t)) / SQ2, abs=1e-10)
    assert h.nu == pytest.approx(expect(lambda t: (f(t) - a0) ** 2), abs=1e-10)


def test_tanh_against_gauss_hermite():
    x, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / w.sum()
    h = coefficients("tanh")
    assert h.a1 == pytest.approx((w * x * np.tanh(x)).sum(), abs=1e-10)
    assert h.nu == pytest.approx((w * np.tanh(x) ** 2).sum(), abs=1e-10)
    assert abs(h.a0) < 1e-14 and abs(h.a2) < 1e-14


def test_callable_matches_registered_name_and_scale():
    h_name = coefficients("erf", scale=1.7)
    h_call = coefficients(lambda t: special.erf(1.7 * t))
    assert np.allclose([h_call.a0, h_call.a1, h_call.a2, h_call.nu],
                       [h_name.a0, h_name.a1, h_name.a2, h_name.nu], atol=1e-10)
    # a kinked registered name with a scale keeps its break points: relu(2t) = 2 relu(t)
    assert coefficients("relu", 2.0).nu == pytest.approx(4 * EXACT["relu"][3], abs=1e-10)


def test_every_registered_name_is_finite_and_b2_nonnegative():
    for name in REGISTRY:
        h = coefficients(name)
        assert np.isfinite([h.a0, h.a1, h.a2, h.nu]).all()
        assert h.b2 >= 0 and h.nu >= h.a1 ** 2 - 1e-12


def test_centered_removes_a0():
    f = al.hermite.centered("relu")
    assert coefficients(f).a0 == pytest.approx(0.0, abs=1e-10)


def test_callable_with_non_convergent_quadrature_raises():
    # A jump at an undeclared point far in the tail plus wild oscillation defeats adaptive quadrature.
    with pytest.raises(ValueError, match="quadrature"):
        coefficients(lambda t: np.sin(1e4 * np.asarray(t) ** 3))


@pytest.mark.parametrize("bad, exc, match", [
    ("nope", ValueError, "f must be one of"),
    (3.0, TypeError, "f must be a registered name"),
    (lambda t: 1.0, ValueError, "vectorised"),
    (lambda t: np.ones(3), ValueError, "vectorised"),
    (lambda t: np.log(np.asarray(t)), ValueError, "non-finite"),
    (lambda t: undefined_name, ValueError, "probe"),  # noqa: F821
])
def test_bad_nonlinearity(bad, exc, match):
    with pytest.raises(exc, match=match):
        coefficients(bad)


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        coefficients("tanh", scale=0.0)


@pytest.mark.parametrize("name,scale", [("tanh", 1.0), ("relu", 1.0), ("sign", 1.0), ("tanh", 8.0)])
def test_series_matches_the_coefficients(name, scale):
    """``c_1 = a1``, ``c_2 = a2`` (to 1e-12) and ``sum_k c_k^2 <= nu``, approaching it (the
    remainder after order 40 is below 1e-7 for the smooth tanh and 0.1 nu for sign's jump)."""
    from attn_lib.model.hermite import series

    c = series(name, scale)
    h = coefficients(name, scale)
    assert c.shape == (41,) and c[0] == 0.0
    np.testing.assert_allclose(c[1:3], [h.a1, h.a2], rtol=0, atol=1e-12)
    rest = h.nu - np.sum(c ** 2)
    assert -1e-12 < rest < (1e-7 if (name, scale) == ("tanh", 1.0) else 0.1 * h.nu)


def test_residual_covariance():
    """Against a direct two-dimensional Gauss-Hermite rule (300 x 300 nodes: tanh at scale 2 has
    poles at distance pi/4 from the real axis, and 100 / 200 / 300 nodes are 7e-8 / 1.1e-10 /
    7.5e-13 from the series) of ``Cov(f(s xi), f(s' xi')) - a1 a1' r``, the
    exact ``|r| = 1`` branch (identical logits: ``b2``) and the refusal of a slowly converging
    series."""
    from attn_lib.model.hermite import residual_covariance

    scales = np.array([1.0, 2.0, 1.0])
    corr = np.array([[1.0, 0.5, 1.0], [0.5, 1.0, -0.3], [1.0, -0.3, 1.0]])
    C = residual_covariance("tanh", scales, corr)
    x, w = np.polynomial.hermite_e.hermegauss(300)
    w = w / w.sum()
    for h, k in ((0, 1), (1, 2), (0, 2)):
        r = corr[h, k]
        u = x[:, None]
        v = r * x[:, None] + np.sqrt(max(1 - r * r, 0.0)) * x[None, :]
        cov = np.sum(w[:, None] * w[None, :] * np.tanh(scales[h] * u) * np.tanh(scales[k] * v))
        lin = coefficients("tanh", scales[h]).a1 * coefficients("tanh", scales[k]).a1 * r
        assert abs(C[h, k] - (cov - lin)) < 1e-12, (h, k, C[h, k], cov - lin)
    np.testing.assert_allclose(np.diag(C), [coefficients("tanh", s).b2 for s in scales], rtol=1e-14)
    assert abs(C[0, 2] - coefficients("tanh", 1.0).b2) < 1e-12
    with pytest.raises(ValueError, match=r"corr\[1, 0\] = 0.95.*does not converge"):
        residual_covariance("sign", np.ones(2), np.array([[1.0, 0.95], [0.95, 1.0]]))
    with pytest.raises(ValueError, match="corr must be"):
        residual_covariance("tanh", np.ones(2), np.eye(3))
