"""attn_lib.studies.convergence: power-law fits, bias/fluctuation summaries, resolution, a real run."""

from __future__ import annotations

import numpy as np
import pytest

from attn_lib import Setting
from attn_lib.studies import convergence as cv, sweeps

X = np.array([256.0, 512.0, 1024.0, 2048.0, 4096.0])


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_BOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------ power-law fit
def test_fit_recovers_an_exact_power_law_and_propagates_the_errors():
    v = 3.0 * X ** -0.7
    rel = 0.05  # the same relative error everywhere: s_i = 0.05 in log scale
    fit = cv.fit_power_law(X, v, rel * v)
    assert fit.slope == pytest.approx(-0.7, abs=1e-12)
    assert fit.log_amplitude == pytest.approx(np.log(3.0), abs=1e-10)
    assert fit.chi2 == pytest.approx(0.0, abs=1e-18)
    assert (fit.dof, fit.points) == (3, 5)
    # ordinary least squares with equal errors: se(slope) = s / sqrt(sum (log x - mean)^2)
    lx = np.log(X)
    assert fit.slope_se == pytest.approx(rel / np.sqrt(np.sum((lx - lx.mean()) ** 2)), rel=1e-10)
    np.testing.assert_allclose(fit(X), v, rtol=1e-10)
    # inverse: where the law reaches a value (3 x^-0.7 = 0.01 at x = 300^(1/0.7))
    assert fit.inverse(0.01) == pytest.approx(300.0 ** (1 / 0.7), rel=1e-10)
    with pytest.raises(ValueError, match="v must be in"):
        fit.inverse(0.0)
    flat = cv.fit_power_law(X, np.ones(5), 0.1 * np.ones(5))
    with pytest.raises(ValueError, match="slope 0"):
        flat.inverse(1.0)


def test_fit_weights_follow_the_standard_errors():
    # planted law with very unequal errors; multiplicative log-normal noise of exactly the
    # stated size, so the weighted fit is the best linear unbiased estimator and its propagated
    # error is exact
    rng = np.random.default_rng(7)
    slope, amp = -0.5, 0.2
    v0 = amp * X ** slope
    s_log = np.array([0.02, 0.05, 0.1, 0.2, 0.4])
    exact = cv.fit_power_law(X, v0, s_log * v0)
    reps = 2000
    slopes, ols = np.empty(reps), np.empty(reps)
    for r in range(reps):
        v = v0 * np.exp(s_log * rng.standard_normal(X.size))
        slopes[r] = cv.fit_power_law(X, v, s_log * v).slope
        ols[r] = np.polyfit(np.log(X), np.log(v), 1)[0]
    # the mean is within 4 standard errors of the mean (std / sqrt(reps)) of the planted slope
    assert abs(slopes.mean() - slope) < 4 * exact.slope_se / np.sqrt(reps)
    # the spread of the fitted slopes is the propagated error; the relative standard error of a
    # standard deviation from 2000 Gaussian samples is 1/sqrt(2 * 2000) = 1.6 %, so 5 % is ~3 se.
    # (Weights use the noisy v, a second-order effect at s_log <= 0.4.)
    assert slopes.std() == pytest.approx(exact.slope_se, rel=0.05)
    # weighting matters: the unweighted fit is visibly noisier on these data
    assert ols.std() > 1.5 * slopes.std()


def test_fit_inflates_the_error_when_the_scatter_exceeds_it():
    v = 2.0 * X ** -1.0 * np.exp(0.3 * np.array([1, -1, 1, -1, 1]))
    small = cv.fit_power_law(X, v, 0.01 * v)       # errors far below the scatter
    large = cv.fit_power_law(X, v, 10.0 * v)       # errors far above it: no inflation
    assert small.chi2 > small.dof
    base = large.slope_se * 0.01 / 10.0            # the propagated error scales with s
    assert small.slope_se == pytest.approx(base * np.sqrt(small.chi2 / small.dof), rel=1e-10)
    assert large.chi2 < large.dof
    assert small.slope == pytest.approx(large.slope, abs=1e-12)  # equal relative errors


