"""The first question about a setting, in one call: does the theory follow the simulation?

:func:`theory_vs_simulation` simulates a setting over a grid of ``gamma``
(:func:`attn_lib.simulation.simulate.errors`), evaluates the theories that apply to it (the
proportional limit and, where there is one, the finite-size theory at the same ``n``:
:func:`attn_lib.theory.attention_error`) and ridge regression on the same draws and in theory
(:func:`attn_lib.theory.ridge_error`), and draws them on one axis in the book's style
(:mod:`attn_lib.book.style`: theory as lines, simulation as markers with one standard error).
The theories warn where they leave their measured domain (:class:`~attn_lib.DomainWarning`,
:mod:`attn_lib.theory.domain`); the warnings reach the caller.

It lives in the book layer because it uses simulation, theory and the book's style.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_bool, check_gammas, check_int, check_seed, check_setting
from ..model.setting import HeadsSetting, Softmax
from ..simulation import simulate
from ..theory import attention_error, ridge_error
from . import style
from .page import Figure

__all__ = ["theory_vs_simulation"]


def theory_vs_simulation(setting: Any, gammas: object, n: int, *, trials: int = 4, seed: int = 0,
                         relative: bool = False, finite_size: bool = True, ax: Any = None
                         ) -> Figure:
    r"""Attention and ridge, theory against Monte Carlo, over ``gamma``: one figure.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        Any attention kind; the same ``gamma`` goes to the simulator and to the theory (under
        masked softmax the effective ``gamma``, :func:`attn_lib.simulation.simulate.raw_gammas`).
    gammas : array_like of shape (G,)
        Positive ridge parameters (drawn on a log axis).
    n : int
        Tokens of the simulation, and of the finite-size theory.
    trials : int, default 4
        Monte Carlo draws (error bars: one standard error of the mean).
    seed : int, default 0
    relative : bool, default False
        Equal ``gamma / tau``: ``gammas`` are ``g``, attention at ``tau_att g`` and ridge at
        ``c g`` (the book's fair comparison, :func:`attn_lib.model.scale.feature_scale`).
    finite_size : bool, default True
        Also the finite-size theory at ``n`` (not for a :class:`~attn_lib.HeadsSetting`, which
        has none).
    ax : matplotlib.axes.Axes, optional
        Where to draw; default a new figure of one axis.

    Returns
    -------
    attn_lib.book.page.Figure
        The figure and its numbers: ``gammas``, ``attention_mc`` and ``attention_sem``,
        ``ridge_mc`` and ``ridge_sem`` (shape ``(G,)``), ``limit``, ``finite_size`` (``None``
        where not computed), ``ridge_theory``, and ``n``, ``p``.
    """
    import matplotlib.pyplot as plt

    s = check_setting(setting, types=simulate.TYPES, attention=simulate.KINDS)
    g = np.atleast_1d(check_gammas(gammas))
    n, trials, seed = check_int(n, "n", low=2), check_int(trials, "trials"), check_seed(seed)
    relative, finite_size = check_bool(relative, "relative"), check_bool(finite_size, "finite_size")
    sim = simulate.errors(s, g, n=n, trials=trials, seed=seed, relative=relative)
    att = sim.stats("attention")
    unmasked = isinstance(s.attention, Softmax) and not s.attention.mask
    limit = None if unmasked else attention_error(s, g, relative=relative)
    fs = (attention_error(s, g, n=n, relative=relative)
          if finite_size and not unmasked and not isinstance(s, HeadsSetting) else None)
    ridge = ridge_error(s, g, relative=relative)
    if ax is None:
        style.use()
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
    else:
        fig = ax.figure
    att_c, ridge_c = style.color("attention"), style.color("ridge")
    style.plot_sim(ax, g, att.mean, att.sem, label="attention (simulation)",
                   color=att_c)
    if limit is not None:
        style.plot_theory(ax, g, limit, label="attention (limit theory)", color=att_c,
                          linestyle="--" if fs is not None else "-")
    if fs is not None:
        style.plot_theory(ax, g, fs, label=f"attention (finite-size theory, n = {n})", color=att_c)
    style.plot_theory_vs_sim(ax, g, ridge, sim.ridge.mean, sim.ridge.sem, label="ridge",
                             color=ridge_c, fmt="s")
    xlabel = r"$\gamma/\tau$" if relative else r"$\gamma$"
    style.label_axes(ax, xlabel, r"$E(\gamma)$", title=f"n = {n}, p = {sim.p}, {trials} draws",
                     logx=True)
    numbers = {"gammas": g, "attention_mc": att.mean, "attention_sem": att.sem,
               "ridge_mc": sim.ridge.mean, "ridge_sem": sim.ridge.sem, "limit": limit,
               "finite_size": fs, "ridge_theory": ridge, "n": n, "p": sim.p}
    return Figure(fig=fig, numbers=numbers)
