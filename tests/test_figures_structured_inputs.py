"""The figures of chapter 3 (random versus structured inputs) at tiny sizes: numbers and axes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib import Setting
from attn_lib.book.figures import structured_inputs as figs

from book_helpers import check_figure

pytestmark = pytest.mark.usefixtures("book_cache")


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
          ["snr0_gap", "snr4_gap_orth", "snr4_gap_al1", "rev_lo", "rev_hi", "rev_max",
           "mc_al2_gap", "mc_al2_gap_sem", "mc_al2_below", "g_att", "raw_rev_max", "min_gap_al2", "delta_al2"], 1)


def test_gap_maps():
    fig = figs.gap_maps()
    check_figure(fig, ["map_cos_best", "map_cos_min", "map_cos0_min", "map_gamma_best", "map_gamma_small", "map_gamma_cross"], 4)


def test_aspect_ratio():
    check_figure(figs.aspect_ratio(n=20, trials=2, seed=0, n_points=2),
                 ["c_spread_ridge", "c_spread_att", "c_spread_ridge_01", "c_spread_att_01",
                  "c_spread_att_mc", "c_spread_ridge_mc"], 2)


def test_worked_example():
    out = figs.worked_example(n=20, trials=2, seed=0)
    assert set(out) == {"we_table", "we_n", "we_trials", "we_p", "we_delta", "we_mc", "we_de", "we_ridge",
                        "we_factor", "we_delta_2048", "we_erf", "we_lin", "we_block_smaller"}
    assert isinstance(out["we_table"], Markdown)
    assert len(out["we_table"].data.splitlines()) == 2 + len(figs.EXAMPLE_GAMMAS)
    assert out["we_n"] == 20 and out["we_p"] == 6


def test_coherent_shift():
    fig = figs.coherent_shift(n=20, n_ladder=[16, 20], trials=2, seed=0, n_points=2)
    check_figure(fig, ["d_first", "d_first_dev", "d_ridge_dev", "d_large", "d_large_delta", "sim_below_de",
                "ladder_n0", "ladder_n1", "ladder_r0", "ladder_r1", "ladder_d0", "ladder_d1",
                "n_needed"], 2)
    assert (fig.numbers["ladder_n0"], fig.numbers["ladder_n1"]) == (16, 20)
    assert np.isfinite(fig.numbers["ladder_r1"])


def test_bad_n_points_names_the_parameter():
    with pytest.raises(ValueError, match="n_points"):
        figs.snr(n=16, trials=2, seed=0, n_points=0)
