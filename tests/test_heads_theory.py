"""The multi-head deterministic equivalent (:mod:`attn_lib.theory._heads`) and its setting."""

import numpy as np
import pytest
from heads_reference import DensePencil
from threadpoolctl import threadpool_limits

import attn_lib as al
from attn_lib.model import data, hermite
from attn_lib.simulation.resolvent import interpolation_error
from attn_lib.simulation.trials import Trials
from attn_lib.studies import gpt2
from attn_lib.theory import _heads, _matrix

# small heads and aligned signals on purpose
pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

GAMMAS = np.array([1e-3, 0.1, 1.0])


def _heads_of(p, ranks, seed, scales=None, identity=0.0):
    """Head matrices ``W_K^h W_Q^h T`` of the given ranks (``W_Q`` correlated with ``W_K``, so
    that the traces are not zero), each scaled to ``scales[h]`` (logit std), the first plus
    ``identity * I`` before scaling."""
    rng = np.random.default_rng(seed)
    out = []
    for h, r in enumerate(ranks):
        W_K = rng.standard_normal((p, r))
        B = W_K @ (0.6 * W_K + rng.standard_normal((p, r))).T + (identity * np.eye(p) if h == 0 else 0)
        s = 1.0 if scales is None else scales[h]
        out.append(B * s / (np.linalg.norm(B) / np.sqrt(p)))
    return np.array(out)


def _unit(p, seed, snr=1.0):
    mu = np.random.default_rng(seed).standard_normal(p)
    return np.sqrt(snr) * mu / np.linalg.norm(mu)


def _matrix_case(p=30):
    rng = np.random.default_rng(2)
    M = 0.2 * np.eye(p) + rng.standard_normal((p, p)) / np.sqrt(p)
    mu = rng.standard_normal(p)
    return M, mu / np.linalg.norm(mu)


def test_one_head_is_the_any_matrix_theory():
    """``H = 1``: the pencil is :mod:`~attn_lib.theory._matrix`'s. Measured relative
    differences <= 3.5e-12 in ``y^T Q y / n`` and 5e-11 in E (the two solvers' tolerances,
    1e-12 and 1e-10 relative); 1e-9 passes."""
    M, mu = _matrix_case()
    with threadpool_limits(1):
        q0, E0 = _matrix.matrix_resolvent_form(0.5, M, mu, "tanh", GAMMAS)
        q1, E1 = _heads.heads_resolvent_form(0.5, M[None], mu, "tanh", GAMMAS)
    np.testing.assert_allclose(q1, q0, rtol=1e-9, atol=0)
    np.testing.assert_allclose(E1, E0, rtol=1e-9, atol=0)


def test_identical_heads_are_one_matrix():
    """``H`` identical heads: their logits are equal, so are their residuals (``C = b2``, the
    exact ``|r| = 1`` branch of :func:`~attn_lib.model.hermite.residual_covariance`), and
    ``sum_h P_h = I`` makes ``Phi`` the one matrix's ``X K``: the any-matrix theory of ``M``,
    with blocks of unequal size (``p = 30``, ``H = 4``). Measured relative differences <= 4e-13
    and 5e-11; 1e-9 passes."""
    M, mu = _matrix_case()
    with threadpool_limits(1):
        q0, E0 = _matrix.matrix_resolvent_form(0.5, M, mu, "tanh", GAMMAS)
        q1, E1 = _heads.heads_resolvent_form(0.5, np.array([M] * 4), mu, "tanh", GAMMAS)
    np.testing.assert_allclose(q1, q0, rtol=1e-9, atol=0)
    np.testing.assert_allclose(E1, E0, rtol=1e-9, atol=0)


def _heads_model(c, B, mu, f):
    """The inputs of the pencil as :func:`~attn_lib.theory._heads.heads_resolvent_form` forms
    them, for the dense reference."""
    p = B.shape[1]
    sig = np.array([np.linalg.norm(b) / np.sqrt(p) for b in B])
    M = B / sig[:, None, None]
    C = hermite.residual_covariance(f, sig, np.einsum("hij,kij->hk", M, M) / p)
    rho = np.sqrt(c) * np.array([hermite.coefficients(f, s).a1 for s in sig])
    return dict(c=c, M=M, rho=rho, k0=rho * np.trace(M, axis1=1, axis2=2) / p, C=C, m=mu)