def test_fit_uses_only_selected_points():
    v = 0.5 * X ** -1.0
    v_bad = v.copy()
    v_bad[[1, 3]] = [10.0, -1.0]  # garbage (even negative) where unused
    use = np.array([True, False, True, False, True])
    fit = cv.fit_power_law(X, v_bad, 0.1 * np.abs(v_bad), use=use)
    assert fit.slope == pytest.approx(-1.0, abs=1e-12)
    assert (fit.points, fit.dof) == (3, 1)
    two = cv.fit_power_law(X[:2], v[:2], 0.1 * v[:2])
    assert two.dof == 0 and two.slope == pytest.approx(-1.0, abs=1e-12)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(x=X, v=X[:4], se=X), ValueError, "same length"),
    (dict(x=X, v=-X, se=X), ValueError, "v must be finite and in"),
    (dict(x=X, v=X, se=0 * X), ValueError, "se must be finite"),
    (dict(x=-X, v=X, se=X), ValueError, "x must be finite"),
    (dict(x=X, v=X, se=X, use=np.array([1, 0, 0, 0, 0], bool)), ValueError, "at least two"),
    (dict(x=np.ones(3), v=np.ones(3), se=np.ones(3)), ValueError, "distinct x"),
    (dict(x=X, v=X, se=X, use=[1, 1, 1, 1, 1]), ValueError, "boolean"),
    (dict(x=np.ones((2, 2)), v=X, se=X), ValueError, "1-D"),
])
def test_fit_validation(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cv.fit_power_law(**kwargs)


# ------------------------------------------------------------------ summaries and resolution
def test_summarise_formulas():
    vals = [np.array([1.0, 2.0, 3.0, 6.0]), np.array([0.5, 0.7])]
    s = cv.series(vals, [100, 200], theory=2.0)
    np.testing.assert_array_equal(s.trials, [4, 2])
    np.testing.assert_allclose(s.bias, [1.0, -1.4])
    sd = np.array([np.std(vals[0], ddof=1), np.std(vals[1], ddof=1)])
    np.testing.assert_allclose(s.fluctuation, sd)
    np.testing.assert_allclose(s.bias_se, sd / np.sqrt([4, 2]))
    np.testing.assert_allclose(s.fluctuation_se, sd / np.sqrt([6, 2]))


def test_fluctuation_error_matches_the_spread_of_the_std_for_gaussian_draws():
    rng = np.random.default_rng(3)
    draws = rng.normal(0.0, 0.1, size=(4000, 20))
    stds = draws.std(axis=1, ddof=1)
    s = cv.series([draws[0], draws[1]], [10, 20], theory=0.0)
    # predicted se(s) = sigma / sqrt(2 (T - 1)) with sigma = 0.1; the empirical spread of 4000
    # stds has a 1.1 % relative standard error, and the formula's O(1/T) correction at T = 20 is
    # a further ~1-2 %: 6 % is a safe, still discriminating, tolerance (the ddof=0 or sqrt(T)
    # variants differ by >= 2.6 %, and dropping the factor 2 by 41 %)
    assert stds.std() == pytest.approx(0.1 / np.sqrt(2 * 19), rel=0.06)
    assert s.fluctuation_se[0] == pytest.approx(s.fluctuation[0] / np.sqrt(38))


def test_resolution_threshold_is_two_standard_errors():
    # two draws a -+ d: mean a, std(ddof=1) = d sqrt(2), se = d. Bias a - theory.
    d = 0.01

    def pair(b):
        return np.array([b - d, b + d])
    s = cv.series([pair(2.0 * d), pair(1.99 * d), pair(-2.5 * d), pair(0.0)],
                     [1, 2, 3, 4], theory=0.0)
    np.testing.assert_allclose(s.bias_se, d)
    np.testing.assert_array_equal(s.resolved, [True, False, True, False])
    np.testing.assert_allclose(s.bias_bound, np.abs(s.bias) + 2 * d)
    assert not s.same_sign and s.sign == 0
    assert s.bias_fit() is None  # resolved biases of both signs: no power law in |b|
    # constant draws: se = 0, never resolved
    s0 = cv.series([np.ones(3), np.ones(3) * 2], [1, 2], theory=0.0)
    assert not s0.resolved.any() and s0.sign == 0 and s0.bias_fit() is None


def test_bias_fit_uses_only_the_resolved_points():
    n = np.array([128, 256, 512, 1024, 2048])
    bias = -0.3 / n                        # planted slope -1, negative bias
    se = np.abs(bias) / 5.0                # resolved at 5 se ...
    se[[2, 4]] = np.abs(bias[[2, 4]])      # ... except two points at 1 se
    bias[2] *= 1.5                         # where the value is also off the power law
    vals = [np.array([b - e, b + e]) for b, e in zip(bias, se)]  # se of each pair is e
    s = cv.series(vals, n, theory=0.0)
    np.testing.assert_array_equal(s.resolved, [True, True, False, True, False])
    assert s.same_sign and s.sign == -1
    fit = s.bias_fit()
    assert fit.points == 3 and fit.slope == pytest.approx(-1.0, abs=1e-10)
    # the same fit against delta ~ n^(-1/2): slope +2
    assert s.bias_fit(1.0 / np.sqrt(n)).slope == pytest.approx(2.0, abs=1e-10)
    one = cv.series(vals[:2] + [np.array([0.0, 1.0])], n[:3], theory=0.0)
    assert one.resolved.sum() == 2 and one.bias_fit().points == 2
    flat = cv.series([np.array([1.0, 1.0]), np.array([0.5, 0.5])], [1, 2], theory=0.0)
    assert flat.fluctuation_fit() is None  # zero fluctuation everywhere: nothing to fit


@pytest.mark.parametrize("args, exc, match", [
    (([np.ones(2)], [1, 2], 0.0), ValueError, "one entry per n"),
    (([np.ones(2), np.ones(1)], [1, 2], 0.0), ValueError, "at least 2 draws"),
    (([np.ones(2), np.array([1.0, np.nan])], [1, 2], 0.0), ValueError, "finite"),
    (([np.ones(2), np.ones(2)], [2, 1], 0.0), ValueError, "strictly increasing"),
    (([np.ones(2)], [4], 0.0), ValueError, "at least two"),
    (([np.ones(2), np.ones(2)], [1, 2], np.inf), ValueError, "theory"),
    (([np.ones(2), np.ones(2)], 4, 0.0), TypeError, "sequence of integers"),
    (([np.ones(2), np.ones(2)], [1.0, 2.0], 0.0), TypeError, "n must be an integer"),
])
def test_summarise_validation(args, exc, match):
    with pytest.raises(exc, match=match):
        cv.series(*args)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(n=[32]), ValueError, "at least two"),
    (dict(n=[64, 32]), ValueError, "strictly increasing"),
    (dict(trials=1), ValueError, "trials must be an integer >= 2"),
    (dict(trials=[4, 4, 4]), ValueError, "one entry per n"),
    (dict(trials=[4, 1]), ValueError, "trials must be an integer >= 2"),
    (dict(gammas=[0.0]), ValueError, "gammas"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(settings=[]), ValueError, "settings must not be empty"),
    (dict(settings=["tanh"]), TypeError, "Setting"),
    (dict(use_cache=1), TypeError, "use_cache"),
])
def test_run_validation(kwargs, exc, match):
    args = dict(settings=[Setting(c=0.5)], n=[32, 64], trials=4, gammas=[1.0])
    with pytest.raises(exc, match=match):
        cv.run(**{**args, **kwargs})


