"""The figures and numbers of the nonlinearity-atlas chapter, at tiny sizes (cache in tmp_path)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib.book.figures import nonlinearity_atlas as figs

from book_helpers import check_figure

KW = dict(names=["tanh", "relu"], partners=["cos", "sign"], reflect=["relu"], n_sweep=1, n=24,
          trials=3, seed=0)
SETTINGS = ("random", "aligned", "orthogonal", "strong")


# the chapters' figures evaluate the theories outside their measured domain on purpose
pytestmark = [pytest.mark.usefixtures("book_cache"), pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")]


def test_overview():
    out = figs.overview(**KW)
    assert set(out) == ({"n_f", "n_tok", "p_tok", "n_trials", "gamma", "gamma_zero",
                         "gamma_linear", "t_quantile", "sign_de_gap"}
                        | {f"delta_{s}" for s in SETTINGS})
    assert (out["n_tok"], out["p_tok"], out["n_f"]) == (24, 48, 9)
    assert out["sign_de_gap"] < 1e-9
    # equal gamma / tau at c = 2, nu = 1: tau = 1 + a1^2 / 2 against ridge's tau = c = 2
    assert out["gamma_zero"] == pytest.approx(out["gamma"] / 2)
    assert out["gamma_linear"] == pytest.approx(out["gamma"] * 1.5 / 2)
    # the Student t quantile of 3 draws at the level of 3 normal standard errors
    assert out["t_quantile"] == pytest.approx(19.2, abs=0.1)


def test_atlas_is_at_equal_gamma_over_tau():
    A = figs._load(**KW)
    ratio = A.ratio
    assert A.gamma == 0.1 and A.gammas.shape == (9, 4)
    # the same gamma in every setting, and within every group of equal a1^2 / nu
    assert np.all(A.gammas == A.gammas[:, :1])
    np.testing.assert_allclose(A.gammas[:, 0], 0.1 * (1 + ratio / 2) / 2, rtol=1e-9)
    for idx in A.groups().values():
        assert np.ptp(A.gammas[idx]) < 1e-12 * A.gammas[idx].max()  # Hermite data to rounding


def test_the_chapter_needs_three_draws():
    with pytest.raises(ValueError, match="trials"):
        figs.overview(**{**KW, "trials": 2})


def test_gamma_choice():
    check_figure(figs.gamma_choice(), {f"contrast_{s}" for s in SETTINGS}, 4)


def test_tables():
    out = figs.tables(**KW)
    assert set(out) == ({"nu_err", "hermite_table", "errors_table", "errors_table_more",
                         "groups_table"} | {f"ridge_{s}" for s in SETTINGS})
    # the errors of the 2 named functions, the 7 others folded away
    for name, rows in (("hermite_table", 9), ("errors_table", 2), ("errors_table_more", 7),
                       ("groups_table", 3)):
        assert isinstance(out[name], Markdown)
        assert len(out[name].data.splitlines()) == 2 + rows, name
    assert out["hermite_table"].data.splitlines()[0] == (
        "| $f$ | kind | $a_1$ | $a_2$ | $a_1^2/\\nu$ |")


def test_error_ratio():
    check_figure(figs.error_ratio(**KW), {"random_monotone"} | {f"{k}_{s}" for s in SETTINGS
                                                             for k in ("r2", "de_range")}, 4)


def test_paired_deviations():
    names = {f"{k}_{w}" for w in ("small", "strong") for k in ("n_cells", "n_sig")}
    names |= {f"spread_{w}_{k}" for w in ("small", "strong") for k in ("median", "max")}
    names |= {"z_max", "sem_rel_small", "worst_small", "worst_small_z", "verdict_small",
              "dev_cos_strong", "dev_sign_strong", "dev_named_strong", "dev_min_strong",
              "dev_max_strong", "dev_min_label", "dev_max_label", "closest_kind",
              "pair_small", "pair_small_se", "pair_small_label"}
    check_figure(figs.paired_deviations(**KW), names, 4)


def test_shift_ladder():
    figure = figs.shift_ladder(**KW, n_ladder=[16, 24])
    check_figure(figure, {f"ladder_{k}" for k in ("n0", "n1", "d0", "d1", "spread0", "spread1",
                                               "q0", "q0_se", "q1", "q1_se", "verdict",
                                               "conclusion")}, 2)
    assert (figure.numbers["ladder_n0"], figure.numbers["ladder_n1"]) == (16, 24)
    # three draws per size: a finite jackknife standard error, tested at t with 2 d.o.f.
    verdict = figure.numbers["ladder_verdict"]
    assert not verdict.required and "2 d.o.f." in verdict.evidence
    assert np.isfinite([figure.numbers["ladder_q0_se"], figure.numbers["ladder_q1_se"]]).all()
    if verdict.holds is None:
        assert "not decided at this profile" in verdict.text
        assert "cannot tell" in figure.numbers["ladder_conclusion"].data


def test_finite_size():
    numbers = check_figure(figs.finite_size(**KW, n_ladder=[16, 24]),
                           {f"fs_r2_{s}" for s in SETTINGS}
                           | {"fs_r2_gain", "fs_within_r2", "fs_within_r2_se", "fs_spread_median",
                              "fs_spread_max", "fs_dev_max", "fs_dev_max_rel", "fs_dev_max_z",
                              "fs_dev_max_label", "fs_dev_median", "de_dev_median",
                              "fs_n_beyond", "fs_n_f", "fs_agrees", "fs_ladder_spread0",
                              "fs_ladder_spread1", "fs_ladder_dev_max", "fs_ladder_z_max",
                              "fs_cos_above", "fs_cos_dev", "fs_cos_dev_se", "fs_r2_gain_value",
                              "fs_r2_gain_se",
                              "fs_within_r2_aligned",
                              "fs_spread_aligned_median", "mc_spread_aligned_median"}, 2)
    assert numbers["fs_n_f"] == 9 and 0 <= numbers["fs_n_beyond"] <= 9
    # the gain is required, the others reported; all tested at t with 2 d.o.f. (3 draws)
    assert numbers["fs_r2_gain"].required and "2 d.o.f." in numbers["fs_r2_gain"].evidence
    assert not numbers["fs_agrees"].required and not numbers["fs_cos_above"].required
    assert "2 d.o.f." in numbers["fs_agrees"].evidence
    assert numbers["fs_spread_max"] >= numbers["fs_spread_median"] > 0
    assert 0 < numbers["fs_within_r2_se"] < np.inf
    # the sign convention: the evidence of "lies below" is the deviation MC / FS - 1 itself
    assert numbers["fs_cos_above"].evidence.startswith(f"difference {numbers['fs_cos_dev']:+.4g}")
    # at delta = 0 (random inputs) the finite-size theory is the DE: the same share explained
    A = figs._load(**KW, finite_size=True)
    assert numbers["fs_r2_random"] == pytest.approx(A.explained("limit")[0], rel=1e-6)


def test_jackknife():
    # the delete-one jackknife of the mean is the standard error of the mean
    x = np.random.default_rng(1).normal(size=(2, 7))
    q, se = figs._jackknife(lambda v: v[0].mean(), x)
    assert q == pytest.approx(x[0].mean()) and se == pytest.approx(x[0].std(ddof=1) / np.sqrt(7))
    with pytest.raises(ValueError, match="3 draws"):
        figs._jackknife(lambda v: v.mean(), x[:, :2])


def test_spread_statistic():
    rng = np.random.default_rng(0)
    # three functions with true deviations -10, 0, +10 (mean square 200/3) plus paired noise:
    # the noise-corrected statistic is unbiased, the naive mean square of the means is not
    true = np.array([-10.0, 0.0, 10.0])[:, None]
    est = [figs._spread_stat(true + rng.normal(0.0, 20.0, (3, 8))) for _ in range(2000)]
    assert np.mean(est) == pytest.approx(200 / 3, rel=0.1)  # s.e. of the mean ~ 2 %
    q, se = figs._spread_jackknife(true + rng.normal(0.0, 1.0, (3, 50)))
    assert q == pytest.approx(200 / 3, abs=5 * se) and 0 < se < 5


def test_equality_claim():
    verdict = figs.paired_deviations(**KW).numbers["verdict_small"]
    assert verdict.name == "verdict_small" and not verdict.required
    assert f"margin of {figs.EQUAL_MARGIN:.0f} %" in verdict.evidence
    assert "t with 2 d.o.f." in verdict.evidence
    plt.close("all")


def test_reflection():
    out = figs.reflection(**KW)
    assert set(out) == ({f"refl_{s}" for s in SETTINGS} | {f"refl_se_{s}" for s in SETTINGS}
                        | {"refl_small_worst", "refl_worst", "refl_worst_se", "refl_equal"})
    assert all(0 < out[f"refl_se_{s}"] < np.inf for s in SETTINGS)
    worst = out["refl_small_worst"].data
    assert worst in figs.SMALL and out["refl_worst"] == out[f"refl_{worst}"]
    assert "3 settings" in out["refl_equal"].evidence and not out["refl_equal"].required
