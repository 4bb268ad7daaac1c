"""The figures and numbers of the finite-size chapter, at tiny sizes (cache in tmp_path)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from IPython.display import Markdown

from attn_lib.book.page import Figure
from attn_lib.book.figures import finite_size as figs
from attn_lib.studies import convergence

KW = dict(n_ladder=[32, 64], trials=[4, 3], gamma=1.0, seed=0)
KEYS = ("random", "snr1", "al1", "al2", "cos")


# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_overview():
    out = figs.overview(**KW)
    assert set(out) == {f"dcoef_{k}" for k in KEYS} | {"ladder", "gamma", "n_min", "n_max"}
    assert isinstance(out["ladder"], Markdown) and (out["n_min"], out["n_max"]) == (32, 64)
    assert out["dcoef_random"] == 0.0 and out["dcoef_al2"] == pytest.approx(20.0)


def test_bias_fluctuation():
    figure = figs.bias_fluctuation(**KW)
    assert isinstance(figure, Figure) and len(figure.fig.axes) == 4
    assert set(figure.numbers) == {
        "fl_min", "fl_max", "fl_count", "fl_half", "fl_mean", "ridge_resolved", "ridge_points",
        "ridge_bound_max", "ridge_fl_min", "att_neg", "att_pos", "att_count", "flat_resolved",
        "flat_points", "al_resolved", "al_points"}
    assert figure.numbers["fl_count"] == 8 and figure.numbers["ridge_points"] == 6
    plt.close(figure.fig)


def test_slope_tables():
    out = figs.slope_tables(**KW)
    assert set(out) == {"slopes_table", "gamma_slopes_table"}
    table = out["slopes_table"].data.splitlines()
    assert len(table) == 2 + 5 + 3  # header, rule, 5 attention and 3 ridge rows
    assert r"aligned, \|w\| = 1" in out["slopes_table"].data  # pipes escaped
    assert len(out["gamma_slopes_table"].data.splitlines()) == 2 + 5


def test_bias_shift():
    figure = figs.bias_shift(**KW)
    assert isinstance(figure, Figure) and len(figure.fig.axes) == 2
    dk = {f"dk_{k}{se}" for k in ("al1", "al2", "cos") for se in ("", "_se")} | {"dk_cos_text"}
    cmp = {f"cmp_{k}" for k in ("delta", "al2", "al2_se", "al1_law", "ratio", "ratio_se",
                                "geometry", "al1_range_lo", "al1_range_hi")}
    assert set(figure.numbers) == {"cos_verdict", "bd_min", "bd_max", "bd_points"} | dk | cmp
    assert isinstance(figure.numbers["cos_verdict"], Markdown)
    assert figure.numbers["cmp_ratio_se"] > 0 and not figure.numbers["cmp_geometry"].required
    plt.close(figure.fig)


@pytest.mark.parametrize("ratio, draws, holds", [(1.33, 1000, True), (1.33, 4, None),
                                                 (0.7, 1000, True), (1.02, 1000, None)])
def test_ratio_claim(ratio, draws, holds):
    # log 1.33 = 0.285 is 5.7 s.e. of 0.05: decided with many draws, not at 4 (9.2 s.e.)
    claim = figs._ratio_claim(ratio, 0.05, draws)
    assert claim.holds is holds and claim.name == "cmp_geometry"
    assert f"{draws - 1} d.o.f." in claim.evidence


def test_slowest():
    out = figs.slowest(**KW)
    slow = {f"slow_{k}" for k in ("bias", "bias_se", "delta", "ratio", "theory", "rel",
                                  "delta_others", "slope", "slope_se", "n_needed", "delta_star",
                                  "n_delta", "k", "dcoef", "slope_first", "slope_first_se",
                                  "slope_last", "slope_last_se")}
    assert set(out) == slow | {
        "slowest", "shallowest", "shallow_slope", "shallow_slope_se", "shallow_chi",
        "shallow_points", "target", "al1_beta", "cos_beta", "cos_beta_se", "al1_beta_n",
        "al1_beta_n_se", "others_dcoef", "slow_law_misfit", "al1_law_chi"}
    assert out["target"] == figs.TARGET
    # two sizes: the law goes through two points and cannot be tested
    assert out["slow_law_misfit"].holds is None
    assert out["al1_law_chi"] == "no χ²: a line through two points"


@pytest.mark.parametrize("dof, text", [(0, "no χ²: a line through two points"),
                                       (2, "χ²/dof = 81.6")])
def test_misfit_text(dof, text):
    fit = convergence.PowerLawFit(slope=-0.5, slope_se=0.1, log_amplitude=0.0,
                                  log_amplitude_se=0.1, chi2=81.6 * dof, dof=dof, points=dof + 2)
    assert figs._misfit_text(fit) == text


@pytest.mark.parametrize("chi2, dof, holds", [(81.6 * 2, 2, True), (2.0, 2, False),
                                               (0.0, 0, None)])
def test_misfit_claim(chi2, dof, holds):
    # chi^2/dof = 81.6 is far beyond the 3-s.e. tail 0.0027; chi^2 = 2 on 2 dof has tail 0.37
    fit = convergence.PowerLawFit(slope=-0.5, slope_se=0.1, log_amplitude=0.0,
                                  log_amplitude_se=0.1, chi2=chi2, dof=dof,
                                  points=dof + 2)
    claim = figs._misfit_claim(fit)
    assert claim.holds is holds and claim.name == "slow_law_misfit" and not claim.required
    if holds is False:  # not rejected is not "consistent": the wording says how weak the test is
        assert "not rejected" in claim.text and "little power" in claim.text


def test_small_n():
    # tiny sizes: the keys, the table and the two claims (the conditional's shift is the mean of
    # its draws minus the finite-size theory, so the table and the numbers agree)
    out = figs.small_n(n=64, trials=4, draws=3, seed=0)
    assert set(out) == {"smalln_n", "smalln_p", "smalln_delta", "smalln_trials", "smalln_draws",
                        "smalln_table", "smalln_fs_gap", "smalln_cond_gap", "smalln_mc_se",
                        "smalln_shift", "smalln_shift_se", "smalln_lower", "smalln_within"}
    assert (out["smalln_n"], out["smalln_p"], out["smalln_trials"], out["smalln_draws"]) == (64, 32, 4, 3)
    assert out["smalln_shift"] == pytest.approx(out["smalln_cond_gap"] - out["smalln_fs_gap"])
    assert len(out["smalln_table"].data.splitlines()) == 2 + len(figs.SMALL_N_GAMMAS)
    assert f"{out['smalln_shift']:+.4f}" in out["smalln_table"].data
    assert not out["smalln_within"].required and out["smalln_lower"].required
    # 4 Monte Carlo draws cannot decide a 0.01 margin
    assert out["smalln_within"].holds is None
