"""The batched finite-size solver: main's values, batches against single solves, its paths."""

import numpy as np
import pytest

from attn_lib import Setting
from attn_lib.theory import ConvergenceError, attention_error, attention_resolvent_form
from attn_lib.theory import _finite_size as finite_size
from attn_lib.theory import _finite_size_iteration as iteration
from attn_lib.theory.attention import attention_error_batch
from attn_lib.theory.shift import shift_functions

# small n and strong shifts on purpose: the solver's paths, not its accuracy
pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

EXAMPLE = Setting(c=0.3, snr=6.0, f="sign", wk_norm=2.0, wq_norm=3.5)            # r = 1
R3 = Setting(c=0.5, snr=6.0, f="erf", wk_norm=1.5, wq_norm=2.0, cos_mu_wk=0.8, cos_mu_wq=0.6,
             cos_wk_wq=0.3)                                                        # r = 3

# q = y^T Q y / n and dq/dgamma from main's solver before the batched one (commit 61eff64:
# sequential continuation from gamma = 10 in steps of ratio 2, Anderson to a relative 1e-10),
# to 12 digits. The batched solver reaches the same fixed points: measured 3e-9 relative at
# most over benchmarks/finite_size_speed.py's 13 cases (the bound is 1e-6).
MAIN = {
    "example": (EXAMPLE, 2048, [20.0, 1e-3, 0.1, 0.1, 1.0],
                [0.00176148857413, 8.90121991625, 0.118523754699, 0.118523754699, 0.0196553827245],
                [-7.79274180371e-05, -8853.40389796, -0.978343044863, -0.978343044863, -0.0148848655466]),
    "erf-r3": (R3, 512, [1e-2, 0.3, 1.0, 3.0],
               [5.21258000383, 0.301426972847, 0.107851397459, 0.0411324878231],
               [-462.648468026, -0.84413259291, -0.0934744356464, -0.0121730069339]),
}


@pytest.mark.parametrize("case", MAIN.values(), ids=MAIN.keys())
def test_agrees_with_main_solver(case):
    s, n, g, q_main, dq_main = case
    q, dq = attention_resolvent_form(s, g, n=n)
    np.testing.assert_allclose(q, q_main, rtol=1e-7)
    np.testing.assert_allclose(dq, dq_main, rtol=1e-7)


SETTINGS = [EXAMPLE,
            Setting(c=0.5, snr=6.0, f="tanh", wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.7, cos_mu_wq=0.7),
            Setting(c=0.7, f="sign"), Setting(c=0.3, snr=2.0, f="sign", wk_norm=1.0, wq_norm=1.0)]


def test_batch_is_the_single_setting_solve():
    # latent dimensions 1, 2 and 0, two settings with the same T (stacked with padding of the
    # slope, mean and noise terms): measured 8e-13 relative between the batch and single solves
    g = np.array([[1e-3, 0.1, 1.0]] * len(SETTINGS))
    got = attention_error_batch(SETTINGS, g, n=512)
    want = np.array([attention_error(s, g[0], n=512) for s in SETTINGS])
    assert got.shape == (4, 3)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    one = attention_error_batch(SETTINGS[:2], [0.1, 1.0], n=512)   # one gamma per setting
    np.testing.assert_allclose(one, [want[0, 1], want[1, 2]], rtol=1e-9)
    assert attention_error_batch(SETTINGS[:2], 0.1, n=512).shape == (2,)


def test_padded_stack_solves_each_model_unchanged():
    # two settings of different T and r in one stack (the batch driver would put them in
    # separate groups): padding types of zero weight must not move either fixed point
    pair = (EXAMPLE, SETTINGS[2])
    models = [finite_size._Model(s.canonical(), 512) for s in pair]
    assert len(models[0].delta) > len(models[1].delta) and models[0].law.r > models[1].law.r
    targets = [np.array([0.1]), np.array([0.3, 1.0])]
    vals = finite_size._solve(finite_size._Stack(models), targets, label=str)
    for s, g, v in zip(pair, targets, vals):
        _, dq = attention_resolvent_form(s, g, n=512)
        np.testing.assert_allclose(v.imag / (finite_size._STEP * g), dq, rtol=1e-8)


