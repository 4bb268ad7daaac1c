"""The theory explorer's grid (attn_lib.studies.explorer) and page writer (attn_lib.book.explorer).

The page itself, as the book build writes it, is checked in a browser by tests/test_book_html.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from attn_lib import Setting, Softmax, cache
from attn_lib.book import explorer as page
from attn_lib.studies import explorer, sweeps
from attn_lib.theory import attention_error, ridge_error, softmax

# the explorer draws both theories at every grid point, inside their domains or not
pytestmark = pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")

#: A grid small enough for a unit test, with a softmax point the finite-size theory refuses
#: (beta = 1, c = 1/2, SNR 4, aligned weights of norm 2: 2 beta ||M_r|| / sqrt(p) = 1.77 at n = 64).
SMALL = dict(f=["tanh", "softmax:1"], c=[0.5], snr=[0.0, 4.0], alignment=[1.0], norm=[1.0, 2.0],
             g=[0.01, 1.0], n=[64])


@pytest.fixture(scope="module")
def small():
    return explorer.grid(**SMALL)


def test_setting_reads_the_nonlinearity_and_the_weights():
    s = explorer.setting("relu", 2.0, 3.0, 0.5, 1.5)
    assert s == Setting(c=2.0, snr=3.0, f="relu", wk_norm=1.5, wq_norm=1.5, cos_mu_wk=0.5,
                        cos_mu_wq=0.5, cos_wk_wq=1.0)
    sm = explorer.setting("softmax:0.5", 1.0, 1.0, 0.0, 0.0)
    assert sm.attention == Softmax(0.5)
    # delta = snr (1 + alignment^2 norm^2) / sqrt(p)
    assert s.delta(512) == pytest.approx(3.0 * (1 + 0.25 * 2.25) / np.sqrt(1024), rel=1e-12)


@pytest.mark.parametrize("f, error, match", [
    ("softplus", ValueError, r"f must be a registered nonlinearity .* or 'softmax:<beta>', got 'softplus'"),
    ("softmax:hot", ValueError, r"inverse temperature of 'softmax:<beta>' must be a number"),
    ("softmax:-1", ValueError, r"beta of f='softmax:-1' must be in \(0, inf\)"),
    (1.0, TypeError, r"f must be a str"),
])
def test_setting_refuses_an_unknown_nonlinearity(f, error, match):
    with pytest.raises(error, match=match):
        explorer.setting(f, 1.0, 1.0, 0.0, 0.0)


@pytest.mark.parametrize("change, error, match", [
    (dict(f="tanh"), TypeError, r"f must be a non-empty list of nonlinearities"),
    (dict(f=[]), TypeError, r"f must be a non-empty list"),
    (dict(f=["tanh", "tanh"]), ValueError, r"f must not repeat a nonlinearity"),
    (dict(f=["tanh", "softmax:0"]), ValueError, r"beta of f='softmax:0' must be"),
    (dict(c=[0.5, 0.25]), ValueError, r"c must be strictly increasing"),
    (dict(c=[0.0, 0.5]), ValueError, r"each c must be in \(0, inf\)"),
    (dict(snr=[-1.0, 1.0]), ValueError, r"each snr must be in \[0, inf\)"),
    (dict(alignment=[0.0, 1.5]), ValueError, r"each alignment must be in \[-1, 1\]"),
    (dict(norm=[]), ValueError, r"norm must be a 1-D array \(non-empty\)"),
    (dict(g=[0.0, 1.0]), ValueError, r"g must be in \(0, inf\)"),
    (dict(g=[1.0, 0.1]), ValueError, r"g must be strictly increasing"),
    (dict(g="0.1"), TypeError, r"g must be a 1-D array of real numbers"),
    (dict(n=[128, 64]), ValueError, r"n must hold at least 1 strictly increasing sizes"),
    (dict(n=[10]), ValueError, r"n=10 gives p = round\(c n\) = 5 < 8 at c = 0.5: the "
                               r"finite-size theory needs p >= 8"),
])
def test_grid_names_a_bad_axis(change, error, match):
    with pytest.raises(error, match=match):
        explorer.grid(**{**SMALL, **change})


def test_grid_shapes_and_coverage(small):
    F, C, S, A, W, G, N = 2, 1, 2, 1, 2, 2, 1
    assert small["f"] == SMALL["f"] and small["n"].tolist() == SMALL["n"]
    for axis in ("c", "snr", "alignment", "norm", "g"):
        assert np.array_equal(small[axis], SMALL[axis])
    assert small["attention"].shape == (F, C, S, A, W, G)
    assert small["finite"].shape == (N, F, C, S, A, W, G)
    assert small["covered"].shape == (N, F, C, S, A, W) and small["covered"].dtype == bool
    assert small["ridge"].shape == (C, S, G) and small["delta"].shape == (N, C, S, A, W)
    # the finite-size theory covers every entry-wise setting, softmax where tail < 1 only
    for idx in np.ndindex(small["covered"].shape[1:]):
        s = explorer.setting(*(small[a][i] for a, i in zip(explorer.AXES, idx)))
        expected = not isinstance(s.attention, Softmax) or softmax.tail(s, 64) < 1.0
        assert small["covered"][(0,) + idx] == expected, idx
        assert np.all(np.isfinite(small["finite"][(0,) + idx]) == expected), idx
        assert small["delta"][(0,) + idx[1:]] == pytest.approx(s.delta(64), rel=1e-12)
    assert not small["covered"].all() and small["covered"].any()
    assert np.all((small["attention"] > 0) & (small["attention"] < 1))


def test_grid_curves_are_the_theory_at_gamma_over_tau(small):
    idx = (0, 0, 1, 0, 1)  # tanh, SNR 4, norm 2
    s = explorer.setting(*(small[a][i] for a, i in zip(explorer.AXES, idx)))
    g = np.asarray(SMALL["g"])
    tau = sweeps.feature_scale(s)
    assert np.allclose(small["attention"][idx], attention_error(s, tau * g), rtol=0, atol=1e-9)
    assert np.allclose(small["finite"][(0,) + idx], attention_error(s, tau * g, n=64),
                       rtol=0, atol=1e-9)
    assert np.allclose(small["ridge"][0, 1], ridge_error(s, 0.5 * g), rtol=0, atol=1e-12)


def test_softmax_scale_of_the_limit_is_the_large_n_limit():
    """The softmax limit curve's gamma is the n -> infinity limit of the finite-n one."""
    s = Setting(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0, alpha=1.3, attention=Softmax(0.7))
    g = np.array([1e-3, 1.0])
    limit = explorer.theory_gammas(s, g)
    assert np.allclose(explorer.theory_gammas(s, g, n=10 ** 7), limit, rtol=1e-6)
    assert not np.allclose(explorer.theory_gammas(s, g, n=32), limit, rtol=1e-3)
    tanh = explorer.setting("tanh", 0.5, 1.0, 0.0, 0.0)  # entry-wise: n does not enter
    assert np.array_equal(explorer.theory_gammas(tanh, g, n=256), explorer.theory_gammas(tanh, g))


