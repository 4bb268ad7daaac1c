"""The figures of the fine-tuning chapter (book/14_fine_tuning) at tiny sizes: numbers and axes."""

from __future__ import annotations

import pytest

from attn_lib.book import claims
from attn_lib.book.figures import fine_tuning as figs

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"),
              pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]

P = dict(c=0.5, snr=1.0, g=0.1, g_small=1e-3, beta=1.0, strong_delta=1.0, n=48, steps=6, lr=1.0,
         init=0.1, seeds=2, record=6, train_trials=2, flow_stride=3, flow_finite=False,
         n_check=64, check_trials=2, check_points=2, seed=0)


def test_alignment():
    names = ["ft_seeds", "ft_steps", "ft_n", "ft_lr", "ft_g", "ft_tanh_steps_09", "ft_flow_kind"]
    for case in ("tanh", "cos", "softmax", "rank2"):
        names += [f"ft_{case}_{k}" for k in ("cos_k", "cos_k_hw", "cos_q", "cos_q_hw", "aligns")]
    for case in ("tanh", "softmax"):
        names += [f"ft_flow_{case}_cos_k", f"ft_flow_{case}_gap"]
    out = check_figure(figs.alignment(**P), names, 4)
    assert isinstance(out["ft_tanh_aligns"], claims.Claim)
    assert "1 d.o.f." in out["ft_tanh_aligns"].evidence  # two runs: t with one degree of freedom
    assert out["ft_tanh_aligns"].required and not out["ft_cos_aligns"].required
    assert 0.0 <= out["ft_rank2_cos_k"] <= 1.0


def test_error_along_and_check():
    names = ["ft_train_trials", "ft_g_small"]
    for case in ("tanh", "softmax", "strong"):
        names += [f"ft_{case}_{k}" for k in ("start", "end", "end_hw", "ridge", "vs_ridge",
                                             "improves", "finite_miss", "limit_miss", "mc_sem",
                                             "delta_end", "small_vs_ridge")]
    out = check_figure(figs.error_along(**P), names, 3)
    # the strong case starts at delta = 1 at the training size
    assert out["ft_strong_delta_end"] > 0.5 > out["ft_tanh_delta_end"]
    chk = check_figure(figs.theory_check(**P), [
        "ft_check_n", "ft_check_trials", "ft_check_points", "ft_check_finite_miss",
        "ft_check_limit_miss", "ft_check_sem", "ft_check_delta", "ft_check_within"], 1)
    assert chk["ft_check_points"] == 2 and chk["ft_check_within"].holds is None  # 2 draws: undecided


def test_optimum():
    out = figs.optimum(**P)
    assert set(out) == {"ft_optimum_table", "ft_opt_gap_tanh", "ft_opt_gap_softmax",
                        "ft_opt_gap_generalisation", "ft_tanh_reaches_optimum",
                        "ft_gen_minus_interp", "ft_gen_minus_interp_hw", "ft_gen_same"}
    # the optimum at the learned norms is no worse than the learned geometry
    assert min(out[f"ft_opt_gap_{c}"] for c in ("tanh", "softmax", "generalisation")) > -1e-6
