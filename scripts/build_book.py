#!/usr/bin/env python
"""Execute the book's chapters with papermill, check them, then build the HTML with ``-W``.

Called by ``mk/book.mk`` (``make book``, ``make chapter NAME=<stem>``); it can also be run
directly::

    .venv/bin/python scripts/build_book.py --profile quick
    .venv/bin/python scripts/build_book.py --profile full --chapter hermite_linearisation

This script does only what Jupyter Book does not; the rest is the toolchain's:

1. **Execute.** Each chapter notebook of ``_toc.yml`` (read with ``sphinx_external_toc``, the
   parser Jupyter Book uses) runs with papermill (kernel ``python3``; working directory
   ``book/``; parameters ``{"profile": <profile>, **params[<stem>]}`` from
   ``book/params/<profile>.yaml``, whose top-level keys are the chapter stems and the generated
   pages of :data:`GENERATED_PAGES` that the toc lists) into the ignored
   staging folder ``_executed/``, which mirrors the repository (``_executed/book/NN_<stem>.ipynb``).
   The notebook's own ``parameters`` cell is hidden; the page shows papermill's injected one.
   A chapter is executed when ``--chapter`` names it or when its executed copy is missing or
   stale: ``_executed/manifest.json`` records, for each chapter, what its copy was made from
   (profile, parameters, hashes of the notebook and of the ``attn_lib`` sources) and the time it
   took. A failing chapter is reported by name and the others still run. While a chapter
   runs, a line every ``$ATTN_BOOK_PROGRESS_EVERY`` seconds (default 30, ``0``: none) says how
   many of its cells are done and how far its current Monte Carlo run is (:func:`progress`).
2. **Check** each executed chapter (:func:`chapter_problems`): no error output, at least one
   figure and, with ``--style-checks`` (default :data:`STYLE_CHECKS`), the chapter style of
   :func:`style_problems`.
3. **Stage.** ``_config.yml``, ``_toc.yml`` and every other file under ``book/`` (pages, the
   ``figure_list`` extension in ``book/_ext/``) are copied next to the executed notebooks, with
   the offline MathJax kit (npm package ``mathjax@3.2.2``, fetched once with ``npm pack`` into
   ``.cache/mathjax/``) in ``_executed/_mathjax/mathjax/``, which ``html_extra_path`` serves as
   ``_build/html/mathjax/``.
   The generated pages go to ``_executed/_generated/``, which ``html_extra_path`` serves at the
   site's root: when ``_toc.yml`` lists ``book/explorer`` (:data:`EXPLORER`), the theory
   explorer's standalone HTML (``attn_lib.book.explorer.write`` with the profile's ``explorer``
   parameters; its grid and checks come from the result cache) as
   ``_build/html/interactive/theory_explorer.html``, which ``book/explorer.md`` shows in an
   ``<iframe>``.
4. **Build.** ``jupyter-book build _executed --path-output . -W --keep-going`` writes a clean
   ``_build/html`` with notebook execution off. Every warning is fatal: among them any output on
   stderr (``nb_output_stderr: warn``), a broken reference or a missing page of the toc.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

REPO = Path(__file__).resolve().parents[1]
STAGE_NAME = "_executed"
BUILD_NAME = "_build"
MATHJAX_VERSION = "3.2.2"
#: Files of the mathjax npm package served with the book (paths under ``package/es5/``).
MATHJAX_FILES = ("tex-chtml.js", "output/chtml/fonts/woff-v2/", "input/tex/extensions/")
MATHJAX_SKIP = ("input/tex/extensions/all-packages.js",)
CELL_TIMEOUT = int(os.environ.get("ATTN_BOOK_CELL_TIMEOUT", "1800"))  # seconds per cell
#: Seconds between two progress lines of a running chapter (0: none).
PROGRESS_EVERY = float(os.environ.get("ATTN_BOOK_PROGRESS_EVERY", "30"))
#: The library's variable naming the file its Monte Carlo progress bars go to
#: (``attn_lib.simulation.executor.PROGRESS``; not imported, so the script runs without the library).
PROGRESS_ENV = "ATTN_BOOK_PROGRESS"
#: The chapter-style checks (:func:`style_problems`) run by default once this is True, i.e. once
#: every chapter follows the chapter style; ``--style-checks`` turns them on before.
STYLE_CHECKS = True
MAX_CELL_LINES = 15  # non-blank lines of a code cell other than the parameters
#: The folder of ``_executed/`` whose files ``html_extra_path`` copies to the site's root.
GENERATED_NAME = "_generated"
#: The theory explorer: its page (toc entry) and the HTML it shows, under ``_generated/``.
EXPLORER = "explorer"
EXPLORER_PAGE = "book/explorer"
EXPLORER_HTML = Path("interactive") / "theory_explorer.html"
#: Pages of the toc whose content the build writes, keyed by their params key.
GENERATED_PAGES = {EXPLORER: EXPLORER_PAGE}
#: The boxes every chapter has: the result it opens with and where that result holds.
BOXES = (r"\{admonition\}[ \t]+The result\b", r"\{admonition\}[ \t]+Where it holds\b")
GLUE_MIME = "application/papermill.record/"  # glued outputs, e.g. .../image/png for a figure
_PREFIX = re.compile(r"^\d+_")
_GLUE_FIGURE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{glue:figure\}[ \t]+(?P<key>\S+)[ \t]*\n"
                          r"(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
_OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*?)[ \t]*$")
_NUMREF = re.compile(r"\{numref\}`(?:[^`<]*<)?([^`<>]+)>?`")
_SHOW = re.compile(r"""\bshow\(\s*["']([^"']+)["']""")  # page.show("fig-...", ...)


class BuildError(RuntimeError):
    """A build step failed; the message names the chapter when there is one."""


@dataclass(frozen=True)
class Chapter:
    """A chapter notebook listed in ``_toc.yml``."""

    docname: str  # toc entry, e.g. "book/01_hermite_linearisation"
    source: Path  # the notebook in the repository

    @property
    def stem(self) -> str:
        """Notebook name without the ``NN_`` prefix and the extension."""
        return stem_of(self.source)

    @property
    def rel(self) -> Path:
        return Path(f"{self.docname}.ipynb")


def log(msg: str) -> None:
    print(f"[book] {msg}", flush=True)


def stem_of(path: str | os.PathLike[str]) -> str:
    """``book/01_hermite_linearisation.ipynb`` -> ``hermite_linearisation``."""
    return _PREFIX.sub("", Path(path).stem)


def chapters(root: Path = REPO) -> list[Chapter]:
    """Chapter notebooks in ``_toc.yml`` order (the toc's documents that are ``.ipynb`` files)."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    found = [Chapter(doc, root / f"{doc}.ipynb") for doc in parse_toc_yaml(root / "_toc.yml")
             if (root / f"{doc}.ipynb").is_file()]
    stems = [c.stem for c in found]
    if len(set(stems)) < len(stems):
        raise BuildError(f"chapter stems must be unique: {stems}")
    return found


def generated_pages(root: Path = REPO) -> list[str]:
    """Params keys of the generated pages (:data:`GENERATED_PAGES`) that ``_toc.yml`` lists."""
    from sphinx_external_toc.parsing import parse_toc_yaml

    docs = set(parse_toc_yaml(root / "_toc.yml"))
    return [key for key, doc in GENERATED_PAGES.items() if doc in docs]


def load_params(root: Path, profile: str) -> dict:
    path = root / "book" / "params" / f"{profile}.yaml"
    if not path.is_file():
        avail = sorted(p.stem for p in (root / "book" / "params").glob("[!_]*.yaml"))
        raise BuildError(f"unknown profile {profile!r}: no {path.relative_to(root)} (profiles: {avail})")
    return yaml.safe_load(path.read_text()) or {}


# --------------------------------------------------------------------------- checks
def _is_figure(mime: str) -> bool:
    return mime.startswith(("image/", GLUE_MIME + "image/"))


def _cells(nb: nbformat.NotebookNode) -> list[tuple[int, nbformat.NotebookNode]]:
    """``(index, cell)`` numbered as in the source notebook (without papermill's injected cell)."""
    return list(enumerate(c for c in nb.cells
                          if "injected-parameters" not in c.metadata.get("tags", [])))


def output_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Error outputs, and a chapter without any figure (displayed or glued)."""
    problems, figures = [], 0
    for i, cell in _cells(nb):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i} raised {out.get('ename')}: {out.get('evalue')}")
            figures += any(_is_figure(k) for k in out.get("data", {}))
    return problems + ([] if figures else ["no figure in the executed notebook"])


def glue_figures(markdown: str) -> list[tuple[str, dict[str, str], str]]:
    """``(key, options, caption)`` of every ``{glue:figure}`` directive in ``markdown``."""
    found = []
    for m in _GLUE_FIGURE.finditer(markdown):
        lines, options = m["body"].splitlines(), {}
        while lines and (opt := _OPTION.match(lines[0])):
            options[opt[1]] = opt[2]
            lines.pop(0)
        found.append((m["key"], options, "\n".join(lines).strip()))
    return found


def style_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Departures from the chapter style, in a notebook's sources (and outputs, if executed).

    * no code cell but the parameters has more than :data:`MAX_CELL_LINES` non-blank lines;
    * every figure is glued (``page.show(name, ...)``, no displayed image output) and shown by a
      ``{glue:figure}`` directive with a ``:name:`` and a caption, whose label the prose refers
      to with ``{numref}``; there is at least one such figure;
    * the first cell opens with the boxed statement (an admonition titled "The result") and the
      chapter has a box "Where it holds" (:data:`BOXES`).
    """
    problems, glued = [], set()
    prose = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for i, cell in _cells(nb):
        if cell.cell_type != "code":
            continue
        lines = sum(bool(line.strip()) for line in cell.source.splitlines())
        if lines > MAX_CELL_LINES and "parameters" not in cell.metadata.get("tags", []):
            problems.append(f"code cell {i} has {lines} non-blank lines (at most {MAX_CELL_LINES})")
        glued.update(_SHOW.findall(cell.source))
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if any(k.startswith("image/") for k in data):
                problems.append(f"code cell {i} displays a figure: glue it with page.show")
            if any(_is_figure(k) for k in data):
                glued.add(out.get("metadata", {}).get("scrapbook", {}).get("name"))
    shown = glue_figures(prose)
    referred = {label.lower() for label in _NUMREF.findall(prose)}
    for key, options, caption in shown:
        label = options.get("name")
        if not label:
            problems.append(f"{{glue:figure}} {key} has no :name: (label)")
        elif label.lower() not in referred:
            problems.append(f"figure {label} is not referred to with {{numref}}`{label}`")
        if not caption:
            problems.append(f"{{glue:figure}} {key} has no caption")
    for name in sorted(glued - {key for key, _, _ in shown} - {None}):
        problems.append(f"figure {name} is glued but not shown with a {{glue:figure}} directive")
    first = nb.cells[0].source if nb.cells and nb.cells[0].cell_type == "markdown" else ""
    if not re.search(BOXES[0], first):
        problems.append("the first cell has no boxed statement ({admonition} The result)")
    if not re.search(BOXES[1], prose):
        problems.append("no box {admonition} Where it holds")
    return problems + ([] if shown else ["no {glue:figure} directive"])


def check_chapter(nb: nbformat.NotebookNode, stem: str, style: bool) -> None:
    """Raise :class:`BuildError` naming the chapter if it has any problem (see above)."""
    problems = output_problems(nb) + (style_problems(nb) if style else [])
    if problems:
        raise BuildError(f"chapter {stem!r}: " + f"\n  chapter {stem!r}: ".join(problems))


# --------------------------------------------------------------------------- execute
def source_hash(*paths: Path) -> str:
    """SHA-256 of the files' contents, in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def made_from(ch: Chapter, root: Path, profile: str, params: dict) -> dict:
    """What the executed copy of ``ch`` depends on (recorded in the manifest)."""
    return {"profile": profile, "parameters": params.get(ch.stem), "source": source_hash(ch.source),
            "library": source_hash(*sorted((root / "attn_lib").rglob("*.py")))}


def last_state(path: Path) -> str:
    """The last state a tqdm bar wrote to ``path`` (its text after the last ``\\r`` or newline)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    parts = [p.strip() for p in re.split(r"[\r\n]", text) if p.strip()]
    return parts[-1] if parts else ""


@contextmanager
def progress(stem: str, every: float = PROGRESS_EVERY) -> Iterator[dict | bool]:
    """Report a running chapter: every ``every`` s, log its cell and its Monte Carlo progress.

    Yields papermill's ``progress_bar`` argument: a tqdm bar over the cells written to a
    temporary file. The library's Monte Carlo bars go to another one, named to the kernel by
    ``$ATTN_BOOK_PROGRESS`` (the kernel inherits this process's environment). A thread reads the
    last state of both and logs it, so the build shows where a long chapter is while nothing is
    written to the notebook's outputs. ``every = 0`` turns it off.
    """
    if every <= 0:
        yield False
        return
    old = os.environ.get(PROGRESS_ENV)
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="attn-book-progress-") as tmp, \
            open(Path(tmp) / "cells", "w", encoding="utf-8") as cells:
        mc = Path(tmp) / "monte_carlo"
        t0 = time.perf_counter()

        def report() -> None:
            while not stop.wait(every):
                states = [s for s in (last_state(Path(cells.name)), last_state(mc)) if s]
                log(f"  {stem}, {time.perf_counter() - t0:.0f} s: " + ("; ".join(states) or "starting"))

        os.environ[PROGRESS_ENV] = str(mc)
        thread = threading.Thread(target=report, daemon=True)
        thread.start()
        try:
            yield {"file": cells, "mininterval": 0, "miniters": 1,
                   "bar_format": "{n_fmt} of {total_fmt} cells done"}
        finally:
            stop.set()
            thread.join()
            if old is None:
                os.environ.pop(PROGRESS_ENV, None)
            else:
                os.environ[PROGRESS_ENV] = old