def test_bad_n_in_a_batch():
    with pytest.raises(TypeError, match="n must be an integer"):
        attention_error_batch(SETTINGS[:2], 0.1, n=512.0)
    with pytest.raises(ValueError, match="p = round"):
        attention_error_batch(SETTINGS[:2], 0.1, n=10)


def test_cofactor_inverse():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((20, 3, 3)) + 1j * rng.standard_normal((20, 3, 3))
    out = np.empty((9, 20), dtype=complex)
    iteration.inv3(np.ascontiguousarray(A.reshape(20, 9).T), out)
    np.testing.assert_allclose(out.T.reshape(20, 3, 3), np.linalg.inv(A), rtol=1e-10, atol=1e-12)


def test_gauss_jordan_inverse():
    # with row interchanges (a zero leading entry forces one); a singular matrix gives non-finite
    # entries (which fail the convergence test), not an exception
    rng = np.random.default_rng(1)
    for n in (2, 9, 17):
        A = rng.standard_normal((n, n))
        A[0, 0] = 0.0
        B = A.copy()
        iteration.invert(B)
        np.testing.assert_allclose(B, np.linalg.inv(A), rtol=1e-10, atol=1e-12 * np.abs(np.linalg.inv(A)).max())
    B = np.zeros((3, 3))
    with np.errstate(all="ignore"):
        iteration.invert(B)
    assert not np.all(np.isfinite(B))


def _dense_map(model, gamma, z):
    """The map ``z = (Gamma, om) -> (Gamma', om')`` of the module docstring of _finite_size, with
    dense ``P(t)`` (3 x Pn), ``R(t)`` (Pn x 3), LAPACK inverses and complex arithmetic throughout."""
    w, delta, u, v, noise, parity = model.solve_types()
    T, K = u.shape
    Pn, c, s = 1 + 2 * K, model.c, model.s
    Gam, om = z[:Pn * Pn].reshape(Pn, Pn), z[Pn * Pn:].reshape(4, T)
    P, R = np.zeros((T, 3, Pn)), np.zeros((T, Pn, 3))
    P[:, 2, 0], P[:, 1, 1:1 + K], P[:, 0, 1 + K:] = -1.0, -s * u, c * s * v   # rows x, k, e of Z^T
    R[:, 0, 1], R[:, 1:1 + K, 0], R[:, 1 + K:, 2] = -1.0, -v, -u             # blocks u, v_k, q_k of Z
    Lam = np.zeros((T, 3, 3), dtype=complex)
    Lam[:, 0, 0], Lam[:, 0, 2], Lam[:, 1, 0], Lam[:, 1, 1], Lam[:, 2, 2] = gamma, -c * delta, delta, 1, 1
    Lam -= model.pp * P @ Gam @ R
    Lam[:, 1, 0] -= om[0]                  # the Wigner self-energy Sigma_W(t)
    Lam[:, 1, 2] += c * om[1]
    Lam[:, 0, 0] += c * om[2]
    Lam[:, 0, 2] -= c * c * om[3]
    G = np.linalg.inv(Lam)
    sign = np.concatenate([[1.0], parity, parity])
    mask = np.outer(sign, sign) > 0
    Gam_new = np.linalg.inv(np.eye(Pn) - model.phi * mask * np.einsum("t,tbi,tij,tjc->bc", w, R, G, P))
    prof = noise if len(noise) == 3 else noise * 3
    om_new = [prof[0] @ G[:, 0, 1], prof[1] @ G[:, 0, 0], prof[2] @ G[:, 2, 1], prof[0] @ G[:, 2, 0]]
    return np.concatenate([Gam_new.ravel(), np.ravel(om_new)])


