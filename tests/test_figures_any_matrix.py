"""Figures of the any-matrix chapter: each runs on one layer at a small n and returns its numbers."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from attn_lib import theory
from attn_lib.book.figures import any_matrix as any_matrix_figs
from attn_lib.studies import gpt2

from book_helpers import REPO, check_figure

pytestmark = [pytest.mark.skipif(not gpt2.default_path().is_file(),
                                 reason=f"GPT-2 weights not present at {gpt2.default_path()}"),
              pytest.mark.usefixtures("gpt2_module_cache")]


def _flat_theory(M, mu, c, nonlinearity, gammas, n=None):
    """Stands in for the any-matrix theory and its finite-size version (seconds at p = 768;
    tested in tests/test_matrix_theory.py and tests/test_rank_finite_size.py): 0.5 at every gamma."""
    return np.full(len(gammas), 0.5)


def test_real_matrix_theory(monkeypatch):
    """The section's numbers from its Monte Carlo and the theory, at n = 192, one layer, one gamma."""
    monkeypatch.setattr(gpt2, "matrix_theory", _flat_theory)
    kw = dict(f="tanh", c=4.0, snr=2.0, theory_layers=[0], theory_gammas=[1e-3], theory_trials=2,
              k_max=64, seed=0)
    nums = check_figure(any_matrix_figs.real_matrix_theory(**kw), {
        "gpt2_mt_n_layers", "gpt2_mt_layers", "gpt2_mt_n_tokens", "gpt2_mt_trials", "gpt2_mt_snr",
        "gpt2_mt_gammas", "gpt2_mt_sem_max", "gpt2_mt_random_median", "gpt2_mt_random_max",
        "gpt2_mt_random_n01", "gpt2_mt_rank_median", "gpt2_mt_rank_min", "gpt2_mt_rank_n01",
        "gpt2_mt_aligned_min", "gpt2_mt_aligned_max", "gpt2_mt_delta_min", "gpt2_mt_delta_max",
        "gpt2_mt_random_within", "gpt2_mt_random_closer", "gpt2_mt_aligned_above",
        "gpt2_mt_aligned_grows", "gpt2_mt_table", "gpt2_mt_closer_n", "gpt2_mt_closer_total",
        "gpt2_mt_random_closer_layers", "gpt2_mt_fs_min", "gpt2_mt_fs_max", "gpt2_mt_fs_n01",
        "gpt2_mt_fs_within", "gpt2_mt_c", "gpt2_mt_aligned_range", "gpt2_mt_fs_range",
        "gpt2_mt_delta_range", "gpt2_mt_random_n01_text", "gpt2_mt_fs_n01_text",
        "gpt2_mt_rank_n01_text", "gpt2_mt_random_miss"}, 2)
    fit = gpt2.layer_summary(gpt2.paper_matrix(*gpt2.load_qk(0)), k_max=64, seed=[0, 0])
    M = gpt2.normalise(gpt2.paper_matrix(*gpt2.load_qk(0)))[0]
    mus = {"random": gpt2.random_direction(gpt2.P, 2.0, 0), "aligned": gpt2.aligned_direction(fit.fit, 2.0)}
    mc = gpt2.simulate_matrices({"real": M}, mus, "tanh", [1e-3], n=192, trials=2, seed=0)
    rand, alig = mc.attention["real"]["random"], mc.attention["real"]["aligned"]
    assert nums["gpt2_mt_random_max"] == pytest.approx(abs(0.5 - rand.mean[0]), rel=1e-12)
    assert nums["gpt2_mt_aligned_max"] == pytest.approx(0.5 - alig.mean[0], rel=1e-12)
    assert nums["gpt2_mt_fs_max"] == pytest.approx(0.5 - alig.mean[0], rel=1e-12)
    assert nums["gpt2_mt_fs_n01"] == int(abs(0.5 - alig.mean[0]) <= 0.01)
    assert not nums["gpt2_mt_fs_within"].required
    assert nums["gpt2_mt_random_n01"] == int(abs(0.5 - rand.mean[0]) <= 0.01)
    assert nums["gpt2_mt_delta_max"] == pytest.approx(abs(mus["aligned"] @ M @ mus["aligned"]) / np.sqrt(gpt2.P))
    assert nums["gpt2_mt_table"].data.count("\n") == 3  # header, rule, two directions
    assert nums["gpt2_mt_aligned_grows"].holds is None  # one layer: nothing to compare
    assert "of 1 (layer, gamma) points" in nums["gpt2_mt_random_within"].evidence
    assert nums["gpt2_mt_closer_total"] == 3 and not nums["gpt2_mt_random_closer"].required
    # one layer and one gamma: ranges are single values, counts say "the one layer" / "no layer"
    assert nums["gpt2_mt_fs_range"].data == f"{0.5 - alig.mean[0]:+.4f}"
    assert nums["gpt2_mt_random_miss"].data == f"is {abs(0.5 - rand.mean[0]):.4f}"
    assert nums["gpt2_mt_random_n01_text"].data in ("the one layer", "no layer")
    # two draws: Student t with 1 d.o.f., far beyond 3 s.e.
    assert "t with 1 d.o.f." in nums["gpt2_mt_random_within"].evidence


