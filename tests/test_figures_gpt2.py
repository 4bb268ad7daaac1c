"""Figures of the GPT-2 chapter: each runs on one layer at a small n and returns its numbers."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib.book.figures import gpt2 as gpt2_figs
from attn_lib.studies import gpt2

from book_helpers import check_figure

pytestmark = pytest.mark.skipif(not gpt2.default_path().is_file(),
                                reason=f"GPT-2 weights not present at {gpt2.default_path()}")

SMALL = dict(k_max=8, seed=0, layers=(0,))
# c = 4: n = 192 tokens for p = 768; one trial, two gammas.
MC = dict(f="tanh", c=4.0, snrs=[2.0], detail_layers=[0], trials=1, n_gamma=2,
          gamma_report=1e-3, k_max=8, seed=0)


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    """One throw-away cache for the module (the layer summary is computed once)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTN_BOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.delenv(gpt2.ENV_VAR, raising=False)
        yield
    plt.close("all")


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
    check_figure(gpt2_figs.shares(**SMALL), names | {"gpt2_k50_min", "gpt2_k50_max", "gpt2_k50_shuf_min",
                                               "gpt2_n_hold", "gpt2_n_fail"}, 2)


def test_attention_with_the_real_weights():
    nums = check_figure(gpt2_figs.layer_errors(**MC, layers=(0,)),
                  {"gpt2_gamma_rep", "gpt2_n_tokens", "gpt2_trials", "gpt2_gap_table"}, 1)
    assert nums["gpt2_n_tokens"] == 192 and nums["gpt2_gamma_rep"] == pytest.approx(1e-3)
    nums = check_figure(gpt2_figs.theory_vs_simulation(**MC), {
        "gpt2_real_vs_fit_max", "gpt2_delta_max", "gpt2_fit_vs_theory_aligned",
        "gpt2_fit_vs_theory_random", "gpt2_delta_aligned", "gpt2_delta_random",
        "gpt2_detail_table", "gpt2_sign_aligned", "gpt2_sign_random"}, 1)
    assert nums["gpt2_detail_table"].data.splitlines()[0].startswith(
        "| layer | SNR | $\\mu$ | $E$, real $A$ (simulation) |")
    for key in ("aligned", "random"):  # one trial has no standard error: the sign is undecided
        claim = nums[f"gpt2_sign_{key}"]
        assert claim.holds is None and claim.text.startswith("cannot be judged")
        assert "resolved beyond 3 s.e. in 0 of 1" in claim.evidence
    out = gpt2_figs.takeaway(**MC, layers=(0,))
    assert set(out) == {"gpt2_gap_summary", "gpt2_gap_mean_first", "gpt2_gap_mean_last",
                        "gpt2_gap_min_all", "gpt2_verdict_table"}
    assert out["gpt2_gap_mean_first"] == out["gpt2_gap_mean_last"] == out["gpt2_gap_min_all"]


def test_tokens_must_give_p():
    with pytest.raises(ValueError, match="c must give p"):
        gpt2_figs.layer_errors(**{**MC, "c": 1000.0}, layers=(0,))
