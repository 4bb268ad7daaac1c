"""Attention with any key-query matrix: ``MatrixSetting``, its simulator and GPT-2's per-head softmax."""

import pickle

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model.scale import softmax_scale
from attn_lib import cache
from attn_lib.simulation import simulate
from attn_lib.simulation.resolvent import interpolation_error
from attn_lib.studies import gpt2, sweeps

# small matrices and raw scales on purpose (the model's arithmetic, not the theory's domain)
pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

GAMMAS = np.array([1e-3, 0.1, 1.0])
RANK_ONE = al.Setting(c=0.5, snr=2.0, f="tanh", wk_norm=2.0, wq_norm=1.5, cos_mu_wk=0.3,
                      cos_mu_wq=-0.2, cos_wk_wq=0.4, alpha=0.7)
SOFTMAX = al.Setting(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0, attention=al.Softmax(beta=1.0))
# rounding of X^T M X / sqrt(p) against alpha X^T X / sqrt(p) + rank one: the errors of the same
# draws differ by at most 2.3e-13 relative (measured: tanh 4e-14 at c = 0.5, 2.3e-13 at c = 1.5
# through the ill-conditioned Gram path, softmax 5e-15 and 2.6e-14; gammas 1e-3 to 1, n = 256)
ROUNDING = 1e-11


def _matrix(p=32, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((p, p)) / np.sqrt(p), rng.standard_normal(p) / np.sqrt(p)


# ----------------------------------------------------------------------------- setting
def test_scalars_and_from_setting():
    p = RANK_ONE.p(256)
    ms = al.MatrixSetting.from_setting(RANK_ONE, p)
    assert ms.p() == p == ms.M.shape[0] and ms.c == RANK_ONE.c and ms.f == RANK_ONE.f
    V = al.data.geometry(RANK_ONE, p)
    np.testing.assert_array_equal(ms.mu, V[0])
    np.testing.assert_allclose(ms.M, 0.7 * np.eye(p) + np.outer(V[1], V[2]), rtol=0, atol=1e-15)
    assert ms.snr == pytest.approx(RANK_ONE.snr, rel=1e-14)
    # mu^T (alpha I + w_K w_Q^T) mu / sqrt(p) is Setting.delta
    assert ms.signed_delta(256) == pytest.approx(RANK_ONE.signed_delta(256), rel=1e-13)
    assert ms.delta() == pytest.approx(RANK_ONE.delta(256), rel=1e-13)
    # ||M||_F / sqrt(p): alpha up to O(1/p)
    assert ms.logit_scale == pytest.approx(np.linalg.norm(ms.M) / np.sqrt(p), rel=1e-15)
    assert ms.logit_scale == pytest.approx(np.sqrt(0.49 + (2 * 0.7 * 3 * 0.4 + 9) / p), rel=1e-12)
    assert ms.hermite == al.hermite.coefficients("tanh", ms.logit_scale)
    rs = al.RankSetting.from_setting(RANK_ONE)
    np.testing.assert_allclose(al.MatrixSetting.from_setting(rs, p).M, ms.M, rtol=0, atol=1e-15)
    with pytest.raises(TypeError, match="setting must be"):
        al.MatrixSetting.from_setting(ms, p)
    with pytest.raises(ValueError, match="n is too small"):
        al.MatrixSetting.from_setting(RANK_ONE, 2)


def test_logit_scale_is_the_std_of_the_noise_logits():
    M, mu = _matrix(p=40, seed=1)
    ms = al.MatrixSetting(c=0.5, M=3 * M, mu=mu)
    Z = np.random.default_rng(2).standard_normal((40, 4000))
    T = np.einsum("ij,ik,kj->j", Z[:, :2000], ms.M, Z[:, 2000:]) / np.sqrt(40)
    # 2000 samples: the std is known to 1.6 %; 5 % is three standard errors
    assert np.std(T) == pytest.approx(ms.logit_scale, rel=0.05)


def test_arrays_read_only_copies_equality_hash_and_cache_key():
    M, mu = _matrix()
    a = al.MatrixSetting(c=0.5, M=M, mu=mu)
    M[0, 0] += 1.0  # the setting holds copies
    assert a.M[0, 0] != M[0, 0]
    for arr in (a.M, a.mu):
        with pytest.raises(ValueError):
            arr[0] = 1.0
    b = al.MatrixSetting(c=0.5, M=np.array(a.M), mu=list(a.mu))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert pickle.loads(pickle.dumps(a)) == a
    assert a != al.MatrixSetting(c=0.5, M=a.M * 2, mu=a.mu)
    assert a != al.MatrixSetting(c=0.5, M=a.M, mu=-a.mu)
    assert a != al.MatrixSetting(c=0.5, M=a.M, mu=a.mu, attention=al.Softmax(1.0))
    kw = dict(gammas=GAMMAS, n=64, trials=2, seed=0, attention=True)
    k = cache.key(simulate.errors, dict(setting=a, **kw))
    assert k == cache.key(simulate.errors, dict(setting=b, **kw))
    assert k != cache.key(simulate.errors, dict(setting=al.MatrixSetting(c=0.5, M=a.M * 2, mu=a.mu), **kw))


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(M=np.ones(4)), ValueError, "M must be a non-empty square matrix"),
    (dict(M=np.ones((4, 3))), ValueError, "M must be a non-empty square matrix"),
    (dict(M=np.ones((1, 1)), mu=np.ones(1)), ValueError, "p >= 2"),
    (dict(M=np.full((4, 4), np.nan)), ValueError, "M must be finite"),
    (dict(M="eye"), TypeError, "M must be"),
    (dict(M=np.eye(4, dtype=bool)), TypeError, "M must be"),
    (dict(M=np.zeros((4, 4))), ValueError, "M must not be zero"),
    (dict(mu=np.ones(3)), ValueError, r"mu must have shape \(4,\)"),
    (dict(mu=np.ones((4, 1))), ValueError, "mu must be a 1-D array"),
    (dict(mu=[np.inf, 0, 0, 0]), ValueError, "mu must be finite"),
    (dict(mu="ones"), TypeError, "mu must be"),
    (dict(c=0.0), ValueError, "c must be in"),
    (dict(c="1"), TypeError, "c must be a real number"),
    (dict(f="no such f"), ValueError, "no such f"),
    (dict(attention="softmax"), TypeError, "attention must be"),
])
def test_bad_input(kwargs, exc, match):
    args = dict(c=0.5, M=np.eye(4), mu=np.ones(4))
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        al.MatrixSetting(**args)


