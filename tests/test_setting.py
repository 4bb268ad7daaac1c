"""Setting validation and data geometry."""

import numpy as np
import pytest

import attn_lib as al


def test_geometry_has_exact_norms_and_cosines():
    s = al.Setting(c=0.5, snr=3.0, wk_norm=2.0, wq_norm=0.5,
                   cos_mu_wk=0.6, cos_mu_wq=-0.3, cos_wk_wq=0.2)
    mu, wk, wq = al.data.geometry(s, 64)
    V = np.stack([mu, wk, wq])
    assert np.allclose(V @ V.T, s.gram, atol=1e-12)
    assert np.linalg.norm(mu) ** 2 == pytest.approx(3.0)
    assert mu @ wk == pytest.approx(s.mu_wk) and mu @ wq == pytest.approx(s.mu_wq)


def test_draw_shapes_labels_and_p():
    s = al.Setting(c=0.3, snr=1.0)
    smp = al.data.draw(s, 101, np.random.default_rng(0))
    assert smp.X.shape == (30, 101)
    assert (smp.y == 1).sum() == 51 and (smp.y == -1).sum() == 50
    assert s.p(1) == 1  # at least one dimension


def test_delta():
    s = al.Setting(c=0.5, snr=4.0, wk_norm=1.0, wq_norm=1.0)
    assert s.delta(512) == pytest.approx((4 + 4) / 16)


def test_canonical_reduction():
    s = al.Setting(c=0.5, snr=1.0, f="relu", wk_norm=2.0, wq_norm=1.0, alpha=2.0)
    cs = s.canonical()
    assert cs.alpha == 1.0 and cs.wk_norm == pytest.approx(1.0) and cs.wq_norm == 1.0
    h, hc = s.hermite, cs.hermite
    assert np.allclose([h.a0, h.a1, h.a2, h.nu], [hc.a0, hc.a1, hc.a2, hc.nu], atol=1e-10)
    assert s.delta(100) == pytest.approx(cs.delta(100) * 2.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(c=0.0), ValueError, r"c must be in \(0"),
    (dict(c=-1.0), ValueError, "c must be"),
    (dict(c=np.nan), ValueError, "c must be finite"),
    (dict(c=np.inf), ValueError, "c must be finite"),
    (dict(c="1"), TypeError, "c must be a real number"),
    (dict(c=True), TypeError, "c must be a real number"),
    (dict(c=1.0, snr=-0.1), ValueError, r"snr must be in \[0"),
    (dict(c=1.0, wk_norm=-1.0), ValueError, "wk_norm"),
    (dict(c=1.0, wq_norm=np.nan), ValueError, "wq_norm"),
    (dict(c=1.0, cos_mu_wk=1.5), ValueError, r"cos_mu_wk must be in \[-1, 1\]"),
    (dict(c=1.0, cos_wk_wq=-1.01), ValueError, "cos_wk_wq"),
    # cosines validated even with zero norms and snr
    (dict(c=1.0, snr=0.0, wk_norm=0.0, cos_mu_wq=2.0), ValueError, "cos_mu_wq"),
    (dict(c=1.0, cos_mu_wk=1.0, cos_mu_wq=1.0, cos_wk_wq=-1.0), ValueError, "positive semi-definite"),
    (dict(c=1.0, f="nope"), ValueError, "f must be one of"),
    (dict(c=1.0, f=42), TypeError, "f must be"),
    (dict(c=1.0, alpha=0.0), ValueError, "alpha"),
])
def test_bad_settings(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        al.Setting(**kwargs)


def test_geometry_needs_enough_dimensions():
    s = al.Setting(c=0.001, snr=1.0, wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.0, cos_mu_wq=0.0,
                   cos_wk_wq=0.0)
    with pytest.raises(ValueError, match="n is too small"):
        al.simulate.errors(s, 1.0, n=1000, trials=1)
