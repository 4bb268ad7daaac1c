"""Limiting eigenvalue density of the attention kernel against one large draw."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib.theory.kernel_spectrum import kernel_density


@pytest.mark.parametrize("f, c", [("tanh", 1.0), ("cos", 0.5), ("relu", 2.0)])
def test_density_matches_eigenvalues(f, c):
    s = al.Setting(c=c, snr=1.0, f=f, wk_norm=1.0, wq_norm=1.0)
    x = np.linspace(-4, 6, 1001)
    dens = kernel_density(s, x)
    cdf = np.cumsum(dens) * (x[1] - x[0])
    assert cdf[-1] == pytest.approx(1.0, abs=5e-3)
    smp = al.data.draw(s, 1000, np.random.default_rng(0))
    K = al.kernel.attention_kernel(smp.X, al.hermite.centered(f), smp.w_K, smp.w_Q)
    emp = np.searchsorted(np.sort(np.linalg.eigvalsh(K)), x) / 1000
    # Kolmogorov distance between the empirical and limiting laws. Measured 0.005-0.009 at
    # n = 1000 (mu = 0 and these signal/weight settings alike: outliers move O(1/n) mass).
    # Eigenvalue rigidity bounds it by O(n^{-2/3}) ~ 0.01 at the edges; 0.02 leaves a factor 2.
    assert np.max(np.abs(cdf - emp)) < 0.02


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
