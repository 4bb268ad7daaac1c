"""Shared helpers of the book tests: the build script as a module, the layout, the figures."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
HTML = REPO / "_build" / "html"


def load_build_script():
    """Import ``scripts/build_book.py`` (not a package) as a module."""
    name = "attn_book_build_book"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def parameters_cells(nb) -> list:
    """Cells tagged ``parameters``."""
    return [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]


def literal_assignments(source: str) -> dict:
    """``{name: value}`` of a cell made only of ``name = <literal>`` statements."""
    out = {}
    for stmt in ast.parse(source).body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            raise AssertionError(f"parameters cell may only assign literals: {ast.unparse(stmt)!r}")
        out[stmt.targets[0].id] = ast.literal_eval(stmt.value)
    return out


def public_modules(root: Path = REPO) -> list[str]:
    """Public modules and packages of ``attn_lib``, from its files (no ``_private`` part)."""
    mods = []
    for path in sorted((root / "attn_lib").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            mods.append(".".join(parts))
    return mods


def figure_rows(html_dir: Path) -> list[tuple[str, str, str, str]]:
    """``(href, number, caption, command)`` of each row of the built figure list, tags removed."""
    page = (html_dir / "book" / "figures.html").read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="row-(?:odd|even)"><td><p><a class="reference internal" '
                      r'href="([^"]+)"><span class="std std-numref">([^<]+)</span></a></p></td>\n'
                      r"<td><p>(.*?)</p></td>\n<td>.*?</td>\n<td><p>(.*?)</p></td>", page, re.S)
    return [(href, num, re.sub(r"<[^>]+>", "", cap), re.sub(r"<[^>]+>", "", cmd))
            for href, num, cap, cmd in rows]


def check_figure(figure: Any, names: Iterable[str], n_axes: int) -> dict[str, Any]:
    """Assert ``figure`` is a :class:`~attn_lib.book.page.Figure` with the numbers ``names``.

    Its numbers must be exactly ``names`` and its drawing must have ``n_axes`` axes (colour
    bars count). The figure is closed (its axes stay readable) and its numbers are returned.
    """
    # imported here: the build-script and HTML tests that use this module need neither
    import matplotlib.pyplot as plt

    from attn_lib.book.page import Figure

    assert isinstance(figure, Figure)
    assert set(figure.numbers) == set(names)
    assert len(figure.fig.axes) == n_axes
    plt.close(figure.fig)
    return figure.numbers