# ------------------------------------------------------------------ a real (tiny) run
@pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")  # outside on purpose
def test_small_run_ridge_unbiased_and_coherent_shift_bias_negative(cache_env):
    settings = [Setting(c=0.5, snr=1.0), Setting(c=0.5, snr=4.0, wk_norm=2.0, wq_norm=2.0)]
    gammas = [0.1, 1.0]
    study = cv.run(settings, n=[32, 64], trials=[96, 64], gammas=gammas, seed=5)
    assert study.runs[0].values("ridge").shape == (2, 96, 2)
    np.testing.assert_allclose(study.delta(1), [20 / 4, 20 / np.sqrt(32)])
    np.testing.assert_allclose(study.theory["ridge"], sweeps.equivalents(settings, gammas, "ridge"))
    for k in range(2):
        r = study.series("ridge", 0, k)
        # Ridge: the DE has no linearisation step and its finite-n bias is O(1/n); measured with
        # 2000-4000 draws at c = 1/2, SNR 1 it is <= 0.006 at n = 32 and <= 0.004 at n = 64,
        # below one standard error here (se >= 0.006 with <= 96 draws of std >= 0.06), so the
        # bias must be within 3 standard errors of zero (a 0.3 % two-sided Gaussian tail).
        assert np.all(np.abs(r.bias) < 3 * r.bias_se), (k, r.bias, r.bias_se)
        a = study.series("attention", 1, k)
        # Aligned weights, delta = 5 and 3.5: the simulated attention error lies well below the
        # DE (chapter 3); -0.05 is half of what is seen at delta ~ 2 (n = 128) with tanh.
        assert a.resolved.all() and a.sign == -1 and np.all(a.bias < -0.05), a.bias
    # the series are the draws of the cached sweep, and a second run reads them from the cache
    again = cv.run(settings, n=[32, 64], trials=[96, 64], gammas=gammas, seed=5)
    np.testing.assert_array_equal(again.runs[1].attention, study.runs[1].attention)
    assert len(list(cache_env.rglob("*.npz"))) == 4  # one entry per setting and size
    s = study.series("attention", 0, 1)
    np.testing.assert_allclose(s.mean, [r.mean("attention")[0, 1] for r in study.runs])
    with pytest.raises(ValueError, match="model"):
        study.series("gap", 0, 0)
    with pytest.raises(ValueError, match="setting must be an index < 2"):
        study.series("ridge", 2, 0)
    with pytest.raises(ValueError, match="setting must be an index < 2"):
        study.delta(5)
    with pytest.raises(ValueError, match="gamma must be an index < 2"):
        study.series("ridge", 0, 2)