@pytest.mark.parametrize("f", ["tanh", "relu"])
def test_against_the_dense_pencil(f):
    """Three distinct heads (ranks 10, 2 and 4 at logit scales 1, 3 and 0.5, one with an
    identity part; unequal blocks 4, 3, 3 of ``p = 10``) and an SNR-1.5 signal: the fast
    module (collapsed ``2p x 2p`` p-side, factors, Anderson, complex-step tangent) against the
    dense pencil of ``tests/heads_reference.py`` (all ``1 + 4H`` p-variables, Newton, Richardson).
    Measured ``|E_fast - E_dense|`` <= 1.1e-11 (tanh and relu: the residual covariance has odd and
    even orders); the bound 1e-9 is the Richardson difference's accuracy (``h = 1e-3``:
    ``O(h^4)``, and a Newton tolerance 1e-13 over ``h``)."""
    p = 10
    B = _heads_of(p, (10, 2, 4), seed=1, scales=(1.0, 3.0, 0.5), identity=0.3)
    mu = _unit(p, 3, snr=1.5)
    kw = _heads_model(0.5, B, mu, f)
    assert np.abs(kw["C"] - np.diag(np.diag(kw["C"]))).max() > 1e-6  # correlated residuals
    ref = DensePencil(kw["c"], kw["M"], kw["rho"], kw["k0"], kw["C"], al.kernel.head_blocks(p, 3), mu)
    with threadpool_limits(1):
        q, E = _heads.heads_resolvent_form(0.5, B, mu, f, GAMMAS)
        q0, E0 = ref.resolvent_form(GAMMAS)
    np.testing.assert_allclose(E, E0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(q, q0, rtol=1e-10, atol=0)


def test_coordinates_permuted_within_blocks():
    """A permutation ``Pi`` that keeps every head's block (``B_h -> Pi B_h Pi^T``,
    ``mu -> Pi mu``) is ``Z -> Pi Z`` and leaves the model unchanged. Measured relative
    difference 1e-13; 1e-10 passes. (A rotation mixing the blocks does not: the heads write
    fixed coordinates.)"""
    p, H = 12, 3
    B = _heads_of(p, (4, 4, 12), seed=5)
    mu = _unit(p, 6)
    rng = np.random.default_rng(7)
    perm = np.concatenate([rng.permutation(b) for b in al.kernel.head_blocks(p, H)])
    with threadpool_limits(1):
        E = _heads.heads_error(0.5, B, mu, "tanh", GAMMAS)
        E2 = _heads.heads_error(0.5, B[:, perm][:, :, perm], mu[perm], "tanh", GAMMAS)
    np.testing.assert_allclose(E2, E, rtol=1e-10, atol=0)


def test_convergence_error(monkeypatch):
    """A fixed point that does not converge raises ConvergenceError naming gamma and the
    residual, never NaN."""
    monkeypatch.setattr(_heads, "_MAX_ITER", 2)
    M, mu = _matrix_case(12)
    # the first point of the path, max(1, max gamma)
    with pytest.raises(al.theory.ConvergenceError, match=r"\(gamma=1\).*last relative residual"):
        _heads.heads_error(0.5, M[None], mu, "tanh", GAMMAS)


def test_bad_input():
    B = _heads_of(6, (2, 2), seed=0)
    with pytest.raises(ValueError, match="heads must have shape"):
        _heads.heads_error(0.5, np.ones((7, 2, 2)), np.ones(2), "tanh", GAMMAS)
    with pytest.raises(ValueError, match="heads must be a 3-D array"):
        _heads.heads_error(0.5, B[0], np.ones(6), "tanh", GAMMAS)
    with pytest.raises(ValueError, match="mu must have shape"):
        _heads.heads_error(0.5, B, np.ones(5), "tanh", GAMMAS)
    with pytest.raises(ValueError, match=r"heads\[1\] must not be zero"):
        _heads.heads_error(0.5, np.stack([B[0], 0 * B[0]]), np.ones(6), "tanh", GAMMAS)
    with pytest.raises(ValueError, match="c must be"):
        _heads.heads_error(0.0, B, np.ones(6), "tanh", GAMMAS)


# ----------------------------------------------------------------------------- the setting
def _setting(p=12, H=3, **kw):
    return al.HeadsSetting(c=0.5, heads=_heads_of(p, (3,) * H, seed=4), mu=_unit(p, 1), **kw)


def test_setting_validation():
    B = _heads_of(6, (2, 2), seed=0)
    with pytest.raises(ValueError, match="heads must be a 3-D array"):
        al.HeadsSetting(c=0.5, heads=B[0], mu=np.ones(6))
    with pytest.raises(ValueError, match=r"shape \(H, p, p\)"):
        al.HeadsSetting(c=0.5, heads=np.ones((2, 3, 4)), mu=np.ones(4))
    with pytest.raises(ValueError, match=r"shape \(H, p, p\) with p >= 2"):
        al.HeadsSetting(c=0.5, heads=np.ones((1, 1, 1)), mu=np.ones(1))
    with pytest.raises(ValueError, match="H = 4 heads need at most p = 3"):
        al.HeadsSetting(c=0.5, heads=np.ones((4, 3, 3)), mu=np.ones(3))
    with pytest.raises(ValueError, match=r"heads\[1\] must not be zero"):
        al.HeadsSetting(c=0.5, heads=np.stack([B[0], 0 * B[0]]), mu=np.ones(6))
    with pytest.raises(ValueError, match="heads must be finite"):
        al.HeadsSetting(c=0.5, heads=np.full((1, 2, 2), np.nan), mu=np.ones(2))
    with pytest.raises(ValueError, match=r"mu must have shape \(6,\)"):
        al.HeadsSetting(c=0.5, heads=B, mu=np.ones(5))
    with pytest.raises(TypeError, match="heads must be"):
        al.HeadsSetting(c=0.5, heads="x", mu=np.ones(5))
    with pytest.raises(ValueError, match="c must be"):
        al.HeadsSetting(c=-1.0, heads=B, mu=np.ones(6))
    s = al.HeadsSetting(c=0.5, heads=B, mu=np.ones(6))
    assert s.H == 2 and s.p() == 6 and s.p(12) == 6 and s.snr == 6.0
    with pytest.raises(ValueError, match="n=14 does not fit the matrix: heads are 2 x 6 x 6"):
        s.p(14)
    np.testing.assert_allclose(s.logit_scales, 1.0)
    assert [b.tolist() for b in s.blocks] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(AttributeError, match="one logit scale per head"):
        s.logit_scale
    assert not s.heads.flags.writeable and not s.mu.flags.writeable
    assert s == al.HeadsSetting(c=0.5, heads=B.copy(), mu=np.ones(6))
    assert hash(s) == hash(al.HeadsSetting(c=0.5, heads=B.copy(), mu=np.ones(6)))
    assert s != al.HeadsSetting(c=0.5, heads=2 * B, mu=np.ones(6))


def test_simulate_is_simulate_matrices():
    """``simulate.errors`` of a HeadsSetting is :func:`gpt2.simulate_matrices` of its stack, bit
    for bit (entry-wise and softmax, ``H`` not dividing ``p``), and one head is the
    MatrixSetting of its matrix. Softmax attention is simulated at the raw gammas of
    ``simulate.raw_gammas`` (the effective gamma times ``s_n^2``), ridge at the gammas given."""
    p, H = 11, 3
    s = _setting(p, H)
    G = GAMMAS.size
    for kind in (al.Entrywise(), al.Softmax(beta=1.0)):
        hs = al.HeadsSetting(c=0.5, heads=s.heads, mu=s.mu, attention=kind)
        r = al.simulate.errors(hs, GAMMAS, n=22, trials=2, seed=3)
        raw = np.concatenate([al.simulate.raw_gammas(hs, GAMMAS, 22)[0], GAMMAS])
        mc = gpt2.simulate_matrices({"h": s.heads}, {"m": s.mu}, "tanh", raw, n=22, trials=2,
                                    seed=3, attention=kind)
        assert np.array_equal(r.attention.values, mc.values["attention", "h", "m"][:, :G])
        assert np.array_equal(r.ridge.values, mc.values["ridge", "m"][:, G:])
    one = al.HeadsSetting(c=0.5, heads=s.heads[:1], mu=s.mu)
    ms = al.MatrixSetting(c=0.5, M=s.heads[0], mu=s.mu)
    assert np.array_equal(al.simulate.errors(one, GAMMAS, n=22, trials=2).attention.values,
                          al.simulate.errors(ms, GAMMAS, n=22, trials=2).attention.values)
    with pytest.raises(ValueError, match="n=30 does not fit"):
        al.simulate.errors(s, GAMMAS, n=30)


def test_attention_error_dispatches_a_heads_setting():
    s = _setting()
    with threadpool_limits(1):
        q, E = _heads.heads_resolvent_form(0.5, s.heads, s.mu, "tanh", GAMMAS)
        E2 = al.theory.attention_error(s, GAMMAS)
        q2, dq2 = al.theory.attention_resolvent_form(s, GAMMAS)
    np.testing.assert_allclose(E2, E, rtol=1e-12, atol=0)
    np.testing.assert_allclose(q2, q, rtol=1e-12, atol=0)
    np.testing.assert_allclose(-GAMMAS ** 2 * dq2, E, rtol=1e-12, atol=0)


def test_finite_size_one_head_and_identical_heads():
    """With ``n``: one head is the any-matrix finite-size theory (the limit plus the reduced
    model's shift), and ``H`` identical heads (blocks of unequal size, ``sum_h w_h = 1``) are the
    one matrix again. Measured relative differences <= 3e-12; 1e-9 passes. The shift is not
    zero here (it moves E by 1-3 %)."""
    M, mu = _matrix_case(p=64)
    mu = 1.5 * mu + 0.8 * M[:, 0]
    with threadpool_limits(1):
        E0 = al.theory.attention_error(al.MatrixSetting(c=0.5, M=M, mu=mu), GAMMAS, n=128)
        lim = al.theory.attention_error(al.MatrixSetting(c=0.5, M=M, mu=mu), GAMMAS)
        for heads in (M[None], np.array([M] * 3)):
            E = al.theory.attention_error(al.HeadsSetting(c=0.5, heads=heads, mu=mu), GAMMAS, n=128)
            np.testing.assert_allclose(E, E0, rtol=1e-9, atol=0)
    assert np.all(np.abs(E0 / lim - 1) > 0.005), (E0, lim)


def test_finite_size_is_the_limit_plus_the_weighted_shifts():
    """Distinct heads on blocks of unequal size (``p = 30``, ``H = 4``: 8, 8, 7, 7 rows): the
    finite-size theory is the limit plus each head's own one-matrix shift weighted by its share of
    the rows, and its ``y^T Q y / n`` moves with it (``attention_resolvent_form``)."""
    B = _heads_of(30, (30, 8, 8, 8), seed=5, identity=0.5)
    mu = _unit(30, 6, snr=2.0)
    s = al.HeadsSetting(c=0.5, heads=B, mu=mu)
    w = np.array([8, 8, 7, 7]) / 30
    with threadpool_limits(1):
        shift = sum(w_h * (al.theory.attention_error(al.MatrixSetting(c=0.5, M=b, mu=mu), GAMMAS, n=60)
                           - al.theory.attention_error(al.MatrixSetting(c=0.5, M=b, mu=mu), GAMMAS))
                    for w_h, b in zip(w, B))
        lim = al.theory.attention_error(s, GAMMAS)
        E = al.theory.attention_error(s, GAMMAS, n=60)
        q, dq = al.theory.attention_resolvent_form(s, GAMMAS, n=60)
    np.testing.assert_allclose(E, lim + shift, rtol=1e-9, atol=0)
    np.testing.assert_allclose(al.theory.attention.heads_shift(s, GAMMAS, n=60), shift, rtol=1e-9,
                               atol=1e-14)
    np.testing.assert_allclose(-GAMMAS ** 2 * dq, E, rtol=1e-12, atol=0)
    assert np.all(np.abs(shift) > 1e-4), shift


def test_heads_setting_refusals():
    s = _setting()
    with pytest.raises(ValueError, match="n=30 does not fit"):
        al.theory.attention_error(s, GAMMAS, n=30)
    with pytest.warns(al.DomainWarning, match="n = 24 is below 256"):
        al.theory.attention_error(s, GAMMAS, n=24)
    with pytest.raises(ValueError, match="softmax attention with several heads"):
        al.theory.attention_error(_setting(attention=al.Softmax(beta=1.0)), GAMMAS)
    with pytest.raises(ValueError, match="attention_error_batch does not take an attn_lib.HeadsSetting"):
        al.theory.attention_error_batch([s], 0.1)
    with pytest.raises(ValueError, match="HeadsSetting is attention_error"):
        al.theory.attention_bulk(s, GAMMAS)
    with pytest.raises(TypeError, match="setting must be"):
        al.simulate.self_weight(_setting(attention=al.Softmax(beta=1.0)), n=24)


# ----------------------------------------------------------------------------- Monte Carlo
def _surrogate_trial(B, mu, n, gammas):
    """One draw of the Gaussian equivalent of the module docstring: per head
    ``K_h = a1_h (X^T M'_h X / p - diag) + W_h / sqrt(p)`` with GOEs ``W_h`` correlated by
    the residual covariance ``C`` (``W_h = sum_k chol(C)[h, k] W'_k``)."""
    H, p, _ = B.shape
    sig = np.array([np.linalg.norm(b) / np.sqrt(p) for b in B])
    M = B / sig[:, None, None]
    a1 = np.array([hermite.coefficients("tanh", s).a1 for s in sig])
    Lc = np.linalg.cholesky(hermite.residual_covariance("tanh", sig, np.einsum("hij,kij->hk", M, M) / p))
    blocks = al.kernel.head_blocks(p, H)

    def trial(rng):
        y = data.labels(n, rng)
        X = rng.standard_normal((p, n)) + np.outer(mu, y)
        W = [data.goe(n, rng) for _ in range(H)]
        Phi = np.empty((p, n))
        for h in range(H):
            T = X.T @ M[h] @ X / p
            np.fill_diagonal(T, 0.0)
            Phi[blocks[h]] = X[blocks[h]] @ (a1[h] * T + sum(Lc[h, k] * W[k] for k in range(H)) / np.sqrt(p))
        return {"sur": interpolation_error(Phi, y, gammas)}
    return trial


def _mc_heads(p=160):
    """Four heads of rank ``p / 4`` (GPT-2's shape), one with an identity part, at logit scales
    1, 1, 2 and 0.5, and an SNR-1 signal."""
    return _heads_of(p, (p, p // 4, p // 4, p // 4), seed=7, scales=(1.0, 1.0, 2.0, 0.5),
                     identity=0.5), _unit(p, 8)


def _within_and_sharp(th, mc):
    """``th`` within 4 s.e. of the Monte Carlo, and a theory 10 % off outside 4 s.e."""
    assert np.all(np.abs(th - mc.mean) < 4 * mc.sem), (th, mc.mean, mc.sem)
    for off in (0.9, 1.1):
        assert np.all(np.abs(off * th - mc.mean) > 4 * mc.sem), (off, th, mc.mean, mc.sem)


@pytest.mark.slow
def test_against_the_surrogate_monte_carlo():
    """Theory against Monte Carlo of the Gaussian equivalent itself (the pencil's algebra, with
    only finite-size error): ``p = 160``, ``n = 320``, ``H = 4``, 300 trials (s.e.
    0.0017-0.0019, 12 s). The theory (E = 0.274, 0.334, 0.453) is below it by 0.0023-0.0029
    (1.3-1.6 s.e.), the finite-size offset (the first 100 trials alone: 3.0-3.2 s.e. of theirs,
    which is why 300); 4 s.e. (<= 0.008) passes, and a theory 10 % off (0.027-0.045) fails."""
    B, mu = _mc_heads()
    with threadpool_limits(1):
        th = _heads.heads_error(0.5, B, mu, "tanh", GAMMAS)
        mc = Trials.run(_surrogate_trial(B, mu, 320, GAMMAS), trials=300, seed=1, gammas=GAMMAS,
                        n=320, p=160).stats("sur")
    _within_and_sharp(th, mc)


@pytest.mark.slow
def test_against_the_real_monte_carlo():
    """Theory against Monte Carlo of the real per-head tanh kernel (``simulate.errors`` of the
    HeadsSetting), the same heads and sizes as the surrogate test: the Gaussian equivalence per
    head adds its error. 100 trials (s.e. 0.003): the theory is within 0.4 s.e. (300 trials,
    s.e. 0.0017-0.0019: below by 0.0007-0.0026, 0.4-1.4 s.e.); 4 s.e. passes and a theory 10 %
    off fails. The summed-logit theory of ``sum_h B_h`` (the book's one-matrix model; 0.314,
    0.364, 0.490) is 10-13 s.e. off: the check tells the two models apart."""
    B, mu = _mc_heads()
    s = al.HeadsSetting(c=0.5, heads=B, mu=mu, f="tanh")
    with threadpool_limits(1):
        th = al.theory.attention_error(s, GAMMAS)
        summed = _matrix.matrix_error(0.5, B.sum(axis=0), mu, "tanh", GAMMAS)
        mc = al.simulate.errors(s, GAMMAS, n=320, trials=100, seed=2).attention
    _within_and_sharp(th, mc)
    assert np.all(np.abs(summed - mc.mean) > 4 * mc.sem), (summed, mc.mean, mc.sem)


def test_tangent_is_the_complex_step():
    """The forward-mode tangent map (:meth:`_Heads.tangent_map`) against one complex step of the
    fixed-point map, ``Im Phi(g + i s v, gamma + i s) / s``, at a point off the fixed point and
    a random direction: measured relative difference 2e-13; 1e-11 passes."""
    p = 10
    B = _heads_of(p, (10, 2, 4), seed=1, scales=(1.0, 3.0, 0.5), identity=0.3)
    model = _heads._Heads(**_heads_model(0.5, B, _unit(p, 3, snr=1.5), "tanh"))
    rng = np.random.default_rng(0)
    g = np.linalg.inv(model.initial(0.1)) + 0.05 * rng.standard_normal((7, 7))
    v = rng.standard_normal((7, 7))
    exact = model.phi(g + 1e-20j * v, 0.1 + 1e-20j).imag / 1e-20
    np.testing.assert_allclose(model.tangent_map(g, 0.1)(v), exact, rtol=0,
                               atol=1e-11 * np.abs(exact).max())


def test_gpt2_heads_theory():
    """:func:`gpt2.heads_theory` is the theory of the HeadsSetting of ``gpt2.heads`` (two heads
    of 64 in ``p = 128``, random weights), at both scales; with ``n``, the limit plus
    :func:`gpt2.heads_shift`."""
    rng = np.random.default_rng(9)
    W_Q, W_K = rng.standard_normal((2, 128, 128)) / np.sqrt(128)
    mu = _unit(128, 10)
    for scale in ("unit", "gpt2"):
        s = al.HeadsSetting(c=0.5, heads=gpt2.heads(W_Q, W_K, scale), mu=mu)
        with threadpool_limits(1):
            want = al.theory.attention_error(s, GAMMAS)
        np.testing.assert_array_equal(gpt2.heads_theory(W_Q, W_K, mu, 0.5, "tanh", GAMMAS, scale), want)
    # the finite-size version and its shift alone (unit scale)
    fs = gpt2.heads_theory(W_Q, W_K, mu, 0.5, "tanh", GAMMAS, "unit", n=256)
    lim = gpt2.heads_theory(W_Q, W_K, mu, 0.5, "tanh", GAMMAS, "unit")
    np.testing.assert_allclose(gpt2.heads_shift(W_Q, W_K, mu, 0.5, "tanh", GAMMAS, "unit", 256),
                               fs - lim, rtol=1e-9, atol=1e-13)


def test_block_grams_formed_per_use_are_the_stored_ones(monkeypatch):
    """Heads whose block Grams ``L^T P_k L`` exceed ``_GRAM_LIMIT`` form them per use: the
    fixed-point map and its tangent are those of the stored Grams (measured relative
    differences 4e-17 and 1.6e-14; 1e-12 passes)."""
    p = 10
    B = _heads_of(p, (10, 2, 4), seed=1, scales=(1.0, 3.0, 0.5), identity=0.3)
    kw = _heads_model(0.5, B, _unit(p, 3, snr=1.5), "tanh")
    stored = _heads._Heads(**kw)
    monkeypatch.setattr(_heads, "_GRAM_LIMIT", 0)
    formed = _heads._Heads(**kw)
    assert stored.Lam is not None and formed.Lam is None
    rng = np.random.default_rng(0)
    g = np.linalg.inv(stored.initial(0.1)) + 0.05 * rng.standard_normal((7, 7))
    v = rng.standard_normal((7, 7))
    for a, b in ((stored.phi(g, 0.1), formed.phi(g, 0.1)),
                 (stored.tangent_map(g, 0.1)(v), formed.tangent_map(g, 0.1)(v))):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())