@pytest.mark.usefixtures("book_cache")
def test_cached_grid_is_stored_once():
    kw = {**SMALL, "f": ["tanh"], "snr": [4.0], "norm": [2.0]}
    first = explorer.cached_grid(**kw)
    found = cache.entry(explorer.grid, **{k: list(map(float, v)) if k not in ("f", "n") else v
                                          for k, v in kw.items()})
    assert found.hit
    assert np.array_equal(found.value["finite"], first["finite"])


@pytest.mark.usefixtures("book_cache")
def test_monte_carlo_pairs_attention_and_ridge_on_the_same_draws():
    s = explorer.setting("tanh", 0.5, 2.0, 1.0, 1.0)
    g = np.array([1e-3, 1.0])
    mc = explorer.monte_carlo([s], g, n=64, trials=3, seed=1)
    assert mc["attention"].shape == mc["ridge"].shape == (1, 3, 2)
    sweep = sweeps.simulations([s], np.concatenate([sweeps.feature_scale(s) * g, 0.5 * g]),
                               n=64, trials=3, seed=1)
    assert np.array_equal(mc["attention"][0], sweep.attention[0][:, :2])
    assert np.array_equal(mc["ridge"][0], sweep.ridge[0][:, 2:])
    bars = page.checks(mc)
    se = np.std(mc["attention"] - mc["ridge"], axis=1, ddof=1) / np.sqrt(3)
    assert np.allclose(bars["gap_hi"] - bars["gap"], se) and np.allclose(bars["gap"] - bars["gap_lo"], se)


WRITE = dict(profile="quick", f=["tanh"], c=[0.5], snr=[4.0], alignment=[1.0], norm=[2.0],
             g_range=[0.01, 1.0], n_g=2, n=[64],
             mc_points=[dict(f="tanh", c=0.5, snr=4.0, alignment=1.0, norm=2.0)],
             mc_n=64, mc_trials=2, mc_g=[0.01])


@pytest.mark.parametrize("change, match", [
    (dict(mc_n=128), r"mc_n=128 must be one of n=\[64\]"),
    (dict(mc_points=[dict(f="relu", c=0.5, snr=4.0, alignment=1.0, norm=2.0)]),
     r"mc_points: f='relu' is not on the grid's f axis \['tanh'\]"),
    (dict(mc_points=[dict(f="tanh", c=0.5, snr=3.0, alignment=1.0, norm=2.0)]),
     r"mc_points: snr=3.0 is not on the grid's snr axis \[4.0\]"),
    (dict(mc_points=[dict(f="tanh", c=0.5)]), r"each of mc_points must give exactly"),
    (dict(mc_points=[]), r"mc_points must name at least one grid point"),
    (dict(g_range=[1.0, 0.1]), r"g_range must be increasing"),
    (dict(mc_trials=1), r"mc_trials must be an integer >= 2, got 1"),
])
def test_write_names_a_bad_parameter_before_computing(tmp_path, change, match):
    with pytest.raises(ValueError, match=match):
        page.write(tmp_path / "x.html", **{**WRITE, **change})
    assert not (tmp_path / "x.html").exists()


@pytest.mark.usefixtures("book_cache")
def test_write_inlines_bokeh_and_loads_nothing(tmp_path):
    info = page.write(tmp_path / "sub" / "explorer.html", **WRITE)
    text = (tmp_path / "sub" / "explorer.html").read_text(encoding="utf-8")
    assert info["bytes"] == len(text.encode("utf-8")) and info["points"] == 1 and info["checks"] == 1
    # BokehJS inlined: no script or stylesheet is loaded from elsewhere
    assert not re.search(r"<(?:script|link)\b[^>]*\b(?:src|href)=", text)
    assert text.count("<script") >= 2  # the library and the document
    assert text.count('"type":"object","name":"CustomJS"') == 1  # one callback
