r"""The theory explorer page: a standalone Bokeh HTML file that looks curves up in a precomputed grid.

:func:`write` computes (through the result cache) the grid of
:func:`attn_lib.studies.explorer.cached_grid` and a few Monte Carlo checks
(:func:`attn_lib.studies.explorer.monte_carlo`), and writes one HTML file with BokehJS inlined
(``bokeh.embed.file_html(..., resources=INLINE)``): it opens from ``file://`` with no network
and no kernel. The book shows it in an ``<iframe>`` of ``book/explorer.md``; the build
(``scripts/build_book.py``) writes it with the profile's ``explorer`` parameters.

The page holds the whole grid in one :class:`bokeh.models.ColumnDataSource` (float64 arrays,
inlined as binary) and one :class:`bokeh.models.CustomJS` callback, run when the page is ready
and whenever a control moves: it finds the grid point of the controls, copies its curves into
the plotted source ``"curves"`` and its Monte Carlo checks into ``"checks"``, and rewrites the
note under the controls (the coherent shift at each ``n``, how far the finite-size curves are
from the limit, and so which of the two applies at that ``n``: the limit within :data:`AGREE`). Nothing is computed in the browser but the difference attention minus ridge.

Plotted columns of ``"curves"`` (all against ``g = gamma / tau``): ``attention`` (the
proportional limit), ``ridge``, ``gap`` (``attention - ridge``), and for each ``n`` of the grid
(index ``i``) ``finite_<i>`` and ``gap_finite_<i>``. Columns of ``"checks"``: ``g``, and for
``attention``, ``ridge`` and ``gap`` (paired per draw) the mean and the ends ``_lo`` and
``_hi`` of its error bar, one standard error either side (the book's convention).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from .._validation import check_int, check_real, check_seed
from ..simulation.trials import standard_error
from ..studies import explorer
from .style import COLORS

if TYPE_CHECKING:
    from bokeh.document import Document
    from bokeh.models.renderers.glyph_renderer import GlyphRenderer
    from bokeh.models.sources import DataDict  # a type alias of the stub only
    from bokeh.models.widgets import Select, Slider

__all__ = ["AGREE", "LABELS", "document", "checks", "write"]

#: Names of the controls (Bokeh models, ``name=``), one per axis of the grid.
CONTROLS = {"f": "nonlinearity", "c": "c", "snr": "SNR", "alignment": "alignment",
            "norm": "weight norm"}
#: How the page names a nonlinearity of the grid.
LABELS = {"tanh": "tanh", "relu": "ReLU", "sign": "sign", "cos": "cos"}
_DASHES = ("dashed", "dotted", "dashdot")
#: Where the finite-size curve at ``n`` stays this close to the limit over the plotted range,
#: the page says that the limit applies at that ``n``; otherwise it points to the finite-size
#: curve (the accuracy the book asks of its theories against Monte Carlo).
AGREE = 0.01


def _label(f: str) -> str:
    if f.startswith(explorer.SOFTMAX):
        return f"softmax, β = {float(f[len(explorer.SOFTMAX):]):g}"
    return LABELS.get(f, f)


def _evenly_spaced(values: np.ndarray) -> bool:
    if values.size < 2:
        return False
    steps = np.diff(values)
    return bool(np.allclose(steps, steps[0], rtol=1e-9, atol=0.0))


def _control(axis: str, values: Sequence[Any], initial: Any) -> Select | Slider:
    """A ``Select`` (``f``, and an axis that is not evenly spaced) or a ``Slider`` for one axis."""
    from bokeh.models.widgets import Select, Slider

    title = CONTROLS[axis]
    options: list[str | tuple[Any, str]]
    if axis == "f":
        options = [(f, _label(f)) for f in values]
        return Select(title=title, name=axis, value=initial, sizing_mode="stretch_width",
                      options=options)
    arr = np.asarray(values, dtype=float)
    if _evenly_spaced(arr):
        return Slider(title=title, name=axis, start=float(arr[0]), end=float(arr[-1]),
                      step=float(arr[1] - arr[0]), value=float(initial),
                      sizing_mode="stretch_width", margin=(5, 15, 5, 10))
    options = [f"{v:g}" for v in arr]
    return Select(title=title, name=axis, value=f"{float(initial):g}", options=options,
                  sizing_mode="stretch_width")


def checks(mc: explorer.MonteCarlo) -> dict[str, np.ndarray]:
    """Means and error bars of :func:`~attn_lib.studies.explorer.monte_carlo`'s draws.

    The book's error bars: the mean over draws plus or minus one standard error of the mean
    (:func:`attn_lib.simulation.trials.standard_error`).

    Returns
    -------
    dict
        For ``attention``, ``ridge`` and ``gap`` (attention minus ridge, paired per draw): the
        mean over draws ``(P, G)`` and the ends ``<name>_lo``, ``<name>_hi`` of
        ``mean -+ s.e.``.
    """
    if mc["attention"].shape[1] < 2:
        raise ValueError(f"mc_trials must be at least 2 for an error bar, got "
                         f"{mc['attention'].shape[1]}")
    out: dict[str, np.ndarray] = {}
    for name, v in (("attention", mc["attention"]), ("ridge", mc["ridge"]),
                    ("gap", mc["attention"] - mc["ridge"])):
        mean, se = v.mean(axis=1), standard_error(v, axis=1)
        out.update({name: mean, f"{name}_lo": mean - se, f"{name}_hi": mean + se})
    return out


_CALLBACK = r"""
const meta = JSON.parse(meta_json);
const controls = {f: w_f, c: w_c, snr: w_snr, alignment: w_alignment, norm: w_norm};
const axes = meta.axes, shape = meta.shape, G = meta.g.length, N = meta.n.length;
function position(axis) {
  const w = controls[axis], values = axes[axis];
  if (axis === "f") return values.indexOf(w.value);
  const v = Number(w.value);
  let best = 0;
  for (let i = 1; i < values.length; i++)
    if (Math.abs(values[i] - v) < Math.abs(values[best] - v)) best = i;
  return best;
}
const at = meta.order.map(position);
let flat = 0;
for (let k = 0; k < at.length; k++) flat = flat * shape[k] + at[k];
const ridge_at = at[1] * shape[2] + at[2];           // (c, snr)
const shift_at = ((at[1] * shape[2] + at[2]) * shape[3] + at[3]) * shape[4] + at[4];
const part = (column, i) => Array.from(column.slice(i * G, (i + 1) * G));
const att = part(grid.data.attention, flat), ridge = part(ridges.data.ridge, ridge_at);
const data = {g: meta.g, attention: att, ridge: ridge, gap: att.map((a, j) => a - ridge[j])};
const notes = [];
for (let i = 0; i < N; i++) {
  const fin = part(grid.data["finite_" + i], flat);
  data["finite_" + i] = fin;
  data["gap_finite_" + i] = fin.map((a, j) => a - ridge[j]);
  const delta = meta.delta[i * meta.shifts + shift_at];
  let text = "n = " + meta.n[i] + ": δ = " + delta.toFixed(3);
  if (meta.covered[i * meta.points + flat]) {
    const off = Math.max(...fin.map((a, j) => Math.abs(a - att[j])));
    text += ", finite size − limit up to " + off.toFixed(3) + (off <= meta.agree
      ? " ≤ " + meta.agree + ": the limit applies at this n"
      : " > " + meta.agree + ": read the finite-size curve at this n");
  } else {
    text += ", the finite-size theory does not cover this setting (2β‖M_r‖/√p ≥ 1)";
  }
  notes.push(text);
}
curves.data = data;
const rows = meta.checks.indexOf(flat), shown = {g: []};
for (const name of meta.check_columns) shown[name] = [];
if (rows >= 0) {
  const K = meta.check_g.length;
  for (let j = 0; j < K; j++) {
    shown.g.push(meta.check_g[j]);
    for (const name of meta.check_columns) shown[name].push(observed.data[name][rows * K + j]);
  }
}
checks.data = shown;
note.text = "<b>Coherent shift and finite size.</b> "
  + (N ? notes.join("; ") + "." : "No finite-size curve in this grid.")
  + (rows >= 0 ? " <b>Monte Carlo</b> (markers: mean ± one standard error): " + meta.check_text + "."
               : " No Monte Carlo check at this setting (checked settings: " + meta.check_list + ").");
