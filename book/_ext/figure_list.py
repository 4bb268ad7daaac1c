"""Sphinx extension: ``{figure-list}``, a table of every numbered figure of the book.

Written in a page (``book/figures.md``) as::

    ```{figure-list}
    ```

it becomes a table with one row per numbered figure that has a label (``:name:``), in the order
of the figure numbers: the number as Sphinx gives it to ``{numref}`` (e.g. "Fig. 3.2", a link to
the figure), the first sentence of the caption, the page holding it (a link), and, for a chapter
notebook ``book/NN_<stem>.ipynb``, the command that regenerates it
(:confval:`figure_list_command`, ``make chapter NAME={stem}``).

The table is made when the page is written, from what the toolchain recorded while reading: the
labels of the ``std`` domain, the figure numbers (``env.toc_fignumbers``) and the captions in
the pickled doctrees. The page is re-read on every build (``env.note_reread``), so the list is
right in incremental builds too. (Sphinx numbers only figures with an id, which a figure gets
from its ``:name:``; the chapter checks of ``scripts/build_book.py`` require one.)
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

HEADER = ("Figure", "Caption", "Page", "Regenerate with")
#: A sentence ends at ".", "!" or "?" followed by a capital (or an opening bracket) or the end.
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(\[]|\s*$)")
_NUMBER_PREFIX = re.compile(r"^\d+_")  # book/04_structured_inputs -> structured_inputs


class figure_list(nodes.General, nodes.Element):
    """Placeholder of the table, replaced by :class:`FigureListTransform`."""


class FigureListDirective(SphinxDirective):
    """``{figure-list}``: the table of the book's numbered figures (no arguments, no content)."""

    def run(self) -> list[nodes.Node]:
        self.env.note_reread()  # the list depends on every other page
        return [figure_list("")]


def load_mathjax(app: Sphinx, doctree: nodes.document) -> None:
    """Have Sphinx load MathJax on a page with a list: its captions and titles may hold math."""
    if any(doctree.findall(figure_list)):
        app.env.get_domain("math").data["has_equations"][app.env.docname] = True


def first_sentence(caption: nodes.Element) -> list[nodes.Node]:
    """Copies of the nodes of ``caption`` up to the end of its first sentence."""
    out: list[nodes.Node] = []
    for child in caption.children:
        if isinstance(child, nodes.Text):
            end = _SENTENCE_END.search(str(child))
            if end:
                out.append(nodes.Text(str(child)[:end.end()]))
                break
        out.append(child.deepcopy())
    for node in out:
        for element in node.findall(nodes.Element):
            element["ids"] = []  # the figure keeps its ids
    return out


class FigureListTransform(SphinxPostTransform):
    """Replace each :class:`figure_list` by the table (before the references are resolved)."""

    default_priority = 5  # ReferencesResolver (10) then turns the numref xrefs into links

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(figure_list)):
            rows = [self.row(*entry) for entry in self.figures()]
            node.replace_self(table(rows) if rows else nodes.paragraph(text="No numbered figure."))

    def figures(self) -> list[tuple[str, str, nodes.figure]]:
        """``(label, docname, figure node)`` of every labelled numbered figure, in number order."""
        numbers = self.env.toc_fignumbers
        found: dict[tuple[str, str], tuple[tuple[int, ...], str]] = {}
        for label, (docname, labelid, _) in self.env.get_domain("std").labels.items():
            number = numbers.get(docname, {}).get("figure", {}).get(labelid)
            if number is not None:  # a figure (not a table or a section) with a number
                found.setdefault((docname, labelid), (tuple(number), label))
        return [(label, docname, self.env.get_doctree(docname).ids[labelid])
                for (docname, labelid), (_, label) in sorted(found.items(), key=lambda kv: kv[1])]

    def row(self, label: str, docname: str, figure: nodes.figure) -> list[list[nodes.Node]]:
        here = self.env.docname
        number = addnodes.pending_xref("", nodes.inline(label, label), refdomain="std",
                                       reftype="numref", reftarget=label, refexplicit=False,
                                       refwarn=True, refdoc=here)
        captions = list(figure.findall(nodes.caption))
        caption = first_sentence(captions[0]) if captions else []
        for xref in (n for c in caption for n in c.findall(addnodes.pending_xref)):
            xref["refdoc"] = here  # links in the caption are resolved from this page
        title = self.env.titles[docname].deepcopy().children
        page = make_refnode(self.app.builder, here, docname, "", title)
        command: list[nodes.Node] = [nodes.Text("—")]
        if Path(self.env.doc2path(docname)).suffix == ".ipynb":
            stem = _NUMBER_PREFIX.sub("", docname.rsplit("/", 1)[-1])
            command = [nodes.literal(text=self.config.figure_list_command.format(stem=stem))]
        return [[number], caption, [page], command]


def table(rows: list[list[list[nodes.Node]]]) -> nodes.table:
    """A docutils table with :data:`HEADER` and ``rows`` (each cell a list of inline nodes)."""
    def row(cells) -> nodes.row:
        return nodes.row("", *(nodes.entry("", nodes.paragraph("", "", *c)) for c in cells))

    group = nodes.tgroup("", *(nodes.colspec(colwidth=1) for _ in HEADER), cols=len(HEADER))
    group += nodes.thead("", row([[nodes.Text(h)] for h in HEADER]))
    group += nodes.tbody("", *(row(r) for r in rows))
    return nodes.table("", group, classes=["figure-list"])


def setup(app: Sphinx) -> dict:
    app.add_config_value("figure_list_command", "make chapter NAME={stem}", "env", [str])
    app.add_node(figure_list)
    app.add_directive("figure-list", FigureListDirective)
    app.add_post_transform(FigureListTransform)
    app.connect("doctree-read", load_mathjax)  # after the math domain recorded the page
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
