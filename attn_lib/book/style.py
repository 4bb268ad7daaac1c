"""One plotting style for every figure of the book.

Call :func:`use` once at the top of a notebook. Theory is drawn as lines
(:func:`plot_theory`), simulation as markers with error bars (:func:`plot_sim`);
:func:`plot_theory_vs_sim` draws both in one colour under one legend entry pair.

Colours are fixed per model so that attention and ridge regression look the same in every
chapter (see :data:`COLORS`); several settings of one model are drawn in shades of its colour
(:func:`shades`), never in the colour of another model or nonlinearity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

__all__ = ["COLORS", "use", "color", "shades", "plot_theory", "plot_sim", "plot_theory_vs_sim",
           "label_axes", "gap_map", "log_ticks"]

#: Fixed colours (seaborn "colorblind" palette) for the models and nonlinearities of the book.
COLORS: dict[str, str] = {
    "attention": "#0173b2",
    "ridge": "#de8f05",
    "linearised": "#029e73",
    "tanh": "#0173b2",
    "cos": "#d55e00",
    "relu": "#029e73",
    "sign": "#cc78bc",
    "sin": "#ca9161",
    "erf": "#fbafe4",
    "linear": "#949494",
    # the control of the random-input mechanism (chapters 2 and 3): linear f with the kernel's
    # diagonal kept ("linear" is linear f with the zero diagonal)
    "linear_diagonal": "#000000",
    "trunc_relu": "#ece133",
    "trunc_exp": "#56b4e9",
    "quadratic": "#5d3a9b",
}

_RC: dict[RcKeyType, Any] = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 100,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 9,
    "legend.frameon": True,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
    "errorbar.capsize": 2.5,
    "mathtext.fontset": "cm",
    "figure.constrained_layout.use": True,
}


def use(context: Literal["paper", "notebook", "talk", "poster"] = "notebook") -> None:
    """Apply the book's style: seaborn ``whitegrid`` + ``colorblind`` palette + :data:`_RC`.

    Parameters
    ----------
    context : str, default "notebook"
        A seaborn plotting context (``"paper"``, ``"notebook"``, ``"talk"``).
    """
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context=context, style="whitegrid", palette="colorblind")
    mpl.rcParams.update(_RC)


def color(name: str, default: str | None = None) -> str | None:
    """Colour of a model or nonlinearity name (``default`` when it has none)."""
    return COLORS.get(name, default)


def shades(name: str, k: int) -> list[str]:
    """``k`` shades of the colour of ``name`` (a key of :data:`COLORS`), light to full.

    Shade ``i`` mixes the colour with white in the proportion ``0.6 (k - 1 - i) / (k - 1)``, so
    the last is the colour itself; for several settings of one model (e.g. attention at
    growing alignment) in one figure.

    Raises
    ------
    ValueError
        If ``name`` has no colour or ``k < 1``.
    """
    from matplotlib.colors import to_hex, to_rgb

    from .._validation import check_int

    k = check_int(k, "k")
    if name not in COLORS:
        raise ValueError(f"name must be a key of COLORS, got {name!r}")
    base = np.array(to_rgb(COLORS[name]))
    mix = [0.6 * (k - 1 - i) / (k - 1) if k > 1 else 0.0 for i in range(k)]
    return [to_hex(tuple(base + w * (1.0 - base))) for w in mix]


def plot_theory(ax: Any, x: Any, y: Any, label: str | None = None, **kwargs: Any) -> Any:
    """Draw a theory curve as a solid line; returns the line."""
    kwargs.setdefault("linestyle", "-")
    kwargs.setdefault("zorder", 2)
    (line,) = ax.plot(np.asarray(x), np.asarray(y), label=label, **kwargs)
    return line


def plot_sim(ax: Any, x: Any, mean: Any, err: Any = None, label: str | None = None,
             **kwargs: Any) -> Any:
    """Draw Monte Carlo means as markers with error bars (``err``: half-width, e.g. one std)."""
    kwargs.setdefault("fmt", "o")
    kwargs.setdefault("markerfacecolor", "white")
    kwargs.setdefault("markeredgewidth", 1.4)
    kwargs.setdefault("elinewidth", 1.0)
    kwargs.setdefault("zorder", 3)
    yerr = None if err is None else np.asarray(err)
    return ax.errorbar(np.asarray(x), np.asarray(mean), yerr=yerr, label=label, **kwargs)


def plot_theory_vs_sim(ax: Any, x: Any, theory: Any, sim_mean: Any, sim_err: Any = None,
                       label: str = "", color: str | None = None, x_sim: Any = None,
                       fmt: str = "o") -> tuple[Any, ...]:
    """Theory (line) and simulation (markers ± error bars) of one model in one colour.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    x : array_like
        Abscissae of the theory curve (and of the simulation unless ``x_sim`` is given).
    theory : array_like
        Theory values at ``x``.
    sim_mean, sim_err : array_like
        Monte Carlo mean and error-bar half-width at ``x_sim`` (default ``x``).
    label : str
        Model name; the legend gets ``"<label> (theory)"`` and ``"<label> (simulation)"``.
        If it is a key of :data:`COLORS`, that colour is used unless ``color`` is given.
    color : str, optional
        Explicit colour.
    x_sim : array_like, optional
        Abscissae of the simulation when they differ from ``x``.
    fmt : str, default "o"
        Marker of the simulation.

    Returns
    -------
    (line, errorbar container)
    """
    c = color or COLORS.get(label)
    if c is None:
        c = ax._get_lines.get_next_color()
    line = plot_theory(ax, x, theory, label=f"{label} (theory)" if label else None, color=c)
    xs = x if x_sim is None else x_sim
    bars = plot_sim(ax, xs, sim_mean, sim_err, label=f"{label} (simulation)" if label else None,
                    color=c, fmt=fmt)
    return line, bars


def label_axes(ax: Any, xlabel: str, ylabel: str, title: str | None = None,
               logx: bool = False, logy: bool = False, legend: bool = True) -> None:
    """Set labels, optional log scales, title and legend in one call."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    from matplotlib.ticker import NullFormatter

    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # no overlapping minor labels
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    if title:
        ax.set_title(title)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend()


