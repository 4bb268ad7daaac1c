"""The conditional equivalent at small n: the latent block drawn, the rest the finite-size equivalent."""

import numpy as np
import pytest

from attn_lib import MatrixSetting, RankSetting, Setting, Softmax
from attn_lib.theory import attention_error, conditional_error
from attn_lib.theory import _finite_size as finite_size
from attn_lib.theory._conditional import latent_block

# small n and strong shifts on purpose
pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

GAMMAS = np.array([1e-4, 1.0])
#: the quadratic of benchmarks/small_n.py with the largest miss at n = 512
QUADRATIC = Setting(c=0.5, snr=2.4, f="quadratic", wk_norm=5 / 3, wq_norm=5 / 3, cos_mu_wk=0.6,
                    cos_mu_wq=0.6, cos_wk_wq=1.0)


def test_latent_block_has_the_law_of_the_tokens_block():
    # balanced labels, weights 1/n, M_r of the Gauss-Hermite law, and E[y xi] = mu_r:
    # the block's class means differ from +-mu_r by at most 5 standard errors (sd 1 per axis)
    n = 20_000
    law = latent_block(QUADRATIC, n, np.random.default_rng(3))
    ref = finite_size.latent_law(QUADRATIC, QUADRATIC.p(n))
    assert law.xi.shape == (n, ref.r) and law.p == QUADRATIC.p(n)
    assert law.y.sum() == 0 and np.allclose(law.weight, 1.0 / n)
    np.testing.assert_allclose(law.M, ref.M)
    mu_r = ref.weight @ (ref.y[:, None] * ref.xi)
    assert np.linalg.norm(mu_r) ** 2 == pytest.approx(QUADRATIC.snr)
    for label in (1.0, -1.0):
        mean = law.xi[law.y == label].mean(axis=0)
        assert np.all(np.abs(mean - label * mu_r) < 5 / np.sqrt(n / 2))
    # the spread around the class means is N(0, I_r)
    zeta = law.xi - law.y[:, None] * mu_r
    np.testing.assert_allclose(np.cov(zeta.T), np.eye(ref.r), atol=5 * np.sqrt(2 / n))


def test_draws_are_seeded_and_nested():
    s = Setting(c=0.5, snr=2.0, f="tanh", wk_norm=1.5, wq_norm=1.5)
    a = conditional_error(s, GAMMAS, 64, draws=3, seed=4)
    b = conditional_error(s, GAMMAS, 64, draws=3, seed=4)
    c = conditional_error(s, GAMMAS, 64, draws=3, seed=5)
    np.testing.assert_array_equal(a.mean, b.mean)
    assert not np.allclose(a.mean, c.mean)
    assert a.draws == 3 and a.mean.shape == a.sem.shape == GAMMAS.shape
    assert np.all(a.sem > 0)
    # attention_error(..., conditional=k) is the mean of conditional_error at seed 0
    np.testing.assert_array_equal(attention_error(s, GAMMAS, n=64, conditional=3),
                                  conditional_error(s, GAMMAS, 64, draws=3).mean)


def test_it_agrees_with_the_finite_size_equivalent_up_to_the_sample_of_types():
    # tanh with a shift at n = 256: the sample-of-types bias is O(1/n), well below the shift's
    # own effect (finite-size minus limit, 0.06 to 0.09 here)
    s = Setting(c=0.5, snr=3.0, f="tanh", wk_norm=2.0, wq_norm=2.0)
    n = 256
    fs = attention_error(s, GAMMAS, n=n)
    cond = conditional_error(s, GAMMAS, n, draws=6)
    assert np.all(np.abs(cond.mean - fs) < 4 * cond.sem + 0.002)
    assert np.all(np.abs(attention_error(s, GAMMAS) - fs) > 0.05)


def test_it_removes_the_sample_of_types_bias_of_the_quadratic():
    # book/derivation_finite_size.md: the finite-size theory lies about 0.0012 above its mean on
    # the draws' own types at n = 256 (gamma 1e-4; draw-to-draw spread 0.0014): 32 draws
    # resolve it
    n, g = 256, 1e-4
    fs = attention_error(QUADRATIC, g, n=n)
    cond = conditional_error(QUADRATIC, g, n, draws=32)
    assert cond.mean < fs - 3 * cond.sem
    assert fs - cond.mean < 0.003


@pytest.mark.parametrize("bad, err", [
    (RankSetting.from_setting(QUADRATIC), TypeError),
    (MatrixSetting.from_setting(QUADRATIC, 64), TypeError),
    (Setting(c=0.5, snr=1.0, f="tanh", attention=Softmax(beta=0.5)), ValueError),
])
def test_only_entrywise_settings(bad, err):
    with pytest.raises(err, match="setting"):
        conditional_error(bad, GAMMAS, 128)


def test_bad_arguments():
    with pytest.raises(ValueError, match="draws"):
        conditional_error(QUADRATIC, GAMMAS, 128, draws=1)
    with pytest.raises(ValueError, match="seed"):
        conditional_error(QUADRATIC, GAMMAS, 128, seed=-1)
    with pytest.raises(ValueError, match="n"):
        conditional_error(QUADRATIC, GAMMAS, 4)
    with pytest.raises(ValueError, match="conditional"):
        attention_error(QUADRATIC, GAMMAS, conditional=4)
    with pytest.raises(ValueError, match="conditional"):
        attention_error(QUADRATIC, GAMMAS, n=128, conditional=-1)
