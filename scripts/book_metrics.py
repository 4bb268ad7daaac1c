"""Reading metrics of the built book: prose words per page, the intro's table cells, captions.

Usage::

    python scripts/book_metrics.py [_build/html]

Prose words are the words of a page's main content (``<article>``) without math (MathJax's
``\\( \\)`` and ``\\[ \\]``, display math blocks), code cells and dropdown bodies
(the formal tests); tables and figure captions count. It prints, per page of the intro
and Part I, the prose words, and their totals; the longest cell (in words) of the intro's tables;
every figure caption's first sentence, so that a reader can check it states a claim. The budgets
of the book's structure are :data:`INTRO_BUDGET` and :data:`PART_ONE_BUDGET` (intro and Part I
together); ``tests/test_book_html.py`` asserts them on the built book.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bs4 import BeautifulSoup

REPO = Path(__file__).resolve().parents[1]
INTRO_BUDGET = 800
PART_ONE_BUDGET = 7000
CELL_BUDGET = 30
_MATH = re.compile(r"\\\(.*?\\\)|\\\[.*?\\\]|\$\$.*?\$\$", re.S)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’.,:%±+\-−/]*")


def _article(path: Path) -> BeautifulSoup:
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    art = soup.find("article", class_="bd-article")
    if art is None:
        raise ValueError(f"{path}: no <article class='bd-article'>")
    return art


def words(text: str) -> int:
    """Words of ``text`` with its math removed."""
    return len(_WORD.findall(_MATH.sub(" ", text)))


def prose_words(path: Path) -> int:
    """Prose words of a built page (see the module docstring for what is left out)."""
    art = _article(path)
    for tag in art.select("script, style, pre, div.cell_input, div.math, details, "
                          ".headerlink, span.math, span.caption-number"):
        tag.decompose()
    return words(art.get_text(" "))


def table_cells(path: Path) -> list[tuple[int, str]]:
    """``(words, text)`` of every table cell of a built page, longest first."""
    cells = [c.get_text(" ", strip=True) for c in _article(path).select("table td, table th")]
    return sorted(((words(c), c) for c in cells), reverse=True)


def captions(path: Path) -> list[str]:
    """The first sentence of each figure caption of a built page."""
    out = []
    for cap in _article(path).select("figcaption"):
        for num in cap.select("span.caption-number"):
            num.decompose()
        text = " ".join(cap.get_text(" ").split())
        out.append(re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0])
    return out


def part_one(html: Path) -> list[Path]:
    """The intro and the pages of Part I, in the order of the table of contents."""
    import yaml

    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    first = next(p for p in toc["parts"] if p["caption"].startswith("Part I:"))
    files = [toc["root"]] + [c["file"] for c in first["chapters"]]
    return [html / f"{f}.html" for f in files]


def main(argv: list[str]) -> int:
    html = Path(argv[0]) if argv else REPO / "_build" / "html"
    pages = part_one(html)
    total = 0
    for page in pages:
        n = prose_words(page)
        total += n
        print(f"{page.relative_to(html)}: {n} prose words")
    intro = prose_words(pages[0])
    print(f"intro: {intro} (budget {INTRO_BUDGET}); intro and Part I: {total} "
          f"(budget {PART_ONE_BUDGET})")
    longest = table_cells(pages[0])[:1]
    if longest:
        print(f"longest intro table cell: {longest[0][0]} words (budget {CELL_BUDGET}): "
              f"{longest[0][1]!r}")
    n_caps = 0
    for page in sorted(html.glob("book/[0-9][0-9]_*.html")):
        for first in captions(page):
            n_caps += 1
            print(f"  {page.stem}: {first}")
    print(f"{n_caps} figure captions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
