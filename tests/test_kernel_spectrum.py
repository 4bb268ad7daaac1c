"""Limiting eigenvalue density of the attention kernel against one large draw."""

import numpy as np
import pytest
from scipy import integrate

import attn_lib as al
from attn_lib.theory.kernel_spectrum import kernel_density


# Kolmogorov distance between the empirical law of one draw (seed 0) and the limiting law, whose
# CDF is the trapezoid rule on the 0.01 grid (3e-4 from a 0.001 grid; the rectangle rule was off
# by half a cell of density, 0.0045-0.0051, which had hidden the finite-size term of tanh and
# relu). Measured over seeds 0, 1: tanh 0.0028-0.0032 at n = 1000, 0.0016-0.0017 at n = 2000;
# relu 0.0023-0.0029, 0.0014-0.0018; cos 0.0132-0.0135, 0.0085-0.0094 (a finite-size term
# ~ n^{-1/2}). The same draws against the density at c x 1.1: tanh 0.020-0.023, relu
# 0.0187-0.0192, cos 0.0276-0.0278. Each tolerance is 1.5-2.1x the largest distance measured
# at n = 1000 and at most 0.72x the smallest distance of the density at c x 1.1.
@pytest.mark.parametrize("f, c, tol", [("tanh", 1.0, 0.006), ("cos", 0.5, 0.02), ("relu", 2.0, 0.006)])
def test_density_matches_eigenvalues(f, c, tol):
    s = al.Setting(c=c, snr=1.0, f=f, wk_norm=1.0, wq_norm=1.0)
    x = np.linspace(-4, 6, 1001)
    cdf = integrate.cumulative_trapezoid(kernel_density(s, x), x, initial=0.0)
    # no atom and a support inside [-4, 6]: the mass is 1 (measured 0.9997-1.0001 on this grid)
    assert cdf[-1] == pytest.approx(1.0, abs=1e-3)
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
