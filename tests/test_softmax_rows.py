"""The softmax theory that keeps the kernel's row factors (attn_lib.theory._softmax_rows)."""

import numpy as np
import pytest

import attn_lib as al
from attn_lib.simulation.simulate import errors
from attn_lib.theory import _softmax_rows, softmax
from attn_lib.theory._bulk import solve_bulk

GEFF = np.array([0.0316, 0.2, 1.26, 7.9, 50.0])


def _setting(beta, c, **kw):
    return al.Setting(c=c, snr=kw.pop("snr", 0.0), wk_norm=kw.pop("w", 0.0), wq_norm=0.0,
                      attention=al.Softmax(beta, **kw))


@pytest.mark.parametrize("c", [0.3, 0.75, 1.5])
def test_one_class_is_the_gaussian_bulk(c):
    # with r = 1 the pencil's Dyson equation is the bulk fixed point of _bulk (alpha, kappa, tau)
    lin = al.theory.linearisation(_setting(1.5, c))
    g = np.geomspace(1e-3, 1e2, 6)
    ref = solve_bulk(np.array(c), np.array(lin.rho), np.array(lin.b2), g).error.ravel()
    got = _softmax_rows.rows_bulk_error(c, lin.a1, lin.b2, g, (np.ones(1), np.ones(1)))
    np.testing.assert_allclose(got, ref, atol=1e-7)


def test_row_law():
    nodes, w = softmax.row_factor_law(_setting(1.5, 1.5), 2048)
    assert w.shape == nodes.shape == (_softmax_rows.CLASSES,)
    assert np.isclose(w.sum(), 1.0) and np.all(np.diff(nodes) > 0)
    # E r = 1 (the sample's mean, heavy-tailed: within 10 %); most rows below it
    assert abs(w @ nodes - 1.0) < 0.1
    assert nodes[_softmax_rows.CLASSES // 2] < 0.8
    # at beta = 0.5 the law is nearly symmetric about one (measured median class 0.99)
    nodes, _ = softmax.row_factor_law(_setting(0.5, 1.5), 2048)
    assert abs(nodes[_softmax_rows.CLASSES // 2] - 1.0) < 0.03


def test_correction_vanishes_at_small_beta_and_is_positive_at_large_beta():
    s = _setting(0.5, 1.5, snr=1.0, w=1.0)
    assert np.abs(softmax.rows_correction(s, GEFF, 2048)).max() < 1e-3  # measured 8e-5
    d = softmax.rows_correction(_setting(1.5, 1.5), GEFF, 2048)
    assert np.all(d > -1e-6) and 0.01 < d.max() < 0.04  # measured 0.0256 at gamma_eff = 7.9
    assert softmax.rows_correction(_setting(1.5, 1.5), 0.2, 2048).shape == ()


def test_matching_pieces():
    # the spiked form at the Gaussian b2 is the limit, and matching the Gaussian trace gives b2 back
    s = _setting(1.5, 0.75, snr=2.0, w=1.5)
    ew = softmax.entrywise_equivalent(s)
    lin, can = al.theory.linearisation(ew), ew.canonical()
    b2 = np.full(GEFF.shape, lin.b2)
    with al.theory.domain.ignored():
        limit = al.theory.attention_error(s, GEFF)
    np.testing.assert_allclose(_softmax_rows.spiked_error(s.c, lin.rho, b2, GEFF, can.snr,
                                                          np.asarray(can.gram)), limit, atol=1e-12)
    err = al.theory.attention_bulk(s, GEFF).error.ravel()
    np.testing.assert_allclose(_softmax_rows.matched_b2(s.c, lin.rho, lin.b2, GEFF, err), b2)
    # a larger error needs a smaller Wigner variance; the matched bulk has the target error
    up = _softmax_rows.matched_b2(s.c, lin.rho, lin.b2, GEFF, err + 0.01)
    assert np.all(up < b2)
    np.testing.assert_allclose(_softmax_rows._gauss_error(s.c, lin.rho, up, GEFF), err + 0.01,
                               atol=1e-9)


def test_rows_error_against_the_finite_size_theory():
    # beta = 0.5: the law is concentrated, the row theory is the finite-size theory (to 1e-3);
    # beta = 1.5: it lies above it (the row factors raise the error)
    for beta, low, high in ((0.5, -1e-3, 1e-3), (1.5, 0.005, 0.04)):
        s = _setting(beta, 1.5, snr=1.0, w=1.0)
        with al.theory.domain.ignored():
            d = softmax.rows_error(s, GEFF, 2048) - al.theory.attention_error(s, GEFF, n=2048)
        assert low < d.max() < high and d.min() > -1e-3


def test_bad_input():
    with pytest.raises(ValueError, match="n"):
        softmax.rows_error(_setting(1.5, 1.5), GEFF, 5)
    with pytest.raises(ValueError, match="mask"):
        softmax.rows_error(_setting(1.5, 1.5, mask=False), GEFF, 2048)
    with pytest.raises(ValueError, match="gammas"):
        softmax.rows_error(_setting(1.5, 1.5), [-1.0], 2048)


@pytest.mark.slow
def test_rows_error_against_monte_carlo():
    # beta = 1.5, c = 1.5, random inputs, n = 256 (kurtosis / n = 39): the limit misses by 0.08,
    # the row theory by about 0.02 (benchmarks/softmax_rows.py, 64 draws); here 24 draws, s.e. ~0.006
    s, n = _setting(1.5, 1.5), 256
    mc = errors(s, GEFF, n, trials=24, seed=5).attention.mean
    with al.theory.domain.ignored():
        limit = np.abs(al.theory.attention_error(s, GEFF) - mc).max()
    rows = np.abs(softmax.rows_error(s, GEFF, n) - mc).max()
    assert limit > 0.06 and rows < 0.035


def test_domain():
    # measured within 0.02 up to beta = 2 (n = 512 and 2048), from n = 256
    s = _setting(2.5, 1.5)
    with pytest.warns(al.DomainWarning, match="row-factor theory"):
        softmax.rows_error(s, 1.0, 512)
    with pytest.raises(al.DomainError, match="strict"):
        softmax.rows_error(s, 1.0, 2048, strict=True)
    with pytest.warns(al.DomainWarning, match="n = 128"):
        softmax.rows_error(_setting(1.5, 1.5), 1.0, 128)
    with pytest.raises(TypeError, match="strict"):
        softmax.rows_error(_setting(1.5, 1.5), 1.0, 2048, strict="yes")
