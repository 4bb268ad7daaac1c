"""The figures of chapter 4 (the a1 = 0 failure) at tiny sizes: numbers and axes."""

from __future__ import annotations

import pytest

from attn_lib.book.figures import a1_zero as figs

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_hermite_data():
    out = figs.hermite_data()
    assert set(out) == {f"a1_{name}" for name in figs.FUNCS} | {"a2_cos"}
    assert abs(out["a1_cos"]) < 1e-12


def test_snr_and_weights():
    check_figure(figs.snr_and_weights(n=8, trials=2, seed=0, n_points=2),
          ["cos_snr_spread_th", "cos_level", "cos_snr_spread_mc", "cos_snr_sem_mc", "cos_drift", "tanh_snr0",
           "tanh_snr4", "cos_over_tanh", "cos_w_spread_th", "cos_w_spread_mc", "tanh_w_change",
           "sign_w_change", "delta_max", "trials"], 2)


def test_universality():
    check_figure(figs.universality(n=16, trials=2, seed=0, n_points=2),
          ["cos_c_lo", "cos_c_hi", "cos_below_lo", "cos_below_hi", "raw_below_lo", "raw_below_hi", "cos_c_snr_diff", "univ_th_diff", "univ_a2_cos",
           "univ_a2_abs", "univ_mc_dev", "univ_mc_dev_small"], 2)


def test_mixture():
    fig = figs.mixture(n=8, trials=2, seed=0, n_points=2)
    check_figure(fig, ["mix_a1_err", "mix_nu_err", "mix_spread_lin", "mix_spread_zero", "mix_a1_half",
                "mix_mc_spread_zero", "mix_mc_spread_lin", "mix_snr0_range"], 1)
    assert fig.numbers["mix_a1_err"] < 1e-6 and fig.numbers["mix_nu_err"] < 1e-6


def test_bad_n_points_names_the_parameter():
    with pytest.raises(TypeError, match="n_points"):
        figs.mixture(n=8, trials=2, seed=0, n_points="5")


def test_finite_size():
    fig = figs.finite_size(n=64, trials=2, seed=0, n_points=2)
    out = check_figure(fig, ["cos_fs_drop", "cos_mc_drop", "cos_lim_spread", "cos_uses_signal",
                             "quadratic_fs_drop", "quadratic_mc_drop", "quadratic_lim_spread",
                             "quadratic_uses_signal", "cos_fs_above", "quadratic_fs_above", "fs_mc_max", "fs_mc_sem"], 1)
    # a1 = 0: the limit cannot see delta (flat to rounding), the finite-size theory can
    # (measured at n = 64: the cosine's theory falls 9.5 %, the quadratic's 41 %; 16 % and 59 %
    # at the book's full n = 512, where simulation falls 29 % and 69 %)
    assert out["cos_lim_spread"] < 1e-12 and out["quadratic_lim_spread"] < 1e-12
    assert out["cos_fs_drop"] > 5 and out["quadratic_fs_drop"] > 20, out