def test_n_must_give_p():
    M, mu = _matrix(p=32)
    ms = al.MatrixSetting(c=0.5, M=M, mu=mu)
    assert ms.p(64) == 32 and ms.p(63) == 32  # round(31.5) = 32 (the rule of BaseSetting.p)
    sm = al.MatrixSetting(c=0.5, M=M, mu=mu, attention=al.Softmax(1.0))
    calls = [lambda: ms.p(66), lambda: ms.delta(66), lambda: ms.signed_delta(128),
             lambda: simulate.errors(ms, GAMMAS, n=128, trials=1),
             lambda: simulate.errors_plan(ms, GAMMAS, n=32, trials=1),
             lambda: simulate.self_weight(sm, n=66, trials=1),
             lambda: sweeps.simulations([ms], GAMMAS, n=[66], trials=1, use_cache=False)]
    for call in calls:
        with pytest.raises(ValueError, match=r"n=\d+ does not fit the matrix: M is 32 x 32.*n = 64"):
            call()
    with pytest.raises(TypeError, match="n must be an integer"):
        ms.p(64.0)


# ----------------------------------------------------------------------------- simulator
_RNG = np.random.default_rng(3)
_VECTORS = (_RNG.standard_normal(6) / 2, _RNG.standard_normal((2, 6)) / 2, _RNG.standard_normal((2, 6)) / 2)


