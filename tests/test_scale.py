"""One gamma convention and the feature scales of every setting type (attn_lib.model.scale)."""

from __future__ import annotations

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model.scale import feature_scale, softmax_scale
from attn_lib.simulation import simulate
from attn_lib.simulation.resolvent import interpolation_errors
from attn_lib.studies import gpt2
from attn_lib.theory import softmax

G = np.array([1e-3, 0.1, 1.0])


def _unit(M: np.ndarray) -> np.ndarray:
    return gpt2.normalise(M)[0]


def test_the_softmax_simulator_reads_the_effective_gamma_of_the_theory():
    s = al.Setting(c=0.5, snr=1.0, attention=al.Softmax(1.0))
    att, ridge = simulate.raw_gammas(s, G, 512)
    np.testing.assert_array_equal(att, G * softmax.scale(s, 512) ** 2)
    np.testing.assert_array_equal(ridge, G)
    # entry-wise attention and unmasked softmax take gamma as it is
    for e in (al.Setting(c=0.5), al.Setting(c=0.5, attention=al.Softmax(1.0, mask=False))):
        assert all(np.array_equal(v, G) for v in simulate.raw_gammas(e, G, 512))
    # simulate.errors at the effective gamma: the draw at the raw one
    b = simulate.errors(s, G, n=512, trials=1, seed=0)
    rng = np.random.default_rng(np.random.SeedSequence(0).spawn(1)[0])
    c = simulate.draw_errors(s, att, 512, rng, ridge_gammas=G)
    np.testing.assert_array_equal(b.attention.values[0], c[0])
    np.testing.assert_array_equal(b.ridge.values[0], c[1])


@pytest.mark.slow
def test_one_gamma_gives_matching_softmax_theory_and_simulation():
    # the practitioner's case at beta = 1: the same gamma to both (before, the simulator took the
    # raw gamma and the same numbers gave 0.40 / 0.81 / 0.97 against 0.29 / 0.30 / 0.38)
    s = al.Setting(c=0.5, snr=1.0, attention=al.Softmax(1.0))
    n = 1024
    r = al.simulate.errors(s, G, n=n, trials=24, seed=0)
    fs = al.theory.attention_error(s, G, n=n)
    assert r.attention.sem.max() < 0.005
    assert np.abs(fs - r.attention.mean).max() < 0.02
    raw = al.simulate.errors(s, G / softmax.scale(s, n) ** 2, n=n, trials=2, seed=0)
    assert np.abs(fs - raw.attention.mean).min() > 0.1  # the other convention is far off


def test_relative_puts_each_model_at_its_own_feature_scale():
    for s, n in ((al.Setting(c=0.5, snr=1.0, f="relu"), 256),
                 (al.Setting(c=0.5, snr=1.0, attention=al.Softmax(1.0)), 256)):
        r = al.simulate.errors(s, G, n=n, trials=2, seed=1, relative=True)
        att, ridge = simulate.raw_gammas(s, G, n, relative=True)
        np.testing.assert_array_equal(att, feature_scale(s, n=n) * G)
        np.testing.assert_array_equal(ridge, s.c * G)
        rng = np.random.default_rng(np.random.SeedSequence(1).spawn(2)[1])
        a, b = simulate.draw_errors(s, att, n, rng, ridge_gammas=ridge)
        np.testing.assert_array_equal(r.attention.values[1], a)
        np.testing.assert_array_equal(r.ridge.values[1], b)
    s = al.Setting(c=0.5, snr=1.0, f="relu")
    np.testing.assert_array_equal(al.theory.attention_error(s, G, relative=True),
                                  al.theory.attention_error(s, feature_scale(s) * G))
    np.testing.assert_array_equal(al.theory.ridge_error(s, G, relative=True),
                                  al.theory.ridge_error(s, 0.5 * G))
    sm = al.Setting(c=0.5, attention=al.Softmax(1.0))
    np.testing.assert_array_equal(
        al.theory.attention_error(sm, G, n=512, relative=True),
        al.theory.attention_error(sm, softmax.effective_gamma(sm, feature_scale(sm, n=512) * G, 512),
                                  n=512))


