#!/usr/bin/env python
"""Execute the book's chapters with papermill, then build the HTML from the executed copies.

Called by ``mk/book.mk`` (``make book``, ``make chapter NAME=<stem>``); it can also be run
directly::

    .venv/bin/python scripts/build_book.py --profile quick
    .venv/bin/python scripts/build_book.py --profile full --chapter hermite_linearisation

Layout
------
Sources live in the repository: ``_config.yml`` and ``_toc.yml`` at the top level, pages and
chapter notebooks (``book/NN_<stem>.ipynb``, committed without outputs) under ``book/``, the
papermill parameters in ``book/params/<profile>.yaml`` (top-level keys are chapter stems).

1. **Execute.** Each chapter notebook listed in ``_toc.yml`` runs with papermill (kernel
   ``python3``, which must be this interpreter; working directory ``book/``; parameters
   ``{"profile": <profile>, **params[<stem>]}``) into the ignored staging folder ``_executed/``,
   which mirrors the repository layout (``_executed/book/NN_<stem>.ipynb``). A cell error, an
   output on stderr (warnings) or a chapter without any figure fails the build, naming the
   chapter. Chapters run one after the other by default (``--jobs N`` runs N at once; BLAS
   threading is left as the environment sets it, so on 2 cores one at a time is fastest).
   ``_executed/manifest.json`` records the profile, the source hash and the time of each
   executed chapter.
2. **Stage.** ``_config.yml``, ``_toc.yml`` and every non-notebook file under ``book/`` are copied
   next to the executed notebooks, and the offline MathJax kit (npm package ``mathjax@3.2.2``,
   fetched once with ``npm pack`` into ``.cache/mathjax/``) goes to ``_executed/_mathjax/mathjax/``.
   ``_config.yml`` lists ``_mathjax`` in ``html_extra_path``, so Sphinx copies it to
   ``_build/html/mathjax/`` (outside ``_static/``).
3. **Build.** ``_build`` is removed, then ``jupyter-book build _executed --path-output .
   -W --keep-going`` writes ``_build/html`` with notebook execution off.

With ``--chapter STEM`` only that chapter is re-executed; the others are executed only if they
have no executed copy yet, or if it was made with another profile or from an older source.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
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
_PREFIX = re.compile(r"^\d+_")


class BuildError(RuntimeError):
    """A build step failed; the message names the chapter when there is one."""


@dataclass(frozen=True)
class Chapter:
    """A chapter notebook listed in ``_toc.yml``."""

    file: str  # toc entry, e.g. "book/01_hermite_linearisation"
    source: Path  # the notebook in the repository

    @property
    def stem(self) -> str:
        """Notebook name without the ``NN_`` prefix and the extension."""
        return stem_of(self.source)

    @property
    def rel(self) -> Path:
        return Path(self.file).with_suffix(".ipynb")


def log(msg: str) -> None:
    sys.stdout.write(f"[book] {msg}\n")  # one write per line: chapters log from parallel processes
    sys.stdout.flush()


def stem_of(path: str | os.PathLike[str]) -> str:
    """``book/01_hermite_linearisation.ipynb`` -> ``hermite_linearisation``."""
    return _PREFIX.sub("", Path(path).stem)


def toc_files(toc: dict) -> list[str]:
    """Every ``file`` entry of a Jupyter Book ``_toc.yml`` (root first, document order)."""
    out: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for k in ("root", "file"):
                if isinstance(node.get(k), str):
                    out.append(node[k])
            for k in ("parts", "chapters", "sections"):
                for child in node.get(k, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    return out


def chapters(root: Path = REPO) -> list[Chapter]:
    """Chapter notebooks in ``_toc.yml`` order (entries whose ``.ipynb`` exists in ``root``)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    found = []
    for entry in toc_files(toc):
        entry = re.sub(r"\.(ipynb|md)$", "", entry)
        nb = root / f"{entry}.ipynb"
        if nb.is_file():
            found.append(Chapter(file=entry, source=nb))
        elif not (root / f"{entry}.md").is_file():
            raise BuildError(f"_toc.yml lists {entry!r} but neither {entry}.ipynb nor {entry}.md exists")
    stems = [c.stem for c in found]
    dup = {s for s in stems if stems.count(s) > 1}
    if dup:
        raise BuildError(f"chapter stems must be unique, duplicated: {sorted(dup)}")
    return found