def execute(ch: Chapter, stage: Path, profile: str, params: dict, style: bool) -> float:
    """Run one chapter with papermill into ``stage`` and check it; return the wall time (s)."""
    import papermill as pm

    out = stage / ch.rel
    out.parent.mkdir(parents=True, exist_ok=True)
    if ch.stem not in params:
        raise BuildError(f"chapter {ch.stem!r}: no entry {ch.stem!r} in book/params/{profile}.yaml")
    log(f"executing chapter {ch.stem!r} ({ch.rel}, profile {profile}) ...")
    t0 = time.perf_counter()
    tmp = out.with_name(out.stem + ".partial.ipynb")
    try:
        with progress(ch.stem) as cells:
            pm.execute_notebook(str(ch.source), str(tmp),
                                parameters={"profile": profile, **params[ch.stem]},
                                kernel_name="python3", cwd=str(ch.source.parent),
                                execution_timeout=CELL_TIMEOUT, progress_bar=cells,
                                log_output=False, start_timeout=120)
    except pm.PapermillExecutionError as exc:
        raise BuildError(f"chapter {ch.stem!r} failed in cell {exc.exec_count}: {exc.ename}: "
                         f"{exc.evalue} (executed copy: {tmp})") from None
    except Exception as exc:  # timeouts, dead kernels, bad parameters
        raise BuildError(f"chapter {ch.stem!r} failed: {type(exc).__name__}: {exc}") from None
    dt = time.perf_counter() - t0
    nb = nbformat.read(tmp, as_version=4)
    check_chapter(nb, ch.stem, style)
    for cell in nb.cells:  # the page shows papermill's injected values, collapsed
        tags = cell.get("metadata", {}).get("tags", [])
        extra = ("remove-cell" if "parameters" in tags else
                 "hide-cell" if "injected-parameters" in tags else None)
        if extra and extra not in tags:
            cell.metadata["tags"] = [*tags, extra]
    nbformat.write(nb, tmp)
    os.replace(tmp, out)
    log(f"chapter {ch.stem!r} done in {dt:.1f} s")
    return dt