"""


def document(grid: explorer.Grid, mc: explorer.MonteCarlo | None, mc_points: Sequence[int],
             initial: Sequence[int], profile: str) -> Document:
    """The Bokeh document of the explorer.

    Parameters
    ----------
    grid : dict
        :func:`attn_lib.studies.explorer.grid`'s result.
    mc : dict or None
        :func:`attn_lib.studies.explorer.monte_carlo`'s result at the grid points ``mc_points``.
    mc_points : sequence of int
        Flat indices (C order over :data:`attn_lib.studies.explorer.AXES`) of the checked points.
    initial : sequence of int
        Index along each axis of the point shown first.
    profile : str
        The book profile the grid was computed with (stated on the page).

    Returns
    -------
    bokeh.document.Document
    """
    from bokeh.document import Document
    from bokeh.events import DocumentReady
    from bokeh.layouts import column, row
    from bokeh.models import ColumnDataSource, CustomJS, DataRange1d, Range1d
    from bokeh.models.annotations import Legend, Span
    from bokeh.models.widgets import Div
    from bokeh.plotting import figure

    labels = list(grid["f"])
    values: dict[str, list[float]] = {a: [float(v) for v in grid[a]] for a in explorer.AXES[1:]}
    axes: dict[str, list[str] | list[float]] = {"f": labels, **values}
    shape = [len(axes[a]) for a in explorer.AXES]
    g = np.asarray(grid["g"], dtype=float)
    ns = [int(k) for k in grid["n"]]
    G, points = g.size, int(np.prod(shape))
    store: DataDict = {"attention": np.ascontiguousarray(grid["attention"], dtype=float).reshape(-1)}
    for i in range(len(ns)):
        store[f"finite_{i}"] = np.ascontiguousarray(grid["finite"][i], dtype=float).reshape(-1)
    source = ColumnDataSource(store, name="grid")
    ridges = ColumnDataSource({"ridge": np.asarray(grid["ridge"], dtype=float).reshape(-1)},
                              name="ridges")
    columns = ["attention", "ridge", "gap"]
    check_columns = [f"{m}{s}" for m in columns for s in ("", "_lo", "_hi")]
    if mc is not None:
        summary = checks(mc)
        observed = ColumnDataSource({k: summary[k].reshape(-1) for k in check_columns},
                                    name="observed")
        check_g = [float(v) for v in mc["g"]]
        check_text = f"n = {int(mc['n'])}, {int(mc['trials'])} draws"
    else:
        observed = ColumnDataSource({k: [] for k in check_columns}, name="observed")
        check_g, check_text = [], ""
    curves = ColumnDataSource({k: [] for k in ["g", "attention", "ridge", "gap"]
                               + [f"{p}finite_{i}" for p in ("", "gap_") for i in range(len(ns))]},
                              name="curves")
    shown = ColumnDataSource({k: [] for k in ["g"] + check_columns}, name="checks")

    def describe(flat: int) -> str:
        i, *idx = np.unravel_index(flat, shape)
        c, snr, a, w = (values[ax][k] for ax, k in zip(explorer.AXES[1:], idx))
        return f"{_label(labels[i])}, c = {c:g}, SNR = {snr:g}, alignment {a:g}, norm {w:g}"

    controls = {a: _control(a, axes[a], axes[a][i]) for a, i in zip(explorer.AXES, initial)}
    note = Div(name="note", sizing_mode="stretch_width")
    delta = np.asarray(grid["delta"], dtype=float)
    meta = {"profile": profile, "axes": axes, "order": list(explorer.AXES), "shape": shape,
            "g": g.tolist(), "n": ns, "agree": AGREE,
            "delta": delta.reshape(-1).tolist(), "shifts": int(np.prod(shape[1:])),
            "covered": np.asarray(grid["covered"], dtype=bool).reshape(-1).astype(int).tolist(),
            "points": points, "checks": [int(p) for p in mc_points], "check_g": check_g,
            "check_columns": check_columns, "check_text": check_text,
            "check_list": "; ".join(describe(int(p)) for p in mc_points) or "none"}
    callback = CustomJS(args=dict(grid=source, ridges=ridges, curves=curves, observed=observed,
                                  checks=shown, note=note, meta_json=json.dumps(meta),
                                  **{f"w_{a}": w for a, w in controls.items()}),
                        code=_CALLBACK, name="explorer")
    for w in controls.values():
        w.js_on_change("value", callback)

    pad = (g[-1] / g[0]) ** 0.03  # room for the markers at the ends
    x_range = Range1d(start=float(g[0] / pad), end=float(g[-1] * pad))
    panel = functools.partial(figure, sizing_mode="stretch_width", x_axis_type="log",
                              x_range=x_range, toolbar_location="above",
                              tools="pan,box_zoom,wheel_zoom,reset,save", x_axis_label="γ / τ")
    err = panel(name="errors", height=400, y_range=DataRange1d(start=0.0),
                y_axis_label="interpolation error E")
    gap = panel(name="differences", height=290, y_axis_label="attention − ridge")
    ca, cr = COLORS["attention"], COLORS["ridge"]
    # GlyphRenderer[Any]: Legend's stub asks list[GlyphRenderer[Glyph]], and the type parameter
    # is invariant, so no list of GlyphRenderer[Line] (or of several glyphs) would match it.
    items: list[tuple[str, list[GlyphRenderer[Any]]]] = []
    gap_items: list[tuple[str, list[GlyphRenderer[Any]]]] = []
    items.append(("attention, limit", [err.line("g", "attention", source=curves, color=ca,
                                                 line_width=2.5)]))
    gap_items.append(("limit", [gap.line("g", "gap", source=curves, color=ca, line_width=2.5)]))
    for i, k in enumerate(ns):
        dash = _DASHES[i % len(_DASHES)]
        items.append((f"attention, finite size n = {k}",
                      [err.line("g", f"finite_{i}", source=curves, color=ca, line_width=2,
                                line_dash=dash)]))
        gap_items.append((f"finite size n = {k}",
                          [gap.line("g", f"gap_finite_{i}", source=curves, color=ca,
                                    line_width=2, line_dash=dash)]))
    items.append(("ridge", [err.line("g", "ridge", source=curves, color=cr, line_width=2.5)]))
    if mc is not None:
        for name, color, marker in (("attention", ca, "circle"), ("ridge", cr, "square")):
            items.append((f"Monte Carlo, {name}", [
                err.segment("g", f"{name}_lo", "g", f"{name}_hi", source=shown, color=color),
                err.scatter("g", name, source=shown, marker=marker, size=8, color=color,
                            fill_color="white", line_width=2)]))
        gap_items.append(("Monte Carlo", [
            gap.segment("g", "gap_lo", "g", "gap_hi", source=shown, color=ca),
            gap.scatter("g", "gap", source=shown, marker="circle", size=8, color=ca,
                        fill_color="white", line_width=2)]))
    gap.add_layout(Span(location=0.0, dimension="width", line_color="#777777", line_width=1))
    for fig, its in ((err, items), (gap, gap_items)):
        fig.add_layout(Legend(items=its, click_policy="hide", orientation="horizontal",
                              ncols=3, label_text_font_size="9pt",
                              # Bokeh's stub types padding as Property[...], not its value
                              padding=2,  # type: ignore[arg-type]
                              spacing=14,
                              location="center", border_line_alpha=0),
                       "below")
        fig.toolbar.logo = None
    head = Div(sizing_mode="stretch_width", text=(
        f"<b>Theory explorer</b> (profile <b>{profile}</b>): the deterministic equivalents of "
        "attention and ridge regression against γ/τ, each model at its own feature scale τ. "
        f"Grid: {shape[0]} nonlinearities × {shape[1]} values of c × {shape[2]} SNRs × "
        f"{shape[3]} alignments × {shape[4]} norms, {G} values of γ/τ. "
        "Click a legend entry to hide a curve."))
    layout = column(head, row(controls["f"], controls["c"], sizing_mode="stretch_width"),
                    row(controls["snr"], controls["alignment"], controls["norm"],
                        sizing_mode="stretch_width"),
                    note, err, gap, sizing_mode="stretch_width")
    doc = Document()
    doc.add_root(layout)
    doc.js_on_event(DocumentReady, callback)
    doc.title = "Theory explorer"
    return doc


def _position(values: Sequence[Any], value: Any, axis: str) -> int:
    if axis == "f":
        if value not in values:
            raise ValueError(f"mc_points: {axis}={value!r} is not on the grid's {axis} axis "
                             f"{list(values)}")
        return list(values).index(value)
    v = check_real(value, axis)
    hits = np.flatnonzero(np.isclose(np.asarray(values, dtype=float), v, rtol=1e-12, atol=1e-12))
    if hits.size != 1:
        raise ValueError(f"mc_points: {axis}={value!r} is not on the grid's {axis} axis "
                         f"{[float(x) for x in values]}")
    return int(hits[0])


def write(path: str | os.PathLike[str], *, profile: str, f: Sequence[str], c: Sequence[float],
          snr: Sequence[float], alignment: Sequence[float], norm: Sequence[float],
          g_range: Sequence[float], n_g: int, n: Sequence[int], mc_points: Sequence[Mapping[str, Any]],
          mc_n: int, mc_trials: int, mc_g: Sequence[float], seed: int = 0) -> dict[str, Any]:
    """Compute the explorer's grid and checks (cached) and write the standalone HTML page.

    Parameters
    ----------
    path : path-like
        The HTML file to write (its folder is created).
    profile : str
        The book profile (stated on the page).
    f, c, snr, alignment, norm : sequences
        The axes of :func:`attn_lib.studies.explorer.grid`.
    g_range : (float, float)
        Smallest and largest ``g = gamma / tau``; the grid has ``n_g`` values, evenly spaced
        in ``log g``.
    n : sequence of int
        Token counts of the finite-size curves.
    mc_points : sequence of dict
        Grid points checked by Monte Carlo, each ``{"f": ..., "c": ..., "snr": ...,
        "alignment": ..., "norm": ...}`` with values on the axes; the first is shown first.
    mc_n : int
        Tokens of the Monte Carlo checks: one of ``n``, so that the markers sit on that
        finite-size curve.
    mc_trials : int
        Draws per checked setting (at least 2).
    mc_g : sequence of float
        The ``g`` of the checks.
    seed : int, default 0
        Root seed of the checks.

    Returns
    -------
    dict
        ``"bytes"`` (size of the file), ``"points"`` (settings of the grid), ``"curves"``
        (curves stored), ``"checks"`` (Monte Carlo points).
    """
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    if len(g_range) != 2:
        raise ValueError(f"g_range must be (smallest, largest) g, got {g_range!r}")
    lo, hi = (check_real(v, "g_range", low=0.0, low_open=True) for v in g_range)
    if not hi > lo:
        raise ValueError(f"g_range must be increasing, got {g_range!r}")
    n_g = check_int(n_g, "n_g", low=2)
    mc_n, mc_trials, seed = check_int(mc_n, "mc_n"), check_int(mc_trials, "mc_trials", low=2), \
        check_seed(seed)
    if mc_n not in list(n):
        raise ValueError(f"mc_n={mc_n} must be one of n={list(n)}: the Monte Carlo markers "
                         "check the finite-size curve at their n")
    if not mc_points:
        raise ValueError("mc_points must name at least one grid point")
    axes = dict(zip(explorer.AXES, (list(f), c, snr, alignment, norm)))
    where = []
    for point in mc_points:
        if not isinstance(point, Mapping) or set(point) != set(explorer.AXES):
            raise ValueError(f"each of mc_points must give exactly {explorer.AXES}, got {point!r}")
        where.append(tuple(_position(axes[a], point[a], a) for a in explorer.AXES))
    grid = explorer.cached_grid(f=list(f), c=c, snr=snr, alignment=alignment, norm=norm,
                                g=np.geomspace(lo, hi, n_g), n=list(n))
    shape = tuple(len(grid[a]) for a in explorer.AXES)
    settings = [explorer.setting(grid["f"][i], grid["c"][j], grid["snr"][k],
                                 grid["alignment"][m], grid["norm"][w])
                for i, j, k, m, w in where]
    mc = explorer.monte_carlo(settings, mc_g, n=mc_n, trials=mc_trials, seed=seed)
    flat = [int(np.ravel_multi_index(idx, shape)) for idx in where]
    doc = document(grid, mc, flat, where[0], profile)
    html = file_html(doc, resources=INLINE, title="Theory explorer")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return {"bytes": path.stat().st_size, "points": int(np.prod(shape)),
            "curves": int(np.prod(shape)) * (1 + len(list(n))), "checks": len(flat)}