def test_per_matrix_gammas_are_those_of_separate_calls():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((20, 40)), rng.standard_normal((10, 40))
    y = np.sign(rng.standard_normal(40))
    ga, gb = np.array([0.1, 1.0]), np.array([0.3, 2.0])
    a, b = interpolation_errors([A, B], y, [ga, gb])
    np.testing.assert_array_equal(a, interpolation_errors([A], y, ga)[0])
    np.testing.assert_array_equal(b, interpolation_errors([B], y, gb)[0])
    with pytest.raises(ValueError, match="one array per matrix"):
        interpolation_errors([A, B], y, [ga])


def test_the_softmax_scale_of_a_matrix_and_of_heads():
    p, n = 64, 128
    rng = np.random.default_rng(4)
    M = _unit(rng.standard_normal((p, p)))
    ms = al.MatrixSetting(c=0.5, M=M, mu=np.zeros(p), attention=al.Softmax(1.0))
    assert softmax.scale(ms, n) == pytest.approx(np.sqrt(p) / (n - 1))  # unit logit scale
    heads = np.stack([M, 2.0 * M])
    hs = al.HeadsSetting(c=0.5, heads=heads, mu=np.zeros(p), attention=al.Softmax(1.0))
    s1, s2 = (softmax_scale(al.MatrixSetting(c=0.5, M=B, mu=np.zeros(p), attention=al.Softmax(1.0)), n)
              for B in heads)
    assert softmax_scale(hs, n) == pytest.approx(np.sqrt((s1 ** 2 + s2 ** 2) / 2))
    with pytest.raises(ValueError, match="masked"):
        softmax_scale(al.Setting(c=0.5, attention=al.Softmax(1.0, mask=False)), n)


@pytest.mark.parametrize("kind", ["matrix", "heads", "matrix softmax", "heads softmax"])
def test_the_feature_scale_of_a_matrix_and_of_heads_is_the_measured_one(kind):
    # tau of the derivation in model.scale against ||Phi||_F^2 / n^2 of 8 draws (p = 256);
    # measured within 1.5 % at p = 384 and 3 % at p = 128 (unit logit scales)
    p, c = 256, 0.5
    n = int(p / c)
    rng = np.random.default_rng(5)
    M = _unit(rng.standard_normal((p, p)) / np.sqrt(p) + 0.7 * np.eye(p))
    heads = np.stack([_unit(rng.standard_normal((p, p))) for _ in range(3)])
    heads[0, : p // 3] *= 2.0  # a head whose own rows carry more of its weight
    heads = np.stack([_unit(B) for B in heads])
    kw = dict(attention=al.Softmax(1.0)) if "softmax" in kind else dict(f="relu")
    s = (al.MatrixSetting(c=c, M=M, mu=np.zeros(p), **kw) if kind.startswith("matrix")
         else al.HeadsSetting(c=c, heads=heads, mu=np.zeros(p), **kw))
    mats = {"m": s.M if kind.startswith("matrix") else s.heads}
    mc = gpt2.simulate_matrices(mats, {"d": s.mu}, s.f, [1.0], n=n, trials=8, seed=0,
                                attention=s.attention)
    measured = mc.scale["m"]["d"]
    assert feature_scale(s, n=n) == pytest.approx(measured.mean, rel=0.03)
    assert feature_scale(s, "ridge") == c


def test_the_feature_scale_refuses_what_is_not_derived():
    p = 16
    ms = al.MatrixSetting(c=0.5, M=np.eye(p), mu=np.zeros(p), f="linear")
    with pytest.raises(ValueError, match="diagonal kept"):
        feature_scale(ms, keep_diagonal=True)
    with pytest.raises(ValueError, match="pass n"):
        feature_scale(al.Setting(c=0.5, attention=al.Softmax(1.0)))
