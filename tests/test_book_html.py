"""The rendered book in _build/html (built first by `make book PROFILE=quick`, as `make test` does).

Static checks on every chapter page (exists, has its figures, no error output, math left only in
MathJax's delimiters, offline assets), then headless Chromium: MathJax must have typeset the math
(``mjx-container`` elements in the rendered DOM), and a screenshot of each chapter page is kept in
``_build/screenshots/`` as an artefact.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from book_helpers import HTML, REPO, figure_rows, load_build_script, public_modules
from devtools import Browser

bb = load_build_script()
CHAPTERS = bb.chapters(REPO)
SCREENSHOTS = REPO / "_build" / "screenshots"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def html_dir() -> Path:
    if not (HTML / "index.html").is_file():
        pytest.fail("no built book in _build/html: run `make book PROFILE=quick` first "
                    "(`make test` does)")
    return HTML


def page_path(html_dir: Path, chapter) -> Path:
    return html_dir / chapter.rel.with_suffix(".html")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def article(text: str) -> str:
    """The main content of a page (without the navigation and scripts)."""
    m = re.search(r'<article class="bd-article"[^>]*>(.*?)</article>', text, re.S)
    assert m, "no <article> in page"
    return m.group(1)


def strip_math_and_code(text: str) -> str:
    """Remove MathJax-delimited math, code blocks and scripts, leaving prose and outputs."""
    text = re.sub(r"<script.*?</script>", "", text, flags=re.S)
    text = re.sub(r"<pre.*?</pre>", "", text, flags=re.S)
    text = re.sub(r"<code.*?</code>", "", text, flags=re.S)
    text = re.sub(r'<span class="math[^"]*">.*?</span>', "", text, flags=re.S)
    text = re.sub(r'<div class="math[^"]*">.*?</div>', "", text, flags=re.S)
    return html.unescape(text)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_chapter_page_exists_with_figures(html_dir, chapter):
    page = page_path(html_dir, chapter)
    assert page.is_file(), f"missing page for chapter {chapter.stem}: {page}"
    body = article(read(page))
    images = re.findall(r'<img[^>]+src="([^"]+)"', body)
    assert images, f"chapter {chapter.stem} has no figure"
    for src in images:
        assert "://" not in src and not src.startswith("data:"), src
        assert (page.parent / src).resolve().is_file(), f"{chapter.stem}: broken image {src}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_chapter_page_has_no_error_output(html_dir, chapter):
    body = article(read(page_path(html_dir, chapter)))
    assert "Traceback" not in body
    assert not re.search(r'class="[^"]*\boutput (stderr|traceback|error)\b', body)
    assert not re.search(r'class="[^"]*\b(system-message|problematic)\b', body)
    # the house style shows results as numbered, glued figures rather than cell outputs
    assert re.search(r'<figure[^>]*\bid="fig-', body), "no numbered figure on the page"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_chapter_page_states_its_profile(html_dir, chapter):
    manifest = json.loads((REPO / bb.STAGE_NAME / "manifest.json").read_text())
    profile = manifest[chapter.stem]["profile"]
    text = re.sub(r"\s+", " ", strip_math_and_code(article(read(page_path(html_dir, chapter)))))
    assert re.search(rf"executed with the <strong>{profile}</strong> profile", text), \
        f"chapter {chapter.stem} does not state its profile ({profile})"


def all_pages(html_dir: Path) -> list[Path]:
    return sorted(p for p in (html_dir / "book").glob("*.html"))


def test_figure_list_has_every_numbered_figure(html_dir):
    numbered = []  # (href from book/figures.html, number) of each numbered figure, in toc order
    for chapter_page in (page_path(html_dir, c) for c in CHAPTERS):
        numbered += [(f"{chapter_page.name}#{fig_id}", number) for fig_id, number in re.findall(
            r'<figure[^>]*\bid="([^"]+)"(?:(?!</figure>).)*?'
            r'<span class="caption-number">(Fig\. [\d.]+) </span>', read(chapter_page), re.S)]
    rows = figure_rows(html_dir)
    assert [(href, number) for href, number, _, _ in rows] == numbered
    for href, _, caption, command in rows:
        assert caption and re.fullmatch(r"make chapter NAME=[a-z0-9_]+", command), (href, command)
    if not rows:
        assert "No numbered figure." in read(html_dir / "book" / "figures.html")


def test_api_page_has_every_public_module(html_dir):
    text = read(html_dir / "book" / "api.html")
    missing = [m for m in public_modules() if f'id="module-{m}"' not in text]
    assert not missing, f"modules missing from the API page: {missing}"


def test_math_is_only_in_mathjax_delimiters(html_dir):
    for page in all_pages(html_dir):
        text = read(page)
        prose = strip_math_and_code(article(text))
        for raw in (r"\(", r"\)", r"\[", "$$"):
            assert raw not in prose, f"{page.name}: raw {raw!r} outside math"
        raw_math = re.search(r"\$[^$<>\s][^$<>]{0,80}\$", prose)  # the book has no dollar amounts
        assert not raw_math, f"{page.name}: unparsed math {raw_math.group(0)!r}"
        assert "{glue" not in prose and "{cite" not in prose, f"{page.name}: unresolved role"


def test_mathjax_is_served_offline(html_dir):
    for page in all_pages(html_dir) + [html_dir / "index.html"]:
        text = read(page)
        for url in re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', text):
            assert not url.startswith(("http:", "https:", "//")), f"{page.name} loads {url}"
    page = page_path(html_dir, CHAPTERS[0])
    srcs = re.findall(r'<script[^>]+src="([^"]*mathjax[^"]*)"', read(page))
    assert srcs, "no MathJax script on a chapter page"
    target = (page.parent / srcs[0].split("?")[0]).resolve()
    assert target == (html_dir / "mathjax" / "tex-chtml.js").resolve() and target.is_file()
    assert (html_dir / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    assert not list((html_dir / "_static").rglob("*mathjax*"))
    size = sum(p.stat().st_size for p in (html_dir / "mathjax").rglob("*") if p.is_file())
    assert size < 3_000_000


# ----------------------------------------------------------------------------- browser
def find_browser() -> str:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    subprocess.run(["bash", str(REPO / "scripts" / "ensure_chromium.sh")], check=True)
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    pytest.fail("no headless Chromium available (scripts/ensure_chromium.sh failed)")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def server(html_dir):
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()
            thread.join()


@pytest.fixture(scope="module")
def browser() -> str:
    return find_browser()


def chromium(browser: str, url: str, *extra: str) -> str:
    with tempfile.TemporaryDirectory() as profile_dir:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile_dir}",
               "--virtual-time-budget=20000", *extra, url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                              env={**os.environ, "HOME": profile_dir})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.stem)
def test_browser_renders_math_and_figures(browser, server, chapter):
    url = f"{server}/{chapter.rel.with_suffix('.html').as_posix()}"
    dom = chromium(browser, url, "--dump-dom")
    assert "<mjx-container" in dom, f"{chapter.stem}: MathJax did not typeset the page"
    assert "<mjx-merror" not in dom and "Math input error" not in dom, f"{chapter.stem}: math error"
    assert not re.search(r"(?<!\\)\\\(", strip_math_and_code(article(dom))), \
        f"{chapter.stem}: raw \\( left after MathJax"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"{chapter.stem}.png"
    shot.unlink(missing_ok=True)
    chromium(browser, url, "--hide-scrollbars", "--window-size=1280,3000", f"--screenshot={shot}")
    assert shot.is_file() and shot.stat().st_size > 20_000, f"no screenshot of {chapter.stem}"


# ----------------------------------------------------------------------------- equations that fit
WIDTHS = (1280, 390)  # a laptop window and a phone (CSS pixels)
_MEASURE = r"""
<!doctype html><html><body><pre id="report">pending</pre><script>
// Load every page in an iframe of each width, wait for MathJax and book/_static/math-fit.js,
// then measure each display equation. It is cut off when its box reaches past the right edge of
// the nearest box that clips it (an ancestor with overflow other than visible, or the viewport),
// or when its content does and no box of its own (mjx-container, div.math) scrolls. It scrolls
// when its own box is narrower than its content.
const PAGES = __PAGES__, WIDTHS = __WIDTHS__;
const sleep = ms => new Promise(ok => setTimeout(ok, ms));
function measure(win) {
  const doc = win.document, vw = doc.documentElement.clientWidth, cut = [], scrolled = [];
  const scrolls = e => e && ["auto", "scroll"].includes(win.getComputedStyle(e).overflowX);
  const clip = e => {
    let right = vw;
    for (let a = e.parentElement; a; a = a.parentElement)
      if (win.getComputedStyle(a).overflowX !== "visible")
        right = Math.min(right, a.getBoundingClientRect().right);
    return right;
  };
  const eqs = doc.querySelectorAll('article mjx-container[display="true"]');
  for (const m of eqs) {
    const own = [m, m.closest("div.math")].find(scrolls), box = own || m;
    const inner = m.firstElementChild || m;
    const boxRight = box.getBoundingClientRect().right;
    const contentRight = Math.max(boxRight, inner.getBoundingClientRect().right);
    const hidden = own ? own.scrollWidth - own.clientWidth : contentRight - clip(m);
    const what = {eq: (m.getAttribute("aria-label") || m.textContent).slice(0, 60),
                  box: Math.round(boxRight), clip: Math.round(clip(box)), hidden: hidden};
    if (boxRight > clip(box) + 1 || (!own && hidden > 1)) cut.push(what);
    else if (hidden > 1) scrolled.push(what);
  }
  return {equations: eqs.length, cut: cut, scrolled: scrolled};
}
(async () => {
  const out = [];
  for (const width of WIDTHS) for (const page of PAGES) {
    const f = document.createElement("iframe");
    f.style.width = width + "px"; f.style.height = "900px"; f.style.border = "0";
    await new Promise(ok => { f.onload = ok; f.src = page; document.body.appendChild(f); });
    const w = f.contentWindow;
    if (w.MathJax && w.MathJax.startup && w.MathJax.startup.promise) await w.MathJax.startup.promise;
    for (let i = 0; i < 50 && !w.document.documentElement.hasAttribute("data-math-fitted"); i++)
      await sleep(100);
    out.push(Object.assign({page: page, width: width,
                            fitted: w.document.documentElement.hasAttribute("data-math-fitted")},
                           measure(w)));
    f.remove();
  }
  document.getElementById("report").textContent = JSON.stringify(out);
})();
</script></body></html>
"""


def equation_pages(html_dir: Path) -> list[str]:
    """Pages of ``book/`` with display math (every chapter and derivation)."""
    return [p.relative_to(html_dir).as_posix() for p in all_pages(html_dir)
            if '<div class="math notranslate nohighlight"' in read(p)]


def measure_equations(browser: str, html_dir: Path, pages: list[str]) -> list[dict]:
    """One headless Chromium run that measures every display equation of ``pages`` at each of
    :data:`WIDTHS` (see ``_MEASURE``)."""
    harness = _MEASURE.replace("__PAGES__", json.dumps(["/" + p for p in pages])) \
                      .replace("__WIDTHS__", json.dumps(list(WIDTHS))).encode()

    class Handler(_QuietHandler):
        def do_GET(self):
            if self.path != "/__measure__.html":
                return super().do_GET()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(harness)))
            self.end_headers()
            self.wfile.write(harness)

    handler = functools.partial(Handler, directory=str(html_dir))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            dom = chromium(browser, f"http://127.0.0.1:{httpd.server_address[1]}/__measure__.html",
                           "--dump-dom", "--virtual-time-budget=300000", "--window-size=1400,1000")
        finally:
            httpd.shutdown()
            thread.join()
    m = re.search(r'<pre id="report">(.*?)</pre>', dom, re.S)
    assert m and m.group(1) != "pending", "the measurement did not finish"
    return json.loads(html.unescape(m.group(1)))


def test_no_display_equation_is_cut_off(browser, html_dir):
    """At 1280 px every display equation fits the column (book/_static/math-fit.js shrinks the
    wide ones, to 70 % at most); at 390 px one that still does not fit scrolls in its own box.
    Before math-fit.js, 4 equations of chapter 3 alone were wider than the 676 px column at
    1280 px (by up to 201 px) and had their right part hidden."""
    pages = equation_pages(html_dir)
    assert len(pages) >= 9, pages
    report = measure_equations(browser, html_dir, pages)
    assert len(report) == len(pages) * len(WIDTHS)
    for r in report:
        where = f"{r['page']} at {r['width']} px"
        assert r["equations"] > 0 and r["fitted"], f"{where}: MathJax or math-fit.js did not run"
        assert not r["cut"], f"{where}: {len(r['cut'])} of {r['equations']} display equations " \
                             f"cut off, e.g. {r['cut'][0]}"
        if r["width"] == 1280:
            assert not r["scrolled"], f"{where}: {len(r['scrolled'])} display equations do " \
                                      f"not fit the column, e.g. {r['scrolled'][0]}"


# ----------------------------------------------------------------------------- theory explorer
_WAIT_FOR_EXPLORER = """(async () => {
  for (let i = 0; i < 400; i++) {
    const doc = window.Bokeh && Bokeh.documents[0], curves = doc && doc.get_model_by_name("curves");
    if (curves && curves.data.g && curves.data.g.length)
      return {g: curves.data.g.length, meta: (a => a instanceof Map ? a.get("meta_json") : a.meta_json)(
                doc.get_model_by_name("explorer").args),
              canvas: document.querySelectorAll("div.bk-Column").length};
    await new Promise(ok => setTimeout(ok, 50));
  }
  return null;
})()"""

# Set the controls (a Select takes the text, a Slider the number), wait for the callback to have
# redrawn, and read the plotted sources back.
_MOVE = """(async (values) => {
  const sleep = ms => new Promise(ok => setTimeout(ok, ms));
  const doc = Bokeh.documents[0], curves = doc.get_model_by_name("curves"), before = curves.data;
  for (const [name, v] of Object.entries(values)) {
    const w = doc.get_model_by_name(name);
    w.value = typeof w.value === "string" ? v[0] : v[1];
  }
  for (let i = 0; i < 400 && curves.data === before; i++) await sleep(25);
  let last;
  do { last = curves.data; await sleep(100); } while (curves.data !== last);
  const plain = o => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Array.from(v)]));
  return {curves: plain(curves.data), checks: plain(doc.get_model_by_name("checks").data),
          note: doc.get_model_by_name("note").text};
})(__VALUES__)"""


def explorer_file(html_dir: Path) -> Path:
    path = html_dir / bb.EXPLORER_HTML
    assert path.is_file(), f"the build wrote no explorer page {path}"
    return path


def test_explorer_page_loads_from_file_without_the_network(browser, html_dir):
    """The book's explorer page, opened from file://, shows the explorer in its iframe (BokehJS
    drew the curves) and makes no request but to file: and data: URLs."""
    target = explorer_file(html_dir)
    with Browser(browser) as chrome:
        tab = chrome.open((html_dir / "book" / "explorer.html").as_uri())
        ready = tab.evaluate(_WAIT_FOR_EXPLORER, tab.frame_context(target.name), timeout=60)
        urls = tab.requests()
    assert ready is not None, "BokehJS did not draw the explorer in the iframe"
    meta = json.loads(ready["meta"])
    assert ready["g"] == len(meta["g"]) > 1
    assert target.as_uri() in urls  # the iframe, and the book page's own MathJax
    assert any(u.startswith((html_dir / "mathjax" / "tex-chtml.js").as_uri()) for u in urls)
    remote = [u for u in urls if not u.startswith(("file:", "data:"))]
    assert not remote, f"the explorer page made network requests: {remote[:5]}"


def _plotted(values: list) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


@pytest.mark.filterwarnings("ignore::attn_lib.DomainWarning")  # the explorer draws both theories
def test_explorer_moves_to_a_grid_point_and_plots_its_theory(browser, html_dir):
    """Moving the controls redraws the theory of that setting: the plotted curves equal
    attention_error (limit and finite size) and ridge_error there within 1e-9, and the Monte
    Carlo markers are the cached checks' means and error bars."""
    from attn_lib.book import explorer as explorer_page
    from attn_lib.studies import explorer
    from attn_lib.theory import attention_error, ridge_error

    with Browser(browser) as chrome:
        tab = chrome.open(explorer_file(html_dir).as_uri())
        ready = tab.evaluate(_WAIT_FOR_EXPLORER, timeout=60)
        assert ready is not None, "BokehJS did not draw the explorer"
        meta = json.loads(ready["meta"])
        axes, g = meta["axes"], np.array(meta["g"])
        params = bb.load_params(REPO, meta["profile"])[bb.EXPLORER]
        first_mc = params["mc_points"][0]
        points = [{a: axes[a][-1] for a in explorer.AXES},  # the last value of every axis
                  {"f": axes["f"][min(1, len(axes["f"]) - 1)], "c": axes["c"][0],
                   "snr": axes["snr"][0], "alignment": axes["alignment"][0],
                   "norm": axes["norm"][-1]},
                  first_mc]
        for point in points:
            values = {a: [v if a == "f" else f"{v:g}", v] for a, v in point.items()}
            shown = tab.evaluate(_MOVE.replace("__VALUES__", json.dumps(values)), timeout=60)
            s = explorer.setting(*(point[a] for a in explorer.AXES))
            curves = {k: _plotted(v) for k, v in shown["curves"].items()}
            assert np.array_equal(curves["g"], g)
            limit = attention_error(s, explorer.theory_gammas(s, g))
            ridge = ridge_error(s, s.c * g)
            assert np.abs(curves["attention"] - limit).max() < 1e-9, point
            assert np.abs(curves["ridge"] - ridge).max() < 1e-9, point
            assert np.abs(curves["gap"] - (limit - ridge)).max() < 1e-9, point
            for i, n in enumerate(meta["n"]):
                finite = curves[f"finite_{i}"]
                assert f"n = {n}: δ = {s.delta(n):.3f}" in shown["note"], shown["note"]
                if "does not cover" in shown["note"].split(f"n = {n}:")[1].split(";")[0]:
                    assert np.isnan(finite).all()
                    continue
                theory = attention_error(s, explorer.theory_gammas(s, g, n), n=n)
                assert np.abs(finite - theory).max() < 1e-9, (point, n)
                limit_applies = np.abs(theory - limit).max() <= explorer_page.AGREE
                said = shown["note"].split(f"n = {n}:")[1].split(";")[0]
                assert ("the limit applies" in said) == limit_applies, said
                assert ("read the finite-size curve" in said) != limit_applies, said
            if point is first_mc:  # the markers: the cached Monte Carlo of that setting
                mc = explorer.monte_carlo([s], params["mc_g"], n=params["mc_n"],
                                          trials=params["mc_trials"], seed=params["seed"])
                bars = explorer_page.checks(mc)
                assert np.array_equal(shown["checks"]["g"], params["mc_g"])
                for name, value in bars.items():
                    assert np.allclose(shown["checks"][name], value[0], rtol=0, atol=1e-12), name
            elif point not in params["mc_points"]:
                assert shown["checks"]["g"] == [] and "No Monte Carlo check" in shown["note"]
        thrown = [e["params"]["exceptionDetails"] for e in chrome.events
                  if e.get("method") == "Runtime.exceptionThrown"]
    assert not thrown, f"the explorer's JavaScript raised: {thrown[0]}"


@functools.cache
def metrics():
    """``scripts/book_metrics.py`` (not a package) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("attn_book_metrics",
                                                  REPO / "scripts" / "book_metrics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_intro_and_part_one_fit_their_word_budgets(html_dir):
    m = metrics()
    pages = m.part_one(html_dir)
    words = {p.stem: m.prose_words(p) for p in pages}
    assert words[pages[0].stem] <= m.INTRO_BUDGET, words
    assert sum(words.values()) <= m.PART_ONE_BUDGET, words


def test_intro_table_cells_are_short(html_dir):
    m = metrics()
    longest, text = m.table_cells(m.part_one(html_dir)[0])[0]
    assert longest <= m.CELL_BUDGET, text
