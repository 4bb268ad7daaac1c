"""scripts/build_book.py on small books in tmp_path: chapters, checks, re-execution, figure list."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from book_helpers import REPO, figure_rows, load_build_script

bb = load_build_script()
KERNEL = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}


def test_stem_of():
    assert bb.stem_of("book/01_hermite_linearisation.ipynb") == "hermite_linearisation"
    assert bb.stem_of("book/12_a1_zero") == "a1_zero"
    assert bb.stem_of("book/intro.md") == "intro"


def test_chapters_are_the_notebooks_of_the_toc_in_order(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - caption: A
            chapters:
              - file: book/02_b
                sections:
                  - file: book/notes
                  - file: book/01_a
          - caption: B
            chapters:
              - file: book/api
        """))
    for name in ("intro.md", "notes.md", "api.md", "01_a.ipynb", "02_b.ipynb"):
        (tmp_path / "book" / name).write_text("")
    assert [(c.docname, c.stem) for c in bb.chapters(tmp_path)] == [("book/02_b", "b"),
                                                                   ("book/01_a", "a")]


# ----------------------------------------------------------------------------- checks
FIGURE = "application/papermill.record/image/png"


def glued_output(name: str, mime: str = FIGURE) -> dict:
    return new_output("display_data", data={mime: "iVBOR"}, metadata={"scrapbook": {"name": name}})


def chapter_nb(code: str = 'page.show("fig-x-curve", figures.x.curve())', outputs=(),
               prose: str = "As {numref}`fig-x-curve` shows.", caption: str = "The curve. More.",
               options: str = ":name: fig-x-curve\n", title: str | None = None,
               where: str | None = None) -> nbformat.NotebookNode:
    """A chapter in the chapter style (each argument breaks it in one way)."""
    params = new_code_cell('profile = "quick"\n' + "n = 1\n" * 20, metadata={"tags": ["parameters"]})
    cell = new_code_cell(code)
    cell.outputs = list(outputs)
    figure = f"```{{glue:figure}} fig-x-curve\n{options}\n{caption}\n```\n\n{prose}"
    title = f"# X\n\n{RESULT}" if title is None else title
    where = WHERE if where is None else where
    return new_notebook(cells=[new_markdown_cell(title), params, cell,
                               new_markdown_cell(f"{figure}\n\n{where}")])


RESULT = "```{admonition} The result\n:class: important\nX holds.\n```"
WHERE = "```{admonition} Where it holds\nEverywhere.\n```"


def test_a_chapter_in_the_chapter_style_passes():
    assert bb.style_problems(chapter_nb()) == []
    nb = chapter_nb(outputs=[glued_output("fig-x-curve"), glued_output("value", "text/plain")])
    bb.check_chapter(nb, "x", style=True)
    nb.cells[-1].source = nb.cells[-1].source.replace("```", ":::")  # colon fences work too
    assert bb.style_problems(nb) == []


@pytest.mark.parametrize("nb, match", [
    (chapter_nb(code="x = 1\n\n" * 16), r"code cell 2 has 16 non-blank lines \(at most 15\)"),
    (chapter_nb(outputs=[new_output("display_data", data={"image/png": "iVBOR"})]),
     "code cell 2 displays a figure"),
    (chapter_nb(options=""), "fig-x-curve has no :name:"),
    (chapter_nb(caption=""), "fig-x-curve has no caption"),
    (chapter_nb(prose="As the figure shows."), "fig-x-curve is not referred to with {numref}"),
    (chapter_nb(code='page.show("fig-x-other", f)'), "fig-x-other is glued but not shown"),
    (chapter_nb(outputs=[glued_output("fig-x-other")]), "fig-x-other is glued but not shown"),
    (new_notebook(cells=[new_markdown_cell(f"# X\n\n{RESULT}\n\n{WHERE}")]),
     r"no \{glue:figure\} directive"),
    (chapter_nb(title="# X"), r"the first cell has no boxed statement"),
    (chapter_nb(where=""), "no box {admonition} Where it holds"),
])
def test_chapter_style_problems_are_named(nb, match):
    problems = bb.style_problems(nb)
    assert len(problems) == 1 and re.search(match, problems[0]), problems


