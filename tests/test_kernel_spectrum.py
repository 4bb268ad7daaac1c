"""Limiting eigenvalue density of the attention kernel against one large draw."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib.theory.kernel_spectrum import kernel_density


# Kolmogorov distance between the empirical law of one draw at n = 1000 (seed 0) and the
# limiting law, measured over seeds 0-2 at n = 1000: tanh 0.0063-0.0082, cos 0.0129-0.0145,
# relu 0.0054-0.0064 (cos: 0.0091-0.0095 at n = 2000, a finite-size term ~ n^{-1/2}; tanh and
# relu do not shrink at n = 2000, 0.005-0.006, the rectangle-rule CDF on the 0.01 grid). The
# same draws against the density at c x 1.1: tanh 0.0147-0.018, cos 0.025-0.026, relu
# 0.0148-0.0154; at c x 0.9: 0.019-0.031. Each tolerance is about 1.4x the largest measured
# distance and below the smallest distance of a density at c x 1.1.
@pytest.mark.parametrize("f, c, tol", [("tanh", 1.0, 0.012), ("cos", 0.5, 0.02), ("relu", 2.0, 0.011)])
def test_density_matches_eigenvalues(f, c, tol):
    s = al.Setting(c=c, snr=1.0, f=f, wk_norm=1.0, wq_norm=1.0)
    x = np.linspace(-4, 6, 1001)
    dens = kernel_density(s, x)
    cdf = np.cumsum(dens) * (x[1] - x[0])
    assert cdf[-1] == pytest.approx(1.0, abs=5e-3)
    smp = al.data.draw(s, 1000, np.random.default_rng(0))
    K = al.kernel.attention_kernel(smp.X, al.hermite.centered(f), smp.w_K, smp.w_Q)
    emp = np.searchsorted(np.sort(np.linalg.eigvalsh(K)), x) / 1000
    assert np.max(np.abs(cdf - emp)) < tol


def test_a1_zero_is_a_semicircle():
    s = al.Setting(c=0.5, f="cos")
    sigma2 = s.hermite.b2 / s.c
    x = np.linspace(-1.0, 1.0, 5)
    semicircle = np.sqrt(np.maximum(4 * sigma2 - x ** 2, 0)) / (2 * np.pi * sigma2)
    assert np.allclose(kernel_density(s, x), semicircle, atol=1e-5)


def test_bad_input():
    with pytest.raises(TypeError, match="setting"):
        kernel_density(0.5, [0.0])
    with pytest.raises(ValueError, match="x must be"):
        kernel_density(al.Setting(c=1.0), [[0.0]])
