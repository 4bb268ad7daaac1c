"""The shared plotting style: rcParams and the theory-versus-simulation helper."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from attn_lib.book import style


def test_use_sets_rcparams():
    style.use()
    assert matplotlib.rcParams["errorbar.capsize"] == 2.5
    assert matplotlib.rcParams["axes.grid"]


def test_theory_as_line_simulation_as_markers():
    style.use()
    fig, ax = plt.subplots()
    x = np.geomspace(1e-3, 1, 5)
    line, bars = style.plot_theory_vs_sim(ax, x, x ** 0.5, x ** 0.5, 0.1 * x, label="ridge")
    assert line.get_linestyle() == "-" and line.get_marker() in ("None", None, "")
    assert bars.has_yerr and bars.lines[0].get_linestyle() == "None"
    assert line.get_color() == bars.lines[0].get_color() == style.COLORS["ridge"]
    style.label_axes(ax, r"$\gamma$", r"$E(\gamma)$", logx=True, logy=True)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == r"$\gamma$"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["ridge (theory)", "ridge (simulation)"]
    plt.close(fig)
