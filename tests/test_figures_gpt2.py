"""Figures of the GPT-2 chapter: each runs on one layer at a small n and returns its numbers."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib.book.figures import gpt2 as gpt2_figs
from attn_lib.studies import gpt2

from attn_lib.book.claims import threshold

from book_helpers import check_figure

# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.skipif(not gpt2.default_path().is_file(),
                                 reason=f"GPT-2 weights not present at {gpt2.default_path()}"),
              pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning"),
              pytest.mark.usefixtures("gpt2_module_cache")]

SMALL = dict(k_max=8, seed=0, layers=(0,))
# c = 4: n = 192 tokens for p = 768; one trial, two gammas.
MC = dict(f="tanh", c=4.0, snrs=[2.0], detail_layers=[0], trials=1, n_gamma=2,
          gamma_report=1e-3, k_max=8, seed=0)


def test_weights_source_and_orientation():
    assert gpt2_figs.weights_source().startswith("weights: gpt2_small_qk.npz")
    out = gpt2_figs.orientation(seed=0, layers=(0, 1))
    assert set(out) == {"gpt2_asym_min", "gpt2_asym_max", "gpt2_asym_mean"}
    assert 0.0 < out["gpt2_asym_min"] <= out["gpt2_asym_mean"] <= out["gpt2_asym_max"] < 2.0


def test_scale():
    nums = check_figure(gpt2_figs.scale(**SMALL), {
        "gpt2_scale_min", "gpt2_scale_max", "gpt2_scale_argmax", "gpt2_idratio_max",
        "gpt2_idratio_argmax", "gpt2_idratio_absmin", "gpt2_n_alpha_neg", "gpt2_alpha_neg_layers",
        "gpt2_idratio_ln_maxdiff", "gpt2_idratio_ln_max", "gpt2_ln_sign_changes"}, 2)
    assert isinstance(nums["gpt2_alpha_neg_layers"], Markdown)
    assert nums["gpt2_scale_argmax"] == 0


def test_spectra():
    check_figure(gpt2_figs.singular_values(**SMALL), {"gpt2_top_ratio_min", "gpt2_top_ratio_max"}, 1)
    check_figure(gpt2_figs.eigenvalues(**SMALL),
           {"gpt2_sym_skew_min", "gpt2_sym_skew_max", "gpt2_sym_skew_argmax"}, 1)


def test_fit_table_and_shares():
    out = gpt2_figs.fit_table(**SMALL)
    assert set(out) == {"gpt2_head_rank", "gpt2_layer_rank", "gpt2_fit_table"}
    assert out["gpt2_head_rank"] == gpt2.HEAD_DIM and out["gpt2_layer_rank"] == gpt2.P
    assert out["gpt2_fit_table"].data.count("\n") == 2  # header, rule, one layer
    names = {f"gpt2_share{k}_{m}" for k in (0, 1, 8, 64) for m in ("min", "max")}
    nums = check_figure(gpt2_figs.shares(**SMALL), names | {
        "gpt2_k50_min", "gpt2_k50_max", "gpt2_k50_shuf_min", "gpt2_n_hold", "gpt2_n_fail",
        "gpt2_n_layers", "gpt2_k50_range", "gpt2_share1_range", "gpt2_share8_range",
        "gpt2_share64_range", "gpt2_verdict"}, 2)
    # one layer: every range is a single value, and layer 0 is not identity plus low rank
    assert nums["gpt2_k50_range"].data == str(nums["gpt2_k50_min"])
    assert nums["gpt2_share8_range"].data == f"{nums['gpt2_share8_min']:.2f}"
    assert nums["gpt2_n_layers"] == 1 and nums["gpt2_n_hold"] == 0
    assert nums["gpt2_verdict"].holds is True
    assert nums["gpt2_verdict"].text == "no layer is identity plus low rank"


def test_span_and_count():
    assert gpt2_figs._span(0.0399, 0.03991, "+.4f") == "+0.0399"
    assert gpt2_figs._span(0.01, 0.02, ".2f") == "0.01 to 0.02"
    assert gpt2_figs._count(0, 1) == "no layer" and gpt2_figs._count(1, 1) == "the one layer"
    assert gpt2_figs._count(0, 12) == "none of the 12 layers"
    assert gpt2_figs._count(12, 12) == "all 12 layers" and gpt2_figs._count(5, 12) == "5 of 12 layers"


LAYER_ERRORS = {"gpt2_gamma_rep", "gpt2_n_tokens", "gpt2_trials", "gpt2_snrs", "gpt2_tau_att",
                "gpt2_tau_ridge", "gpt2_att_minus_ridge", "gpt2_aligned_minus_random",
                "gpt2_above_ridge", "gpt2_aligned_verdict", "gpt2_gap_table"}


def _paired(trials):
    """Attention (random mu) minus ridge and aligned minus random of layer 0 at g = 1e-3 (the
    first grid point), straight from the simulator at equal gamma / tau."""
    sm = gpt2.layer_summary(gpt2.paper_matrix(*gpt2.load_qk(0)), k_max=8, seed=[0, 0])
    M = gpt2.normalise(gpt2.paper_matrix(*gpt2.load_qk(0)))[0]
    mus = {"aligned": gpt2.aligned_direction(sm.fit, 2.0), "random": gpt2.random_direction(gpt2.P, 2.0, 0)}
    mats = {"real": M, "fit": sm.fit.low_rank(1)}
    mc = gpt2.simulate_matrices(mats, mus, "tanh", np.logspace(-3, 1, 2), n=192, trials=trials,
                                seed=0, relative=True)
    v = mc.values
    return (v["attention", "real", "random"][:, 0] - v["ridge", "random"][:, 0],
            v["attention", "real", "aligned"][:, 0] - v["attention", "real", "random"][:, 0])


def test_attention_with_the_real_weights_one_draw():
    """One draw decides nothing: the claims say so, the table has no standard errors, and the
    single-layer ranges print one value."""
    nums = check_figure(gpt2_figs.layer_errors(**MC, layers=(0,)), LAYER_ERRORS, 1)
    assert nums["gpt2_n_tokens"] == 192 and nums["gpt2_gamma_rep"] == pytest.approx(1e-3)
    d_ridge, d_align = _paired(1)
    assert nums["gpt2_att_minus_ridge"].data == (
        f"{d_ridge[0]:+.3f} (one draw per cell: not decided at this profile)")
    assert nums["gpt2_aligned_minus_random"].data.startswith(f"{d_align[0]:+.3f} (")
    claim = nums["gpt2_above_ridge"]
    assert claim.holds is None and claim.text == (
        "is not decided above ridge regression at this profile (one draw per layer)")
    assert nums["gpt2_aligned_verdict"].data.startswith("cannot be decided at this profile")
    assert "s.e." not in nums["gpt2_gap_table"].data
    assert " to " not in nums["gpt2_att_minus_ridge"].data  # one layer: one value


def test_attention_with_the_real_weights_three_draws():
    """Three paired draws: the claim is decided at the Student t threshold with 2 d.o.f."""
    nums = check_figure(gpt2_figs.layer_errors(**{**MC, "trials": 3}, layers=(0,)), LAYER_ERRORS, 1)
    d_ridge, _ = _paired(3)
    mean, se = d_ridge.mean(), d_ridge.std(ddof=1) / np.sqrt(3)
    k = threshold(3.0, 3)
    claim = nums["gpt2_above_ridge"]
    assert claim.holds == (True if mean > k * se else False if mean < -k * se else None)
    assert "2 d.o.f." in claim.evidence and f"{k:.3g} s.e." in claim.evidence
    assert f"standard error at most {se:.3f}, 3 draws" in nums["gpt2_att_minus_ridge"].data
    assert "its s.e." in nums["gpt2_gap_table"].data


def test_tokens_must_give_p():
    with pytest.raises(ValueError, match="c must give p"):
        gpt2_figs.layer_errors(**{**MC, "c": 1000.0}, layers=(0,))
