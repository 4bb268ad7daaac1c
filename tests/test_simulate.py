"""Monte Carlo simulator: definitions, reproducibility, bad input."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model import kernel
from attn_lib.model.nonlinearity import (REGISTRY, Nonlinearity, check_nonlinearity, mixture,
                                          normalised, reflected, scaled)
from attn_lib.simulation import resolvent, trials
from attn_lib.simulation.resolvent import interpolation_error

GAMMAS = np.array([1e-4, 1e-2, 1.0, 10.0])


def _direct(Phi, y, gamma):
    n = Phi.shape[1]
    Q = np.linalg.inv(Phi.T @ Phi / n + gamma * np.eye(n))
    return gamma ** 2 * y @ Q @ Q @ y / n


@pytest.mark.parametrize("p, n", [(30, 50), (50, 50), (80, 50)])
def test_interpolation_error_matches_direct_solve(p, n):
    rng = np.random.default_rng(1)
    Phi, y = rng.standard_normal((p, n)), rng.choice([-1.0, 1.0], n)
    got = interpolation_error(Phi, y, GAMMAS)
    want = [_direct(Phi, y, g) for g in GAMMAS]
    assert np.allclose(got, want, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("p, n", [(30, 50), (80, 50)])
def test_interpolation_error_of_complex_features(p, n):
    # gamma^2 y^T (Phi^H Phi / n + gamma)^{-2} y / n through the real representation, against a
    # direct complex solve; real features stored as complex give the real error
    rng = np.random.default_rng(2)
    Phi = rng.standard_normal((p, n)) + 1j * rng.standard_normal((p, n))
    y = rng.choice([-1.0, 1.0], n)
    got = interpolation_error(Phi, y, GAMMAS)
    want = []
    for g in GAMMAS:
        Q = np.linalg.inv(Phi.conj().T @ Phi / n + g * np.eye(n))
        want.append((g ** 2 * y @ Q @ Q @ y / n).real)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-14)
    real = Phi.real
    assert np.allclose(interpolation_error(real + 0j, y, GAMMAS), interpolation_error(real, y, GAMMAS),
                       rtol=1e-12, atol=1e-15)


def test_attention_kernel_definition():
    s = al.Setting(c=0.5, snr=2.0, f="relu", wk_norm=1.5, wq_norm=0.7, cos_mu_wk=0.3,
                   cos_mu_wq=0.8, cos_wk_wq=0.1, alpha=1.3)
    smp = al.data.draw(s, 40, np.random.default_rng(2))
    p = smp.X.shape[0]

    def f(t):
        return np.maximum(t, 0) - s.hermite.a0
    K = al.kernel.attention_kernel(smp.X, f, smp.w_K, smp.w_Q, alpha=1.3)
    M = 1.3 * np.eye(p) + np.outer(smp.w_K, smp.w_Q)
    want = f(smp.X.T @ M @ smp.X / np.sqrt(p)) / np.sqrt(p)
    np.fill_diagonal(want, 0)
    assert np.allclose(K, want, atol=1e-13)
    Kd = al.kernel.attention_kernel(smp.X, f, smp.w_K, smp.w_Q, alpha=1.3, keep_diagonal=True)
    assert np.allclose(np.diag(Kd), np.diag(f(smp.X.T @ M @ smp.X / np.sqrt(p)) / np.sqrt(p)))


_FAST = [*REGISTRY.values(), normalised("tanh", 2.0), mixture(0.7), reflected("relu"),
         scaled("erf", 1.7), scaled(normalised("cos"), 1.5)]


def _plain_kernel(f, X, w_K, w_Q, alpha, keep_diagonal, a0):
    """The kernel as one call of ``f`` on the whole logits array (the path of a user callable)."""
    K = np.asarray(f(kernel.logits(X, w_K, w_Q, alpha)), dtype=float) - a0
    K *= 1.0 / np.sqrt(X.shape[0])
    if not keep_diagonal:
        np.fill_diagonal(K, 0.0)
    return K


@pytest.mark.parametrize("f", _FAST, ids=repr)
def test_blockwise_kernel_equals_one_call_of_f(f):
    # n = 300: 109 rows per 256 KB block, so 3 blocks over 2 threads and a ragged last block
    s = al.Setting(c=0.5, snr=2.0, f=f, wk_norm=1.5, wq_norm=0.8, cos_mu_wk=0.6,
                   cos_mu_wq=0.3, cos_wk_wq=0.2, alpha=1.2)
    smp = al.data.draw(s, 300, np.random.default_rng(4))
    a0 = s.hermite.a0
    with kernel.BLAS.limit(limits=2):  # the threaded path, whatever the machine's BLAS threads
        for keep in (False, True):
            want = _plain_kernel(f, smp.X, smp.w_K, smp.w_Q, 1.2, keep, a0)
            got = kernel.attention_kernel(smp.X, f, smp.w_K, smp.w_Q, 1.2, keep, a0=a0)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
            gram = smp.X.T @ smp.X
            got = kernel.attention_kernel(smp.X, f, smp.w_K, smp.w_Q, 1.2, keep, gram, a0)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
            T = kernel.logits(smp.X, smp.w_K, smp.w_Q, 1.2)
            T0 = T.copy()
            np.testing.assert_allclose(kernel.apply(f, T, smp.X.shape[0], keep, a0), want,
                                       rtol=1e-12, atol=0)
            assert np.array_equal(T, T0)  # overwrite=False leaves T alone


@pytest.mark.parametrize("f", _FAST, ids=repr)
def test_symmetric_kernel_of_aligned_weights(f):
    # w_Q = 2 w_K: f on the upper triangle only, the lower one its mirror
    s = al.Setting(c=0.5, snr=2.0, f=f, wk_norm=1.0, wq_norm=2.0, alpha=0.8)
    smp = al.data.draw(s, 300, np.random.default_rng(8))
    a0 = s.hermite.a0
    with kernel.BLAS.limit(limits=2):
        for keep in (False, True):
            want = _plain_kernel(f, smp.X, smp.w_K, smp.w_Q, 0.8, keep, a0)
            assert np.array_equal(
                kernel.attention_kernel(smp.X, f, smp.w_K, smp.w_Q, 0.8, keep, a0=a0), want)
            got = kernel.attention_kernel(smp.X, f, smp.w_K, smp.w_Q, 0.8, keep, a0=a0,
                                          use_symmetry=True)
            assert np.array_equal(got, got.T)
            upper = np.triu_indices(300)
            assert np.array_equal(got[upper], want[upper])  # the same arithmetic as one call
            # the mirror differs by the rounding of the rank-one term only
            assert np.abs(got - want).max() <= 1e-12 * np.abs(want).max()


def test_a_user_callable_is_called_once_on_the_whole_array():
    calls = []

    def f(t):
        calls.append(np.shape(t))
        return np.tanh(t)

    smp = al.data.draw(al.Setting(c=0.5), 300, np.random.default_rng(5))
    g = Nonlinearity(f)
    calls.clear()  # the constructor probed f
    K = kernel.attention_kernel(smp.X, g, smp.w_K, smp.w_Q)
    assert calls == [(300, 300)] and not g.registered and REGISTRY["tanh"].registered
    np.testing.assert_array_equal(
        K, _plain_kernel(REGISTRY["tanh"], smp.X, smp.w_K, smp.w_Q, 1.0, False, 0.0))


@pytest.mark.parametrize("cos", [0.2, 1.0])  # w_K, w_Q at an angle, or aligned (symmetric K)
@pytest.mark.parametrize("c", [0.5, 1.2])
@pytest.mark.parametrize("f", ["tanh", "relu", "sign", mixture(0.7)], ids=repr)
def test_errors_equal_those_of_the_plain_kernel(f, c, cos):
    s = al.Setting(c=c, snr=2.0, f=f, wk_norm=1.5, wq_norm=0.8, cos_mu_wk=0.6, cos_mu_wq=0.6,
                   cos_wk_wq=cos, alpha=1.2)
    n, g = 300, np.logspace(-4, 1, 6)
    att, ridge = al.simulate.draw_errors(s, g, n, np.random.default_rng(6))
    smp = al.data.draw(s, n, np.random.default_rng(6))
    K = _plain_kernel(check_nonlinearity(f), smp.X, smp.w_K, smp.w_Q, 1.2, False, s.hermite.a0)
    np.testing.assert_allclose(att, interpolation_error(smp.X @ K, smp.y, g), rtol=1e-10)
    np.testing.assert_allclose(ridge, interpolation_error(smp.X, smp.y, g), rtol=1e-10)

def test_draw_errors_match_definition():
    s = al.Setting(c=1.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=2.0)
    n = 60
    att, ridge = al.simulate.draw_errors(s, GAMMAS, n, np.random.default_rng(3))
    smp = al.data.draw(s, n, np.random.default_rng(3))
    p = smp.X.shape[0]
    K = np.tanh(smp.X.T @ (np.eye(p) + np.outer(smp.w_K, smp.w_Q)) @ smp.X / np.sqrt(p)) / np.sqrt(p)
    np.fill_diagonal(K, 0)
    assert np.allclose(att, [_direct(smp.X @ K, smp.y, g) for g in GAMMAS], rtol=1e-8)
    assert np.allclose(ridge, [_direct(smp.X, smp.y, g) for g in GAMMAS], rtol=1e-8)


def test_seeding_prefix_and_bit_identity():
    s = al.Setting(c=0.5, snr=1.0)
    r4 = al.simulate.errors(s, GAMMAS, n=64, trials=4, seed=7)
    r8 = al.simulate.errors(s, GAMMAS, n=64, trials=8, seed=7)
    again = al.simulate.errors(s, GAMMAS, n=64, trials=4, seed=7)
    assert np.array_equal(r4.attention.values, r8.attention.values[:4])
    assert np.array_equal(r4.ridge.values, again.ridge.values)
    assert np.array_equal(r4.attention.values, again.attention.values)
    other = al.simulate.errors(s, GAMMAS, n=64, trials=4, seed=8)
    assert not np.array_equal(r4.ridge.values, other.ridge.values)


def test_shapes_and_single_trial_std():
    s = al.Setting(c=0.5)
    r = al.simulate.errors(s, 0.1, n=32, trials=1)
    assert r.attention.mean.shape == () and r.ridge.std.shape == ()
    assert r.attention.std == 0.0 and r.ridge.sem == 0.0
    r = al.simulate.errors(s, GAMMAS, n=32, trials=3)
    assert r.attention.mean.shape == GAMMAS.shape and r.p == 16 and r.n == 32
    assert np.all((r.attention.values >= 0) & (r.attention.values <= 1 + 1e-12))
    ridge_only = al.simulate.errors(s, GAMMAS, n=32, trials=3, attention=False)
    assert ridge_only.attention is None
    assert np.array_equal(ridge_only.ridge.values, r.ridge.values)


def test_large_gamma_limit_is_one_and_interpolation_for_p_above_n():
    s = al.Setting(c=2.0, snr=1.0, wk_norm=1.0, wq_norm=1.0)
    r = al.simulate.errors(s, [1e-8, 1e6], n=64, trials=2)
    assert np.allclose(r.ridge.mean, [0, 1], atol=1e-5)
    assert np.allclose(r.attention.mean, [0, 1], atol=1e-3)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(gammas=0.0), ValueError, r"gammas must be in \(0"),
    (dict(gammas=-1.0), ValueError, "gammas"),
    (dict(gammas=[[1.0]]), ValueError, "1-D"),
    (dict(gammas=[1.0, np.nan]), ValueError, "finite"),
    (dict(gammas=[]), ValueError, "empty"),
    (dict(gammas="a"), TypeError, "gammas"),
    (dict(n=0), ValueError, "n must be an integer >= 1"),
    (dict(n=10.0), TypeError, "n must be an integer"),
    (dict(trials=0), ValueError, "trials"),
    (dict(trials=1.5), TypeError, "trials"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(keep_diagonal="yes"), TypeError, "keep_diagonal"),
])
def test_bad_inputs(kwargs, exc, match):
    args = dict(gammas=1.0, n=16, trials=1, seed=0) | kwargs
    with pytest.raises(exc, match=match):
        al.simulate.errors(al.Setting(c=0.5), **args)


def test_bad_setting_type():
    with pytest.raises(TypeError, match="setting"):
        al.simulate.errors({"c": 0.5}, 1.0)


@pytest.mark.parametrize("m", [1, 2, 3, 40])
def test_krylov_tridiagonal_reproduces_quadratic_forms(m):
    rng = np.random.default_rng(m)
    B = rng.standard_normal((m, 2 * m))
    A, v = B @ B.T, rng.standard_normal(m)
    d, e = resolvent.krylov_tridiagonal(A, v)
    T = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    assert np.allclose(np.linalg.eigvalsh(T), np.linalg.eigvalsh(A), atol=1e-10 * np.abs(A).max())
    for gamma in (1e-3, 1.0):
        R = np.linalg.inv(A + gamma * np.eye(m))
        r1, r2 = resolvent.resolvent_moments(d, e, np.array([gamma]))
        assert r1[0] * (v @ v) == pytest.approx(v @ R @ v, rel=1e-9)
        assert r2[0] * (v @ v) == pytest.approx(v @ R @ R @ v, rel=1e-9)


def test_reductions_side_by_side_equal_one_call_each():
    rng = np.random.default_rng(7)
    y = rng.choice([-1.0, 1.0], 60)
    feats = [rng.standard_normal((30, 60)), rng.standard_normal((80, 60)), np.zeros((20, 60))]
    grams = [F.T @ F / 60 for F in feats[:2]]
    with kernel.BLAS.limit(limits=2):  # two reductions at once, whatever the machine's BLAS
        got = resolvent.interpolation_errors(feats, y, GAMMAS)
        got_gram = resolvent.interpolation_errors(grams, y, GAMMAS, gram=True)
    for F, A, e, e_gram in zip(feats, grams, got, got_gram):
        np.testing.assert_array_equal(e, interpolation_error(F, y, GAMMAS))
        np.testing.assert_array_equal(e_gram, resolvent.gram_error(A, y, GAMMAS))
    assert np.all(got[2] == 1.0)  # Phi y = 0: E = ||y||^2 / n


def test_standard_error():
    v = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]])
    np.testing.assert_allclose(trials.standard_error(v, axis=0), [2.0, 4.0] / np.sqrt(3))
    np.testing.assert_allclose(trials.standard_error(v.T, axis=1), [2.0, 4.0] / np.sqrt(3))
    np.testing.assert_array_equal(trials.standard_error(v[:1], axis=0), [0.0, 0.0])
