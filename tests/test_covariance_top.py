"""``benchmarks/covariance_top.py``: the reduced covariance model that keeps the top directions of
C^{1/2} M C^{1/2} and its Sobol type rule."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import attn_lib as al
from attn_lib.theory._finite_size import _flip

_SPEC = importlib.util.spec_from_file_location(
    "covariance_top", Path(__file__).resolve().parents[1] / "benchmarks" / "covariance_top.py")
_TOP = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("covariance_top", _TOP)      # its dataclasses look their module up there
_SPEC.loader.exec_module(_TOP)
sobol_types, top_covariance_model, top_covariance_shift = (
    _TOP.sobol_types, _TOP.top_covariance_model, _TOP.top_covariance_shift)

GAMMAS = np.array([1e-2, 0.3, 1.0])


def test_sobol_rule_is_flip_symmetric_with_gaussian_moments():
    p, n = 128, 256
    lam = np.arange(1, p + 1) ** -0.7
    mu = np.zeros(p)
    mu[[0, 10]] = 0.8
    s = al.CovarianceSetting(c=p / n, M=np.eye(p), mu=mu, f="relu", C=np.diag(lam / lam.mean()))
    model = top_covariance_model(s, n, 4)
    law = model.law(n, 1024, seed=3)
    assert law.xi.shape == (1024, len(model.mu_r)) and law.weight.sum() == pytest.approx(1.0)
    assert _flip(law) is not None                       # the solver halves the rule
    assert np.array_equal(law.y[:512], np.ones(512))
    # the kept coordinates have their exact law: mean y mu_r, covariance Sigma_r (root^2)
    xi = law.xi[:512] * np.sqrt(model.v)
    assert np.abs(xi.mean(axis=0) - model.mu_r).max() < 0.02
    Sigma = model.root @ model.root
    assert np.abs(np.cov(xi.T, bias=True) - Sigma).max() < 0.02 * np.abs(Sigma).max()
    zeta = sobol_types(6, 1024, seed=3)
    assert np.abs(zeta.mean(axis=0)).max() < 0.01
    assert np.abs(np.cov(zeta.T, bias=True) - np.eye(6)).max() < 0.02
    with pytest.raises(ValueError, match="power of two"):
        sobol_types(3, 1000)


@pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")   # a consistency check, not a domain claim
def test_top_model_of_white_tokens_is_the_exact_finite_size_theory():
    """C = v I and M = a I + w w^T: the model keeping the top direction (w) is exact (the
    complement v I with the matrix a I), its limit is the covariance limit, and limit + shift is the
    finite-size theory of the rank-one setting of the tokens x / sqrt(v) (mu / sqrt(v), matrix
    v M) at gamma / v (a tensor Gauss-Hermite rule there, Sobol here)."""
    p, n, a, v = 128, 256, 0.8, 2.0
    rng = np.random.default_rng(4)
    mu = 1.1 * rng.standard_normal(p) / np.sqrt(p)
    w = 1.6 * rng.standard_normal(p) / np.sqrt(p) ** 0.5 / 3.0
    for f in ("tanh", "relu"):
        s = al.CovarianceSetting(c=p / n, M=a * np.eye(p) + np.outer(w, w), mu=mu, f=f, C=v * np.eye(p))
        m = top_covariance_model(s, n, 1)
        assert m.v == pytest.approx(v, abs=1e-12) and m.alpha == pytest.approx(a, abs=1e-12)
        W = np.sqrt(v) * w[None]
        exact = al.theory.attention_error(al.RankSetting.from_vectors(p / n, mu / np.sqrt(v), W, W, f, alpha=v * a),
                                          GAMMAS / v, n=n)
        top = al.theory.attention_error(s, GAMMAS) + top_covariance_shift(s, GAMMAS, n, 1, types=1024)
        assert np.abs(top - exact).max() < 1e-3
