"""The figures of the softmax chapter (book/11_softmax) at tiny sizes: numbers and axes."""

from __future__ import annotations

import numpy as np
import pytest

from attn_lib.book import claims
from attn_lib.book.figures import softmax as figs

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_convention():
    out = check_figure(figs.convention(n=64), ["tau_softmax", "tau_ridge", "scale_ratio", "s_n",
                                                "raw_gap", "matched_gap", "raw_inflates",
                                                "colsum_err", "diag_max"], 2)
    # columns of A sum to one and the self-pairs are masked (exactly, up to rounding)
    assert out["colsum_err"] < 1e-12 and out["diag_max"] == 0.0
    # the raw features are ~ c / n times ridge's: at n = 64, c = 1 the ratio is 40 (theory)
    assert out["scale_ratio"] > 10 and out["raw_gap"] > out["matched_gap"]


def test_random_inputs():
    names = ["trials", "theory_gap_min", "theory_worse", "grade_worse", "grade_worse_word"] + [
        f"{k}_{b}" for b in ("05", "10", "15")
                          for k in ("err", "err_se", "ew_err", "fits", "ew_fits", "gap", "gap_se",
                                    "worse", "sm_ew", "sm_ew_se", "above_ew")]
    out = check_figure(figs.random_inputs(n=32, trials=2, seed=0, n_gamma=3), names, 3)
    assert all(isinstance(out[f"worse_{b}"], claims.Claim) for b in ("05", "10", "15"))
    # two draws: every Monte Carlo claim is tested at t with 1 degree of freedom
    for b in ("05", "10", "15"):
        for name in ("worse", "above_ew", "fits", "ew_fits"):
            assert "1 d.o.f." in out[f"{name}_{b}"].evidence, (name, b)
        assert out[f"worse_{b}"].evidence.startswith(f"difference {out[f'gap_{b}']:+.4g}")


def test_structured():
    out = check_figure(figs.structured(n=32, trials=2, seed=0, snrs=[0.5, 2.0]),
                       ["gap_perp", "gap_aligned", "gap_perp_se", "gap_aligned_se", "perp_worse",
                        "aligned_closes", "aligned_reverses", "bd_aligned", "bd_perp",
                        "th_mc_aligned", "limit_misses", "th_mc_perp", "th_mc_se", "sm_first",
                        "sm_last",
                        "sm_falls", "tail", "fs_mc_aligned", "fs_follows", "fs_mc_max",
                        "fs_within", "th_gap_perp", "th_gap_aligned", "fs_gap_aligned",
                        "limit_closes", "limit_reverses", "grade_align", "grade_align_word"], 2)
    # aligned weights of norm 2 raise delta over orthogonal ones (|mu^T M mu| = snr (1 + 4))
    assert out["bd_aligned"] == pytest.approx(5 * out["bd_perp"])
    # at n = 32 (p = 16) 2 beta ||M_r|| / sqrt(p) = 2 (1 + 4) / 4 = 2.5: the finite-size theory
    # refuses the setting, and its claims are undecided rather than passed
    assert out["tail"] == pytest.approx(2.5)
    assert np.isnan(out["fs_mc_aligned"]) and np.isnan(out["fs_mc_max"])
    assert out["fs_follows"].holds is None and out["fs_within"].holds is None
    assert np.isnan(out["fs_gap_aligned"])
    # the sign convention: "aligned gap smaller" and "reverses" are a - b < 0 claims
    assert out["aligned_closes"].evidence.startswith(
        f"difference {out['gap_aligned'] - out['gap_perp']:+.4g}")
    assert out["aligned_reverses"].evidence.startswith(f"difference {out['gap_aligned']:+.4g}")
    # in the proportional limit (theory, exact) alignment closes the gap but does not reverse it
    # (limit gaps 0.0287 orthogonal and 0.0166 aligned at SNR 4, measured)
    assert out["limit_closes"].holds is True and out["limit_reverses"].holds is False
    assert 0 < out["th_gap_aligned"] < out["th_gap_perp"]
    # graded as for entry-wise attention: at most "partly", since the limit does not reverse
    assert out["grade_align"].data in ("**partly**", "**not decided at this profile**",
                                       "**contradicted**")
    assert out["grade_align_word"] == out["grade_align"].data.strip("*")


