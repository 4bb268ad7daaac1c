"""The book's sources agree: notebooks on disk, _toc.yml, the build's chapter list, the profiles."""

from __future__ import annotations

import re

import nbformat
import pytest
import yaml

from sphinx_external_toc.parsing import parse_toc_yaml

from book_helpers import (BOOK, REPO, literal_assignments, load_build_script, parameters_cells,
                          public_modules)

bb = load_build_script()
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
CHAPTERS = bb.chapters(REPO)
TOC = list(parse_toc_yaml(REPO / "_toc.yml"))  # every document, in order
PROFILES = sorted(p.stem for p in (BOOK / "params").glob("[!_]*.yaml"))  # _*.yaml: fragments


def load_profile(name: str) -> dict:
    return yaml.safe_load((BOOK / "params" / f"{name}.yaml").read_text()) or {}


def test_there_are_chapters():
    assert NOTEBOOKS, "no chapter notebook in book/"
    assert {"quick", "full"} <= set(PROFILES)


def test_notebooks_are_numbered():
    for nb in NOTEBOOKS:
        assert re.fullmatch(r"\d{2}_[a-z0-9_]+\.ipynb", nb.name), nb.name


def test_toc_disk_and_build_agree():
    toc_notebooks = sorted(REPO / f"{e}.ipynb" for e in TOC if (REPO / f"{e}.ipynb").is_file())
    assert toc_notebooks == NOTEBOOKS, "_toc.yml and the notebooks in book/ differ"
    assert sorted(c.source for c in CHAPTERS) == NOTEBOOKS, "the build's chapter list differs"
    for entry in TOC:  # every toc entry is a page or a notebook
        assert (REPO / f"{entry}.md").is_file() or (REPO / f"{entry}.ipynb").is_file(), entry
    # the toc lists chapters in their numbered order
    assert [c.source for c in CHAPTERS] == sorted(c.source for c in CHAPTERS)


def test_every_page_in_book_is_in_the_toc():
    pages = {p.relative_to(REPO).with_suffix("").as_posix()
             for p in list(BOOK.glob("*.md")) + NOTEBOOKS}
    assert pages == set(TOC)


def test_stems_are_unique_and_match_the_profiles():
    """A profile has one section per chapter and one per page the build writes (the explorer)."""
    stems = [c.stem for c in CHAPTERS]
    pages = bb.generated_pages(REPO)
    assert len(set(stems)) == len(stems) and not set(stems) & set(pages)
    assert pages == list(bb.GENERATED_PAGES), "a page the build writes is missing from _toc.yml"
    for profile in PROFILES:
        assert set(load_profile(profile)) == set(stems) | set(pages), \
            f"book/params/{profile}.yaml keys"


def test_profiles_define_the_same_parameters():
    quick, full = load_profile("quick"), load_profile("full")
    for stem in quick:
        assert set(quick[stem]) == set(full[stem]), stem


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_equals_quick_profile(path):
    nb = nbformat.read(path, as_version=4)
    cells = parameters_cells(nb)
    assert len(cells) == 1, f"{path.name}: exactly one cell must be tagged 'parameters'"
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert cells[0] is first_code, f"{path.name}: the parameters cell must be the first code cell"
    values = literal_assignments(cells[0].source)
    expected = {"profile": "quick", **load_profile("quick")[bb.stem_of(path)]}
    assert values == expected, f"{path.name}: parameters cell differs from book/params/quick.yaml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_sources_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: cell {i} has outputs"
            assert cell.execution_count is None, f"{path.name}: cell {i} has an execution count"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.skipif(not bb.STYLE_CHECKS, reason="chapter style not yet required "
                    "(scripts/build_book.py: STYLE_CHECKS = False)")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_follows_the_chapter_style(path):
    problems = bb.style_problems(nbformat.read(path, as_version=4))
    assert not problems, f"{path.name}:\n  " + "\n  ".join(problems)


def test_figures_page_lists_the_figures():
    assert re.search(r"^```\{figure-list\}\n```$", (BOOK / "figures.md").read_text(), re.M)
    cfg = yaml.safe_load((REPO / "_config.yml").read_text())
    path = REPO / cfg["sphinx"]["local_extensions"]["figure_list"] / "figure_list.py"
    assert path.is_file() and path.is_relative_to(BOOK)  # staged with the pages


def test_api_page_documents_every_public_module():
    text = (BOOK / "api.md").read_text()
    documented = re.findall(r"^\.\. automodule:: (\S+)$", text, re.M)
    assert len(documented) == len(set(documented)), "a module is documented twice"
    missing = sorted(set(public_modules()) - set(documented))
    assert not missing, f"book/api.md has no automodule block for {missing}"
    assert set(documented) <= set(public_modules()), "book/api.md documents a module that is gone"
    for mod in documented:  # modules with their members; packages (which re-export) without
        is_package = (REPO / mod.replace(".", "/") / "__init__.py").is_file()
        has_members = f".. automodule:: {mod}\n   :members:\n" in text
        assert has_members != is_package, mod


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_page_states_its_profile(path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    # page.setup(profile) glues the profile name (attn_lib.book.page.setup)
    assert re.search(r"page\.setup\(\s*profile\s*\)", code), f"{path.name}: glue the profile name"
    assert "{glue:md}`profile`" in prose, f"{path.name}: state the profile in the text"


def test_config_has_no_intersphinx_and_offline_mathjax():
    cfg = yaml.safe_load((REPO / "_config.yml").read_text())
    exts = cfg["sphinx"].get("extra_extensions") or []
    assert "sphinx.ext.intersphinx" not in exts
    assert "intersphinx_mapping" not in (cfg["sphinx"].get("config") or {})
    path = cfg["sphinx"]["config"]["mathjax_path"]
    assert "://" not in path and not path.startswith("_static")
    assert cfg["execute"]["execute_notebooks"] == "off"
    assert cfg["repository"]["url"].startswith("https://github.com/")
    assert not (REPO / "_static").exists() or not list((REPO / "_static").rglob("*mathjax*"))


#: Words of the workshop that a reader should never meet: the book speaks of the science only
#: (history goes to CHANGES.md).
WORKSHOP = re.compile(r"\b(issues?|changelogs?|todo|fixme|derivation notes|speed targets?|"
                      r"the lead(?:'s|s)?)\b|\((?:new|changed)\)", re.I)


@pytest.mark.parametrize("path", NOTEBOOKS + sorted(BOOK.glob("*.md")), ids=lambda p: p.name)
def test_prose_has_no_workshop_words(path):
    if path.suffix == ".ipynb":
        prose = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                          if c.cell_type == "markdown")
    else:
        prose = path.read_text()
    found = sorted({m.group(0) for m in WORKSHOP.finditer(prose)})
    assert not found, f"{path.name}: {found}"
