"""The softmax kernel and the simulator under softmax attention."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib import cache
from attn_lib.model import data, kernel
from attn_lib.simulation.resolvent import interpolation_error

GAMMAS = np.logspace(-6, -2, 5)


def _direct_softmax(X, w_K, w_Q, beta, alpha, mask):
    """Column softmax of beta X^T (alpha I + w_K w_Q^T) X / sqrt(p), one column at a time."""
    p, n = X.shape
    T = X.T @ (alpha * np.eye(p) + np.outer(w_K, w_Q)) @ X / np.sqrt(p)
    A = np.zeros((n, n))
    for j in range(n):
        e = np.exp(beta * T[:, j])
        if mask:
            e[j] = 0.0
        A[:, j] = e / e.sum()
    return A


def _sample(n=7, p=5, seed=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((p, n)), rng.standard_normal(p), rng.standard_normal(p)


@pytest.mark.parametrize("mask", [True, False])
def test_softmax_kernel_against_direct_numpy(mask):
    X, w_K, w_Q = _sample()
    for beta, alpha in ((0.5, 1.0), (1.5, 0.7)):
        A = kernel.softmax_kernel(X, w_K, w_Q, beta, alpha, mask)
        np.testing.assert_allclose(A, _direct_softmax(X, w_K, w_Q, beta, alpha, mask),
                                   rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(A.sum(axis=0), 1.0, rtol=1e-14)  # each column sums to one
        assert np.all(A >= 0)
        assert (np.all(np.diag(A) == 0.0)) == mask
        # the precomputed Gram gives the same kernel
        G = X.T @ X
        np.testing.assert_allclose(kernel.softmax_kernel(X, w_K, w_Q, beta, alpha, mask, G), A,
                                   rtol=1e-13, atol=1e-16)
        np.testing.assert_array_equal(G, X.T @ X)


def test_softmax_kernel_is_stable_at_large_beta():
    X, w_K, w_Q = _sample(n=50, p=40)
    A = kernel.softmax_kernel(X * 30.0, w_K, w_Q, 50.0)  # logits ~ 1e3, exp overflows unshifted
    assert np.isfinite(A).all()
    np.testing.assert_allclose(A.sum(axis=0), 1.0, rtol=1e-14)
    assert kernel.self_weight(A) == 0.0


def test_unmasked_self_weight():
    # a token's logit with itself is ~ alpha sqrt(p): without the mask it takes nearly all the
    # weight. Measured (c = 0.5, snr = 1, unit aligned weights, 2 trials): beta = 1 gives 0.9906
    # at n = 256 and 0.9999994 at n = 1024; beta = 0.5 gives 0.526 at n = 256.
    s = al.Setting(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0, attention=al.Softmax(1.0, mask=False))
    w = al.simulate.self_weight(s, n=256, trials=2, seed=0)
    assert w["self_weight"].shape == (2,)
    assert w.mean("self_weight") > 0.98
    masked = al.Setting(c=0.5, attention=al.Softmax(1.0))
    assert al.simulate.self_weight(masked, n=64, trials=1).mean("self_weight") == 0.0
    with pytest.raises(ValueError, match="attention"):
        al.simulate.self_weight(al.Setting(c=0.5), n=64)


def test_draw_errors_is_the_error_of_the_raw_features():
    for c in (0.5, 2.0):  # p < n (features X A) and p >= n (Gram A^T X^T X A)
        s = al.Setting(c=c, snr=1.0, wk_norm=1.0, wq_norm=1.5, cos_mu_wq=0.5, cos_wk_wq=0.5,
                       attention=al.Softmax(1.0))
        att, ridge = al.simulate.draw_errors(s, GAMMAS, 40, np.random.default_rng(1))
        d = data.draw(s, 40, np.random.default_rng(1))
        A = _direct_softmax(d.X, d.w_K, d.w_Q, 1.0, 1.0, True)
        # measured: 2e-15 (c = 0.5) and 4e-12 (c = 2: the Gram A^T X^T X A / n is ill-conditioned
        # at gamma = 1e-6, where the error is 5e-6)
        np.testing.assert_allclose(att, interpolation_error(d.X @ A, d.y, GAMMAS), rtol=1e-10)
        np.testing.assert_allclose(ridge, interpolation_error(d.X, d.y, GAMMAS), rtol=1e-12)


def test_errors_seeding_kind_and_f():
    soft = al.Setting(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0, attention=al.Softmax(0.5))
    r = al.simulate.errors(soft, GAMMAS, n=64, trials=3, seed=5)
    again = al.simulate.errors(soft, GAMMAS, n=64, trials=2, seed=5)
    np.testing.assert_array_equal(r["attention"][:2], again["attention"])  # reproducible, prefix
    # the same draws as entry-wise attention: the ridge curves are identical
    entry = al.simulate.errors(al.Setting(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0), GAMMAS,
                               n=64, trials=3, seed=5)
    np.testing.assert_array_equal(r["ridge"], entry["ridge"])
    assert not np.allclose(r["attention"], entry["attention"])
    # softmax ignores f
    relu = al.Setting(c=0.5, snr=1.0, f="relu", wk_norm=1.0, wq_norm=1.0, attention=al.Softmax(0.5))
    np.testing.assert_array_equal(al.simulate.errors(relu, GAMMAS, n=64, trials=3, seed=5)["attention"],
                                  r["attention"])
    with pytest.raises(ValueError, match="keep_diagonal"):
        al.simulate.errors(soft, GAMMAS, n=64, trials=1, keep_diagonal=True)
    # the cache key holds the attention kind and its fields
    keys = {cache.key(al.simulate.errors, {"setting": al.Setting(c=0.5, attention=a), "gammas": GAMMAS})
            for a in (al.Entrywise(), al.Softmax(0.5), al.Softmax(1.0), al.Softmax(1.0, mask=False))}
    assert len(keys) == 4