def load_params(root: Path, profile: str) -> dict:
    path = root / "book" / "params" / f"{profile}.yaml"
    if not path.is_file():
        avail = sorted(p.stem for p in (root / "book" / "params").glob("[!_]*.yaml"))
        raise BuildError(f"unknown profile {profile!r}: no {path.relative_to(root)} (profiles: {avail})")
    return yaml.safe_load(path.read_text()) or {}


# --------------------------------------------------------------------------- kernel
def check_kernel() -> None:
    """Make sure the Jupyter kernel ``python3`` runs this interpreter (install it if needed)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    def resolves() -> tuple[bool, str]:
        try:
            spec = KernelSpecManager().get_kernel_spec("python3")
        except NoSuchKernel:
            return True, "(native kernel)"  # jupyter_client falls back to sys.executable
        exe = spec.argv[0]
        v = sys.version_info
        if exe in {"python", f"python{v[0]}", f"python{v[0]}.{v[1]}"}:
            return True, spec.resource_dir  # jupyter_client substitutes sys.executable
        return (os.path.realpath(exe) == os.path.realpath(sys.executable)
                or Path(exe).resolve().parent == Path(sys.executable).resolve().parent), spec.resource_dir

    ok, where = resolves()
    if ok:
        return
    log(f"kernel 'python3' at {where} does not run {sys.executable}; installing it into the venv")
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"],
                   check=True, stdout=subprocess.DEVNULL)
    ok, where = resolves()
    if not ok:
        raise BuildError(f"the Jupyter kernel 'python3' ({where}) shadows the venv's; remove it "
                         f"(jupyter kernelspec remove python3) and retry")


# --------------------------------------------------------------------------- execute
def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_outputs(nb: nbformat.NotebookNode, stem: str) -> None:
    """Fail on error outputs, stderr streams (warnings) or a chapter without any figure."""
    images = 0
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                raise BuildError(f"chapter {stem!r}: cell {i} raised {out.get('ename')}: {out.get('evalue')}")
            if kind == "stream" and out.get("name") == "stderr":
                text = "".join(out.get("text", ""))[:500]
                raise BuildError(f"chapter {stem!r}: cell {i} wrote to stderr (a warning?):\n{text}")
            data = out.get("data", {})
            if any(k.startswith("image/") for k in data):
                images += 1
    if images == 0:
        raise BuildError(f"chapter {stem!r}: no figure in the executed notebook")


def execute(ch: Chapter, root: Path, stage: Path, profile: str, params: dict) -> float:
    """Run one chapter with papermill into ``stage``; return the wall time in seconds."""
    import papermill as pm

    out = stage / ch.rel
    out.parent.mkdir(parents=True, exist_ok=True)
    chapter_params = params.get(ch.stem)
    if chapter_params is None:
        raise BuildError(f"chapter {ch.stem!r}: no entry {ch.stem!r} in book/params/{profile}.yaml")
    parameters = {"profile": profile, **chapter_params}
    log(f"executing chapter {ch.stem!r} ({ch.source.relative_to(root)}, profile {profile}) ...")
    t0 = time.perf_counter()
    tmp = out.with_name(out.stem + ".partial.ipynb")
    try:
        pm.execute_notebook(str(ch.source), str(tmp), parameters=parameters, kernel_name="python3",
                            cwd=str(ch.source.parent), execution_timeout=CELL_TIMEOUT,
                            progress_bar=False, log_output=False, start_timeout=120)
    except pm.PapermillExecutionError as exc:
        raise BuildError(f"chapter {ch.stem!r} failed in cell {exc.exec_count}: {exc.ename}: "
                         f"{exc.evalue} (executed copy: {tmp.relative_to(root)})") from None
    except Exception as exc:  # timeouts, dead kernels, bad parameters
        raise BuildError(f"chapter {ch.stem!r} failed: {type(exc).__name__}: {exc}") from None
    dt = time.perf_counter() - t0
    nb = nbformat.read(tmp, as_version=4)
    check_outputs(nb, ch.stem)
    # The page shows the values actually used (papermill's "injected-parameters" cell); the
    # notebook's own defaults (the quick profile) are hidden from the HTML.
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
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
            raise BuildError("npm is needed once to fetch mathjax@%s (apt-get install npm)" % MATHJAX_VERSION)
        log(f"fetching mathjax@{MATHJAX_VERSION} with npm pack into {base.relative_to(root)}/")
        subprocess.run([npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--silent", "--pack-destination",
                        str(base)], check=True, stdout=subprocess.DEVNULL)
    tmp = kit.with_name("mathjax.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            name = member.name
            if not name.startswith("package/es5/") or not member.isfile():
                continue
            rel = name[len("package/es5/"):]
            if rel in MATHJAX_SKIP or not any(rel == f or (f.endswith("/") and rel.startswith(f))
                                                for f in MATHJAX_FILES):
                continue
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, open(dest, "wb") as fh:
                shutil.copyfileobj(src, fh)
        lic = tar.extractfile("package/LICENSE")
        (tmp / "LICENSE").write_bytes(lic.read())
    shutil.rmtree(kit, ignore_errors=True)
    os.replace(tmp, kit)
    return kit


# --------------------------------------------------------------------------- stage + build
def stage_sources(root: Path, stage: Path, chapters_: list[Chapter]) -> None:
    """Copy config, pages and assets next to the executed notebooks; drop stale files."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(root / name, stage / name)
    keep = {stage / c.rel for c in chapters_}
    sb = stage / "book"
    if sb.exists():
        for path in sorted(sb.rglob("*"), reverse=True):
            if path.is_file() and path not in keep:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    for path in (root / "book").rglob("*"):
        rel = path.relative_to(root)
        if (path.is_dir() or path.suffix == ".ipynb" or ".ipynb_checkpoints" in rel.parts
                or "__pycache__" in rel.parts or rel.parts[:2] == ("book", "params")):
            continue
        dest = stage / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    figures = stage / "book" / "figures.md"
    if figures.is_file() and FIGURE_MARKER in figures.read_text():
        figures.write_text(figures.read_text().replace(FIGURE_MARKER, figure_table(stage, chapters_)))
    api = stage / "book" / "api.md"
    if api.is_file() and API_MARKER in api.read_text():
        api.write_text(api.read_text().replace(API_MARKER, api_section(root)))
    mj = stage / "_mathjax" / "mathjax"
    shutil.rmtree(mj, ignore_errors=True)
    shutil.copytree(mathjax_kit(root), mj)