@pytest.mark.parametrize("s", [EXAMPLE, SETTINGS[1], R3], ids=["r1", "r2", "r3"])
def test_compiled_iteration_is_a_fixed_point_of_the_dense_equations(s):
    # the compiled iteration (sparse P(t) and R(t), cofactor inverses, Gamma's inverse to first
    # order in the complex step) against the equations written out densely: its fixed point and
    # gamma-derivative are fixed by the dense map to the solver's tolerance (value and tangent
    # parts relative to their largest entries)
    model = finite_size._Model(s.canonical(), 512)
    st = finite_size._Stack([model])
    gamma = np.array([0.1, 1.0])
    ok, _, z, dz, _ = finite_size._anderson(st, gamma, st.cold(2))
    assert ok.all()
    eps = finite_size._STEP * gamma
    for g, e, zr, dzr in zip(gamma, eps, z, dz):
        out = _dense_map(model, g + 1j * e, zr + 1j * e * dzr)
        np.testing.assert_allclose(out.real, zr, rtol=0, atol=1e-9 * np.abs(zr).max())
        np.testing.assert_allclose(out.imag / e, dzr, rtol=0, atol=1e-9 * np.abs(dzr).max())


def test_failed_cold_starts_and_steps_take_the_slow_path(monkeypatch):
    # cold starts that fail at gamma = 0.1 restart at 10; a continuation step that fails (here:
    # the first one, made to fail) is halved in log gamma; both reach the same fixed points
    # (tolerance: the fixed-point tolerance 1e-10 moves E by 3e-9 relative at most, measured above)
    g = np.array([1e-3, 0.05])
    base = attention_error(EXAMPLE, g, n=512)
    monkeypatch.setattr(finite_size, "_COLD_ITER", 3)
    calls = []
    anderson = finite_size._anderson

    def failing_first_step(st, gamma, z0, max_iter=None, chain=None, rows=None):
        out = anderson(st, gamma, z0, max_iter, chain, rows)
        calls.append(gamma.copy())
        if len(calls) == 3:
            out[0][:] = False
        return out

    monkeypatch.setattr(finite_size, "_anderson", failing_first_step)
    np.testing.assert_allclose(attention_error(EXAMPLE, g, n=512), base, rtol=1e-8)
    assert calls[0][0] == finite_size._GAMMA_COLD and calls[1][0] == finite_size._GAMMA_START
    assert calls[3][-1] == pytest.approx(np.sqrt(calls[1][0] * calls[2][-1]))   # the halved step (last: the path's point)


def test_non_convergence_in_a_batch_names_the_setting(monkeypatch):
    monkeypatch.setattr(finite_size, "_MAX_ITER", 2)
    monkeypatch.setattr(finite_size, "_COLD_ITER", 2)
    with pytest.raises(ConvergenceError, match=r"did not converge for Setting\(c=0.3.*n=512"):
        attention_error_batch(SETTINGS[:2], 0.1, n=512)


def test_flip_symmetric_rule_solved_on_half_the_types_is_the_full_solve(monkeypatch):
    # the default rule is symmetric under the flip (y, xi) -> -(y, xi): kernels factorised in
    # their even and odd blocks, the fixed point solved on half the types. The same rule with its
    # types in another order has no flip of that form and is solved on all the types, with full
    # SVDs. Both to a tight tolerance (at 1e-10 the two may stop one iteration apart: up to
    # 2.4e-9 on benchmarks/finite_size_speed.py --baseline), they agree to rounding (measured
    # 4e-13 relative at most; r = 1, 2, 3)
    monkeypatch.setattr(finite_size, "_TOL", 1e-13)
    for s in (EXAMPLE, SETTINGS[1], R3):
        law = finite_size.latent_law(s.canonical(), s.p(512))
        assert finite_size._flip(law) is not None
        order = np.random.default_rng(0).permutation(len(law.y))
        mixed = finite_size.LatentLaw(xi=law.xi[order], y=law.y[order], weight=law.weight[order], M=law.M, p=law.p)
        assert finite_size._flip(mixed) is None
        g = np.array([1e-3, 0.1, 1.0])
        half = finite_size.finite_size_resolvent_form(s, g, 512, nodes=law)
        full = finite_size.finite_size_resolvent_form(s, g, 512, nodes=mixed)
        for a, b in zip(half, full):
            np.testing.assert_allclose(a, b, rtol=1e-10)


