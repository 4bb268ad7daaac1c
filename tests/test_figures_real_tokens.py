"""The figures of the chapter *Real tokens* (on scikit-learn's 8x8 digits: small and fast)."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from attn_lib.book.claims import Claim
from attn_lib.book.figures import real_tokens as figs
from attn_lib.studies import real_tokens as rt
from attn_lib.theory import ConvergenceError

pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

G = [0.01, 1.0]


def test_curves_numbers_are_the_largest_misses():
    fig = figs.curves(pair="digits:3-8", ns=[64], f="tanh", g=G, trials=2, seed=0)
    c = rt.compare("digits", (3, 8), 64, "tanh", "identity", G, 2, 0)
    assert fig.numbers["rt_curve_theory_real"] == pytest.approx(np.abs(c.theory - c.real).max())
    assert fig.numbers["rt_curve_cs"] == "1" and fig.numbers["rt_curve_pair"] == "digits 3 vs 8"


def test_agreement_counts_the_points():
    fig = figs.agreement(pairs=["digits:3-8"], ns={"digits": [64]}, fs=["tanh"],
                         kinds=["identity", "aligned"], g=G, trials=2, seed=0)
    assert fig.numbers["rt_points"] == 4   # no MNIST pair: all points count
    assert fig.numbers["rt_within"].endswith("%")
    assert "digits 3 vs 8" in fig.numbers["rt_table"].data


def test_gap_is_paired_over_the_same_subsets():
    fig = figs.gap(pair="digits:3-8", n=64, fs=["tanh"], kinds=["identity", "aligned"], g=0.01,
                   trials=3, seed=0, beta=1.0)
    c = rt.compare("digits", (3, 8), 64, "tanh", "identity", [0.01], 3, 0)
    d = c.real_values[:, 0] - c.ridge_real_values[:, 0]
    assert fig.numbers["rt_gap_text"].startswith(f"{d.mean():+.3f}")
    assert isinstance(fig.numbers["rt_gap_identity"], Claim)
    a = rt.compare("digits", (3, 8), 64, "tanh", "aligned", [0.01], 3, 0)
    assert fig.numbers["rt_align_text"].startswith(f"{(a.real_values - c.real_values).mean():+.3f}")


def test_matrices_have_unit_logit_scale():
    for kind in rt.MATRICES:
        assert rt.setting("digits", (3, 8), 64, "tanh", kind).logit_scale == pytest.approx(1.0)
    with pytest.raises(ValueError, match="kind"):
        rt.setting("digits", (3, 8), 64, "tanh", "orthogonal")
    with pytest.raises(ValueError, match="data:a-b"):
        figs.parse_pair("mnist 3-8")


def test_causes_reports_both_surrogates():
    fig = figs.causes(pairs=["digits:3-8"], n=64, fs=["tanh", "cos"], g=G, trials=2, seed=0)
    c = rt.compare("digits", (3, 8), 64, "cos", "identity", G, 2, 0)
    cl = rt.class_surrogate("digits", (3, 8), 64, "cos", "identity", G, 2, 0)
    assert cl.values.shape == (2, len(G))
    assert fig.numbers["rt_cause_class"] == pytest.approx(float(np.abs(cl.mean - c.real).max()))
    assert fig.numbers["rt_cause_even"] == "cos" and fig.numbers["rt_cause_fs"] == "tanh, cos"
    assert np.isfinite(fig.numbers["rt_cause_class_odd"])


def test_finite_shift_is_the_finite_size_theory_minus_the_limit():
    """:func:`~attn_lib.studies.real_tokens.finite_shift` at the chapter's ``gamma / tau`` is the
    covariance theory at ``n`` minus its limit, and the agreement figure reports its shares."""
    from attn_lib.theory import attention_error

    s = rt.setting("digits", (3, 8), 64, "tanh", "aligned")
    shift = rt.finite_shift("digits", (3, 8), 64, "tanh", "aligned", G)
    np.testing.assert_allclose(shift, attention_error(s, G, n=64, relative=True)
                               - attention_error(s, G, relative=True), rtol=0, atol=1e-12)
    assert np.abs(shift).max() > 1e-4     # the coherent shift of digits is not small
    fig = figs.agreement(pairs=["digits:3-8"], ns={"digits": [64]}, fs=["tanh"],
                         kinds=["aligned"], g=G, trials=2, seed=0)
    c = rt.compare("digits", (3, 8), 64, "tanh", "aligned", G, 2, 0)
    assert c.theory is not None
    within = np.mean(np.abs(c.theory + shift - c.surrogate) <= 0.02)
    assert fig.numbers["rt_within_fs"] == f"{within:.0%}"
    assert fig.numbers["rt_median_fs"] == pytest.approx(np.median(np.abs(c.theory + shift - c.surrogate)))


def test_scale_noise_keeps_the_class_covariance_and_the_real_norms():
    """:func:`~attn_lib.studies.real_tokens.scale_noise`: a large draw of one class has that
    class's covariance (trace, top eigenvalue, whole matrix; the plain Gaussian direction
    ``C^{1/2} z / |C^{1/2} z|`` misses the top eigenvalue of digits 3 by about 16 %), and every
    norm is one of the real tokens' (scaled to mean square ``tr C``)."""
    X, y = rt.tokens("digits", 3, 8)
    C = rt.class_covariances("digits", 3, 8)[0]
    rng = np.random.default_rng(0)
    labels = np.ones(20000, dtype=int)
    E = rt.scale_noise("digits", (3, 8), labels, rng.standard_normal((X.shape[0], labels.size)), rng)
    S = E @ E.T / labels.size
    lam, V = np.linalg.eigh(C)
    assert np.trace(S) / np.trace(C) == pytest.approx(1.0, abs=0.025)
    assert V[:, -1] @ S @ V[:, -1] / lam[-1] == pytest.approx(1.0, abs=0.05)
    assert np.linalg.norm(S - C) / np.linalg.norm(C) < 0.06
    part = X[:, y > 0]
    r = np.linalg.norm(part - part.mean(axis=1, keepdims=True), axis=0)
    r *= np.sqrt(np.trace(C) / np.mean(r ** 2))
    assert np.abs(np.linalg.norm(E, axis=0)[:, None] - r[None, :]).min(axis=1).max() < 1e-9