# --------------------------------------------------------------------------- mathjax
def mathjax_kit(root: Path) -> Path:
    """Folder holding the minimal MathJax kit (fetched with ``npm pack`` on first use)."""
    base = root / ".cache" / "mathjax"
    kit = base / MATHJAX_VERSION / "mathjax"
    if (kit / "tex-chtml.js").is_file():
        return kit
    base.mkdir(parents=True, exist_ok=True)
    tgz = base / f"mathjax-{MATHJAX_VERSION}.tgz"
    if not tgz.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise BuildError(f"npm is needed once to fetch mathjax@{MATHJAX_VERSION} "
                             "(apt-get install npm)")
        log(f"fetching mathjax@{MATHJAX_VERSION} with npm pack into {base}/")
        subprocess.run([npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--silent", "--pack-destination",
                        str(base)], check=True, stdout=subprocess.DEVNULL)
    tmp = kit.with_name("mathjax.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            rel = member.name.removeprefix("package/es5/")
            if (rel == member.name or not member.isfile() or rel in MATHJAX_SKIP
                    or not any(rel == f or (f.endswith("/") and rel.startswith(f))
                               for f in MATHJAX_FILES)):
                continue
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(tar.extractfile(member).read())
        (tmp / "LICENSE").write_bytes(tar.extractfile("package/LICENSE").read())
    shutil.rmtree(kit, ignore_errors=True)
    os.replace(tmp, kit)
    return kit


# --------------------------------------------------------------------------- stage + build
def stage_sources(root: Path, stage: Path, chapters_: list[Chapter]) -> None:
    """Copy config, pages, extensions and MathJax next to the executed notebooks; drop the rest."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, stage / name)
    keep = {stage / c.rel for c in chapters_}
    if (stage / "book").exists():
        for path in sorted((stage / "book").rglob("*"), reverse=True):
            if path.is_file() and path not in keep:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    for path in (root / "book").rglob("*"):
        rel = path.relative_to(root)
        if (path.is_dir() or path.suffix == ".ipynb" or ".ipynb_checkpoints" in rel.parts
                or "__pycache__" in rel.parts or rel.parts[:2] == ("book", "params")):
            continue
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, stage / rel)
    generated = stage / GENERATED_NAME  # html_extra_path: must exist, even empty
    shutil.rmtree(generated, ignore_errors=True)
    generated.mkdir()
    mj = stage / "_mathjax" / "mathjax"
    shutil.rmtree(mj, ignore_errors=True)
    shutil.copytree(mathjax_kit(root), mj)


def write_explorer(stage: Path, profile: str, params: dict) -> float:
    """Write the theory explorer's HTML into the staged ``_generated/``; return the wall time (s)."""
    from attn_lib.book import explorer

    t0 = time.perf_counter()
    path = stage / GENERATED_NAME / EXPLORER_HTML
    try:
        info = explorer.write(path, profile=profile, **params)
    except (TypeError, ValueError) as exc:
        raise BuildError(f"page {EXPLORER!r}: {exc}") from None
    dt = time.perf_counter() - t0
    log(f"page {EXPLORER!r}: {info['points']} settings, {info['checks']} Monte Carlo checks, "
        f"{info['bytes']:,} bytes, {dt:.1f} s: {path.relative_to(stage)}")
    return dt


def build_html(root: Path, stage: Path) -> float:
    """``jupyter-book build`` of ``stage`` into a clean ``_build/html``; every warning is fatal."""
    shutil.rmtree(root / BUILD_NAME, ignore_errors=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(stage), "--path-output", str(root),
           "--builder", "html", "-W", "--keep-going"]
    log(f"building HTML: jupyter-book build {STAGE_NAME} --path-output . --builder html -W --keep-going")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        print(proc.stdout[-20000:], flush=True)
        pages = sorted({stem_of(p) for p in re.findall(r"book/(\d+_\w+)\.ipynb[:\d ]*WARNING",
                                                       proc.stdout)})
        named = f" (chapters with warnings: {', '.join(pages)})" if pages else ""
        raise BuildError(f"jupyter-book build failed with exit code {proc.returncode}{named}")
    dt = time.perf_counter() - t0
    log(f"HTML built in {dt:.1f} s: {BUILD_NAME}/html/index.html")
    return dt


def run(root: Path, profile: str, chapter: str | None, style: bool = STYLE_CHECKS) -> int:
    t_all = time.perf_counter()
    root = root.resolve()
    stage = root / STAGE_NAME
    stage.mkdir(exist_ok=True)
    chs = chapters(root)
    if not chs:
        raise BuildError("_toc.yml lists no chapter notebook")
    params = load_params(root, profile)
    pages = generated_pages(root)
    unknown = sorted(set(params) - {c.stem for c in chs} - set(pages))
    if unknown:
        raise BuildError(f"book/params/{profile}.yaml has entries for unknown chapters: {unknown}")
    missing = sorted(set(pages) - set(params))
    if missing:
        raise BuildError(f"book/params/{profile}.yaml has no entry for the pages {missing}")
    if chapter is not None and chapter not in {c.stem for c in chs}:
        raise BuildError(f"no chapter {chapter!r}; chapters: {[c.stem for c in chs]}")
    manifest_path = stage / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    manifest = {k: v for k, v in manifest.items() if k in {c.stem for c in chs}}

    times: dict[str, float] = {}
    failures: list[str] = []
    for ch in chs:
        inputs = made_from(ch, root, profile, params)
        old = manifest.pop(ch.stem, {})  # until it runs again, a stale copy does not count
        fresh = (stage / ch.rel).is_file() and all(old.get(k) == v for k, v in inputs.items())
        if fresh and ch.stem != chapter:
            log(f"chapter {ch.stem!r}: executed copy is up to date (profile {profile}), not re-run")
            manifest[ch.stem] = old
            continue
        try:
            times[ch.stem] = execute(ch, stage, profile, params, style)
            manifest[ch.stem] = {**inputs, "seconds": round(times[ch.stem], 2)}
        except BuildError as exc:
            failures.append(str(exc))
            log(f"FAILED: {exc}")
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    if failures:
        raise BuildError(f"{len(failures)} chapter(s) failed:\n  " + "\n  ".join(failures))
    stage_sources(root, stage, chs)
    if EXPLORER in pages:
        times[EXPLORER] = write_explorer(stage, profile, params[EXPLORER])
    t_html = build_html(root, stage)
    log("timings (s): " + "".join(f"{k} {v:.1f}, " for k, v in times.items())
        + f"html {t_html:.1f}, total {time.perf_counter() - t_all:.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="full", help="book/params/<profile>.yaml (default: full)")
    ap.add_argument("--chapter", default=None, help="re-execute this chapter stem (and stale ones)")
    ap.add_argument("--style-checks", action=argparse.BooleanOptionalAction, default=STYLE_CHECKS,
                    help=f"check the chapter style of each executed chapter (default: {STYLE_CHECKS})")
    ap.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        return run(args.root, args.profile, args.chapter, args.style_checks)
    except BuildError as exc:
        print(f"[book] ERROR: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