def test_multi_head():
    """The multi-head section at n = 192, one layer, three draws: its numbers are the paired
    differences of the simulator's own runs (per-head tanh and softmax on the same draws)."""
    kw = dict(f="tanh", c=4.0, snr=2.0, head_layers=[0], head_gammas=[1e-3, 1.0], head_trials=3,
              k_max=64, seed=0)
    nums = check_figure(any_matrix_figs.multi_head(**kw), {
        "gpt2_mh_layers", "gpt2_mh_n_layers", "gpt2_mh_n_tokens", "gpt2_mh_trials", "gpt2_mh_snr",
        "gpt2_mh_gammas", "gpt2_mh_sem_max", "gpt2_mh_sigma_min", "gpt2_mh_sigma_max",
        "gpt2_mh_unit_minus_summed_min", "gpt2_mh_unit_minus_summed_max",
        "gpt2_mh_softmax_minus_summed_min", "gpt2_mh_softmax_minus_summed_max",
        "gpt2_mh_unit_lower", "gpt2_mh_softmax_differs", "gpt2_mh_above_ridge", "gpt2_mh_table",
        "gpt2_mh_unit_minus_summed_range", "gpt2_mh_softmax_minus_summed_range",
        "gpt2_mh_sigma_range"}, 4)
    W_Q, W_K = gpt2.load_qk(0)
    A, _ = gpt2.normalise(gpt2.paper_matrix(W_Q, W_K))
    mus = {"random": gpt2.random_direction(gpt2.P, 2.0, 0)}
    mats = {"summed": A, "heads/unit": gpt2.heads(W_Q, W_K, "unit")}
    mc = gpt2.simulate_matrices(mats, mus, "tanh", [1e-3, 1.0], n=192, trials=3, seed=0,
                                relative=True)
    diff = (mc.values["attention", "heads/unit", "random"]
            - mc.values["attention", "summed", "random"]).mean(axis=0)
    assert nums["gpt2_mh_unit_minus_summed_min"] == pytest.approx(diff.min(), rel=1e-12)
    assert nums["gpt2_mh_unit_minus_summed_max"] == pytest.approx(diff.max(), rel=1e-12)
    sigma = np.linalg.norm(gpt2.heads(W_Q, W_K, "gpt2"), axis=(1, 2)) / np.sqrt(gpt2.P)
    assert nums["gpt2_mh_sigma_max"] == pytest.approx(sigma.max())
    # GPT-2's 1/8 on N(0, I) tokens: logits far beyond tanh's linear range
    assert nums["gpt2_mh_sigma_min"] > 5.0
    # header, rule, 2 directions x 5 models
    assert nums["gpt2_mh_table"].data.count("\n") == 11
    assert "(layer, direction) pairs" in nums["gpt2_mh_softmax_differs"].evidence
    assert "2 d.o.f." in nums["gpt2_mh_unit_lower"].evidence  # three paired draws


def _flat_heads_theory(W_Q, W_K, mu, c, nonlinearity, gammas, scale="unit"):
    """Stands in for the multi-head theory (a minute at p = 768; tested in
    tests/test_heads_theory.py): 0.4 at every gamma."""
    return np.full(len(gammas), 0.4)


def _flat_heads_shift(W_Q, W_K, mu, c, nonlinearity, gammas, scale, n):
    """Stands in for the heads' finite-size shift (seconds at p = 768; tested in
    tests/test_heads_theory.py): -0.01 at every gamma."""
    return np.full(len(gammas), -0.01)