def test_grade():
    yes, no = (claims.exact("c", v, "", wording=("a", "b", "c")) for v in (True, False))
    open_ = claims.Claim("c", None, "", ("a", "b", "c"))
    assert figs._grade([yes, yes]).data == "**demonstrated**"
    assert figs._grade([yes], partly=[no]).data == "**partly**"
    assert figs._grade([yes, open_], partly=[no]).data == "**not decided at this profile**"
    assert figs._grade([no, open_]).data == "**contradicted**"


def test_structured_needs_two_snrs():
    with pytest.raises(ValueError, match="snrs"):
        figs.structured(n=32, trials=2, seed=0, snrs=[1.0])


def test_breakdown():
    out = check_figure(figs.breakdown(n_ladder=[32, 48], trials=2, seed=0, n_gamma=3,
                                      betas=[0.5, 1.0]),
                       ["sqrt_log_n", "n_small", "n_large", "beta_max", "err_beta_max",
                        "err_beta_max_se",
                        "err_beta_one", "breaks", "beta_break", "eps_ratio_first",
                        "eps_ratio_last", "eps_pred_last", "eps_agrees", "eps_below",
                        "err_small_first",
                        "err_small_last", "small_falls", "fs_err_small_first",
                        "fs_err_small_last", "fs_small_fits", "fs_err_beta_one",
                        "fs_lim_beta_max", "tail_max", "eps_ratio_first_se", "eps_ratio_last_se",
                        "err_small_first_se", "err_small_last_se", "rows_err_beta_one",
                        "rows_err_beta_max", "rows_err_beta_max_se", "rows_breaks",
                        "rows_beta_break", "rows_break_text", "rows_break_moves"], 2)
    assert out["beta_max"] == 1.0
    # at n = 48 the row factors matter already at beta = 1: the row theory's miss is below the
    # limit's (measured 0.058 against 0.086 on these two draws)
    assert out["rows_err_beta_one"] < out["err_beta_one"]
    # random inputs have no latent direction: never refused, and the finite-size theory differs
    # from the limit by its mean part only (0.0029 at n = 48, beta = 1 on this grid; measured)
    assert out["tail_max"] == 0.0
    assert 0.0 < out["fs_lim_beta_max"] < 0.05
    assert np.isfinite(out["fs_err_small_last"]) and np.isfinite(out["fs_err_beta_one"])


def test_mask():
    out = check_figure(figs.mask(n=32, trials=2, seed=0, n_gamma=3, p_ladder=[8, 16]),
                       ["sw_05_first", "sw_05_last", "swp_05_first", "swp_05_last",
                        "sw_10_first", "sw_10_last", "swp_10_first", "swp_10_last", "sw_dev",
                        "p_first", "p_last", "um_ridge", "um_is_ridge", "mask_gap",
                        "mask_matters", "um_diff", "um_diff_se", "mask_gap_se"], 2)
    # the self-weight grows with p (its logit ~ beta sqrt(p)), in simulation and prediction
    assert out["sw_10_last"] > out["sw_10_first"] and out["swp_10_last"] > out["swp_10_first"]


def test_spectrum():
    out = check_figure(figs.spectrum(n_ladder=[32, 64], trials=2, seed=0),
                       ["w1_first", "w1_last", "w1_se_first", "w1_se_last", "n_first", "n_last",
                        "w1_falls", "top_sm", "top_ge", "spectrum_trials"], 2)
    # the mean part's outlier: both matrices have a top singular value near 1
    assert abs(out["top_sm"] - 1) < 0.1 and abs(out["top_ge"] - 1) < 0.1


def test_bad_n_gamma_names_the_parameter():
    with pytest.raises(TypeError, match="n_gamma"):
        figs.random_inputs(n=32, trials=2, seed=0, n_gamma="3")


def test_tail_regime():
    out = figs.tail_regime(2048)
    # closed forms (tests/test_softmax_study.py checks them against quadrature): beta = 1 is
    # inside the Gaussian regime at n = 2048, beta = 1.5 beyond it
    assert out["q_10"] < 0.1 < 1.0 < out["q_15"]
    assert out["tail_beta"] == out["tail_beta_2048"] == pytest.approx(1.3498, abs=1e-4)
    assert out["n_edge_15"] == 10079 and out["past_edge"].holds is True
    assert figs.tail_regime(10 ** 5)["past_edge"].holds is False
    with pytest.raises(ValueError, match="n"):
        figs.tail_regime(4)
