"""attn_lib.book.against: theory against simulation of a setting over gamma, in one call."""

from __future__ import annotations

import numpy as np
import pytest

import attn_lib as al
from attn_lib.book.against import theory_vs_simulation

G = np.array([1e-2, 0.1, 1.0])


@pytest.mark.usefixtures("book_cache_off")
def test_the_figure_holds_the_calls_it_draws():
    s = al.Setting(c=0.5, snr=1.0, f="tanh", wk_norm=1.0, wq_norm=1.0)
    fig = theory_vs_simulation(s, G, n=256, trials=2, seed=1)
    nums = fig.numbers
    r = al.simulate.errors(s, G, n=256, trials=2, seed=1)
    np.testing.assert_array_equal(nums["attention_mc"], r.attention.mean)
    np.testing.assert_array_equal(nums["ridge_sem"], r.ridge.sem)
    np.testing.assert_array_equal(nums["limit"], al.theory.attention_error(s, G))
    np.testing.assert_array_equal(nums["finite_size"], al.theory.attention_error(s, G, n=256))
    np.testing.assert_array_equal(nums["ridge_theory"], al.theory.ridge_error(s, G))
    ax = fig.fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.get_lines()) >= 3
    labels = ax.get_legend_handles_labels()[1]
    assert "attention (finite-size theory, n = 256)" in labels and "ridge (theory)" in labels


@pytest.mark.usefixtures("book_cache_off")
def test_relative_heads_and_the_domain_warning_reach_the_caller():
    s = al.Setting(c=0.5, snr=1.0, f="relu")
    fig = theory_vs_simulation(s, G, n=256, trials=2, relative=True)
    np.testing.assert_array_equal(fig.numbers["ridge_theory"], al.theory.ridge_error(s, G, relative=True))
    assert fig.fig.axes[0].get_xlabel() == r"$\gamma/\tau$"
    rng = np.random.default_rng(0)
    B = rng.standard_normal((2, 16, 16))
    B /= (np.linalg.norm(B, axis=(1, 2)) / 4.0)[:, None, None]
    hs = al.HeadsSetting(c=0.5, heads=B, mu=np.zeros(16))
    assert theory_vs_simulation(hs, G, n=32, trials=2).numbers["finite_size"] is None
    with pytest.warns(al.DomainWarning, match="tail edge"):
        theory_vs_simulation(al.Setting(c=0.5, attention=al.Softmax(2.0)), G, n=256, trials=1,
                             finite_size=False)
