"""What a chapter notebook calls: set up the page, show a figure, glue the numbers of its prose.

A chapter reads like the paper: each figure is one call to a function of
:mod:`attn_lib.book.figures` that returns a :class:`Figure` (the matplotlib figure and the
numbers the prose quotes), and one call of :func:`show` glues both::

    page.setup(profile)
    page.show("fig-random-inputs", figures.random_inputs.spectrum(n=n, n_c2=n, seed=seed))

The markdown cell below it displays the figure with its caption and label, and quotes the
numbers by name::

    ```{glue:figure} fig-random-inputs
    :name: fig-random-inputs

    Caption, quoting {glue:text}`spec_de_att_two:.3f`.
    ```

Numbers are glued as plain Python ``float``/``int``/``str`` (NumPy scalars are converted), and
Markdown objects (tables, written by :func:`markdown_table`) as they are, all with
``display=False``. A :class:`~attn_lib.book.claims.Claim` is glued as its wording (under its
name) and its evidence (under ``<name>_evidence``); with the ``full`` profile of :func:`setup`,
gluing a required claim that does not hold raises :class:`~attn_lib.book.claims.ClaimError`,
naming the claim.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["Figure", "setup", "glue", "show", "markdown_table"]

_STATE: dict[str, str | None] = {"profile": None}


@dataclass
class Figure:
    """A drawn figure and the numbers its prose quotes.

    Attributes
    ----------
    fig : matplotlib.figure.Figure
    numbers : dict of str to object
        Named values (floats, ints, strings or :class:`IPython.display.Markdown` tables).
    """

    fig: Any
    numbers: dict[str, Any] = field(default_factory=dict)


def setup(profile: str) -> None:
    """Apply the book's plotting style, glue the profile name as ``profile`` (bold), remember
    the profile for the claim checks of :func:`glue`, and ignore
    :class:`~attn_lib.DomainWarning`: the chapters evaluate theories outside their measured
    domain on purpose, to show where they fail, and their prose states the domains."""
    import warnings

    from IPython.display import Markdown

    from .._domain import DomainWarning
    from . import style

    warnings.filterwarnings("ignore", category=DomainWarning)

    if not isinstance(profile, str):
        raise TypeError(f"profile must be a str, got {type(profile).__name__}")
    style.use()
    _STATE["profile"] = profile
    glue({"profile": Markdown(f"**{profile}**")})


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def glue(numbers: Mapping[str, Any] | Any) -> None:
    """Glue every named value of ``numbers`` (a mapping or a dataclass instance), not displayed.

    Raises
    ------
    TypeError
        If ``numbers`` is neither a mapping nor a dataclass instance, or a name is not a str.
    """
    from myst_nb import glue as _glue

    if dataclasses.is_dataclass(numbers) and not isinstance(numbers, type):
        numbers = {f.name: getattr(numbers, f.name) for f in dataclasses.fields(numbers)}
    if not isinstance(numbers, Mapping):
        raise TypeError(f"numbers must be a mapping or a dataclass instance, got "
                        f"{type(numbers).__name__}")
    from .claims import Claim

    for name, value in numbers.items():
        if not isinstance(name, str):
            raise TypeError(f"glued names must be str, got {name!r}")
        if isinstance(value, Claim):
            value.enforce(_STATE["profile"] or "")
            _glue(name, value.text, display=False)
            _glue(f"{name}_evidence", value.evidence, display=False)
            continue
        _glue(name, _plain(value), display=False)


def show(name: str, figure: Figure) -> None:
    """Glue ``figure.fig`` under ``name`` (for ``{glue:figure}``) and its numbers; close the figure."""
    import matplotlib.pyplot as plt
    from myst_nb import glue as _glue

    if not isinstance(figure, Figure):
        raise TypeError(f"figure must be an attn_lib.book.page.Figure, got {type(figure).__name__}")
    _glue(name, figure.fig, display=False)
    plt.close(figure.fig)
    glue(figure.numbers)


def markdown_table(rows: Any, formats: Mapping[str, str] | None = None,
                   right: Sequence[str] | None = None, left: bool = False) -> Any:
    """A Markdown table (:class:`IPython.display.Markdown`) of ``rows``, to glue like a number.

    Parameters
    ----------
    rows : sequence of dict, or pandas.DataFrame
        One dict per row, column name to value; the columns are the keys of the first row. A
        data frame gives one row per line, its index as the first columns.
    formats : dict of str to str, optional
        Format spec per column for values that are not strings (e.g. ``{"a1": ".4f"}``);
        other values are written with :class:`str`.
    right : sequence of str, optional
        Columns to right-align; default those whose value in the first row is a number.
    left : bool, default False
        Mark the other columns left-aligned (rule ``:---``); by default their rule is ``---``
        and the renderer's default alignment applies.

    Returns
    -------
    IPython.display.Markdown
        A header line, an alignment rule and one line per row; a ``|`` inside a cell is
        escaped. Show it with ``{glue:md}`` and ``:format: myst``.

    Raises
    ------
    ValueError
        If ``rows`` is empty.
    """
    import pandas as pd
    from IPython.display import Markdown

    if isinstance(rows, pd.DataFrame):
        rows = rows.reset_index().to_dict("records")
    rows, formats = list(rows), dict(formats or {})
    if not rows:
        raise ValueError("rows must not be empty")
    columns = list(rows[0])

    def cell(column: str, value: Any) -> str:
        text = value if isinstance(value, str) else format(value, formats.get(column, ""))
        return str(text).replace("|", "\\|")

    if right is None:
        right = [c for c in columns if isinstance(rows[0][c], (int, float, np.number))]
    other = ":---" if left else "---"
    lines = ["| " + " | ".join(cell("", c) for c in columns) + " |",
             "|" + "|".join("---:" if c in right else other for c in columns) + "|"]
    lines += ["| " + " | ".join(cell(c, row[c]) for c in columns) + " |" for row in rows]
    return Markdown("\n".join(lines))
