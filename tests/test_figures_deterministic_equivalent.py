"""The figures of chapter 2 (deterministic equivalent) at tiny sizes: numbers and axes."""

from __future__ import annotations

import pytest

from attn_lib.book.figures import deterministic_equivalent as figs

from book_helpers import check_figure

pytestmark = pytest.mark.usefixtures("book_cache")


def test_gamma_sweep():
    fig = figs.gamma_sweep(n=16, trials=2, seed=0, n_points=3)
    check_figure(fig, ["gamma_sweep_p", "gamma_sweep_n", "gamma_sweep_gap", "gamma_sweep_att_abs",
                       "gamma_sweep_min_ratio", "trials"], 1)
    assert (fig.numbers["gamma_sweep_p"], fig.numbers["gamma_sweep_n"]) == (64, 16)


def test_c_sweep():
    fig = figs.c_sweep(n=16, trials=2, seed=0, n_points=3)
    check_figure(fig, ["p_sweep_n", "p_sweep_gap", "p_sweep_max_above", "p_sweep_att_abs"], 1)


def test_snr_sweep():
    fig = figs.snr_sweep(n=32, trials=2, seed=0, n_points=3)
    check_figure(fig, ["snr_sweep_gap", "snr1_limit", "snr1_theory", "snr_sweep_att_abs"], 1)
    assert fig.numbers["snr1_limit"] == pytest.approx(0.375)


def test_bad_n_points_names_the_parameter():
    with pytest.raises(TypeError, match="n_points"):
        figs.snr_sweep(n=32, trials=2, seed=0, n_points=3.0)