def test_even_and_odd_blocks_give_the_full_factorisation():
    # the slope kernel of a non-symmetric M_r (SVD) and a symmetric Wigner profile (eigh): the
    # block factorisation keeps as many terms, with the same s_k, and they rebuild W^1/2 k W^1/2
    # as the full ones do (measured 2e-15 relative to its largest entry); odd=True keeps the
    # odd ones among them, which rebuild the odd part (A - A pi) / 2
    law = finite_size.latent_law(R3.canonical(), R3.p(512))
    w, sw = law.weight, np.sqrt(law.weight)[:, None]
    H = law.shifts()
    _, F1, S2 = shift_functions(R3.f, 1.0, np.max(np.abs(H)) + 1.0)(H)
    for kernel, tol, most in ((F1, finite_size._SLOPE_TOL, finite_size._SLOPE_MAX),
                              (np.sqrt(S2 * S2.T), finite_size._MEAN_TOL, None)):
        s0, a0, b0 = finite_size._factor(kernel, w, tol, most)
        s1, a1, b1 = finite_size._factor(kernel, w, tol, most, finite_size._flip(law))
        assert len(s1) == len(s0) > 1
        np.testing.assert_allclose(s1, s0, rtol=1e-10, atol=1e-13 * s0[0])
        A0, A1 = ((sw * a * s) @ (sw * b).T for s, a, b in ((s0, a0, b0), (s1, a1, b1)))
        np.testing.assert_allclose(A1, A0, rtol=0, atol=1e-12 * np.abs(A0).max())
    # the mean kernel of relu (neither even nor odd in h: both blocks count)
    pi = finite_size._flip(law)
    F0 = shift_functions("relu", 1.0, np.max(np.abs(H)) + 1.0)(H)[0]
    s1, a1, b1 = finite_size._factor(F0, w, finite_size._MEAN_TOL, None, pi)
    s2, a2, b2 = finite_size._factor(F0, w, finite_size._MEAN_TOL, None, pi, odd=True)
    odd = np.array([np.array_equal(a[pi], -a) for a in a1.T])
    assert 0 < len(s2) == np.sum(odd) < len(s1)
    np.testing.assert_allclose(s2, s1[odd], rtol=1e-12)
    A0, A2 = ((sw * a * s) @ (sw * b).T for s, a, b in ((s1, a1, b1), (s2, a2, b2)))
    np.testing.assert_allclose(A2, (A0 - A0[:, pi]) / 2, rtol=0, atol=1e-12 * np.abs(A0).max())


def test_leading_slope_terms_are_the_svd_s():
    # the subspace iteration (_leading) on the even block of R3's slope kernel (216 x 216, not
    # symmetric) gives the SVD's leading terms to rounding; a slowly decaying spectrum fails its
    # test (the full SVD is taken then)
    law = finite_size.latent_law(R3.canonical(), R3.p(512))
    sw, pi = np.sqrt(law.weight), finite_size._flip(law)
    _, F1, _ = shift_functions(R3.f, 1.0, np.max(np.abs(law.shifts())) + 1.0)(law.shifts())
    A = sw[:, None] * F1 * sw[None, :]
    h = len(sw) // 2
    block = A[:h, :h] + A[:h, pi[:h]]
    assert h > 4 * finite_size._SKETCH
    lead = finite_size._leading(block, finite_size._SLOPE_MAX)
    assert lead is not None
    s, U, V = lead
    U0, s0, V0t = np.linalg.svd(block)
    k = finite_size._SLOPE_MAX
    np.testing.assert_allclose(s[:k], s0[:k], rtol=1e-12)
    np.testing.assert_allclose((U[:, :k] * s[:k]) @ V[:, :k].T, (U0[:, :k] * s0[:k]) @ V0t[:k],
                               rtol=0, atol=1e-12 * s0[0])
    flat = np.random.default_rng(0).standard_normal((h, h))
    assert finite_size._leading(flat, finite_size._SLOPE_MAX) is None