@pytest.mark.parametrize("setting, n", [
    (RANK_ONE, 256),                                                           # p < n
    (al.Setting(c=1.5, snr=1.0, wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.5, cos_mu_wq=0.5,
                cos_wk_wq=0.3), 96),                                           # p >= n: Gram path
    (SOFTMAX, 256),
    (al.RankSetting.from_vectors(0.5, *_VECTORS, attention=al.Softmax(0.5)), 128),
])
def test_monte_carlo_equals_the_settings_own(setting, n):
    """The same draws (labels, then Z; mu from data.geometry), the logits to rounding. Under
    softmax the effective gamma is in units of each setting's own s_n (the matrix's logit scale
    is ||M||_F / sqrt(p), the setting's alpha, O(1/p) apart): compared at the same raw gamma."""
    ms = al.MatrixSetting.from_setting(setting, setting.p(n))
    a = simulate.errors(setting, GAMMAS, n=n, trials=2, seed=4)
    b = simulate.errors(ms, GAMMAS, n=n, trials=2, seed=4)
    np.testing.assert_array_equal(a.ridge.values, b.ridge.values)
    if isinstance(setting.attention, al.Softmax):
        g = GAMMAS * (softmax_scale(setting, n) / softmax_scale(ms, n)) ** 2
        b = simulate.errors(ms, g, n=n, trials=2, seed=4)
    np.testing.assert_allclose(b.attention.values, a.attention.values, rtol=ROUNDING, atol=0)
    assert (b.n, b.p) == (a.n, a.p)


@pytest.mark.parametrize("attention", [al.Entrywise(), al.Softmax(beta=0.7)])
def test_errors_is_simulate_matrices_bit_for_bit(attention):
    M, mu = _matrix(p=32, seed=5)
    ms = al.MatrixSetting(c=0.5, M=M, mu=mu, f="relu", attention=attention)
    res = simulate.errors(ms, GAMMAS, n=64, trials=3, seed=2)
    # softmax at the raw gammas of the effective ones (simulate.raw_gammas), ridge as given
    G = GAMMAS.size
    raw = np.concatenate([simulate.raw_gammas(ms, GAMMAS, 64)[0], GAMMAS])
    mc = gpt2.simulate_matrices({"M": M}, {"mu": mu}, "relu", raw, n=64, trials=3, seed=2,
                                attention=attention)
    np.testing.assert_array_equal(res.attention.values, mc.attention["M"]["mu"].values[:, :G])
    np.testing.assert_array_equal(res.ridge.values, mc.ridge["mu"].values[:, G:])


def test_keep_diagonal_and_self_weight():
    M, mu = _matrix(p=32, seed=6)
    ms = al.MatrixSetting(c=0.5, M=M + 2 * np.eye(32), mu=mu)
    kept = simulate.errors(ms, GAMMAS, n=64, trials=1, keep_diagonal=True)
    r = np.random.default_rng(np.random.SeedSequence(0).spawn(1)[0])
    y = al.data.labels(64, r)
    X = r.standard_normal((32, 64)) + np.outer(ms.mu, y)
    K = np.tanh(X.T @ ms.M @ X / np.sqrt(32)) / np.sqrt(32)  # tanh is odd: a0 = 0
    np.testing.assert_allclose(kept.attention.values[0], interpolation_error(X @ K, y, GAMMAS),
                               rtol=1e-10)
    # unmasked softmax: the self-logit tr(M) / sqrt(p) ~ 11 takes nearly all the weight
    un = al.MatrixSetting(c=0.5, M=ms.M, mu=mu, attention=al.Softmax(1.0, mask=False))
    assert simulate.self_weight(un, n=64, trials=2).mean("self_weight") > 0.9
    masked = al.MatrixSetting(c=0.5, M=ms.M, mu=mu, attention=al.Softmax(1.0))
    assert simulate.self_weight(masked, n=64, trials=2).mean("self_weight") == 0.0
    with pytest.raises(ValueError, match="Softmax"):
        simulate.self_weight(ms, n=64)


@pytest.mark.usefixtures("book_cache")
def test_sweep_caches_matrix_settings():
    M, mu = _matrix(p=32, seed=7)
    settings = [al.MatrixSetting(c=0.5, M=M, mu=mu), al.MatrixSetting(c=0.5, M=M, mu=2 * mu)]
    first = sweeps.simulations(settings, GAMMAS, 64, 2)
    assert all(cache.entry(simulate.errors, setting=s, gammas=GAMMAS, n=64, trials=2, seed=0,
                           attention=True).hit for s in settings)
    again = sweeps.simulations(settings, GAMMAS, 64, 2)
    np.testing.assert_array_equal(first.attention, again.attention)
    np.testing.assert_array_equal(
        first.attention[1], simulate.errors(settings[1], GAMMAS, n=64, trials=2).attention.values)


