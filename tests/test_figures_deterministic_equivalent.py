"""The figures of chapter 2 (deterministic equivalent) at tiny sizes: numbers and axes."""

from __future__ import annotations

import pytest

from attn_lib.book.figures import deterministic_equivalent as figs

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_gamma_sweep():
    fig = figs.gamma_sweep(n=16, trials=2, seed=0, n_points=3)
    check_figure(fig, ["gamma_sweep_p", "gamma_sweep_n", "gamma_sweep_gap", "gamma_sweep_att_abs",
                       "gamma_sweep_min_ratio", "gamma_sweep_cross", "slope_small", "trials",
                       "g_small", "att_above_ridge", "att_above_ridge_effect"], 2)
    # theory at c = 4: E ~ gamma^(1/2) at small gamma (measured slope 0.500 on logspace(-4, 2, 9))
    assert fig.numbers["slope_small"] == pytest.approx(0.5, abs=0.05)
    # two draws: the Student t threshold (235 s.e. at one degree of freedom) decides nothing
    assert fig.numbers["att_above_ridge"].holds is None
    assert fig.numbers["att_above_ridge_effect"].endswith("(2 draws)")
    assert (fig.numbers["gamma_sweep_p"], fig.numbers["gamma_sweep_n"]) == (64, 16)


def test_c_sweep():
    fig = figs.c_sweep(n=16, trials=2, seed=0, n_points=3)
    check_figure(fig, ["p_sweep_n", "p_sweep_gap", "p_sweep_max_above", "p_sweep_att_abs"], 1)
    ax = fig.fig.axes[0]
    fig.fig.canvas.draw()
    # the log c axis spans less than two decades: every tick is labelled as a plain number
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.125", "0.25", "0.5", "1", "2"]


def test_snr_sweep():
    fig = figs.snr_sweep(n=32, trials=2, seed=0, n_points=3)
    check_figure(fig, ["snr_sweep_gap", "snr1_limit", "snr1_theory", "snr_sweep_att_abs"], 1)
    assert fig.numbers["snr1_limit"] == pytest.approx(0.375)


def test_bad_n_points_names_the_parameter():
    with pytest.raises(TypeError, match="n_points"):
        figs.snr_sweep(n=32, trials=2, seed=0, n_points=3.0)
