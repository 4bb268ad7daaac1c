"""The figures of chapter 1 (Hermite linearisation) at tiny sizes: numbers and axes."""

from __future__ import annotations

import pytest
from IPython.display import Markdown

from attn_lib.model import nonlinearity
from attn_lib.book.figures import hermite_linearisation as figs

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_coefficient_table():
    out = figs.coefficient_table()
    assert set(out) == {"coef_table"} | {f"{k}_{f}" for k in ("a1", "nu", "b2")
                                         for f in figs.QUOTED}
    assert isinstance(out["coef_table"], Markdown)
    assert len(out["coef_table"].data.splitlines()) == 2 + len(nonlinearity.REGISTRY)
    assert out["b2_tanh"] == pytest.approx(out["nu_tanh"] - out["a1_tanh"] ** 2)


def test_nonlinearities():
    check_figure(figs.nonlinearities(), [], 1)


def test_spectra():
    fig = figs.spectra(n=32, seed=0)
    check_figure(fig, ["n_spectrum", "ks_tanh", "ks_cos"], 2)
    assert fig.numbers["n_spectrum"] == 32 and 0 <= fig.numbers["ks_cos"] <= 1


def test_kernel_gap():
    fig = figs.kernel_gap(n_ladder=[16, 24], trials=2, seed=0)
    check_figure(fig, ["gap_n_small", "gap_n_large", "gap_small", "gap_large", "res_large",
                       "trials"], 2)
    assert (fig.numbers["gap_n_small"], fig.numbers["gap_n_large"]) == (16, 24)


def test_interpolation_error():
    fig = figs.interpolation_error(n=24, trials=2, seed=0, n_gamma=3)
    check_figure(fig, ["gamma_min", "err_att_tanh", "err_att_cos", "err_ridge", "err_ridge_theory",
                "tau_tanh", "tau_cos", "tau_ridge", "cross_raw", "cross_scaled",
                "tanh_wins_large_raw", "tanh_wins_large_scaled", "tanh_wins_large_raw_effect",
                "tanh_wins_large_scaled_effect", "scale_moves_crossing"], 2)
    assert fig.numbers["gamma_min"] == pytest.approx(1e-4)
    assert fig.numbers["tau_ridge"] == pytest.approx(0.5)
    # the theory crossings do not depend on n: raw 1.59, rescaled 4.84 (measured)
    assert 1.0 < fig.numbers["cross_raw"] < 2.5 < fig.numbers["cross_scaled"] < 8.0
    assert fig.numbers["scale_moves_crossing"].holds is True
    # the evidence is attention - ridge, the order the prose names them
    for key in ("raw", "scaled"):
        claim = fig.numbers[f"tanh_wins_large_{key}"]
        d = float(fig.numbers[f"tanh_wins_large_{key}_effect"].split(" ± ")[0])
        assert float(claim.evidence.split()[1]) == pytest.approx(d, rel=1e-2)


def test_kernel_gap_bars_stop_at_zero():
    fig = figs.kernel_gap(n_ladder=[16, 24], trials=3, seed=0)
    for line in fig.fig.axes[0].collections:  # error-bar segments
        for seg in line.get_segments():
            assert min(seg[:, 1]) >= 0.0


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="n_gamma"):
        figs.interpolation_error(n=24, trials=2, seed=0, n_gamma=0)
    with pytest.raises(TypeError, match="n_ladder"):
        figs.kernel_gap(n_ladder=[16.0], trials=1, seed=0)
