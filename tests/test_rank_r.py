"""Rank-r key-query weights ``W = alpha I + sum_k w_K^(k) w_Q^(k)T``: setting, simulator, theory."""

import numpy as np
import pytest

import attn_lib as al

RANK_ONE = al.Setting(c=0.5, snr=2.0, f="tanh", wk_norm=2.0, wq_norm=1.5, cos_mu_wk=0.3,
                      cos_mu_wq=-0.2, cos_wk_wq=0.4, alpha=0.7)


def _vectors(r, d=40, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(d) / np.sqrt(d), rng.standard_normal((r, d)) / np.sqrt(d), \
        rng.standard_normal((r, d)) / np.sqrt(d)


# ----------------------------------------------------------------------------- setting
def test_from_setting_keeps_the_scalars():
    s = RANK_ONE
    rs = al.RankSetting.from_setting(s)
    assert rs.r == 1 and rs.alpha == s.alpha and rs.f == s.f and rs.c == s.c
    assert np.array_equal(rs.gram, s.gram)
    assert rs.snr == pytest.approx(s.snr, rel=1e-15)
    assert rs.mu_wk[0] == pytest.approx(s.mu_wk) and rs.mu_wq[0] == pytest.approx(s.mu_wq)
    assert rs.delta(512) == pytest.approx(s.delta(512), rel=1e-14)
    assert rs.signed_delta(512) == pytest.approx(s.signed_delta(512), rel=1e-14)
    assert np.allclose(rs.canonical().gram, s.canonical().gram, rtol=1e-14, atol=0)
    assert rs.hermite == s.hermite


def test_from_vectors_gram_delta_and_canonical():
    mu, W_K, W_Q = _vectors(3)
    rs = al.RankSetting.from_vectors(0.5, mu, W_K, W_Q, f="relu", alpha=2.0)
    V = np.vstack([mu, W_K, W_Q])
    assert rs.r == 3 and np.allclose(rs.gram, V @ V.T, rtol=1e-15, atol=0)
    M = 2.0 * np.eye(mu.size) + W_K.T @ W_Q
    assert rs.delta(512) == pytest.approx(abs(mu @ M @ mu) / np.sqrt(256), rel=1e-12)
    cs = rs.canonical()
    assert cs.alpha == 1.0 and cs.delta(512) == pytest.approx(rs.delta(512) / 2.0, rel=1e-12)
    assert np.allclose(cs.gram[1:4, 1:4], rs.gram[1:4, 1:4] / 4.0, rtol=1e-15, atol=0)
    assert np.array_equal(cs.gram[4:, 4:], rs.gram[4:, 4:])
    h, hc = rs.hermite, cs.hermite
    assert np.allclose([h.a1, h.nu], [hc.a1, hc.nu], atol=1e-10)


def test_equality_hash_and_read_only_gram():
    mu, W_K, W_Q = _vectors(2)
    a = al.RankSetting.from_vectors(0.5, mu, W_K, W_Q)
    b = al.RankSetting(c=0.5, gram=np.array(a.gram))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != al.RankSetting(c=0.5, gram=a.gram * 2)
    with pytest.raises(ValueError):
        a.gram[0, 0] = 1.0


@pytest.mark.parametrize("gram, exc, match", [
    (np.eye(2), ValueError, r"\(1 \+ 2r\) x \(1 \+ 2r\).*shape \(2, 2\)"),
    (np.eye(1), ValueError, "r >= 1"),
    (np.zeros((3, 4)), ValueError, "square"),
    ("eye", TypeError, "gram must be"),
    (np.array([[1, 0.5, 0], [0, 1, 0], [0, 0, 1.0]]), ValueError, "symmetric"),
    (np.diag([1.0, -1.0, 1.0]), ValueError, "non-negative diagonal"),
    (np.array([[1, 1, 1], [1, 1, -1], [1, -1, 1.0]]), ValueError, "positive semi-definite"),
    # a zero-norm vector with a non-zero inner product
    (np.array([[1, 0.1, 0], [0.1, 0, 0], [0, 0, 1.0]]), ValueError, "positive semi-definite"),
    (np.full((3, 3), np.nan), ValueError, "gram must be finite"),
])
def test_bad_gram(gram, exc, match):
    with pytest.raises(exc, match=match):
        al.RankSetting(c=0.5, gram=gram)


def test_bad_fields_and_vectors():
    with pytest.raises(ValueError, match="alpha"):
        al.RankSetting(c=0.5, gram=np.eye(3), alpha=0.0)
    with pytest.raises(ValueError, match="c must be"):
        al.RankSetting(c=-1.0, gram=np.eye(3))
    with pytest.raises(ValueError, match="f must be one of"):
        al.RankSetting(c=0.5, gram=np.eye(3), f="nope")
    mu, W_K, W_Q = _vectors(2)
    with pytest.raises(ValueError, match=r"W_K must have shape \(r, 40\)"):
        al.RankSetting.from_vectors(0.5, mu, W_K[:, :5], W_Q)
    with pytest.raises(ValueError, match="same shape"):
        al.RankSetting.from_vectors(0.5, mu, W_K, W_Q[:1])
    with pytest.raises(ValueError, match="mu must be"):
        al.RankSetting.from_vectors(0.5, W_K, W_K, W_Q)
    with pytest.raises(TypeError, match="attn_lib.Setting"):
        al.RankSetting.from_setting(al.RankSetting(c=0.5, gram=np.eye(3)))
    # a rank-deficient but PSD Gram (aligned weights) is accepted
    al.RankSetting.from_vectors(0.5, mu, W_K, W_K)
