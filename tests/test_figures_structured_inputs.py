"""The figures of chapter 3 (random versus structured inputs) at tiny sizes: numbers and axes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from attn_lib import Setting
from attn_lib.book.figures import structured_inputs as figs

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_theory_and_simulation_draws_one_model():
    fig, ax = plt.subplots()
    settings = [Setting(c=0.5, snr=s) for s in (0.0, 1.0)]
    th, mc = figs.theory_and_simulation(ax, [0.0, 1.0], settings, [0.0, 1.0], settings,
                                        [0.1, 1.0], n=16, trials=2, seed=0, label="ridge",
                                        color="k", k=1, model="ridge")
    assert th.shape == (2,) and mc.attention is None and mc.ridge.shape == (2, 2, 2)
    labels = [t.get_text() for t in ax.legend().get_texts()]
    assert labels == ["ridge (theory)", "ridge (simulation)"]


def test_snr():
    check_figure(figs.snr(n=16, trials=2, seed=0, n_points=2),
          ["snr0_gap", "snr4_gap_orth", "snr4_gap_al1",
           "mc_al2_gap", "mc_al2_gap_sem", "mc_al2_below", "g_att", "raw_rev_max", "min_gap_al2", "delta_al2"], 1)


def test_gap_maps():
    fig = figs.gap_maps()
    check_figure(fig, ["map_cos_best", "map_cos_min", "map_cos0_min", "map_gamma_best", "map_gamma_small", "map_gamma_cross"], 4)


def test_aspect_ratio():
    check_figure(figs.aspect_ratio(n=20, trials=2, seed=0, n_points=2),
                 ["c_spread_ridge", "c_spread_att", "c_spread_ridge_01", "c_spread_att_01",
                  "c_spread_att_mc", "c_spread_ridge_mc"], 2)


def test_bad_n_points_names_the_parameter():
    with pytest.raises(ValueError, match="n_points"):
        figs.snr(n=16, trials=2, seed=0, n_points=0)


def test_row_space_bound():
    fig = figs.row_space_bound(n=60, trials=2, seed=0)
    check_figure(fig, ["rsb_grid", "rsb_de_min", "rsb_de_snr0", "rsb_never_below", "rsb_de_excess",
                       "rsb_linear_max", "rsb_eq_gap", "rsb_eq_gap_sem", "rsb_att", "rsb_att_sem",
                       "rsb_ridge", "rsb_bound", "rsb_att_gap", "rsb_att_gap_sem", "rsb_att_below",
                       "rsb_sign", "rsb_sign_th", "rsb_sign_floor", "rsb_delta", "rsb_n", "rsb_p",
                       "rsb_trials"], 2)
    nums = fig.numbers
    assert nums["rsb_never_below"].holds is True and nums["rsb_de_min"] > -1e-9
    assert nums["rsb_linear_max"] < 1e-12
    assert nums["rsb_att_below"].holds is None          # two draws decide nothing
    assert nums["rsb_bound"] == pytest.approx(0.1) and nums["rsb_sign_th"] == pytest.approx(0.99285, abs=1e-5)
