"""scripts/build_book.py: chapter discovery, output checks, and a failing chapter fails the build."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from book_helpers import REPO, load_build_script

bb = load_build_script()


def test_stem_of():
    assert bb.stem_of("book/01_hermite_linearisation.ipynb") == "hermite_linearisation"
    assert bb.stem_of("book/12_a1_zero") == "a1_zero"
    assert bb.stem_of("book/intro.md") == "intro"


def test_toc_files_walks_parts_chapters_and_sections():
    toc = {"root": "book/intro", "parts": [
        {"caption": "A", "chapters": [{"file": "book/01_a", "sections": [{"file": "book/01b"}]}]},
        {"caption": "B", "chapters": [{"file": "book/api"}]}]}
    assert bb.toc_files(toc) == ["book/intro", "book/01_a", "book/01b", "book/api"]


def _nb(outputs):
    cell = new_code_cell("x = 1")
    cell.outputs = outputs
    return new_notebook(cells=[new_markdown_cell("# t"), cell])


def test_check_outputs_accepts_a_figure():
    bb.check_outputs(_nb([new_output("display_data", data={"image/png": "iVBOR", "text/plain": "<Figure>"})]), "ok")


@pytest.mark.parametrize("outputs, match", [
    ([], "no figure"),
    ([new_output("error", ename="ValueError", evalue="boom", traceback=[])], "ValueError: boom"),
    ([new_output("stream", name="stderr", text="UserWarning: careful\n"),
      new_output("display_data", data={"image/png": "iVBOR"})], "stderr"),
])
def test_check_outputs_names_the_chapter(outputs, match):
    with pytest.raises(bb.BuildError, match=match) as info:
        bb.check_outputs(_nb(outputs), "some_chapter")
    assert "some_chapter" in str(info.value)


def tiny_book(root, body: str) -> None:
    """A one-chapter book whose chapter runs ``body``."""
    (root / "book" / "params").mkdir(parents=True)
    (root / "_config.yml").write_text("title: tiny\nexecute:\n  execute_notebooks: 'off'\n")
    (root / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        chapters:
          - file: book/01_broken_chapter
        """))
    (root / "book" / "intro.md").write_text("# Tiny\n")
    (root / "book" / "params" / "quick.yaml").write_text("broken_chapter:\n  size: 3\n")
    params = new_code_cell('profile = "quick"\nsize = 3', metadata={"tags": ["parameters"]})
    nb = new_notebook(cells=[new_markdown_cell("# Broken"), params, new_code_cell(body)],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": "python"}})
    nbformat.write(nb, root / "book" / "01_broken_chapter.ipynb")


def test_injected_error_fails_the_build_and_names_the_chapter(tmp_path):
    tiny_book(tmp_path, 'raise RuntimeError("injected failure, size=%d" % size)')
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_book.py"), "--root",
                           str(tmp_path), "--profile", "quick"], capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "broken_chapter" in out and "injected failure, size=3" in out, out
    assert not (tmp_path / "_build").exists()  # no HTML from a failed execution
    assert not (tmp_path / "_executed" / "book" / "01_broken_chapter.ipynb").exists()


def test_unknown_chapter_and_profile_fail_fast(tmp_path):
    tiny_book(tmp_path, "pass")
    script = str(REPO / "scripts" / "build_book.py")
    for args, msg in ((["--profile", "quick", "--chapter", "nope"], "no chapter 'nope'"),
                      (["--profile", "huge"], "unknown profile 'huge'")):
        proc = subprocess.run([sys.executable, script, "--root", str(tmp_path), *args],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        assert msg in proc.stderr, proc.stderr


PNG_CELL = '''import base64
from IPython.display import Image, display
display(Image(data=base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")))
print("size =", size)'''


def two_chapter_book(root) -> None:
    (root / "book" / "params").mkdir(parents=True)
    (root / "_config.yml").write_text(textwrap.dedent("""\
        title: tiny
        only_build_toc_files: true
        exclude_patterns: [_build, _mathjax, "**.partial.ipynb"]
        execute:
          execute_notebooks: "off"
        sphinx:
          config:
            mathjax_path: "../mathjax/tex-chtml.js"
            html_extra_path: ["_mathjax"]
        """))
    (root / "_toc.yml").write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        chapters:
          - file: book/01_alpha
          - file: book/02_beta
        """))
    (root / "book" / "intro.md").write_text("# Tiny\n\nSome math: $a_1$.\n")
    (root / "book" / "params" / "quick.yaml").write_text("alpha:\n  size: 1\nbeta:\n  size: 2\n")
    (root / "book" / "params" / "full.yaml").write_text("alpha:\n  size: 10\nbeta:\n  size: 20\n")
    for name, size in (("01_alpha", 1), ("02_beta", 2)):
        params = new_code_cell(f'profile = "quick"\nsize = {size}', metadata={"tags": ["parameters"]})
        nb = new_notebook(cells=[new_markdown_cell(f"# {name}"), params, new_code_cell(PNG_CELL)],
                          metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                   "language": "python"}})
        nbformat.write(nb, root / "book" / f"{name}.ipynb")
    kit = REPO / ".cache" / "mathjax"  # reuse the fetched MathJax kit (else npm fetches it)
    if kit.is_dir():
        import shutil
        shutil.copytree(kit, root / ".cache" / "mathjax")


def build(root, *args):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "build_book.py"), "--root",
                           str(root), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_book_then_one_chapter(tmp_path):
    two_chapter_book(tmp_path)
    out = build(tmp_path, "--profile", "quick")
    assert "executing chapter 'alpha'" in out and "executing chapter 'beta'" in out
    assert re.search(r"chapter 'alpha' done in [\d.]+ s", out) and "timings (s):" in out
    html = tmp_path / "_build" / "html"
    assert (html / "book" / "01_alpha.html").is_file() and (html / "mathjax" / "tex-chtml.js").is_file()
    assert "size = 1" in (html / "book" / "01_alpha.html").read_text()

    # same profile: only the named chapter runs again
    out = build(tmp_path, "--profile", "quick", "--chapter", "beta")
    assert "executing chapter 'beta'" in out and "executing chapter 'alpha'" not in out
    # another profile: the named chapter and every chapter executed with another profile run
    out = build(tmp_path, "--profile", "full", "--chapter", "beta")
    assert "executing chapter 'beta'" in out and "executing chapter 'alpha'" in out
    assert "size = 10" in (html / "book" / "01_alpha.html").read_text()


def test_api_page_lists_every_public_module():
    mods = bb.api_modules(REPO)
    assert {"attn_lib.model.setting", "attn_lib.simulation.simulate", "attn_lib.book.cache", "attn_lib.book.style",
            "attn_lib.theory.ridge"} <= set(mods)
    assert not any(part.startswith("_") for m in mods for part in m.split("."))
    section = bb.api_section(REPO)
    for mod in mods[1:]:
        assert f".. automodule:: {mod}\n" in section
    assert bb.API_MARKER in (REPO / "book" / "api.md").read_text()