def test_multi_head_theory(monkeypatch):
    """The per-head theory section from its Monte Carlo and the (stand-in) theories, at n = 192."""
    monkeypatch.setattr(gpt2, "heads_theory", _flat_heads_theory)
    monkeypatch.setattr(gpt2, "heads_shift", _flat_heads_shift)
    monkeypatch.setattr(gpt2, "matrix_theory", _flat_theory)
    kw = dict(f="tanh", c=4.0, snr=2.0, head_layers=[0], theory_gammas=[1e-3, 1.0], theory_trials=2,
              k_max=64, seed=0)
    cases = ("unit_random", "unit_aligned", "gpt2_random")
    nums = check_figure(any_matrix_figs.multi_head_theory(**kw), {
        "gpt2_mht_trials", "gpt2_mht_sem_max", "gpt2_mht_summed_min", "gpt2_mht_random_within",
        "gpt2_mht_closer", "gpt2_mht_aligned_above", "gpt2_mht_fs_within", "gpt2_mht_fs_centred",
        "gpt2_mht_table"} | {
        f"gpt2_mht_{fs}{c}_{s}" for fs in ("", "fs_") for c in cases
        for s in ("min", "max", "median", "n01", "range", "n01_text")}, 6)
    W_Q, W_K = gpt2.load_qk(0)
    mu = gpt2.random_direction(gpt2.P, 2.0, 0)
    mc = gpt2.simulate_matrices({"unit": gpt2.heads(W_Q, W_K, "unit")}, {"random": mu}, "tanh",
                                [1e-3, 1.0], n=192, trials=2, seed=0)
    d = 0.4 - mc.attention["unit"]["random"].mean
    assert nums["gpt2_mht_unit_random_min"] == pytest.approx(d.min(), rel=1e-12)
    assert nums["gpt2_mht_unit_random_max"] == pytest.approx(d.max(), rel=1e-12)
    # the finite-size theory: the limit plus the shift
    assert nums["gpt2_mht_fs_unit_random_min"] == pytest.approx(d.min() - 0.01, rel=1e-12)
    assert not nums["gpt2_mht_fs_within"].required and not nums["gpt2_mht_fs_centred"].required
    # the summed-logit stand-in (0.5) against the same per-head Monte Carlo
    assert nums["gpt2_mht_summed_min"] == pytest.approx(np.abs(0.5 - mc.attention["unit"]["random"].mean).min())
    assert "of 4 (scale, layer, gamma) points" in nums["gpt2_mht_random_within"].evidence
    assert not nums["gpt2_mht_random_within"].required
    assert nums["gpt2_mht_table"].data.count("\n") == 4  # header, rule, three cases


MC = dict(f="tanh", c=4.0, snrs=[2.0], detail_layers=[0], trials=1, n_gamma=2,
          gamma_report=1e-3, k_max=8, seed=0)


def test_theory_vs_simulation():
    """The fitted caricature at n = 192, one layer, one draw: the theory at g times the fit's
    measured tau, and the sign claims undecided (one draw decides nothing)."""
    nums = check_figure(any_matrix_figs.theory_vs_simulation(**MC), {
        "gpt2_real_vs_fit_max", "gpt2_delta_max", "gpt2_fit_vs_theory_aligned",
        "gpt2_fit_vs_theory_random", "gpt2_delta_aligned", "gpt2_delta_random",
        "gpt2_detail_table", "gpt2_sign_aligned", "gpt2_sign_random", "gpt2_fit_layers",
        "gpt2_fit_trials", "gpt2_gamma_rep"}, 1)
    assert nums["gpt2_detail_table"].data.splitlines()[0].startswith(
        "| layer | SNR | $\\mu$ | $E$, real $A$ (simulation) |")
    for key in ("aligned", "random"):
        claim = nums[f"gpt2_sign_{key}"]
        assert claim.holds is None and claim.text.startswith("is not decided at this profile")
        assert "in 0 of 1 (layer, SNR) cells" in claim.evidence
    # the theory of the fit at gamma = g tau_fit against the fit's Monte Carlo (random mu)
    sm = gpt2.layer_summary(gpt2.paper_matrix(*gpt2.load_qk(0)), k_max=8, seed=[0, 0])
    mus = {"aligned": gpt2.aligned_direction(sm.fit, 2.0), "random": gpt2.random_direction(gpt2.P, 2.0, 0)}
    M = gpt2.normalise(gpt2.paper_matrix(*gpt2.load_qk(0)))[0]
    mc = gpt2.simulate_matrices({"real": M, "fit": sm.fit.low_rank(1)}, mus, "tanh",
                                np.logspace(-3, 1, 2), n=192, trials=1, seed=0, relative=True)
    tau = mc.values["scale", "fit", "random"].mean()
    th = theory.attention_error(gpt2.fit_setting(sm.fit, mus["random"], 4.0, "tanh"), [1e-3 * tau])
    assert nums["gpt2_fit_vs_theory_random"] == pytest.approx(
        abs(mc.values["attention", "fit", "random"][0, 0] - th[0]), rel=1e-9)


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_fit_section_runs_chapter_6s_monte_carlo(profile):
    """The fitted caricature reads chapter 6's cached Monte Carlo: the same arguments."""
    params = yaml.safe_load((REPO / "book" / "params" / f"{profile}.yaml").read_text())
    for key in ("f", "c", "snrs", "detail_layers", "trials", "n_gamma", "gamma_report", "k_max", "seed"):
        assert params["any_matrix"][key] == params["gpt2"][key], key
