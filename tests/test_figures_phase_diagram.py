"""Figures of the phase-diagram chapter: each runs on tiny grids and returns its numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib.book.figures import phase_diagram as figs

from book_helpers import check_figure

SMALL = dict(grid=[4, 3], n=40, trials=2, seed=0)


# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache_off"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_snr_angle():
    nums = check_figure(figs.snr_angle(**SMALL), {
        "gamma", "n", "trials", "delta_max", "g_att1", "gt1", "cells1", "seconds1", "win1", "win1_raw",
        "least1", "least1_snr", "least1_deg", "best1_raw", "best1_snr_raw", "best1_deg_raw",
        "snr_win_lo_raw", "snr_win_hi_raw", "random_gap_min", "random_gap_min_raw",
        "orth_gap_min", "worst1", "gap_snr_max", "snr_max", "pocket1", "behind_edges1",
        "table1"}, 2)  # map and colour bar
    assert nums["cells1"] == 12 and nums["n"] == 40 and nums["snr_max"] == 8.0
    assert isinstance(nums["table1"], Markdown)
    assert nums["table1"].data.count("\n") == 1 + len(figs.POINTS1)


def test_aspect_norm():
    nums = check_figure(figs.aspect_norm(**SMALL), {
        "cells2", "seconds2", "win2", "win2_raw", "g_att2_lo", "g_att2_hi", "c_star_w0",
        "c_star_wmax", "c_star_w0_raw", "c_star_wmax_raw", "gt_star_w0", "gt_star_wmax", "gt2_lo", "gt2_hi", "w_max", "worst2", "worst2_raw",
        "c_worst2", "c_star_random_raw", "random_gap_min2", "random_corner", "table2"}, 2)
    assert nums["w_max"] == 4.0 and isinstance(nums["table2"], Markdown)
    # ridge's gamma / tau at the zero contour is gamma / c (tau_ridge = c)
    if np.isfinite(nums["c_star_w0"]):
        assert nums["gt_star_w0"] == pytest.approx(figs.GAMMA / nums["c_star_w0"])


def test_win_fraction():
    nums = check_figure(figs.win_fraction(summary_grid=[2, 2], n_gamma=2), {
        "summary_cells", "g_small", "g_min", "g_max", "g_one", "frac2_small_tanh",
        "frac1_g1_sign_raw", "frac1_g1_relu_raw", "nu_sign", "nu_tanh", "random_edge",
        "funcs_scale", "ridgeless_agree", "gt_small1", "gt_one1", "gt_max1",
        *(f"{k}{sfx}" for k in ("frac1_small", "frac1_gmax", "frac2_gmax", "frac1_g1",
                                "random_gmax", "spread1_g1", "spread2_g1")
          for sfx in ("", "_raw"))}, 2)
    assert nums["summary_cells"] == 4 and nums["g_min"] == pytest.approx(1e-3)
    assert all(0.0 <= nums[k] <= 100.0 for k in ("frac1_small", "frac1_gmax", "frac2_gmax"))
    assert nums["gt_max1"] == pytest.approx(nums["g_max"] / figs.C1)


def test_delta_check():
    out = figs.delta_check(**SMALL)
    assert set(out) == {
        "n_spots", "n_resolved", "n_agree", "n_small", "n_agree_small", "n_flip_small", "n_large",
        "n_agree_large", "n_below_large", "n_red_to_blue", "dev_small_max", "dev_large_min",
        "pocket_large_delta", "map1_large_delta", "map2_large_delta", "n_needed",
        "finite_better"}
    assert out["n_spots"] == len(figs.POINTS1) + len(figs.POINTS2)
    assert out["n_small"] + out["n_large"] == out["n_spots"]
    assert out["n_agree_small"] + out["n_flip_small"] == out["n_small"]
    assert math.isnan(out["dev_small_max"]) or out["dev_small_max"] >= 0.0


@pytest.mark.parametrize("dev, holds", [([-0.05, -0.001], True), ([-0.05, 0.05], False),
                                        ([0.001, -0.001], None)])
def test_finite_better(dev, holds):
    # standard errors 0.01: -0.05 and +0.05 are resolved at 3 s.e., +-0.001 are not
    claim = figs._finite_better(np.array(dev), np.full(2, 0.01))
    assert claim.holds is holds and claim.name == "finite_better"


def test_finite_better_uses_the_t_threshold():
    # -0.05 is 5 s.e.: resolved with many draws, not at 4 (9.2 s.e.) nor at 1 (nothing decided)
    dev, se = np.array([-0.05, -0.001]), np.full(2, 0.01)
    assert figs._finite_better(dev, se, draws=1000).holds is True
    assert figs._finite_better(dev, se, draws=4).holds is None
    assert figs._finite_better(dev, se, draws=1).holds is None
