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


# ----------------------------------------------------------------------------- simulator
@pytest.mark.parametrize("c, aligned", [(0.5, False), (0.5, True), (1.5, False)])
def test_rank_one_as_rank_setting_is_bit_identical(c, aligned):
    # the same draws (labels, then Z; the geometry is deterministic) and the rank-one kernel path
    cos = 1.0 if aligned else 0.4
    s = al.Setting(c=c, snr=1.5, wk_norm=1.2, wq_norm=0.8, cos_mu_wk=cos, cos_mu_wq=cos,
                   cos_wk_wq=1.0 if aligned else 0.1, alpha=0.8)
    g = [1e-3, 0.1, 1.0]
    a = al.simulate.errors(s, g, n=96, trials=2, seed=3)
    b = al.simulate.errors(al.RankSetting.from_setting(s), g, n=96, trials=2, seed=3)
    assert np.array_equal(a.values["attention"], b.values["attention"])
    assert np.array_equal(a.values["ridge"], b.values["ridge"])


def test_rank_r_draw_and_errors_match_the_explicit_matrix():
    mu, W_K, W_Q = _vectors(3, d=7, seed=1)
    rs = al.RankSetting.from_vectors(0.5, 3 * mu, 2 * W_K, 2 * W_Q, f="relu", alpha=0.9)
    n = 80
    smp = al.data.draw(rs, n, np.random.default_rng(0))
    p = rs.p(n)
    assert smp.w_K.shape == (3, p) and smp.w_Q.shape == (3, p) and smp.mu.shape == (p,)
    V = np.vstack([smp.mu, smp.w_K, smp.w_Q])
    assert np.allclose(V @ V.T, rs.gram, rtol=0, atol=1e-12)
    # the simulator's error of this draw against K built from the p x p matrix itself
    g = np.array([1e-2, 1.0])
    att, ridge = al.simulate.draw_errors(rs, g, n, np.random.default_rng(0))
    M = 0.9 * np.eye(p) + smp.w_K.T @ smp.w_Q
    X, y = smp.X, smp.y
    K = al.kernel.apply(al.nonlinearity.check_nonlinearity("relu"), X.T @ M @ X / np.sqrt(p), p,
                        a0=rs.hermite.a0)
    Phi = X @ K
    for gam, e in zip(g, att):
        Q = np.linalg.inv(Phi.T @ Phi / n + gam * np.eye(n))
        assert e == pytest.approx(gam ** 2 * y @ Q @ Q @ y / n, rel=1e-8)


def test_rank_r_needs_enough_dimensions():
    mu, W_K, W_Q = _vectors(4, d=20)
    rs = al.RankSetting.from_vectors(0.05, mu, W_K, W_Q)
    with pytest.raises(ValueError, match="n is too small: mu and the 8 weight vectors span 9 "
                                         "dimensions but p = 5"):
        al.simulate.errors(rs, 1.0, n=100, trials=1)