@pytest.mark.parametrize("outputs, match", [
    ([], "no figure"),
    ([new_output("error", ename="ValueError", evalue="boom", traceback=[]),
      glued_output("fig-x-curve")], "ValueError: boom"),
])
def test_output_checks_name_the_chapter(outputs, match):
    bb.check_chapter(chapter_nb(outputs=[glued_output("fig-x-curve")]), "ok", style=False)
    with pytest.raises(bb.BuildError, match=match) as info:
        bb.check_chapter(chapter_nb(outputs=outputs), "some_chapter", style=False)
    assert "some_chapter" in str(info.value)


# ----------------------------------------------------------------------------- small books
def run_script(root, *args, timeout=600):
    return subprocess.run([sys.executable, str(REPO / "scripts" / "build_book.py"), "--root",
                           str(root), *args], capture_output=True, text=True, timeout=timeout)


def build(root, *args) -> str:
    proc = run_script(root, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def tiny_book(root, body: str) -> None:
    """A one-chapter book whose chapter runs ``body``."""
    (root / "book" / "params").mkdir(parents=True)
    (root / "_config.yml").write_text("title: tiny\nexecute:\n  execute_notebooks: 'off'\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                   "  - file: book/01_broken_chapter\n")
    (root / "book" / "intro.md").write_text("# Tiny\n")
    (root / "book" / "params" / "quick.yaml").write_text("broken_chapter:\n  size: 3\n")
    params = new_code_cell('profile = "quick"\nsize = 3', metadata={"tags": ["parameters"]})
    nb = new_notebook(cells=[new_markdown_cell("# Broken"), params, new_code_cell(body)],
                      metadata=KERNEL)
    nbformat.write(nb, root / "book" / "01_broken_chapter.ipynb")


def test_injected_error_fails_the_build_and_names_the_chapter(tmp_path):
    tiny_book(tmp_path, 'raise RuntimeError("injected failure, size=%d" % size)')
    proc = run_script(tmp_path, "--profile", "quick", timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "broken_chapter" in out and "injected failure, size=3" in out, out
    assert not (tmp_path / "_build").exists()  # no HTML from a failed execution
    assert not (tmp_path / "_executed" / "book" / "01_broken_chapter.ipynb").exists()


def test_a_running_chapter_reports_its_cell_and_its_monte_carlo_tasks(tmp_path):
    """Progress lines on the build's stdout while the chapter runs, nothing in its outputs."""
    tiny_book(tmp_path, "import time\nfrom attn_lib.simulation import executor\n"
                        "out = list(executor.run([(time.sleep, [0.5] * 6)]))")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_book.py"), "--root",
                           str(tmp_path), "--profile", "quick", "--no-style-checks"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ATTN_BOOK_PROGRESS_EVERY": "0.5"})
    reports = [line for line in proc.stdout.splitlines() if "[book]   broken_chapter, " in line]
    assert any("of 4 cells done; Monte Carlo: " in line and " of 6 tasks done" in line
               for line in reports), proc.stdout
    nb = nbformat.read(next((tmp_path / "_executed" / "book").glob("01_broken_chapter*.ipynb")),
                       as_version=4)
    assert not [o for c in nb.cells for o in c.get("outputs", [])], "the chapter printed"


def test_chapter_style_checks_fail_the_build_and_name_the_chapter(tmp_path):
    tiny_book(tmp_path, "x = size\n" * 16)
    proc = run_script(tmp_path, "--profile", "quick", "--style-checks", timeout=300)
    assert proc.returncode != 0
    for problem in ("code cell 2 has 16 non-blank lines", "no figure", "no {glue:figure} directive"):
        assert f"chapter 'broken_chapter': {problem}" in proc.stderr, proc.stderr
    assert not (tmp_path / "_build").exists()


def test_unknown_chapter_and_profile_fail_fast(tmp_path):
    tiny_book(tmp_path, "pass")
    for args, msg in ((["--profile", "quick", "--chapter", "nope"], "no chapter 'nope'"),
                      (["--profile", "huge"], "unknown profile 'huge'")):
        proc = run_script(tmp_path, *args, timeout=120)
        assert proc.returncode != 0
        assert msg in proc.stderr, proc.stderr


def test_the_explorer_page_needs_its_parameters_and_a_bad_one_is_named(tmp_path):
    """A toc listing book/explorer needs an ``explorer`` section (the build stops before
    executing anything), and a bad value in it fails the page's step naming the page."""
    tiny_book(tmp_path, "pass")
    toc = tmp_path / "_toc.yml"
    toc.write_text(toc.read_text() + f"  - file: {bb.EXPLORER_PAGE}\n")
    (tmp_path / f"{bb.EXPLORER_PAGE}.md").write_text("# Explorer\n")
    assert bb.generated_pages(tmp_path) == [bb.EXPLORER]
    with pytest.raises(bb.BuildError, match=r"book/params/quick.yaml has no entry for the pages "
                                            r"\['explorer'\]"):
        bb.run(tmp_path, "quick", None)
    assert not (tmp_path / "_executed" / "book").exists()  # nothing was executed
    explorer = yaml.safe_load((REPO / "book" / "params" / "quick.yaml").read_text())["explorer"]
    with pytest.raises(bb.BuildError, match=r"page 'explorer': mc_n=7 must be one of n="):
        bb.write_explorer(tmp_path, "quick", {**explorer, "mc_n": 7})
    assert not list(tmp_path.rglob("*.html"))


def style_chapter(stem: str, size: int) -> nbformat.NotebookNode:
    """A chapter in the chapter style: one figure, glued by ``page.show``, shown and referred to."""
    label = f"fig-{stem}-line"
    return new_notebook(metadata=KERNEL, cells=[
        new_markdown_cell(f"# Chapter {stem} with $a_1$\n\n{RESULT}"),
        new_code_cell(f'profile = "quick"\nsize = {size}', metadata={"tags": ["parameters"]}),
        new_code_cell("import matplotlib.pyplot as plt\nfrom attn_lib.book import page\n\n"
                      "page.setup(profile)", metadata={"tags": ["hide-cell"]}),
        new_code_cell(f"fig, ax = plt.subplots()\nax.plot([0, size], [0, 1])\n"
                      f'page.show("{label}", page.Figure(fig, {{"slope": 1 / size}}))\n'
                      f'print("size =", size)'),
        new_markdown_cell(f"```{{glue:figure}} {label}\n:name: {label}\n\n"
                          f"A line of slope $1/n$ for {stem}. Its slope is {{glue:text}}`slope:.3f`.\n"
                          f"```\n\nAs {{numref}}`{label}` shows, executed with the "
                          f"{{glue:md}}`profile` profile.\n\n{WHERE}"),
    ])


def style_book(root) -> None:
    """Two chapters in the chapter style, a section page, and the book's own figures page."""
    (root / "book" / "params").mkdir(parents=True)
    shutil.copy2(REPO / "_config.yml", root / "_config.yml")
    shutil.copytree(REPO / "book" / "_ext", root / "book" / "_ext",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "book" / "_static", root / "book" / "_static")  # html_static_path
    shutil.copy2(REPO / "book" / "figures.md", root / "book" / "figures.md")
    (root / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - caption: Chapters
            numbered: true
            chapters:
              - file: book/01_alpha
                sections:
                  - file: book/alpha_notes
              - file: book/02_beta
          - caption: Reference
            chapters:
              - file: book/figures
        """))
    (root / "book" / "intro.md").write_text("# Tiny\n\nSome math: $a_1$.\n")
    (root / "book" / "alpha_notes.md").write_text("# Notes\n\nNo figure here.\n")
    (root / "book" / "references.bib").write_text("")
    (root / "book" / "params" / "quick.yaml").write_text("alpha:\n  size: 1\nbeta:\n  size: 2\n")
    (root / "book" / "params" / "full.yaml").write_text("alpha:\n  size: 10\nbeta:\n  size: 20\n")
    for name, size in (("01_alpha", 1), ("02_beta", 2)):
        nbformat.write(style_chapter(name[3:], size), root / "book" / f"{name}.ipynb")
    kit = REPO / ".cache" / "mathjax"  # reuse the fetched MathJax kit (else npm fetches it)
    if kit.is_dir():
        shutil.copytree(kit, root / ".cache" / "mathjax")


def test_style_book_builds_with_its_figure_list_and_re_executes_only_what_changed(tmp_path):
    style_book(tmp_path)
    out = build(tmp_path, "--profile", "quick", "--style-checks")
    assert "executing chapter 'alpha'" in out and "executing chapter 'beta'" in out
    assert re.search(r"chapter 'alpha' done in [\d.]+ s", out) and "timings (s):" in out
    html = tmp_path / "_build" / "html"
    alpha = (html / "book" / "01_alpha.html").read_text()
    assert "size = 1" in alpha and 'profile = "quick"' not in alpha  # injected values shown
    assert '<span class="caption-number">Fig. 1.1 </span>' in alpha  # numbered caption
    assert "Fig. 1.1</span></a> shows" in alpha  # and the {numref} of the prose
    assert (html / "mathjax" / "tex-chtml.js").is_file()

    # the figure list: numbers as Sphinx gives them, first caption sentence, link, command
    assert figure_rows(html) == [
        ("01_alpha.html#fig-alpha-line", "Fig. 1.1", r"A line of slope \(1/n\) for alpha.",
         "make chapter NAME=alpha"),
        ("02_beta.html#fig-beta-line", "Fig. 2.1", r"A line of slope \(1/n\) for beta.",
         "make chapter NAME=beta")]
    figures_page = (html / "book" / "figures.html").read_text()
    assert re.search(r'href="01_alpha.html">Chapter alpha with <span class="math', figures_page)
    assert re.search(r'<script[^>]+src="[^"]*mathjax/tex-chtml.js', figures_page)  # math in captions

    # an incremental build by the toolchain itself keeps the list right
    staged = tmp_path / "_executed" / "book" / "02_beta.ipynb"
    nb = nbformat.read(staged, as_version=4)
    nb.cells[-1].source = nb.cells[-1].source.replace("A line of slope $1/n$", "A changed caption")
    nbformat.write(nb, staged)
    jb = subprocess.run([shutil.which("jupyter-book", path=Path(sys.executable).parent), "build",
                         str(tmp_path / "_executed"),
                         "--path-output", str(tmp_path), "-W"],
                        capture_output=True, text=True, timeout=300)
    assert jb.returncode == 0, jb.stdout[-3000:]
    assert "book/01_alpha" not in re.sub(r"writing output.*", "", jb.stdout, flags=re.S)  # not re-read
    assert [r[2] for r in figure_rows(html)] == [r"A line of slope \(1/n\) for alpha.",
                                                 "A changed caption for beta."]

    # no source changed: nothing re-executed (the executed copies, edited above, are reused)
    out = build(tmp_path, "--profile", "quick")
    assert "executing chapter" not in out and figure_rows(html)[1][2] == "A changed caption for beta."
    # --chapter re-executes that chapter, and the stale ones
    params = tmp_path / "book" / "params" / "quick.yaml"
    params.write_text(params.read_text().replace("size: 1", "size: 3"))
    out = build(tmp_path, "--profile", "quick", "--chapter", "beta")
    assert "executing chapter 'beta'" in out and "executing chapter 'alpha'" in out
    assert "size = 3" in (html / "book" / "01_alpha.html").read_text()
    manifest = json.loads((tmp_path / "_executed" / "manifest.json").read_text())
    assert manifest["alpha"]["parameters"] == {"size": 3} and manifest["beta"]["profile"] == "quick"
    # another profile: every chapter is stale
    out = build(tmp_path, "--profile", "full", "--chapter", "beta")
    assert "executing chapter 'beta'" in out and "executing chapter 'alpha'" in out
    assert "size = 10" in (html / "book" / "01_alpha.html").read_text()


def test_output_on_stderr_fails_the_html_build_and_names_the_chapter(tmp_path):
    style_book(tmp_path)  # the book's own _config.yml: nb_output_stderr warn, and -W
    path = tmp_path / "book" / "02_beta.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[3].source += '\nimport warnings\nwarnings.warn("careful")'
    nbformat.write(nb, path)
    proc = run_script(tmp_path, "--profile", "quick", "--style-checks")
    assert proc.returncode != 0
    assert "chapters with warnings: beta" in proc.stderr, proc.stdout[-3000:] + proc.stderr
