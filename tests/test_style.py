"""The shared plotting style: rcParams and the theory-versus-simulation helper."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest

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


def test_shades_run_from_light_to_the_models_colour():
    light, mid, full = style.shades("attention", 3)
    assert full == style.COLORS["attention"]
    rgb = [np.array(matplotlib.colors.to_rgb(c)) for c in (light, mid, full)]
    assert np.all(rgb[0] >= rgb[1]) and np.all(rgb[1] >= rgb[2]) and np.any(rgb[0] > rgb[2])
    assert style.shades("ridge", 1) == [style.COLORS["ridge"]]
    with pytest.raises(ValueError, match="name"):
        style.shades("gpt2", 2)
    with pytest.raises(ValueError, match="k"):
        style.shades("ridge", 0)


def test_no_figure_module_borrows_another_models_colour():
    # one colour per model across chapters: chapters 5 and 7 draw attention settings in shades
    # of attention's colour, not in the colours of nonlinearities they do not use
    from attn_lib.book.figures import finite_size, gpt2

    assert gpt2._COL["random"] in style.shades("attention", 2)
    tanh = [finite_size._COLORS[k] for k in finite_size._NAMES if k != finite_size._COS]
    assert tanh == style.shades("attention", len(tanh))
    assert finite_size._COLORS[finite_size._COS] == style.COLORS["cos"]
