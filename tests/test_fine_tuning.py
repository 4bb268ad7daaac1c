"""The gradient of one draw's error, and training the low-rank update (attn_lib.simulation.gradient,
attn_lib.studies.fine_tuning)."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model import data, kernel
from attn_lib.model.nonlinearity import check_nonlinearity, mixture, normalised
from attn_lib.simulation import gradient as gr
from attn_lib.simulation.resolvent import interpolation_error
from attn_lib.studies import fine_tuning as ft

N, P = 48, 24
MU = np.zeros(P)
MU[0] = 1.2


def _draw(rng: np.random.Generator) -> gr.Draw:
    y = data.labels(N, rng)
    return gr.Draw(rng.standard_normal((P, N)) + np.outer(MU, y), y)


def _fd(fun, W_K, W_Q, h=1e-5):
    """Central finite differences of ``fun(W_K, W_Q)`` in every entry."""
    out = []
    for W, which in ((W_K, 0), (W_Q, 1)):
        g = np.zeros_like(W)
        for idx in np.ndindex(W.shape):
            e = np.zeros_like(W)
            e[idx] = h
            args_p = (W_K + e, W_Q) if which == 0 else (W_K, W_Q + e)
            args_m = (W_K - e, W_Q) if which == 0 else (W_K, W_Q - e)
            g[idx] = (fun(*args_p) - fun(*args_m)) / (2 * h)
        out.append(g)
    return np.concatenate([o.ravel() for o in out])


SETTINGS = [al.Setting(c=0.5, f="tanh"), al.Setting(c=0.5, f="cos"),
            al.Setting(c=0.5, f=normalised("tanh", 2.0)), al.Setting(c=0.5, f=mixture(0.7)),
            al.Setting(c=0.5, attention=al.Softmax(1.0))]


@pytest.mark.parametrize("setting", SETTINGS, ids=["tanh", "cos", "tanh-nu", "mixture", "softmax"])
@pytest.mark.parametrize("r", [1, 2])
@pytest.mark.parametrize("objective", ["interpolation", "generalisation"])
def test_gradient_matches_finite_differences(setting, r, objective):
    rng = np.random.default_rng(3)
    d, d2 = _draw(rng), _draw(rng)
    W_K, W_Q = 0.6 * rng.standard_normal((2, r, P))
    if objective == "interpolation":
        def fun(a, b):
            return gr.interpolation_gradient(setting, d, a, b, 0.1)
    else:
        def fun(a, b):
            return gr.generalisation_gradient(setting, d, d2, a, b, 0.1)
    _, gK, gQ = fun(W_K, W_Q)
    g = np.concatenate([gK.ravel(), gQ.ravel()])
    fd = _fd(lambda a, b: fun(a, b)[0], W_K, W_Q)
    assert np.linalg.norm(g - fd) / np.linalg.norm(fd) < 1e-6


def test_error_is_the_simulators():
    rng = np.random.default_rng(0)
    s = al.Setting(c=0.5, f="tanh")
    d = _draw(rng)
    W_K, W_Q = rng.standard_normal((2, 1, P))
    E, _, _ = gr.interpolation_gradient(s, d, W_K, W_Q, 0.05)
    K = kernel.attention_kernel(d.X, check_nonlinearity("tanh"), W_K, W_Q, a0=s.hermite.a0)
    assert E == pytest.approx(interpolation_error(d.X @ K, d.y, np.array([0.05]))[0], rel=1e-10)


def test_gradient_rejects_bad_input():
    rng = np.random.default_rng(0)
    d = _draw(rng)
    s = al.Setting(c=0.5)
    with pytest.raises(ValueError, match="W_K and W_Q"):
        gr.interpolation_gradient(s, d, np.ones((1, P)), np.ones((2, P)), 0.1)
    with pytest.raises(ValueError, match="alpha"):
        gr.interpolation_gradient(al.Setting(c=0.5, alpha=2.0), d, np.ones(P), np.ones(P), 0.1)
    with pytest.raises(ValueError, match="gamma"):
        gr.interpolation_gradient(s, d, np.ones(P), np.ones(P), -1.0)
    with pytest.raises(ValueError, match="derivative"):
        gr.derivative("sign")


def test_training_is_seeded_and_aligns_for_tanh():
    s = al.Setting(c=0.5, snr=1.0, f="tanh")
    a = ft.train(s, 64, 40, 1.0, 0.1, seed=1, record=20)
    b = ft.train(s, 64, 40, 1.0, 0.1, seed=1, record=20)
    c = ft.train(s, 64, 40, 1.0, 0.1, seed=2, record=20)
    np.testing.assert_array_equal(a.W_K, b.W_K)
    assert not np.array_equal(a.W_K, c.W_K)
    assert list(a.steps) == [0, 20, 40] and a.W_K.shape == (3, 1, 32) and a.loss.shape == (40,)
    cos = ft.alignment(a.mu, a.W_K)
    assert cos[0] < 0.3 and cos[-1] > 0.6


def test_cos_does_not_align():
    """a1 = 0: the limit theory does not depend on the weights, and training does not align them."""
    s = al.Setting(c=0.5, snr=1.0, f="cos")
    run = ft.train(s, 64, 40, 1.0, 0.1, seed=1, record=40)
    assert ft.alignment(run.mu, run.W_K)[-1] < 0.5


def test_learned_setting_keeps_the_gram_matrix():
    rng = np.random.default_rng(0)
    mu, W_K, W_Q = rng.standard_normal(8), rng.standard_normal((1, 8)), rng.standard_normal((1, 8))
    s = al.Setting(c=0.5, f="tanh")
    ls = ft.learned_setting(s, mu, W_K, W_Q)
    V = np.vstack([mu, W_K, W_Q])
    np.testing.assert_allclose(ls.gram, V @ V.T, rtol=1e-12)
    r2 = ft.learned_setting(s, mu, rng.standard_normal((2, 8)), rng.standard_normal((2, 8)))
    assert isinstance(r2, al.RankSetting) and r2.r == 2


def test_theory_optimum_beats_other_geometries():
    s = al.Setting(c=0.5, snr=1.0, f="tanh")
    best, err = ft.theory_optimum(s, 1.0, 1.5, 0.1, starts=2)
    for cosines in ((1.0, 1.0, 1.0), (0.3, 0.2, 0.5), (0.0, 0.0, 1.0)):
        other = al.Setting(c=0.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=1.5,
                           cos_mu_wk=cosines[0], cos_mu_wq=cosines[1], cos_wk_wq=cosines[2])
        assert err <= al.theory.attention_error(other, [0.1])[0] + 1e-9
    assert best.wk_norm == 1.0 and best.wq_norm == 1.5


def test_theory_flow_lowers_the_theory():
    s = al.Setting(c=0.5, snr=1.0, f="tanh")
    run = ft.train(s, 64, 1, 1.0, 0.1, seed=0, record=1)
    steps, sets = ft.theory_flow(s, run, 4.0, 0.1, 6, record=3)
    errs = [al.theory.attention_error(x, [0.1])[0] for x in sets]
    assert list(steps) == [0, 3, 6] and errs[0] > errs[1] > errs[2]


def test_probe_gamma_is_the_book_convention():
    s = al.Setting(c=0.5, snr=1.0)
    assert ft.probe_gamma(s, 0.1, 256) == pytest.approx(0.1 * al.model.scale.feature_scale(s))
    sm = al.Setting(c=0.5, snr=1.0, attention=al.Softmax(1.0))
    raw = al.simulate.raw_gammas(sm, [0.1], 256, relative=True)[0][0]
    assert ft.probe_gamma(sm, 0.1, 256) == pytest.approx(
        raw / al.model.scale.softmax_scale(sm, 256) ** 2)
