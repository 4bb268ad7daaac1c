"""The figures and numbers of the strong-alignment chapter, at tiny sizes (cache in tmp_path)."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib.book.figures import strong_alignment as figs
from attn_lib.studies import sweeps

from book_helpers import check_figure

N, TRIALS = 64, 2
SWEEP = dict(n=N, trials=TRIALS, n_points=2, n_line=2, seed=0)


# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


@pytest.fixture
def _cheap_theory(monkeypatch):
    # the finite-size DE costs up to a second per setting (tests/test_strong_alignment.py checks
    # it); here the limit DE of shape (B, G) stands in for it, only the drawing is under test
    monkeypatch.setattr(figs.sa, "finite_size_theory",
                        lambda settings, gammas, n: sweeps.equivalents(settings, np.atleast_1d(gammas)))


def test_overview():
    out = figs.overview(n=N, trials=TRIALS)
    assert out == {"n": N, "p": 19, "trials": TRIALS, "ex_delta": figs.example(6.0).delta(N)}


def test_worked_example():
    out = figs.worked_example(n=20, trials=2, seed=0)
    assert set(out) == {"we_table", "we_n", "we_trials", "we_p", "we_delta", "we_mc", "we_mc_se",
                        "we_de", "we_ridge", "we_factor", "we_erf", "we_lin", "we_sorted",
                        "we_block_smaller"}
    assert isinstance(out["we_table"], Markdown)
    assert len(out["we_table"].data.splitlines()) == 2 + len(figs.GAMMAS_EXAMPLE)
    assert out["we_n"] == 20 and out["we_p"] == 6
    assert out["we_sorted"] == pytest.approx(99.28, abs=0.01)  # Phi(sqrt 6)
    # sign's mean at the shift saturates below its linearisation a1 delta
    assert out["we_erf"] <= 1 < out["we_lin"] and out["we_block_smaller"].holds is True


def test_coherent_shift():
    fig = figs.coherent_shift(n=20, n_ladder=[16, 20], trials=2, seed=0, n_points=2)
    check_figure(fig, ["d_first", "d_first_dev", "d_ridge_dev", "d_large", "d_large_delta", "sim_below_de",
                "ladder_n0", "ladder_n1", "ladder_r0", "ladder_r1", "ladder_d0", "ladder_d1",
                "n_needed"], 2)
    assert (fig.numbers["ladder_n0"], fig.numbers["ladder_n1"]) == (16, 20)
    assert np.isfinite(fig.numbers["ladder_r1"])
    # a claim "a < b": the evidence is the ratio minus 1, tested at the t threshold of 2 draws
    claim = fig.numbers["sim_below_de"]
    assert claim.evidence.startswith("difference -") and "1 d.o.f." in claim.evidence


def test_coherent_shift_names_a_bad_parameter():
    with pytest.raises(ValueError, match="n_points"):
        figs.coherent_shift(n=20, n_ladder=[16, 20], trials=2, seed=0, n_points=0)


@pytest.mark.usefixtures("_cheap_theory")
def test_phenomenon():
    numbers = check_figure(figs.phenomenon(**SWEEP), {
        "ex_ratio", "ex_ratio_se", "ex_scale", "sweep_d0", "sweep_d1", "sweep_ratio_sim0",
        "sweep_ratio_sim1", "sweep_ratio_lim_min", "ex_better", "ex_limit_near",
        "sweep_falls"}, 2)
    assert numbers["ex_ratio_se"] > 0 and numbers["ex_better"].name == "ex_better"
    # at the ridgeless end the limit theory cannot beat ridge (the row-space bound)
    assert numbers["sweep_ratio_lim_min"] >= 1 - 1e-3


def test_shift_histogram():
    check_figure(figs.shift_histogram(n=N, seed=0), {"h_delta", "h_sd", "h_sd_emp", "h_ratio", "h_ratio_approx", "h_wrong_side"}, 1)


def test_surrogates():
    out = figs.surrogates(n=N, trials=TRIALS, seed=0)
    assert set(out) == {"sur_table", "sur_lat_max", "sur_coh_first", "sur_coh_last",
                        "sur_d_first", "sur_d_last", "sur_coh_optimistic", "sur_lat_within"}
    lines = out["sur_table"].data.splitlines()
    assert isinstance(out["sur_table"], Markdown) and len(lines) == 2 + len(figs.SNR_SURROGATES)
    assert lines[1] == "|" + "---:|" * 5 and "ridge" not in lines[0]


@pytest.mark.usefixtures("_cheap_theory")
def test_finite_size():
    check_figure(figs.finite_size(**SWEEP, funcs=["sign"]), {"funcs_list", "fs_gap_max", "fs_gap_med", "lim_gap_max", "fs_points", "fs_sem_max",
            "fs_sign_last", "fs_lim_small", "fs_sd_small", "mc_sign_last"}, 1)


@pytest.mark.usefixtures("_cheap_theory")
def test_maps():
    # two maps and their shared colour bar
    figure = figs.maps(map_size=3, n_map=128, map_checks=2, map_trials=2, seed=0)
    numbers = dict(figure.numbers)
    check_figure(figure, {"n_map", "map_win_fs", "map_win_lim", "map_best_fs", "map_lim_min",
            "map_lim_behind", "map_factor_fs",
            "map_w0_lo", "map_w0_hi", "map_w0_delta", "map_check_table", "map_check_dev",
            "map_check_sign"}, 3)
    # two checked cells, the corners of the diagonal; the colour bar is symmetric about zero
    assert len(numbers["map_check_table"].data.splitlines()) == 2 + 2
    assert numbers["map_check_sign"].name == "map_check_sign" and numbers["map_check_dev"] >= 0
    ticks = figure.fig.axes[-1].get_yticks()
    assert ticks[0] == pytest.approx(-ticks[-1]) and len(ticks) == 5


def test_derivation_example():
    out = figs.derivation_example(n_check=N, trials_check=4, trials_first=2, seed=0)
    assert set(out) == {"dv_n", "dv_p", "dv_delta", "dv_trials", "dv_first", "dv_table",
                        "dv_z_first", "dv_rel_first", "dv_agree"}
    assert isinstance(out["dv_table"], Markdown)
    assert len(out["dv_table"].data.splitlines()) == 2 + len(figs.GAMMAS_EXAMPLE)
    assert out["dv_agree"].name == "dv_agree" and "margin" in out["dv_agree"].evidence
    # the first draws are those of a shorter run of the same seed (the reconciliation's premise)
    ex, g = figs.example(figs.SNR_EXAMPLE), list(figs.GAMMAS_EXAMPLE)
    short = sweeps.simulations([ex], g, n=N, trials=2, seed=0).mean("attention")[0][1]
    th = figs.sa.finite_size_theory([ex], g, n=N)[0][1]
    assert out["dv_rel_first"] == pytest.approx(100 * (short / th - 1), rel=1e-12)
    with pytest.raises(ValueError, match="trials_first"):
        figs.derivation_example(n_check=N, trials_check=2, trials_first=3)


@pytest.mark.parametrize("rel, holds", [([0.02, -0.15], True), ([0.02, 0.3], False),
                                        ([0.02, 0.18], None)])
def test_latent_within(rel, holds):
    # standard errors 0.01, margin 0.20: 0.15 + 0.03 passes, 0.3 - 0.03 fails, 0.18 +- 0.03
    # straddles the margin
    assert figs.LATENT_MARGIN == 0.20
    claim = figs._latent_within(np.array(rel), np.full(2, 0.01))
    assert claim.holds is holds and claim.name == "sur_lat_within" and not claim.required


def test_latent_within_uses_the_t_threshold():
    # 0.15 + 3 s.e. passes with many draws; at 4 draws the threshold is 9.2 s.e.: 0.15 + 0.092
    # straddles the margin, and at 1 draw nothing is decided
    rel, se = np.array([0.02, -0.15]), np.full(2, 0.01)
    assert figs._latent_within(rel, se, draws=1000).holds is True
    assert figs._latent_within(rel, se, draws=4).holds is None
    assert figs._latent_within(rel, se, draws=1).holds is None