def gap_map(ax: Any, x: Any, y: Any, z: Any, *, vmin: float | None = None,
            vmax: float | None = None, shading: str = "auto", colorbar: str | None = None,
            **kwargs: Any) -> Any:
    """Heat map of a signed gap ``z`` (shape ``(len(y), len(x))``) with its zero contour.

    Blue is negative (attention better), red positive; the colour scale is centred on zero
    (:class:`matplotlib.colors.TwoSlopeNorm`) between ``vmin`` and ``vmax`` (default: the range
    of ``z``, widened to include zero by at least ``1e-6``). The zero level is drawn as a black
    line when ``z`` changes sign. With ``colorbar`` a colour bar with that label is added.

    Returns
    -------
    matplotlib.collections.QuadMesh
        The mesh (for a shared colour bar: ``fig.colorbar(mesh, ax=axes)``).
    """
    from matplotlib.colors import TwoSlopeNorm

    z = np.asarray(z, dtype=float)
    lo = min(float(z.min()), -1e-6) if vmin is None else vmin
    hi = max(float(z.max()), 1e-6) if vmax is None else vmax
    mesh = ax.pcolormesh(x, y, z, cmap="RdBu_r", shading=shading,
                         norm=TwoSlopeNorm(vcenter=0.0, vmin=lo, vmax=hi), **kwargs)
    if z.min() < 0 < z.max():
        ax.contour(x, y, z, levels=[0.0], colors="k", linewidths=1.5)
    if colorbar is not None:
        ax.figure.colorbar(mesh, ax=ax, label=colorbar)
    return mesh


def plain_ticks(axis: Any, ticks: Any, fmt: str = "%g") -> None:
    """Major ticks of a (log) ``axis`` at ``ticks``, labelled as plain numbers, no minor labels.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis``.
    ticks : sequence of float
        Tick positions.
    fmt : str, default "%g"
        :class:`matplotlib.ticker.FormatStrFormatter` format of the labels.
    """
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FormatStrFormatter(fmt))
    axis.set_minor_formatter(NullFormatter())


def log_ticks(axis: Any, fmt: str = "%.3g") -> None:
    """Labelled ticks at ``1, 2, 5 x 10^k`` on a log ``axis`` that spans less than two decades.

    A log axis over a narrow range has at most one major (decade) tick, and :func:`label_axes`
    hides the minor labels, so it would carry no number at all. Call after the data are drawn;
    an axis spanning two decades or more is left as it is.

    Parameters
    ----------
    axis : matplotlib.axis.Axis
        ``ax.xaxis`` or ``ax.yaxis`` of a log-scaled axes.
    fmt : str, default "%.3g"
        Format of the labels (:func:`plain_ticks`).
    """
    lo, hi = sorted(axis.get_view_interval())
    if lo <= 0 or hi / lo >= 100:
        return
    k0, k1 = int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi)))
    ticks = [m * 10.0 ** k for k in range(k0, k1 + 1) for m in (1, 2, 5) if lo <= m * 10.0 ** k <= hi]
    if len(ticks) < 2:  # less than a factor 2: label the ends
        ticks = [lo, hi]
    plain_ticks(axis, ticks, fmt)