def test_surrogate_is_seeded_and_paired_with_the_class_surrogate():
    a = rt.surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, seed=3, law="norms")
    b = rt.surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, seed=3, law="norms")
    c = rt.surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, seed=4, law="norms")
    assert a["surrogate"].shape == (2, len(G))
    for name in ("surrogate", "class", "difference"):
        np.testing.assert_array_equal(a[name], b[name])
    assert not np.allclose(a["surrogate"], c["surrogate"])
    cl = rt.class_surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, seed=3)
    np.testing.assert_array_equal(a["class"], cl["values"])        # the same draws
    np.testing.assert_allclose(a["difference"], a["surrogate"] - a["class"], rtol=0, atol=0)
    with pytest.raises(ValueError, match="law must be one of"):
        rt.surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, law="scales")


def test_top_noise_keeps_the_class_covariance_and_the_real_top_coordinates():
    """:func:`~attn_lib.studies.real_tokens.top_noise`: a large draw of one class has that class's
    covariance, its coordinates along the top ``k`` principal directions are real tokens' (a
    subset drawn without replacement has no repeated token), and the surrogate is paired with
    the class surrogate."""
    X, y = rt.tokens("digits", 3, 8)
    C = rt.class_covariances("digits", 3, 8)[1]
    part = X[:, y < 0]
    rng = np.random.default_rng(0)
    labels = -np.ones(20000, dtype=int)
    E = rt.top_noise("digits", (3, 8), labels, rng.standard_normal((X.shape[0], labels.size)), rng, k=4)
    S = E @ E.T / labels.size
    assert np.trace(S) / np.trace(C) == pytest.approx(1.0, abs=0.025)
    assert np.linalg.norm(S - C) / np.linalg.norm(C) < 0.06
    V = np.linalg.eigh(C)[1][:, ::-1][:, :4]
    real = V.T @ (part - part.mean(axis=1, keepdims=True)) * np.sqrt(part.shape[1] / (part.shape[1] - 1))
    few = -np.ones(part.shape[1] // 2, dtype=int)
    Ef = rt.top_noise("digits", (3, 8), few, rng.standard_normal((X.shape[0], few.size)), rng, k=4)
    dist = np.linalg.norm((V.T @ Ef)[:, :, None] - real[:, None, :], axis=0)
    assert dist.min(axis=1).max() < 1e-9
    assert np.unique(dist.argmin(axis=1)).size == few.size
    a = rt.surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, seed=3, law="top", size=4)
    cl = rt.class_surrogate_errors("digits", (3, 8), 64, "tanh", "identity", G, 2, seed=3)
    np.testing.assert_array_equal(a["class"], cl["values"])
    assert not np.allclose(a["surrogate"], a["class"])


@pytest.mark.parametrize("noise", [lambda y, Z, rng: rt.marginal_noise("digits", (3, 8), y, Z, rng, k=4),
                                   lambda y, Z, rng: rt.cluster_noise("digits", (3, 8), y, Z, rng, clusters=4)],
                         ids=["marginal", "cluster"])
def test_marginal_and_cluster_noise_keep_the_class_covariance(noise):
    X, _ = rt.tokens("digits", 3, 8)
    C = rt.class_covariances("digits", 3, 8)[0]
    rng = np.random.default_rng(0)
    labels = np.ones(20000, dtype=int)
    S = (E := noise(labels, rng.standard_normal((X.shape[0], labels.size)), rng)) @ E.T / labels.size
    assert np.trace(S) / np.trace(C) == pytest.approx(1.0, abs=0.025)
    assert np.linalg.norm(S - C) / np.linalg.norm(C) < 0.06


def test_direction_factor_raises_with_its_diagnostics():
    C = rt.class_covariances("digits", 3, 8)[0]
    with pytest.raises(ConvergenceError, match="no fixed point in 1 steps"):
        rt._direction_factor(C, max_iter=1)