FIGURE_MARKER = "<!-- figure-list -->"
API_MARKER = "<!-- api-modules -->"
API_PACKAGE = "attn_lib"
API_FIRST = ("setting", "hermite", "data", "kernel", "simulate")  # the model, in reading order
API_LAST = ("cache", "style")  # book infrastructure


def api_modules(root: Path) -> list[str]:
    """Public modules of ``attn_lib`` (files, not imports), sub-packages after their parent."""
    pkg = root / API_PACKAGE
    mods = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts) or "__pycache__" in rel.parts:
            continue
        mods.append(".".join(parts))
    def order(m: str) -> tuple:
        leaf = m.rsplit(".", 1)[-1]
        infra = leaf in API_LAST
        first = API_FIRST.index(leaf) if leaf in API_FIRST and m.count(".") == 1 else len(API_FIRST)
        return (infra, m.count("."), first, m)

    return sorted(mods, key=order)


def api_section(root: Path) -> str:
    """``automodule`` directives for every public module (the API page stays complete)."""
    blocks = []
    for mod in api_modules(root):
        if mod == API_PACKAGE:
            continue  # the package docstring only repeats the module list
        # a subpackage re-exports its modules' names: document them once, in their modules
        members = "" if (root / Path(*mod.split("."))).is_dir() else "\n   :members:"
        blocks.append(f"## `{mod}`\n\n```{{eval-rst}}\n.. automodule:: {mod}{members}\n```\n")
    return "\n".join(blocks)


def figure_table(stage: Path, chapters_: list[Chapter]) -> str:
    """Markdown table of every figure in the executed chapters, with the regenerating command."""
    rows = ["| Chapter | Section | Figure | Regenerate with |", "| --- | --- | --- | --- |"]
    for ch in chapters_:
        nb = nbformat.read(stage / ch.rel, as_version=4)
        title, section, count = ch.stem, "", 0
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                for line in cell.source.splitlines():
                    m = re.match(r"^(#{1,3})\s+(.*)", line)
                    if m and len(m.group(1)) == 1:
                        title = m.group(2).strip()
                    elif m:
                        section = m.group(2).strip()
                continue
            for out in cell.get("outputs", []):
                if any(k.startswith("image/") for k in out.get("data", {})):
                    count += 1
                    # the title stays outside the link: link text is not parsed for math
                    name = Path(ch.file).name
                    rows.append(f"| {title} ({{doc}}`ch. {int(name[:2])} <{name}>`) | {section or '—'} "
                                f"| {count} | `make chapter NAME={ch.stem}` |")
    return "\n".join(rows) + "\n"