# ----------------------------------------------------------------------------- theory
def test_ridge_theory_and_the_attention_theory_refusals():
    """Ridge sees c and snr only; the attention theory of a matrix (tests/test_matrix_theory.py;
    its finite-size version: tests/test_rank_finite_size.py) has no batch."""
    ms = al.MatrixSetting.from_setting(RANK_ONE, 128)
    np.testing.assert_allclose(al.theory.ridge_error(ms, GAMMAS), al.theory.ridge_error(RANK_ONE, GAMMAS),
                               rtol=1e-13)  # ridge sees c and snr only (snr to rounding here)
    with pytest.raises(ValueError, match="attention_error_batch does not take"):
        al.theory.attention_error_batch([RANK_ONE, ms], 0.1)


# ----------------------------------------------------------------------------- GPT-2's per-head softmax
def test_per_head_softmax_matches_softmax_kernel():
    """Each head's softmax of its own logits, its columns summing to one, written to its block."""
    p, n, H, beta = 12, 30, 2, 0.8
    rng = np.random.default_rng(8)
    W_K, W_Q = rng.standard_normal((2, H, 3, p)) / np.sqrt(p)  # head h: B_h = W_K[h]^T W_Q[h]
    B = np.einsum("hrp,hrq->hpq", W_K, W_Q)
    mu = np.eye(p)[0] * 1.3
    mc = gpt2.simulate_matrices({"heads": B, "one": B[:1]}, {"a": mu}, "tanh", GAMMAS, n=n,
                                trials=2, seed=1, attention=al.Softmax(beta))
    r = np.random.default_rng(np.random.SeedSequence(1).spawn(2)[1])
    y = al.data.labels(n, r)
    X = r.standard_normal((p, n)) + np.outer(mu, y)
    A = [al.kernel.softmax_kernel(X, W_K[h], W_Q[h], beta, alpha=0.0) for h in range(H)]
    for a in A:
        np.testing.assert_allclose(a.sum(axis=0), 1.0, rtol=1e-14)
        assert np.all(np.diag(a) == 0)
    heads = np.vstack([X[:6] @ A[0], X[6:] @ A[1]])
    np.testing.assert_allclose(mc.attention["heads"]["a"].values[1],
                               interpolation_error(heads, y, GAMMAS), rtol=1e-10)
    np.testing.assert_allclose(mc.attention["one"]["a"].values[1],
                               interpolation_error(X @ A[0], y, GAMMAS), rtol=1e-10)
    np.testing.assert_allclose(mc.scale["heads"]["a"].values[1], np.sum(heads ** 2) / n ** 2,
                               rtol=1e-12)
    with pytest.raises(ValueError, match="keep_diagonal"):
        gpt2.simulate_matrices({"B": B}, {"a": mu}, "tanh", GAMMAS, n=n, keep_diagonal=True,
                               attention=al.Softmax(beta))
    with pytest.raises(TypeError, match="attention must be"):
        gpt2.simulate_matrices({"B": B}, {"a": mu}, "tanh", GAMMAS, n=n, attention="softmax")


def test_relative_gammas_are_in_units_of_the_measured_scale():
    M, mu = _matrix(p=16, seed=9)
    kw = dict(matrices={"M": M}, mus={"a": mu}, f="tanh", n=40, trials=2, seed=3)
    raw = gpt2.simulate_matrices(gammas=GAMMAS, **kw)
    rel = gpt2.simulate_matrices(gammas=GAMMAS, relative=True, **kw)
    np.testing.assert_array_equal(raw.scale["M"]["a"].values, rel.scale["M"]["a"].values)
    r = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[0])
    y = al.data.labels(40, r)
    X = r.standard_normal((16, 40)) + np.outer(mu, y)
    K = np.tanh(X.T @ M @ X / 4.0) / 4.0
    np.fill_diagonal(K, 0.0)
    tau, tau_x = np.sum((X @ K) ** 2) / 1600, np.sum(X ** 2) / 1600
    assert rel.scale["M"]["a"].values[0] == pytest.approx(tau, rel=1e-12)
    assert rel.ridge_scale["a"].values[0] == pytest.approx(tau_x, rel=1e-12)
    np.testing.assert_allclose(rel.attention["M"]["a"].values[0],
                               interpolation_error(X @ K, y, GAMMAS * tau), rtol=1e-10)
    np.testing.assert_allclose(rel.ridge["a"].values[0], interpolation_error(X, y, GAMMAS * tau_x),
                               rtol=1e-10)
