"""The figures of the chapter on random inputs at tiny sizes: numbers, axes and the hole theory."""

from __future__ import annotations

import numpy as np
import pytest
from IPython.display import Markdown

from attn_lib import Setting, theory
from attn_lib.book.figures import random_inputs as figs
from attn_lib.theory import marchenko_pastur as mp

from book_helpers import check_figure

pytestmark = pytest.mark.usefixtures("book_cache")

CLAIMS = ("linear_loses", "diagonal_kept_loses", "diagonal_helps", "nonlinearity_helps")


def test_random_inputs():
    fig = figs.random_inputs(n=16, n_c2=8, trials=2, seed=0)
    names = ["mu0_att_half", "mu0_ridge_half", "mu0_att_two", "mu0_ridge_two", "tanh_b2",
             "weights_drop_out", "trials"]
    names += [f"{k}{tag}" for tag in ("_half", "_two")
              for k in ("g_at", "lin_ridge_gap", "nonlin_gap", "dev", "nonlinearity_minor",
                        *CLAIMS, *(f"{c}_effect" for c in CLAIMS))]
    out = check_figure(fig, names, 2)
    # mu = 0: the weights drop out of the deterministic equivalent
    assert out["weights_drop_out"].holds is True
    # two paired draws decide nothing (Student t with one degree of freedom)
    assert all(out[f"{c}{tag}"].holds is None for c in CLAIMS for tag in ("_half", "_two"))
    assert out["linear_loses_effect_two"].endswith("(2 draws)")
    assert out["lin_ridge_gap_two"] > 0 and out["mu0_att_two"] > out["mu0_ridge_two"]


def test_spectrum():
    fig = figs.spectrum(n=64, n_c2=32, seed=0)
    out = check_figure(fig, ["spec_n_half", "spec_n_two"]
                       + [f"spec_{k}_{m}{t}" for k in ("draw", "de", "low")
                          for m in ("att", "ridge") for t in ("_half", "_two")], 4)
    # the error is the spectral integral: the draw's value is near the DE, and ridge interpolates
    # better (measured at n = 256/128: 0.657 against 0.655, 0.237 against 0.234)
    for t in ("_half", "_two"):
        assert out[f"spec_draw_att{t}"] > out[f"spec_draw_ridge{t}"]
        assert out[f"spec_de_att{t}"] > out[f"spec_de_ridge{t}"]
    # ridge's Marchenko-Pastur spectrum has no eigenvalue below 0.01 tau; attention's hole does
    assert out["spec_low_ridge_two"] == 0.0 < out["spec_low_att_two"]


def test_spectrum_integral_is_the_error():
    # E = int g^2 / (x + g)^2 d rho(x) with rho the Marchenko-Pastur law of S (ridge, x = l/c)
    c, g = 2.0, 0.1
    x = np.linspace(*mp.edges(c), 200001)[1:-1]
    integral = np.trapezoid(g ** 2 / (x + g) ** 2 * mp.density(x, c), x)
    assert integral == pytest.approx(float(theory.ridge_error(Setting(c=c), [c * g])[0]),
                                     rel=1e-4)


def test_hole_inside_the_bulk_iff_c_above_a_quarter():
    # the Marchenko-Pastur support of S = Z^T Z / p is [(1 - c^-1/2)^2, (1 + c^-1/2)^2]
    for c in (0.1, 0.2, 0.25, 0.3, 0.5, 2.0, 4.0):
        lo, hi = mp.edges(c)
        assert (lo < 1.0 < hi) == (c > 0.25)
    # and one draw agrees: at c = 0.2 no eigenvalue near 1, at c = 0.3 some
    rng = np.random.default_rng(0)
    for c, near in ((0.2, False), (0.3, True)):
        Z = rng.standard_normal((int(c * 1000), 1000))
        ev = np.linalg.eigvalsh(Z.T @ Z / Z.shape[0])
        assert (np.min(np.abs(ev - 1.0)) < 0.05) == near


def test_hole_theory():
    out = figs.hole_theory()
    assert isinstance(out["noise_table"], Markdown)
    assert len(out["noise_table"].data.splitlines()) == 2 + len(figs.NOISE_F)
    # linear f: E - (1 - c)^+ ~ sqrt(4 - 1/c)/4 gamma^(1/2) (measured 0.46771 at c = 2)
    assert out["rate_matches"].holds is True
    assert out["rate_coef_two"] == pytest.approx(np.sqrt(3.5) / 4)
    # tanh: the hole stays at c = 2 (slope 1/2) and is filled at c = 1/2 (slope 2)
    assert out["slope_tanh_two"] == pytest.approx(0.5, abs=0.01)
    assert out["slope_tanh_half"] == pytest.approx(2.0, abs=0.02)
    for name in ("noise_minor_above_one", "noise_helps_below_one", "attention_behind"):
        assert out[name].holds is True, out[name].evidence


def test_bad_input_names_the_parameter():
    with pytest.raises(TypeError, match="n_c2"):
        figs.spectrum(n=64, n_c2=32.0, seed=0)