def build_html(root: Path, stage: Path) -> float:
    build = root / BUILD_NAME
    shutil.rmtree(build, ignore_errors=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(stage), "--path-output", str(root),
           "--builder", "html", "-W", "--keep-going"]
    log("building HTML: " + " ".join(os.path.relpath(c, root) if c.startswith(str(root)) else c for c in cmd))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout[-20000:], flush=True)
        pages = sorted(set(re.findall(r"book/(\d+_\w+)\.ipynb", proc.stdout)))
        named = f" (chapters with warnings: {', '.join(stem_of(p) for p in pages)})" if pages else ""
        raise BuildError(f"jupyter-book build failed with exit code {proc.returncode}{named}")
    warnings = [ln for ln in proc.stdout.splitlines() if "WARNING" in ln or "ERROR" in ln]
    if warnings:
        print("\n".join(warnings), flush=True)
        raise BuildError("jupyter-book build printed warnings (see above)")
    log(f"HTML built in {dt:.1f} s: {(build / 'html' / 'index.html').relative_to(root)}")
    return dt


def run(root: Path, profile: str, chapter: str | None, jobs: int = 1) -> int:
    t_all = time.perf_counter()
    root = root.resolve()
    stage = root / STAGE_NAME
    stage.mkdir(exist_ok=True)
    chs = chapters(root)
    if not chs:
        raise BuildError("_toc.yml lists no chapter notebook")
    params = load_params(root, profile)
    unknown = sorted(set(params) - {c.stem for c in chs})
    if unknown:
        raise BuildError(f"book/params/{profile}.yaml has entries for unknown chapters: {unknown}")
    if chapter is not None and chapter not in {c.stem for c in chs}:
        raise BuildError(f"no chapter {chapter!r}; chapters: {[c.stem for c in chs]}")
    manifest_path = stage / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    manifest = {k: v for k, v in manifest.items() if k in {c.stem for c in chs}}

    def up_to_date(ch: Chapter) -> bool:
        m = manifest.get(ch.stem)
        return (m is not None and (stage / ch.rel).is_file() and m.get("profile") == profile
                and m.get("source") == source_hash(ch.source))

    check_kernel()
    todo = [ch for ch in chs if chapter is None or ch.stem == chapter or not up_to_date(ch)]
    # Longest first (by the last recorded time) so that parallel workers finish together.
    todo.sort(key=lambda ch: -float(manifest.get(ch.stem, {}).get("seconds", 0.0)))
    for ch in chs:
        if ch not in todo:
            log(f"chapter {ch.stem!r}: executed copy is up to date (profile {profile}), not re-run")
    times: dict[str, float] = {}
    failures: list[str] = []
    workers = max(1, min(jobs, len(todo)))
    if todo:
        log(f"executing {len(todo)} chapter(s) with profile {profile!r}, {workers} at a time")
    # Chapters run in separate processes (each starts its own kernel), so a failure in one is
    # reported with its name while the others finish.
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(execute, ch, root, stage, profile, params): ch for ch in todo}
        for fut in as_completed(futures):
            ch = futures[fut]
            try:
                times[ch.stem] = fut.result()
            except BuildError as exc:
                failures.append(str(exc))
                log(f"FAILED: {exc}")
                manifest.pop(ch.stem, None)  # its old executed copy no longer counts
                manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
                continue
            manifest[ch.stem] = {"profile": profile, "source": source_hash(ch.source),
                                 "seconds": round(times[ch.stem], 2)}
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    if failures:
        raise BuildError(f"{len(failures)} chapter(s) failed:\n  " + "\n  ".join(failures))
    stage_sources(root, stage, chs)
    t_html = build_html(root, stage)
    total = time.perf_counter() - t_all
    log("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items())
        + f", html {t_html:.1f}, total {total:.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="full", help="book/params/<profile>.yaml (default: full)")
    ap.add_argument("--chapter", default=None, help="re-execute only this chapter stem")
    ap.add_argument("--jobs", type=int, default=1,
                    help="chapters executed at once (default: 1; each uses every BLAS thread)")
    ap.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        return run(args.root, args.profile, args.chapter, args.jobs)
    except BuildError as exc:
        print(f"[book] ERROR: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
